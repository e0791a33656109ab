"""The Python face of the scenario logic: one module over :mod:`kvmath.logic` for every Python
caller (the commands, the chapters, the tests), with names resolved and Python's conveniences.

A scenario is given as the model, the GPU and the tier (rows, or bundled names) and any field of
the scenario record by its name (``tp=2``, ``engine="vllm-cross-layer"``, ``bandwidth_Bps=20e9``);
the face builds the record (:func:`kvmath.scenario.record.scenario`) and calls the logic, which
the calculator runs printed as JavaScript, so the numbers are the same. Here results come back as
tuples where a caller unpacks them, prompt lengths may be numpy arrays, and the derivations'
expressions are called through :class:`Numeric` and :func:`fn`.

The bands' evidence (measured factors, held-out errors, the validation rows a configuration
misses) and the band itself are :mod:`kvmath.evaluate.bands`, above this module: they are read
off the validation rows this module predicts.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from kvmath._generated import numeric as _numeric
from kvmath.logic import comparison as _comparison
from kvmath.logic import layout as _layout
from kvmath.logic import path as _path
from kvmath.logic import prefill as _prefill
from kvmath.logic import values as _values
from kvmath.logic.constants import (  # noqa: F401 (the logic's names, for Python callers)
    BEYOND_CONTEXT_ELSEWHERE, BEYOND_CONTEXT_HINT, CODEC_KV_DTYPES, DEFAULT_ENGINE,
    HBM_TIER_NAME, MIN_PREFIX_TOKENS, PARTS, PREFILL_MODELS, SHAPE_FIELDS, TP_CANDIDATES)
from kvmath.logic.crossings import numeric_crossings
from kvmath.logic.layout import (default_concurrency, heads_fit,  # noqa: F401
                                 replication)
from kvmath.logic.path import (check_tier_gpu, hop_copies, node_gpu, node_tier,  # noqa: F401
                               tier_exists_on)
from kvmath.logic.rules import (copies_span_layers, engine_costs_calibrated,  # noqa: F401
                                hbm_fit_fraction, kv_element_bytes, reads_once,
                                request_cost_values, served_model, shape_key, stores_once)
from kvmath.logic.runtime import Layout, Numeric, Parallel, PathHop, ScenarioError  # noqa: F401
from kvmath.logic.values import concurrent_at_load, load_shares, plain_values  # noqa: F401
from kvmath.scenario.build import node_layout_tp  # noqa: F401 (a node's default TP)
from kvmath.tiers.build import HBM_TIER  # noqa: F401
from kvmath.scenario.record import Scenario, scenario  # noqa: F401
from kvmath.tables.rows import Model
from kvmath.tiers.records import Tier


@lru_cache(maxsize=None)
def numeric_of(module, name):
    """The numeric version of ``<module>.<name>`` (a list of them for a list of roots).

    module: a derivation module or its name (``"kvmath.derive.reuse"``); catalogued
    expressions come from the generated code without importing the module.
    """
    modname = module if isinstance(module, str) else module.__name__
    key = f"{_numeric.PREFIXES[modname]}.{name}"
    if key in _numeric.FUNCS:
        return Numeric.generated(key, name)
    if f"{key}[0]" in _numeric.FUNCS:
        out, i = [], 0
        while f"{key}[{i}]" in _numeric.FUNCS:
            out.append(Numeric.generated(f"{key}[{i}]", f"{name}[{i}]"))
            i += 1
        return out
    if isinstance(module, str):
        import importlib
        module = importlib.import_module(module)
    expr = getattr(module, name)
    if isinstance(expr, list):
        return [Numeric(e, f"{name}[{i}]") for i, e in enumerate(expr)]
    return Numeric(expr, name)


def fn(name):
    """The numeric version of ``kvmath.derive.kv.<name>``."""
    return numeric_of("kvmath.derive.kv", name)


@lru_cache(maxsize=None)
def family_fn(attention, item):
    """The generated function of one attention family's expression (kvmath.derive.attention;
    item: e_kv, rho, attn_params, head_elements, aux_elements, params_active_matmul,
    params_total, derived.<symbol>)."""
    return Numeric.generated(f"attention.{attention}.{item}", f"{attention} {item}")


def engine_row(engine):
    """An engine row: the default profile (None), a bundled name, a CSV path, or a row as given."""
    from kvmath.tables.rows import engines, resolve_engine
    if engine is None:
        return engines()[DEFAULT_ENGINE]
    if isinstance(engine, str):
        return resolve_engine(engine)
    return engine


def node_nvme_tier(node):
    """The ``nvme`` tier of a node: its own drives striped, then the bundled nvme tier's later
    hops (:func:`kvmath.logic.path.node_tier`)."""
    from kvmath.tables.rows import bundled
    return node_tier(node, bundled().tiers["nvme"])


# ------------------------------------------------------------------ the model and its layout
def architecture_values(model: Model, kv_dtype: str | None = None, weight_dtype: str | None = None):
    """Substitution values (by symbol name) for everything a model fixes (logic.model_values)."""
    try:
        return _layout.model_values(model, kv_dtype, weight_dtype)
    except OverflowError:
        raise ScenarioError(f"{model.name}: its parameter count overflows a float; check the "
                            "magnitudes of the model row's sizes") from None


def parameter_counts(model: Model):
    """(active matmul parameters, all parameters, attention parameters per layer)."""
    v = architecture_values(model)
    return v["N_lin"], v["N_tot"], float(family_fn(model.attention, "attn_params").take(v))


def choose_layout(model, gpu, tokens=1, usable=None, check_fit=True, **fields):
    """How the model is served (logic.choose_layout): a sourced deployment when no TP is given,
    else the given TP, else the smallest TP whose HBM holds the weights and the KV of
    ``batch`` prompts of ``tokens`` tokens (fields: tp, ep, batch, compute_dtype, kv_dtype,
    engine, own)."""
    return _layout.choose_layout(scenario(model, gpu, None, **fields), tokens, usable, check_fit)


def hbm_slack(model, gpu, layout, tokens, batch=1, usable=None):
    """(HBM left per GPU, weights per GPU, the batch's KV per GPU), B (logic.hbm_slack)."""
    s = scenario(model, gpu, None, batch=batch)
    return tuple(_layout.hbm_slack(s, layout, tokens, usable if usable is not None
                                   else _layout.usable_fraction(s)))


def min_tp(model, gpu, tokens=1, batch=1):
    """Smallest TP whose HBM holds the weights and the KV of ``batch`` x ``tokens`` (or the
    sourced deployment's attention TP); None when nothing fits."""
    try:
        return choose_layout(model, gpu, tokens, batch=batch).tp
    except ScenarioError:
        return None


# ------------------------------------------------------------------ the path
def tier_path(tier: Tier, gpu, engine=None, copy_bytes=None):
    """The hops of a tier for a GPU under an engine profile (logic.tier_path)."""
    return _path.tier_path(tier, gpu, engine_row(engine), copy_bytes)


def path_values(tier: Tier, gpu, tp, rho=1.0, concurrent=None, engine=None, copy_bytes=None,
                read_once=None, stored_once=None, gpu_reloads=1.0):
    """(B per GPU in B/s, first-byte latency in s, hops) of a tier's path (logic.path_values)."""
    return tuple(_path.path_values(tier, gpu, engine_row(engine), {
        "K": tp, "rho": rho, "n_c": concurrent, "n_g": gpu_reloads, "copy_bytes": copy_bytes,
        "read_once": read_once, "stored_once": stored_once}))


def coded_values(codec, tier, kv_dtype, wire_Bps, pipelined=None):
    """{B, B_wire, r_c, B_dec}: the path's bandwidth in decoded bytes (logic.coded_values)."""
    if isinstance(codec, str):
        from kvmath.tables.rows import resolve_codec
        codec = resolve_codec(codec)
    return _path.coded_values(codec, tier, kv_dtype, wire_Bps, pipelined)


# ------------------------------------------------------------------ a scenario's values
def scenario_values(model, gpu, tier, tokens=1, check_fit=False, layout=None, gpu_reloads=None,
                    **fields):
    """(values, hops): every substitution value except T, plus the path's hops (and the layout,
    the engine row and the copy size under "layout", "engine", "copy_bytes") of the scenario of
    ``fields`` (logic.scenario_values); the engine and the codec may be named. gpu_reloads:
    reloads one replica has in flight on its own per-GPU hops (1)."""
    s = scenario(model, gpu, tier, **fields)
    loads = None if gpu_reloads is None else [s.concurrent_reloads, gpu_reloads]
    v, hops = _values.scenario_values(s, tokens, layout, loads, check_fit)
    v["hop_copies"] = tuple(v["hop_copies"])
    return v, hops


# ------------------------------------------------------------------ the prefill model
def recompute_fn(model, gpu, layout, values, prefill="calibrated", batch=1):
    """(name of the prefill model used, f(T) -> recompute seconds, vectorised), of ``batch``
    equal prompts in one forward pass (logic.recompute_fn): ``ideal``, the flat roofline of
    :mod:`kvmath.derive.kv`; ``calibrated``, the operator model of :mod:`kvmath.derive.prefill`
    fitted to measured operator times. A GPU with no calibration falls back to ideal, and the
    name says so."""
    s = scenario(model, gpu, None, engine=values.get("engine"))  # its kernels run the forward
    name, f = _prefill.recompute_fn(s, layout, values, prefill, batch)
    return name, lambda t: f(np.asarray(t, dtype=float) if np.ndim(t) else float(t))


def _tokens(tokens):
    return np.asarray(tokens, dtype=float) if np.ndim(tokens) else float(tokens)


def suffix_values(values, rec, tokens):
    """The prefill model's times for the prefix, the prefix with the new tokens and the new
    tokens alone at prefix length ``tokens`` (a number or an array), as substitution values."""
    return _prefill.suffix_values(values, rec, _tokens(tokens))


def time_step(values, rec, tokens):
    """Time the engine step of ``values`` (in place) at prefix length ``tokens`` (a number or an
    array) with the recompute's prefill model ``rec`` (logic.time_step). Returns the values at
    ``tokens``."""
    at = _prefill.time_step(values, rec, _tokens(tokens))
    if not np.ndim(tokens):
        values["t_step"] = at["t_step"] = float(values["t_step"])
        values["t_0"] = at["t_0"] = float(values["t_0"])
    return at


def ttft_fns(values, rec):
    """(ttft_cold(T), ttft_hit(T)), vectorised, s: each T times its own engine step."""
    cold, hit = fn("ttft_cold"), fn("ttft_hit")

    def at(t):
        return time_step(dict(values), rec, t)
    return (lambda t: cold.take(at(t))), (lambda t: hit.take(at(t)))


# ------------------------------------------------------------------ the comparison
def compare(model, gpu, tier, tokens, **fields):
    """Reload against recompute for one scenario; a dict of plain numbers (units in keys)
    (logic.compare: a hybrid model reloads its last state checkpoint). The engine and the codec
    may be named; any other field of the scenario record by its name."""
    return _comparison.compare(scenario(model, gpu, tier, **fields), tokens)


def compare_at(model, gpu, tier, tokens, **fields):
    """Reload against recompute at exactly ``tokens`` reloaded (logic.compare_at)."""
    return _comparison.compare_at(scenario(model, gpu, tier, **fields), tokens)


def crossings(values):
    """Prefix lengths (tokens, ascending, from MIN_PREFIX_TOKENS) where reload time equals
    recompute time on the flat model.

    values: every symbol of t_advantage except T. Each smooth piece of the advantage is a
    quadratic in T whose roots are closed-form; a root counts if it lies in its piece. A model
    with chunked-local layers or sparse attention (kvmath.derive.kv.dense: its pieces are not
    quadratics) has its roots found numerically, up to the model's context window or a million
    tokens.
    """
    if values.get("L_chunk", 0) or values.get("H_I", 0):
        adv = fn("t_advantage")
        return numeric_crossings(lambda t: adv.take({**values, "T": t}),
                                 max(1e6, float(values.get("max_context_tokens", 0))))
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
            if t >= MIN_PREFIX_TOKENS and all(bool(c.take({**values, "T": t})) for c in checks):
                roots.append(t)
    roots.sort()
    unique = []
    for t in roots:
        if not unique or abs(t - unique[-1]) > 1e-9 * max(1.0, t):
            unique.append(t)
    return unique


@lru_cache(maxsize=None)
def _regime_fns():
    return [(name, tuple(Numeric.generated(k, f"{name} coefficient") for k in coeffs),
             tuple(Numeric.generated(k, f"{name} condition") for k in checks))
            for name, coeffs, checks in _numeric.REGIMES]


def sweep(model, gpu, tier, tokens, own_step=True, **fields):
    """Reload and recompute times (s) over an array of prefix lengths. own_step=False leaves
    the reloading request's own engine steps out of the reload (for a prefix whose forward pass
    the request runs anyway, as when it also computes a suffix)."""
    s = scenario(model, gpu, tier, **fields)
    v, _ = _values.scenario_values(s)
    layout = v.pop("layout")
    for key in ("engine", "copy_bytes"):
        v.pop(key)
    t = np.asarray(tokens, dtype=float)
    _, rec = recompute_fn(s.model, s.gpu, layout, v, "ideal" if s.efficiency is not None
                          else s.prefill)
    at = time_step(v, rec, t)
    if not own_step:
        at["t_0"] = fn("fixed_cost").take({**at, "n_step": 0.0})
    return fn("t_reload").take(at), rec(t)


def fit_transfer_curve(points):
    """Least-squares fit of t = t_0 + s/B to measured (size, bandwidth) points; (t_0 s, B B/s).

    Each point's time is s / measured bandwidth; the fit is linear in (t_0, 1/B).
    """
    s = np.array([p.transfer_bytes for p in points])
    t = s / np.array([p.bandwidth_Bps for p in points])
    A = np.vstack([np.ones_like(s), s]).T
    (t0, inv_b), *_ = np.linalg.lstsq(A, t, rcond=None)
    return float(t0), float(1 / inv_b)
