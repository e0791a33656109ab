"""A fleet of N nodes on one trace: the router places each request (:mod:`kvmath.traces.routing`),
then each node replays its own requests through its own tiers (:func:`kvmath.traces.replay.replay`,
priced by :class:`~kvmath.traces.replay.HitCost`): per node its hits, traffic, wear and prefill
demand against its GPUs. After routing the nodes' replays are independent.

Counted: prefill (the prompts' misses, lost reloads and every request's own forward pass) and
reload time, in GPU-seconds per second. Not counted (stated in every answer): decode, queueing
(no time to first token under load), and a pool shared by the nodes (a pool is planned
analytically by ``tiers --pool``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.traces import readers as T
from kvmath.traces import replay as C
from kvmath.traces.routing import route

#: what the fleet replay leaves out, in every answer
NOT_COUNTED = ("decode", "queueing (no time to first token under load)", "a shared pool")


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


def fleet(trace, model, node, nodes, router, tp=None, engine=None, batch_seqs=None,
          batch_context=None, seed=0, setup=None, **cache_kw):
    """Route ``trace`` over ``nodes`` copies of ``node`` and replay each; a JSON-ready dict."""
    check_fleet(trace, nodes)
    specs, block_bytes, cost, blocks, tp = setup or node_setup(
        trace, model, node, tp, engine, batch_seqs, batch_context, **cache_kw)
    routed = route(trace, nodes, router, blocks, seed=seed, assignment=True)
    where = routed.pop("assignment")
    per_node, hit_tokens = [], 0.0
    for n in range(nodes):
        sub = subtrace(trace, where == n)
        if sub.n_requests == 0:
            per_node.append({"node": n, "requests": 0, "token_hit_rate": None,
                             "prefill_gpu_s_per_s": 0.0, "feasible": True, "tiers": []})
            continue
        rep = C.replay(sub, specs, block_bytes, cost=cost)
        # rates over the whole trace's span, so the nodes' demands add up to the fleet's
        scale = max(sub.duration_s, 1.0) / max(trace.duration_s, 1.0)
        hit_tokens += rep["token_hit_rate"] * float(sub.prompt_tokens.sum())
        per_node.append({
            "node": n, "requests": sub.n_requests, "token_hit_rate": rep["token_hit_rate"],
            "prefill_gpu_s_per_s": rep["prefill_gpu_s_per_s"] * scale,
            "reload_gpu_s_per_s": rep["reload_gpu_s_per_s"] * scale,
            "feasible": bool(rep["prefill_gpu_s_per_s"] * scale <= node.gpus),
            "tiers": [{"tier": t["tier"], "hit_rate": t["hit_rate"],
                       "read_Bps": t["read_Bps_mean"] * scale,
                       "write_Bps": t["write_Bps_mean"] * scale,
                       **({"drive_writes_per_day": t["drive_writes_per_day"] * scale}
                          if "drive_writes_per_day" in t else {})} for t in rep["tiers"]]})
    demand = [x["prefill_gpu_s_per_s"] for x in per_node]
    return {"router": router, "nodes": nodes, "node": node.name, "model": model.name, "tp": tp,
            "requests": trace.n_requests, "capacity_blocks_per_node": blocks,
            "token_hit_rate": hit_tokens / max(float(trace.prompt_tokens.sum()), 1.0),
            "reach_continuation": routed["reach_continuation"],
            "token_reach": routed["token_reach"], "load_imbalance": routed["load_imbalance"],
            "prefill_gpu_s_per_s": float(sum(demand)), "prefill_gpu_s_per_s_max_node": max(demand),
            "gpus_per_node": node.gpus, "feasible": all(x["feasible"] for x in per_node),
            "not_counted": list(NOT_COUNTED), "per_node": per_node}


def nodes_needed(trace, model, node, router, max_nodes=64, **kw):
    """The fewest nodes (at most max_nodes) whose every node's prefill demand fits its GPUs,
    by bisection (demand per node falls as nodes are added); None if max_nodes do not suffice.
    Returns (nodes or None, {nodes: fleet answer} of the fleets tried)."""
    plain = ("tp", "engine", "batch_seqs", "batch_context")
    setup = node_setup(trace, model, node, *(kw.get(k) for k in plain),
                       **{k: v for k, v in kw.items() if k not in (*plain, "seed")})
    tried = {}

    def ok(n):
        tried[n] = fleet(trace, model, node, n, router, setup=setup, **kw)
        return tried[n]["feasible"]
    if not ok(max_nodes):
        return None, tried
    lo, hi = 0, max_nodes  # lo infeasible (or none), hi feasible
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi, tried
