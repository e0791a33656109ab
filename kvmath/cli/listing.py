"""``kvmath list``: the bundled rows a scenario names (models, GPUs, tiers, engines, the sourced
deployments, nodes and pause distributions), one line each, projections marked.
"""
from __future__ import annotations

import re

from kvmath.logic.constants import DEFAULT_ENGINE
from kvmath.tables.rows import bundled, deployments, engines, nodes, pauses


def add_parser(subparsers):
    """Add the ``list`` sub-command to an argparse subparsers object."""
    subparsers.add_parser("list", help="bundled models, GPUs, tiers, nodes and pause distributions")


def run(args):
    """Run ``kvmath list``; returns the exit status."""
    print(text())
    return 0


def _version_head(version):
    """An engine profile's version without its parentheses and past its first clause."""
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", version)
        if shorter == version:
            return re.split(r"[:;]", shorter)[0].strip()
        version = shorter


def text():
    """The text of `kvmath list`."""
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
    out.append("engines:")
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

