"""Presentation helpers for the book: markdown tables, formatted cells, LaTeX.

Nothing here computes a new quantity; it arranges what :mod:`kvmath.evaluate.compare`
returns. Table text is deterministic so nbval can compare stored outputs.
"""
from __future__ import annotations

import math

import sympy as sp

from kvmath.evaluate.api import compare
from kvmath.tables.rows import bundled
from kvmath.present.format import fmt_bw, fmt_bytes, fmt_time  # noqa: F401  (re-exported for chapters)

#: matplotlib settings for the book's figures: text large enough to read when a figure is
#: scaled to a phone's width (the site's CSS keeps figures at least 520 px wide there)
FIGURE_STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12,
                "xtick.labelsize": 11, "ytick.labelsize": 11, "legend.fontsize": 10.5,
                "lines.linewidth": 1.8}
try:
    import matplotlib

    matplotlib.rcParams.update(FIGURE_STYLE)
except ImportError:  # the library works without matplotlib; only the book draws
    pass


def md_table(header, rows):
    """A GitHub-style markdown table as an IPython Markdown object."""
    from IPython.display import Markdown

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return Markdown("\n".join(lines))


def fmt_flops(f):
    return f"{f / 1e12:,.1f} TFLOP/s"


def fmt_tokens(ts):
    return ", ".join(f"{t:,.0f}" for t in ts) if ts else "none"


def latex(expr):
    """LaTeX of an expression, with subscripts for names like L_full (and B_hbm, which SymPy
    would otherwise print as a bold b: it reads a trailing 'bm' as a modifier)."""
    from kvmath.derive import symbols as S
    names = {S.B_hbm: r"B_{hbm}", S.C_hbm: r"C_{hbm}", S.u_hbm: r"u_{hbm}"}
    return sp.latex(expr, mul_symbol="dot", symbol_names=names)


def decision(model_name, gpu_name, tier_name, tokens, tp=None, **kw):
    """compare() of a bundled model, GPU and tier: the sourced deployment or the smallest TP
    that fits unless tp is given. A prompt beyond the model's context window is cut to it
    (``r["tokens"]`` says which length ran; ``r["cut_to_context"]`` whether it was cut)."""
    cat = bundled()
    model, gpu = cat.models[model_name], cat.gpus[gpu_name]
    length = min(tokens, model.max_context_tokens)
    r = compare(model, gpu, cat.tiers[tier_name], length, tp=tp, **kw)
    r["cut_to_context"] = length < tokens
    return r


def layout_cell(r):
    """'TP 4' or 'TP 8, EP 8' or 'DP attention, EP 16', with the GPU count when multi-node."""
    cell = "DP attention" if r["dp_attention"] else f"TP {r['tp']}"
    if r["ep"] != r["tp"] or r["dp_attention"]:
        cell += f", experts over {r['ep']}"
    if r["gpus"] > r["gpus_per_node"]:
        cell += f" ({r['gpus'] // int(r['gpus_per_node'])} nodes)"
    return cell


def verdict_cell(r, flips=False):
    """'reload 38x' or 'recompute 4.2x': the winner and how much faster it is; a dagger marks a
    verdict that flips inside the uncertainty band; a double dagger a configuration a
    validation row shows the model missing (its error is in the band); a section sign a prompt
    cut to the context."""
    return (f"{r['winner']} {r['speedup']:.3g}×" + (" †" if flips else "")
            + (" ‡" if r.get("known_limits") else "")
            + (" §" if r.get("cut_to_context") else ""))


def decision_rows(gpu_name, tokens, tier_names, model_names=None, **kw):
    """One row per model: (model, layout cell, KV B/token, [(result, flips) per tier])."""
    from kvmath.evaluate.bands import band

    cat = bundled()
    out = []
    for name in model_names or list(cat.models):
        model = cat.models[name]
        length = min(tokens, model.max_context_tokens)
        cells = []
        for t in tier_names:
            b = band(model, cat.gpus[gpu_name], cat.tiers[t], length, **kw)
            r = {**b["nominal"], "cut_to_context": length < tokens,
                 "known_limits": b["known_limits"], "prefill_fit_own": b["prefill_fit_own"]}
            cells.append((r, b["flips"]))
        out.append((name, layout_cell(cells[0][0]), cells[0][0]["kv_bytes_per_token"], cells))
    return out


def decision_table(gpu_name, tokens, tier_names, model_names=None, **kw):
    """Rows: model, layout, KV per token, then one verdict per tier (dagger: flips inside the
    band; double dagger: a known limit widens the band; section sign: the prompt was cut to the
    model's context window)."""
    rows = [[name, layout, f"{kv:,.0f}"] + [verdict_cell(r, f) for r, f in cells]
            for name, layout, kv, cells in decision_rows(gpu_name, tokens, tier_names,
                                                         model_names, **kw)]
    return md_table(["model", "layout", "KV B/token"] + [f"{t}" for t in tier_names], rows)


def finite(x):
    return x if math.isfinite(x) else float("nan")
