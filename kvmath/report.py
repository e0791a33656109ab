"""Presentation helpers for the book: markdown tables, formatted cells, LaTeX.

Nothing here computes a new quantity; it arranges what :mod:`kvmath.evaluate`
returns. Table text is deterministic so nbval can compare stored outputs.
"""
from __future__ import annotations

import math

import sympy as sp

from .evaluate import compare, min_tp
from .tables import bundled
from .units import fmt_bw, fmt_bytes, fmt_time  # noqa: F401  (re-exported for chapters)

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
    """LaTeX of an expression, with subscripts for names like L_full."""
    return sp.latex(expr, mul_symbol="dot")


def decision(model_name, gpu_name, tier_name, tokens, tp=None):
    """compare() at the smallest TP that holds the weights (or 8, flagged), with that TP."""
    cat = bundled()
    model, gpu = cat.models[model_name], cat.gpus[gpu_name]
    fits = True
    if tp is None:
        tp = min_tp(model, gpu)
        if tp is None:
            tp, fits = 8, False
    r = compare(model, gpu, cat.tiers[tier_name], tokens, tp=tp)
    r["fits"] = fits
    return r


def verdict_cell(r, flips=False):
    """'reload 38x' or 'recompute 4.2x': the winner and how much faster it is; a dagger marks a
    verdict that flips inside the measured uncertainty band."""
    return f"{r['winner']} {r['speedup']:.3g}×" + (" †" if flips else "")


def decision_table(gpu_name, tokens, tier_names, model_names=None):
    """Rows: model, TP, KV per token, then one verdict per tier (dagger: flips inside the band)."""
    from .uncertainty import band

    cat = bundled()
    names = model_names or list(cat.models)
    rows = []
    for name in names:
        results = [decision(name, gpu_name, t, tokens) for t in tier_names]
        tp = results[0]["tp"]
        tp_cell = f"{tp}" if results[0]["fits"] else f"{tp} (weights exceed one node)"
        flips = [band(cat.models[name], cat.gpus[gpu_name], cat.tiers[t], tokens, tp=tp)["flips"]
                 for t in tier_names]
        rows.append([name, tp_cell, f"{results[0]['kv_bytes_per_token']:,.0f}"]
                    + [verdict_cell(r, f) for r, f in zip(results, flips)])
    return md_table(["model", "TP", "KV B/token"] + [f"{t}" for t in tier_names], rows)


def finite(x):
    return x if math.isfinite(x) else float("nan")
