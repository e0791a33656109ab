"""A pool below every node's tiers, shared by the fleet: its tier as each node reads it
(:func:`pool_spec`), its hits and writes, and its price (:func:`pool_cost`).

Written through (the default), every request's new blocks are written to it, so its contents
are an LRU over the whole trace, and each request's leading blocks in it come from the whole
trace's stack distances (:func:`kvmath.traces.replay.shared_prefix_hits`, :func:`pool_setup`)
before the nodes' replays. Written back (``pool_writes="back"``), it takes the blocks the nodes
let go: a first pass over the nodes records, per request, the blocks leaving each node's last
tier (:func:`node_exits`; a node's tiers hold the same blocks whatever the pool serves), and the
pool's LRU replays the whole trace in arrival order, each request reading what its node lacks,
then taking its node's evictions (:func:`pool_write_back`, :func:`pool_back`). Either way each
node then reads from it what its own tiers miss, over its share of the pool's servers and NICs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.fleet.jobs import Job, run_jobs
from kvmath.fleet.nodes import node_requests
from kvmath.traces import readers as T
from kvmath.traces import replay as C


def pool_spec(node, nodes, pool):
    """The TierSpec of ``pool`` shared by the fleet's ``nodes`` GPU nodes: its whole capacity
    (:meth:`~kvmath.tables.rows.Pool.capacity`), read by each node over its share of the pool's
    servers and NICs (:func:`~kvmath.tables.rows.pool_tier`)."""
    from kvmath.evaluate.api import path_values
    from kvmath.tables.rows import bundled
    from kvmath.tiers.build import pool_tier
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    path = pool_tier(pool, nodes)
    bw = path_values(path, gpu, node.gpus)[0] * node.gpus
    return C.TierSpec(f"pool:{pool.name}", pool.capacity(nodes), bw, bw / pool.replicas, path)


def pool_setup(trace, model, node, nodes, pool, tp, block_bytes, engine=None):
    """(TierSpec, leading blocks of each request it holds, blocks written to it) of ``pool``
    shared by the fleet's ``nodes`` GPU nodes, written through (every request's blocks, new ones
    only: :func:`kvmath.traces.replay.shared_prefix_hits`)."""
    spec = pool_spec(node, nodes, pool)
    hits, written = C.shared_prefix_hits(trace, int(spec.capacity_bytes // block_bytes))
    return spec, hits, written


def node_exits(n, sub, specs, block_bytes, writes, path=None):
    """Node n's first pass below a write-back pool: its own tiers' hit of each request
    (``hit_blocks``) and the blocks that leave them while it serves each (``n_exits``), their
    hashes appended to the file ``path`` in order (or returned, ``exit_hashes``, when path is
    None: a worker that may not see this machine's files). The node's tiers hold the same
    blocks whatever the pool serves (every request's blocks end in HBM either way), so this
    pass and the priced one agree on them."""
    if hasattr(sub, "loaded"):
        sub = sub.loaded()
    counts = np.zeros(sub.n_requests, np.int64)
    parts = []
    fh = open(path, "wb") if path else None

    def sink(r, h):  # r: request indices in order, so one slice of counts a buffer
        lo = int(r[0])
        counts[lo:int(r[-1]) + 1] += np.bincount(r - lo)
        if fh is not None:
            h.tofile(fh)
        else:
            parts.append(h.copy())
    try:
        hit = (C.replay(sub, specs, block_bytes, writes=writes, exits=sink)["hit_blocks"]
               if sub.n_requests else np.zeros(0, np.int64))
    finally:
        if fh is not None:
            fh.close()
    return {"node": n, "hit_blocks": hit, "n_exits": counts,
            "exit_hashes": None if path else (np.concatenate(parts) if parts
                                              else np.zeros(0, np.uint64))}


def pool_write_back(trace, where, first, paths, capacity_blocks):
    """(leading blocks of each request its node and the pool hold, blocks written to the pool)
    of a pool of ``capacity_blocks`` that the nodes write their evicted blocks to (written
    back: Mooncake Store's and LMCache's remote backends under HiCache's write_back, a block
    reaching the pool when its node lets it go), over the whole trace in arrival order: each
    request reads what its node lacks from the pool, then the blocks its node evicted while
    serving it are written (:class:`kvmath.traces.simulate.pools.BackLRU`). first: each node's
    :func:`node_exits`, in node order, their hashes in the files ``paths``; read a chunk of
    requests at a time, so memory holds the per-request columns and the pool's blocks."""
    from kvmath.traces.simulate.pools import BackLRU
    n, nodes = trace.n_requests, len(first)
    node_hit, n_exits = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for k, x in enumerate(first):
        mine = np.flatnonzero(where == k)
        node_hit[mine], n_exits[mine] = x["hit_blocks"], x["n_exits"]
    lru = BackLRU(capacity_blocks)
    handles = [open(p, "rb") for p in paths]
    try:
        hits = []
        for a, b, h in T.block_chunks(trace):
            w, ne = where[a:b].astype(np.int64), n_exits[a:b]
            counts = np.zeros(nodes, np.int64)
            np.add.at(counts, w, ne)
            seg = np.concatenate([np.fromfile(handles[k], dtype=np.uint64, count=int(c))
                                  for k, c in enumerate(counts.tolist())]
                                 or [np.zeros(0, np.uint64)])
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            hits.append(lru.feed_back(trace.n_blocks[a:b], h, node_hit[a:b], w, ne, seg, starts))
    finally:
        for fh in handles:
            fh.close()
    return np.concatenate(hits or [np.zeros(0, np.int64)]), lru.written


def pool_back(trace, where, by_node, *, specs, block_bytes, writes, capacity, dask):
    """A write-back pool's hits and writes: each node's first pass (:func:`node_exits`, run as
    the replays are: :func:`~kvmath.fleet.jobs.run_jobs`), its evicted blocks in a file per
    node in a temporary directory (8 bytes a block on disk; in memory, a bounded buffer per node
    replayed, or, from a scheduler given by address, each node's whole list until it is
    written), then :func:`pool_write_back` into a pool of ``capacity`` blocks. where: each
    request's node; by_node: each node's blocks (:class:`~kvmath.fleet.nodes.NodeBlocks`)."""
    import os
    import tempfile
    nodes = by_node.nodes
    remote = dask not in (None, "local")  # its workers may not see this machine's files
    with tempfile.TemporaryDirectory(prefix="kvmath-exits-") as tmp:
        paths = [os.path.join(tmp, f"exits-{n}.u64") for n in range(nodes)]
        jobs = (Job(n, node_requests(trace, where, n, by_node), (specs, block_bytes, writes),
                    {"path": None if remote else paths[n]}) for n in range(nodes))
        first = run_jobs(jobs, dask, node_exits)
        for n, x in enumerate(first):
            if x["exit_hashes"] is not None:  # a worker elsewhere returned them: to disk
                x["exit_hashes"].tofile(paths[n])
                x["exit_hashes"] = None
        return pool_write_back(trace, where, first, paths, capacity)


def pool_totals(answer, per_node, trace):
    """The pool's fleet-wide hits and traffic: every node's reads of it, and the writes of the
    blocks new to it (each of its replicas written)."""
    rows = [t for x in per_node for t in x["tiers"] if t.get("shared")]
    hits = sum(t["hits"] for t in rows)
    return {**answer, "hits": hits,
            "hit_rate": hits / max(int(np.sum(trace.n_blocks, dtype=np.int64)), 1),
            "read_Bps": sum(t["read_Bps"] for t in rows)}


def pool_cost(trace, pool, nodes, write_Bps):
    """{pool_cost_per_million_tokens_usd, pool_priced_as}: the pool's media for ``nodes`` GPU
    nodes (every replica's raw bytes) held at its medium's price and worn by ``write_Bps`` (the
    bytes its replicas take per second), per million tokens the trace serves
    (kvmath.derive.reuse.pool_cost_per_million_tokens); its servers, CPUs and NICs are not
    priced, so a lower bound."""
    from kvmath.evaluate.reuse import rfn, tier_prices
    from kvmath.tiers.build import pool_tier
    c_cap, c_wear = tier_prices(pool_tier(pool, nodes))
    rate = float(trace.prompt_tokens.sum() + trace.output_tokens.sum()) / max(trace.duration_s, 1.0)
    return {"pool_cost_per_million_tokens_usd": float(rfn("pool_cost_per_million_tokens")(
                c_cap=c_cap, c_wear=c_wear, pool_raw_bytes=pool.capacity(nodes) * pool.replicas,
                W_carried=write_Bps, r_tok=rate)),
            "pool_priced_as": pool.medium}
