"""The prefill model in use: the calibrated operator model's values for a spread of the forward
(kvmath.derive.prefill, fitted to measured operator times) and its parts, the recompute time of a
prefix by the model a scenario asks for (calibrated, or the flat roofline of kvmath.derive.kv),
and the reloaded request's own engine step timed by that same model.
"""
from __future__ import annotations

from kvmath.logic.constants import BYTES_ACT, PARTS, PREFILL_MODELS
from kvmath.logic.layout import choose_layout, deployment_values
from kvmath.logic.rules import is_moe, prefill_model
from kvmath.logic.runtime import DATA, Parallel, ScenarioError, formula, with_fields


def calibrated_values(s, par):
    """Every substitution value of the calibrated prefill model (kvmath.derive.prefill) but T:
    the scenario's model's, its GPU's and the GPU's fit's, for the spread ``par``
    (:class:`kvmath.logic.runtime.Parallel`: ``par.gpus`` GPUs of one replica, attention on all
    of them or data-parallel in groups of ``par.tp_attn``, experts over ``par.ep`` ranks)."""
    model = s.model
    gpu = s.gpu
    tp = par.gpus
    ep = par.ep
    batch = par.batch
    if int(batch) != batch or batch < 1:
        raise ScenarioError(f"batch must be a positive integer, got {batch}")
    # the KV heads must fit the GPUs attention runs on: with data-parallel attention tp_attn
    k_attn = par.tp_attn if par.dp_attention else tp
    at = with_fields(s, {"tp": k_attn, "ep": None, "batch": 1, "compute_dtype": par.compute_dtype,
                         "kv_dtype": None, "efficiency": None})
    layout = choose_layout(at, 1, None, False)
    v = deployment_values(at, layout)
    fits = DATA.prefill_fit.get(gpu.name)
    if fits is None:
        raise ScenarioError(f"no prefill fit for GPU {gpu.name!r} in prefill_fit.csv")
    allreduce = DATA.allreduce.get(gpu.name)
    if allreduce is None:
        raise ScenarioError(f"no all-reduce figures for GPU {gpu.name!r} in allreduce.csv")
    v.update(fits)
    v["busbw"] = allreduce[0]
    v["t_ar"] = allreduce[1]
    # FP8: the fitted BF16 curve scaled by the measured FP8/BF16 matmul-ceiling ratio
    v["r_dt"] = v["eta"] / gpu.prefill_efficiency
    v["P_a"] = gpu.bf16_dense_flops  # attention kernels run on BF16 tensor cores (assumption)
    v["B_peak"] = gpu.hbm_bandwidth_Bps
    v["b_act"] = BYTES_ACT
    v["n_seq"] = batch
    if ep is not None and (ep < 1 or tp % ep):
        raise ScenarioError(f"ep {ep} must be a positive divisor of tp {tp}")
    if par.dp_attention:
        if par.tp_attn < 1 or tp % par.tp_attn:
            raise ScenarioError(f"tp_attn {par.tp_attn} must be a positive divisor of tp {tp}")
        v["K_d"] = par.tp_attn
        ep = tp if ep is None else ep
    else:
        v["K_d"] = tp
        ep = 1 if ep is None else ep
    v["ep"] = ep
    v["K_x"] = tp // ep if ep > 1 else tp
    if not is_moe(model):  # MoE terms vanish with L_moe = 0; avoid 0/0
        v["E"] = 1
        v["k_top"] = 1
    if par.imbalance < 1:
        raise ScenarioError(f"imbalance must be >= 1, got {par.imbalance}")
    v["f_imb"] = par.imbalance if ep > 1 else 1.0
    return v


def prefill_parts(model, cv, tokens):
    """The calibrated prefill's parts at ``tokens`` (s), by name, and their sum as total_s."""
    at = {**cv, "T": tokens}
    out = {p: formula("derive_prefill.parts." + model.attention + "." + p, at) for p in PARTS}
    total = 0.0
    for p in PARTS:
        total = total + out[p]
    out["total_s"] = total
    return out


def layout_parallel(layout, batch=1):
    """The spread of a prefill forward on a layout: experts over ep ranks (or sharded by TP) with
    attention tensor-parallel over the replica, or, with data-parallel attention, experts over
    every GPU of the replica and attention in groups of the layout's TP."""
    if layout.dp_attention:
        return Parallel(gpus=layout.gpus, ep=layout.gpus, dp_attention=True,
                        tp_attn=layout.tp, compute_dtype=layout.compute_dtype, batch=batch)
    return Parallel(gpus=layout.gpus, ep=layout.ep if layout.ep > 1 else None,
                    compute_dtype=layout.compute_dtype, batch=batch)


def recompute_fn(s, layout, values, prefill=None, batch=1):
    """[name of the prefill model used, f(T) -> recompute seconds], of ``batch`` equal prompts
    in one forward pass on ``layout``.

    prefill (None: the scenario's, :func:`kvmath.logic.rules.prefill_model`): ``ideal``, the
    flat roofline of :mod:`kvmath.derive.kv`; ``calibrated``, the operator model of
    :mod:`kvmath.derive.prefill`, fitted to measured operator times. A GPU with no calibration
    falls back to ideal, and the name says so.
    """
    if prefill is None:
        prefill = prefill_model(s)
    if prefill not in PREFILL_MODELS:
        raise ScenarioError(f"--prefill must be one of {', '.join(PREFILL_MODELS)}, "
                            f"got {prefill!r}")
    key = "derive.t_recompute"
    base = values
    if batch != 1:  # the flat roofline of a batch: the compute adds up, the weights read once
        key = "derive.t_recompute_batch"
        base = {**values, "n_seq": float(batch)}

    def ideal(t):
        return formula(key, {**base, "T": t})
    if prefill == "ideal":
        return ["ideal", ideal]
    gpu = s.gpu
    if gpu.name not in DATA.prefill_fit or gpu.name not in DATA.allreduce:
        return ["ideal (no calibration for this GPU)", ideal]
    cv = calibrated_values(s, layout_parallel(layout, batch))
    model = s.model

    def calibrated(t):
        return prefill_parts(model, cv, t)["total_s"]
    return ["calibrated", calibrated]


def suffix_values(values, rec, tokens):
    """The prefill model's times for the prefix, the prefix with the new tokens and the new
    tokens alone at prefix length ``tokens`` (a number, or a numpy array in Python)."""
    n = values["n"]
    return {"T": tokens, "t_rec_p": rec(tokens), "t_rec_pn": rec(tokens + n), "t_rec_n": rec(n)}


def time_step(values, rec, tokens):
    """Time the engine step of ``values`` (in place) at prefix length ``tokens`` with the
    recompute's prefill model ``rec``: the reloaded request's own forward pass of its n new
    tokens over the loaded prefix (t_suffix) costs what that model says they cost, so a reload
    can never beat the prefill it would run anyway. Returns the values at ``tokens``."""
    at = {**values, **suffix_values(values, rec, tokens)}
    values["t_step"] = formula("derive.t_suffix", at)
    values["t_0"] = formula("derive.fixed_cost", values)
    at["t_step"] = values["t_step"]
    at["t_0"] = values["t_0"]
    return at
