"""Numeric evaluation: the derivations' generated numpy code applied to the data tables.

Every number here comes from an expression in :mod:`kvmath.derive.kv` (and its siblings), printed
once into :mod:`kvmath._generated.numeric` by ``scripts/generate_numeric.py``; no formula is written a
second time, and no answer imports SymPy.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from kvmath._generated import numeric as _numeric
from kvmath.evaluate import logic
from kvmath.evaluate.logic import (  # noqa: F401 (re-exported: the comparison's logic)
    MIN_PREFIX_TOKENS, PREFILL_MODELS, concurrent_at_load, engine_costs_calibrated,
    node_gpu, node_tier, numeric_crossings)
from kvmath.evaluate.values import (  # noqa: F401 (re-exported: the scenario's values)
    DEFAULT_ENGINE, Layout, Numeric, PathHop, ScenarioError,
    TP_CANDIDATES, _codec, _efficiency, _engine, _hbm_slack,
    architecture_values, choose_layout, copies_span_layers, default_concurrency,
    fn, hbm_fit_fraction, heads_fit, hop_copies, node_tp,
    numeric_of, parameter_counts, path_values, reads_once, replication,
    scenario_values, stores_once, tier_path, HBM_TIER, request_cost_values)


def node_nvme_tier(node):
    """The ``nvme`` tier of a node: its own drives striped, then the bundled nvme tier's later
    hops (:func:`kvmath.evaluate.logic.node_tier`)."""
    from kvmath.tables.rows import bundled
    return node_tier(node, bundled().tiers["nvme"])


#: how compare's context-window error says it can be overridden (commands without the flag
#: replace it with :data:`BEYOND_CONTEXT_ELSEWHERE`)
BEYOND_CONTEXT_HINT = "(pass --allow-beyond-context to evaluate it anyway)"
BEYOND_CONTEXT_ELSEWHERE = ("(only compare takes --allow-beyond-context, for one request beyond "
                            "the window; serve the model within it here)")

def crossings(values):
    """Prefix lengths (tokens, ascending, from MIN_PREFIX_TOKENS) where reload time equals
    recompute time.

    values: every symbol of t_advantage except T. Each smooth piece of the
    advantage is a quadratic in T whose roots are closed-form; a root counts
    if it lies in its piece. A model with chunked-local layers or sparse attention
    (kvmath.derive.kv.dense: its pieces are not quadratics) has its roots found numerically,
    up to the model's context window or a million tokens.
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



def recompute_fn(model, gpu, layout, values, prefill="calibrated", batch=1):
    """(name of the prefill model used, f(T) -> recompute seconds, vectorised), of ``batch``
    equal prompts in one forward pass (logic.recompute_fn): ``ideal``, the flat roofline of
    :mod:`kvmath.derive.kv`; ``calibrated``, the operator model of :mod:`kvmath.derive.prefill`
    fitted to measured operator times. A GPU with no calibration falls back to ideal, and the
    name says so."""
    name, f = logic.recompute_fn(model, gpu, layout, values, prefill, batch)
    return name, lambda t: f(np.asarray(t, dtype=float) if np.ndim(t) else float(t))


def _tokens(tokens):
    return np.asarray(tokens, dtype=float) if np.ndim(tokens) else float(tokens)


def suffix_values(values, rec, tokens):
    """The prefill model's times for the prefix, the prefix with the new tokens and the new
    tokens alone at prefix length ``tokens`` (a number or an array), as substitution values."""
    return logic.suffix_values(values, rec, _tokens(tokens))


def time_step(values, rec, tokens):
    """Time the engine step of ``values`` (in place) at prefix length ``tokens`` (a number or an
    array) with the recompute's prefill model ``rec`` (logic.time_step). Returns the values at
    ``tokens``."""
    at = logic.time_step(values, rec, _tokens(tokens))
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


_KW = ("tp", "bandwidth_Bps", "efficiency", "kv_dtype", "compute_dtype", "engine",
       "concurrent_reloads", "ep", "batch", "allow_beyond_context", "prefill", "new_tokens",
       "token_ids", "resume_rate", "codec")


def compare(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
            kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
            batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
            token_ids=False, resume_rate=None, codec=None, gpu_resume_rate=None):
    """Reload against recompute for one scenario; a dict of plain numbers (units in keys)
    (logic.compare: a hybrid model reloads its last state checkpoint). The engine and the codec
    may be named. gpu_resume_rate: reloads per second over the GPUs' own links where they
    differ from resume_rate's through the node's hops (the tier plan's)."""
    return logic.compare(model, gpu, tier, tokens, tp, bandwidth_Bps, efficiency, kv_dtype,
                         compute_dtype, _engine(engine), concurrent_reloads, ep, batch,
                         allow_beyond_context, prefill, new_tokens, token_ids, resume_rate,
                         _codec(codec), None, gpu_resume_rate)


def compare_at(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
               kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
               batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
               token_ids=False, resume_rate=None, codec=None):
    """Reload against recompute at exactly ``tokens`` reloaded (logic.compare_at)."""
    return logic.compare_at(model, gpu, tier, tokens, tp, bandwidth_Bps, efficiency, kv_dtype,
                            compute_dtype, _engine(engine), concurrent_reloads, ep, batch,
                            allow_beyond_context, prefill, new_tokens, token_ids, resume_rate,
                            _codec(codec))


def sweep(model, gpu, tier, tokens, own_step=True, **kw):
    """Reload and recompute times (s) over an array of prefix lengths. own_step=False leaves
    the reloading request's own engine steps out of the reload (for a prefix whose forward pass
    the request runs anyway, as when it also computes a suffix)."""
    prefill = kw.pop("prefill", "calibrated")
    if kw.get("efficiency") is not None:
        prefill = "ideal"
    v, _ = scenario_values(model, gpu, tier, **kw)
    layout = v.pop("layout")
    for key in ("engine", "copy_bytes"):
        v.pop(key)
    t = np.asarray(tokens, dtype=float)
    _, rec = recompute_fn(model, gpu, layout, v, prefill)
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


def min_tp(model, gpu, tokens=1, batch=1):
    """Smallest TP whose HBM holds the weights and the KV of ``batch`` x ``tokens`` (or the
    sourced deployment's attention TP); None when nothing fits."""
    try:
        return choose_layout(model, gpu, tokens, batch=batch).tp
    except ScenarioError:
        return None
