"""A fleet of N nodes on one trace (:func:`fleet`): the router places each request
(:func:`kvmath.fleet.routing.route`), then each node replays its own requests through its own
tiers (:func:`kvmath.fleet.nodes.replay_node`): per node its hits, traffic, wear and prefill
demand against its GPUs. After routing the nodes' replays are independent, and they run on Dask
or on a thread per core (:mod:`kvmath.fleet.jobs`). A trace streamed from disk
(:class:`~kvmath.traces.readers.TraceFile`) is read in order, a chunk at a time: routing writes
each node's blocks to a file of its own, and each node's replay reads only its own, so memory
holds the per-request columns, the routers' and one replay per thread's caches, not the trace's
blocks. :func:`nodes_needed` finds the fewest nodes that serve a trace; :func:`fleet_cost`
prices them.

Counted: prefill (the prompts' misses, lost reloads and every request's own forward pass) and
reload time, in GPU-seconds per second; decode, the trace's output tokens at the GPU time one
costs in a decode step of the node's running batch (:func:`kvmath.evaluate.serving.
decode_cost`: batch_seqs sequences over the node's replicas, at the trace's mean decode
context); a node is feasible when its prefill and decode together fit its GPUs (they share
them, as an engine with chunked prefill runs both). Each request's time to first token is its
wait for a free replica of its node (first come, first served over the node's GPUs / TP
replicas, each serving one prefill at a time) plus its own prefill and reloads, stretched by the
share of the GPUs decode leaves (ASSUMED: prefill runs in the time decode steps leave free). Not
counted (stated in every answer): the engine's batching of several prefills into one step.

A pool (``pool=``) sits below every node's tiers, shared by the fleet, written through or back
(:mod:`kvmath.fleet.pool`).
"""
from __future__ import annotations

import numpy as np

from kvmath.fleet.jobs import Job, run_jobs
from kvmath.fleet.nodes import (NodeBlocks, check_fleet, node_decode, node_requests, node_setup,
                                replay_node)
from kvmath.fleet.pool import pool_back, pool_cost, pool_spec, pool_totals
from kvmath.fleet.routing import route
from kvmath.traces import readers as T
from kvmath.traces import replay as C

#: what the fleet replay leaves out, in every answer
NOT_COUNTED = ("batching several prefills in a step", "a shared pool")


def fleet(trace, model, node, nodes, router, tp=None, engine=None, batch_seqs=None,
          batch_context=None, seed=0, setup=None, dask=None, pool=None, writes="back",
          pool_writes="through", **cache_kw):
    """Route ``trace`` over ``nodes`` copies of ``node`` and replay each (here, a thread per
    core, or on Dask: a local cluster or a scheduler's address); a JSON-ready dict. pool: a
    :class:`~kvmath.tables.rows.Pool` below every node's tiers, shared by the fleet (a pool of
    the nodes' own DRAM takes its share of each node's host DRAM), written through (every
    request's new blocks) or back (``pool_writes="back"``: the blocks the nodes evict, found
    by a first pass over the nodes, :func:`~kvmath.fleet.pool.pool_write_back`).

    ``trace``: a :class:`~kvmath.traces.readers.Trace`, or a
    :class:`~kvmath.traces.readers.TraceFile` whose blocks stay on disk: one pass routes it
    and writes each node's blocks to a file beside it, (with a pool) another simulates the
    pool, and each node's replay reads its own file."""
    import os
    check_fleet(trace, nodes)
    if pool is not None:
        cache_kw = {**cache_kw, "pool": pool, "pool_nodes": nodes}
    specs, block_bytes, cost, blocks, tp = setup or node_setup(
        trace, model, node, tp, engine, batch_seqs, batch_context, **cache_kw)
    streamed = isinstance(trace, T.TraceFile)
    by_node = NodeBlocks(trace, nodes, os.path.dirname(trace.hashes_path) if streamed else None)
    try:
        routed = route(trace, nodes, router, blocks, seed=seed, assignment=True,
                       spill=by_node.add)
    finally:
        by_node.close()
    where = routed.pop("assignment")
    decode = node_decode(trace, model, node, tp, engine, batch_seqs)
    shared = pool_answer = None
    if pool is not None:
        if pool_writes not in ("through", "back"):
            raise ValueError(f"unknown pool write mode {pool_writes!r}; expected through or back")
        spec = pool_spec(node, nodes, pool)
        if pool_writes == "through":
            hits, written = C.shared_prefix_hits(trace, int(spec.capacity_bytes // block_bytes))
        else:
            hits, written = pool_back(trace, where, by_node, specs=specs,
                                      block_bytes=block_bytes, writes=writes,
                                      capacity=int(spec.capacity_bytes // block_bytes), dask=dask)
        cost = C.HitCost(cost.model, cost.gpu, [*specs, spec], cost.tp, cost.gpus,
                         engine=cost.engine)
        pool_Bps = written * block_bytes / max(trace.duration_s, 1.0)  # each block once
        pool_answer = {"pool": pool.name, "writes": pool_writes,
                       "capacity_bytes": spec.capacity_bytes,
                       **pool_cost(trace, pool, nodes, pool_Bps * pool.replicas),
                       "replicas": pool.replicas, "write_Bps": pool_Bps * pool.replicas,
                       "write_bandwidth_Bps": spec.write_Bps * nodes,
                       # writes are not dropped: the pool must take them (ASSUMED it does, and
                       # said when it cannot)
                       "writes_within_bandwidth": bool(pool_Bps <= spec.write_Bps * nodes),
                       "read_bandwidth_Bps_per_node": spec.read_Bps}
    # the pricing tables once for the fleet (each node's are slices of them)
    cost = C.HitCost(cost.model, cost.gpu, cost.tiers, cost.tp, cost.gpus,
                     engine=cost.engine).prepare(trace)
    jobs = (Job(n, node_requests(trace, where, n, by_node), (specs, block_bytes, cost),
                {"span_s": trace.duration_s, "gpus": node.gpus, "replicas": node.gpus // tp,
                 "decode_gpu_s_per_token": decode["decode_gpu_s_per_token"],
                 "shared": None if pool is None else (spec, hits[where == n]), "writes": writes})
            for n in range(nodes))
    per_node = run_jobs(jobs, dask, replay_node)
    hit_tokens = sum(x["token_hit_rate"] * x["prompt_tokens"] for x in per_node if x["requests"])
    ttfts = [x.pop("ttft_s") for x in per_node]
    ttft = None if any(t is None for t in ttfts) else np.concatenate(ttfts)
    del ttfts
    p50 = p99 = None
    if ttft is not None:  # both order statistics at once, in place (the same values)
        p50, p99 = (float(v) for v in np.percentile(ttft, [50, 99], overwrite_input=True))
    del ttft
    demand = [x["prefill_gpu_s_per_s"] for x in per_node]
    decoding = [x["decode_gpu_s_per_s"] for x in per_node]
    return {"router": router, "nodes": nodes, "node": node.name, "model": model.name, "tp": tp,
            "writes": writes,
            "requests": trace.n_requests, "capacity_blocks_per_node": blocks,
            "token_hit_rate": hit_tokens / max(float(trace.prompt_tokens.sum()), 1.0),
            "reach_continuation": routed["reach_continuation"],
            "token_reach": routed["token_reach"], "load_imbalance": routed["load_imbalance"],
            "prefill_gpu_s_per_s": float(sum(demand)), "prefill_gpu_s_per_s_max_node": max(demand),
            "decode_gpu_s_per_s": float(sum(decoding)),
            "decode_gpu_s_per_s_max_node": max(decoding),
            "gpu_s_per_s_max_node": max(a + b for a, b in zip(demand, decoding)),
            "decode": decode,
            "gpus_per_node": node.gpus, "replicas_per_node": node.gpus // tp,
            "ttft_s_p50": p50, "ttft_s_p99": p99,
            "feasible": all(x["feasible"] for x in per_node)
            and (pool_answer is None or pool_answer["writes_within_bandwidth"]),
            "not_counted": [x for x in NOT_COUNTED if pool is None or x != "a shared pool"],
            "per_node": per_node,
            **({"pool": pool_totals(pool_answer, per_node, trace)} if pool is not None else {})}


def fleet_cost(trace, node, nodes, usd_per_gpu_hour=None):
    """{cost_per_million_tokens_usd, gpu_hour_usd, gpu_price_observed}: the fleet's GPUs at the
    given hourly price, else the GPU's dated list price (gpu_prices.csv), per million tokens the
    trace serves (prompt and output) over its span (kvmath.derive.reuse.
    fleet_cost_per_million_tokens)."""
    from kvmath.evaluate.reuse import gpu_second_price, rfn
    from kvmath.tables.rows import gpu_prices
    tokens = float(trace.prompt_tokens.sum() + trace.output_tokens.sum())
    rate = tokens / max(trace.duration_s, 1.0)
    c_gpu = gpu_second_price(node.gpu, usd_per_gpu_hour)
    row = gpu_prices().get(node.gpu)
    return {"cost_per_million_tokens_usd": float(rfn("fleet_cost_per_million_tokens")(
                N_fleet=nodes, N_node=node.gpus, c_gpu=c_gpu, r_tok=rate)),
            "gpu_hour_usd": c_gpu * 3600,
            "gpu_price_observed": (None if usd_per_gpu_hour is not None or row is None
                                   else str(row.observed))}


def nodes_needed(trace, model, node, router, max_nodes=64, slo_ttft_p99_s=None, **kw):
    """The fewest nodes (at most max_nodes) whose every node's prefill and decode demand fits its
    GPUs and,
    given slo_ttft_p99_s, whose fleet-wide 99th-percentile time to first token is within it, by
    bisection (both ease as nodes are added); None if max_nodes do not suffice.
    Returns (nodes or None, {nodes: fleet answer} of the fleets tried)."""
    plain = ("tp", "engine", "batch_seqs", "batch_context")
    setup = node_setup(trace, model, node, *(kw.get(k) for k in plain),
                       **{k: v for k, v in kw.items()
                          if k not in (*plain, "seed", "dask", "writes", "pool_writes")})
    tried = {}

    def ok(n):
        tried[n] = fleet(trace, model, node, n, router, setup=setup, **kw)
        p99 = tried[n]["ttft_s_p99"]
        return tried[n]["feasible"] and (slo_ttft_p99_s is None
                                         or (p99 is not None and p99 <= slo_ttft_p99_s))
    if not ok(max_nodes):
        return None, tried
    lo, hi = 0, max_nodes  # lo infeasible (or none), hi feasible
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi, tried
