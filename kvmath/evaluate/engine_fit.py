"""The engines' request costs fitted on published times to first token (engine_costs.csv).

A TTFT is linear in the costs an engine charges a request (:data:`kvmath.derive.kv.ttft_cold`,
:data:`kvmath.derive.kv.ttft_hit`): its fixed cost t_req, tokenising c_tokz per prompt token when
the prompt arrives as text, and the connector's c_hit per token loaded from a tier (hashing,
c_hash, is a sourced measurement, not fitted). So each calibration row gives one linear
equation, measured - base = t_req + c_tokz (T + n) + c_hit T, where base is compare()'s TTFT
with those costs taken out. A source whose rig adds a fixed cost no profile models (an engine
run in eager mode launches every kernel from Python) gets an intercept of its own, reported and
never used in a prediction; t_req comes from REQUEST_SOURCES alone. The fit is non-negative
least squares on relative residuals; every other row of the engine is held apart.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.optimize import nnls

from kvmath.tables.schema import table
from kvmath.tables.rows import engine_costs
from kvmath.evaluate.validation import measurements, predict, ttft_result

#: the engine profiles the fitted vLLM costs describe (one request path, three copy layouts, the
#: MLA store changed between them: nothing a request's own costs see)
VLLM_ENGINES = ("vllm-lbhnc", "vllm-cross-layer", "vllm-per-layer", "vllm-cross-layer-v0.26", "vllm-cross-layer-v0.19",
                "vllm-per-layer-v0.26")
#: sources whose intercept is the engine's fixed cost (CUDA graphs, the engine as served)
REQUEST_SOURCES = ("vllm-blog-kv-offloading",)
#: fitted parameters, in the order of the design matrix's first columns
FITTED = ("request_fixed_s", "tokenize_token_s", "hit_token_s")


def _features(m):
    """(request, tokenise, hit) columns of a TTFT row: what each fitted cost multiplies."""
    prompt = float(m.tokens + m.new_tokens)
    loads = m.quantity == "ttft_reload_s" and m.tier != "hbm"
    return (1.0 if m.source_key in REQUEST_SOURCES else 0.0,
            0.0 if m.token_ids else prompt, float(m.tokens) if loads else 0.0)


def _base(m, r):
    """compare()'s TTFT for the row with the fitted costs it charged taken out, s."""
    f = _features(m)
    return r[m.quantity] - (r["request_fixed_s"] + f[1] * r["tokenize_token_s"]
                            + f[2] * r["hit_token_s"])


def rows(engines=VLLM_ENGINES):
    """The engine's TTFT rows as (measurement, compare result)."""
    return [(m, ttft_result(m)) for m in measurements()
            if m.quantity in ("ttft_recompute_s", "ttft_reload_s") and m.engine in engines]


@lru_cache(maxsize=None)
def fit(engines=VLLM_ENGINES):
    """{"values": {parameter: value}, "intercepts": {source: s}, "calibration_rows": ids,
    "held_out": ids} from the in-sample TTFT rows of ``engines``."""
    data = rows(engines)
    cal = [(m, r) for m, r in data if m.in_sample]
    nuisance = sorted({m.source_key for m, _ in cal if m.source_key not in REQUEST_SOURCES})
    A, y = [], []
    for m, r in cal:
        w = 1.0 / m.measured_value  # relative residuals
        row = list(_features(m)) + [1.0 if m.source_key == s else 0.0 for s in nuisance]
        A.append([w * x for x in row])
        y.append(w * (m.measured_value - _base(m, r)))
    coef, _ = nnls(np.array(A), np.array(y))
    values = dict(zip(FITTED, (float(c) for c in coef[:len(FITTED)])))
    intercepts = dict(zip(nuisance, (float(c) for c in coef[len(FITTED):])))
    return {"values": values, "intercepts": intercepts,
            "calibration_rows": tuple(m.id for m, _ in cal),
            "held_out": tuple(m.id for m, _ in data if not m.in_sample)}


def held_out_reload_factor(engines=VLLM_ENGINES):
    """The widest predicted/measured, either way, of the held-apart reload rows of ``engines``
    expected to hold, on GPUs with an operator profile of their own: how far a reload's time
    (copy and connector together) was from rows the fit never saw, under the committed costs
    (the reload band's widening, 1 with no such row). A GPU on a borrowed prefill fit carries
    its own, wider band (kvmath.evaluate.bands)."""
    held = set(fit(engines)["held_out"])
    borrowed = {r.gpu for r in table("prefill_fit").values() if r.kind == "assumption"}
    ratios = [predict(m) / m.measured_value for m in measurements()
              if m.id in held and m.quantity == "ttft_reload_s" and m.expect == "pass"
              and m.gpu not in borrowed]
    return max([max(r, 1 / r) for r in ratios] + [1.0])


def committed(engine="vllm-cross-layer"):
    """{parameter: value} of the fitted parameters as engine_costs.csv holds them."""
    costs = engine_costs(engine)
    return {p: costs[p].value for p in FITTED if p in costs}
