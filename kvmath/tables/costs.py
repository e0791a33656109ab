"""What an engine's request costs rest on (engine_costs.csv): fitted, assumed or none, the
published sources behind them and the caveat compare prints where they are fewer than three
(kvmath.evaluate.engine_fit fits them; the logic reads this through its portable data)."""
from __future__ import annotations

from kvmath.tables.rows import engine_costs

#: the costs a fit sets (engine_costs.csv kind fit); the rest are sourced figures
FITTED = ("request_fixed_s", "hit_token_s")
#: fewer independent TTFT sources than this and compare prints a caveat naming them
MIN_SOURCES = 3


def short(url):
    """A source's address without its scheme, to its third path segment."""
    rest = url.split("://", 1)[-1]
    return "/".join(rest.split("/")[:4])


def cost_evidence(engine):
    """{"kind": fit | assumption | none, "sources": the fitted costs' sources, "held_apart": the
    held-apart factor's sources, "caveat": words, "" where three or more sources back them}."""
    costs = engine_costs(engine)
    fitted = [r for r in costs.values() if r.parameter in FITTED]
    if engine == "ideal":
        return {"kind": "none", "sources": [], "held_apart": [], "caveat": ""}
    if not fitted:
        return {"kind": "none", "sources": [], "held_apart": [],
                "caveat": f"{engine} charges no request cost (none in engine_costs.csv)"}
    held = costs.get("held_out_reload_factor")
    src = [s.strip() for s in fitted[0].source.split(";") if s.strip()]
    apart = [s.strip() for s in held.source.split(";") if s.strip()] if held is not None else []
    if fitted[0].kind != "fit":
        return {"kind": "assumption", "sources": src, "held_apart": apart,
                "caveat": f"{engine}'s request costs are vLLM's, an assumption (no published "
                          "cached-prefix TTFT of its own); its reload band is twice them either "
                          "way"}
    n = len(set(src) | set(apart))
    caveat = ""
    if n < MIN_SOURCES:
        caveat = (f"{engine}'s request costs rest on {n} independent TTFT source(s), fewer than "
                  f"{MIN_SOURCES}: fitted on {', '.join(short(s) for s in src)}; held apart: "
                  f"{', '.join(short(s) for s in apart) or 'none'}")
    return {"kind": "fit", "sources": src, "held_apart": apart, "caveat": caveat}
