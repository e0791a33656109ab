"""Prefill time from the calibrated operator model (:mod:`kvmath.derive.prefill`).

``prefill_time(model, gpu, tokens, ...)`` returns seconds, with a breakdown, vectorised
over a numpy array of prompt lengths. ``kind="ideal"`` is the flat roofline
(:data:`kvmath.derive.kv.t_recompute`, FLOPs at the GPU's matmul ceiling or one read of
every weight), kept as the named upper bound on speed; ``kind="calibrated"`` sums
per-operator times with parameters fitted by ``scripts/fit_prefill.py``
(``kvmath/data/prefill_fit.csv``) and all-reduce figures from ``kvmath/data/allreduce.csv``.
Every number comes through lambdify from the SymPy expressions.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from kvmath.evaluate.api import Numeric, Parallel, ScenarioError, fn
from kvmath.logic import layout as _layout
from kvmath.logic import prefill as _prefill
from kvmath.logic.constants import BYTES_ACT, DEFAULT_IMBALANCE, PARTS  # noqa: F401
from kvmath.scenario.record import Scenario
from kvmath.tables.rows import (PREFILL_PARAMETERS as PARAMETERS, allreduce_figures,  # noqa: F401
                                bundled, fitted_parameters)



@lru_cache(maxsize=None)
def _numeric(attention, part):
    key = (f"derive_prefill.weights_floor.{attention}" if part == "weights_floor_s"
           else f"derive_prefill.parts.{attention}.{part}")
    return Numeric.generated(key, f"{attention} {part}")


def _resolve(model, gpu):
    cat = bundled()
    if isinstance(model, str):
        if model not in cat.models:
            from kvmath.tables.rows import model_of  # validation-only models (e.g. llama-3.3-70b)
            model = model_of(model)
        else:
            model = cat.models[model]
    if isinstance(gpu, str):
        if gpu not in cat.gpus:
            raise ScenarioError(f"unknown GPU {gpu!r}; bundled: {', '.join(sorted(cat.gpus))}")
        gpu = cat.gpus[gpu]
    return model, gpu


def calibrated_values(model, gpu, tp=1, ep=None, dp_attention=False, compute_dtype="bf16",
                      batch=1, tp_attn=1, imbalance=DEFAULT_IMBALANCE, kernels=None):
    """Every substitution value of the calibrated model except T (logic.calibrated_values);
    kernels: the engine whose kernels run the forward (kernels.csv; None: the default engine
    profile's)."""
    return _prefill.calibrated_values(
        Scenario(model=model, gpu=gpu, tier=None),
        Parallel(gpus=tp, ep=ep, dp_attention=dp_attention, tp_attn=tp_attn,
                 compute_dtype=compute_dtype, batch=batch, imbalance=imbalance, kernels=kernels))


def prefill_time(model, gpu, tokens, tp=1, ep=None, dp_attention=False, compute_dtype="bf16",
                 batch=1, kind="calibrated", tp_attn=1, imbalance=DEFAULT_IMBALANCE,
                 kernels=None):
    """Prefill time (s) of `batch` prompts of `tokens` tokens each (scalar or numpy array).

    kind "ideal": {"total_s", "compute_s", "weights_floor_s"} of the flat roofline.
    kind "calibrated": "total_s" and the parts gemm_s, nongemm_s, attention_s, allreduce_s,
    moe_s, lm_head_s (they sum to total_s), plus weights_floor_s (the weight reads alone,
    informative) and ideal_s (the flat roofline at the same settings).
    """
    model, gpu = _resolve(model, gpu)
    T = np.asarray(tokens, dtype=float)
    if not np.all(T > 0) or not np.all(np.isfinite(T)):
        raise ScenarioError("tokens must be positive and finite")
    if kind not in ("ideal", "calibrated"):
        raise ScenarioError(f"kind must be 'ideal' or 'calibrated', got {kind!r}")
    s = Scenario(model=model, gpu=gpu, tier=None, tp=tp, compute_dtype=compute_dtype)
    layout = _layout.choose_layout(s, 1, None, False)
    at = {**_layout.deployment_values(s, layout), "T": T, "n_seq": batch}
    ideal_total = fn("t_recompute" if batch == 1 else "t_recompute_batch").take(at)
    if kind == "ideal":
        return {"total_s": ideal_total, "compute_s": batch * fn("t_compute").take(at),
                "weights_floor_s": fn("t_weights").take(at)}
    cv = calibrated_values(model, gpu, tp=tp, ep=ep, dp_attention=dp_attention,
                           compute_dtype=compute_dtype, batch=batch, tp_attn=tp_attn,
                           imbalance=imbalance, kernels=kernels)
    out = _parts(model.attention, cv, T)
    out["weights_floor_s"] = _numeric(model.attention, "weights_floor_s").take({**cv, "T": T})
    out["ideal_s"] = ideal_total
    return out


def _parts(attention, values, T):
    """The calibrated parts at prompt lengths T (s) and their sum, total_s."""
    at = {**values, "T": T}
    out = {p: _numeric(attention, p).take(at) for p in PARTS}
    out["total_s"] = sum(out[p] for p in PARTS)
    return out


def calibrated_fn(model, gpu, tp=1, ep=None, dp_attention=False, compute_dtype="bf16", batch=1,
                  tp_attn=1, imbalance=DEFAULT_IMBALANCE, kernels=None):
    """f(T) -> calibrated prefill seconds, with every value but T fixed once (for root finding)."""
    model, gpu = _resolve(model, gpu)
    cv = calibrated_values(model, gpu, tp=tp, ep=ep, dp_attention=dp_attention,
                           compute_dtype=compute_dtype, batch=batch, tp_attn=tp_attn,
                           imbalance=imbalance, kernels=kernels)
    cv = {k: cv[k] for k in set().union(*(_numeric(model.attention, p).arg_names for p in PARTS))
          if k != "T"}
    return lambda t: _parts(model.attention, cv, np.asarray(t, dtype=float))["total_s"]
