"""``kvmath tiers``: a node's tiers for a load. Which tier holds which paused caches (by age),
the capacity, traffic, endurance and compute each needs at ``--resume-rate``, and whether the
node can run it (:func:`kvmath.node.plan.tier_plan`), printed as one JSON object or as the
aligned table of :func:`human`.

The scenario is the record of :func:`kvmath.scenario.build.scenario_of` (its node, GPU and TP
resolved there), its ``reach`` set as reuse sets it (:func:`kvmath.cli.reuse.reach_of`).
"""
from __future__ import annotations

import math
from dataclasses import replace

from kvmath.cli.reuse import print_priced, reach_of
from kvmath.present.format import fmt_bytes, fmt_time
from kvmath.scenario.options import TIERS, add_options


def add_parser(subparsers):
    """Add the ``tiers`` sub-command to an argparse subparsers object."""
    add_options(subparsers.add_parser(TIERS, help="capacity, bandwidth, endurance and compute "
                                      "plan of a node's tiers for a load"), TIERS)


def answer(args):
    """The JSON-ready result of ``kvmath tiers``: the node plan of the scenario."""
    from kvmath.node.plan import tier_plan
    from kvmath.scenario.build import price_overrides, scenario_of
    from kvmath.scenario.engine_config import cache_sizes
    s, cfg = scenario_of(args, TIERS)
    stated = s.reach is not None
    h, h_from = reach_of(s)
    s = replace(s, reach=h)
    out = tier_plan(s.node, s.model, args.tokens, s.resume_rate, s.pause, tp=s.tp, gpu=s.gpu,
                    compute_dtype=s.compute_dtype, batch_seqs=s.batch_seqs,
                    batch_context=s.batch_context,
                    gpu_memory_utilization=s.gpu_memory_utilization,
                    activation_reserve=s.activation_reserve, gpu_price=s.gpu_price,
                    writes_within_rating=bool(s.writes_within_rating), engine=s.engine,
                    price_overrides=price_overrides(s), pool=s.pool, pool_nodes=s.pool_nodes,
                    reach=s.reach, pool_writes=s.pool_writes,
                    turn_new_tokens=s.turn_new_tokens, writes=s.writes, kv_dtype=s.kv_dtype,
                    ep=s.ep, **cache_sizes(s, cfg, s.node, s.tp, s.model))
    out.update(reach_from=h_from, nodes=s.nodes, router=None if stated else s.router)
    if cfg is not None:
        out["engine_config"] = cfg.summary(s.model)
    return out


def run(args):
    """Run ``kvmath tiers``; returns the exit status."""
    print_priced(args, answer(args), human)
    return 0


def columns(header, rows, left=1):
    """Rows of strings as aligned text columns: the first `left` columns left-aligned, the rest
    right-aligned, each as wide as its widest cell whatever the number format."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    def line(cells):
        return "  ".join(f"{c:<{w}}" if i < left else f"{c:>{w}}"
                        for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header)] + [line(r) for r in rows]


def human(plan):
    """The human lines of a node plan (its JSON result)."""
    lines = [f"{plan['model']} on {plan['node']} ({plan['gpus']}x {plan['gpu']}, TP {plan['tp']}, "
             f"{plan['compute_dtype']}), {plan['tokens']:,} tokens "
             f"({fmt_bytes(plan['kv_bytes'], 4)} each stored), {plan['resume_rate_per_s']:g} "
             f"resumes/s, pause {plan['pause']}, engine {plan['engine']}",
             f"HBM for paused caches: {fmt_bytes(max(plan['hbm_free_bytes'], 0), 4)} after "
             f"{plan['gpu_memory_utilization']:.0%} use, {plan['activation_reserve_fraction']:.0%} "
             f"activation reserve, weights and a running batch of {plan['batch_seqs']:g} x "
             f"{plan['batch_context_tokens']:,} tokens ({fmt_bytes(plan['batch_kv_bytes'], 4)})"
             + ("; offload tiers written through" if plan["writes"] == "through" else ""),
             ]
    rows = []
    for t in plan["tiers"]:
        if math.isfinite(t["ttl_to_s"]):
            to = fmt_time(t["ttl_to_s"])
            ages = f"{fmt_time(t['ttl_from_s'])} - {to}" if t["ttl_from_s"] else f"0 - {to}"
        else:  # the tier holds every cache it is given, whatever its age (issue 20: "0 - inf")
            ages = (f"{fmt_time(t['ttl_from_s'])} and older" if t["ttl_from_s"]
                    else "every age")
        share = ("-" if not math.isfinite(t["write_bandwidth_Bps"])
                 else f"{t['write_Bps'] / t['write_bandwidth_Bps']:.0%}")
        dwpd = "-" if t["drive_writes_per_day"] is None else f"{t['drive_writes_per_day']:.3g}"
        rows.append([t["tier"], fmt_bytes(t["capacity_bytes"], 4), f"{t['caches_held']:,.0f}",
                     ages, f"{t['resume_fraction']:.1%}", fmt_bytes(t["read_Bps"], 4) + "/s",
                     fmt_bytes(t["write_Bps"], 4) + "/s", share,
                     fmt_bytes(t["dropped_write_Bps"], 4) + "/s", dwpd])
    lines += columns(["tier", "capacity", "caches", "ages held", "resumes", "read", "write",
                      "of write cap", "dropped", "drive w/day"], rows)
    if plan["reach"] < 1 or plan.get("nodes", 1) > 1:
        lines.append(f"routing: {plan['reach']:.3g} of returns reach the node's own tiers "
                     f"({plan['reach_from']})")
    pool = next((t for t in plan["tiers"] if t["tier"] == "pool"), None)
    if pool is not None:
        lines.append(f"pool: {pool['pool']} ({fmt_bytes(pool['pool_capacity_bytes'], 4)}) shared by "
                     f"{pool['pool_nodes']} GPU nodes, written {pool['pool_writes']}, read at "
                     f"{fmt_time(pool['reload_s'])} a reload; capacity priced as its medium "
                     "(its servers are not priced)")
    lines.append(f"recomputed: {plan['recomputed_fraction']:.1%} of resumes, "
                 f"{plan['prefill_demand_gpu_s_per_s']:.3g} GPU-s of prefill per s on "
                 f"{plan['gpus']} GPUs")
    limit = plan.get("compute_limit_resume_rate_per_s")
    if limit is not None:
        lines.append(f"compute: {'feasible' if plan['compute_feasible'] else 'INFEASIBLE'}; "
                     "recomputes outgrow the GPUs above "
                     + (f"{limit:.3g} resumes/s" if math.isfinite(limit)
                        else "no resume rate (the node's own tiers serve every resume)"))
    for t in plan["tiers"]:
        if t["endurance_ok"] is False:
            lines.append(f"endurance: {t['tier']} writes {t['drive_writes_per_day']:.3g} drive "
                         f"writes/day against a rating of {_drive_rating(plan)}: worn out in "
                         f"{t['drive_lifetime_years']:.2g} years")
    if not plan["hbm_feasible"]:
        lines.append(f"HBM: INFEASIBLE, the running batch overfills HBM by "
                     f"{fmt_bytes(-plan['hbm_free_bytes'], 4)}")
    return "\n".join(lines)


def _drive_rating(plan):
    from kvmath.tables.rows import drives
    d = drives()[plan["drive"]]
    return f"{d.drive_writes_per_day:g} ({d.name})"

