"""A write-back pool in the fleet's replay (issue 21, item 4): the blocks a node lets go are
written to the pool the fleet shares, which serves what a node's own tiers lack. Held to a
replay by hand (OrderedDicts, no code of the package's) on random conversation-like traces,
and through the fleet and its command."""
import json
from collections import OrderedDict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath.cli.main import main
from kvmath.fleet.nodes import NodeBlocks, node_requests
from kvmath.fleet.pool import node_exits, pool_write_back
from kvmath.fleet.run import fleet
from kvmath.tables.rows import nodes, pools, resolve_model
from kvmath.traces import readers as T
from kvmath.traces import replay as C


def _by_hand(trace, where, caps, n_nodes, pool_cap, through=False):
    """(each request's own node hit, its node's and the pool's leading blocks, blocks written
    to the pool): every node's tiers an LRU each. Written back, HBM takes every block tail
    first, head last and an eviction goes to the tier below unless it holds it; written
    through, every block new to HBM is also offered to every lower tier at once, and an
    eviction goes nowhere. A block leaves the node for the pool when it is evicted from the
    last tier (written back: from any tier whose eviction finds no tier below) and no tier of
    the node still holds a copy; the pool takes it after the request's read of it."""
    tiers = [[OrderedDict() for _ in caps] for _ in range(n_nodes)]
    pool, written = OrderedDict(), 0
    off = np.concatenate([[0], np.cumsum(trace.n_blocks)])
    node_hit, hits = [], []

    def held(t, b):
        return any(b in tier for tier in t)

    for g in range(trace.n_requests):
        t = tiers[where[g]]
        blocks = [int(x) for x in trace.hashes[off[g]:off[g + 1]]]
        found = []
        for b in blocks:
            k = next((k for k in range(len(caps)) if b in t[k]), None)
            if k is None:
                break
            found.append((k, b))
        for k, b in found:
            if k > 0:  # an HBM hit is refreshed as the request's blocks are written
                t[k].move_to_end(b)
        h = len(found)
        node_hit.append(h)
        while h < len(blocks) and blocks[h] in pool:
            pool.move_to_end(blocks[h])
            h += 1
        hits.append(h)
        leaving = []

        def offer(k, ob):
            """ob offered to tier k (written back: down the chain; through: this tier only)."""
            while True:
                if k == len(caps):
                    if not held(t, ob):
                        leaving.append(ob)
                    return
                if ob in t[k]:
                    t[k].move_to_end(ob)
                    return
                t[k][ob] = True
                if len(t[k]) <= caps[k]:
                    return
                ob, _ = t[k].popitem(last=False)
                if through:
                    if k == len(caps) - 1 and not held(t, ob):
                        leaving.append(ob)
                    return
                k += 1

        for b in reversed(blocks):
            if b in t[0]:
                t[0].move_to_end(b)
                continue
            t[0][b] = True
            if through:
                for k in range(1, len(caps)):
                    offer(k, b)
            while len(t[0]) > caps[0]:
                ob, _ = t[0].popitem(last=False)
                if not through:
                    offer(1, ob)
                elif len(caps) == 1 and not held(t, ob):
                    leaving.append(ob)
        for b in leaving:
            if b in pool:
                pool.move_to_end(b)
                continue
            pool[b] = True
            written += 1
            if len(pool) > pool_cap:
                pool.popitem(last=False)
    return np.array(node_hit), np.array(hits), written


@st.composite
def conversations(draw):
    """Requests that continue an earlier one's blocks (a prefix of them) or start afresh, each
    routed to a node."""
    n = draw(st.integers(1, 40))
    reqs, where, nxt = [], [], 1
    for i in range(n):
        parent = draw(st.integers(-1, i - 1))
        keep = [] if parent < 0 else reqs[parent][2][:draw(st.integers(0, len(reqs[parent][2])))]
        new = list(range(nxt, nxt + draw(st.integers(0 if keep else 1, 5))))
        nxt += len(new)
        blocks = keep + new
        reqs.append((float(i), len(blocks) * 16, blocks))
        where.append(draw(st.integers(0, 2)))
    return T.from_requests(reqs, block_tokens=16), np.array(where)


@given(conversations(), st.lists(st.integers(1, 6), min_size=1, max_size=3),
       st.integers(0, 12), st.sampled_from(["back", "through"]))
@settings(max_examples=100, deadline=None)
def test_write_back_pool_equals_a_replay_by_hand(tmp_path_factory, case, caps, pool_cap, writes):
    """The pool written back, below nodes whose own tiers are written back or through."""
    trace, where = case
    specs = [C.TierSpec("hbm", float(caps[0]), 1e30, 1e30)] + [
        C.TierSpec(f"t{k}", float(c), 1e30, 1e30, "host-dram") for k, c in enumerate(caps[1:])]
    by_node = NodeBlocks(trace, 3)
    by_node.add(0, trace.n_requests, trace.hashes, where)
    tmp = tmp_path_factory.mktemp("exits")
    paths = [str(tmp / f"{n}.u64") for n in range(3)]
    first = [node_exits(n, node_requests(trace, where, n, by_node), specs, 1.0, writes,
                        paths[n]) for n in range(3)]
    hits, written = pool_write_back(trace, where, first, paths, pool_cap)
    want_node, want_hits, want_written = _by_hand(trace, where, caps, 3, pool_cap,
                                                  through=writes == "through")
    got_node = np.zeros(trace.n_requests, np.int64)
    for n in range(3):
        got_node[where == n] = first[n]["hit_blocks"]
    assert got_node.tolist() == want_node.tolist()
    assert hits.tolist() == want_hits.tolist() and written == want_written
    # returned instead of written to a file (a Dask worker elsewhere): the same blocks
    again = node_exits(0, node_requests(trace, where, 0, by_node), specs, 1.0, writes)
    assert again["exit_hashes"].tobytes() == open(paths[0], "rb").read()


NODE = nodes()["dgx-h100"]
MODEL = resolve_model("llama-3.1-8b")


def test_a_block_a_node_still_holds_is_not_handed_to_the_pool(tmp_path):
    """The review's case: HBM and DRAM of one block each, requests [1], [2], [1], [3]. Block 1,
    reloaded from DRAM into HBM at the third request, is evicted from DRAM while HBM holds it:
    the node has not let it go, so the pool is not written it then."""
    trace = T.from_requests([(0.0, 16, [1]), (1.0, 16, [2]), (2.0, 16, [1]), (3.0, 16, [3])],
                            block_tokens=16)
    where = np.zeros(4, np.int64)
    specs = [C.TierSpec("hbm", 1.0, 1e30, 1e30), C.TierSpec("dram", 1.0, 1e30, 1e30, "host-dram")]
    by_node = NodeBlocks(trace, 1)
    by_node.add(0, 4, trace.hashes, where)
    x = node_exits(0, node_requests(trace, where, 0, by_node), specs, 1.0, "back")
    assert x["hit_blocks"].tolist() == [0, 0, 1, 0]
    # block 1 stays in the node (HBM, then DRAM again); block 2 leaves at the fourth request
    # (it had been handed on at the third, and block 1 with it, before the node's copies counted)
    assert x["exit_hashes"].tolist() == [2] and x["n_exits"].tolist() == [0, 0, 0, 1]


def test_a_write_back_pool_below_tiers_that_never_evict_takes_nothing():
    """On the conversation trace a DGX H100's drives hold every block an 8B model's requests
    make, so written back the pool is never written and serves nothing, where written through
    it serves the returns routed to another node."""
    trace = T.load("conversation")
    back = fleet(trace, MODEL, NODE, 4, "round-robin", pool=pools()["3fs-nvme"],
                 pool_writes="back")
    through = fleet(trace, MODEL, NODE, 4, "round-robin", pool=pools()["3fs-nvme"])
    assert back["pool"]["hits"] == 0 and back["pool"]["write_Bps"] == 0
    assert through["pool"]["hits"] > 0 and back["token_hit_rate"] < through["token_hit_rate"]
    assert back["pool"]["writes"] == "back" and through["pool"]["writes"] == "through"


def test_a_write_back_pool_on_a_local_dask_cluster_equals_in_process():
    """Nodes whose tiers do evict (200 GB of DRAM, no drives): the pool takes their evictions,
    on a local Dask cluster as in process."""
    trace = T.load("conversation")
    kw = dict(pool=pools()["3fs-nvme"], pool_writes="back", host_cache_bytes=200e9,
              disk_cache_bytes=0)
    here = fleet(trace, MODEL, NODE, 4, "kv-aware", **kw)
    there = fleet(trace, MODEL, NODE, 4, "kv-aware", dask="local", **kw)
    assert here == there and 0 < here["pool"]["hits"]
    assert 0 < here["pool"]["write_Bps"] <= here["pool"]["write_bandwidth_Bps"]


def test_fleet_pool_writes_from_the_command_line(capsys):
    code = main(["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--pool",
                 "3fs-nvme", "--pool-writes", "back", "--json", "--dask", "none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["pool"]["writes"] == "back"
