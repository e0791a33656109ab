"""Numeric evaluation: lambdified derivations applied to the data tables.

Every number here comes from an expression in :mod:`kvmath.derive` through
``sympy.lambdify``; no formula is written a second time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from . import derive as D
from .tables import DTYPE_BYTES, GPU_HOST_LINK, Gpu, Model, Tier, bundled


_erf_vec = np.vectorize(math.erf, otypes=[float])


def _erf(x):
    """Error function for scalars and arrays (numpy has none; scipy is not a dependency)."""
    return math.erf(x) if np.ndim(x) == 0 else _erf_vec(x)


class Numeric:
    """A lambdified expression, called by keyword with one value or numpy array per symbol.

    ``f = Numeric(expr); f(T=..., B=...)``. Missing or unknown keywords raise TypeError.
    """

    def __init__(self, expr, name=""):
        self.expr = expr
        self.name = name
        self.symbols = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
        self.arg_names = tuple(s.name for s in self.symbols)
        self._f = sp.lambdify(self.symbols, expr, modules=[{"erf": _erf}, "numpy"])

    def __call__(self, **values):
        missing = [n for n in self.arg_names if n not in values]
        if missing:
            raise TypeError(f"{self.name or self.expr}: missing values for {', '.join(missing)}")
        out = self._f(*(values[n] for n in self.arg_names))
        # scalars come back as plain Python numbers (numpy scalars print as np.float64(...))
        return out.item() if isinstance(out, np.generic) else out

    def take(self, values):
        """Call with the subset of a larger dict that this expression needs."""
        return self(**{n: values[n] for n in self.arg_names})


@lru_cache(maxsize=None)
def numeric_of(module, name):
    """The lambdified version of ``<module>.<name>`` (a list of them for a list of roots)."""
    expr = getattr(module, name)
    if isinstance(expr, list):
        return [Numeric(e, f"{name}[{i}]") for i, e in enumerate(expr)]
    return Numeric(expr, name)


def fn(name):
    """The lambdified version of ``kvmath.derive.<name>``."""
    return numeric_of(D, name)


@lru_cache(maxsize=None)
def _param_fns(attention):
    attn = D.attn_params_mla if attention == "mla" else D.attn_params_gqa
    return (Numeric(D.params_active_matmul(attn), "N_lin"), Numeric(D.params_total(attn), "N_tot"),
            Numeric(attn, "attention params"))


class ScenarioError(ValueError):
    """A scenario that cannot be evaluated (e.g. TP degree that does not fit the KV heads)."""


def architecture_values(model: Model, kv_dtype: str | None = None):
    """Substitution values (by symbol name) for everything a model fixes."""
    mla = model.attention == "mla"
    v = dict(
        d=model.hidden_size, n_q=model.num_attention_heads,
        L_full=model.layers - model.window_layers, L_win=model.window_layers,
        W=model.window or 1,  # irrelevant when L_win = 0
        n_kv=model.num_key_value_heads or 1, d_h=model.head_dim or 1,
        r_kv=model.kv_lora_rank or 1, d_rope=model.qk_rope_head_dim or 1,
        d_nope=model.qk_nope_head_dim or 1, r_q=model.q_lora_rank or 0,
        I_ffn=model.intermediate_size or 0, I_exp=model.moe_intermediate_size or 0,
        E=model.num_experts or 0, k_top=model.experts_per_token or 0,
        E_sh=model.shared_experts or 0, L_dense=model.dense_layers,
        L_moe=model.layers - model.dense_layers, V=model.vocab_size,
        tied=int(model.tie_word_embeddings),
        b_kv=DTYPE_BYTES[kv_dtype or model.kv_dtype], b_w=DTYPE_BYTES[model.weight_dtype],
    )
    if mla:
        v["d_qk"] = model.qk_nope_head_dim + model.qk_rope_head_dim
        v["d_v"] = model.v_head_dim
        v["e_kv"] = fn("e_kv_mla").take(v)
    else:
        v["d_qk"] = v["d_v"] = model.head_dim
        v["e_kv"] = fn("e_kv_gqa").take(v)
    n_lin, n_tot, _ = _param_fns(model.attention)
    v["N_lin"] = float(n_lin.take(v))
    v["N_tot"] = float(n_tot.take(v))
    return v


def parameter_counts(model: Model):
    """(active matmul parameters, all parameters, attention parameters per layer)."""
    v = architecture_values(model)
    return v["N_lin"], v["N_tot"], float(_param_fns(model.attention)[2].take(v))


def replication(model: Model, tp: int):
    """rho, the copies of the KV across tp GPUs; ScenarioError if tp does not fit the KV heads."""
    if model.attention == "mla":
        return float(fn("rho_mla")(K=tp))
    n_kv = model.num_key_value_heads
    if n_kv % tp and tp % n_kv:
        raise ScenarioError(f"--tp {tp} does not fit {model.name}'s {n_kv} KV heads: "
                            "one must divide the other")
    return float(fn("rho_gqa")(K=tp, n_kv=n_kv))


@dataclass(frozen=True)
class PathHop:
    link: str
    count: int
    scope: str
    effective_Bps: float  #: bandwidth x efficiency x count
    latency_s: float


def tier_path(tier: Tier, gpu: Gpu):
    """The hops of a tier for a GPU, with their effective bandwidths."""
    links = bundled().links
    hops = []
    for hop in tier.hops:
        link = links[gpu.host_link if hop.link == GPU_HOST_LINK else hop.link]
        hops.append(PathHop(link.name, hop.count, link.scope,
                            link.bandwidth_Bps * link.efficiency * hop.count, link.latency_s))
    return hops


def path_values(tier: Tier, gpu: Gpu, tp: int):
    """(B per GPU in B/s, t_0 in s, hops): the narrowest hop, node-shared hops split tp ways."""
    hops = tier_path(tier, gpu)
    b_gpu = min((h.effective_Bps for h in hops if h.scope == "per-gpu"), default=math.inf)
    b_node = min((h.effective_Bps for h in hops if h.scope == "per-node"), default=math.inf)
    bandwidth = float(fn("B_path")(B_gpu=b_gpu, B_node=b_node, K=tp))
    return bandwidth, sum(h.latency_s for h in hops), hops


def crossings(values):
    """Prefix lengths (tokens, ascending) where reload time equals recompute time.

    values: every symbol of t_advantage except T. Each smooth piece of the
    advantage is a quadratic in T whose roots are closed-form; a root counts
    if it lies in its piece.
    """
    roots = []
    for name, coeffs, checks in _regime_fns():
        a2, a1, a0 = (float(c.take(values)) for c in coeffs)
        if a2 != 0:
            disc = a1 * a1 - 4 * a2 * a0
            if disc < 0:
                continue
            sq = math.sqrt(disc)
            cands = [(-a1 - sq) / (2 * a2), (-a1 + sq) / (2 * a2)]
        elif a1 != 0:
            cands = [-a0 / a1]
        else:
            continue
        for t in cands:
            if t > 0 and all(bool(c.take({**values, "T": t})) for c in checks):
                roots.append(t)
    roots.sort()
    unique = []
    for t in roots:
        if not unique or abs(t - unique[-1]) > 1e-9 * max(1.0, t):
            unique.append(t)
    return unique


@lru_cache(maxsize=None)
def _regime_fns():
    out = []
    for name, expr, conds in D.regimes():
        coeffs = tuple(Numeric(c, f"{name} coefficient") for c in D.quadratic_coefficients(expr))
        checks = tuple(Numeric(c, f"{name} condition") for c in conds)
        out.append((name, coeffs, checks))
    return out


def scenario_values(model, gpu, tier, tp=1, bandwidth_Bps=None, efficiency=None,
                    kv_dtype=None, compute_dtype="bf16"):
    """Every substitution value except T, plus the path's hops."""
    if tp < 1:
        raise ScenarioError(f"--tp must be a positive integer, got {tp}")
    v = architecture_values(model, kv_dtype)
    v["K"] = tp
    v["rho"] = replication(model, tp)
    try:
        v["P"] = gpu.dense_flops(compute_dtype)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    if compute_dtype == "fp8":
        v["b_w"] = DTYPE_BYTES["fp8"]  # fp8 compute reads fp8 weights
    if efficiency is not None:
        v["eta"] = efficiency
    elif compute_dtype == "bf16":
        v["eta"] = gpu.prefill_efficiency
    else:
        eff = bundled().efficiencies.get((gpu.name, f"prefill-{compute_dtype}"))
        if eff is None:
            raise ScenarioError(f"no {compute_dtype} prefill efficiency for GPU {gpu.name}; "
                                "pass --efficiency")
        v["eta"] = eff.value
    v["B_hbm"] = gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency
    v["B"], v["t_0"], hops = path_values(tier, gpu, tp)
    if bandwidth_Bps is not None:
        v["B"] = bandwidth_Bps
    return v, hops


#: compare()'s numeric results: JSON key -> the SymPy expression evaluated at T = tokens. The one
#: list of them: compare() lambdifies it and kvmath.webcalc prints it to the book's calculator.
COMPARE_EXPRESSIONS = {
    "kv_bytes_per_token": D.kv_bytes_per_token,
    "kv_bytes": D.kv_bytes_total,
    "kv_bytes_per_gpu": D.kv_bytes_per_gpu,
    "prefill_flops": D.flops_prefill,
    "compute_s": D.t_compute,
    "weights_read_s": D.t_weights,
    "recompute_s": D.t_recompute,
    "reload_s": D.t_reload,
    "speedup": D.speedup,
    "min_reload_bandwidth_Bps": D.min_reload_bandwidth,
    "model_flops_per_kv_byte": D.model_flops_per_kv_byte,
    "model_flops_per_kv_byte_at_tokens": D.model_flops_per_kv_byte_at_T,
    "gpu_flops_per_link_byte": D.gpu_flops_per_link_byte,
}
#: compare()'s breakeven_tokens are the positive roots in T of this expression (reload - recompute)
CROSSING_EXPRESSION = D.t_advantage


@lru_cache(maxsize=None)
def _compare_fns():
    return {k: Numeric(e, k) for k, e in COMPARE_EXPRESSIONS.items()}


def compare(model, gpu, tier, tokens, tp=1, bandwidth_Bps=None, efficiency=None,
            kv_dtype=None, compute_dtype="bf16"):
    """Reload against recompute for one scenario; a dict of plain numbers (units in keys)."""
    if not tokens > 0:
        raise ScenarioError(f"--tokens must be positive, got {tokens}")
    v, hops = scenario_values(model, gpu, tier, tp, bandwidth_Bps, efficiency, kv_dtype,
                              compute_dtype)
    at = {**v, "T": tokens}
    r = {k: float(f.take(at)) for k, f in _compare_fns().items()}
    return {
        "model": model.name, "gpu": gpu.name, "tier": tier.name, "tokens": tokens, "tp": tp,
        "kv_dtype": kv_dtype or model.kv_dtype,
        "kv_bytes_per_token": r["kv_bytes_per_token"],
        "kv_bytes": r["kv_bytes"],
        "kv_bytes_per_gpu": r["kv_bytes_per_gpu"],
        "kv_replication": v["rho"],
        "prefill_flops": r["prefill_flops"],
        "prefill_efficiency": v["eta"],
        "compute_s": r["compute_s"], "weights_read_s": r["weights_read_s"],
        "recompute_s": r["recompute_s"], "reload_s": r["reload_s"],
        "reload_bandwidth_Bps": v["B"], "reload_latency_s": v["t_0"],
        "path": [h.__dict__ for h in hops],
        "winner": "reload" if r["reload_s"] < r["recompute_s"] else "recompute",
        "speedup": r["speedup"],
        "breakeven_tokens": crossings(v),
        "min_reload_bandwidth_Bps": r["min_reload_bandwidth_Bps"],
        "model_flops_per_kv_byte": r["model_flops_per_kv_byte"],
        "model_flops_per_kv_byte_at_tokens": r["model_flops_per_kv_byte_at_tokens"],
        "gpu_flops_per_link_byte": r["gpu_flops_per_link_byte"],
    }


def sweep(model, gpu, tier, tokens, **kw):
    """Reload and recompute times (s) over an array of prefix lengths."""
    v, _ = scenario_values(model, gpu, tier, **kw)
    at = {**v, "T": np.asarray(tokens, dtype=float)}
    return fn("t_reload").take(at), fn("t_recompute").take(at)


def fit_transfer_curve(points):
    """Least-squares fit of t = t_0 + s/B to measured (size, bandwidth) points; (t_0 s, B B/s).

    Each point's time is s / measured bandwidth; the fit is linear in (t_0, 1/B).
    """
    s = np.array([p.transfer_bytes for p in points])
    t = s / np.array([p.bandwidth_Bps for p in points])
    A = np.vstack([np.ones_like(s), s]).T
    (t0, inv_b), *_ = np.linalg.lstsq(A, t, rcond=None)
    return float(t0), float(1 / inv_b)


def min_tp(model, gpu, headroom=0.9, max_tp=8):
    """Smallest power-of-two TP whose HBM holds the weights within headroom; None above max_tp."""
    weights = architecture_values(model)
    need = weights["N_tot"] * weights["b_w"]
    tp = 1
    while tp <= max_tp:
        fits_heads = model.attention == "mla" or not (model.num_key_value_heads % tp
                                                       and tp % model.num_key_value_heads)
        if fits_heads and need <= headroom * gpu.hbm_capacity_bytes * tp:
            return tp
        tp *= 2
    return None
