"""Scenario values for Python callers: the scenario logic (:mod:`kvmath.evaluate.logic`, written
once and run by the calculator too) with names resolved and Python's conveniences.

The derivations' expressions, printed into :mod:`kvmath._generated.numeric`, are called through
:class:`Numeric` and :func:`fn`; the logic turns the data tables into their inputs: a model's
architecture values, the layout it is served in (:func:`choose_layout`), the tier's path under an
engine profile (:func:`tier_path`, :func:`path_values`) and every substitution value of a
comparison (:func:`scenario_values`). Here an engine or a codec may be named (a bundled name or a
CSV path), and results come back as tuples. :mod:`kvmath.evaluate.compare` (compare, crossings,
sweeps) and :mod:`kvmath.evaluate.prefill` build on it; it imports neither.
"""
from __future__ import annotations

from functools import lru_cache

from kvmath._generated import numeric as _numeric
from kvmath.evaluate import logic
from kvmath.evaluate.logic import (  # noqa: F401 (the logic's names, for Python callers)
    CODEC_KV_DTYPES, DEFAULT_ENGINE, TP_CANDIDATES, check_kv_dtype, copies_span_layers,
    default_concurrency, hbm_fit_fraction, heads_fit, hop_copies, kv_element_bytes, reads_once,
    replication, request_cost_values, stores_once)
from kvmath.evaluate.runtime import Layout, Numeric, PathHop, ScenarioError  # noqa: F401
from kvmath.tables.rows import Model, Tier


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


def _engine(engine):
    """An engine row: the default profile, a bundled name, a CSV path, or a row as given."""
    from kvmath.tables.rows import engines
    if engine is None:
        return engines()[DEFAULT_ENGINE]
    if isinstance(engine, str):
        from kvmath.tables.rows import resolve_engine
        return resolve_engine(engine)
    return engine


def _codec(codec):
    """A codec row, by bundled name or CSV path, or as given (None: no codec)."""
    if isinstance(codec, str):
        from kvmath.tables.rows import resolve_codec
        return resolve_codec(codec)
    return codec


def architecture_values(model: Model, kv_dtype: str | None = None, weight_dtype: str | None = None):
    """Substitution values (by symbol name) for everything a model fixes (logic.model_values)."""
    try:
        return logic.model_values(model, kv_dtype, weight_dtype)
    except OverflowError:
        raise ScenarioError(f"{model.name}: its parameter count overflows a float; check the "
                            "magnitudes of the model row's sizes") from None


def parameter_counts(model: Model):
    """(active matmul parameters, all parameters, attention parameters per layer)."""
    v = architecture_values(model)
    return v["N_lin"], v["N_tot"], float(family_fn(model.attention, "attn_params").take(v))


def node_tp(model: Model, gpus: int):
    """The TP a node's plan uses by default: all of its gpus, or the largest TP below that the
    model's heads allow (Qwen2.5-7B's 28 heads take TP 4 on an 8-GPU node, not 8)."""
    return max(k for k in range(1, gpus + 1) if heads_fit(model, k))


def tier_path(tier: Tier, gpu, engine=None, copy_bytes=None):
    """The hops of a tier for a GPU under an engine profile (logic.tier_path)."""
    return logic.tier_path(tier, gpu, _engine(engine), copy_bytes)


def path_values(tier: Tier, gpu, tp, rho=1.0, concurrent=None, engine=None, copy_bytes=None,
                read_once=None, stored_once=None, gpu_reloads=1.0):
    """(B per GPU in B/s, first-byte latency in s, hops) of a tier's path (logic.path_values)."""
    return tuple(logic.path_values(tier, gpu, tp, rho, concurrent, _engine(engine), copy_bytes,
                                   read_once, stored_once, None, gpu_reloads))


def _efficiency(gpu, compute_dtype, efficiency):
    return logic.compute_efficiency(gpu, compute_dtype, efficiency)


def _hbm_slack(model, gpu, layout, tokens, batch, usable):
    return tuple(logic.hbm_slack(model, gpu, layout, tokens, batch, usable))


def choose_layout(model, gpu, tokens=1, tp=None, ep=None, batch=1, compute_dtype=None,
                  kv_dtype=None, usable=None, check_fit=True):
    """How the model is served (logic.choose_layout): a sourced deployment when no TP is given,
    else the given TP, else the smallest TP whose HBM holds the weights and the batch's KV."""
    return logic.choose_layout(model, gpu, tokens, tp, ep, batch, compute_dtype, kv_dtype, usable,
                               check_fit)


def scenario_values(model, gpu, tier, tp=None, bandwidth_Bps=None, efficiency=None,
                    kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None,
                    ep=None, batch=1, tokens=1, check_fit=False, layout=None, new_tokens=1,
                    token_ids=False, codec=None, gpu_reloads=None):
    """(values, hops): every substitution value except T, plus the path's hops (and the layout,
    the engine row and the copy size under "layout", "engine", "copy_bytes"); the engine and the
    codec may be named (logic.scenario_values)."""
    v, hops = logic.scenario_values(model, gpu, tier, tp, bandwidth_Bps, efficiency, kv_dtype,
                                    compute_dtype, _engine(engine), concurrent_reloads, ep, batch,
                                    tokens, check_fit, layout, new_tokens, token_ids,
                                    _codec(codec), None, gpu_reloads)
    v["hop_copies"] = tuple(v["hop_copies"])
    return v, hops


def coded_values(codec, tier, kv_dtype, wire_Bps, pipelined=None):
    """{B, B_wire, r_c, B_dec}: the path's bandwidth in decoded bytes (logic.coded_values)."""
    return logic.coded_values(_codec(codec), tier, kv_dtype, wire_Bps, pipelined)


#: the tier a prefix still in GPU memory is "loaded" from: no hop, no connector; the engine's
#: request costs and the new tokens' forward pass remain
HBM_TIER = Tier(logic.HBM_TIER_NAME,
                "the prefix still in GPU memory (a prefix-cache hit: nothing moves)", ())
