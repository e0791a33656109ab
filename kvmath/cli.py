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
    sub.add_parser("list", help="bundled models, GPUs and tiers")
    return p


def _fmt_s(seconds):
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def _fmt_bytes(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.0f} B"


def _human(r):
    rows = [
        ("scenario", f"{r['model']} on {r['tp']}x {r['gpu']}, tier {r['tier']}, "
                     f"{r['tokens']:,} tokens, KV {r['kv_dtype']}"),
        ("KV per token", f"{r['kv_bytes_per_token']:,.0f} B"),
        ("KV moved", f"{_fmt_bytes(r['kv_bytes'])} ({_fmt_bytes(r['kv_bytes_per_gpu'])} per GPU)"),
        ("recompute", f"{_fmt_s(r['recompute_s'])}  ({r['prefill_flops']:.3g} FLOP at "
                      f"{r['prefill_efficiency']:.0%} of peak)"),
        ("reload", f"{_fmt_s(r['reload_s'])}  ({r['reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU, "
                   f"{_fmt_s(r['reload_latency_s'])} latency)"),
        ("one division", f"model {r['model_flops_per_kv_byte']:,.0f} FLOP/B vs GPU "
                         f"{r['gpu_flops_per_link_byte']:,.0f} FLOP/B"),
        ("break-even at", ", ".join(f"{t:,.0f}" for t in r["breakeven_tokens"]) + " tokens"
         if r["breakeven_tokens"] else "none (same winner at every length)"),
        ("min bandwidth", f"{r['min_reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU"
         if math.isfinite(r["min_reload_bandwidth_Bps"]) else "none suffices (latency alone loses)"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    loser = "recompute" if r["winner"] == "reload" else "reload"
    lines.append(f"verdict: {r['winner']} wins, {r['speedup']:.3g}x faster than {loser}")
    return "\n".join(lines)


def _list():
    cat = bundled()
    out = ["models:"]
    for m in cat.models.values():
        out.append(f"  {m.name:<16} {m.attention.upper()}, {m.layers} layers, {m.hf_repo}")
    out.append("gpus:")
    for g in cat.gpus.values():
        out.append(f"  {g.name:<16} {g.description}")
    out.append("tiers:")
    for t in cat.tiers.values():
        out.append(f"  {t.name:<16} {' -> '.join(h.link for h in t.hops)}")
    return "\n".join(out)


def run(argv=None):
    """Run the CLI; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "list":
        print(_list())
        return 0
    result = compare(resolve_model(args.model), resolve_gpu(args.gpu), resolve_tier(args.tier),
                     args.tokens, tp=args.tp,
                     bandwidth_Bps=args.bandwidth * 1e9 if args.bandwidth else None,
                     efficiency=args.efficiency, kv_dtype=args.kv_dtype)
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isinf(v) else v)
                          for k, v in result.items()}))
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
