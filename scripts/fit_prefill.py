"""Fit the calibrated prefill model (kvmath/derive/prefill.py) to measured operator times.

Usage: PYTHONPATH=. python scripts/fit_prefill.py  (writes kvmath/data/prefill_fit.csv,
prefill_heldout.csv, moe_fit.csv and allreduce.csv's measured rows; --check compares with the
bundled files instead of writing).

Every NVIDIA GPU aiconfigurator measures (kvmath.evaluate.operator_fit.MEASURED) gets its own
GEMM (per dtype), attention, MLA, fused-MoE (per engine's kernels, expert dtype and layout class)
and collective parameters, fitted on the vendored subset of aiconfigurator-core's operator tables
(kvmath/data/aiconfigurator/, its README); each family's held-out error is in prefill_heldout.csv
and the rows' notes. aiconfigurator measures no memory-bound op, so those (eta_norm, eta_rope,
eta_act, eta_add, t_kng) are fitted on the Vidur profiles of H100 and A100 (Llama-2-7b,
Llama-2-70b and Qwen-72B; every other Vidur file held out) and taken from H100 elsewhere (an
assumption). The Vidur profiles are also a second source the GEMM fit never saw: the per-layer
error of the whole fit on them is in prefill_heldout.csv. GPUs no one measured (H100 PCIe, H20,
MI300X, MI355X, Rubin) take H100's parameters, efficiencies scaled by their matmul ceiling
(kind assumption), and say so.

Method: scipy least_squares on log(predicted/measured), the model's own expressions.
"""

import argparse
import math
import csv
import io
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from kvmath.derive import prefill as DP
from kvmath.evaluate import operator_fit as OF
from kvmath.evaluate.api import numeric_of
from kvmath.tables.schema import read, table
from kvmath.tables.rows import DataError, VidurMlp, bundled, data_path

FIT_DATE = "2026-11-30"
CALIBRATION = ("Llama-2-7b-hf", "Llama-2-70b-hf", "Qwen-72B")
HELD_OUT = ("CodeLlama-34b-Instruct-hf", "internlm-20b", "phi-2", "Meta-Llama-3-8B",
            "Meta-Llama-3-70B")
PROFILED = {"h100-sxm": "h100", "a100-sxm": "a100"}
ATTENTION_KERNEL = {"h100-sxm": "flashattention-3", "a100-sxm": "flashattention-2"}
#: GPUs without profiles take h100-sxm's shape curve, their efficiencies scaled by MAMF
DERIVED = ("h200", "h100-pcie", "b200", "gb200", "l40s", "mi300x", "h20", "gb300", "mi355x", "rubin",
           "l4")
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
MEM_OPS = {"input_layernorm": "eta_norm", "post_attention_layernorm": "eta_norm",
           "attn_rope": "eta_rope", "mlp_act": "eta_act", "add": "eta_add"}
MEM_CLASSES = ("eta_norm", "eta_rope", "eta_act", "eta_add")
#: phi-2 (parallel attention and MLP) has no post-attention norm
OPTIONAL_OPS = ("post_attention_layernorm",)

B_ACT = 2.0  # fp16 activations in the profiles


def vidur_path(gpu, model):
    return data_path("vidur") / f"{PROFILED[gpu]}--{model}--mlp.csv"


def load_profile(gpu, model):
    """Per-row arrays of one Vidur file: shapes per TP rank and times in seconds."""
    path = vidur_path(gpu, model)
    out = {k: [] for k in ("m", "tp", "d", "nq", "nkv", "dh", "I", "gated", *GEMM_OPS, *MEM_OPS)}
    for r in read(VidurMlp, path):
        out["m"].append(r.num_tokens)
        out["tp"].append(r.num_tensor_parallel_workers)
        out["d"].append(r.n_embd)
        out["nq"].append(r.n_head)
        out["nkv"].append(r.n_kv_head)
        out["dh"].append(r.n_embd // r.n_head)
        out["I"].append(r.n_expanded_embd)
        out["gated"].append(r.use_gated_mlp == "True")
        for op in (*GEMM_OPS, *MEM_OPS):
            ms = getattr(r, f"{op}_ms_median")
            out[op].append(np.nan if ms is None else ms * 1e-3)
    return {k: np.array(v) for k, v in out.items()}


def gemm_shapes(p):
    """(k, n) per GEMM op of each row, on one TP rank (the harness's shapes)."""
    tp, d, I = p["tp"], p["d"], p["I"]
    qkv = (p["nq"] + 2 * p["nkv"]) * p["dh"] / tp
    up = np.where(p["gated"], 2 * I, I) / tp
    return {"attn_pre_proj": (d, qkv), "attn_post_proj": (p["nq"] * p["dh"] / tp, d),
            "mlp_up_proj": (d, up), "mlp_down_proj": (I / tp, d)}


def mem_elements(p):
    """Elements per token each memory-bound op moves (read + write), one TP rank."""
    tp, d = p["tp"], p["d"]
    return {"input_layernorm": 2 * d, "post_attention_layernorm": 2 * d,
            "attn_rope": 2 * (p["nq"] + p["nkv"]) * p["dh"] / tp,
            "mlp_act": np.where(p["gated"], 3, 2) * p["I"] / tp,
            "add": np.where(p["gated"], 3, 4) * d}  # phi-2 adds three tensors


def gpu_constants(gpu):
    g = bundled().gpus[gpu]
    return dict(P=g.bf16_dense_flops, B_hbm=g.hbm_bandwidth_Bps * g.hbm_efficiency,
                B_peak=g.hbm_bandwidth_Bps, mamf=g.prefill_efficiency)


def predict_gemm(params, const, m, k, n):
    f = numeric_of(DP, "t_gemm")
    return f(m=m, k_in=k, n_out=n, eta_g=params["eta_g"], m_half=params["m_half"],
             t_kern=params["t_kern"], r_dt=1.0, P=const["P"], b_w=B_ACT, B_hbm=const["B_hbm"])


def predict_mem(params, const, m, elements, eta):
    f = numeric_of(DP, "t_membound")
    return f(m=m, e_tok=elements, eta_mem=eta, t_kng=params["t_kng"], b_act=B_ACT,
             B_peak=const["B_peak"])


def _stack(gpu, models):
    return [load_profile(gpu, m) for m in models]


def fit_gemm(gpu, profiles):
    const = gpu_constants(gpu)
    m = np.concatenate([p["m"] for p in profiles for _ in GEMM_OPS])
    k = np.concatenate([gemm_shapes(p)[op][0] * np.ones(len(p["m"])) for p in profiles
                        for op in GEMM_OPS])
    n = np.concatenate([gemm_shapes(p)[op][1] * np.ones(len(p["m"])) for p in profiles
                        for op in GEMM_OPS])
    t = np.concatenate([p[op] for p in profiles for op in GEMM_OPS])

    def resid(x):
        params = dict(eta_g=x[0], m_half=x[1], t_kern=x[2])
        return np.log(predict_gemm(params, const, m, k, n) / t)

    res = least_squares(resid, x0=[0.7, 100.0, 5e-6],
                        bounds=([0.05, 0.0, 0.0], [const["mamf"], 1e5, 1e-3]))
    return dict(eta_g=res.x[0], m_half=res.x[1], t_kern=res.x[2]), len(t)


def fit_mem(gpu, profiles):
    const = gpu_constants(gpu)
    cls, m, e, t = [], [], [], []
    for p in profiles:
        elems = mem_elements(p)
        for op, c in MEM_OPS.items():
            if np.isnan(p[op]).all():
                continue
            cls.append(np.full(len(p["m"]), MEM_CLASSES.index(c)))
            m.append(p["m"])
            e.append(elems[op] * np.ones(len(p["m"])))
            t.append(p[op])
    cls, m, e, t = map(np.concatenate, (cls, m, e, t))

    def resid(x):
        eta = np.asarray(x[:4])[cls]
        return np.log(predict_mem(dict(t_kng=x[4]), const, m, e, eta) / t)

    res = least_squares(resid, x0=[0.5, 0.5, 0.5, 0.5, 5e-6],
                        bounds=([0.01] * 4 + [0.0], [1.0] * 4 + [1e-3]))
    out = dict(zip(MEM_CLASSES, res.x[:4]))
    out["t_kng"] = res.x[4]
    return out, len(t)


def attention_rows():
    return [dict(gpu=r.gpu, kernel=r.kernel, T=r.seqlen_tokens, flops=r.flops_per_s)
            for r in table("attention_kernels")]


def fit_attention(gpu):
    const = gpu_constants(gpu)
    pts = [r for r in attention_rows() if r["gpu"] == gpu and r["kernel"] == ATTENTION_KERNEL[gpu]]
    T = np.array([r["T"] for r in pts])
    eta = np.array([r["flops"] for r in pts]) / const["P"]
    f = numeric_of(DP, "eta_attention")
    res = least_squares(lambda x: np.log(f(eta_a=x[0], T_a=x[1], T=T) / eta), x0=[0.6, 100.0],
                        bounds=([0.01, 0.0], [const["mamf"], 1e5]))
    return dict(eta_a=res.x[0], T_a=res.x[1]), len(T)


def fit_gpu(gpu):
    """The Vidur fit of the memory-bound ops (GEMM and attention parameters: aiconfigurator's)."""
    profiles = _stack(gpu, CALIBRATION)
    mem, n_mem = fit_mem(gpu, profiles)
    aic = OF.fit_gpu(gpu)
    return {**aic["gemm"]["bfloat16"]["params"], **mem, **aic["attention"]["params"]}, n_mem


def layer_prediction(gpu, params, p):
    """Predicted and measured per-layer times (GEMMs + memory-bound ops) of each profile row."""
    const = gpu_constants(gpu)
    pred = np.zeros(len(p["m"]))
    meas = np.zeros(len(p["m"]))
    for op, (k, n) in gemm_shapes(p).items():
        pred += predict_gemm(params, const, p["m"], k, n)
        meas += p[op]
    for op, elems in mem_elements(p).items():
        if np.isnan(p[op]).all():
            continue
        pred += predict_mem(params, const, p["m"], elems, params[MEM_OPS[op]])
        meas += p[op]
    return pred, meas


def held_out_errors(fits):
    """Rows of (gpu, model, set, rows, median and p90 |error| all tokens and >= 512 tokens)."""
    out = []
    for gpu in PROFILED:
        for model in (*CALIBRATION, *HELD_OUT):
            if not vidur_path(gpu, model).exists():
                continue
            p = load_profile(gpu, model)
            pred, meas = layer_prediction(gpu, fits[gpu], p)
            err = np.abs(pred / meas - 1)
            big = p["m"] >= 512
            out.append(dict(gpu=gpu, profile=model,
                            set="calibration" if model in CALIBRATION else "held-out",
                            rows=len(err), median_abs_error=float(np.median(err)),
                            p90_abs_error=float(np.quantile(err, 0.9)),
                            median_abs_error_ge512=float(np.median(err[big])),
                            p90_abs_error_ge512=float(np.quantile(err[big], 0.9)),
                            mean_signed_error_ge512=float(np.mean(pred[big] / meas[big] - 1))))
    return out


UNITS = dict(eta_g="1", m_half="tokens", t_kern="s", eta_norm="1", eta_rope="1", eta_act="1",
             eta_add="1", t_kng="s", eta_a="1", T_a="tokens")
SCALED = ("eta_g", "eta_a")  # scaled by the MAMF ratio for GPUs without profiles


MEM = ("eta_norm", "eta_rope", "eta_act", "eta_add", "t_kng")


def fit_rows(fits, counts):
    """prefill_fit.csv: aiconfigurator's fits of every measured GPU, Vidur's memory-bound fit on
    H100 and A100 (H100's elsewhere), and H100's whole set for the GPUs no one measured."""
    rows = []
    cal = "; ".join(f"vidur/{{gpu}}--{m}--mlp.csv" for m in CALIBRATION)
    for gpu in OF.MEASURED:
        for r in OF.prefill_rows(gpu, OF.fit_gpu(gpu)):
            rows.append({**r, "value": f"{r['value']:.6g}"})
        own = gpu in fits
        for name in MEM:
            value = (fits[gpu] if own else fits["h100-sxm"])[name]
            rows.append(dict(
                gpu=gpu, parameter=name, value=f"{value:.6g}", unit=UNITS[name],
                kind="measurement" if own else "assumption",
                method=("least_squares on log(t_membound/measured), fractions <= 1" if own
                        else "rule: aiconfigurator measures no memory-bound op"),
                calibration_rows=(cal.format(gpu=PROFILED[gpu]) + f" (5 ops x rows = "
                                  f"{counts[gpu]} points)") if own else "none",
                fitted=FIT_DATE, notes="fitted" if own else f"h100-sxm's {name} (Vidur's fit)"))
    base = {r["parameter"]: float(r["value"]) for r in rows if r["gpu"] == "h100-sxm"
            and (r["parameter"] in UNITS or r["parameter"].endswith(".mla"))}
    cat = bundled()
    ref = cat.gpus["h100-sxm"].prefill_efficiency
    for gpu in DERIVED:
        if gpu in OF.MEASURED:
            continue
        own = cat.gpus[gpu].prefill_efficiency
        for name, value in base.items():
            scaled = name.split(".")[0] in SCALED
            v = min(value * own / ref, own) if scaled else value
            rule = (f"h100-sxm's {name} x (MAMF fraction {own:.4g} / h100-sxm's {ref:.4g})"
                    if scaled else f"h100-sxm's {name} (same shape curve)")
            rows.append(dict(gpu=gpu, parameter=name, value=f"{v:.6g}",
                             unit=UNITS[name.split(".")[0]], kind="assumption",
                             method="rule: no operator profile for this GPU",
                             calibration_rows="none", fitted=FIT_DATE, notes=rule))
    return rows


MOE_FIELDS = ("gpu", "kernels", "dtype", "layout", "eta_moe", "m_half_moe", "n_half_moe", "t_moe",
              "calibration_rows", "cal_median_error", "held_median_error", "held_p90_error",
              "held_rows", "kind", "source", "fitted", "notes")


def moe_fit_rows():
    """moe_fit.csv: every measured GPU's fused-MoE fits; the GPUs no one measured take
    h100-sxm's, eta_moe scaled by their matmul ceiling (an assumption)."""
    rows = []
    for gpu in OF.MEASURED:
        rows += OF.moe_rows(gpu, OF.fit_gpu(gpu))
    cat = bundled()
    ref = cat.gpus["h100-sxm"].prefill_efficiency
    base = [r for r in rows if r["gpu"] == "h100-sxm"]
    for gpu in (g for g in DERIVED if g not in OF.MEASURED):
        own = cat.gpus[gpu].prefill_efficiency
        for r in base:
            rows.append({**r, "gpu": gpu, "eta_moe": min(r["eta_moe"] * own / ref, own),
                         "kind": "assumption", "calibration_rows": 0, "cal_median_error": None,
                         "held_median_error": None, "held_p90_error": None, "held_rows": 0,
                         "notes": f"no operator profile for this GPU: h100-sxm's, eta_moe x "
                                  f"(MAMF fraction {own:.4g} / h100-sxm's {ref:.4g})"})
    return rows


def allreduce_csv():
    """allreduce.csv with every measured GPU's rows refitted on nccl-tests (the rest kept)."""
    path = Path(data_path("allreduce.csv"))
    with path.open(newline="", encoding="utf-8") as fh:
        kept = [r for r in csv.DictReader(fh) if r["gpu"] not in OF.MEASURED]
    rows = [OF.collective_row(g, OF.fit_gpu(g)) for g in OF.MEASURED] + kept
    fields = ("gpu", "busbw_Bps", "latency_s", "a2a_busbw_Bps", "a2a_latency_s", "kind", "source",
              "source_location", "retrieved", "notes")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v))
                    for k, v in r.items()})
    return buf.getvalue()


FIT_FIELDS = ("gpu", "parameter", "value", "unit", "kind", "method", "calibration_rows",
              "fitted", "notes")
ERR_FIELDS = ("gpu", "profile", "set", "rows", "median_abs_error", "p90_abs_error",
              "median_abs_error_ge512", "p90_abs_error_ge512", "mean_signed_error_ge512")


def _csv(rows, fields):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4g}" if isinstance(v, float) and k in MOE_FIELDS[4:8]
                        else f"{v:.4f}" if isinstance(v, float) else "" if v is None else v)
                    for k, v in r.items()})
    return buf.getvalue()


def published_rows():
    """prefill_heldout.csv rows of each GPU's published prefill rows (validation.csv, no fit saw
    them): their misses as a share of the predicted prefill (kvmath.evaluate.bands
    .prefill_row_errors), the widest in the p90 columns (the recompute band). Computed under the
    committed engine costs: run this script again after scripts/fit_engine_costs.py."""
    from kvmath.evaluate.bands import PUBLISHED_PROFILE, prefill_row_errors
    out = []
    for gpu in bundled().gpus:
        signed = prefill_row_errors(gpu)
        # rounded up to the file's four decimals: the band never falls short of a row it holds
        err = [math.ceil(abs(e) * 1e4) / 1e4 for e in signed]
        if err:
            out.append(dict(gpu=gpu, profile=PUBLISHED_PROFILE, set="held-out", rows=len(err),
                            median_abs_error=float(np.median(err)), p90_abs_error=max(err),
                            median_abs_error_ge512=float(np.median(err)),
                            p90_abs_error_ge512=max(err),
                            mean_signed_error_ge512=float(np.mean(signed))))
    return out


def run():
    fits, counts = {}, {}
    for gpu in PROFILED:
        fits[gpu], counts[gpu] = fit_gpu(gpu)
    held = held_out_errors(fits) + [r for g in OF.MEASURED for r in OF.heldout_rows(g, OF.fit_gpu(g))]
    held += published_rows()
    return (_csv(fit_rows(fits, counts), FIT_FIELDS), _csv(held, ERR_FIELDS),
            _csv(moe_fit_rows(), MOE_FIELDS), allreduce_csv())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the bundled files")
    args = ap.parse_args(argv)
    try:
        fit_csv, err_csv, moe_csv, ar_csv = run()
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    targets = {Path(data_path("prefill_fit.csv")): fit_csv,
               Path(data_path("prefill_heldout.csv")): err_csv,
               Path(data_path("moe_fit.csv")): moe_csv, Path(data_path("allreduce.csv")): ar_csv}
    if args.check:
        stale = [str(p) for p, text in targets.items()
                 if not p.exists() or p.read_text() != text]
        if stale:
            print("stale: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for p, text in targets.items():
        p.write_text(text)
    print(err_csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
