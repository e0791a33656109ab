"""The prefill model in use: the calibrated operator model's values for a spread of the forward
(kvmath.derive.prefill, fitted to measured operator times) and its parts, the recompute time of a
prefix by the model a scenario asks for (calibrated, or the flat roofline of kvmath.derive.kv),
and the reloaded request's own engine step timed by that same model.
"""
from __future__ import annotations

from kvmath.logic.constants import BYTES_ACT, PARTS, PREFILL_MODELS
from kvmath.logic.layout import choose_layout, deployment_values
from kvmath.logic.rules import dense_flops, engine_of, is_moe, latent, prefill_model
from kvmath.logic.runtime import DATA, Parallel, ScenarioError, formula, with_fields

#: the engines whose fused-MoE tables a fit may borrow, in order, where the asked one has none
MOE_KERNELS = ["vllm", "sglang", "trtllm"]


def gemm_dtype(model, compute_dtype):
    """The GEMM dtype a model's dense layers run in (prefill_fit.csv's parameter suffix): FP8
    weights stored in the checkpoint are block-scaled (the bundled ones: DeepSeek-V3 and V3.2,
    128 x 128 blocks), FP8 from 16-bit weights is quantised per tensor (vLLM's online fp8)."""
    if compute_dtype == "fp8":
        return "fp8_block" if model.weight_dtype == "fp8" else "fp8"
    if compute_dtype == "nvfp4":
        return "nvfp4"
    return "bfloat16"


def expert_dtype(model, compute_dtype):
    """The routed experts' dtype as the fused-MoE tables name it (moe_fit.csv), and the kvmath
    compute dtype whose peak they run at: MXFP4 experts (gpt-oss) take 16-bit activations."""
    if model.weight_dtype == "mxfp4":
        return ["w4a16_mxfp4", "bf16"]
    dt = gemm_dtype(model, compute_dtype)
    if model.weight_dtype == "nvfp4":
        dt = "nvfp4"
    return [dt, {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4"}[dt]]


def moe_fit(gpu_name, kernels, dtype, layout):
    """[{eta_moe, m_half_moe, n_half_moe, t_moe}, the engine whose tables it is] of the fused-MoE
    fit (moe_fit.csv) for the asked engine's kernels, else another engine's, else None."""
    fits = DATA.moe_fit.get(gpu_name, {})
    for k in [kernels] + [x for x in MOE_KERNELS if x != kernels]:
        row = fits.get(k, {}).get(dtype, {}).get(layout)
        if row is not None:
            return [row, k]
    return None


def moe_fit_exact(gpu_name, kernels, dtype, layout):
    """The fused-MoE fit of exactly these kernels, dtype and layout class, or None."""
    row = DATA.moe_fit.get(gpu_name, {}).get(kernels, {}).get(dtype, {}).get(layout)
    return None if row is None else [row, kernels]


def dispatch_values(s, v, kernels, ep, fp8):
    """{c_disp, c_node, b_disp, b_comb, busbw_a2a, t_a2a, B_nic}: the expert dispatch of
    data-parallel attention as engine ``kernels`` runs it (kernels.csv), over NVLink within a
    node and each GPU's NIC between the ep / GPUs_per_node nodes the ranks span."""
    k = DATA.kernels[kernels]
    fig = DATA.allreduce[s.gpu.name]
    nic = DATA.links[DATA.scale_out_link]
    nodes = max(1.0, ep / v["N_node"])
    at = {"ep": float(ep), "k_top": v["k_top"], "n_nodes": nodes}
    keys = ["derive_prefill.c_disp_allgather", "derive_prefill.c_node_allgather"]
    if k.dp_dispatch == "alltoall":
        keys = ["derive_prefill.c_disp_alltoall", "derive_prefill.c_node_alltoall"]
    return {"c_disp": float(formula(keys[0], at)),
            "c_node": float(formula(keys[1], at)) if nodes > 1 else 0.0,
            "b_comb": k.combine_bytes, "b_disp": k.dispatch_bytes_fp8 if fp8 else k.dispatch_bytes,
            "busbw_a2a": fig[2], "t_a2a": fig[3], "B_nic": nic.bandwidth_Bps * nic.efficiency}


def calibrated_values(s, par):
    """Every substitution value of the calibrated prefill model (kvmath.derive.prefill) but T:
    the scenario's model's, its GPU's and the GPU's fit's, for the spread ``par``
    (:class:`kvmath.logic.runtime.Parallel`: ``par.gpus`` GPUs of one replica, attention on all
    of them or data-parallel in groups of ``par.tp_attn``, experts over ``par.ep`` ranks, the
    forward run by ``par.kernels``' kernels)."""
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
    # a GEMM dtype fitted on the GPU's own tables runs its own curve at its own peak; else the
    # fitted BF16 curve scaled by the measured matmul-ceiling ratio (r_dt)
    suffix = "." + gemm_dtype(model, par.compute_dtype)
    v["r_dt"] = v["eta"] / gpu.prefill_efficiency
    if ("eta_g" + suffix) in fits:
        for p in ["eta_g", "m_half", "t_kern"]:
            v[p] = fits[p + suffix]
        v["r_dt"] = 1.0
    if latent(model) and "eta_a.mla" in fits:  # MLA and its kin: the MLA kernel's own fit
        v["eta_a"] = fits["eta_a.mla"]
        v["T_a"] = fits["T_a.mla"]
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
    v.update(moe_values(s, v, par, ep))
    return v


def moe_values(s, v, par, ep):
    """The fused MoE operator's values (kvmath.derive.prefill moe_routed, moe_comm) for the
    spread: its fit for the forward engine's kernels (par.kernels, else the scenario's engine
    profile's), expert dtype and layout class, the experts' peak and stored bytes, and the
    dispatch of data-parallel attention. No fitted operator for the GPU: the dense GEMM curve
    (moe_measured 0)."""
    kernels = par.kernels if par.kernels is not None else engine_of(s).kernels
    if kernels not in DATA.kernels:
        raise ScenarioError(f"unknown forward engine {kernels!r}; expected one of "
                            f"{', '.join(sorted(list(DATA.kernels)))} (kernels.csv)")
    dt = expert_dtype(s.model, par.compute_dtype)
    out = {"P_moe": dense_flops(s.gpu, dt[1]), "b_moe": v["b_w"], "moe_measured": 1.0,
           "dpa": 1.0 if par.dp_attention else 0.0}
    layout = "tp"
    if ep > 1:
        layout = "ep"
    fit = None
    if ep > 1 and par.dp_attention:  # the engine's own wide expert-parallel path, where timed
        fit = moe_fit_exact(s.gpu.name, kernels, dt[0], "dp")
    if fit is None:
        fit = moe_fit(s.gpu.name, kernels, dt[0], layout)
    if fit is None:
        out.update({"eta_moe": v["eta_g"] * v["r_dt"], "m_half_moe": v["m_half"],
                    "n_half_moe": 0.0, "t_moe": v["t_kern"], "P_moe": v["P"],
                    "moe_measured": 0.0})
    else:
        out.update(fit[0])
    nic = DATA.links[DATA.scale_out_link]
    out.update({"c_disp": 0.0, "c_node": 0.0, "b_disp": 2.0, "b_comb": 2.0,
                "busbw_a2a": v["busbw"], "t_a2a": v["t_ar"],
                "B_nic": nic.bandwidth_Bps * nic.efficiency})
    if par.dp_attention and ep > 1:
        out.update(dispatch_values(s, v, kernels, ep, dt[1] == "fp8"))
    return out


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
