"""The capacity (B) and read and write rates (B/s, node totals) of a node's tiers: HBM after the
weights, the activation reserve and the running batch; then each tier kind a node holds
(:mod:`kvmath.tiers.kinds`: its ``holds``, capped by the engine's own cache setting, at its
``rates``); then a pool below them. The one source for the node plan
(:func:`kvmath.node.plan.tier_plan`) and the trace replay (:func:`kvmath.traces.replay.node_tiers`).
"""
from __future__ import annotations

from kvmath.evaluate.api import (ScenarioError, architecture_values, choose_layout,
                                 node_layout_tp, path_values)
from kvmath.evaluate.reuse import compared, rfn
from kvmath.logic.path import node_tier
from kvmath.tables.rows import bundled, node_drive, plan_defaults
from kvmath.tiers.build import pool_tier
from kvmath.tiers.kinds import KINDS
from kvmath.tiers.records import Tier


def planned_kinds():
    """The tier kinds a node's plan holds caches in, youngest caches first."""
    return sorted((k for k in KINDS.values() if k.plan is not None), key=lambda k: k.plan)


def drive_rates(node, gpu, drive):
    """(read, write) rate of a node's drive tier, B/s: its drives striped (their own rates,
    drives.csv, at their link's efficiency), then host DRAM and the GPUs' host links
    (node-shared hops split over the node's GPUs)."""
    cat = bundled()
    base = cat.tiers["nvme"]
    drive_link = cat.links[node.nvme_drive_link]
    rest = Tier("nvme-path", "", tuple(h for h in base.hops if h.link != base.hops[0].link),
                kind=base.kind)
    rest_bw = path_values(rest, gpu, node.gpus)[0] * node.gpus
    per_drive = (drive.read_Bps, drive.write_Bps) if drive else (drive_link.bandwidth_Bps,) * 2
    eff = drive_link.efficiency
    return tuple(min(rest_bw, node.nvme_drives * b * eff) for b in per_drive)


def hbm_tier_capacity(node, gpu, model, hbm):
    """HBM the paused caches may use (B; negative when the running batch does not fit), from
    ``hbm``: {tp, utilisation, reserve, batch_seqs, batch_kv_bytes (one running sequence's KV),
    weight_dtype (None: the model's)}."""
    return float(rfn("hbm_tier_bytes").take({
        "N_gpus": node.gpus, "C_hbm": gpu.hbm_capacity_bytes, "u_hbm": hbm["utilisation"],
        "a_act": hbm["reserve"], "W_bytes": weights_bytes(model, hbm.get("weight_dtype")),
        "K": hbm["tp"], "n_batch": hbm["batch_seqs"], "Q_batch": hbm["batch_kv_bytes"]}))


def cache_cap(wanted, held, words, node, source=None):
    """The bytes an engine caches in a medium: what its settings give (None: all the node
    holds), refused when beyond what the node holds, naming where the size came from; words:
    (what, medium), as a kind's cache declares them."""
    if wanted is None:
        return float(held)
    if wanted > held * (1 + 1e-12):
        raise ScenarioError(f"{source + ': ' if source else ''}the engine's {words[0]} of "
                            f"{wanted:.4g} B exceeds node {node.name}'s {words[1]} of {held:.4g} B")
    return float(wanted)


def weights_bytes(model, weight_dtype=None):
    """The model's weights in ``weight_dtype`` (default: its own), B."""
    v = architecture_values(model, weight_dtype=weight_dtype)
    return v["N_tot"] * v["b_w"]


def node_capacities(node, model, gpu=None, tp=None, compute_dtype=None, batch_seqs=None,
                    batch_context=None, gpu_memory_utilization=None, activation_reserve=None,
                    writes_within_rating=False, host_cache_bytes=None, disk_cache_bytes=None,
                    host_cache_hbm_ratio=None, cache_source=None, pool=None, pool_nodes=None,
                    kv_dtype=None):
    """Capacity (B) and read/write bandwidth (B/s, node totals) of a node's KV tiers, the one
    source for both the analytic plan (:func:`tier_plan`) and the trace replay
    (:func:`kvmath.traces.replay.node_tiers`).

    HBM: what :func:`hbm_tier_capacity` leaves after the activation reserve, the weights and
    the running batch (batch_seqs sequences of batch_context tokens; defaults in
    plan_defaults.csv), moved at the GPUs' HBM bandwidth. Then each kind the node holds, by its
    declaration (:func:`planned_kinds`): host memory, the node's DRAM over the host-dram path;
    its drives, read and write rates from drives.csv (capped by the host path), and with
    writes_within_rating the write rate capped at the drives' rated drive writes per day.

    The engine's own sizes (``--engine-config``, ``--host-cache-bytes``, ``--disk-cache-bytes``,
    node totals in B) cap the host DRAM and the drives it caches KV in; ``disk_cache_bytes``
    0 means no NVMe tier; ``host_cache_hbm_ratio`` sizes host DRAM as that multiple of the
    HBM left for KV with no running batch (SGLang's --hicache-ratio). A size beyond what the
    node holds is refused.

    pool: a :class:`~kvmath.tables.rows.Pool` shared by ``pool_nodes`` GPU nodes (default its
    row's gpu_nodes): the node's share, 1/pool_nodes of its capacity and of its servers' media
    and NICs, over the pool's path (:func:`~kvmath.tables.rows.pool_tier`); writes are ASSUMED
    to run at the read path's rate over its replicas; a pool of the nodes' own DRAM takes its
    share from the node's host-DRAM tier.
    """
    cat = bundled()
    gpu = gpu or cat.gpus[node.gpu]
    if tp is None and not batch_context:
        raise ScenarioError("a node's TP by default holds one running sequence's context: give "
                            "tp or batch_context")
    tp = tp or node_layout_tp(model, node, batch_context, gpu=gpu, compute_dtype=compute_dtype,
                             batch_seqs=batch_seqs, batch_context=batch_context)
    if tp > node.gpus:
        raise ScenarioError(f"--tp {tp} exceeds the node's {node.gpus} GPUs")
    d = plan_defaults()
    util = gpu_memory_utilization or d["gpu_memory_utilization"].value
    reserve = d["activation_reserve_fraction"].value if activation_reserve is None \
        else activation_reserve
    batch_seqs = d["batch_seqs"].value if batch_seqs is None else batch_seqs
    if batch_seqs and not batch_context:
        raise ScenarioError("a running batch needs its context length (batch_context tokens)")
    if batch_seqs and batch_context < 2:
        raise ScenarioError(f"--batch-context must be at least 2 tokens, got {batch_context:,}: "
                            "a running sequence holds its prompt and the token it decodes")
    if batch_seqs and batch_context > model.max_context_tokens:
        raise ScenarioError(f"--batch-context {batch_context:,} exceeds {model.name}'s context "
                            f"window of {model.max_context_tokens:,} tokens: no running "
                            "sequence is that long")
    drive = node_drive(node)
    q_batch = (compared(model, gpu, cat.tiers["host-dram"], batch_context, tp,
                        compute_dtype, kv_dtype=kv_dtype)["kv_bytes"] if batch_seqs else 0.0)
    weight_dtype = choose_layout(model, gpu, tp=tp, compute_dtype=compute_dtype,
                                 check_fit=False).weight_dtype
    hbm_at = {"tp": tp, "utilisation": util, "reserve": reserve, "batch_seqs": batch_seqs,
              "batch_kv_bytes": q_batch, "weight_dtype": weight_dtype}
    hbm = hbm_tier_capacity(node, gpu, model, hbm_at)
    hbm_bw = gpu.hbm_bandwidth_Bps * node.gpus
    if host_cache_hbm_ratio is not None:  # the host pool as a multiple of the device KV pool
        kv_pool = hbm_tier_capacity(node, gpu, model, {**hbm_at, "batch_seqs": 0,
                                                       "batch_kv_bytes": 0.0})
        host_cache_bytes = host_cache_hbm_ratio * max(kv_pool, 0.0)
    sizes = {"host_cache_bytes": host_cache_bytes, "disk_cache_bytes": disk_cache_bytes}
    # where each size came from
    source = dict(zip(("host_cache_bytes", "disk_cache_bytes"), cache_source or (None, None)))
    given = 0.0 if pool is None or not pool.on_gpu_nodes else pool.storage_node_bytes
    if pool is not None:  # a pool the node cannot hold or reach: the shared rule's one line
        node_tier(node, pool_tier(pool, pool_nodes or pool.gpu_nodes))
    tiers = {"hbm": {"capacity_bytes": max(hbm, 0.0), "read_Bps": hbm_bw, "write_Bps": hbm_bw}}
    for k in planned_kinds():
        if k.holds is None:  # sized by the plan itself: HBM above, a pool below
            continue
        # a pool of the nodes' own DRAM takes its share from the node's host-DRAM tier
        held = k.holds(node) - (given if k.host_dram else 0.0)
        wanted = sizes.get(k.cache[0]) if k.cache else None
        if not k.holds(node) > 0:  # the node has none of it (no drives)
            if wanted:
                raise ScenarioError(f"a {k.cache[1]} of {wanted:.4g} B on node {node.name}, "
                                    f"which has no {k.cache[-1]}")
            continue
        if wanted == 0:  # the engine caches nothing there (--disk-cache-bytes 0)
            continue
        cap = cache_cap(wanted, held, k.cache[1:3] if k.cache else (k.name, k.name), node,
                        source.get(k.cache[0]) if k.cache else None)
        if k.rates == "drives":
            read, write = drive_rates(node, gpu, drive)
            if writes_within_rating and drive:  # admit only what the rating allows
                write = min(write, float(rfn("endurance_write_budget").take({
                    "DWPD_rated": drive.drive_writes_per_day, "n_drives": node.nvme_drives,
                    "C_drive": node.nvme_drive_bytes})))
        else:
            read = write = path_values(node_tier(node, cat.tiers[k.plan_tier]), gpu,
                                       node.gpus)[0] * node.gpus
        tiers[k.plan_tier] = {"capacity_bytes": cap, "read_Bps": read, "write_Bps": write,
                              "kind": k.name}
    tiers["hbm"]["kind"] = "hbm"
    if pool is not None:
        n = pool_nodes or pool.gpu_nodes
        bw = path_values(pool_tier(pool, n), gpu, node.gpus)[0] * node.gpus
        # writes: at the read path's rate (the servers' NICs bound both, an ASSUMPTION), over
        # the servers each chunk's copies cross
        tiers["pool"] = {"capacity_bytes": pool.capacity(n) / n, "read_Bps": bw,
                         "write_Bps": bw / pool.replicas, "path": pool_tier(pool, n),
                         "pool_nodes": n, "kind": "pool"}
    return {"tiers": tiers, "drive": drive, "gpu": gpu, "tp": tp, "hbm_free_bytes": hbm,
            "gpu_memory_utilization": util, "activation_reserve_fraction": reserve,
            "batch_seqs": batch_seqs, "batch_context_tokens": batch_context,
            "batch_seq_kv_bytes": q_batch}


