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
from kvmath.evaluate.values import (  # noqa: F401 (re-exported: the scenario's values)
    DEFAULT_ENGINE, Layout, Numeric, PathHop, ScenarioError,
    TP_CANDIDATES, _efficiency, _engine, _hbm_slack,
    _per_model, architecture_values, choose_layout, copies_span_layers, default_concurrency,
    fn, hbm_fit_fraction, heads_fit, hop_copies, node_tp,
    numeric_of, parameter_counts, path_values, reads_once, replication,
    scenario_values, stores_once, tier_path, HBM_TIER, request_cost_values)



#: how compare's context-window error says it can be overridden (commands without the flag
#: replace it with :data:`BEYOND_CONTEXT_ELSEWHERE`)
BEYOND_CONTEXT_HINT = "(pass --allow-beyond-context to evaluate it anyway)"
BEYOND_CONTEXT_ELSEWHERE = ("(only compare takes --allow-beyond-context, for one request beyond "
                            "the window; serve the model within it here)")

#: the shortest prefix whose reload means anything, tokens: at one token the reload's own
#: forward pass is the whole prefill, and recompute wins by the load's first byte
MIN_PREFIX_TOKENS = 2.0


def crossings(values):
    """Prefix lengths (tokens, ascending, from MIN_PREFIX_TOKENS) where reload time equals
    recompute time.

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
            if t >= MIN_PREFIX_TOKENS and all(bool(c.take({**values, "T": t})) for c in checks):
                roots.append(t)
    roots.sort()
    unique = []
    for t in roots:
        if not unique or abs(t - unique[-1]) > 1e-9 * max(1.0, t):
            unique.append(t)
    return unique


def numeric_crossings(advantage, t_max, t_min=MIN_PREFIX_TOKENS, points=1024, iterations=48):
    """Roots of a smooth advantage(T) (vectorised, s) in [t_min, t_max], by sign changes on a
    log grid refined by bisection; for advantages that are not piecewise quadratics."""
    grid = np.geomspace(t_min, t_max, points)
    vals = np.asarray(advantage(grid), dtype=float)
    idx = np.nonzero(np.sign(vals[1:]) * np.sign(vals[:-1]) < 0)[0]
    if len(idx) == 0:
        return []
    lo, hi = grid[idx].copy(), grid[idx + 1].copy()
    f_lo = vals[idx].copy()
    for _ in range(iterations):
        mid = np.sqrt(lo * hi)
        f_mid = np.asarray(advantage(mid), dtype=float)
        left = np.sign(f_mid) == np.sign(f_lo)
        lo = np.where(left, mid, lo)
        f_lo = np.where(left, f_mid, f_lo)
        hi = np.where(left, hi, mid)
    return [float(x) for x in np.sqrt(lo * hi)]


@lru_cache(maxsize=None)
def _regime_fns():
    return [(name, tuple(Numeric.generated(k, f"{name} coefficient") for k in coeffs),
             tuple(Numeric.generated(k, f"{name} condition") for k in checks))
            for name, coeffs, checks in _numeric.REGIMES]



def engine_costs_calibrated(eng):
    """Whether every request cost of the engine is given (engine_costs.csv); the ideal profile
    charges none by definition."""
    from kvmath.tables.rows import ENGINE_COST_PARAMETERS, engine_costs
    return eng.name == "ideal" or set(ENGINE_COST_PARAMETERS) <= set(engine_costs(eng.name))


def concurrent_at_load(values, hops, tokens, resume_rate):
    """Reloads sharing the node's busiest shared hop as one arrives, when resume_rate reloads
    per second arrive at the node (concurrent_reloads_at_load on the hop whose one-reload time
    is longest; 1 when the path has no node-shared hop). ScenarioError when the load saturates
    the hop (utilisation at or above 1)."""
    if not (resume_rate > 0 and math.isfinite(resume_rate)):
        raise ScenarioError(f"--resume-rate must be a positive number, got {resume_rate}")
    at = {**values, "T": float(tokens), "r": float(resume_rate)}
    worst, name, busiest = 0.0, None, None
    for h, c in zip(hops, values["hop_copies"]):
        if c is None:
            continue
        # a codec's hop carries 1/r_c of the bytes: its rate in decoded bytes is r_c times
        hop_at = {**at, "rho_n": c, "B_node": h.effective_Bps * values.get("r_c", 1.0)}
        u = float(fn("hop_utilisation").take(hop_at))
        if u > worst:
            worst, name, busiest = u, h.link, hop_at
    if busiest is None:  # no node-shared hop: each reload has its GPU's own link
        return 1.0
    if worst >= 1:
        raise ScenarioError(f"--resume-rate {resume_rate:g}/s saturates {name}: each reload "
                            f"holds it for {worst / resume_rate:.3g} s, so at most "
                            f"{resume_rate / worst:.3g} reloads per second fit")
    return float(fn("concurrent_reloads_at_load").take(busiest))


def _codec_keys(codec, v, at):
    """compare's keys for a KV codec: what the KV is encoded in and what decoding costs."""
    per_gpu = float(fn("kv_bytes_per_gpu").take(at))
    return {"codec": codec.name, "codec_compression_ratio": v["r_c"],
            "codec_decode_Bps": v["B_dec"], "codec_pipelined": codec.pipelined,
            "codec_decode_s": per_gpu / v["B_dec"],
            "kv_bytes_moved_per_gpu": per_gpu / v["r_c"],
            "reload_wire_bandwidth_Bps": v["B_wire"]}


def _finite(result, what):
    for key, value in result.items():
        if isinstance(value, float) and not math.isfinite(value) and key not in _MAY_BE_INF:
            raise ScenarioError(f"{what}: {key} is not a finite number; an input is out of "
                                "range (check the magnitudes in the model and GPU rows)")
    return result


_MAY_BE_INF = {"min_reload_bandwidth_Bps"}


PREFILL_MODELS = ("calibrated", "ideal")


def recompute_fn(model, gpu, layout, values, prefill="calibrated", batch=1):
    """(name of the prefill model used, f(T) -> recompute seconds, vectorised), of ``batch``
    equal prompts in one forward pass.

    ``ideal``: the flat roofline of :mod:`kvmath.derive.kv`; ``calibrated``: the operator model
    of :mod:`kvmath.evaluate.prefill`, fitted to measured operator times. A GPU with no calibration
    falls back to ideal, and the name says so. An explicit ``--efficiency`` is a flat model.
    """
    if prefill not in PREFILL_MODELS:
        raise ScenarioError(f"--prefill must be one of {', '.join(PREFILL_MODELS)}, got {prefill!r}")
    ideal = fn("t_recompute")
    if batch != 1:  # the flat roofline of a batch: the compute adds up, the weights read once
        ideal, values = fn("t_recompute_batch"), {**values, "n_seq": float(batch)}
    if prefill == "ideal":
        return "ideal", lambda t: ideal.take({**values, "T": t})
    from kvmath.evaluate.prefill import allreduce_figures, calibrated_fn, fitted_parameters
    if gpu.name not in fitted_parameters() or gpu.name not in allreduce_figures():
        return "ideal (no calibration for this GPU)", lambda t: ideal.take({**values, "T": t})
    if layout.dp_attention:
        kw = dict(tp=layout.gpus, ep=layout.gpus, dp_attention=True, tp_attn=layout.tp)
    else:  # experts expert-parallel over ep ranks, or sharded by TP (ep 1)
        kw = dict(tp=layout.gpus, ep=layout.ep if layout.ep > 1 else None, dp_attention=False)
    return "calibrated", calibrated_fn(model, gpu, compute_dtype=layout.compute_dtype, batch=batch,
                                       **kw)


def suffix_values(values, rec, tokens):
    """The prefill model's times for the prefix, the prefix with the new tokens and the new
    tokens alone at prefix length ``tokens`` (a number or an array), as substitution values."""
    t = np.asarray(tokens, dtype=float) if np.ndim(tokens) else float(tokens)
    n = values["n"]
    return {"T": t, "t_rec_p": rec(t), "t_rec_pn": rec(t + n), "t_rec_n": rec(n)}


def time_step(values, rec, tokens):
    """Time the engine step of ``values`` (in place) at prefix length ``tokens`` with the
    recompute's prefill model ``rec``: the reloaded request's own forward pass of its n new
    tokens over the loaded prefix (t_suffix) costs what that model says they cost, so a reload
    can never beat the prefill it would run anyway. Returns the values at ``tokens``."""
    at = {**values, **suffix_values(values, rec, tokens)}
    values["t_step"] = fn("t_suffix").take(at)
    values["t_0"] = fn("fixed_cost").take(values)
    if not np.ndim(tokens):
        values["t_step"], values["t_0"] = float(values["t_step"]), float(values["t_0"])
    return {**at, "t_step": values["t_step"], "t_0": values["t_0"]}


def ttft_fns(values, rec):
    """(ttft_cold(T), ttft_hit(T)), vectorised, s: each T times its own engine step."""
    cold, hit = fn("ttft_cold"), fn("ttft_hit")

    def at(t):
        return time_step(dict(values), rec, t)
    return (lambda t: cold.take(at(t))), (lambda t: hit.take(at(t)))


_CROSSINGS = {}


def _ttft_crossings(model, gpu, layout, values, rec, t_max):
    """numeric_crossings of the TTFT with the prefix loaded against the TTFT cold (a list,
    tokens), for either prefill model.

    They depend on the scenario's values, not on its prompt length (below the context
    window), and a bisection costs far more than the rest of a comparison: each set of
    inputs is solved once per process (the calibrated fit is fixed by model, GPU and layout).
    """
    try:
        key = (model, gpu, layout, t_max,
               tuple(sorted((k, type(x), x) for k, x in values.items())))
        hash(key)
    except TypeError:  # a value that cannot be remembered: solve afresh
        key = None
    if key is None or key not in _CROSSINGS:
        cold, hit = ttft_fns(values, rec)
        roots = tuple(numeric_crossings(lambda t: hit(t) - cold(t), t_max))
        if key is None:
            return list(roots)
        if len(_CROSSINGS) >= 4096:
            _CROSSINGS.clear()
        _CROSSINGS[key] = roots
    return list(_CROSSINGS[key])


def _state_keys(model, v, at, layout):
    """A hybrid model's recurrent state in compare's answer (names contain state); {} for a
    model without one."""
    if not model.recurrent_layers:
        return {}
    state = float(fn("state_bytes").take(at))
    total = float(fn("kv_bytes_total").take(at))
    return {"state_bytes": state, "state_bytes_per_gpu": state / layout.tp,
            "state_share_of_reload_bytes": state / total,
            "state_load_s": state / layout.tp / v["B"],
            "state_dtype": model.state_dtype or model.weight_dtype,
            "state_layers": model.recurrent_layers,
            "state_checkpoint_tokens": float(fn("state_checkpoint_tokens").take(at))}


def compare(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
            kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
            batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
            token_ids=False, resume_rate=None, codec=None):
    """Reload against recompute for one scenario; a dict of plain numbers (units in keys)
    (:func:`compare_at`, below).

    A hybrid model's state is kept only every state_checkpoint_tokens (vLLM's block grid), so a
    prefix of T tokens reloads the KV and the state of its last checkpoint, at
    state_checkpoint_at_tokens, and computes the tail beyond it with the new turn's tokens
    (state_tail_tokens); below the first checkpoint nothing can be reloaded."""
    kw = dict(tp=tp, bandwidth_Bps=bandwidth_Bps, efficiency=efficiency, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, engine=engine, concurrent_reloads=concurrent_reloads,
              ep=ep, batch=batch, allow_beyond_context=allow_beyond_context, prefill=prefill,
              new_tokens=new_tokens, token_ids=token_ids, resume_rate=resume_rate, codec=codec)
    r = compare_at(model, gpu, tier, tokens, **kw)
    if not model.recurrent_layers:
        return r
    c = r["state_checkpoint_tokens"]
    at = math.floor(tokens / c) * c
    if at < MIN_PREFIX_TOKENS:
        raise ScenarioError(f"{model.name} keeps its recurrent state only every {c:,.0f} tokens "
                            f"(vLLM's block grid at TP {r['tp']}): a prefix of {tokens:,} tokens "
                            "has no checkpoint to reload, so it is recomputed")
    if at < tokens:  # the tail past the checkpoint is computed with the new turn
        first = r
        r = compare_at(model, gpu, tier, at, **{
            **kw, "tp": first["tp"], "ep": first["ep"] if first["ep"] > 1 else None,
            "new_tokens": new_tokens + tokens - at})
        r.update(tokens=tokens, new_tokens=new_tokens, layout_from=first["layout_from"])
    r.update(state_checkpoint_at_tokens=at, state_tail_tokens=tokens - at)
    # no reload below the first checkpoint: a crossing the continuous model puts there is at it
    r["breakeven_tokens"] = sorted({max(x, c) for x in r["breakeven_tokens"]})
    return r


def compare_at(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
               kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
               batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
               token_ids=False, resume_rate=None, codec=None):
    """Reload against recompute for one scenario at exactly ``tokens`` reloaded (a hybrid
    model's state there, wherever its checkpoints lie); a dict of plain numbers.

    The verdict compares times to first token: ttft_cold_s (the request's costs and the prefill
    of all tokens + new_tokens) against ttft_hit_s (the request's costs, the tokens loaded from
    the tier, then the new tokens' forward pass). recompute_s and reload_s are the parts that
    differ: the prefix's prefill and its reload (the load, the connector's per-token cost and the
    engine step over the new tokens).

    resume_rate: reloads per second arriving at the node (each resume reloads from the tier):
    the reloads in flight on its shared hops follow from it (:func:`concurrent_at_load`), and
    reload_queue_s is the time sharing adds to one reload. Without it (and without
    concurrent_reloads) every replica of the node reloads at once, the worst case.

    codec: a :class:`kvmath.tables.rows.Codec` (codecs.csv) the KV moves encoded in: each hop
    carries 1/ratio of the bytes and the GPU decodes them (kvmath.derive.kv.B_coded)."""
    if not tokens >= MIN_PREFIX_TOKENS:
        raise ScenarioError(f"--tokens must be at least {MIN_PREFIX_TOKENS:g}, got {tokens}: a "
                            "one-token prefix leaves nothing to reload beyond the request's own "
                            "forward pass")
    if tokens > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} exceeds {model.name}'s context window of "
                            f"{model.max_context_tokens:,} tokens (pass --allow-beyond-context "
                            "to evaluate it anyway)")
    if not (new_tokens >= 1 and math.isfinite(new_tokens)):
        raise ScenarioError(f"--new-tokens must be at least 1, got {new_tokens}: the new turn "
                            "computes at least the token it samples from")
    # the prefix and the new turn share the window; the default single new token is the last
    # prefix position's own (its logits give the first token), so a full-window prefix fits
    if tokens + new_tokens - 1 > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} with --new-tokens {new_tokens:,} exceeds "
                            f"{model.name}'s context window of {model.max_context_tokens:,} "
                            f"tokens {BEYOND_CONTEXT_HINT}")
    if resume_rate is not None and concurrent_reloads is not None:
        raise ScenarioError("give --resume-rate or --concurrent-reloads, not both (the load "
                            "sets the reloads in flight; --concurrent-reloads overrides it)")
    args = (model, gpu, tier, tp, bandwidth_Bps, efficiency, kv_dtype, compute_dtype, engine)
    kw = dict(ep=ep, batch=batch, tokens=tokens + new_tokens - 1, check_fit=True,
              new_tokens=new_tokens, token_ids=token_ids, codec=codec)
    alone = None
    given = concurrent_reloads
    if resume_rate is not None:
        v1, hops1 = scenario_values(*args, concurrent_reloads=1.0, **kw)
        concurrent_reloads = concurrent_at_load(v1, hops1, tokens, resume_rate)
        alone = (v1, hops1)
    v, hops = scenario_values(*args, concurrent_reloads=concurrent_reloads, **kw)
    layout, eng = v.pop("layout"), v.pop("engine")
    copy = v.pop("copy_bytes")
    replicas = default_concurrency(gpu, layout.tp)
    if given is not None and given > replicas:
        raise ScenarioError(
            f"--concurrent-reloads {given:g} exceeds the {replicas:g} replica(s) of TP "
            f"{layout.tp} that a node of {gpu.gpus_per_node} {gpu.name} GPUs holds (each "
            "replica reloads one cache at a time here; give at most that many, or --resume-rate)")
    if efficiency is not None:
        prefill = "ideal"  # a flat efficiency is the flat model
    prefill_name, rec = recompute_fn(model, gpu, layout, v, prefill)
    at = time_step(v, rec, float(tokens))
    recompute = float(at["t_rec_p"])
    reload = float(fn("t_reload").take(at))
    ttft_cold = float(fn("ttft_cold").take(at))
    ttft_hit = float(fn("ttft_hit").take(at))
    request = float(fn("t_request").take(at))
    compute = float(fn("t_compute").take(at))
    weights = float(fn("t_weights").take(at))
    # reload wins while its load beats the prefill it saves: rec(T + n) against the step and load
    saved = float(at["t_rec_pn"])
    min_bw = (float(fn("breakeven_bandwidth_at").take({**at, "t_rec": saved}))
              if saved > v["t_0"] + v["c_hit"] * tokens else math.inf)
    if codec is not None and math.isfinite(min_bw):  # the path rate that gives it, once
        # decoded; none at or above the decode rate
        min_bw = (math.inf if min_bw >= v["B_dec"] else float(fn(
            "codec_wire_for_pipelined" if codec.pipelined else "codec_wire_for").take(
                {**v, "B": min_bw})))
    cross = _ttft_crossings(model, gpu, layout, v, rec,
                            max(float(model.max_context_tokens), float(tokens)))
    queue = 0.0
    if alone is not None:  # what sharing the node's hops adds to one reload
        v1 = {k: x for k, x in alone[0].items() if k not in ("layout", "engine", "copy_bytes")}
        queue = reload - float(fn("t_reload").take(time_step(v1, rec, float(tokens))))
    slack, w_gpu, kv_gpu = _hbm_slack(model, gpu, layout, tokens, batch, hbm_fit_fraction(eng))
    unique = float(fn("kv_bytes_unique").take(at))
    node_copies = float(fn("node_copies").take(at))  # through host memory
    path = []
    for h, c in zip(hops, v["hop_copies"]):
        carried = (v["n_c"] * float(fn("node_bytes").take({**at, "rho_n": c}))
                   if c is not None else float(fn("kv_bytes_per_gpu").take(at)))
        carried /= v.get("r_c", 1.0)  # encoded by a codec: 1/ratio of the bytes cross
        path.append({**{k: x for k, x in h.__dict__.items() if k != "host_memory"},
                     "bytes": carried, "time_s": carried / h.effective_Bps})
    result = {
        "model": model.name, "gpu": gpu.name, "tier": tier.name, "tokens": tokens,
        "tp": layout.tp, "ep": layout.ep, "dp_attention": layout.dp_attention,
        "gpus": layout.gpus, "layout_from": layout.reason,
        "weight_dtype": layout.weight_dtype, "compute_dtype": layout.compute_dtype,
        "kv_dtype": layout.kv_dtype, "engine": eng.name, "prefill_model": prefill_name,
        "batch": batch, "concurrent_reloads": v["n_c"], "gpus_per_node": v["N_node"],
        "resume_rate_per_s": resume_rate, "reload_queue_s": queue,
        "load_from": ("resume rate" if resume_rate is not None else "given"
                      if concurrent_reloads is not None else "every replica at once"),
        "kv_bytes_per_token": float(fn("kv_bytes_per_token").take(v)),
        "kv_bytes": float(fn("kv_bytes_total").take(at)),
        "kv_bytes_unique": unique,
        "kv_bytes_per_gpu": float(fn("kv_bytes_per_gpu").take(at)),
        "kv_replication": v["rho"], "node_hop_copies": node_copies,
        **_state_keys(model, v, at, layout),
        # a stored cache holds rho_s copies of the KV and one state (never replicated)
        "kv_bytes_stored": v["rho_s"] * float(fn("kv_bytes_attention").take(at))
        + float(fn("state_bytes").take(at)),
        "kv_stored_copies": v["rho_s"],
        "weights_bytes_per_gpu": w_gpu, "hbm_fit_bytes_per_gpu":
            hbm_fit_fraction(eng) * gpu.hbm_capacity_bytes, "hbm_free_bytes_per_gpu": slack,
        "prefill_flops": float(fn("flops_prefill").take(at)),
        "prefill_efficiency": v["eta"],
        "compute_s": compute, "weights_read_s": weights,
        "recompute_s": recompute, "reload_s": reload,
        "new_tokens": new_tokens, "token_ids": bool(token_ids),
        "ttft_recompute_s": ttft_cold, "ttft_reload_s": ttft_hit,
        "request_s": request, "request_fixed_s": v["t_req"],
        "hash_token_s": v["c_hash"], "tokenize_token_s": v["c_tokz"], "hit_token_s": v["c_hit"],
        "hit_cost_s": v["c_hit"] * tokens,
        "engine_costs_calibrated": engine_costs_calibrated(eng),
        "reload_bandwidth_Bps": v["B"] if math.isfinite(v["B"]) else None,
        "reload_latency_s": v["t_lat"],
        "reload_step_s": v["t_step"], "reload_fixed_s": v["t_0"],
        "overlap_hidden_s": float(fn("t_overlap_hidden").take(at)),
        "copy_bytes": copy,
        **(_codec_keys(codec, v, at) if codec is not None else {}),
        # the engine's copy kernel loads these copies (no per-copy cost: an assumption)
        "load_kernel": bool(tier.hops) and eng.load_kernel(copy, gpu.platform),
        "path": path,
        "winner": "reload" if ttft_hit < ttft_cold else "recompute",
        "speedup": max(ttft_hit, ttft_cold) / min(ttft_hit, ttft_cold),
        "breakeven_tokens": cross,
        "min_reload_bandwidth_Bps": min_bw,
        "model_flops_per_kv_byte": float(fn("model_flops_per_kv_byte").take(v)),
        "model_flops_per_kv_byte_at_tokens": float(fn("model_flops_per_kv_byte_at_T").take(at)),
        "gpu_flops_per_link_byte": (float(fn("gpu_flops_per_link_byte").take(v))
                                    if math.isfinite(v["B"]) else 0.0),
    }
    return _finite(result, f"{model.name} on {gpu.name}")


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
