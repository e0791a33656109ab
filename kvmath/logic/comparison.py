"""The comparison: reload against recompute for one scenario at one prompt length, every number
a command prints (the KV's bytes and copies, the path hop by hop, the request's costs, both times
to first token, the verdict, the crossings, the least bandwidth that wins), and a hybrid model's
reload of its last state checkpoint.
"""
from __future__ import annotations

import math

from kvmath.logic.constants import BEYOND_CONTEXT_HINT, MAY_BE_INF, MIN_PREFIX_TOKENS
from kvmath.logic.crossings import ttft_crossings
from kvmath.logic.layout import (default_concurrency, hbm_slack, layout_lengths,
                                 longest_prompt, usable_fraction)
from kvmath.logic.path import tier_kind
from kvmath.logic.prefill import recompute_fn, time_step
from kvmath.logic.rules import copy_path, engine_cost_caveat, own_value, rope_hint
from kvmath.logic.runtime import DATA, ScenarioError, formula, is_float, with_fields
from kvmath.logic.values import load_values, plain_values


def state_keys(model, v, at, layout):
    """A hybrid model's recurrent state in compare's answer (names contain state); {} for a
    model without one."""
    if not model.recurrent_layers:
        return {}
    state = float(formula("derive.state_bytes", at))
    total = float(formula("derive.kv_bytes_total", at))
    return {"state_bytes": state, "state_bytes_per_gpu": state / layout.tp,
            "state_share_of_reload_bytes": state / total,
            "state_load_s": state / layout.tp / v["B"],
            "state_dtype": model.state_dtype or model.weight_dtype,
            "state_layers": model.recurrent_layers,
            "state_checkpoint_tokens": float(formula("derive.state_checkpoint_tokens", at))}


def codec_keys(codec, tier, v, at):
    """compare's keys for a KV codec: what the KV is encoded in and what decoding costs, and
    whether the tier is one an engine codes (its kind says so, kvmath.tiers.kinds: LMCache
    codes its remote backends only; elsewhere the codec is a what-if)."""
    at = {**at, "B_dec": v["B_dec"], "r_c": v["r_c"], "n_g": 1.0}
    return {"codec": codec.name, "codec_compression_ratio": v["r_c"],
            "codec_decode_Bps": v["B_dec"], "codec_pipelined": codec.pipelined,
            "codec_decode_s": float(formula("derive.t_decode", at)),
            "kv_bytes_moved_per_gpu": float(formula("derive.gpu_hop_bytes", at)),
            "reload_wire_bandwidth_Bps": v["B_wire"],
            "codec_what_if": not tier_kind(tier)["coded"]}


def finite(result, what):
    """The result, or ScenarioError naming the first number in it that is not finite."""
    for key in result:
        x = result[key]
        if is_float(x) and not math.isfinite(x) and key not in MAY_BE_INF:
            raise ScenarioError(f"{what}: {key} is not a finite number; an input is out of "
                                "range (check the magnitudes in the model and GPU rows)")
    return result




def compare_at(s, tokens):
    """Reload against recompute for scenario ``s`` at exactly ``tokens`` reloaded (a hybrid
    model's state there, wherever its checkpoints lie); a dict of plain numbers.

    The verdict compares times to first token: ttft_cold_s (the request's costs and the prefill
    of all tokens + new_tokens) against ttft_hit_s (the request's costs, the tokens loaded from
    the tier, then the new tokens' forward pass). recompute_s and reload_s are the parts that
    differ: the prefix's prefill and its reload (the load, the connector's per-token cost and the
    engine step over the new tokens).

    s.resume_rate: reloads per second arriving at the node (each resume reloads from the tier):
    the reloads in flight on its shared hops follow from it (:func:`concurrent_at_load`), and
    reload_queue_s is the time sharing adds to one reload. Without it (and without
    concurrent_reloads) every replica of the node reloads at once, the worst case.

    s.codec: a codec row (codecs.csv) the KV moves encoded in: each hop carries 1/ratio of the
    bytes and the GPU decodes them (kvmath.derive.kv.B_coded)."""
    model = s.model
    gpu = s.gpu
    tier = s.tier
    own = s.own
    codec = s.codec
    new_tokens = s.new_tokens
    resume_rate = s.resume_rate
    allow_beyond_context = s.allow_beyond_context
    if not tokens >= MIN_PREFIX_TOKENS:
        raise ScenarioError(f"--tokens must be at least {MIN_PREFIX_TOKENS:g}, got {tokens}: a "
                            "one-token prefix leaves nothing to reload beyond the request's own "
                            "forward pass")
    if tokens > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} exceeds {model.name}'s context window of "
                            f"{model.max_context_tokens:,} tokens{rope_hint(model)} "
                            f"{BEYOND_CONTEXT_HINT}")
    if not (new_tokens >= 1 and math.isfinite(new_tokens)):
        raise ScenarioError(f"--new-tokens must be at least 1, got {new_tokens}: the new turn "
                            "computes at least the token it samples from")
    # the prefix and the new turn share the window; the default single new token is the last
    # prefix position's own (its logits give the first token), so a full-window prefix fits
    if tokens + new_tokens - 1 > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} with --new-tokens {new_tokens:,} exceeds "
                            f"{model.name}'s context window of {model.max_context_tokens:,} "
                            f"tokens{rope_hint(model)} {BEYOND_CONTEXT_HINT}")
    if codec is not None and model.recurrent_layers:
        raise ScenarioError(f"--codec {codec.name} codes attention KV (its ratio and decode rate "
                            f"are measured on it); {model.name}'s recurrent state has no "
                            "measured coding: drop --codec for a hybrid model")
    if s.bandwidth_Bps is not None and resume_rate is not None:
        raise ScenarioError("--bandwidth replaces the whole path with one rate, and --resume-rate "
                            "shares the path's hops: give one or the other")
    if resume_rate is not None and s.concurrent_reloads is not None:
        raise ScenarioError("give --resume-rate or --concurrent-reloads, not both (the load "
                            "sets the reloads in flight; --concurrent-reloads overrides it)")
    given = s.concurrent_reloads
    loaded = load_values(s, tokens)
    sv = loaded[0]
    alone = loaded[1]
    layout = sv[0]["layout"]
    eng = sv[0]["engine"]
    copy = sv[0]["copy_bytes"]
    copy_route = copy_path(eng, copy, gpu.platform)
    v = plain_values(sv[0])
    hops = sv[1]
    replicas = default_concurrency(gpu, layout.tp, own)
    if given is not None and given > replicas:
        raise ScenarioError(
            f"--concurrent-reloads {given:g} exceeds the {replicas:g} replica(s) of TP "
            f"{layout.tp} that a node of {v['N_node']} {gpu.name} GPUs holds (each "
            "replica reloads one cache at a time here; give at most that many, or --resume-rate)")
    rec_fn = recompute_fn(s, layout, v)
    rec = rec_fn[1]
    at = time_step(v, rec, float(tokens))
    recompute = float(at["t_rec_p"])
    reload = float(formula("derive.t_reload", at))
    ttft_cold = float(formula("derive.ttft_cold", at))
    ttft_hit = float(formula("derive.ttft_hit", at))
    # reload wins while its load beats the prefill it saves: rec(T + n) against the step and load
    saved = float(at["t_rec_pn"])
    min_bw = math.inf
    if saved > v["t_0"] + v["c_hit"] * tokens:
        min_bw = float(formula("derive.breakeven_bandwidth_at", {**at, "t_rec": saved}))
    if codec is not None and math.isfinite(min_bw):  # the path rate that gives it, once
        # decoded; none at or above the decode rate
        if min_bw >= v["B_dec"]:
            min_bw = math.inf
        else:
            min_bw = float(formula("derive.codec_wire_for_pipelined" if codec.pipelined
                                   else "derive.codec_wire_for", {**v, "B": min_bw}))
    cross = ttft_crossings(s, layout, v, rec_fn,
                           max(float(model.max_context_tokens), float(tokens)))
    queue = 0.0
    if alone is not None:  # what sharing the node's hops adds to one reload
        v1 = plain_values(alone[0])
        queue = reload - float(formula("derive.t_reload", time_step(v1, rec, float(tokens))))
    fit = hbm_slack(s, layout, tokens, usable_fraction(s))
    inflight = float(formula("derive.hbm_inflight_bytes", at))
    if v["n_g"] > 1 and inflight > fit[0]:  # each reload in flight lands in HBM held for it
        one = float(formula("derive.kv_bytes_per_gpu", at))
        raise ScenarioError(f"--resume-rate {resume_rate:g}/s: {v['n_g']:.3g} reloads in flight "
                            f"on each replica would hold {(inflight + one) / 1e9:.3g} GB of KV "
                            f"per GPU, more than the {(max(fit[0], 0.0) + one) / 1e9:.3g} GB its "
                            "HBM holds beside the weights: the load overflows HBM")
    coded = {**at, "r_c": v.get("r_c", 1.0)}  # a codec's hops carry 1/ratio of the bytes
    path = []
    for i, h in enumerate(hops):
        c = v["hop_copies"][i]
        carried = float(formula("derive.gpu_hop_bytes", coded))
        if c is not None:
            carried = float(formula("derive.node_hop_bytes", {**coded, "rho_n": c}))
        path.append({"link": h.link, "count": h.count, "scope": h.scope,
                     "effective_Bps": h.effective_Bps, "latency_s": h.latency_s,
                     "bytes": carried, "time_s": carried / h.effective_Bps})
    load_from = "every replica at once"
    if resume_rate is not None:
        load_from = "resume rate"
    elif given is not None:
        load_from = "given"
    result = {
        "model": model.name, "gpu": gpu.name, "tier": tier.name, "tier_kind": tier.kind,
        "tier_medium": tier.medium, "tokens": tokens,
        "context_window_tokens": model.max_context_tokens, "tp": layout.tp, "ep": layout.ep, "dp_attention": layout.dp_attention,
        "gpus": layout.gpus, "layout_from": layout.reason,
        # the default layout's TP by prompt length up to this one, where it changes ([] when
        # the TP is given or a deployment sets it): [[up to tokens, TP], ...]
        "layout_by_length": layout_lengths(s, tokens + new_tokens - 1),
        "weight_dtype": layout.weight_dtype, "compute_dtype": layout.compute_dtype,
        "kv_dtype": layout.kv_dtype, "engine": eng.name, "prefill_model": rec_fn[0],
        "batch": s.batch, "concurrent_reloads": v["n_c"], "gpu_reloads": v["n_g"],
        "gpus_per_node": v["N_node"],
        "resume_rate_per_s": resume_rate, "reload_queue_s": queue, "load_from": load_from,
        "kv_bytes_per_token": float(formula("derive.kv_bytes_per_token", v)),
        "kv_bytes": float(formula("derive.kv_bytes_total", at)),
        "kv_bytes_unique": float(formula("derive.kv_bytes_unique", at)),
        "kv_bytes_per_gpu": float(formula("derive.kv_bytes_per_gpu", at)),
        "kv_replication": v["rho"], "node_hop_copies": float(formula("derive.node_copies", at)),
        **state_keys(model, v, at, layout),
        # a stored cache holds rho_s copies of the KV and one state (never replicated)
        "kv_bytes_stored": float(formula("derive.kv_bytes_stored",
                                         {**at, "rho_s": v["rho_s"], "r_c": v.get("r_c", 1.0)})),
        "kv_stored_copies": v["rho_s"],
        "weights_bytes_per_gpu": fit[1],
        "hbm_fit_bytes_per_gpu": usable_fraction(s) * own_value(own, "C_hbm",
                                                               gpu.hbm_capacity_bytes),
        "hbm_free_bytes_per_gpu": fit[0],
        "prefill_flops": float(formula("derive.flops_prefill", at)),
        "prefill_efficiency": v["eta"],
        "compute_s": float(formula("derive.t_compute", at)),
        "weights_read_s": float(formula("derive.t_weights", at)),
        "recompute_s": recompute, "reload_s": reload,
        "new_tokens": new_tokens, "token_ids": bool(s.token_ids),
        "ttft_recompute_s": ttft_cold, "ttft_reload_s": ttft_hit,
        "request_s": float(formula("derive.t_request", at)), "request_fixed_s": v["t_req"],
        "hash_token_s": v["c_hash"], "tokenize_token_s": v["c_tokz"], "hit_token_s": v["c_hit"],
        "hit_cost_s": v["c_hit"] * tokens,
        # what the request costs rest on: words where fewer than three sources back them
        "engine_costs_caveat": engine_cost_caveat(eng),
        "reload_bandwidth_Bps": v["B"] if math.isfinite(v["B"]) else None,
        "reload_latency_s": v["t_lat"],
        "reload_step_s": v["t_step"], "reload_fixed_s": v["t_0"],
        "overlap_hidden_s": float(formula("derive.t_overlap_hidden", at)),
        "copy_bytes": copy,
        **(codec_keys(codec, tier, v, at) if codec is not None else {}),
        # how the engine issues the load's copies (its copy kernel, one batched driver call,
        # driver copies one by one) and, where it has a kernel it does not use, why
        "copy_path": copy_route[0] if len(tier.hops) > 0 else None,
        "copy_path_fallback": copy_route[1] if len(tier.hops) > 0 else "",
        "path": path,
        "winner": "reload" if ttft_hit < ttft_cold else "recompute",
        "speedup": max(ttft_hit, ttft_cold) / min(ttft_hit, ttft_cold),
        "breakeven_tokens": cross,
        "min_reload_bandwidth_Bps": min_bw,
        "model_flops_per_kv_byte": float(formula("derive.model_flops_per_kv_byte", v)),
        "model_flops_per_kv_byte_at_tokens": float(formula("derive.model_flops_per_kv_byte_at_T",
                                                           at)),
        "gpu_flops_per_link_byte": (float(formula("derive.gpu_flops_per_link_byte", v))
                                    if math.isfinite(v["B"]) else 0.0),
    }
    return finite(result, f"{model.name} on {gpu.name}")



def compare(s, tokens):
    """Reload against recompute for scenario ``s`` at ``tokens``; a dict of plain numbers (units
    in keys) (:func:`compare_at`).

    A hybrid model's state is kept only every state_checkpoint_tokens (vLLM's block grid), so a
    prefix of T tokens reloads the KV and the state of its last checkpoint, at
    state_checkpoint_at_tokens, and computes the tail beyond it with the new turn's tokens
    (state_tail_tokens); below the first checkpoint nothing can be reloaded."""
    model = s.model
    r = compare_at(s, tokens)
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
        r = compare_at(with_fields(s, {"tp": first["tp"],
                                       "ep": first["ep"] if first["ep"] > 1 else None,
                                       "new_tokens": s.new_tokens + tokens - at}), at)
        r["tokens"] = tokens
        r["new_tokens"] = s.new_tokens
        r["layout_from"] = first["layout_from"]
        r["layout_by_length"] = first["layout_by_length"]
    r["state_checkpoint_at_tokens"] = at
    r["state_tail_tokens"] = tokens - at
    # no reload below the first checkpoint: a crossing the continuous model puts there is at it
    r["breakeven_tokens"] = sorted(set([max(x, c) for x in r["breakeven_tokens"]]))
    return r




def ttft_curve(s, tokens, lengths):
    """[length, TTFT cold, TTFT with the prefix loaded] at each of ``lengths`` (s): scenario
    ``s`` as compare evaluates it at ``tokens`` (its layout and load), each length timing its
    own engine step."""
    sv = load_values(s, tokens)[0]
    v = plain_values(sv[0])
    rec = recompute_fn(s, sv[0]["layout"], v)[1]
    out = []
    for t in lengths:
        at = time_step(dict(v), rec, t)
        out.append([t, formula("derive.ttft_cold", at), formula("derive.ttft_hit", at)])
    return out


def prompt_limit(s, tokens):
    """:func:`kvmath.logic.layout.longest_prompt` of the layout and engine scenario ``s`` is
    evaluated in at ``tokens``."""
    v = load_values(s, tokens)[0][0]
    return longest_prompt(s, v["layout"], usable_fraction(s))
