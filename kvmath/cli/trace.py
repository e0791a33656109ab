"""``kvmath trace FILE --model M``: reuse, LRU curve and tier replay of a request trace.

FILE is a bundled trace name (conversation, synthetic) or a Mooncake / generic trace file
(see :mod:`kvmath.traces.readers`). Bad input raises TraceError (a DataError): exit status 2.
The scenario (the node, default dgx-h100, its GPU and TP, the engine and the replay's options) is
the record of :func:`kvmath.scenario.build.scenario_of`, as tiers reads it. Also the parser of
every command that reads a trace (:func:`add_trace_command`: route and fleet too) and the window
line they share.
"""
from __future__ import annotations

import math

import numpy as np

from kvmath.cli.output import print_result


def add_trace_command(subparsers, command, help):
    """Add a sub-command that reads a request trace FILE and the options declared for it."""
    from kvmath.scenario.options import add_options
    p = subparsers.add_parser(command, help=help)
    p.add_argument("file", metavar="FILE", help="bundled trace (conversation, synthetic) or a "
                   "Mooncake/generic JSONL(.gz) or Parquet trace")
    add_options(p, command)
    return p


def add_parser(subparsers):
    """Add the ``trace`` sub-command to an argparse subparsers object."""
    return add_trace_command(subparsers, "trace", "reuse, LRU hit-rate curve and tier replay of "
                             "a request trace")


def analyse(args):
    """The JSON-ready result of ``kvmath trace``."""
    from kvmath.scenario.build import scenario_of, with_node_tp
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.scenario.options import TRACE
    from kvmath.traces import replay as C
    from kvmath.traces import readers as T

    s, cfg = scenario_of(args, TRACE)
    if s.sample_rate:
        return analyse_sampled(args, s, cfg)
    trace = T.load(args.file)
    s = with_node_tp(s, s.batch_context or T.batch_context_of(trace, s.model))
    node, model, gpu, tp, engine = s.node, s.model, s.gpu, s.tp, s.engine
    stats = T.reuse_stats(trace)
    distances = C.stack_distances(trace)
    curve = C.lru_curve(trace, distances)
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens, engine=engine,
                                   kv_dtype=s.kv_dtype)
    batch_context = s.batch_context or T.batch_context_of(trace, model)
    specs = C.node_tiers(node, model, tp=tp, remote_bytes=s.remote_bytes,
                         batch_seqs=s.batch_seqs, batch_context=batch_context,
                         **cache_sizes(s, cfg, node, tp, model))
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens, engine, s.kv_dtype)
    cost = C.HitCost(model, gpu, specs, tp, node.gpus, engine=engine, kv_dtype=s.kv_dtype)
    from kvmath.node.capacities import node_capacities
    hbm_free = node_capacities(node, model, tp=tp, batch_seqs=s.batch_seqs,
                               batch_context=batch_context)["hbm_free_bytes"]
    rep = C.replay(trace, specs, block_bytes, policy=s.policy, ttl_s=s.ttl,
                   min_uses=s.min_uses, cost=cost, writes=s.writes)
    served = served_one_node(trace, s, cache_sizes(s, cfg, node, tp, model))
    keep = ("tier", "capacity_bytes", "hit_rate", "read_Bps_mean", "read_Bps_p99",
            "write_Bps_mean", "write_Bps_p99", "writes_dropped", "writes_filtered",
            "drive_writes_per_day", "lifetime_years")
    pauses = stats.pop("pauses")
    try:
        fit, unfit = T.fit_lognormal(pauses), None
    except ValueError as e:  # too few pauses, or all equal: no fit, and why
        fit, unfit = None, str(e)
    policies = (policy_rows(trace, specs, block_bytes, distances) if args.policies else None)
    return {
        "trace": args.file, "model": model.name, "node": node.name, "tp": tp,
        "policy": s.policy, "writes": s.writes, "requests": trace.n_requests,
        "prompt_tokens": int(trace.prompt_tokens.sum()), "duration_s": trace.duration_s,
        "block_tokens": trace.block_tokens, "block_bytes": block_bytes,
        "batch_context_tokens": batch_context,
        "max_token_hit_rate": stats["max_token_hit_rate"],
        "max_block_hit_rate": stats["max_block_hit_rate"],
        "reuse": {k: v for k, v in stats.items() if k not in ("trace", "requests")},
        "pause_fit": fit, "pause_fit_refused": unfit,
        "lru_curve_sample_rate": curve.sample_rate,
        "lru_curve": curve.rows(),
        "token_hit_rate": rep["token_hit_rate"], "block_hit_rate": rep["block_hit_rate"],
        "tiers": [{k: row[k] for k in keep if k in row} for row in rep["tiers"]],
        **{k: rep[k] for k in ("gpu_seconds_saved_per_s", "gpu_seconds_saved_per_s_by_tier",
                               "prefill_gpu_s_per_s_no_cache", "prefill_gpu_s_per_s",
                               "node_gpu_s_per_s")},
        # the running batch must fit HBM too, as tiers says (issue 20: it had set HBM to 0 B)
        "hbm_free_bytes": hbm_free, "hbm_feasible": hbm_free >= 0,
        **window_keys(trace, model),
        # the node serving the trace step by step, its engine's scheduler (issue 35: decode at a
        # fixed batch and one prefill at a time had called nodes that serve infeasible)
        "served": served, "feasible": served["keeps_up"] and hbm_free >= 0,
        **({"engine": engine.name} if engine is not None else {}),
        **({"engine_config": cfg.summary(model)} if cfg is not None else {}),
        **({"policies": policies} if policies is not None else {}),
    }


def served_one_node(trace, s, cache_kw):
    """The trace served by its one node, step by step (:func:`kvmath.fleet.run.fleet_of`, no
    tier replay): its layout, latencies and whether it keeps up."""
    from dataclasses import replace
    from kvmath.fleet.run import fleet_of
    a = fleet_of(trace, replace(s, nodes=1, router="round-robin"), tier_replay=False,
                 cache_kw=cache_kw)
    return {k: a[k] for k in ("layout", "engine_settings", "ttft_s", "tpot_s", "e2e_s",
                              "requests_per_s", "output_tokens_per_s", "token_hit_rate",
                              "preemptions", "requests_refused", "keeps_up", "keeps_up_why")}


def policy_rows(trace, specs, block_bytes, distances):
    """``--policies``: LRU, ARC, S3-FIFO and Belady (libCacheSim) at the tiers' capacities added
    up, beside kvmath's prefix LRU (:func:`kvmath.traces.policies.compare`)."""
    from kvmath.traces import policies as PL
    caps = PL.tier_capacities(specs, block_bytes)
    rows = PL.compare(trace, [b for _, _, b in caps], distances=distances)
    return {"simulator": f"libCacheSim {PL.version()}", "fed": PL.FED,
            "s3fifo_min_blocks": PL.S3FIFO_MIN_BLOCKS,
            "rows": [{"tiers": names, "capacity_bytes": size, **row}
                     for (names, size, _), row in zip(caps, rows)]}


#: what a sample leaves out, in words (the JSON's ``not_computed`` and the human answer's)
SAMPLED_LEAVES_OUT = ("the reuse statistics, the pause fit and the tier replay need every block "
                      "access: run without --sample-rate for them")


def analyse_sampled(args, s, cfg):
    """The JSON-ready result of ``kvmath trace --sample-rate R``: the trace read as a stratified
    SHARDS sample, taken as the file is read (:func:`kvmath.traces.readers.load`: memory holds
    the kept accesses, never every access), and what a sample answers: the LRU hit-rate curve,
    and the hit rate of one LRU of each of the node's tiers' capacities added up (HBM, then
    HBM and host DRAM, ...: what ``route`` gives each node). A rate that keeps no block of the
    hashed stratum is refused, naming --sample-rate. ``s``: the scenario record, ``cfg``: the
    engine's own settings or None (:func:`kvmath.scenario.build.scenario_of`)."""
    from kvmath.evaluate.api import ScenarioError
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.traces import readers as T
    from kvmath.traces import replay as C
    from kvmath.fleet.nodes import node_setup
    from kvmath.scenario.build import with_node_tp
    node, model, engine = s.node, s.model, s.engine
    rate = T.shards_rate(s.sample_rate)
    if rate == 0:
        raise ScenarioError(f"--sample-rate {s.sample_rate:g} keeps no block: SHARDS keeps a "
                            "block when a 32-bit hash of it falls below R x 2^32, so a rate below "
                            f"2^-32 ({1 / T.SHARDS_MODULUS:.3g}) keeps none")
    trace = T.load(args.file, s.sample_rate)
    full = trace.full_positions
    hashed = int(np.maximum(trace.n_blocks - full, 0).sum())  # the hash-sampled stratum
    kept = int((trace.pos >= full).sum())
    if hashed and not kept:
        raise ScenarioError(f"--sample-rate {s.sample_rate:g} kept none of the trace's "
                            f"{hashed:,} block accesses past each request's {_first(full)}, "
                            "and a sample of none estimates nothing (a rate R keeps about R x "
                            f"{hashed:,} of them)")
    curve = C.lru_curve(trace)
    batch_context = s.batch_context or T.batch_context_of(trace, model)
    s = with_node_tp(s, batch_context)
    tp = s.tp
    specs, block_bytes, _, _, _ = node_setup(trace, model, node, tp, engine, s.batch_seqs,
                                             batch_context,
                                             **cache_sizes(s, cfg, node, tp, model))
    from kvmath.traces.policies import tier_capacities
    at_tiers = []
    for names, size, blocks in tier_capacities(specs, block_bytes):
        b, t = curve.at([blocks])
        at_tiers.append({"tiers": names, "capacity_bytes": size, "capacity_blocks": blocks,
                         "block_hit_rate": float(b[0]), "token_hit_rate": float(t[0])})
    any_block = bool(trace.n_blocks.sum())
    return {
        "trace": args.file, "model": model.name, "node": node.name, "tp": tp,
        "requests": trace.n_requests, "prompt_tokens": int(trace.prompt_tokens.sum()),
        "duration_s": trace.duration_s, "block_tokens": trace.block_tokens,
        "block_bytes": block_bytes, "batch_context_tokens": batch_context,
        "sample_rate": rate, "full_positions": full,
        "block_accesses": int(trace.n_blocks.sum()), "sampled_accesses": len(trace.hashes),
        "max_token_hit_rate": curve.max_token_hit_rate,
        "max_block_hit_rate": curve.max_block_hit_rate if any_block else None,
        "lru_curve_sample_rate": curve.sample_rate, "lru_curve": curve.rows(),
        "lru_at_tier_capacity": at_tiers, "not_computed": SAMPLED_LEAVES_OUT,
        **window_keys(trace, model),
        **({"engine": engine.name} if engine is not None else {}),
        **({"engine_config": cfg.summary(model)} if cfg is not None else {}),
    }


def window_keys(trace, model):
    """{context_window_tokens, prompts_beyond_window}: the model's served window (under
    --rope-scaling the card's) and how many of the trace's prompts are longer: an engine
    refuses those, while the replay counts them as the trace gives them."""
    return {"context_window_tokens": model.max_context_tokens,
            "prompts_beyond_window": int((trace.prompt_tokens > model.max_context_tokens).sum())}


def window_line(r):
    """The output's line for prompts beyond the window, or None when every prompt fits."""
    n = r["prompts_beyond_window"]
    if not n:
        return None
    return (f"{n:,} of {r['requests']:,} prompts are longer than {r['model']}'s window of "
            f"{r['context_window_tokens']:,} tokens: an engine refuses them, and this replay "
            "counts them as the trace gives them (--rope-scaling serves a longer window where "
            "the model's card states one)")


def _first(n):
    return "first block" if n == 1 else f"first {n} blocks"


def _sampled_human(r):
    from kvmath.present.format import fmt_bytes
    lines = [f"{r['trace']}: {r['requests']:,} requests over {r['duration_s']:,.0f} s, "
             f"{r['prompt_tokens']:,} prompt tokens; {r['model']} on {r['node']} (TP {r['tp']})",
             f"a stratified SHARDS sample at rate {r['sample_rate']:.3g}: "
             f"{r['sampled_accesses']:,} of {r['block_accesses']:,} block accesses kept (every "
             f"request's {_first(r['full_positions'])}, the others by hash, weighted by 1/R)",
             f"unlimited LRU cache: {r['max_token_hit_rate']:.1%} of tokens, "
             + (f"{r['max_block_hit_rate']:.1%} of blocks" if r["max_block_hit_rate"] is not None
                else "no prompt fills a block"),
             f"{'one LRU of the capacity of':<28} {'capacity':>10} {'tokens hit':>10} "
             f"{'blocks hit':>10}"]
    for x in r["lru_at_tier_capacity"]:
        lines.append(f"{' + '.join(x['tiers']):<28} {fmt_bytes(x['capacity_bytes'], 4):>10} "
                     f"{x['token_hit_rate']:>10.1%} {x['block_hit_rate']:>10.1%}")
    lines.append(f"not computed from a sample: {r['not_computed']}")
    if window_line(r):
        lines.append(window_line(r))
    return "\n".join(lines)


def _human(r):
    if "not_computed" in r:
        return _sampled_human(r)
    from kvmath.present.format import fmt_bytes, fmt_time
    lines = [f"{r['trace']}: {r['requests']:,} requests over {r['duration_s']:,.0f} s, "
             f"{r['prompt_tokens']:,} prompt tokens; {r['model']} on {r['node']} (TP {r['tp']})",
             f"unlimited prefix cache: {r['max_token_hit_rate']:.1%} of tokens, "
             + (f"{r['max_block_hit_rate']:.1%} of blocks" if r["max_block_hit_rate"] is not None
                else "no prompt fills a block"),
             f"tier replay ({r['policy']}, written {r['writes']}): {r['token_hit_rate']:.1%} of "
             "tokens hit",
             f"{'tier':<10} {'capacity':>10} {'hits':>7} {'read mean/p99':>22} "
             f"{'write mean/p99':>22} {'dropped':>8}"]
    for t in r["tiers"]:
        lines.append(f"{t['tier']:<10} {fmt_bytes(t['capacity_bytes'], 4):>10} "
                     f"{t['hit_rate']:>7.1%} "
                     f"{fmt_bytes(t['read_Bps_mean'], 3) + '/' + fmt_bytes(t['read_Bps_p99'], 3):>22} "
                     f"{fmt_bytes(t['write_Bps_mean'], 3) + '/' + fmt_bytes(t['write_Bps_p99'], 3):>22} "
                     f"{t['writes_dropped']:>8,}")
        if "drive_writes_per_day" in t:
            life = t["lifetime_years"]
            lines.append(f"{'':<10} {t['drive_writes_per_day']:.3g} drive writes per day, "
                         + (f"rated life {life:.3g} years at that rate" if math.isfinite(life)
                            else "so no wear"))  # issue 20: "rated life inf years"
    sv = r["served"]
    lines.append(f"GPU-seconds saved per second: {r['gpu_seconds_saved_per_s']:.3g}; prefill "
                 f"demand {r['prefill_gpu_s_per_s']:.3g} GPU-s/s (no cache "
                 f"{r['prefill_gpu_s_per_s_no_cache']:.3g}) of the node's "
                 f"{r['node_gpu_s_per_s']:.3g}")
    def t(v):
        return "-" if v is None else fmt_time(v)
    lines.append(f"served step by step ({sv['layout']}): time to first token "
                 f"p50 {t(sv['ttft_s']['p50'])}, p90 {t(sv['ttft_s']['p90'])}, "
                 f"p99 {t(sv['ttft_s']['p99'])}; time per output token p50 "
                 f"{t(sv['tpot_s']['p50'])}; "
                 + ("keeps up" if sv["keeps_up"] else "DOES NOT KEEP UP") + f" ({sv['keeps_up_why']})")
    if "policies" in r:
        lines.extend(_policies_human(r["policies"]))
    if not r["hbm_feasible"]:
        lines.append(f"HBM: INFEASIBLE, the running batch overfills HBM by "
                     f"{fmt_bytes(-r['hbm_free_bytes'], 4)}")
    if window_line(r):
        lines.append(window_line(r))
    return "\n".join(lines)


def _policies_human(p):
    from kvmath.present.format import fmt_bytes
    from kvmath.traces.policies import NAMES, POLICIES
    lines = [f"block hit ratio of one cache of the tiers' capacity, by policy ({p['simulator']}; "
             f"{p['fed']}); kvmath's LRU counts a request's leading blocks only",
             f"{'capacity of':<28} {'capacity':>10} {'blocks':>10} "
             + " ".join(f"{NAMES[k]:>8}" for k in POLICIES) + f" {'kvmath LRU':>10}"]
    def cell(v, width):
        return f"{'n/a':>{width}}" if v is None else f"{v:>{width}.1%}"
    for x in p["rows"]:
        cells = " ".join(cell(x[k], 8) for k in POLICIES)
        lines.append(f"{' + '.join(x['tiers']):<28} {fmt_bytes(x['capacity_bytes'], 4):>10} "
                     f"{x['capacity_blocks']:>10,} {cells} {cell(x['kvmath_lru_prefix'], 10)}")
    if any(x["accesses"] == 0 for x in p["rows"]):
        lines.append("n/a: no prompt fills a block, so there is no block access to hit")
    elif any(x["s3fifo"] is None for x in p["rows"]):
        lines.append(f"S3-FIFO n/a: below {p['s3fifo_min_blocks']} blocks its small FIFO (10%) "
                     "holds under two blocks, and libCacheSim admits nothing")
    return lines


def run(args):
    """Run ``kvmath trace``; returns the exit status."""
    print_result(args, analyse(args), _human)
    return 0
