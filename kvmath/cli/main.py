"""Command line: ``python -m kvmath compare|list``.

A user's mistake (unknown name, malformed file, bad number) prints one line
on stderr and exits with status 2; it never shows a traceback.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import replace

from kvmath.cli import route as route_cli
from kvmath.cli import trace as trace_cli
from kvmath.evaluate.compare import (BEYOND_CONTEXT_ELSEWHERE, BEYOND_CONTEXT_HINT, ScenarioError, compare,
                       node_tp)
from kvmath.evaluate.logic import dense_flops, node_gpu
from kvmath.scenario.engine_config import cache_sizes, check_tier, engine_of
from kvmath.scenario.options import COMPARE, DEFAULT_PAUSE, REUSE, TIERS, add_options  # noqa: F401 (chapters)
from kvmath.scenario.read import model_of, read_scenario
from kvmath.tables.rows import (DataError, UnknownName, allow_projections, bundled,
                     resolve_codec, resolve_engine, resolve_gpu, resolve_tier)
from kvmath.present.format import TIE_SPEEDUP, fmt_bytes, fmt_time, fmt_token_list
from kvmath.cli.output import dump, print_result
from kvmath.errors import InputError, UsageError
from kvmath.version import version_line

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)

    def _print_message(self, message, file=None):
        """As argparse's, but an output that cannot be written (a full disk) is an error, not
        silently dropped (main reports it and exits nonzero)."""
        if message:
            file = file or sys.stdout
            file.write(message)
            file.flush()


def build_parser():
    """The argument parser, built from the option table of :mod:`kvmath.scenario.options`."""
    p = _Parser(prog="python -m kvmath", description="Reload a paused conversation's KV cache, "
                "or recompute it by prefill? Bandwidths are SI (1 GB/s = 1e9 B/s).")
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_options(sub.add_parser(COMPARE, help="reload against recompute for one scenario"), COMPARE)
    sub.add_parser("list", help="bundled models, GPUs, tiers, nodes and pause distributions")
    add_options(sub.add_parser(REUSE, help="break-even return probability and best TTL for "
                               "offloading"), REUSE)
    add_options(sub.add_parser(TIERS, help="capacity, bandwidth, endurance and compute plan of "
                               "a node's tiers for a load"), TIERS)
    trace_cli.add_parser(sub)
    route_cli.add_parser(sub)
    route_cli.add_fleet_parser(sub)
    return p


def _layout(r):
    parts = [f"{r['gpus']}x {r['gpu']}"]
    if r["dp_attention"]:
        parts.append(f"attention data-parallel (TP {r['tp']}), experts EP {r['ep']}")
    else:
        parts.append(f"TP {r['tp']}" + (f", experts EP {r['ep']}" if r["ep"] > 1 else ""))
    parts.append(f"{r['weight_dtype']} weights, {r['compute_dtype']} compute")
    return ", ".join(parts)


def _band(pair):
    return f"[{fmt_time(pair[0])} to {fmt_time(pair[1])}]"


def _side(model_fpb, gpu_fpb):
    """The winner the division alone names: reload when the model needs more FLOP per KV byte."""
    return "reload" if model_fpb > gpu_fpb else "recompute"


def override_note(r):
    """One line when the one division's winner is not the scenario's, naming what overrides it.

    The division compares the linear term only, at a length every layer holds, with the flat
    prefill and no fixed cost. Adding, in turn, the attention term (and sliding windows) at this
    length, the prefill model in use (the weight-read floor of the flat roofline, or the
    calibrated operator model), and the reload's fixed cost, the factors that move the answer to
    the final winner are named. None when the division already agrees.
    """
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    if division == r["winner"]:
        return None
    transfer = r["reload_s"] - r["reload_fixed_s"]
    if r["prefill_model"] == "calibrated":
        prefill = (f"the calibrated prefill ({fmt_time(r['recompute_s'])}, against "
                   f"{fmt_time(r['compute_s'])} of compute at the flat efficiency)")
    else:
        prefill = (f"recompute's weight-read floor ({fmt_time(r['weights_read_s'])} to read the "
                   f"weights once, against {fmt_time(r['compute_s'])} of compute)")
    steps = [
        (_side(r["model_flops_per_kv_byte_at_tokens"], r["gpu_flops_per_link_byte"]),
         f"the attention term at {r['tokens']:,} tokens (model "
         f"{r['model_flops_per_kv_byte_at_tokens']:,.0f} FLOP/B at this length)"),
        ("reload" if transfer < r["recompute_s"] else "recompute", prefill),
        (r["winner"], f"the reload's fixed cost ({fmt_time(r['reload_fixed_s'])})"),
    ]
    why, prev = [], division
    for side, reason in steps:
        if side != prev and side == r["winner"]:
            why.append(reason)
        prev = side
    return (f"note: the one division says {division} wins, but {r['winner']} wins here because "
            f"of {' and '.join(why) or 'the fixed costs'}")


def _load_text(r):
    """Where the reloads in flight come from, as the output line says it."""
    if r["load_from"] == "resume rate":
        return (f"at {r['resume_rate_per_s']:g} resumes/s, {r['gpu_reloads']:.3g} reload(s) in "
                f"flight on each replica's own links, sharing adds {fmt_time(r['reload_queue_s'])}")
    if r["load_from"] == "given":
        return "as given"
    return "every replica at once, the worst case; --resume-rate sets a load"


def _costs(r):
    """What the engine charges a request, as the output line says it."""
    if r["engine"] == "ideal":
        return "the ideal engine charges none"
    text = (f"{fmt_time(r['request_fixed_s'])} fixed, {r['hash_token_s'] * 1e9:.3g} ns/token "
            f"hashing, {r['tokenize_token_s'] * 1e9:.3g} ns/token tokenising"
            + (" (token IDs)" if r["token_ids"] else ""))
    if not r["engine_costs_calibrated"]:
        text += f"; {r['engine']}'s request costs are not calibrated (engine_costs.csv)"
    return text


def _human(r):
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    rows = [
        ("scenario", f"{r['model']}, tier {r['tier']}, {r['tokens']:,} tokens, KV {r['kv_dtype']}"
                     f" (window {r['context_window_tokens']:,})"),
        ("deployment", _layout(r)),
        ("engine", f"{r['engine']}, " + (
            f"at {r['resume_rate_per_s']:g} resumes/s on a node of {r['gpus_per_node']:g} GPUs: "
            f"{r['concurrent_reloads']:.3g} reload(s) in flight on its shared hops, "
            f"{r['gpu_reloads']:.3g} on each replica's own links; sharing adds "
            f"{fmt_time(r['reload_queue_s'])}" if r["load_from"] == "resume rate" else
            f"{r['concurrent_reloads']:.3g} replica(s) reloading at once per node of "
            f"{r['gpus_per_node']:g} GPUs ({_load_text(r)})")),
        ("KV per token", f"{r['kv_bytes_per_token']:,.0f} B"),
        ("KV moved", f"{fmt_bytes(r['kv_bytes'], 4)} ({fmt_bytes(r['kv_bytes_per_gpu'], 4)} per GPU)"),
        *([("codec", f"{r['codec']}: {r['codec_compression_ratio']:.3g}x fewer bytes on the path "
                     f"({fmt_bytes(r['kv_bytes_moved_per_gpu'], 4)} per GPU at "
                     f"{r['reload_wire_bandwidth_Bps'] / 1e9:.3g} GB/s), decoded at "
                     f"{r['codec_decode_Bps'] / 1e9:.3g} GB/s per GPU: "
                     f"{fmt_time(r['codec_decode_s'])}"
                     + (" overlapped with the transfer" if r["codec_pipelined"]
                        else " after the transfer")
                     + ("; a what-if on this tier (LMCache codes remote backends only)"
                        if r["codec_what_if"] else ""))] if r.get("codec") else []),
        ("recompute", f"{fmt_time(r['recompute_s'])} {_band(r['recompute_s_band'])}  "
                      f"({r['prefill_model']} prefill of {r['prefill_flops']:.3g} FLOP)"),
        ("reload", f"{fmt_time(r['reload_s'])} {_band(r['reload_s_band'])}  "
                   + (f"({r['reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU, "
                      if r["reload_bandwidth_Bps"] is not None else "(nothing moves, ")
                   + f"{fmt_time(r['reload_fixed_s'])} fixed cost, "
                     f"{fmt_time(r['hit_cost_s'])} connector"
                   + (f"; {fmt_time(r['overlap_hidden_s'])} of it hidden under the step, "
                      "loaded layer by layer" if r["overlap_hidden_s"] > 0 else "") + ")"),
        ("request", f"{fmt_time(r['request_s'])} on either side ({r['new_tokens']:,} new "
                    f"token(s); {_costs(r)})"),
        ("TTFT", f"recompute {fmt_time(r['ttft_recompute_s'])} "
                 f"{_band(r['ttft_recompute_s_band'])}, reload {fmt_time(r['ttft_reload_s'])} "
                 f"{_band(r['ttft_reload_s_band'])}"),
        ("one division", f"model {r['model_flops_per_kv_byte']:,.0f} FLOP/B vs GPU "
                         f"{r['gpu_flops_per_link_byte']:,.0f} FLOP/B: favours {division}"),
        ("break-even at", fmt_token_list(r["breakeven_tokens"])
         if r["breakeven_tokens"] else "none (same winner at every length from 2 tokens)"),
        ("min bandwidth", f"{r['min_reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU"
         + (" of path, before decoding" if r.get("codec") else "")
         if math.isfinite(r["min_reload_bandwidth_Bps"])
         else "none suffices (the fixed cost, engine step included"
         + (", and the codec's decode" if r.get("codec") else "") + ", alone loses)"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    loser = "recompute" if r["winner"] == "reload" else "reload"
    flips = " (the other wins somewhere inside the bands)" if r["verdict_flips_in_band"] else ""
    margin = (f"{r['speedup']:.3g}x faster than {loser}" if r["speedup"] >= TIE_SPEEDUP
              else f"by {100 * (r['speedup'] - 1):.2g} % (a tie in all but name)")
    lines.append(f"verdict: {r['winner']} wins, {margin}{flips}")
    note = override_note(r)
    if note:
        lines.append(note)
    if not r["prefill_fit_own"] and r["prefill_model"] == "calibrated":
        lines.append(f"note: {r['gpu']} has no operator profile of its own; its prefill is "
                     "H100's fit, and the recompute band is as wide as that fit's error on the "
                     "GPUs it was held against")
    if r["known_limits"]:
        lines.append(f"note: validation row(s) {', '.join(r['known_limits'])} show the model "
                     "missing this configuration; their error is in the bands")
    if r.get("load_kernel"):
        lines.append(f"note: {r['engine']} loads copies of {fmt_bytes(r['copy_bytes'], 3)} "
                     "by its copy kernel, charged no per-copy cost (an assumption, no published "
                     "rate: the link's asymptote); the band's slow end is the driver copies it "
                     "replaced")
    return "\n".join(lines)


def _version_head(version):
    """An engine profile's version without its parentheses and past its first clause."""
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", version)
        if shorter == version:
            return re.split(r"[:;]", shorter)[0].strip()
        version = shorter


def _list():
    cat = bundled()
    out = ["models:"]
    for m in cat.models.values():
        out.append(f"  {m.name:<16} {m.attention_kind}, {m.layers} layers, {m.hf_repo}")
    proj = " (projection: --allow-projection)"
    out.append("gpus:")
    for g in cat.gpus.values():
        out.append(f"  {g.name:<16} {g.description}" + (proj if g.kind == "projection" else ""))
    out.append("tiers:")
    for t in cat.tiers.values():
        projected = any(cat.links[h.link].kind == "projection" for h in t.hops
                        if h.link in cat.links)
        out.append(f"  {t.name:<16} {' -> '.join(h.link for h in t.hops)}"
                   + (f" [on {', '.join(t.gpus)}]" if t.gpus else "")
                   + (proj if projected else ""))
    from kvmath.tables.rows import nodes, pauses
    from kvmath.tables.rows import deployments, engines
    out.append("engines:")
    from kvmath.evaluate.compare import DEFAULT_ENGINE
    for e in engines().values():
        mark = " (default)" if e.name == DEFAULT_ENGINE else ""
        out.append(f"  {e.name:<22} {e.layout}, {e.engine}{mark}; {_version_head(e.version)}")
    out.append("deployments:")
    for d in deployments().values():
        attn = "data-parallel attention" if d.dp_attention else f"TP {d.tp}"
        out.append(f"  {d.model} on {d.gpu}: {d.weight_dtype} weights, {attn}, "
                   + (f"experts EP {d.ep}" if d.ep > 1 else "experts sharded by TP"))
    out.append("nodes:")
    for n in nodes().values():
        out.append(f"  {n.name:<16} {n.description}")
    out.append("pauses:")
    for pz in pauses().values():
        out.append(f"  {pz.name:<16} {pz.distribution}, median {pz.median_s:g} s, "
                   f"returns with p = {pz.return_probability:g}")
    return "\n".join(out)


def _ttl_text(ttl):
    return "none pays (do not offload)" if ttl == 0 else fmt_time(ttl) if math.isfinite(ttl) \
        else "keep until return"


def _p_text(p, r):
    return f"{p:.3g}" if p is not None else "n/a" if r["saving_gpu_s"] <= 0 else "none: not even p = 1 pays"


def _reuse_human(r):
    rows = [("scenario", f"{r['model']} on {r['tp']}x {r['gpu']}, tier {r['tier']}, "
                         f"{r['tokens']:,} tokens, pause {r['pause']}, engine {r['engine']}"),
            ("saving per reuse", f"{r['saving_gpu_s']:.3g} GPU-s (${r['saving_usd']:.3g} at "
                                 f"${r['gpu_usd_per_hour']:.3g} per GPU-hour)"),
            ("best TTL", _ttl_text(r["ttl_s"])),
            ("hit probability", f"{r['hit_probability']:.3f} of returning conversations"),
            ("break-even p", _p_text(r["p_breakeven"], r)),
            ("value per offload", f"${r['value_usd']:.3g}")]
    if r.get("codec"):  # what the tier holds and writes, and what a reload decodes
        rows.insert(1, ("codec", f"{r['codec']}: the tier holds {fmt_bytes(r['kv_bytes'])} per "
                                 f"cache; a reload decodes it ({fmt_time(r['reload_s'])} "
                                 "reload; encoding not charged)"
                                 + ("; a what-if on this tier (LMCache codes remote backends "
                                    "only)" if r.get("codec_what_if") else "")))
    if r["reach"] < 1 or r.get("pool"):  # several nodes: the share of returns that find it
        rows.insert(4, ("reach", f"{r['reach']:.3g} of returns reach the cache's node "
                                 f"({r['reach_from']})"))
    verdicts = [f"verdict: {r['verdict']} (holding priced at purchase cost)"]
    if r.get("value_usd_opportunity") is not None:
        ttl = r["ttl_s_opportunity"]
        p = r["p_breakeven_opportunity"]
        rows += [("fixed node: hold", f"${r['capacity_usd_per_byte_s_opportunity']:.3g} per "
                  f"byte-second (the hits a held cache displaces on {r['node']})"),
                 ("  best TTL", _ttl_text(ttl)),
                 ("  break-even p", _p_text(p, r)),
                 ("  value", f"${r['value_usd_opportunity']:.3g}")]
        verdicts.append(f"verdict on a fixed node: {r['verdict_opportunity']} "
                        "(holding priced at opportunity cost)")
    if r.get("opportunity_not_priced"):
        verdicts.append(f"note: {r['opportunity_not_priced']}")
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"{k:<{width}}  {v}" for k, v in rows] + verdicts)


def columns(header, rows, left=1):
    """Rows of strings as aligned text columns: the first `left` columns left-aligned, the rest
    right-aligned, each as wide as its widest cell whatever the number format."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    def line(cells):
        return "  ".join(f"{c:<{w}}" if i < left else f"{c:>{w}}"
                        for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header)] + [line(r) for r in rows]


def _tiers_human(plan):
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


def _node_and_gpu(args, need_node=True):
    """(node, gpu): --node, else a bundled node with --gpu's GPU, else dgx-h100 (node None
    when not needed and not given)."""
    from kvmath.tables.rows import node_for_gpu, resolve_node
    gpu = resolve_gpu(args.gpu) if args.gpu else None
    if not need_node and not args.node:
        node = None
    elif args.node:
        node = resolve_node(args.node)
    elif gpu is not None:
        node = node_for_gpu(gpu.name)
        if node is None:
            raise ScenarioError(f"no bundled node has GPU {gpu.name!r}: give --node FILE "
                                "(a nodes CSV row in the bundled format)")
    else:
        node = resolve_node("dgx-h100")
    if node is not None:  # the node's GPU (--gpu must be it), with the node's GPU count
        gpu = node_gpu(node, resolve_gpu(node.gpu), gpu)
    if args.compute_dtype is not None:  # a dtype the GPU cannot compute in: its row and field
        dense_flops(gpu, args.compute_dtype)
    return node, gpu


def _pool_of(args, tier_given=False):
    """(Pool row, GPU nodes sharing it) of --pool and --pool-nodes (default: the fleet's
    --nodes when more than one, else the pool row's gpu_nodes), or (None, None)."""
    from kvmath.tables.rows import resolve_pool
    if not args.pool:
        if args.pool_nodes is not None:
            raise UsageError("--pool-nodes needs --pool (the pool the nodes share)")
        return None, None
    if tier_given:
        raise UsageError("give --tier or --pool, not both (the pool is the tier reloaded from)")
    pool = resolve_pool(args.pool)
    fleet = getattr(args, "nodes", 1) or 1
    return pool, args.pool_nodes or (fleet if fleet > 1 else pool.gpu_nodes)


def _reach_of(args):
    """(h_route, where it came from): --reach, else --router's over --nodes."""
    from kvmath.fleet.routers import reach
    if args.reach is not None:
        return args.reach, "--reach (stated)"
    h = reach(args.router, args.nodes)
    return h, (f"{args.router} over {args.nodes} node(s)" if args.nodes > 1 else "one node")


def _price_overrides(args):
    """((name, Price row), ...) replacing prices.csv rows: a --prices file, then the per-item
    flags (observed the day they are given: a user's own price is never stale)."""
    import datetime

    from kvmath.tables.schema import Row, read
    from kvmath.tables.rows import prices
    rows = dict(prices())
    out = {}
    if args.prices:
        for name, row in read(Row.types["prices"], args.prices).items():
            if name not in rows:
                raise DataError(args.prices, None, "name", f"unknown price {name!r}; expected one "
                                f"of {', '.join(sorted(rows))}")
            out[name] = row
    from kvmath.evaluate.logic import PRICE_OPTIONS
    for flag, name in PRICE_OPTIONS.items():
        value = getattr(args, flag)
        if value is not None:
            out[name] = replace(rows[name], value=value, observed=datetime.date.today(),
                                kind="assumption", source=f"--{flag.replace('_', '-')}",
                                source_location="command line")
    return tuple(sorted(out.items()))


def _run_reuse(args):
    from kvmath.evaluate.reuse import pool_price_tier, reuse, tier_plan
    from kvmath.tables.rows import resolve_pause
    from kvmath.tables.rows import node_drive
    from kvmath.tables.rows import pool_tier
    read_scenario(args, REUSE)
    pool, pool_nodes = _pool_of(args, tier_given=bool(args.tier))
    model, pause = model_of(args), resolve_pause(args.pause)
    tier = pool_tier(pool, pool_nodes) if pool else resolve_tier(args.tier)
    node, gpu = _node_and_gpu(args, need_node=args.resume_rate is not None)
    drive = node_drive(node) if node is not None and tier.name == "nvme" else None
    if node is not None and (args.node or (pool is None and tier.name == "nvme")):
        tier = _node_tier(node, tier)  # the node's own drives, and NICs for a pool
    # every node reaches a pool; the node's own tier only the returns routed to it
    h, h_from = (1.0, "a pool every node reads") if pool else _reach_of(args)
    engine, cfg = engine_of(args)
    check_tier(cfg, tier.name)
    kw = dict(tp=args.tp, gpu_price=args.gpu_price, compute_dtype=args.compute_dtype,
              engine=engine, price_overrides=_price_overrides(args), reach=h,
              price_tier=pool_price_tier(pool) if pool else None,
              turn_new_tokens=args.turn_new_tokens,
              codec=resolve_codec(args.codec) if args.codec else None)
    if kw["codec"] is not None and args.resume_rate is not None:
        raise ScenarioError("--codec with --resume-rate: the node plan that prices holding at "
                            "opportunity cost stores caches uncoded; give one or the other")
    result = reuse(model, gpu, tier, args.tokens, pause, drive=drive, **kw)
    result.update(reach=h, reach_from=h_from, pool=pool.name if pool else None,
                  pool_nodes=pool_nodes)
    result["holding_priced_at"] = "purchase"
    opp = dict(capacity_usd_per_byte_s_opportunity=None, value_usd_opportunity=None,
               p_breakeven_opportunity=None, ttl_s_opportunity=None, verdict_opportunity=None)
    opp["opportunity_not_priced"] = None
    if args.resume_rate is not None and (pool or tier.name not in ("host-dram", "nvme")):
        # said, not dropped (issue 20): the node plan holds HBM, host DRAM and the node's drives
        opp["opportunity_not_priced"] = (f"--resume-rate prices holding at opportunity cost on "
                                         f"the node's own tiers (host-dram, nvme), not {tier.name}")
    elif args.resume_rate is not None:
        plan = tier_plan(node, model, args.tokens, args.resume_rate, pause, tp=args.tp or None,
                         gpu=gpu, compute_dtype=args.compute_dtype, gpu_price=args.gpu_price,
                         find_limit=False, engine=engine, price_overrides=kw["price_overrides"],
                         reach=h, turn_new_tokens=args.turn_new_tokens,
                         **cache_sizes(args, cfg, node, args.tp or node_tp(model, node.gpus),
                                       model))
        row = next((t for t in plan["tiers"] if t["tier"] == tier.name), None)
        if row is None:
            opp["opportunity_not_priced"] = (f"the node plan holds no {tier.name} tier (the "
                                             "engine's settings or the node leave it out)")
        else:
            c = row["capacity_usd_per_byte_s_opportunity"]
            o = reuse(model, gpu, tier, args.tokens, pause, drive=drive, c_cap=c, **kw)
            opp.update(capacity_usd_per_byte_s_opportunity=c, value_usd_opportunity=o["value_usd"],
                       p_breakeven_opportunity=o["p_breakeven"], ttl_s_opportunity=o["ttl_s"],
                       verdict_opportunity=o["verdict"])
    result.update(opp, node=node.name if node is not None else None)
    if cfg is not None:
        result["engine_config"] = cfg.summary()
    return result


def _run_tiers(args):
    from kvmath.evaluate.reuse import tier_plan
    from kvmath.tables.rows import resolve_pause
    read_scenario(args, TIERS)
    node, gpu = _node_and_gpu(args)
    model = model_of(args)
    tp = args.tp or node_tp(model, node.gpus)
    if tp > node.gpus:
        raise ScenarioError(f"--tp {tp} exceeds the node's {node.gpus} GPUs")
    engine, cfg = engine_of(args)
    pool, pool_nodes = _pool_of(args)
    h, h_from = _reach_of(args)
    plan = tier_plan(node, model, args.tokens, args.resume_rate, resolve_pause(args.pause), tp=tp,
                     gpu=gpu, compute_dtype=args.compute_dtype,
                     batch_seqs=args.batch_seqs, batch_context=args.batch_context,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     activation_reserve=args.activation_reserve, gpu_price=args.gpu_price,
                     writes_within_rating=bool(args.writes_within_rating), engine=engine,
                     price_overrides=_price_overrides(args), pool=pool, pool_nodes=pool_nodes,
                     reach=h, pool_writes=args.pool_writes,
                     turn_new_tokens=args.turn_new_tokens, writes=args.writes,
                     **cache_sizes(args, cfg, node, tp, model))
    plan.update(reach_from=h_from, nodes=args.nodes, router=args.router if args.reach is None
                else None)
    if cfg is not None:
        plan["engine_config"] = cfg.summary()
    return plan


def _run_other(args):
    """trace, reuse or tiers; returns the exit status."""
    if args.command == "trace":
        return trace_cli.run(args)
    if args.command == "route":
        return route_cli.run(args)
    if args.command == "fleet":
        return route_cli.run_fleet(args)
    from kvmath.evaluate.reuse import price_warnings
    result = dict(_run_reuse(args) if args.command == "reuse" else _run_tiers(args))
    result["price_warnings"] = price_warnings(result["prices_observed"])
    human = _reuse_human if args.command == "reuse" else _tiers_human
    print_result(args, result, lambda r: "\n".join([human(r)] + [f"warning: {w}"
                                                         for w in r["price_warnings"]]))
    return 0


def run(argv=None):
    """Run the CLI; returns the exit status. Projection rows are refused unless the command's
    scenario allows them (kvmath.scenario.read), and the policy ends with the command."""
    allow_projections(False)
    try:
        return _run(argv)
    finally:
        allow_projections(False)


def _run(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return _command(args)
    except InputError as exc:
        raise _from_node_file(args, _from_scenario_file(args, exc)) from None


def _interrupted(exc):
    """Whether an interrupt caused ``exc`` (anywhere in its chain of causes)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _from_node_file(args, exc):
    """The error, naming the nodes CSV (and its one row) when it is about the node that file
    gave (the shared logic names the node and the field, not the file it came from)."""
    path = getattr(args, "node", None)
    if not path or not os.path.isfile(str(path)) or str(path) in str(exc):
        return exc
    try:
        from kvmath.tables.rows import resolve_node
        name = resolve_node(path).name
    except InputError:
        return exc
    if f"node {name} " not in str(exc):
        return exc
    return ScenarioError(f"{exc} ({path}, row 1)")


def _from_scenario_file(args, exc):
    """The error, naming the scenario file and key of each option it names (``--tp``) that the
    file gave, not the command line (a check across options finds it long after the file)."""
    text = str(exc)
    path = getattr(args, "scenario", None)
    if not path or str(path) in text:
        return exc
    named = [k for k in getattr(args, "scenario_keys_set", ())
             if re.search(rf"--{re.escape(k.replace('_', '-'))}\b", text)]
    if not named:
        return exc
    keys = ", ".join(f"'{k}'" for k in named)
    return ScenarioError(f"{text} ({path}, key{'s' if len(named) > 1 else ''} {keys}: given by "
                         "the scenario file)")


def _command(args):
    if args.command == "list":
        print(_list())
        return 0
    if args.command in ("trace", "route", "fleet", "reuse", "tiers"):
        try:
            return _run_other(args)
        except ScenarioError as exc:  # they take no --allow-beyond-context: do not offer it
            raise ScenarioError(str(exc).replace(BEYOND_CONTEXT_HINT, BEYOND_CONTEXT_ELSEWHERE)) \
                from None
    read_scenario(args, COMPARE)
    from kvmath.evaluate.bands import band
    gpu = resolve_gpu(args.gpu) if args.gpu else None
    pool, pool_nodes = _pool_of(args, tier_given=bool(args.tier))
    if pool is not None:
        from kvmath.tables.rows import pool_tier
        tier = pool_tier(pool, pool_nodes)
    else:
        tier = _compare_tier(args.tier)
    if args.node:  # the node's GPU and count, and an nvme tier of its own drives
        node, gpu = _node_and_gpu(args)
        tier = _node_tier(node, tier)
    engine, cfg = engine_of(args)
    check_tier(cfg, tier.name)
    b = band(model_of(args), gpu, tier,
                     args.tokens, tp=args.tp,
                     bandwidth_Bps=args.bandwidth * 1e9 if args.bandwidth else None,
                     efficiency=args.efficiency, kv_dtype=args.kv_dtype,
                     compute_dtype=args.compute_dtype, engine=engine,
                     concurrent_reloads=args.concurrent_reloads, ep=args.ep, batch=args.batch,
                     resume_rate=args.resume_rate,
                     allow_beyond_context=args.allow_beyond_context, prefill=args.prefill,
                     new_tokens=args.new_tokens, token_ids=args.token_ids,
                     codec=resolve_codec(args.codec) if args.codec else None)
    result = {**b["nominal"], "recompute_s_band": list(b["recompute_s"]),
              "reload_s_band": list(b["reload_s"]),
              "ttft_recompute_s_band": list(b["ttft_recompute_s"]),
              "ttft_reload_s_band": list(b["ttft_reload_s"]),
              "reload_bandwidth_Bps_band": (list(b["reload_bandwidth_Bps"])
                                            if b["reload_bandwidth_Bps"][0] is not None else None),
              "verdict_flips_in_band": b["flips"], "prefill_fit_own": b["prefill_fit_own"],
              "known_limits": b["known_limits"]}
    if pool is not None:
        result.update(pool=pool.name, pool_nodes=pool_nodes)
    if cfg is not None:
        result["engine_config"] = cfg.summary()
    print_result(args, result, _human)
    return 0


def _node_tier(node, tier):
    """The tier on a node (:func:`kvmath.evaluate.logic.node_tier`)."""
    from kvmath.evaluate.logic import node_tier
    return node_tier(node, tier)


def _compare_tier(name):
    """A tier of tiers.csv, hbm (the prefix still in GPU memory), or pool:NAME (a bundled pool
    shared by the nodes its row deploys, as the calculator names it)."""
    from kvmath.evaluate.compare import HBM_TIER
    from kvmath.tables.rows import pool_tiers
    if name.startswith("pool:") and name in pool_tiers():
        return pool_tiers()[name]
    return HBM_TIER if name == HBM_TIER.name else resolve_tier(name)


def _stdout_failed(exc):
    """The output could not be written (a full disk, /dev/full): say so once; the interpreter's
    own flush at exit would otherwise print a second error."""
    print(f"kvmath: error: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1


def main(argv=None):
    import numpy as np
    if sys.stdout is None:  # started with its output closed (>&-): nothing can be answered
        if sys.stderr is not None:
            print("kvmath: error: standard output is closed; nothing can be written",
                  file=sys.stderr)
        return 1
    try:
        # a numpy warning is an error inside kvmath (issue 20): it never reaches the terminal,
        # and an answer it would have made (inf, nan) is not printed
        with np.errstate(divide="raise", over="raise", invalid="raise"):
            try:
                code = run(argv)
            except Exception as exc:  # a library that turned Ctrl-C into its own error
                if _interrupted(exc):  # (pydantic's SchemaError while a schema builds)
                    raise KeyboardInterrupt from None
                raise
        sys.stdout.flush()
        return code
    except SystemExit as exc:  # --help, --version, a usage error: argparse printed and left
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            sys.stderr.close()
            return 0
        except OSError as err:  # a full disk: the help was not written
            return _stdout_failed(err)
        raise exc
    except BrokenPipeError:  # the reader went away (| head): nothing left to say
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("kvmath: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.filename is None:  # writing stdout, not a file the user named
            return _stdout_failed(exc)
        raise
    except InputError as exc:  # bad input, of every kind; any other exception is a bug
        print(f"kvmath: error: {exc}", file=sys.stderr)
    except (OverflowError, ZeroDivisionError, FloatingPointError):  # a last guard: magnitudes
        # the checks let through
        print("kvmath: error: an input is out of range (a number overflowed or underflowed); check the "
              "magnitudes of the options and of the model and GPU rows", file=sys.stderr)
    return USAGE_ERROR
