"""Command line: ``python -m kvmath compare|list``.

A user's mistake (unknown name, malformed file, bad number) prints one line
on stderr and exits with status 2; it never shows a traceback.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from .evaluate import ScenarioError, compare
from .tables import DTYPE_BYTES, DataError, bundled, resolve_gpu, resolve_model, resolve_tier
from .units import fmt_bytes, fmt_time, fmt_token_list
from .version import version_line, with_version

USAGE_ERROR = 2


class UsageError(Exception):
    """A mistake in the command line or its inputs."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _fraction(text):
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}")
    return value


def build_parser():
    p = _Parser(prog="python -m kvmath", description="Reload a paused conversation's KV cache, "
                "or recompute it by prefill? Bandwidths are SI (1 GB/s = 1e9 B/s).")
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser("compare", help="reload against recompute for one scenario")
    c.add_argument("--model", required=True, help="bundled model name or path to a models CSV row")
    c.add_argument("--gpu", required=True, help="bundled GPU name or path to a gpus CSV row")
    c.add_argument("--tier", required=True, help="tier: host-dram, nvme, rdma, ...")
    c.add_argument("--tokens", required=True, type=_positive_int, help="tokens in the cached prefix")
    c.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel GPUs (default 1)")
    c.add_argument("--bandwidth", type=_positive_float, metavar="GBPS",
                   help="effective reload bandwidth per GPU in GB/s, after all efficiency factors "
                   "(overrides the tier's path)")
    c.add_argument("--efficiency", type=_fraction, metavar="F",
                   help="prefill efficiency, achieved fraction of dense peak (0 < F <= 1)")
    c.add_argument("--kv-dtype", choices=sorted(DTYPE_BYTES), help="KV element type (default: model's)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("list", help="bundled models, GPUs, tiers, nodes and pause distributions")

    r = sub.add_parser("reuse", help="break-even return probability and best TTL for offloading")
    r.add_argument("--model", required=True, help="bundled model name or path to a models CSV row")
    r.add_argument("--gpu", required=True, help="bundled GPU name or path to a gpus CSV row")
    r.add_argument("--tier", required=True, help="tier the cache is offloaded to")
    r.add_argument("--tokens", required=True, type=_positive_int, help="tokens in the cached prefix")
    r.add_argument("--tp", type=_positive_int, help="tensor-parallel GPUs (default: smallest that fits)")
    r.add_argument("--pause", default="chat-lognormal",
                   help="pause distribution: bundled name or path to a pauses CSV row")
    r.add_argument("--json", action="store_true", help="print one JSON object")

    t = sub.add_parser("tiers", help="capacity and bandwidth plan of a node's tiers for a load")
    t.add_argument("--node", default="dgx-h100", help="bundled node name")
    t.add_argument("--model", required=True, help="bundled model name or path to a models CSV row")
    t.add_argument("--tokens", required=True, type=_positive_int, help="tokens per paused conversation")
    t.add_argument("--resume-rate", required=True, type=_positive_float, metavar="PER_S",
                   help="conversations resuming per second on the node")
    t.add_argument("--tp", type=_positive_int, help="tensor-parallel GPUs (default: all of the node)")
    t.add_argument("--pause", default="chat-lognormal",
                   help="pause distribution: bundled name or path to a pauses CSV row")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _side(model_fpb, gpu_fpb):
    """The winner the division alone names: reload when the model needs more FLOP per KV byte."""
    return "reload" if model_fpb > gpu_fpb else "recompute"


def override_note(r):
    """One line when the one division's winner is not the scenario's, naming what overrides it.

    The division compares the linear term only, at a length every layer holds, with no fixed
    cost. Adding, in turn, the attention term (and sliding windows) at this length, the
    weight-read floor of recompute, and the reload path's fixed latency, the factors that move
    the answer to the final winner are named. None when the division already agrees.
    """
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    if division == r["winner"]:
        return None
    transfer = r["reload_s"] - r["reload_latency_s"]
    steps = [
        (_side(r["model_flops_per_kv_byte_at_tokens"], r["gpu_flops_per_link_byte"]),
         f"the attention term at {r['tokens']:,} tokens (model "
         f"{r['model_flops_per_kv_byte_at_tokens']:,.0f} FLOP/B at this length)"),
        ("reload" if transfer < r["recompute_s"] else "recompute",
         f"recompute's weight-read floor ({fmt_time(r['weights_read_s'])} to read the weights "
         f"once, against {fmt_time(r['compute_s'])} of compute)"),
        (r["winner"], f"the reload path's fixed latency ({fmt_time(r['reload_latency_s'])})"),
    ]
    why, prev = [], division
    for side, reason in steps:
        if side != prev and side == r["winner"]:
            why.append(reason)
        prev = side
    return (f"note: the one division says {division} wins, but {r['winner']} wins here because "
            f"of {' and '.join(why) or 'the fixed costs'}")


def _human(r):
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    rows = [
        ("scenario", f"{r['model']} on {r['tp']}x {r['gpu']}, tier {r['tier']}, "
                     f"{r['tokens']:,} tokens, KV {r['kv_dtype']}"),
        ("KV per token", f"{r['kv_bytes_per_token']:,.0f} B"),
        ("KV moved", f"{fmt_bytes(r['kv_bytes'], 4)} ({fmt_bytes(r['kv_bytes_per_gpu'], 4)} per GPU)"),
        ("recompute", f"{fmt_time(r['recompute_s'])}  ({r['prefill_flops']:.3g} FLOP at "
                      f"{r['prefill_efficiency']:.0%} of peak)"),
        ("reload", f"{fmt_time(r['reload_s'])}  ({r['reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU, "
                   f"{fmt_time(r['reload_latency_s'])} latency)"),
        ("one division", f"model {r['model_flops_per_kv_byte']:,.0f} FLOP/B vs GPU "
                         f"{r['gpu_flops_per_link_byte']:,.0f} FLOP/B: favours {division}"),
        ("break-even at", fmt_token_list(r["breakeven_tokens"])
         if r["breakeven_tokens"] else "none (same winner at every length)"),
        ("min bandwidth", f"{r['min_reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU"
         if math.isfinite(r["min_reload_bandwidth_Bps"]) else "none suffices (latency alone loses)"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    loser = "recompute" if r["winner"] == "reload" else "reload"
    lines.append(f"verdict: {r['winner']} wins, {r['speedup']:.3g}x faster than {loser}")
    note = override_note(r)
    if note:
        lines.append(note)
    return "\n".join(lines)


def _list():
    cat = bundled()
    out = ["models:"]
    for m in cat.models.values():
        out.append(f"  {m.name:<16} {m.attention_kind}, {m.layers} layers, {m.hf_repo}")
    out.append("gpus:")
    for g in cat.gpus.values():
        out.append(f"  {g.name:<16} {g.description}")
    out.append("tiers:")
    for t in cat.tiers.values():
        out.append(f"  {t.name:<16} {' -> '.join(h.link for h in t.hops)}")
    from .tables import nodes, pauses
    out.append("nodes:")
    for n in nodes().values():
        out.append(f"  {n.name:<16} {n.description}")
    out.append("pauses:")
    for pz in pauses().values():
        out.append(f"  {pz.name:<16} {pz.distribution}, median {pz.median_s:g} s, "
                   f"returns with p = {pz.return_probability:g}")
    return "\n".join(out)


def _dump(result):
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    return json.dumps(clean(with_version(result)))


def _reuse_human(r):
    rows = [("scenario", f"{r['model']} on {r['tp']}x {r['gpu']}, tier {r['tier']}, "
                         f"{r['tokens']:,} tokens, pause {r['pause']}"),
            ("saving per reuse", f"{r['saving_gpu_s']:.3g} GPU-s (${r['saving_usd']:.3g})"),
            ("best TTL", fmt_time(r["ttl_s"]) if math.isfinite(r["ttl_s"]) else "keep until return"),
            ("hit probability", f"{r['hit_probability']:.3f} of returning conversations"),
            ("break-even p", "n/a" if r["p_breakeven"] is None else f"{r['p_breakeven']:.3g}"),
            ("value per offload", f"${r['value_usd']:.3g}")]
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"{k:<{width}}  {v}" for k, v in rows] + [f"verdict: {r['verdict']}"])


def columns(header, rows, left=1):
    """Rows of strings as aligned text columns: the first `left` columns left-aligned, the rest
    right-aligned, each as wide as its widest cell whatever the number format."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    def line(cells):
        return "  ".join(f"{c:<{w}}" if i < left else f"{c:>{w}}"
                        for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header)] + [line(r) for r in rows]


def _tiers_human(plan):
    head = (f"{plan['model']} on {plan['node']} (TP {plan['tp']}), {plan['tokens']:,} tokens "
            f"({fmt_bytes(plan['kv_bytes'], 4)} each), {plan['resume_rate_per_s']:g} resumes/s, "
            f"pause {plan['pause']}")
    rows = []
    for t in plan["tiers"]:
        to = fmt_time(t["ttl_to_s"]) if math.isfinite(t["ttl_to_s"]) else "inf"
        ages = f"{fmt_time(t['ttl_from_s'])} - {to}" if t["ttl_from_s"] else f"0 - {to}"
        head_room = "inf" if not math.isfinite(t["headroom"]) else f"{t['headroom']:.3g}x"
        rows.append([t["tier"], fmt_bytes(t["capacity_bytes"], 4), f"{t['caches_held']:,.0f}",
                     ages, f"{t['resume_fraction']:.1%}",
                     fmt_bytes(t["read_Bps"] + t["write_Bps"], 4) + "/s", head_room])
    table = columns(["tier", "capacity", "caches", "ages held", "resumes", "read+write",
                     "headroom"], rows)
    return "\n".join([head, *table,
                      f"recomputed: {plan['recomputed_fraction']:.1%} of resumes"])


def run(argv=None):
    """Run the CLI; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "list":
        print(_list())
        return 0
    if args.command == "reuse":
        from .reuse import reuse
        from .tables import resolve_pause
        model, gpu = resolve_model(args.model), resolve_gpu(args.gpu)
        result = reuse(model, gpu, resolve_tier(args.tier), args.tokens,
                       resolve_pause(args.pause), tp=args.tp)
        print(_dump(result) if args.json else _reuse_human(result))
        return 0
    if args.command == "tiers":
        from .reuse import tier_plan
        from .tables import nodes, resolve_pause
        if args.node not in nodes():
            raise KeyError(f"unknown node {args.node!r}; bundled: {', '.join(sorted(nodes()))}")
        node = nodes()[args.node]
        model = resolve_model(args.model)
        tp = args.tp or node.gpus
        if tp > node.gpus:
            raise ScenarioError(f"--tp {tp} exceeds the node's {node.gpus} GPUs")
        plan = tier_plan(node, model, args.tokens, args.resume_rate, resolve_pause(args.pause),
                         tp=tp)
        print(_dump(plan) if args.json else _tiers_human(plan))
        return 0
    result = compare(resolve_model(args.model), resolve_gpu(args.gpu), resolve_tier(args.tier),
                     args.tokens, tp=args.tp,
                     bandwidth_Bps=args.bandwidth * 1e9 if args.bandwidth else None,
                     efficiency=args.efficiency, kv_dtype=args.kv_dtype)
    if args.json:
        print(_dump(result))
    else:
        print(_human(result))
    return 0


def main(argv=None):
    try:
        return run(argv)
    except (UsageError, DataError, ScenarioError) as exc:
        print(f"kvmath: error: {exc}", file=sys.stderr)
    except KeyError as exc:
        print(f"kvmath: error: {exc.args[0]}", file=sys.stderr)
    return USAGE_ERROR
