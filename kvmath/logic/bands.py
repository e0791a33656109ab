"""The bands: a comparison's recompute and reload times at the ends of what the evidence
allows (the binding hop's measured spread, the engine's quiet and driver-copy variants, the
prefill fit's held-out error, a borrowed fit's, the misses validation rows show), never beyond
physics, and whether the verdict flips inside them. ``limits``: the measured factors,
kvmath.evaluate.api.band_data (the calculator holds the same).
"""
from __future__ import annotations

import math

from kvmath.logic.comparison import compare
from kvmath.logic.path import coded_values
from kvmath.logic.rules import copy_path, shape_key
from kvmath.logic.runtime import DATA, Layout, formula, with_fields
from kvmath.logic.values import load_shares, plain_values, scenario_values


def binding_hop(v, hops, limits):
    """The hop that sets the path's bandwidth: the narrowest per-GPU hop when it binds, else
    the narrowest node-shared hop."""
    gpu_hops = [h for h in hops if h.scope == "per-gpu"]
    node_hops = [h for h in hops if h.scope == "per-node"]
    narrow_gpu = min(gpu_hops, key=lambda h: h.effective_Bps, default=None)
    wire = v.get("B_wire", v["B"])  # the path's own rate, before a codec's decoding
    if narrow_gpu is not None and math.isclose(wire, narrow_gpu.effective_Bps,
                                               rel_tol=limits["binding_rel_tol"]):
        return narrow_gpu
    return min(node_hops if len(node_hops) > 0 else gpu_hops, key=lambda h: h.effective_Bps)


def reload_bandwidth_range(v, hops, limits):
    """[low, high] effective per-GPU reload bandwidth, B/s: the binding hop's measured spread,
    the high end clamped so that the hop's efficiency never exceeds 1."""
    link = DATA.links[binding_hop(v, hops, limits).link]
    spread = limits["bandwidth_range"][link.name]
    hi = min(spread[1], 1.0 / link.efficiency)  # efficiency x factor <= 1: at most the spec rate
    wire = v.get("B_wire", v["B"])
    return [wire * spread[0], wire * hi]


def reload_floor(r, step_s):
    """The fastest a compare() result's reload can be with an engine step of step_s, s: the
    path's latency, the step and each hop's bytes at the link's datasheet or spec rate (the
    slowest hop binds)."""
    slowest = max([h["bytes"] / (DATA.links[h["link"]].bandwidth_Bps * h["count"])
                   for h in r["path"]] + [0.0])
    return r["reload_latency_s"] + step_s + slowest


def known_limits(s, r, limits):
    """The validation rows outside their tolerance whose model architecture (its shapes,
    whatever its name), GPU, tensor-parallel degree and expert layout are those of compare()
    result r of scenario ``s`` (limits["known_limits"]: id, quantity, measured/predicted ratio).
    A reader's own model values are another architecture: none."""
    own = s.own
    if own is not None and any([k in own for k in limits["model_symbols"]]):
        return []
    ep = r["ep"] if r["ep"] > 1 else None
    arch = shape_key(s.model)
    return [k for k in limits["known_limits"]
            if k["shape"] == arch and k["gpu"] == s.gpu.name and k["gpus"] == r["gpus"]
            and k["ep"] == ep and k["dp_attention"] == bool(r["dp_attention"])]


def variant(s, eng):
    """The scenario under another engine profile (one of the band's variants), as the band
    evaluates its path: one new token, the prompt as text, the calibrated prefill."""
    return with_fields(s, {"engine": eng, "efficiency": None, "new_tokens": 1,
                           "token_ids": False})


def variant_loads(s, tokens, layout, fallback):
    """[node, per-GPU] reloads in flight at the stated load for scenario ``s`` (one of the band's
    engine variants: :func:`variant`), each holding the hops for its own time
    (:func:`kvmath.logic.values.concurrent_at_load`); ``fallback`` (the nominal's) without a
    load, or where this variant's own hold saturates a hop (the band then takes the nominal's
    sharing: its slow end is a floor, not a bound)."""
    if s.resume_rate is None:
        return fallback
    alone = scenario_values(s, 1, layout, [1.0, None])
    shares = load_shares(alone[0], alone[1], tokens, s.resume_rate, s.gpu_resume_rate)
    return fallback if shares["saturated"] else shares["loads"]


def variant_bandwidth(s, tokens, layout, fallback):
    """The per-GPU reload bandwidth (B/s) of scenario ``s`` (one of the band's engine variants),
    at its own sharing of the stated load (:func:`variant_loads`)."""
    loads = variant_loads(s, tokens, layout, fallback)
    return scenario_values(s, 1, layout, loads)[0]["B"]


def band(s, tokens, limits):
    """Scenario ``s``'s comparison at ``tokens`` plus its range: recompute and reload times at the ends of their bands,
    whether the verdict flips inside them. ``limits``: the measured factors (by link, GPU and
    engine) and the known limits, kvmath.evaluate.bands.band_data.

    * Recompute, calibrated model: its held-out error either way, never faster than the ideal
      roofline; ideal model: down to the lowest measured/predicted speed of dense prefill rows.
    * Reload: the binding hop's measured spread, never above its spec rate; the fast end with
      nothing else offloading and a batched call's copies; the slow end the driver copies a copy
      kernel replaced; an engine with fitted request costs widens it by their held-out error.
    * A borrowed prefill fit and a configuration validation rows show the model missing carry
      their misses; the reload's own step moves with the recompute's band; no end beats physics.
    """
    gpu = s.gpu
    tier = s.tier
    codec = s.codec
    nominal = compare(s, tokens)
    layout = Layout(tp=nominal["tp"], ep=nominal["ep"], dp_attention=nominal["dp_attention"],
                    weight_dtype=nominal["weight_dtype"], compute_dtype=nominal["compute_dtype"],
                    kv_dtype=nominal["kv_dtype"], reason=nominal["layout_from"])
    conc = nominal["concurrent_reloads"]  # at the load
    gpu_reloads = nominal["gpu_reloads"]
    sv = scenario_values(variant(s, s.engine), 1, layout, [conc, gpu_reloads])
    v = sv[0]
    hops = sv[1]
    eng = v["engine"]
    at = plain_values(v)
    # the tokens reloaded: a hybrid model's last state checkpoint (compare's tail aside)
    at["T"] = float(nominal.get("state_checkpoint_at_tokens", tokens))
    at["t_0"] = nominal["reload_fixed_s"]  # its step timed by the nominal prefill model
    fastest = nominal["reload_s"]  # the reload the engine-cost widening is taken around
    b_lo = None
    b_hi = None
    if len(hops) > 0:
        spread = reload_bandwidth_range(v, hops, limits)
        b_lo = spread[0]
        b_hi = spread[1]
        if codec is not None:  # in decoded bytes: decode after the slow end's transfer, and
            # overlapped with the fast end's (chunk by chunk, as a pipelined engine does)
            b_lo = coded_values(codec, tier, nominal["kv_dtype"], b_lo, False, gpu_reloads)["B"]
            b_hi = coded_values(codec, tier, nominal["kv_dtype"], b_hi, True, gpu_reloads)["B"]
        path = copy_path(eng, v["copy_bytes"], gpu.platform)[0]
        spread = path == "kernel" or path == "batched"  # copies with a measured spread
        if eng.writes_overlap or spread:  # the fast end: nothing else offloading meanwhile
            # (the host link without the duplex share other requests' writes leave), and the
            # copies at the fast end of their path's spread
            quiet = with_fields(eng, {"writes_overlap": False, "copy_end": "fast"})
            alone = variant_bandwidth(variant(s, quiet), tokens, layout, [conc, gpu_reloads])
            b_hi = max(b_hi, alone)
            fastest = min(fastest, float(formula("derive.t_reload", {**at, "B": alone})))
        if spread:  # the slow end of the copies' spread (a kernel's rate is an assumption)
            slow = with_fields(eng, {"copy_end": "slow"})
            b_lo = min(b_lo, variant_bandwidth(variant(s, slow), tokens, layout,
                                               [conc, gpu_reloads]))
        reload = [float(formula("derive.t_reload", {**at, "B": b_hi})),
                  float(formula("derive.t_reload", {**at, "B": b_lo}))]
    else:  # a prefix still in HBM moves nothing: its reload is the engine step alone
        reload = [nominal["reload_s"], nominal["reload_s"]]
    own_fit = gpu.name not in limits["borrowed_fit_gpus"]
    if nominal["prefill_model"] == "calibrated":
        e = limits["calibrated_error"].get(gpu.name, limits["calibrated_error_default"])
        ideal = float(formula("derive.t_recompute", at))
        # never faster than the ideal roofline, except where the calibrated model is already
        # below it (an MoE prompt too short to touch every expert the roofline reads)
        floor = min(ideal, nominal["recompute_s"])
        lo = 1 - e
        hi = 1 + e
        if not own_fit:  # a borrowed fit: as wrong as it was on the GPUs it was held against
            f = limits["borrowed_fit_factor"]
            lo = min(lo, 1 / f)
            hi = max(hi, f)
        recompute = [max(nominal["recompute_s"] * lo, floor), nominal["recompute_s"] * hi]
    else:
        recompute = [nominal["recompute_s"], nominal["recompute_s"] / limits["efficiency_low"]]
    # a configuration the model is known to miss carries that miss: the failing row's
    # measured/predicted widens its side's band
    missed = known_limits(s, nominal, limits)
    # a batch-1 decode row is a one-token forward: it speaks for a one-token turn's step only
    step_ratios = [k["ratio"] for k in missed if k["quantity"] == "decode_step_s"
                   and nominal["new_tokens"] == 1]
    for k in missed:  # ratio: measured / predicted
        if k["quantity"] == "decode_step_s":  # the reload's own step, below
            continue
        if k["quantity"] == "ttft_reload_s":
            reload = [min(reload[0], nominal["reload_s"] * k["ratio"]),
                      max(reload[1], nominal["reload_s"] * k["ratio"])]
        else:
            recompute = [min(recompute[0], nominal["recompute_s"] * k["ratio"]),
                         max(recompute[1], nominal["recompute_s"] * k["ratio"])]
    f = limits["engine_cost_factor"].get(nominal["engine"], 1.0)  # the fitted request costs'
    # held-out error
    reload = [min(reload[0], fastest / f), max(reload[1], nominal["reload_s"] * f)]
    # the reload's own step is a forward pass priced by the same prefill model: it moves with
    # the recompute's band
    step = nominal["reload_fixed_s"] - nominal["reload_latency_s"]
    step_lo = step * recompute[0] / nominal["recompute_s"]
    step_hi = step * recompute[1] / nominal["recompute_s"]
    # a one-token forward the model is known to miss (a failing batch-1 decode row) carries it
    step_lo = min([step_lo] + [step * x for x in step_ratios])
    step_hi = max([step_hi] + [step * x for x in step_ratios])
    reload = [reload[0] - (step - step_lo), reload[1] + (step_hi - step)]
    # no widening beats physics: the latency, the step at its band's low end and every hop at
    # its spec rate
    reload[0] = max(reload[0], min(reload_floor(nominal, step_lo), nominal["reload_s"]))
    # the verdict compares times to first token: each band shifted by what the TTFT adds to
    # its part (the request's costs; the recompute of the new tokens on the cold side)
    cold_add = nominal["ttft_recompute_s"] - nominal["recompute_s"]
    hit_add = nominal["ttft_reload_s"] - nominal["reload_s"]
    ttft_recompute = [x + cold_add for x in recompute]
    # what a layer-by-layer load hides under the step, at each end's own load and step (the
    # nominal's hidden part is in hit_add): min(load, step)(1 - 1/L)
    hidden = nominal["overlap_hidden_s"]
    ends = [hidden, hidden]
    if len(hops) > 0 and v["o_lay"]:
        kv = nominal["kv_bytes_per_gpu"]
        layers = v["L_full"] + v["L_win"] + v["L_chunk"]
        ends = [v["o_lay"] * min(kv / b_hi, step_lo) * (1 - 1 / layers),
                v["o_lay"] * min(kv / b_lo, step_hi) * (1 - 1 / layers)]
    ttft_reload = [reload[0] + hit_add + hidden - ends[0], reload[1] + hit_add + hidden - ends[1]]
    winners = [nominal["winner"]]
    for rc in ttft_recompute:
        for rl in ttft_reload:
            w = "reload" if rl < rc else "recompute"
            if w not in winners:
                winners.append(w)
    return {"nominal": nominal, "recompute_s": recompute, "reload_s": reload,
            "ttft_recompute_s": ttft_recompute, "ttft_reload_s": ttft_reload,
            "reload_bandwidth_Bps": [b_lo, b_hi], "flips": len(winners) > 1,
            "binding_hop": binding_hop(v, hops, limits).link if len(hops) > 0 else None,
            "prefill_fit_own": own_fit, "known_limits": [k["id"] for k in missed]}

