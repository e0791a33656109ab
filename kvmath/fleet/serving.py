"""A fleet's requests served step by step: the inputs of the compiled loop
(:func:`kvmath.traces.simulate.serve.simulate`) built from a scenario and a trace
(:func:`serving_setup`: each replica's engine, step-time tables and KV capacity, the tiers below
HBM, the router and its parameters; :func:`workload`: an open loop of the trace's arrivals, its
load scaled, or a closed loop of users), and the loop run (:func:`serve`), whose answer
:mod:`kvmath.fleet.metrics` summarises.

The unit a router picks is a **replica**: an engine instance on ``layout.gpus`` GPUs of a node
(``node.gpus // layout.gpus`` of them a node); the replicas of a node share its host DRAM and
drives (the tiers below HBM), and a pool below every node. A replica holds ``kv_capacity`` tokens
of KV in HBM: the option's, else what the node's HBM leaves after the weights and the activation
reserve at the scheduler's ``gpu_memory_utilization``
(:func:`kvmath.node.capacities.node_capacities` with no running batch), split over its replicas.
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from kvmath.logic.runtime import ScenarioError


class Setup(NamedTuple):
    """Everything the loop needs but the requests, for one fleet size."""
    engine: object  #: :class:`kvmath.traces.simulate.engine.Engine`
    steps: object  #: :class:`kvmath.traces.simulate.engine.Steps`
    tiers: object  #: :class:`kvmath.traces.simulate.engine.Tiers`
    route: tuple  #: (router name, {parameter: value})
    info: dict  #: what the answer states: the layout, capacities, scheduler, prefill model


def scheduler_of(s, gpu):
    """(profile, tokens a step, running requests at most) of scenario ``s`` on ``gpu``: the
    profile's defaults (:mod:`kvmath.scenario.schedulers`), the options in their place."""
    from kvmath.scenario.schedulers import DEFAULT, profile
    p = profile(s.scheduler or DEFAULT)
    budget, seqs = p.budget(gpu)
    return p, int(s.max_num_batched_tokens or budget), int(s.max_num_seqs or seqs)


def kv_per_token(model, gpu, layout, bt):
    """(HBM bytes one token of KV takes on a replica, every rank's copy; bytes a block of
    ``bt`` tokens takes in the tiers below)."""
    from kvmath.evaluate.api import compare_at
    from kvmath.tables.rows import resolve_tier
    r = compare_at(model, gpu, resolve_tier("host-dram"), max(bt, 2), tp=layout.tp,
                   kv_dtype=layout.kv_dtype)
    return r["kv_bytes_per_token"] * r["kv_replication"], \
        r["kv_bytes_per_token"] * bt * r["kv_stored_copies"]


def serving_setup(s, trace, nodes, specs, block_bytes, cost, **kw):
    """The :class:`Setup` of scenario ``s`` (its node, layout TP, engine, scheduler options,
    router and its ``router_param`` s) serving ``trace`` on ``nodes`` nodes whose tiers below
    HBM are ``specs[1:]`` (:func:`kvmath.fleet.nodes.node_setup`; a pool last, shared by the
    fleet), ``block_bytes`` a block there, priced by ``cost`` (a
    :class:`~kvmath.traces.replay.HitCost`). kw: writes ("back" or
    "through"), pool_writes. A layout that leaves a replica no KV is refused in words."""
    from kvmath.evaluate.api import choose_layout
    from kvmath.evaluate.steps import step_tables
    from kvmath.fleet.routers import parameters, router
    from kvmath.node.capacities import node_capacities
    from kvmath.scenario.schedulers import SGLANG_CLIP, SGLANG_RATIO
    from kvmath.tables.rows import bundled
    from kvmath.traces.simulate.engine import Engine, Steps, Tiers
    model, node = s.model, s.node
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    layout = choose_layout(model, gpu, tp=s.tp, ep=s.ep, kv_dtype=s.kv_dtype,
                           compute_dtype=s.compute_dtype, check_fit=False)
    per_node = node.gpus // layout.gpus
    if per_node < 1:
        raise ScenarioError(f"a replica of {model.name} takes {layout.gpus} GPUs: more than node "
                            f"{node.name}'s {node.gpus}")
    prof, budget, seqs = scheduler_of(s, gpu)
    bt = int(trace.block_tokens)
    per_tok, _ = kv_per_token(model, gpu, layout, bt)
    util = s.gpu_memory_utilization or prof.gpu_memory_utilization
    if s.kv_capacity:
        kv_cap, kv_from = int(s.kv_capacity), "--kv-capacity"
    else:
        nc = node_capacities(node, model, gpu=gpu, tp=layout.tp, batch_seqs=0,
                             compute_dtype=layout.compute_dtype, gpu_memory_utilization=util)
        free = nc["hbm_free_bytes"]
        if free <= 0:
            raise ScenarioError(
                f"{model.name} at TP {layout.tp} on {gpu.name} does not fit: its weights and "
                f"activation reserve take all of the {util:.0%} of HBM the engine uses "
                f"(--gpu-memory-utilization), leaving no KV; give a larger --tp")
        kv_cap = int(free / per_node / per_tok)
        kv_from = f"HBM at gpu_memory_utilization {util:g} after the weights"
    if kv_cap < bt:
        raise ScenarioError(f"a replica of {model.name} at TP {layout.tp} on {gpu.name} holds "
                            f"{kv_cap:,} tokens of KV, less than one {bt}-token block; give a "
                            "larger --tp or --gpu-memory-utilization")
    nmax = int(trace.n_blocks.max()) if trace.n_requests else 1
    ctx = int(min(model.max_context_tokens,
                  int(np.max(trace.prompt_tokens + trace.output_tokens)) + 1))
    lin, floor, attn, kvread, grid, pmodel = step_tables(
        model, gpu, layout, budget + seqs, ctx, engine=s.engine)
    ratio0, factor, steps_ = SGLANG_RATIO
    engine = Engine(policy=0 if prof.policy == "vllm" else 1, budget=budget, max_seqs=seqs,
                    kv_cap=kv_cap, full_isl=prof.full_isl,
                    load_overlap=bool(s.engine is not None and s.engine.layer_overlap
                                      and prof.policy == "sglang"),
                    ratio_init=ratio0, ratio_min=ratio0 * factor,
                    ratio_decay=(ratio0 - ratio0 * factor) / steps_, clip_new=SGLANG_CLIP)
    # the tiers below HBM: block capacities per node and the reload of j blocks from each
    below = [sp for sp in specs[1:] if not sp.name.startswith("pool:")]
    pool = [sp for sp in specs[1:] if sp.name.startswith("pool:")]
    blk = [sp.block_bytes or block_bytes for sp in specs]
    caps = np.array([int(sp.capacity_bytes // (sp.block_bytes or block_bytes)) for sp in below],
                    np.int64)
    _, reload_blk = cost._block_tables(bt, nmax)
    reload = np.vstack([reload_blk[i] for i in range(1, len(specs))]
                       or [np.zeros(nmax + 1)]) if len(specs) > 1 else np.zeros((1, nmax + 1))
    tiers = Tiers(replicas=nodes * per_node, per_node=per_node, nodes=nodes, bt=bt, cap=caps,
                  pool_cap=int(pool[0].capacity_bytes // blk[-1]) if pool else 0,
                  through=kw.get("writes", "back") == "through",
                  pool_back=kw.get("pool_writes", "through") == "back", reload=reload)
    name = router(s.router).name
    params = parameters(name, s.router_param)
    info = {"scheduler": prof.name, "scheduler_source": prof.source,
            "max_num_batched_tokens": budget, "max_num_seqs": seqs,
            "kv_capacity_tokens": kv_cap, "kv_capacity_from": kv_from,
            "gpu_memory_utilization": None if s.kv_capacity else util,
            "replicas_per_node": per_node, "gpus_per_replica": layout.gpus, "tp": layout.tp,
            "ep": layout.ep, "dp_attention": layout.dp_attention, "kv_dtype": layout.kv_dtype,
            "prefill_model": pmodel, "router": name, "router_params": params,
            "block_tokens": bt, "max_context": int(model.max_context_tokens)}
    return Setup(engine, Steps(lin, floor, attn, kvread, float(grid)), tiers, (name, params),
                 info)


class Workload(NamedTuple):
    """Where the arrivals come from: an open loop at the trace's times over ``rate_scale``, or a
    closed loop of ``users`` each sending a session's turns (the trace's chains of turns) a
    ``think_s`` after the last answer (exponential with that mean when ``think_exp``); or a
    load ladder of stages, each starting once the one before is answered and over."""
    rate_scale: float = 1.0
    users: int = 0
    think_s: float = 0.0
    think_exp: bool = False
    #: a load ladder as inference-perf sends it: each request's stage (the trace's times then
    #: from its stage's start), each stage's duration, the pause between stages
    stage: tuple | None = None
    stage_dur: tuple | None = None
    interval_s: float = 1.0


def route_record(name, params, setup_tiers, trace, parent, seed):
    """The compiled loop's :class:`~kvmath.traces.simulate.serve.Route` for router ``name``."""
    from kvmath.fleet.routers import router
    from kvmath.traces.simulate.serve import Route
    r = router(name)
    w = np.zeros(8)
    for i, p in enumerate(r.params):
        w[i] = params[p.name]
    bt, R = setup_tiers.bt, setup_tiers.replicas
    idx_cap = idx_match = 0
    if r.index is not None:
        idx_cap = max(int(params[r.index[0]] // bt), 1)
        idx_match = max(int(params[r.index[1]] // bt), 1) if r.index[1] else 1 << 40
    n = trace.n_requests
    key = np.zeros(1, np.uint64)
    ring, owner = np.zeros(1, np.uint64), np.zeros(1, np.int64)
    if name == "chwbl":
        key = _keys(trace, max(int(params["key_blocks"]), 1))
        reps = max(int(params["replication"]), 1)
        pts = _mix(np.repeat(np.arange(R, dtype=np.uint64), reps) * np.uint64(1 << 20)
                   + np.tile(np.arange(reps, dtype=np.uint64), R) + np.uint64(seed))
        order = np.argsort(pts, kind="stable")
        ring, owner = pts[order], np.repeat(np.arange(R, dtype=np.int64), reps)[order]
    par = np.asarray(parent, np.int64) if name == "affinity" else np.full(1, -1, np.int64)
    return Route(code=r.code, w=w, idx_cap=idx_cap, idx_match=min(idx_match, 1 << 40),
                 ring=ring, owner=owner, key=key if len(key) == n or n == 0 else key,
                 parent=par if len(par) == n else np.full(max(n, 1), -1, np.int64),
                 rng=np.array([0x9E3779B97F4A7C15 ^ (seed + 1)], np.uint64))


def _mix(x):
    """splitmix64 of each value (the ring's points and the requests' keys)."""
    x = np.asarray(x, np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _keys(trace, k):
    """Each request's consistent-hashing key: its first k block hashes mixed."""
    from kvmath.traces.trace import block_chunks
    out = np.zeros(trace.n_requests, np.uint64)
    for a, b, h in block_chunks(trace):
        nb = np.asarray(trace.n_blocks[a:b], np.int64)
        off = np.r_[0, np.cumsum(nb)[:-1]]
        acc = np.zeros(b - a, np.uint64)
        with np.errstate(over="ignore"):
            for j in range(k):
                has = nb > j
                idx = np.minimum(off + j, max(len(h) - 1, 0))
                v = np.where(has, h[idx] if len(h) else 0, 0).astype(np.uint64)
                acc = _mix(acc * np.uint64(31) + v)
        out[a:b] = acc
    return out


def serve(trace, hashes, setup, workload, parent=None, seed=0):
    """Run the fleet of ``setup`` over ``trace`` (its per-request columns; ``hashes`` its block
    hashes, head first, in memory or mapped from its file) under ``workload``; a dict of
    per-request arrays (sent, admitted, first, done, replica, status, hit and loaded blocks,
    preemptions), each replica's sums and what the loop held."""
    from kvmath.traces.simulate.engine import Reqs
    from kvmath.traces.simulate.serve import Load, simulate
    from kvmath.traces.statistics import continuations
    n = trace.n_requests
    prompt = np.asarray(trace.prompt_tokens, np.int64)
    output = np.maximum(np.asarray(trace.output_tokens, np.int64), 1)
    nb = np.asarray(trace.n_blocks, np.int64)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(nb, out=off[1:])
    name, params = setup.route
    needs_parent = name == "affinity" or workload.users > 0
    if parent is None and needs_parent:
        parent = continuations(trace)
    route = route_record(name, params, setup.tiers, trace,
                         parent if parent is not None else np.full(1, -1), seed)
    if workload.users > 0:
        parent = np.asarray(parent, np.int64)
        child = np.full(n, -1, np.int64)
        has = parent >= 0
        child[parent[has]] = np.flatnonzero(has)
        load = Load(ts=np.zeros(0), users=int(workload.users), think=float(workload.think_s),
                    think_exp=bool(workload.think_exp), heads=np.flatnonzero(~has).astype(np.int64),
                    child=child, rng=np.array([seed * 2 + 12345], np.uint64), **_no_stages())
    elif workload.stage is not None:
        stage = np.asarray(workload.stage, np.int64)
        dur = np.asarray(workload.stage_dur, np.float64)
        load = Load(ts=np.asarray(trace.timestamp_s, np.float64), users=0, think=0.0,
                    think_exp=False, heads=np.zeros(0, np.int64), child=np.zeros(0, np.int64),
                    rng=np.array([1], np.uint64), stage=stage, stage_dur=dur,
                    stage_left=np.bincount(stage, minlength=len(dur)).astype(np.int64),
                    stage_start=np.zeros(len(dur)), interval=float(workload.interval_s))
    else:
        ts = np.asarray(trace.timestamp_s, np.float64)
        ts = (ts - ts[0]) / float(workload.rate_scale) if n else ts
        load = Load(ts=ts, users=0, think=0.0, think_exp=False, heads=np.zeros(0, np.int64),
                    child=np.zeros(0, np.int64), rng=np.array([1], np.uint64), **_no_stages())
    refused = ((prompt + output > setup.engine.kv_cap)
               | (prompt + output > setup.info.get("max_context", np.iinfo(np.int64).max)))
    reqs = Reqs(prompt, output, nb, off, np.asarray(hashes, np.uint64))
    tm, replica, status, sums, peak = simulate(reqs, setup.engine, setup.steps, setup.tiers,
                                               route, load, refused.astype(np.int8))
    return {"sent": tm.sent, "admitted": tm.admitted, "first": tm.first, "done": tm.done,
            "hit_blocks": tm.hit, "loaded_blocks": tm.loaded, "preempted": tm.preempted,
            "replica": replica, "status": status, "refused": refused, "sums": sums,
            "store_entries": peak, "prompt": prompt, "output": output,
            "parent": parent}


def _no_stages():
    return {"stage": np.zeros(0, np.int64), "stage_dur": np.zeros(0),
            "stage_left": np.zeros(0, np.int64), "stage_start": np.zeros(0), "interval": 0.0}


def hashes_of(trace):
    """A trace's block hashes, head first: in memory, or mapped read-only from its file."""
    if hasattr(trace, "hashes_path"):
        if trace.n_accesses == 0:
            return np.zeros(0, np.uint64)
        return np.asarray(np.memmap(trace.hashes_path, dtype=np.uint64, mode="r"))
    return trace.hashes


def span_of(out):
    """(first send, last answer) of a served fleet, s."""
    done = out["done"][out["status"] == 4]
    if not len(done):
        return 0.0, 0.0
    return float(out["sent"].min()), float(done.max())


def layout_note(info):
    """One line on how each replica is laid out and scheduled."""
    return (f"{info['replicas_per_node']} replica(s) a node of {info['gpus_per_replica']} GPU(s), "
            f"TP {info['tp']}; {info['scheduler']}: {info['max_num_batched_tokens']:,} tokens a "
            f"step, at most {info['max_num_seqs']:,} running, "
            f"{info['kv_capacity_tokens']:,} tokens of KV ({info['kv_capacity_from']})")

