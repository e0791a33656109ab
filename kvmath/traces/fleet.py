"""A fleet of N nodes on one trace: the router places each request (:mod:`kvmath.traces.routing`),
then each node replays its own requests through its own tiers (:func:`kvmath.traces.replay.replay`,
priced by :class:`~kvmath.traces.replay.HitCost`): per node its hits, traffic, wear and prefill
demand against its GPUs. After routing the nodes' replays are independent.

The nodes' replays run in this process, or on Dask (``dask="local"``: a local cluster of this
machine's cores; or the address of a running scheduler, given up on after
:data:`DASK_TIMEOUT_S`), with the same results.

Counted: prefill (the prompts' misses, lost reloads and every request's own forward pass) and
reload time, in GPU-seconds per second; and each request's time to first token, its wait for a
free replica of its node (first come, first served over the node's GPUs / TP replicas, each
serving one prefill at a time) plus its own prefill and reloads. Not counted (stated in every
answer): decode (the replicas serve prefills only, as a disaggregated prefill pool does), the
engine's batching of several prefills into one step, and a pool shared by the nodes (a pool is
planned analytically by ``tiers --pool``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.scenario.options import DASK_TIMEOUT_S
from kvmath.traces import readers as T
from kvmath.traces import replay as C
from kvmath.traces.routing import route

#: what the fleet replay leaves out, in every answer
NOT_COUNTED = ("decode (replicas serve prefills only)", "batching several prefills in a step",
               "a shared pool")


def ttft_fcfs(arrival_s, service_s, servers):
    """Time to first token of each request, s: first come, first served over ``servers``
    identical replicas, each serving one request at a time (wait for the earliest free one, then
    its own service time). Requests in order of arrival."""
    import heapq
    free = [0.0] * max(int(servers), 1)  # when each replica is next free
    out = np.empty(len(arrival_s))
    for i, (a, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist())):
        start = max(a, heapq.heappop(free))
        heapq.heappush(free, start + s)
        out[i] = start + s - a
    return out


def check_fleet(trace, nodes):
    """Refuse a fleet of more nodes than the trace has requests (every other node would idle,
    and the routing's work grows with nodes x requests)."""
    from kvmath.evaluate.values import ScenarioError
    if nodes > max(trace.n_requests, 1):
        raise ScenarioError(f"--nodes {nodes:,} exceeds the trace's {trace.n_requests:,} "
                            "requests: at most one node per request")


def subtrace(trace, mask):
    """The requests of ``trace`` where ``mask`` holds, with their block accesses, in order."""
    keep = np.flatnonzero(mask)
    new_id = np.full(trace.n_requests, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    acc = new_id[trace.rid] >= 0
    return replace(trace, name=f"{trace.name}[{len(keep)}]", timestamp_s=trace.timestamp_s[keep],
                   prompt_tokens=trace.prompt_tokens[keep], output_tokens=trace.output_tokens[keep],
                   n_blocks=trace.n_blocks[keep], rid=new_id[trace.rid[acc]],
                   pos=trace.pos[acc], hashes=trace.hashes[acc])


def node_setup(trace, model, node, tp=None, engine=None, batch_seqs=None, batch_context=None,
               **cache_kw):
    """(tier specs, block bytes, cost model, blocks a node holds in all its tiers)."""
    from kvmath.evaluate.compare import node_tp
    from kvmath.tables.rows import bundled
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    tp = tp or node_tp(model, node.gpus)
    batch_context = batch_context or T.batch_context_of(trace, model)
    specs = C.node_tiers(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context,
                         **cache_kw)
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens, engine)
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens, engine=engine)
    blocks = int(sum(s.capacity_bytes // (s.block_bytes or block_bytes) for s in specs))
    return specs, block_bytes, C.HitCost(model, gpu, specs, tp, node.gpus, engine=engine), blocks, tp


def replay_node(n, sub, specs, block_bytes, cost, span_s, gpus, replicas):
    """Node n's answer: its requests ``sub`` replayed through its tiers, rates over the whole
    trace's span ``span_s`` (so the nodes' demands add up to the fleet's), and each request's
    time to first token on the node's ``replicas`` (``ttft_s``, an array)."""
    if sub.n_requests == 0:
        return {"node": n, "requests": 0, "token_hit_rate": None, "prompt_tokens": 0,
                "prefill_gpu_s_per_s": 0.0, "reload_gpu_s_per_s": 0.0, "feasible": True,
                "ttft_s_p99": None, "tiers": [], "ttft_s": np.empty(0)}
    rep = C.replay(sub, specs, block_bytes, cost=cost, service=True)
    ttft = ttft_fcfs(sub.timestamp_s, rep["service_s"], replicas)
    scale = max(sub.duration_s, 1.0) / max(span_s, 1.0)
    demand = rep["prefill_gpu_s_per_s"] * scale
    return {"node": n, "requests": sub.n_requests, "token_hit_rate": rep["token_hit_rate"],
            "prompt_tokens": int(sub.prompt_tokens.sum()),
            "prefill_gpu_s_per_s": demand,
            "reload_gpu_s_per_s": rep["reload_gpu_s_per_s"] * scale,
            "feasible": bool(demand <= gpus),
            "ttft_s_p99": float(np.percentile(ttft, 99)), "ttft_s": ttft,
            "tiers": [{"tier": t["tier"], "hit_rate": t["hit_rate"],
                       "read_Bps": t["read_Bps_mean"] * scale,
                       "write_Bps": t["write_Bps_mean"] * scale,
                       **({"drive_writes_per_day": t["drive_writes_per_day"] * scale}
                          if "drive_writes_per_day" in t else {})} for t in rep["tiers"]]}


def _dask_client(dask):
    """A Dask client: a local cluster (``"local"``) or the scheduler at an address."""
    from kvmath.evaluate.values import ScenarioError
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - pinned in requirements.txt
        raise ScenarioError("--dask needs the distributed package (pip install distributed)")
    if dask == "local":
        return Client(LocalCluster(processes=True, threads_per_worker=1, dashboard_address=None))
    try:
        return Client(dask, timeout=f"{DASK_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ScenarioError(f"--dask {dask}: no Dask scheduler answered within "
                            f"{DASK_TIMEOUT_S} s ({type(exc).__name__})") from None


def fleet(trace, model, node, nodes, router, tp=None, engine=None, batch_seqs=None,
          batch_context=None, seed=0, setup=None, dask=None, **cache_kw):
    """Route ``trace`` over ``nodes`` copies of ``node`` and replay each (here, or on Dask: a
    local cluster or a scheduler's address); a JSON-ready dict."""
    check_fleet(trace, nodes)
    specs, block_bytes, cost, blocks, tp = setup or node_setup(
        trace, model, node, tp, engine, batch_seqs, batch_context, **cache_kw)
    routed = route(trace, nodes, router, blocks, seed=seed, assignment=True)
    where = routed.pop("assignment")
    jobs = [(n, subtrace(trace, where == n), specs, block_bytes, cost, trace.duration_s,
             node.gpus, node.gpus // tp) for n in range(nodes)]
    if dask is None:
        per_node = [replay_node(*job) for job in jobs]
    else:
        client = _dask_client(dask)
        try:
            per_node = client.gather([client.submit(replay_node, *job, pure=False)
                                      for job in jobs])
        finally:
            client.close()
            if dask == "local":
                client.cluster.close()
    hit_tokens = sum(x["token_hit_rate"] * x["prompt_tokens"] for x in per_node if x["requests"])
    ttft = np.concatenate([x.pop("ttft_s") for x in per_node])
    demand = [x["prefill_gpu_s_per_s"] for x in per_node]
    return {"router": router, "nodes": nodes, "node": node.name, "model": model.name, "tp": tp,
            "requests": trace.n_requests, "capacity_blocks_per_node": blocks,
            "token_hit_rate": hit_tokens / max(float(trace.prompt_tokens.sum()), 1.0),
            "reach_continuation": routed["reach_continuation"],
            "token_reach": routed["token_reach"], "load_imbalance": routed["load_imbalance"],
            "prefill_gpu_s_per_s": float(sum(demand)), "prefill_gpu_s_per_s_max_node": max(demand),
            "gpus_per_node": node.gpus, "replicas_per_node": node.gpus // tp,
            "ttft_s_p50": float(np.percentile(ttft, 50)), "ttft_s_p99": float(np.percentile(ttft, 99)),
            "feasible": all(x["feasible"] for x in per_node),
            "not_counted": list(NOT_COUNTED), "per_node": per_node}


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
    """The fewest nodes (at most max_nodes) whose every node's prefill demand fits its GPUs and,
    given slo_ttft_p99_s, whose fleet-wide 99th-percentile time to first token is within it, by
    bisection (both ease as nodes are added); None if max_nodes do not suffice.
    Returns (nodes or None, {nodes: fleet answer} of the fleets tried)."""
    plain = ("tp", "engine", "batch_seqs", "batch_context")
    setup = node_setup(trace, model, node, *(kw.get(k) for k in plain),
                       **{k: v for k, v in kw.items() if k not in (*plain, "seed", "dask")})
    tried = {}

    def ok(n):
        tried[n] = fleet(trace, model, node, n, router, setup=setup, **kw)
        return tried[n]["feasible"] and (slo_ttft_p99_s is None
                                         or tried[n]["ttft_s_p99"] <= slo_ttft_p99_s)
    if not ok(max_nodes):
        return None, tried
    lo, hi = 0, max_nodes  # lo infeasible (or none), hi feasible
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi, tried
