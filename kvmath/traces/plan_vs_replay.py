"""The analytic tier plan (Little's law, :func:`kvmath.evaluate.reuse.tier_plan`) against a replay of a
real trace (:func:`kvmath.traces.replay.replay`) on the same node: one error per tier.

Both sides share the node's capacities and bandwidths (:func:`kvmath.evaluate.reuse.node_capacities`).
The plan is fed what the trace measures: the resume rate (continuation requests per second),
the pause distribution and return probability fitted to the trace's pauses
(:func:`kvmath.traces.statistics.fit_lognormal`), and the size of a resumed cache (mean tokens a
continuation hits). Per tier it predicts:

* **hit share**: prompt tokens served from the tier per prompt token of the trace
  (plan: resume rate x share of resumes served there x tokens per resume / prompt tokens per s;
  replay: the tier's block hits / all block accesses);
* **read and write bytes per second** (the replay's mean over the trace).

The plan knows only continuations; the replay also serves shared prefixes (system prompts,
documents) and keeps copies in lower tiers, so the errors measure what the plan leaves out.
"""
from __future__ import annotations

import math

from kvmath.traces import replay as C
from kvmath.traces import reading, statistics as S
from kvmath.evaluate.api import node_layout_tp
from kvmath.node.plan import tier_plan
from kvmath.tables.rows import Pause, bundled


def _rel(plan, replay):
    """Relative error of the plan against the replay (None when the replay is 0)."""
    return (plan - replay) / replay if replay else None


def trace_pause(trace, stats, fit):
    """A pauses.csv-like Pause fitted to a trace (lognormal median and sigma, return prob.)."""
    return Pause(name=f"{trace.name}-fitted", distribution="lognormal", median_s=fit["median_s"],
                 sigma=fit["sigma"], return_probability=stats["return_probability"], kind="measurement",
                 source=trace.name, source_location="kvmath.traces.readers.fit_lognormal of its pauses",
                 retrieved="2026-11-30")


def plan_vs_replay(trace_name, model, node, tp=None, batch_seqs=None, batch_context=None,
                   policy="lru", trace=None, replay=None, turn_new_tokens=None, writes="back"):
    """Plan and replay on one node, and their per-tier errors (a JSON-ready dict); writes: the
    offload tiers' write mode on both sides (kvmath.traces.replay.WRITE_MODES).

    replay: a :func:`kvmath.traces.replay.replay` of the same trace already run (a caller that
    also priced its hits), used instead of replaying again; ValueError unless it ran on this
    plan's tiers, block size and policy.
    """
    trace = trace or reading.load(trace_name)
    stats = S.reuse_stats(trace)
    fit = S.fit_lognormal(stats["pauses"])
    pause = trace_pause(trace, stats, fit)
    duration = max(trace.duration_s, 1.0)
    n_cont = stats["requests_continuation"] * trace.n_requests
    resume_rate = n_cont / duration
    tokens = int(round(stats["hit_tokens_continuation"] * stats["prompt_tokens"] / n_cont))
    batch_context = batch_context or S.batch_context_of(trace, model)
    tp = tp or node_layout_tp(model, node, batch_context, batch_seqs=batch_seqs,
                             batch_context=batch_context)
    plan = tier_plan(node, model, tokens, resume_rate, pause, tp=tp, batch_seqs=batch_seqs,
                     batch_context=batch_context, find_limit=False,
                     turn_new_tokens=turn_new_tokens or S.turn_new_tokens(trace),
                     writes=writes)
    specs = C.node_tiers(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context)
    gpu = bundled().gpus[node.gpu]
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens)
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens)
    if replay is None:
        rep = C.replay(trace, specs, block_bytes, policy=policy, writes=writes)
    else:
        _check_same_replay(replay, trace, specs, block_bytes, policy, writes)
        rep = replay
    prompt_per_s = stats["prompt_tokens"] / duration
    by_name = {t["tier"]: t for t in rep["tiers"]}
    rows = []
    for p in plan["tiers"]:
        r = by_name[p["tier"]]
        share = resume_rate * p["resume_fraction"] * tokens / prompt_per_s
        row = {"tier": p["tier"], "capacity_bytes": p["capacity_bytes"],
               "replay_capacity_bytes": r["capacity_bytes"],
               "plan_hit_share": share, "replay_hit_share": r["hit_rate"],
               "hit_share_error": share - r["hit_rate"],
               "plan_read_Bps": p["read_Bps"], "replay_read_Bps": r["read_Bps_mean"],
               "read_error": _rel(p["read_Bps"], r["read_Bps_mean"]),
               "plan_write_Bps": p["write_Bps"], "replay_write_Bps": r["write_Bps_mean"],
               "write_error": _rel(p["write_Bps"], r["write_Bps_mean"])}
        if p["tier"] == "hbm":  # the plan writes nothing to HBM (the running batch's own KV)
            row["write_error"] = None
        rows.append(row)
    return {"trace": trace.name, "model": model.name, "node": node.name, "tp": tp,
            "policy": policy, "writes": writes, "resume_rate_per_s": resume_rate, "tokens_per_resume": tokens,
            "pause_median_s": fit["median_s"], "pause_sigma": fit["sigma"],
            "return_probability": stats["return_probability"],
            "batch_seqs": plan["batch_seqs"], "batch_context_tokens": batch_context,
            "block_bytes": block_bytes,
            "plan_hit_share": sum(r["plan_hit_share"] for r in rows),
            "replay_hit_share": rep["block_hit_rate"],
            "replay_shared_prefix_token_share": stats["hit_tokens_shared_prefix"],
            "replay_continuation_token_share": stats["hit_tokens_continuation"],
            "tiers": rows, "plan": plan, "replay": rep}


def _check_same_replay(rep, trace, specs, block_bytes, policy, writes="back"):
    """ValueError unless rep replayed this trace on these tiers, blocks and policy."""
    ran = [(t["tier"], t["capacity_bytes"], t["read_bandwidth_Bps"], t["write_bandwidth_Bps"])
           for t in rep["tiers"]]
    want = [(s.name, s.capacity_bytes, s.read_Bps, s.write_Bps) for s in specs]
    same = (ran == want and rep["block_bytes"] == block_bytes and rep["policy"] == policy
            and rep.get("writes", "back") == writes
            and rep["ttl_s"] is None and rep["requests"] == trace.n_requests
            and rep["duration_s"] == trace.duration_s)
    if not same:
        raise ValueError("the replay given ran on other tiers, block size, policy or trace "
                         "than this plan; replay again (pass replay=None)")


def max_abs(rows, key):
    """Largest |error| over tiers (skipping None), or nan-free 0.0 if none."""
    vals = [abs(r[key]) for r in rows if r[key] is not None and math.isfinite(r[key])]
    return max(vals) if vals else 0.0
