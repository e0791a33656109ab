"""Traces: reading and its errors, stack distances against a brute-force LRU, SHARDS, replay."""
import csv
import gzip
import json
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath.traces import replay as C
from kvmath.traces import readers as T
from kvmath.cli.main import main
from kvmath.tables.rows import data_path

# r0 [1,2], r1 [1,3], r2 [1,2,4]; blocks of 512 tokens, last blocks partial where stated
TINY = [(0.0, 1024, [1, 2]), (1.0, 1000, [1, 3]), (2.0, 1500, [1, 2, 4])]


def brute_lru(requests, capacity):
    """(block hits, hit tokens) of an LRU prefix cache: look up, then insert tail first."""
    cache, hits, tokens = OrderedDict(), 0, 0
    for _, prompt, blocks in requests:
        m = 0
        while m < len(blocks) and blocks[m] in cache:
            m += 1
        hits += m
        tokens += sum(min(512, prompt - 512 * j) for j in range(m))
        for b in reversed(blocks):
            cache[b] = True
            cache.move_to_end(b)
            while len(cache) > capacity:
                cache.popitem(last=False)
    return hits, tokens


def test_tiny_stack_distances_by_hand():
    # r1: block 1 was the last block used (r0 inserts head last): D = 1. r2: block 2 was used
    # in r0, then blocks 1 (r0), 3 and 1 (r1): distinct {2, 1, 3}, D = 3
    d, e = C.stack_distances(T.from_requests(TINY))
    inf = np.inf
    assert d.tolist() == [inf, inf, 1, inf, 1, 3, inf]
    assert e.tolist() == [inf, inf, 1, inf, 1, 3, inf]


def test_tiny_hit_rates_by_hand():
    curve = C.lru_curve(T.from_requests(TINY))
    total_tokens = 1024 + 1000 + 1500
    b, t = curve.at([1, 2, 3, 100])
    assert b.tolist() == [2 / 7, 2 / 7, 3 / 7, 3 / 7]
    assert t.tolist() == [1024 / total_tokens] * 2 + [1536 / total_tokens] * 2
    assert curve.max_block_hit_rate == 3 / 7


def test_tiny_reuse_classes():
    s = T.reuse_stats(T.from_requests(TINY))
    assert s["max_block_hit_rate"] == 3 / 7
    # r2 ends its hit at block 2, r0's last full block with no other successor: continuation;
    # r1 ends at block 1, which r1 itself is the first to end on: shared prefix
    assert s["requests_continuation"] == 1 / 3 and s["requests_shared_prefix"] == 1 / 3
    assert s["pauses"].tolist() == [2.0]


chains = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 4), st.integers(0, 511)),
                  min_size=1, max_size=25)


def build(spec):
    """Requests that extend a random earlier request's prefix (hashes name whole prefixes)."""
    reqs, prefixes, nid = [], [[]], 0
    for i, (pick, new, partial) in enumerate(spec):
        base = prefixes[pick % len(prefixes)]
        blocks = base[: pick % (len(base) + 1)] + list(range(nid, nid + new))
        nid += new
        prefixes.append(blocks)
        reqs.append((float(i), 512 * (len(blocks) - 1) + 1 + partial, blocks))
    return reqs


@settings(max_examples=60, deadline=None)
@given(chains)
def test_curve_equals_brute_force_lru_and_is_monotone(spec):
    reqs = build(spec)
    curve = C.lru_curve(T.from_requests(reqs))
    caps = np.arange(1, 30)
    b, t = curve.at(caps)
    total_blocks = sum(len(r[2]) for r in reqs)
    total_tokens = sum(r[1] for r in reqs)
    for c, hb, ht in zip(caps, b, t):
        hits, tokens = brute_lru(reqs, c)
        assert hb == pytest.approx(hits / total_blocks, abs=1e-12)
        assert ht == pytest.approx(tokens / total_tokens, abs=1e-12)
    assert np.all(np.diff(b) >= 0) and np.all(np.diff(t) >= 0)
    assert np.all((b >= 0) & (b <= 1)) and np.all((t >= 0) & (t <= 1))


def brute_weighted_distances(reqs, weight):
    """Stack distances by definition: for each access, the weight of the distinct blocks used
    after its block's last use and before its request, plus its own weight (inf: first use)."""
    seq = [(r, b) for r, (_, _, blocks) in enumerate(reqs) for b in reversed(blocks)]
    out = {}
    for q, (r, b) in enumerate(seq):
        start = next(i for i, (rr, _) in enumerate(seq) if rr == r)
        prev = [i for i in range(start) if seq[i][1] == b]
        if not prev:
            out[(r, b)] = np.inf
            continue
        between = {bb for _, bb in seq[prev[-1] + 1:start]}
        out[(r, b)] = sum(weight(bb) for bb in between) + weight(b)
    return out


@settings(max_examples=40, deadline=None)
@given(chains, st.integers(0, 3), st.sampled_from([0.25, 0.5, 1.0]))
def test_weighted_distances_by_definition(spec, full_positions, rate):
    # the compiled Fenwick kernel against the definition, with a block's weight fixed by its
    # stratum (position below full_positions: 1, else 1 / rate), as a SHARDS sample has it
    reqs = build(spec)
    tr = T.from_requests(reqs)
    pos_of = {b: j for _, _, blocks in reqs for j, b in enumerate(blocks)}
    tr.sample_rate, tr.full_positions = rate, full_positions
    if rate >= 1:
        tr.full_positions = 0
    d, e = C.stack_distances(tr)
    w = (lambda b: 1.0) if rate >= 1 else (
        lambda b: 1.0 if pos_of[b] < full_positions else 1.0 / rate)
    want = brute_weighted_distances(reqs, w)
    got = {(int(r), int(h)): x for r, h, x in zip(tr.rid, tr.hashes, d)}
    assert set(got) == set(want)
    for k, x in want.items():
        assert got[k] == pytest.approx(x, rel=1e-12) or (x == got[k] == np.inf)
    # prefix distance: the running maximum head first within each request
    for r in range(tr.n_requests):
        sel = tr.rid == r
        assert np.array_equal(e[sel], np.maximum.accumulate(d[sel]))


def test_a_hash_repeated_at_another_position_keeps_its_strata_apart():
    # a trace may repeat a hash at another position in another request (the reader checks
    # only within a request): the old mark leaves the tree of its own stratum (the review found
    # it left the current access's, so a block moving stratum counted wrongly)
    tr = T.from_requests([(0, 32, [2, 1]), (1, 32, [4, 3]), (2, 32, [5, 4]), (3, 32, [2, 1])], 16)
    s = replace(tr, sample_rate=0.5, full_positions=1)
    d, _ = C.stack_distances(s)
    # sequence (tail first): 1 2 | 3 4 | 4 5 | 1 2, weights 2 1 | 2 1 | 2 1 | 2 1 (position 0
    # weighs 1, position 1 weighs 2; block 4 moves from position 0 to 1). r3's block 1: the
    # last uses of 2 (1), 3 (2), 4 (r2, 2) and 5 (1) since its use, plus its own 2; block 2:
    # 3, 4 and 5, plus its own 1
    assert d[-1] == 1 + 2 + 2 + 1 + 2
    assert d[-2] == 2 + 2 + 1 + 1


def test_distances_do_not_depend_on_the_accesses_storage_order():
    # a Trace whose accesses are not grouped head first (another reader's order) takes the
    # sorted path; the distances follow each access
    reqs = build([(i * 7 % 13, 1 + i % 3, i * 31 % 512) for i in range(30)])
    tr = T.from_requests(reqs)
    d, e = C.stack_distances(tr)
    perm = np.random.default_rng(0).permutation(len(tr.hashes))
    shuffled = replace(tr, rid=tr.rid[perm], pos=tr.pos[perm], hashes=tr.hashes[perm])
    d2, e2 = C.stack_distances(shuffled)
    assert np.array_equal(d2, d[perm]) and np.array_equal(e2, e[perm])


@pytest.fixture(scope="module")
def conversation():
    return T.load("conversation")


def test_bundled_conversation(conversation):
    assert conversation.n_requests == 12031 and len(conversation.hashes) == 288500
    assert conversation.block_tokens == 512


def test_shards_sample_matches_sql_and_exact_curve(conversation):
    exact = C.lru_curve(conversation)
    sampled = T.load("conversation", sample_rate=0.1)
    in_numpy = T.sample(conversation, 0.1)
    assert np.array_equal(sampled.hashes, in_numpy.hashes)
    assert np.array_equal(sampled.rid, in_numpy.rid)
    # SHARDS error falls as 1/sqrt(sampled accesses); about 28,000 here give ~0.003 measured,
    # so 0.01 leaves room without hiding a bias
    err_blocks, err_tokens = C.curve_error(C.lru_curve(sampled), exact)
    assert err_blocks < 0.01 and err_tokens < 0.01


def test_stratified_sample_keeping_every_block_is_exact(conversation):
    # every position in the rate-1 stratum: all weights 1, so the weighted distances and
    # curve must equal the exact ones (tests the weighted path, not the sampling)
    whole = T.sample(conversation, 0.01, full_positions=10 ** 6)
    assert len(whole.hashes) == len(conversation.hashes)
    d_w, e_w = C.stack_distances(whole)
    d, e = C.stack_distances(conversation)
    assert np.array_equal(d_w, d) and np.array_equal(e_w, e)
    assert C.curve_error(C.lru_curve(whole), C.lru_curve(conversation)) == (0.0, 0.0)


def test_stratified_sample_keeps_first_blocks(conversation):
    s = T.sample(conversation, 0.01)
    assert np.array_equal(np.unique(s.rid[s.pos == 0]), np.flatnonzero(conversation.n_blocks))
    w = s.weights()
    assert set(np.unique(w)) <= {1.0, 1 / s.sample_rate}
    # Horvitz-Thompson: the weighted sample stands for about as many accesses as the trace
    # (the hash-sampled stratum holds ~2,700 accesses: 3 s.d. = 6% of it)
    assert w.sum() == pytest.approx(len(conversation.hashes), rel=0.06)


def test_fitted_pauses_file_is_current():
    with open(data_path("traces/pauses_fitted.csv"), newline="") as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh)}
    with open(data_path("pauses.csv"), newline="") as fh:
        bundled = {r["name"]: r for r in csv.DictReader(fh)}
    for name in T.BUNDLED:
        assert rows[f"{name}-fitted"] == T.fit_pauses(name), "run scripts/fit_pauses.py"
        assert bundled[f"{name}-fitted"] == rows[f"{name}-fitted"], "run scripts/fit_pauses.py"


def test_default_pause_is_the_measured_one():
    from kvmath.scenario.options import DEFAULT_PAUSE
    from kvmath.tables.rows import pauses
    assert DEFAULT_PAUSE == "conversation-fitted"
    assert pauses()[DEFAULT_PAUSE].kind == "measurement"
    assert pauses()["chat-lognormal"].kind == "assumption"


def test_lognormal_fit_recovers_parameters():
    x = np.exp(np.random.default_rng(0).normal(np.log(30), 1.0, 20000))
    fit = T.fit_lognormal(x)
    # standard errors: sigma/sqrt(n) = 0.007 on log median, sigma/sqrt(2n) = 0.005 on sigma
    assert fit["median_s"] == pytest.approx(30, rel=0.03)
    assert fit["sigma"] == pytest.approx(1.0, abs=0.02)


# ------------------------------------------------------------------ replay
def test_replay_tiers_by_hand():
    # HBM holds one block, DRAM ten: r1 finds block 1 in HBM; r2 finds 1 in HBM and 2 in DRAM
    specs = [C.TierSpec("hbm", 1, 1e9, 1e9), C.TierSpec("host-dram", 10, 1e9, 1e9, "host-dram")]
    r = C.replay(T.from_requests(TINY), specs, block_bytes=1)
    assert [t["hits"] for t in r["tiers"]] == [2, 1]
    assert r["block_hit_rate"] == 3 / 7
    # DRAM writes: evictions from HBM, each block once (2 in r0; 3 and 1 again? no: 1 stays
    # in DRAM once written) -> blocks 2, 3, 1 (r1), 4, 2 is already there
    assert r["tiers"][1]["writes"] == len({2, 3, 1, 4})


def test_replay_drops_writes_beyond_bandwidth():
    specs = [C.TierSpec("hbm", 1, 1e9, 1e9), C.TierSpec("host-dram", 10, 1e9, 0.5, "host-dram")]
    r = C.replay(T.from_requests(TINY), specs, block_bytes=1)
    assert r["tiers"][1]["writes"] == 0 and r["tiers"][1]["writes_dropped"] > 0
    assert r["tiers"][1]["hits"] == 0


def test_replay_selective_filters_drive_writes():
    specs = [C.TierSpec("hbm", 1, 1e9, 1e9),
             C.TierSpec("nvme", 10, 1e9, 1e9, "nvme", drive_bytes=10)]
    r = C.replay(T.from_requests(TINY), specs, block_bytes=1, policy="selective", min_uses=2)
    # HBM evictions in order: 2 (used once: filtered), 1 (twice: written), 3 (filtered),
    # 1 (already on NVMe), 4 (filtered), 2 (now used twice: written)
    assert r["tiers"][1]["writes_filtered"] == 3 and r["tiers"][1]["writes"] == 2


# ------------------------------------------------------------------ command line
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_trace_takes_the_node_file_tiers_and_reuse_take(capsys, node_file):
    """issue 19: `trace --node FILE` said "unknown node" for the CSV row tiers and reuse accept;
    a node with half the drives holds half the NVMe bytes in the replay."""
    path = node_file()  # dgx-h100 with four of its eight drives
    nvme = {}
    for node in ("dgx-h100", str(path)):
        code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b", "--node",
                             node, "--json")
        assert code == 0 and err == ""
        nvme[node] = next(t for t in json.loads(out)["tiers"] if t["tier"] == "nvme")
    assert nvme[str(path)]["capacity_bytes"] == pytest.approx(nvme["dgx-h100"]["capacity_bytes"] / 2)


def test_cli_json(capsys):
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert r["requests"] == 3993
    for key in ("prompt_tokens", "max_token_hit_rate", "max_block_hit_rate", "lru_curve", "tiers",
                "gpu_seconds_saved_per_s", "feasible"):
        assert key in r
    assert {"capacity_tokens", "block_hit_rate", "token_hit_rate"} <= set(r["lru_curve"][0])
    nvme = next(t for t in r["tiers"] if t["tier"] == "nvme")
    assert "drive_writes_per_day" in nvme
    for t in r["tiers"]:
        assert {"capacity_bytes", "hit_rate", "read_Bps_mean", "read_Bps_p99", "write_Bps_mean",
                "write_Bps_p99"} <= set(t)
    assert 0 <= r["token_hit_rate"] <= r["max_token_hit_rate"] + 1e-12


def write_lines(path, lines, gz=False):
    text = "".join(line + "\n" for line in lines)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return str(path)


GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}'


@pytest.mark.parametrize("lines, expected", [
    ([GOOD, '{"timestamp": 5, "input_length": 600 "output_length": 5}'],
     "line 2: malformed JSON"),
    ([GOOD, '{"timestamp": 5, "input_length": 600, "hash_ids": [1, 2]}'],
     "line 2, field 'output_length': missing field"),
    ([GOOD, '{"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}',
      '{"timestamp": 4, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}'],
     "line 3, field 'timestamp': timestamp goes backwards"),
    ([GOOD, '{"timestamp": 5, "input_length": 1200, "output_length": 5, "hash_ids": [1]}'],
     "line 2, field 'hash_ids': expected 3 (or 2) block hashes"),
    ([GOOD, '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [1, -2]}'],
     "line 2, field 'hash_ids': expected a list of non-negative 64-bit integer hashes"),
    ([GOOD, '{"timestamp": 5, "input_length": "x", "output_length": 5, "hash_ids": [1, 2]}'],
     "line 2, field 'input_length': expected a non-negative integer"),
    ([GOOD, '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [1, 1]}'],
     "line 2, field 'hash_ids': expected distinct hashes"),
    ([], "empty trace"),
    (['{"time": 1}'], "line 1: unknown format"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_bad_input_one_line_exit_2(capsys, tmp_path, lines, expected, gz):
    path = write_lines(tmp_path / ("t.jsonl.gz" if gz else "t.jsonl"), lines, gz)
    code, out, err = run(capsys, "trace", path, "--model", "llama-3.1-8b")
    assert code == 2 and out == ""
    assert err.startswith(f"kvmath: error: {path}") and expected in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_generic_jsonl_and_parquet(tmp_path):
    import duckdb
    rows = [{"timestamp_s": t, "prompt_tokens": p, "block_hashes": h, "block_tokens": 512}
            for t, p, h in TINY]
    path = write_lines(tmp_path / "g.jsonl", [json.dumps(r) for r in rows])
    tr = T.load(path)
    assert tr.hashes.tolist() == [1, 2, 1, 3, 1, 2, 4] and tr.prompt_tokens.tolist() == [1024, 1000, 1500]
    pq = str(tmp_path / "g.parquet")
    duckdb.sql(f"COPY (SELECT * FROM read_json('{path}')) TO '{pq}' (FORMAT parquet)")
    tp = T.load(pq)
    assert tp.hashes.tolist() == tr.hashes.tolist() and tp.timestamp_s.tolist() == [0, 1, 2]


def test_generic_parquet_bad_row(tmp_path):
    import duckdb
    pq = str(tmp_path / "bad.parquet")
    duckdb.sql(f"COPY (SELECT 1.0 AS timestamp_s, 1200 AS prompt_tokens, [1]::UBIGINT[] AS "
               f"block_hashes, 512 AS block_tokens) TO '{pq}' (FORMAT parquet)")
    with pytest.raises(T.TraceError, match="row 1, field .block_hashes.: expected 3 .or 2. block"):
        T.load(pq)


def test_a_trace_whose_prompts_fill_no_block_says_so(capsys, tmp_path):
    """issue 20: prompts all shorter than a block printed "nan% of blocks" after a numpy
    RuntimeWarning, and exited 0; no share of no blocks is printed now, and nothing on stderr."""
    import warnings
    path = tmp_path / "short.jsonl"
    path.write_text("".join(json.dumps({"timestamp_s": float(i), "prompt_tokens": 100,
                                        "block_hashes": [], "block_tokens": 512}) + "\n"
                            for i in range(20)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run(capsys, "trace", str(path), "--model", "llama-3.1-8b")
    assert code == 0 and err == "" and "no prompt fills a block" in out and "nan" not in out


@pytest.mark.parametrize("record, field, words", [
    ({"timestamp": "100"}, "timestamp", "expected a non-negative number"),
    ({"input_length": 1024.5}, "input_length", "expected a non-negative integer"),
    ({"hash_ids": [True, 2]}, "hash_ids", "64-bit integer hashes"),
    ({"hash_ids": ["1", "2"]}, "hash_ids", "64-bit integer hashes"),
    ({"priority": 1}, "priority", "unknown field"),
])
def test_trace_fields_are_strict(capsys, tmp_path, record, field, words):
    """issue 20: string timestamps, a fractional input_length and boolean hashes were coerced
    by the reader, and a field no format names was ignored; each is now the line and field."""
    good = {"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}
    lines = [json.dumps({**good, "timestamp": 10 * i, "hash_ids": [2 * i + 1, 2 * i + 2]})
             for i in range(4)]
    lines[2] = json.dumps({**good, "timestamp": 20, "hash_ids": [11, 12], **record})
    path = write_lines(tmp_path / "t.jsonl", lines)
    code, out, err = run(capsys, "trace", path, "--model", "llama-3.1-8b")
    assert code == 2 and f"line 3, field '{field}'" in err and words in err, err


def test_parquet_reads_output_tokens_and_refuses_other_columns(tmp_path):
    """issue 20: Parquet traces dropped output_tokens without a word, and cast or ignored
    other columns."""
    import duckdb
    pq = str(tmp_path / "g.parquet")
    duckdb.sql(f"COPY (SELECT 1.0 AS timestamp_s, 1024 AS prompt_tokens, [1, 2]::UBIGINT[] AS "
               f"block_hashes, 512 AS block_tokens, 77 AS output_tokens) TO '{pq}' "
               "(FORMAT parquet)")
    assert T.load(pq).output_tokens.tolist() == [77]
    for extra, words in (("'x' AS priority", "field 'priority': unknown column"),
                         ("'1.0' AS timestamp_s", "field 'timestamp_s': expected a column")):
        bad = str(tmp_path / "bad.parquet")
        cols = "1024 AS prompt_tokens, [1, 2]::UBIGINT[] AS block_hashes, 512 AS block_tokens"
        if "timestamp" not in extra:
            cols = "1.0 AS timestamp_s, " + cols
        duckdb.sql(f"COPY (SELECT {cols}, {extra}) TO '{bad}' (FORMAT parquet)")
        with pytest.raises(T.TraceError, match=words):
            T.load(bad)


def test_compressed_input_is_checked_as_it_is_read(capsys, tmp_path):
    """issue 20: a truncated gzip trace gave an EOFError traceback and trailing bytes a
    BadGzipFile misreported as an output error; each is one line saying how far the data got.
    Concatenated gzip members are valid and read on."""
    data = T.resolve_path("conversation").read_bytes()
    cases = {"trunc.jsonl.gz": (data[:400_000], "truncated gzip file"),
             "pad.jsonl.gz": (data + b"garbage\n", "bytes after the gzip data"),
             "tiny.jsonl.gz": (data[:5], "truncated gzip file")}
    for name, (blob, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(blob)
        code, out, err = run(capsys, "trace", str(path), "--model", "llama-3.1-8b")
        assert code == 2 and words in err and err.count("\n") == 1 and str(path) in err, err
    two = tmp_path / "two.jsonl.gz"
    two.write_bytes(data + data)
    T.check_lines(two)  # two members: whole
