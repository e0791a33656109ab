"""LRU against ARC, S3-FIFO and Belady (kvmath.traces.policies, libCacheSim): libCacheSim's LRU
held to a plain LRU and to kvmath's own stack distances, Belady to a plain MIN and above every
policy, memory that does not grow with the trace, and a sample refused."""
import tracemalloc
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath.traces import policies as P
from kvmath.traces import readers as T
from kvmath.traces import replay as C
from test_traces import build, chains


def stream_trace(ids):
    """A trace of one-block requests whose blocks are ``ids`` in order (an object stream)."""
    ids = np.asarray(ids, dtype=np.uint64)
    n = len(ids)
    return T.Trace(name="stream", timestamp_s=np.arange(n, dtype=float),
                   prompt_tokens=np.full(n, 512, np.int64), output_tokens=np.zeros(n, np.int64),
                   n_blocks=np.ones(n, np.int64), rid=np.arange(n, dtype=np.int64),
                   pos=np.zeros(n, np.int32), hashes=ids, block_tokens=512)


def plain_lru(ids, capacity):
    cache, hits = OrderedDict(), 0
    for x in ids:
        if x in cache:
            hits += 1
            cache.move_to_end(x)
        else:
            cache[x] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def plain_min(ids, capacity):
    """Belady's MIN inserting every miss: on a full cache, evict the block used again farthest
    ahead (never again: farthest of all). Which of several never-used blocks goes changes no hit."""
    cache, hits = set(), 0
    for i, x in enumerate(ids):
        if x in cache:
            hits += 1
            continue
        if len(cache) >= capacity:
            def next_use(b):
                return next((j for j in range(i + 1, len(ids)) if ids[j] == b), len(ids))
            cache.remove(max(cache, key=next_use))
        cache.add(x)
    return hits


streams = st.lists(st.integers(0, 12), min_size=1, max_size=80)


def test_a_small_stream_by_hand():
    # capacity 2: a b a c b a -> hits a (3rd); c evicts b; b evicts a; a misses: LRU 1 hit.
    # MIN keeps a (used again soonest) when c comes, evicting b: hits a, a: 2.
    ids = [1, 2, 1, 3, 2, 1]
    hits = P.object_hits(stream_trace(ids), 2, ("lru", "belady"))
    assert hits == {"lru": 1, "belady": 2} == {"lru": plain_lru(ids, 2),
                                                "belady": plain_min(ids, 2)}
    # a generic trace's hashes use all 64 bits: libCacheSim takes them as unsigned ids
    big = [2 ** 64 - 1, 2 ** 63, 2 ** 64 - 1, 0, 2 ** 63]
    assert P.object_hits(stream_trace(big), 2, ("lru", "belady")) == {"lru": 1, "belady": 2}


@settings(max_examples=80, deadline=None)
@given(streams, st.integers(1, 14))
def test_libcachesim_lru_and_belady_equal_plain_ones(ids, capacity):
    hits = P.object_hits(stream_trace(ids), capacity, ("lru", "belady"))
    assert hits["lru"] == plain_lru(ids, capacity)
    assert hits["belady"] == plain_min(ids, capacity)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=200), st.integers(0, 45))
def test_belady_bounds_every_policy_and_ratios_are_fractions(ids, capacity):
    trace = stream_trace(ids)
    hits = P.object_hits(trace, capacity)
    assert set(hits) == set(P.POLICIES)
    if capacity < P.S3FIFO_MIN_BLOCKS and capacity:
        assert hits["s3fifo"] is None
    for p, h in hits.items():
        if h is not None:
            assert 0 <= h <= len(ids) and h <= hits["belady"], (p, hits)
    # no policy beats an unbounded cache: every access but a block's first
    assert hits["belady"] <= len(ids) - len(set(ids))


def test_s3fifo_runs_from_its_smallest_capacity():
    ids = [5, 5, 5, 6, 5, 7, 7, 5]
    assert P.object_hits(stream_trace(ids), P.S3FIFO_MIN_BLOCKS - 1, ("s3fifo",)) == {
        "s3fifo": None}
    # at 20 blocks the small FIFO holds two: every repeat hits (nothing is evicted)
    assert P.object_hits(stream_trace(ids), P.S3FIFO_MIN_BLOCKS, ("s3fifo",)) == {"s3fifo": 5}


def test_an_empty_cache_hits_nothing_and_bad_capacities_are_refused():
    assert P.object_hits(stream_trace([1, 1, 1]), 0) == dict.fromkeys(P.POLICIES, 0)
    for bad in (-1, 2.5):
        with pytest.raises(P.PolicyError, match="whole number of blocks"):
            P.object_hits(stream_trace([1]), bad)


def test_a_sample_is_refused():
    with pytest.raises(P.PolicyError, match="SHARDS sample"):
        P.object_hits(T.load("synthetic", 0.5), 100)


@settings(max_examples=40, deadline=None)
@given(chains, st.integers(1, 12))
def test_lru_as_kvmath_counts_equal_kvmath_stack_distances(spec, capacity):
    trace = T.from_requests(build(spec))
    d, e = C.stack_distances(trace)
    assert P.lru_as_kvmath(trace, capacity) == (int((d <= capacity).sum()),
                                                int((e <= capacity).sum()))


@pytest.fixture(scope="module")
def conversation():
    trace = T.load("conversation")
    return trace, C.stack_distances(trace)


@pytest.mark.parametrize("capacity", [50, 3000, 12000])
def test_libcachesim_lru_replays_kvmaths_lru_on_the_conversation_trace(conversation, capacity):
    """Fed as kvmath's replay counts (lookups first, then tail first), libCacheSim's LRU finds
    exactly the blocks kvmath's stack distances place within the capacity, and the leading
    ones its LRU curve counts as hits."""
    trace, (d, e) = conversation
    present, leading = P.lru_as_kvmath(trace, capacity)
    assert present == int((d <= capacity).sum())
    assert leading == int((e <= capacity).sum())
    b, _ = C.lru_curve(trace, (d, e)).at([capacity])
    assert leading / len(trace.hashes) == pytest.approx(float(b[0]), abs=1e-15)


def test_compare_on_the_conversation_trace(conversation):
    """The object LRU fed head first is not kvmath's LRU (it evicts a prompt's head before its
    tail), but both count every block access, so they are near; Belady bounds them all."""
    trace, dist = conversation
    rows = P.compare(trace, [3000], distances=dist)
    (row,) = rows
    assert row["accesses"] == len(trace.hashes)
    assert row["kvmath_lru_prefix"] == int((dist[1] <= 3000).sum()) / len(trace.hashes)
    for p in P.POLICIES:
        assert 0 <= row[p] <= row["belady"] <= 1
    # within 1% of the accesses at this capacity (measured: a few hundredths of a percent)
    assert row["lru"] == pytest.approx(row["kvmath_lru_prefix"], abs=0.01)


def test_next_uses():
    nxt = P.next_uses(np.array([7, 8, 7, 7, 9], dtype=np.uint64))
    assert nxt.tolist() == [2, P.NEVER, 3, P.NEVER, P.NEVER]


def _peak(trace, policies):
    tracemalloc.start()
    try:
        P.object_hits(trace, 500, policies)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_trace():
    """LRU, ARC and S3-FIFO hold no access-length array (a slice of the hashes at a time): the
    peak of Python's allocations is the same for a trace four times as long (within 1 MiB,
    for allocator noise); Belady adds its next uses, one int64 per access, and while it makes them
a sort's index and a temporary (three int64 per access, and a bool)."""
    rng = np.random.default_rng(0)
    short = stream_trace(rng.integers(0, 5000, 100_000))
    long = stream_trace(rng.integers(0, 5000, 400_000))
    online = ("lru", "arc", "s3fifo")
    P.object_hits(short, 500)  # imports and first allocations, outside the measured peaks
    assert abs(_peak(long, online) - _peak(short, online)) < 1 << 20
    assert _peak(long, ("belady",)) < _peak(long, online) + (3 * 8 + 1) * 400_000


# ------------------------------------------------------------------ kvmath trace --policies
def test_trace_policies_json(capsys):
    from kvmath.cli.main import main
    import json
    assert main(["trace", "synthetic", "--model", "llama-3.1-8b", "--policies", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    r = json.loads(out)
    p = r["policies"]
    assert p["simulator"] == "libCacheSim 0.3.5"
    assert [x["tiers"][-1] for x in p["rows"]] == [t["tier"] for t in r["tiers"]]
    blocks = [x["capacity_blocks"] for x in p["rows"]]
    assert blocks == sorted(blocks) and blocks[0] > 0
    curve = C.lru_curve(T.load("synthetic"))
    for x in p["rows"]:
        for k in P.POLICIES:
            assert 0 <= x[k] <= x["belady"] <= r["max_block_hit_rate"] + 1e-12
        # kvmath's LRU column is its LRU curve at the capacity (the same curve trace prints)
        assert x["kvmath_lru_prefix"] == pytest.approx(float(curve.at([x["capacity_blocks"]])[0][0]),
                                                       abs=1e-15)


def test_trace_policies_human_and_no_s3fifo_below_its_smallest_cache():
    from kvmath.cli.trace import _policies_human
    row = {"tiers": ["hbm"], "capacity_bytes": 1e9, "capacity_blocks": 10, "accesses": 5,
           "lru": 0.1,
           "arc": 0.2, "s3fifo": None, "belady": 0.3, "kvmath_lru_prefix": 0.1}
    lines = _policies_human({"simulator": "libCacheSim 0.3.5", "fed": P.FED,
                             "s3fifo_min_blocks": P.S3FIFO_MIN_BLOCKS, "rows": [row]})
    assert "S3-FIFO" in lines[1] and "n/a" in lines[2] and "30.0%" in lines[2]
    assert lines[-1].startswith("S3-FIFO n/a: below 20 blocks")


@pytest.mark.parametrize("toml", [None, "policies = true\nsample_rate = 0.5\n"])
def test_trace_policies_refuse_a_sample(capsys, tmp_path, toml):
    from kvmath.cli.main import main
    argv = ["trace", "synthetic", "--model", "llama-3.1-8b"]
    if toml is None:
        argv += ["--policies", "--sample-rate", "0.5"]
    else:
        (tmp_path / "s.toml").write_text(toml)
        argv += ["--scenario", str(tmp_path / "s.toml")]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "--sample-rate" in err and "--policies" in err and "Traceback" not in err


def test_policies_false_in_a_scenario_leaves_a_sample_alone(capsys, tmp_path):
    from kvmath.cli.main import main
    (tmp_path / "s.toml").write_text("policies = false\nsample_rate = 0.5\n")
    assert main(["trace", "synthetic", "--model", "llama-3.1-8b", "--json",
                 "--scenario", str(tmp_path / "s.toml")]) == 0
    assert "policies" not in capsys.readouterr().out


def test_a_trace_without_blocks_has_no_ratio(capsys, tmp_path):
    from kvmath.cli.main import main
    import json
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": i, "input_length": 10, "output_length": 5,
                                        "hash_ids": []}) + "\n" for i in range(2)))
    trace = T.load(str(path))
    (row,) = P.compare(trace, [100])
    assert row["accesses"] == 0 and all(row[p] is None for p in P.POLICIES)
    assert main(["trace", str(path), "--model", "llama-3.1-8b", "--policies"]) == 0
    out = capsys.readouterr().out
    assert "n/a: no prompt fills a block" in out and "0.0%" not in out.split("by policy")[1]
