"""A fleet of N nodes serving a trace (:func:`fleet`, :func:`fleet_of`), step by step as its
engines schedule (:mod:`kvmath.fleet.serving`: every replica's scheduler, the router placing each
request from the replicas' live state, an open or a closed loop of arrivals), its answer the
latencies people set objectives on (:mod:`kvmath.fleet.metrics`); then each node's tiers replayed
on its share of the trace in arrival order, for their traffic, writes and wear
(:func:`kvmath.fleet.nodes.replay_node`), the nodes' replays independent, on Dask or on a thread
per core (:mod:`kvmath.fleet.jobs`). :func:`nodes_needed` finds the fewest nodes that keep up
with the load and meet the objectives; :func:`fleet_cost` prices them.

The schedule is one compiled loop over every replica of the fleet, not a job per node: a
deployed router reads every replica's state as each request arrives (its queue, its KV in use,
its cached prefix), and a closed loop's next request waits on the last one's answer, so the
replicas' schedules are not independent. A trace streamed from disk
(:class:`~kvmath.traces.readers.TraceFile`) is served from its hashes mapped read-only; its
blocks then go to a file per node for the nodes' tier replays, which read only their own.

A pool (``pool=``) sits below every node's tiers, shared by the fleet, written through or back:
the schedule loads from it what a node's tiers lack, and its traffic and price come from the
pool's own replay (:mod:`kvmath.fleet.pool`).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.fleet.jobs import Job, run_jobs
from kvmath.fleet.metrics import PERCENTILES, summarise
from kvmath.fleet.nodes import NodeBlocks, check_fleet, node_requests, node_setup, replay_node
from kvmath.fleet.pool import pool_back, pool_cost, pool_spec, pool_totals
from kvmath.fleet.serving import Workload, hashes_of, layout_note, serve, serving_setup
from kvmath.traces import readers as T
from kvmath.traces import replay as C

#: what the fleet leaves out, in every answer
NOT_COUNTED = ("the router's view of the replicas delayed (metrics scraped every 50 ms or so)",
               "a tier's write bandwidth and the ttl and selective policies in the schedule "
               "(the tier replay counts them)", "network time between the client, the router "
               "and the replicas")


def scenario_for(model, node, nodes=1, router="kv-aware", **fields):
    """The scenario record of a fleet given in Python: ``model`` and ``node`` (rows or bundled
    names), any field of :class:`~kvmath.scenario.record.Scenario` by its name (tp, scheduler,
    kv_capacity, router_param, rate_scale, users, think_time, writes, pool, ...)."""
    from kvmath.scenario.record import scenario
    from kvmath.tables.rows import bundled, resolve_node
    if isinstance(node, str):
        node = resolve_node(node)
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    return scenario(model, gpu, None, node=node, nodes=nodes, router=router, **fields)


def fleet(trace, model, node, nodes, router="kv-aware", *, dask=None, slos=(),
          percentiles=PERCENTILES, window_s=None, tier_replay=True, **fields):
    """:func:`fleet_of` the scenario of :func:`scenario_for`; a JSON-ready dict."""
    s = scenario_for(model, node, nodes, router, **fields)
    return fleet_of(trace, s, dask=dask, slos=slos, percentiles=percentiles, window_s=window_s,
                    tier_replay=tier_replay)


def _tp_of(s, trace):
    from kvmath.scenario.build import with_node_tp
    return with_node_tp(s, s.batch_context or T.batch_context_of(trace, s.model))


def _cache_kw(s, cache_kw):
    kw = {k: getattr(s, k) for k in ("host_cache_bytes", "disk_cache_bytes")
          if getattr(s, k) is not None}
    kw.update(cache_kw or {})
    return kw


def fleet_of(trace, s, dask=None, slos=(), percentiles=PERCENTILES, window_s=None,
             tier_replay=True, cache_kw=None, parent=None, capture=None, stages=None):
    """Scenario ``s`` (its node, ``s.nodes`` of them, its router, scheduler and workload) serving
    ``trace`` (a :class:`~kvmath.traces.readers.Trace` or a
    :class:`~kvmath.traces.readers.TraceFile`): its latencies, throughput, objectives
    (``slos``: (metric, percentile or None, seconds) as :func:`kvmath.fleet.metrics.parse_slo`
    gives them), per node and per window; with ``tier_replay``, each node's tiers replayed for
    their traffic (here, a thread per core, or on Dask: a local cluster or a scheduler's
    address). cache_kw: the engine's cache sizes (host_cache_bytes, disk_cache_bytes,
    host_cache_hbm_ratio, cache_source) for :func:`kvmath.node.capacities.node_capacities`.
    capture: a dict that receives the loop's per-request output (``out``) and the setup.
    stages: (each request's stage, each stage's duration, the pause between stages): a load
    ladder as inference-perf sends it, the trace's times from each request's stage's start."""
    import os
    nodes = s.nodes
    check_fleet(trace, nodes)
    s = _tp_of(s, trace)
    model, node, pool = s.model, s.node, s.pool
    kw = _cache_kw(s, cache_kw)
    if pool is not None:
        kw = {**kw, "pool": pool, "pool_nodes": nodes}
    specs, block_bytes, cost, blocks, tp = node_setup(
        trace, model, node, s.tp, s.engine, 0, s.batch_context, kv_dtype=s.kv_dtype, **kw)
    spec = pool_spec(node, nodes, pool) if pool is not None else None
    all_specs = [*specs, spec] if spec is not None else specs
    cost = C.HitCost(model, cost.gpu, all_specs, tp, cost.gpus, engine=s.engine,
                     kv_dtype=s.kv_dtype)
    setup = serving_setup(s, trace, nodes, all_specs, block_bytes, cost, writes=s.writes,
                          pool_writes=s.pool_writes)
    workload = Workload(rate_scale=s.rate_scale or 1.0, users=s.users or 0,
                        think_s=s.think_time or 0.0, think_exp=bool(s.think_exponential),
                        **({} if stages is None else dict(zip(("stage", "stage_dur",
                                                               "interval_s"), stages))))
    out = serve(trace, hashes_of(trace), setup, workload, parent=parent, seed=s.seed or 0)
    if capture is not None:
        capture.update(out=out, setup=setup)
    summary = summarise(out, setup.info, slos, percentiles, window_s)
    info = setup.info
    replica = out["replica"]
    where = np.where(replica >= 0, replica // info["replicas_per_node"], 0).astype(np.int32)
    answer = {"router": info["router"], "router_params": info["router_params"],
              "nodes": nodes, "node": node.name, "model": model.name, "tp": tp,
              "requests": trace.n_requests, "engine_settings": {
                  k: info[k] for k in ("scheduler", "max_num_batched_tokens", "max_num_seqs",
                                       "kv_capacity_tokens", "kv_capacity_from",
                                       "gpu_memory_utilization", "prefill_model")},
              "layout": layout_note(info), "replicas_per_node": info["replicas_per_node"],
              "gpus_per_node": node.gpus, "workload": workload._asdict(),
              "capacity_blocks_per_node": blocks, "writes": s.writes,
              **summary, "not_counted": list(NOT_COUNTED)}
    # continued turns routed to their previous turn's node: the measured reach
    par = out["parent"] if out["parent"] is not None else T.continuations(trace)
    par = np.asarray(par)
    cont = par >= 0
    answer["reach_continuation"] = (float((where[cont] == where[par[cont]]).mean())
                                    if cont.any() else None)
    routed = np.bincount(where, weights=trace.prompt_tokens, minlength=nodes)
    answer["load_imbalance"] = float(routed.max() / routed.mean()) if routed.mean() > 0 else None
    if not tier_replay:
        return answer
    # each node's tiers in arrival order, for their traffic: HBM as much as the schedule left
    # it on average (its replicas' KV less what their running requests held)
    held = out["sums"][:, 2].reshape(nodes, -1).sum(axis=1) / max(summary["span_s"], 1e-9)
    per_tok = specs[0].block_bytes / trace.block_tokens if specs[0].block_bytes else 0.0
    hbm = info["kv_capacity_tokens"] * info["replicas_per_node"] * per_tok
    node_specs = [replace(specs[0], capacity_bytes=max(hbm - float(held.mean()) * per_tok, 0.0)),
                  *specs[1:]]
    streamed = isinstance(trace, T.TraceFile)
    by_node = NodeBlocks(trace, nodes, os.path.dirname(trace.hashes_path) if streamed else None)
    try:
        for a, b, h in T.block_chunks(trace):
            by_node.add(a, b, h, where[a:b])
    finally:
        by_node.close()
    hits = None
    pool_answer = None
    if pool is not None:
        cap = int(spec.capacity_bytes // block_bytes)
        if s.pool_writes == "back":
            hits, written = pool_back(trace, where, by_node, specs=node_specs,
                                      block_bytes=block_bytes, writes=s.writes, capacity=cap,
                                      dask=dask)
        else:
            hits, written = C.shared_prefix_hits(trace, cap)
        pool_Bps = written * block_bytes / max(trace.duration_s, 1.0)
        pool_answer = {"pool": pool.name, "writes": s.pool_writes,
                       "capacity_bytes": spec.capacity_bytes,
                       **pool_cost(trace, pool, nodes, pool_Bps * pool.replicas),
                       "replicas": pool.replicas, "write_Bps": pool_Bps * pool.replicas,
                       "write_bandwidth_Bps": spec.write_Bps * nodes,
                       "writes_within_bandwidth": bool(pool_Bps <= spec.write_Bps * nodes),
                       "read_bandwidth_Bps_per_node": spec.read_Bps}
    jobs = (Job(n, node_requests(trace, where, n, by_node), (node_specs, block_bytes, None),
                {"span_s": trace.duration_s, "writes": s.writes,
                 "shared": None if pool is None else (spec, hits[where == n])})
            for n in range(nodes))
    tiers = run_jobs(jobs, dask, replay_node)
    for row, t in zip(answer["per_node"], tiers):
        row["tiers"] = t["tiers"]
    if pool_answer is not None:
        answer["pool"] = pool_totals(pool_answer, tiers, trace)
        answer["feasible"] = bool(answer["keeps_up"] and pool_answer["writes_within_bandwidth"])
    else:
        answer["feasible"] = bool(answer["keeps_up"])
    return answer


def fleet_cost(trace, node, nodes, usd_per_gpu_hour=None, span_s=None):
    """{cost_per_million_tokens_usd, gpu_hour_usd, gpu_price_observed}: the fleet's GPUs at the
    given hourly price, else the GPU's dated list price (gpu_prices.csv), per million tokens the
    trace serves (prompt and output) over its span (``span_s``, default the trace's:
    kvmath.derive.reuse.fleet_cost_per_million_tokens)."""
    from kvmath.evaluate.reuse import gpu_second_price, rfn
    from kvmath.tables.rows import gpu_prices
    tokens = float(trace.prompt_tokens.sum() + trace.output_tokens.sum())
    rate = tokens / max(span_s if span_s else trace.duration_s, 1.0)
    c_gpu = gpu_second_price(node.gpu, usd_per_gpu_hour)
    row = gpu_prices().get(node.gpu)
    return {"cost_per_million_tokens_usd": float(rfn("fleet_cost_per_million_tokens")(
                N_fleet=nodes, N_node=node.gpus, c_gpu=c_gpu, r_tok=rate)),
            "gpu_hour_usd": c_gpu * 3600,
            "gpu_price_observed": (None if usd_per_gpu_hour is not None or row is None
                                   else str(row.observed))}


def meets(answer):
    """Whether a fleet's answer serves its load: it keeps up and meets every objective it was
    given (a request too large for a replica's KV is refused whatever the nodes: the answer
    counts those apart)."""
    return bool(answer["keeps_up"] and answer["slos_met"])


def nodes_needed(trace, model, node, router="kv-aware", max_nodes=64, slos=(), **fields):
    """The fewest nodes (at most max_nodes) that keep up with the trace's load and meet the
    objectives ``slos`` (:func:`kvmath.fleet.metrics.parse_slo` tuples), by bisection (both ease
    as nodes are added, an ASSUMPTION a router's choices can break); None if max_nodes do not
    suffice. Returns (nodes or None, {nodes: fleet answer (no tier replay)} of the fleets
    tried)."""
    s = scenario_for(model, node, max_nodes, router,
                     **{k: v for k, v in fields.items() if k not in ("dask",)})
    return nodes_needed_of(trace, s, max_nodes, slos)


def nodes_needed_of(trace, s, max_nodes, slos=(), cache_kw=None):
    """:func:`nodes_needed` of a scenario record."""
    from kvmath.traces.statistics import continuations
    tried = {}
    parent = continuations(trace)
    s = _tp_of(s, trace)
    top = min(max_nodes, max(trace.n_requests, 1))

    def ok(n):
        tried[n] = fleet_of(trace, replace(s, nodes=n), slos=slos, tier_replay=False,
                            cache_kw=cache_kw, parent=parent)
        return meets(tried[n])
    if not ok(top):
        return None, tried
    lo, hi = 0, top  # lo fails (or none), hi serves
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi, tried
