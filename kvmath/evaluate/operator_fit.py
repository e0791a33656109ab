"""The calibrated prefill model fitted per NVIDIA GPU on aiconfigurator's measured operator
tables (the vendored subset ``kvmath/data/aiconfigurator/``, Apache-2.0, NVIDIA; its README).

What is fitted, per GPU aiconfigurator measures (a100-sxm, h100-sxm, h200, b200, gb200, gb300,
l40s), each on calibration rows and judged on rows held out of it:

* GEMM per dtype (``t_gemm``: eta_g of that dtype's dense peak, m_half, t_kern; eta_g at most the
  GPU's measured matmul ceiling in it): bfloat16 and per-tensor fp8 from vLLM's tables, fp8_block
  from TensorRT-LLM's (vLLM times them eagerly), nvfp4 on Blackwell. Calibration shapes n, k in
  {1024, 4096, 8192, 16384}; held out: n or k in {2048, 7168}.
* Attention (vLLM's prefill kernel, batch 1, T >= 512: eta_a T/(T + T_a) of the BF16 peak, with
  the GEMM's t_kern per layer): calibration head_dim 128 and 8 to 64 heads on the GPU; held out
  head_dim 64 and 1 to 4 heads. eta_a is capped at the best fraction measured (the tables stop
  at 16,384 tokens: no gain extrapolated past them). MLA the same on TensorRT-LLM's context MLA
  kernel (16 to 128 heads; held out 1 to 8).
* The fused MoE operator (``moe_routed``: eta_moe, m_half_moe, n_half_moe, t_moe) per engine's
  kernels (vLLM, SGLang, TensorRT-LLM), expert dtype and layout class (expert-TP: every expert
  split over the ranks; expert-parallel: whole experts spread), balanced routing; calibration:
  the Mixtral, Qwen3-30B-A3B, DeepSeek-V3, gpt-oss-120b and Llama-4-Scout shapes of the pure
  layouts; held out: Qwen3-235B-A22B's shape and the mixed layouts (TP 2 x EP 4, TP 4 x EP 2).
* Collectives (nccl-tests, messages of 1 MiB and more): all-reduce t_ar + 2(K-1)/K bytes/busbw,
  all-to-all t + (K-1)/K bytes/busbw.

aiconfigurator measures no memory-bound op (RMSNorm, RoPE, activation, residual add): those stay
Vidur's fit on H100 and A100 (``scripts/fit_prefill.py``) and H100's elsewhere (an assumption).
aiconfigurator's end-to-end sample rows validate, never fit.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from functools import lru_cache

import numpy as np
from scipy.optimize import least_squares

from kvmath.evaluate.api import ScenarioError, numeric_of
from kvmath.tables.rows import bundled, data_path

#: kvmath GPUs aiconfigurator measures (its systems a100_sxm ... l40s: the subset's README)
MEASURED = ("a100-sxm", "h100-sxm", "h200", "b200", "gb200", "gb300", "l40s")
#: aiconfigurator dtype -> (kvmath compute dtype: its peak and matmul ceiling, bytes per weight)
GEMM_DTYPES = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0),
               "fp8_block": ("fp8", 1.0 + 4.0 / 128 ** 2), "nvfp4": ("nvfp4", 0.5 + 1.0 / 16)}
#: the suffix of a dtype's GEMM parameters in prefill_fit.csv (bfloat16's are the plain names)
SUFFIX = {"bfloat16": "", "fp8": ".fp8", "fp8_block": ".fp8_block", "nvfp4": ".nvfp4"}
#: MoE expert dtypes: w4a16_mxfp4 (gpt-oss) runs 16-bit activations on MXFP4 weights
MOE_DTYPES = {**GEMM_DTYPES, "w4a16_mxfp4": ("bf16", 0.5 + 1.0 / 32)}
CAL_NK = {1024, 4096, 8192, 16384}
#: the GEMM dimensions held out of the fit (a shape with n or k among them)
GEMM_HELD_NK = {2048, 7168}
MOE_HELD_SHAPES = {(4096, 1536)}  # Qwen3-235B-A22B's (hidden, expert width)
MOE_MIXED = {(2, 4), (4, 2)}
MOE_BACKENDS = ("vllm", "sglang", "trtllm")
MIN_COLLECTIVE_BYTES = 2 ** 20


def _read(name):
    with open(data_path("aiconfigurator") / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@lru_cache(maxsize=None)
def subset(name):
    """Rows of one vendored table (kvmath/data/aiconfigurator/<name>.csv)."""
    return tuple(_read(f"{name}.csv"))


def gpu_constants(gpu, dtype="bf16"):
    """Peak FLOP/s in dtype, measured matmul ceiling in it, effective and datasheet HBM B/s."""
    from kvmath.logic.rules import compute_efficiency, dense_flops
    g = bundled().gpus[gpu]
    return dict(P=dense_flops(g, dtype), mamf=compute_efficiency(g, dtype),
                B_hbm=g.hbm_bandwidth_Bps * g.hbm_efficiency, B_peak=g.hbm_bandwidth_Bps)


def stats(pred, meas, sel=None):
    """{n, median and p90 |pred/meas - 1|, median signed}: the error of a fit on rows sel."""
    r = pred / meas - 1.0
    if sel is not None:
        r = r[sel]
    if len(r) == 0:
        return dict(n=0, median=None, p90=None, signed=None)
    a = np.abs(r)
    return dict(n=int(len(r)), median=float(np.median(a)), p90=float(np.quantile(a, 0.9)),
                signed=float(np.median(r)))


def _arrays(rows, cols):
    return {c: np.array([float(r[c]) for r in rows]) for c in cols}


# ---------------------------------------------------------------------------- GEMM
def fit_gemm(gpu, dtype):
    """{params, cal, held, version, n} of one GPU's GEMM in dtype, or None (not measured)."""
    rows = [r for r in subset("gemm") if r["gpu"] == gpu and r["dtype"] == dtype]
    kv_dtype, b_w = GEMM_DTYPES[dtype]
    try:
        const = gpu_constants(gpu, kv_dtype)
    except ScenarioError:  # no tensor cores of that dtype
        return None
    if not rows:
        return None
    a = _arrays(rows, ("m", "n", "k", "latency_ms"))
    t = a["latency_ms"] * 1e-3
    cal = np.isin(a["n"], list(CAL_NK)) & np.isin(a["k"], list(CAL_NK))
    f = numeric_of("kvmath.derive.prefill", "t_gemm")

    def model(x, s=slice(None)):
        return f(m=a["m"][s], k_in=a["k"][s], n_out=a["n"][s], eta_g=x[0], m_half=x[1],
                 t_kern=x[2], r_dt=1.0, P=const["P"], b_w=b_w, B_hbm=const["B_hbm"])

    res = least_squares(lambda x: np.log(model(x, cal) / t[cal]),
                        x0=[min(0.6, 0.9 * const["mamf"]), 100.0, 5e-6],
                        bounds=([0.02, 0.0, 0.0], [const["mamf"] * (1 - 1e-5), 1e5, 1e-3]))
    pred = model(res.x)
    return dict(params={"eta_g": res.x[0], "m_half": res.x[1], "t_kern": res.x[2]},
                cal=stats(pred, t, cal), held=stats(pred, t, ~cal), n=int(cal.sum()),
                source=f"gemm.csv {rows[0]['backend']} {rows[0]['version']} {dtype}")


# ---------------------------------------------------------------------------- attention
def _fit_attention_like(gpu, rows, d_of, cal_of, t_kern):
    const = gpu_constants(gpu)
    a = _arrays(rows, ("isl", "num_heads", "latency_ms"))
    T, h, t = a["isl"], a["num_heads"], a["latency_ms"] * 1e-3
    dqk = np.array([d_of(r)[0] for r in rows])
    dv = np.array([d_of(r)[1] for r in rows])
    fl = 2.0 * h * (dqk + dv) * T * (T + 1) / 2.0  # causal, one layer
    big = T >= 512
    cal = np.array([cal_of(r) for r in rows]) & big
    held = ~np.array([cal_of(r) for r in rows]) & big

    def model(x, s=slice(None)):
        return fl[s] * (T[s] + x[1]) / (x[0] * T[s] * const["P"]) + t_kern

    cap = min(const["mamf"] * (1 - 1e-5),
              float(np.max((fl / np.maximum(t - t_kern, 1e-12) / const["P"])[cal])))
    res = least_squares(lambda x: np.log(model(x, cal) / t[cal]), x0=[0.9 * cap, 500.0],
                        bounds=([0.01, 0.0], [cap, 1e5]))
    pred = model(res.x)
    return dict(params={"eta_a": res.x[0], "T_a": res.x[1]}, cap=cap, n=int(cal.sum()),
                cal=stats(pred, t, cal), held=stats(pred, t, held),
                source=f"{rows[0]['backend']} {rows[0]['version']} {rows[0]['kernel_source']}")


def fit_attention(gpu, t_kern):
    rows = [r for r in subset("context_attention") if r["gpu"] == gpu]
    out = _fit_attention_like(gpu, rows, lambda r: (float(r["head_dim"]),) * 2,
                              lambda r: r["head_dim"] == "128" and int(r["num_heads"]) >= 8, t_kern)
    out["source"] = "context_attention.csv " + out["source"]
    return out


def fit_mla(gpu, t_kern):
    rows = [r for r in subset("context_mla") if r["gpu"] == gpu
            and r["mla_dtype"] == "bfloat16" and r["kv_cache_dtype"] == "bfloat16"]
    if not rows:
        return None
    out = _fit_attention_like(gpu, rows, lambda r: (192.0, 128.0),
                              lambda r: int(r["num_heads"]) >= 16, t_kern)
    out["source"] = "context_mla.csv " + out["source"]
    return out


# ---------------------------------------------------------------------------- MoE
#: the expert-parallel degrees held out of the data-parallel (wide-EP) class
DP_HELD_EP = {"16", "128"}


def _moe_groups(gpu):
    by = defaultdict(list)
    for r in subset("moe"):
        if r["gpu"] == gpu and r["distribution"] in ("balanced", "uniform"):
            by[(r["backend"], r["dtype"])].append(r)
    return by


def fit_moe(gpu, backend, dtype, layout):
    """{params, cal, held, n, source} of the fused MoE operator of one GPU, engine, expert dtype
    and layout class ("tp": experts split over the ranks; "ep": whole experts spread, mixed
    layouts held out; "dp": the engine's wide expert-parallel path under data-parallel
    attention, SGLang's DeepEP tables, EP 16 and 128 held out), or None where the class has
    fewer than 8 calibration rows."""
    rows = _moe_groups(gpu).get((backend, dtype), [])
    if dtype not in MOE_DTYPES:
        return None
    wide = [r for r in rows if r["kernel_source"] == "deepepmoe"]
    rows = [r for r in rows if r["kernel_source"] != "deepepmoe"]
    if layout == "dp":
        rows = [r for r in wide if r["moe_tp"] == "1"]
    kv_dtype, b_m = MOE_DTYPES[dtype]
    try:
        const = gpu_constants(gpu, kv_dtype)
    except ScenarioError:
        return None
    if layout != "dp":
        pure = [r for r in rows if (r["moe_ep"] == "1") == (layout == "tp")
                and (r["moe_tp"] == "1" or layout == "tp")]
        mixed = [r for r in rows if layout == "ep"
                 and (int(r["moe_tp"]), int(r["moe_ep"])) in MOE_MIXED]
        rows = pure + mixed
    if not rows:
        return None
    a = _arrays(rows, ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                       "moe_tp", "moe_ep", "latency_ms"))
    t = a["latency_ms"] * 1e-3
    shape = [(int(r["hidden_size"]), int(r["inter_size"])) for r in rows]
    is_mixed = np.array([(int(r["moe_tp"]), int(r["moe_ep"])) in MOE_MIXED for r in rows])
    held_shape = np.array([s in MOE_HELD_SHAPES for s in shape])
    cal = ~held_shape & ~is_mixed
    if layout == "dp":
        cal = np.array([r["moe_ep"] not in DP_HELD_EP for r in rows])
    if cal.sum() < 8:
        return None
    f = numeric_of("kvmath.derive.prefill", "moe_routed")
    fixed = dict(f_imb=1.0, n_seq=1.0, dpa=0.0, K_d=1.0, P_moe=const["P"], b_moe=b_m,
                 B_hbm=const["B_hbm"])

    def model(x, s=slice(None)):
        return f(T=a["num_tokens"][s], d=a["hidden_size"][s], I_exp=a["inter_size"][s],
                 k_top=a["topk"][s], E=a["num_experts"][s], K_x=a["moe_tp"][s],
                 ep=a["moe_ep"][s], eta_moe=x[0], m_half_moe=x[1], n_half_moe=x[2],
                 t_moe=x[3], **fixed)

    res = least_squares(lambda x: np.log(model(x, cal) / t[cal]), x0=[0.4, 50.0, 100.0, 1e-5],
                        bounds=([0.01, 0.0, 0.0, 0.0], [const["mamf"] * (1 - 1e-5), 1e5, 1e5, 1e-3]))
    pred = model(res.x)
    return dict(params={"eta_moe": res.x[0], "m_half_moe": res.x[1], "n_half_moe": res.x[2],
                        "t_moe": res.x[3]},
                cal=stats(pred, t, cal), held=stats(pred, t, ~cal), n=int(cal.sum()),
                source=f"moe.csv {backend} {rows[0]['version']} {dtype}")


# ---------------------------------------------------------------------------- collectives
def _fit_collective(rows, factor):
    a = _arrays(rows, ("num_gpus", "message_elements", "latency_ms"))
    K, by, t = a["num_gpus"], a["message_elements"] * 2.0, a["latency_ms"] * 1e-3
    sel = by >= MIN_COLLECTIVE_BYTES
    fac = factor(K)

    def model(x, s=slice(None)):
        return x[1] * 1e-6 + fac[s] * by[s] / (x[0] * 1e9)

    res = least_squares(lambda x: np.log(model(x, sel) / t[sel]), x0=[100.0, 20.0],
                        bounds=([0.1, 0.0], [5000.0, 1e4]))
    return dict(busbw=res.x[0] * 1e9, latency=res.x[1] * 1e-6,
                err=stats(model(res.x), t, sel), source=f"nccl.csv {rows[0]['version']}")


def fit_collectives(gpu):
    """{"all_reduce": {...}, "alltoall": {...}} from nccl-tests (half, messages >= 1 MiB)."""
    out = {}
    for op, factor in (("all_reduce", lambda K: 2 * (K - 1) / K), ("alltoall", lambda K: (K - 1) / K)):
        rows = [r for r in subset("nccl") if r["gpu"] == gpu and r["op"] == op]
        out[op] = _fit_collective(rows, factor) if rows else None
    return out


@lru_cache(maxsize=None)
def fit_gpu(gpu):
    """Every fit of one measured GPU: gemm (by dtype), attention, mla, moe (by engine, dtype and
    layout class) and collectives."""
    gemm = {dt: fit_gemm(gpu, dt) for dt in GEMM_DTYPES}
    gemm = {dt: g for dt, g in gemm.items() if g is not None}
    t_kern = gemm["bfloat16"]["params"]["t_kern"]
    moe = {}
    for be in MOE_BACKENDS:
        for dt in MOE_DTYPES:
            for layout in ("tp", "ep", "dp"):
                m = fit_moe(gpu, be, dt, layout)
                if m is not None:
                    moe[(be, dt, layout)] = m
    return dict(gemm=gemm, attention=fit_attention(gpu, t_kern), mla=fit_mla(gpu, t_kern),
                moe=moe, collectives=fit_collectives(gpu))


# ---------------------------------------------------------------------------- rows to write
FIT_DATE = "2026-12-06"
SOURCE = ("aiconfigurator-core 0.12.0 (NVIDIA, Apache-2.0), vendored subset "
          "kvmath/data/aiconfigurator/")
UNITS = {"eta_g": "1", "m_half": "tokens", "t_kern": "s", "eta_a": "1", "T_a": "tokens"}


def _err(s):
    return "none" if not s["n"] else f"median {s['median']:.3f}, p90 {s['p90']:.3f} over {s['n']}"


def prefill_rows(gpu, f):
    """prefill_fit.csv rows of one measured GPU's GEMM, attention and MLA fits."""
    rows = []
    for dt, g in f["gemm"].items():
        for p, v in g["params"].items():
            rows.append(dict(gpu=gpu, parameter=p + SUFFIX[dt], value=v, unit=UNITS[p],
                             kind="measurement",
                             method="least_squares on log(t_gemm/measured), eta_g <= the "
                                    f"GPU's {GEMM_DTYPES[dt][0]} MAMF fraction "
                                    "(kvmath.evaluate.operator_fit.fit_gemm)",
                             calibration_rows=f"aiconfigurator/{g['source']}: n, k in "
                                              f"{sorted(CAL_NK)} ({g['n']} rows)",
                             fitted=FIT_DATE, notes=f"held out (n or k 2048 or 7168): "
                                                    f"|error| {_err(g['held'])}"))
    for fam, suffix in (("attention", ""), ("mla", ".mla")):
        a = f[fam]
        if a is None:
            continue
        for p, v in a["params"].items():
            rows.append(dict(gpu=gpu, parameter=p + suffix, value=v, unit=UNITS[p],
                             kind="measurement",
                             method="least_squares on log(t/measured) of eta_a T/(T + T_a), "
                                    f"eta_a <= the best fraction measured ({a['cap']:.3f}) "
                                    "(kvmath.evaluate.operator_fit)",
                             calibration_rows=f"aiconfigurator/{a['source']}: batch 1, "
                                              f"T >= 512 ({a['n']} rows)",
                             fitted=FIT_DATE, notes=f"held out (fewer heads{'' if suffix else ', head_dim 64'}): "
                                                    f"|error| {_err(a['held'])}"))
    return rows


def moe_rows(gpu, f):
    """moe_fit.csv rows of one measured GPU."""
    out = []
    for (be, dt, layout), m in sorted(f["moe"].items()):
        out.append(dict(gpu=gpu, kernels=be, dtype=dt, layout=layout, **m["params"],
                        calibration_rows=m["n"], cal_median_error=m["cal"]["median"],
                        held_median_error=m["held"]["median"], held_p90_error=m["held"]["p90"],
                        held_rows=m["held"]["n"], kind="measurement",
                        source=SOURCE + m["source"], fitted=FIT_DATE,
                        notes=("SGLang's wide-EP context MoE (DeepEP, DeepGEMM), the path of its "
                               "data-parallel attention; held out: EP 16 and 128" if layout == "dp"
                               else "held out: Qwen3-235B-A22B's shape" +
                               (" and the mixed layouts TP 2 x EP 4, TP 4 x EP 2"
                                if layout == "ep" else ""))))
    return out


def collective_row(gpu, f):
    c = f["collectives"]
    ar, a2a = c["all_reduce"], c["alltoall"]
    return dict(gpu=gpu, busbw_Bps=ar["busbw"], latency_s=ar["latency"],
                a2a_busbw_Bps=a2a["busbw"] if a2a else None,
                a2a_latency_s=a2a["latency"] if a2a else None, kind="measurement",
                source=SOURCE + ar["source"],
                source_location="nccl-tests all_reduce (ring: t_ar + 2(K-1)/K bytes/busbw) and "
                                "alltoall (t + (K-1)/K bytes/busbw), half, 2 to 8 GPUs, messages "
                                ">= 1 MiB, least squares on log(t/measured)",
                retrieved=FIT_DATE,
                notes=f"all-reduce |error| {_err(ar['err'])}; all-to-all |error| "
                      f"{_err(a2a['err']) if a2a else 'none'}")


def heldout_rows(gpu, f):
    """prefill_heldout.csv rows: each fitted family's error on its calibration and held-out
    rows (fractions; the all-token figures repeated in the >= 512 columns)."""
    out = []

    def row(profile, st, s):
        if s["n"]:
            out.append(dict(gpu=gpu, profile=profile, set=st, rows=s["n"],
                            median_abs_error=s["median"], p90_abs_error=s["p90"],
                            median_abs_error_ge512=s["median"], p90_abs_error_ge512=s["p90"],
                            mean_signed_error_ge512=s["signed"]))
    for dt, g in f["gemm"].items():
        row(f"aiconfigurator gemm {dt}", "calibration", g["cal"])
        row(f"aiconfigurator gemm {dt} (n or k 2048, 7168)", "held-out", g["held"])
    for fam in ("attention", "mla"):
        if f[fam] is not None:
            row(f"aiconfigurator {fam}", "calibration", f[fam]["cal"])
            row(f"aiconfigurator {fam} (fewer heads)", "held-out", f[fam]["held"])
    return out
