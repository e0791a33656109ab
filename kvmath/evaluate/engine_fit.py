"""The engines' request costs on published times to first token (engine_costs.csv), per engine.

A TTFT is linear in the costs an engine charges a request (:data:`kvmath.derive.kv.ttft_cold`,
:data:`kvmath.derive.kv.ttft_hit`): its fixed cost t_req, hashing c_hash and tokenising c_tokz
per prompt token (the prompt sent as text), and the connector's c_hit per token loaded from a
tier. Hashing (vLLM's documentation) and tokenising (a direct measurement of a BPE tokeniser,
independent of every TTFT source) are sourced, not fitted. The free parameters, t_req and c_hit,
are fitted by non-negative least squares on relative residuals on the TTFT rows of the sources
in :data:`ENGINE_EVIDENCE` ``fit``; every row of the other sources (``held_apart``) is held apart,
and the held-apart error comes only from them (a second point of a fitted figure is not held
apart). An engine family with fewer than three independent TTFT sources carries a caveat naming
them; an engine with no TTFT source of its own takes another's costs as an assumption, with the
band its evidence allows (:data:`ASSUMED_FACTOR`).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.optimize import nnls

from kvmath.tables.schema import table
from kvmath.tables.costs import FITTED, MIN_SOURCES, cost_evidence  # noqa: F401
from kvmath.tables.rows import engine_costs
from kvmath.evaluate.validation import measurements, predict, ttft_result

#: the engine profiles the fitted vLLM costs describe (one request path, several copy layouts,
#: the MLA store changed between them: nothing a request's own costs see)
VLLM_ENGINES = ("vllm-lbhnc", "vllm-cross-layer", "vllm-per-layer", "vllm-cross-layer-v0.26",
                "vllm-cross-layer-v0.19", "vllm-per-layer-v0.26")
#: each engine family's TTFT sources (validation.csv source_key): fitted on ``fit``, judged on
#: ``held_apart``, with the families a source belongs to (two sources of one family are one)
ENGINE_EVIDENCE = {
    "vllm": {"engines": VLLM_ENGINES, "fit": ("vllm-blog-kv-offloading",),
             "held_apart": ("agentic-kvc",),
             "names": {"vllm-blog-kv-offloading": "vLLM blog 2026-01-08 (IBM Research)",
                       "agentic-kvc": "agentic-kvc (one author's repository)"}},
}
#: the engines with no TTFT source of their own, whose request costs are vLLM's (an assumption)
ASSUMED_ENGINES = ("sglang-hicache", "sglang-hicache-direct", "sglang-hicache-mla-dedup",
                   "lmcache", "dynamo-kvbm-vllm")
#: their reload band's widening, ASSUMPTION: twice the nominal either way, wider than any
#: held-apart miss of vLLM's costs (kvmath.evaluate.engine_fit.held_out_reload_factor)
ASSUMED_FACTOR = 2.0


def _features(m):
    """(request, hit) columns of a TTFT row: what each fitted cost multiplies."""
    loads = m.quantity == "ttft_reload_s" and m.tier != "hbm"
    return (1.0, float(m.tokens) if loads else 0.0)


def _base(m, r):
    """compare()'s TTFT for the row with the fitted costs it charged taken out, s."""
    f = _features(m)
    return r[m.quantity] - (r["request_fixed_s"] * f[0] + f[1] * r["hit_token_s"])


def rows(engines=VLLM_ENGINES):
    """The engines' TTFT rows as (measurement, compare result)."""
    return [(m, ttft_result(m)) for m in measurements()
            if m.quantity in ("ttft_recompute_s", "ttft_reload_s") and m.engine in engines]


@lru_cache(maxsize=None)
def fit(family="vllm"):
    """{"values": {parameter: value}, "calibration_rows": ids, "held_out": ids, "fit_sources",
    "held_apart_sources"} from the TTFT rows of the family's fitted sources (its cache-hit rows:
    the request's own costs beside a load; a cold row is the prefill's test)."""
    ev = ENGINE_EVIDENCE[family]
    data = rows(ev["engines"])
    cal = [(m, r) for m, r in data if m.source_key in ev["fit"] and m.quantity == "ttft_reload_s"]
    A, y = [], []
    for m, r in cal:
        w = 1.0 / m.measured_value  # relative residuals
        A.append([w * x for x in _features(m)])
        y.append(w * (m.measured_value - _base(m, r)))
    coef, _ = nnls(np.array(A), np.array(y))
    return {"values": dict(zip(FITTED, (float(c) for c in coef))),
            "calibration_rows": tuple(m.id for m, _ in cal),
            "held_out": tuple(m.id for m, _ in data if m.source_key in ev["held_apart"]),
            "fit_sources": ev["fit"], "held_apart_sources": ev["held_apart"]}


def held_out_errors(family="vllm"):
    """[(id, predicted/measured)] of the held-apart TTFT rows (sources the fit never saw)."""
    held = set(fit(family)["held_out"])
    return [(m.id, predict(m) / m.measured_value) for m in measurements() if m.id in held]


def held_out_reload_factor(family="vllm"):
    """The widest predicted/measured, either way, of the held-apart reload rows expected to hold
    (sources the fit never saw, on any GPU: the only independent evidence, H20 on a borrowed
    prefill fit), under the committed costs: the reload band's widening (1 with no such row)."""
    held = set(fit(family)["held_out"])
    ratios = [predict(m) / m.measured_value for m in measurements()
              if m.id in held and m.quantity == "ttft_reload_s" and m.expect == "pass"]
    return max([max(r, 1 / r) for r in ratios] + [1.0])


def committed(engine="vllm-cross-layer"):
    """{parameter: value} of the fitted parameters as engine_costs.csv holds them."""
    costs = engine_costs(engine)
    return {p: costs[p].value for p in FITTED if p in costs}


def evidence(engine):
    """What the engine's request costs rest on (kvmath.tables.costs.cost_evidence)."""
    return cost_evidence(engine)


def sources_of(family="vllm"):
    """{source_key: source URL} of a family's TTFT sources (validation.csv)."""
    ev = ENGINE_EVIDENCE[family]
    keys = set(ev["fit"]) | set(ev["held_apart"])
    return {m.source_key: m.source for m in table("validation").values() if m.source_key in keys}


def engine_summary():
    """One row per engine group of engine_costs.csv: its profiles, kind (fit, assumption), free
    parameters, calibration rows and their sources, the held-apart sources and the held-apart
    error range (predicted/measured), and the band's widening."""
    out = []
    f = fit("vllm")
    errs = [r for _, r in held_out_errors("vllm")]
    out.append({"engines": ENGINE_EVIDENCE["vllm"]["engines"], "kind": "fit",
                "free": FITTED, "rows": len(f["calibration_rows"]),
                "fit_sources": [ENGINE_EVIDENCE["vllm"]["names"][s] for s in f["fit_sources"]],
                "held_sources": [ENGINE_EVIDENCE["vllm"]["names"][s]
                                 for s in f["held_apart_sources"]],
                "held_lo": min(errs), "held_hi": max(errs),
                "factor": engine_costs("vllm-lbhnc")["held_out_reload_factor"].value})
    out.append({"engines": ASSUMED_ENGINES, "kind": "assumption", "free": (), "rows": 0,
                "fit_sources": ["vLLM's (above)"], "held_sources": [], "held_lo": None,
                "held_hi": None, "factor": ASSUMED_FACTOR})
    return out
