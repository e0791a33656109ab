"""The compiled replay, routers, previous turns, pool LRU and queue (issue 21 item 5) give exactly
the results of the pure-Python ones they replaced (tests/replay_oracle.py): every field equal,
floats bit for bit, on the bundled traces and on small random ones."""
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replay_oracle as O
from kvmath.fleet import nodes as F
from kvmath.tables.rows import nodes, pools, resolve_model
from kvmath.traces import readers as T
from kvmath.traces import replay as C

NODE = nodes()["dgx-h100"]
MODEL = resolve_model("llama-3.1-70b")


def same(a, b, path="result"):
    """a == b all the way down, arrays by value, floats bit for bit."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype.kind == np.asarray(b).dtype.kind and np.array_equal(a, b), path
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), (path, a, b)


@pytest.fixture(scope="module")
def setups():
    out = {}
    for name in ("synthetic", "conversation"):
        trace = T.load(name)
        specs, block_bytes, cost, _, _ = F.node_setup(trace, MODEL, NODE)
        out[name] = trace, specs, block_bytes, cost
    return out


def _tiers(specs, scale=1.0, write_scale=1.0):
    return [replace(s, capacity_bytes=s.capacity_bytes * scale,
                    write_Bps=s.write_Bps * write_scale) for s in specs]


# (trace, capacity scale, write-bandwidth scale, write mode, policy and its options)
CASES = [
    ("conversation", 1.0, 1.0, "back", "lru", {}),
    ("conversation", 1.0, 1.0, "through", "lru", {}),
    ("conversation", 0.02, 1.0, "back", "ttl", {"ttl_s": 60.0}),
    ("conversation", 0.02, 1.0, "through", "selective", {"min_uses": 2}),
    ("synthetic", 1.0, 1.0, "back", "selective", {"min_uses": 3}),
    ("synthetic", 1.0, 1.0, "through", "ttl", {"ttl_s": 5.0}),
    ("synthetic", 0.02, 1e-3, "back", "lru", {}),  # every tier drops writes
    ("synthetic", 0.02, 1e-3, "through", "lru", {}),
]


@pytest.mark.parametrize("name,scale,wscale,writes,policy,kw", CASES)
def test_the_compiled_replay_is_the_python_one(setups, name, scale, wscale, writes, policy, kw):
    trace, specs, block_bytes, cost = setups[name]
    specs = _tiers(specs, scale, wscale)
    cost = C.HitCost(cost.model, cost.gpu, specs, cost.tp, cost.gpus, engine=cost.engine)
    got = C.replay(trace, specs, block_bytes, policy=policy, cost=cost, service=True,
                   writes=writes, **kw)
    want = O.replay(trace, specs, block_bytes, policy=policy, cost=O.PythonPrice(cost),
                    service=True, writes=writes, **kw)
    same(got, want)
    if wscale < 1:
        assert all(t["writes_dropped"] > 0 for t in got["tiers"])


@pytest.mark.parametrize("writes", ["back", "through"])
def test_the_compiled_replay_with_a_shared_pool_is_the_python_one(setups, writes):
    from kvmath.fleet.pool import pool_setup
    trace, specs, block_bytes, cost = setups["synthetic"]
    spec, hits, _ = pool_setup(trace, MODEL, NODE, 4, pools()["3fs-nvme"], cost.tp, block_bytes)
    specs = _tiers(specs, 0.05)
    cost = C.HitCost(cost.model, cost.gpu, [*specs, spec], cost.tp, cost.gpus)
    got = C.replay(trace, specs, block_bytes, cost=cost, service=True, shared=(spec, hits),
                   writes=writes)
    want = O.replay(trace, specs, block_bytes, cost=O.PythonPrice(cost), service=True,
                    shared=(spec, hits), writes=writes)
    same(got, want)
    assert got["tiers"][-1]["hits"] > 0


@pytest.mark.parametrize("capacity", [0, 1, 50, 2000, 10 ** 9])
def test_the_pools_lru_is_the_stack_distances(setups, capacity):
    """The pool's hits by simulation (memory bounded by its capacity) are the blocks whose
    prefix distance is within its capacity (Mattson), as computed before."""
    for name in ("synthetic", "conversation"):
        trace = setups[name][0]
        hits, written = C.shared_prefix_hits(trace, capacity)
        want_hits, want_written = O.shared_prefix_hits(trace, capacity)
        assert np.array_equal(hits, want_hits) and written == want_written


def _random_trace(seed, requests=60, universe=40):
    """Requests of chained prefixes over a few conversations, some resumed, some shared."""
    rng = np.random.default_rng(seed)
    reqs, t, heads = [], 0.0, []
    for _ in range(requests):
        t += float(rng.exponential(3.0))
        if heads and rng.random() < 0.6:
            base = list(heads[rng.integers(len(heads))])
        else:
            base = [int(rng.integers(universe))]
        base = base + [int(x) + 1000 * len(base) for x in rng.integers(universe, size=rng.integers(0, 4))]
        base = list(dict.fromkeys(base))
        heads.append(base)
        reqs.append((t, 512 * len(base) - int(rng.integers(0, 2)) * 100, base))
    return T.from_requests(reqs)


def _small_tiers(caps, wbps):
    names = ["hbm", "host-dram", "nvme"]
    return [C.TierSpec(names[k], c, 1e12, w, None if k == 0 else "host-dram",
                       drive_bytes=1.0 if k == 2 and c else None) for k, (c, w) in
            enumerate(zip(caps, wbps))]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10 ** 6), caps=st.lists(st.integers(0, 12), min_size=1, max_size=3),
       wbps=st.sampled_from([10 ** 9, 3, 1]), writes=st.sampled_from(["back", "through"]),
       policy=st.sampled_from(["lru", "ttl", "selective"]), ttl=st.sampled_from([1.0, 10.0]))
def test_random_small_replays_are_the_python_ones(seed, caps, wbps, writes, policy, ttl):
    """Tiny tiers (capacities of 0 to 12 blocks, write bandwidths of 1 to 3 blocks a second)
    put every eviction, cascade, drop, filter and expiry path through both replays."""
    trace = _random_trace(seed)
    tiers = _small_tiers(caps, [wbps] * len(caps))
    kw = {"ttl_s": ttl} if policy == "ttl" else {}
    same(C.replay(trace, tiers, 1, policy=policy, writes=writes, **kw),
         O.replay(trace, tiers, 1, policy=policy, writes=writes, **kw))


def test_the_store_is_an_ordered_dict_per_list():
    """The keyed store under the kernels: insert, refresh, delete and pop the least recent,
    over two lists sharing keys, against OrderedDicts; grown from its smallest size."""
    from numba import njit

    from kvmath.traces.simulate import store as K

    @njit
    def op(S, kind, key, lst):
        if kind == 0:
            e = K.find(S, key, lst)
            if e < 0:
                e = K.add(S, key, lst)
                K.link_tail(S, e)
            else:
                K.touch(S, e)
            return np.int64(0)
        if kind == 1:
            e = K.find(S, key, lst)
            if e >= 0:
                K.unlink(S, e)
                K.remove(S, e)
            return np.int64(e >= 0)
        if S[K.CNT][lst] > 0:
            e = K.pop_head(S, lst)
            k = S[K.KEY][e]
            K.remove(S, e)
            return np.int64(k)
        return np.int64(-1)

    rng = np.random.default_rng(1)
    store, ref = K.Store(1, 2), [OrderedDict(), OrderedDict()]
    for _ in range(20_000):
        kind, key, lst = int(rng.choice(3, p=[.6, .2, .2])), int(rng.integers(0, 300)), \
            int(rng.integers(0, 2))
        store.ensure(1)
        got = op(store.S, kind, np.uint64(key), lst)
        d = ref[lst]
        if kind == 0:
            d[key] = True
            d.move_to_end(key)
        elif kind == 1:
            assert got == (key in d)
            d.pop(key, None)
        else:
            assert got == (d.popitem(last=False)[0] if d else -1)
        assert store.count(lst) == len(d)
    assert store.size > 64  # it grew


@pytest.mark.parametrize("name", ["synthetic", "conversation"])
def test_the_compiled_previous_turns_are_the_python_ones(setups, name):
    trace = setups[name][0]
    assert np.array_equal(T.continuations(trace), O.continuations(trace))
