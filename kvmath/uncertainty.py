"""Uncertainty: efficiency and bandwidth ranges from the spread of the measurements,
carried to bands on times, verdicts and crossing lengths.

Ranges are factors on the bundled defaults, read off the validation rows that are
expected to hold (``expect=pass``):

* prefill efficiency: the defaults are matmul upper bounds (MAMF), so the range runs from
  the lowest measured/predicted speed of the prefill rows up to the default;
* link bandwidth: from the lowest to the highest measured/predicted ratio of the rows on
  that link (the default itself included). A link without rows has no band.
"""
from __future__ import annotations

import math
from functools import lru_cache

from .evaluate import compare, crossings, scenario_values
from .validation import predict, measurements


@lru_cache(maxsize=None)
def efficiency_range():
    """(low, high) factor on the prefill efficiency, from the TTFT rows."""
    ratios = [predict(m) / m.measured_value for m in measurements()
              if m.quantity in ("ttft_s", "prefill_s") and m.expect == "pass"]
    return (min(ratios + [1.0]), 1.0)


@lru_cache(maxsize=None)
def bandwidth_range(link):
    """(low, high) factor on a link's effective bandwidth, from its measurements."""
    ratios = [m.measured_value / predict(m) for m in measurements()
              if m.quantity == "bandwidth_Bps" and m.link == link and m.expect == "pass"]
    return (min(ratios + [1.0]), max(ratios + [1.0]))


def path_range(hops):
    """(low, high) factor on a path's bandwidth: the range of its narrowest hop."""
    narrowest = min(hops, key=lambda h: h.effective_Bps)
    return bandwidth_range(narrowest.link)


def band(model, gpu, tier, tokens, tp=1, **kw):
    """Nominal comparison plus its range: recompute and reload times at the ends of the
    efficiency and bandwidth ranges, whether the verdict flips, and the crossing range."""
    nominal = compare(model, gpu, tier, tokens, tp=tp, **kw)
    eta_lo, eta_hi = efficiency_range()
    v, hops = scenario_values(model, gpu, tier, tp=tp, **kw)
    b_lo, b_hi = path_range(hops)
    corners = {}
    for e_name, e in (("eta_low", eta_lo), ("eta_high", eta_hi)):
        for b_name, b in (("bw_low", b_lo), ("bw_high", b_hi)):
            r = compare(model, gpu, tier, tokens, tp=tp, efficiency=v["eta"] * e,
                        bandwidth_Bps=v["B"] * b, **kw)
            corners[(e_name, b_name)] = r
    recompute = [r["recompute_s"] for r in corners.values()]
    reload = [r["reload_s"] for r in corners.values()]
    winners = {r["winner"] for r in corners.values()} | {nominal["winner"]}
    cross = [c for r in corners.values() for c in r["breakeven_tokens"]]
    return {"nominal": nominal, "recompute_s": (min(recompute), max(recompute)),
            "reload_s": (min(reload), max(reload)), "flips": len(winners) > 1,
            "breakeven_tokens": (min(cross), max(cross)) if cross else None,
            "eta_factor": (eta_lo, eta_hi), "bandwidth_factor": (b_lo, b_hi)}


def tornado(model, gpu, tier, tokens, tp=1, output="speedup", **kw):
    """Swing of one output (``speedup`` of reload over recompute, or ``crossing``: the largest
    crossing length) as each input moves across its range, others at nominal.

    Inputs: prefill efficiency and path bandwidth (measured ranges), fixed latency and HBM
    bandwidth (halved and doubled: no measured spread is bundled for them).
    """
    v, hops = scenario_values(model, gpu, tier, tp=tp, **kw)

    def out(values):
        if output == "crossing":
            cs = crossings(values)
            return max(cs) if cs else math.nan
        from .evaluate import fn
        at = {**values, "T": float(tokens)}
        return float(fn("t_recompute").take(at)) / float(fn("t_reload").take(at))

    base = out(v)
    e_lo, e_hi = efficiency_range()
    b_lo, b_hi = path_range(hops)
    swings = {"prefill efficiency": ("eta", e_lo, e_hi), "reload bandwidth": ("B", b_lo, b_hi),
              "fixed latency": ("t_0", 0.5, 2.0), "HBM bandwidth": ("B_hbm", 0.5, 2.0)}
    rows = []
    for label, (sym, lo, hi) in swings.items():
        a = out({**v, sym: v[sym] * lo})
        b = out({**v, sym: v[sym] * hi})
        # a crossing that appears or vanishes inside the range is the largest swing of all
        swing = math.inf if math.isnan(a) != math.isnan(b) else (
            0.0 if math.isnan(a) else abs(b - a))
        rows.append({"input": label, "low_factor": lo, "high_factor": hi, "at_low": a,
                     "at_high": b, "swing": swing})
    rows.sort(key=lambda r: -r["swing"])
    return base, rows
