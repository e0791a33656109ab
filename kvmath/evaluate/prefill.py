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

from kvmath.evaluate.values import Numeric, ScenarioError, fn, scenario_values
from kvmath.tables.schema import DataError, read
from kvmath.tables.rows import Allreduce, FitRow, bundled, data_path

PARAMETERS = ("eta_g", "m_half", "t_kern", "eta_norm", "eta_rope", "eta_act", "eta_add", "t_kng",
              "eta_a", "T_a")
#: load imbalance across expert-parallel ranks: busiest rank's tokens over the mean (assumption)
DEFAULT_IMBALANCE = 1.0
BYTES_ACT = 2.0  # BF16 activations
PARTS = ("gemm_s", "nongemm_s", "attention_s", "allreduce_s", "moe_s", "lm_head_s",
         "recurrent_s")


@lru_cache(maxsize=None)
def fitted_parameters(path=None):
    """{gpu: {parameter: value}} from prefill_fit.csv; DataError on a bad or missing value."""
    path = path or data_path("prefill_fit.csv")
    out = {}
    for r in read(FitRow, path).values():
        out.setdefault(r.gpu, {})[r.parameter] = r.value
    for gpu, params in out.items():
        missing = [p for p in PARAMETERS if p not in params]
        if missing:
            raise DataError(path, None, "parameter", f"GPU {gpu!r} lacks {', '.join(missing)}")
    return out


@lru_cache(maxsize=None)
def allreduce_figures(path=None):
    """{gpu: (busbw B/s, latency s)} from allreduce.csv."""
    rows = read(Allreduce, path)
    return {g: (r.busbw_Bps, r.latency_s) for g, r in rows.items()}


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
                      batch=1, tp_attn=1, imbalance=DEFAULT_IMBALANCE):
    """Every substitution value of the calibrated model except T."""
    if int(batch) != batch or batch < 1:
        raise ScenarioError(f"batch must be a positive integer, got {batch}")
    # the values the calibrated parts read do not depend on the TP given here (K_d and K_x are
    # set below), but the KV heads must fit it: with data-parallel attention they split tp_attn
    v, _ = scenario_values(model, gpu, bundled().tiers["host-dram"],
                           tp=tp_attn if dp_attention else tp, compute_dtype=compute_dtype)
    fits = fitted_parameters()
    if gpu.name not in fits:
        raise ScenarioError(f"no prefill fit for GPU {gpu.name!r} in prefill_fit.csv")
    if gpu.name not in allreduce_figures():
        raise ScenarioError(f"no all-reduce figures for GPU {gpu.name!r} in allreduce.csv")
    v.update(fits[gpu.name])
    v["busbw"], v["t_ar"] = allreduce_figures()[gpu.name]
    # FP8: the fitted BF16 curve scaled by the measured FP8/BF16 matmul-ceiling ratio
    v["r_dt"] = v["eta"] / gpu.prefill_efficiency
    v["P_a"] = gpu.bf16_dense_flops  # attention kernels run on BF16 tensor cores (assumption)
    v["B_peak"] = gpu.hbm_bandwidth_Bps
    v["b_act"] = BYTES_ACT
    v["n_seq"] = batch
    if ep is not None and (ep < 1 or tp % ep):
        raise ScenarioError(f"ep {ep} must be a positive divisor of tp {tp}")
    if dp_attention:
        if tp_attn < 1 or tp % tp_attn:
            raise ScenarioError(f"tp_attn {tp_attn} must be a positive divisor of tp {tp}")
        v["K_d"] = tp_attn
        ep = tp if ep is None else ep
    else:
        v["K_d"] = tp
        ep = 1 if ep is None else ep
    v["ep"] = ep
    v["K_x"] = tp // ep if ep > 1 else tp
    if not model.is_moe:
        v.update(E=1, k_top=1)  # MoE terms vanish with L_moe = 0; avoid 0/0
    if imbalance < 1:
        raise ScenarioError(f"imbalance must be >= 1, got {imbalance}")
    v["f_imb"] = imbalance if ep > 1 else 1.0
    return v


def prefill_time(model, gpu, tokens, tp=1, ep=None, dp_attention=False, compute_dtype="bf16",
                 batch=1, kind="calibrated", tp_attn=1, imbalance=DEFAULT_IMBALANCE):
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
    v, _ = scenario_values(model, gpu, bundled().tiers["host-dram"], tp=tp,
                           compute_dtype=compute_dtype)
    at = {**v, "T": T, "n_seq": batch}
    ideal_total = fn("t_recompute" if batch == 1 else "t_recompute_batch").take(at)
    if kind == "ideal":
        return {"total_s": ideal_total, "compute_s": batch * fn("t_compute").take(at),
                "weights_floor_s": fn("t_weights").take(at)}
    cv = calibrated_values(model, gpu, tp, ep, dp_attention, compute_dtype, batch, tp_attn,
                           imbalance)
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
                  tp_attn=1, imbalance=DEFAULT_IMBALANCE):
    """f(T) -> calibrated prefill seconds, with every value but T fixed once (for root finding)."""
    model, gpu = _resolve(model, gpu)
    cv = calibrated_values(model, gpu, tp, ep, dp_attention, compute_dtype, batch, tp_attn,
                           imbalance)
    cv = {k: cv[k] for k in set().union(*(_numeric(model.attention, p).arg_names for p in PARTS))
          if k != "T"}
    return lambda t: _parts(model.attention, cv, np.asarray(t, dtype=float))["total_s"]
