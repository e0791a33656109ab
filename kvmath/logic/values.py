"""A scenario's values: every substitution value a comparison needs at a load (the layout's,
the engine's copy sizes and request costs, the path's rate and latency, the reloads sharing each
hop), and the load a stated resume rate puts on the path's hops.

Every function here takes the scenario record (:class:`kvmath.scenario.record.Scenario`: the
rows it names and its options) and what varies: the prompt's tokens, the layout, the reloads in
flight.
"""
from __future__ import annotations

import math

from kvmath.logic.layout import choose_layout, default_concurrency, deployment_values
from kvmath.logic.path import (check_tier_gpu, coded_values, hop_copies, path_values,
                               state_path_rate)
from kvmath.logic.rules import (check_kv_dtype, copies_span_layers, engine_of, latent,
                                reads_once, request_cost_values, round_up, stores_once)
from kvmath.logic.runtime import DATA, ScenarioError, formula


def scenario_values(s, tokens=1, layout=None, loads=None, check_fit=False):
    """[values, hops]: every substitution value of scenario ``s`` except T (the layout, the
    engine row and the host-link copy's bytes under "layout", "engine", "copy_bytes"), and the
    path's hops.

    layout None: the scenario's (:func:`kvmath.logic.layout.choose_layout`), holding ``s.batch``
    prompts of ``tokens`` tokens, checked to fit when ``check_fit``. loads: [replicas reloading
    at once through the node's shared hops, reloads one replica has in flight on its own per-GPU
    hops] (None, or an entry None: the scenario's concurrent_reloads, else every replica; 1).
    A codec row the KV travels encoded in makes B the rate in decoded bytes
    (kvmath.derive.kv.B_coded), B_wire the path's own.
    """
    model = s.model
    gpu = s.gpu
    tier = s.tier
    check_tier_gpu(tier, gpu)
    eng = engine_of(s)
    if layout is None:
        layout = choose_layout(s, tokens, None, check_fit)
    check_kv_dtype(gpu, layout.kv_dtype)
    v = deployment_values(s, layout)
    conc = s.concurrent_reloads
    gpu_reloads = None
    if loads is not None:
        conc = loads[0]
        gpu_reloads = loads[1]
    v["n_c"] = float(conc) if conc is not None else default_concurrency(gpu, layout.tp, s.own)
    v["n_g"] = float(gpu_reloads) if gpu_reloads is not None else 1.0
    once = reads_once(eng, model)
    stored = stores_once(eng, model, layout.tp, v["N_node"], gpu.platform)
    v["rho_n"] = 1.0 if once else v["rho"]  # host memory's copies (hop_copies per hop)
    v["rho_s"] = 1.0 if stored or once else v["rho"]  # copies a stored cache holds
    copy = None
    if eng.copy_tokens is not None:
        spans = copies_span_layers(eng, v)
        # a copy of one layer in vLLM's per-layer layout carries K and V apart (an engine that
        # packs layers falls back to it for a hybrid); a latent is one tensor per layer
        split = (eng.kv_split or (eng.copy_spans_layers == "uniform" and not spans)) \
            and not latent(model)
        v["c_tok"] = eng.copy_tokens
        v["c_split"] = 2.0 if split else 1.0
        v["c_lay"] = float(v["L_full"] + v["L_win"] + v["L_chunk"]) if spans else 1.0
        copy = float(formula("derive.copy_bytes", v))
    path = path_values(tier, gpu, eng, {"K": layout.tp, "rho": v["rho"], "n_c": v["n_c"],
                                        "n_g": v["n_g"], "N_node": v["N_node"], "own": s.own,
                                        "copy_bytes": copy, "read_once": once,
                                        "stored_once": stored})
    hops = path[2]
    v["B"] = path[0]
    v["t_lat"] = path[1]
    v["B_state"] = state_path_rate(hops, v["N_node"], layout.tp, v["n_c"], v["n_g"])
    v["hop_copies"] = [hop_copies(h, v["rho"], once, stored) if h.scope == "per-node" else None
                       for h in hops]
    v.update(request_cost_values(eng, tier, s.token_ids))
    v["n"] = float(s.new_tokens)
    v["n_step"] = eng.request_steps
    # an engine loading layer by layer under its step does so from host memory (its L2): a
    # drive's or a NIC's read is prefetched into host memory first, so it hides nothing
    host_only = len(tier.hops) > 0 and all([
        h.link == DATA.gpu_host_link or h.link == DATA.gpu_host_memory for h in tier.hops])
    v["o_lay"] = 1.0 if eng.layer_overlap and host_only else 0.0
    v["t_step"] = float(formula("derive.t_step_ideal", v))  # compare re-times it with its prefill
    v["t_0"] = float(formula("derive.fixed_cost", v))
    if s.bandwidth_Bps is not None:
        v["B"] = s.bandwidth_Bps
        v["B_state"] = s.bandwidth_Bps
    if s.codec is not None:
        v.update(coded_values(s.codec, tier, layout.kv_dtype, v["B"], None, v["n_g"]))
    v["copy_bytes"] = copy
    v["layout"] = layout
    v["engine"] = eng
    return [v, hops]


def plain_values(v):
    """A scenario's values without its layout, engine and copy size (numbers and lists only)."""
    return {k: v[k] for k in v if k != "layout" and k != "engine" and k != "copy_bytes"}


def load_shares(values, hops, tokens, resume_rate, gpu_rate=None):
    """{saturated, utilisation, hop, hold_s, loads}: the busiest hop at the load and
    loads = [reloads sharing the node's busiest shared hop, reloads sharing one replica's own per-GPU
    hops] as one arrives, when resume_rate reloads per second arrive at the node (spread over its
    replicas): concurrent_reloads_at_load on the node hop whose one-reload time is longest (1
    when the path has none), gpu_reloads_at_load on the replica's narrowest per-GPU hop (1 when
    none). gpu_rate: the reloads per second that cross the replicas' own links, where they
    differ from those through the node's hops (the tier plan: a tier's offload writes load its
    node hops, and every tier's reads the GPUs' links; None: resume_rate). A codec's decoding
    is the GPU's own work: it joins the per-GPU hops (the coded rate of the narrowest link and
    the decoder). The queue is processor sharing (an assumption: in-flight reloads share each
    hop evenly, M/G/1-PS, the time of 1 / (1 - u) equal sharers). saturated: a hop's
    utilisation is at or above 1 (no loads then)."""
    if not (resume_rate > 0 and math.isfinite(resume_rate)):
        raise ScenarioError(f"--resume-rate must be a positive number, got {resume_rate}")
    at = {**values, "T": float(tokens), "r": float(resume_rate)}
    worst = 0.0
    name = None
    hold = 0.0
    busiest = None
    for i, h in enumerate(hops):
        c = values["hop_copies"][i]
        if c is None:
            continue
        # a codec's hop carries 1/r_c of the bytes: its rate in decoded bytes is r_c times
        hop_at = {**at, "rho_n": c, "B_node": h.effective_Bps * values.get("r_c", 1.0)}
        u = float(formula("derive.hop_utilisation", hop_at))
        if u > worst:
            worst = u
            name = h.link
            hold = float(formula("derive.t_node_hop_alone", hop_at))
            busiest = hop_at
    gpu_hops = [h for h in hops if h.scope == "per-gpu"]
    narrow = min(gpu_hops, key=lambda h: h.effective_Bps, default=None)
    gpu_at = None
    if narrow is not None:
        rate = resume_rate if gpu_rate is None else gpu_rate
        b_gpu = narrow.effective_Bps
        if "B_dec" in values:  # the wire's encoded bytes, then the GPU decoding them
            b_gpu = float(formula("derive.B_coded_pipelined" if values["codec_pipelined"]
                                  else "derive.B_coded",
                                  {"B_wire": b_gpu, "r_c": values["r_c"],
                                   "B_dec": values["B_dec"]}))
        gpu_at = {**at, "r": float(rate), "B_gpu": b_gpu}
        u = float(formula("derive.gpu_hop_utilisation", gpu_at))
        if u > worst:
            worst = u
            name = narrow.link + (" and the GPU's decoder" if "B_dec" in values else "") + \
                " (each replica's own)"
            hold = float(formula("derive.t_gpu_hop_alone", gpu_at))
    if worst >= 1:
        return {"saturated": True, "utilisation": worst, "hop": name, "hold_s": hold}
    node = 1.0 if busiest is None else float(formula("derive.concurrent_reloads_at_load", busiest))
    own_links = 1.0 if gpu_at is None else float(formula("derive.gpu_reloads_at_load", gpu_at))
    return {"saturated": False, "utilisation": worst, "hop": name, "hold_s": hold,
            "loads": [node, own_links]}


def concurrent_at_load(values, hops, tokens, resume_rate, gpu_rate=None):
    """[node, per-GPU] reloads in flight at the load (:func:`load_shares`); ScenarioError when
    the load saturates a hop, naming it, the time one reload holds it and the most that fit."""
    shares = load_shares(values, hops, tokens, resume_rate, gpu_rate)
    if shares["saturated"]:
        raise ScenarioError(f"--resume-rate {resume_rate:g}/s saturates {shares['hop']}: each "
                            f"reload holds it for {shares['hold_s']:.3g} s, so fewer than "
                            f"{round_up(resume_rate / shares['utilisation']):.4g} reloads per "
                            "second fit at the node")
    return shares["loads"]




def load_values(s, tokens):
    """[[values, hops] at the stated load, [values, hops] of one reload alone or None]: the
    scenario as compare evaluates it at ``tokens``, its layout holding the prefix and the new
    turn. At a resume rate the reloads in flight on the shared hops follow from the load
    (:func:`concurrent_at_load`, from the reload alone); else as given, or every replica."""
    alone = None
    loads = None
    fit_tokens = tokens + s.new_tokens - 1
    if s.resume_rate is not None:
        alone = scenario_values(s, fit_tokens, None, [1.0, None], True)
        loads = concurrent_at_load(alone[0], alone[1], tokens, s.resume_rate, s.gpu_resume_rate)
    return [scenario_values(s, fit_tokens, None, loads, True), alone]
