"""Numbers for the reuse condition and the tier design (lambdified :mod:`kvmath.derive.reuse`).

Money is in US dollars from ``kvmath/data/prices.csv``; capacity is priced as capex
amortised over the months in that table. Pause distributions come from
``kvmath/data/pauses.csv``.
"""
from __future__ import annotations

import copy
import datetime
import math
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from kvmath.logic import reuse as logic
from kvmath.logic.path import node_tier
from kvmath.evaluate.api import (ScenarioError, choose_layout, compare, min_tp, node_nvme_tier,
                                     node_tp, numeric_of, path_values)
# the reuse condition's rules, one implementation for the command line and the calculator
from kvmath.logic.reuse import KEEP_HORIZON_S, best_ttl, breakeven_p, new_fraction, pause_values, saved_s
from kvmath.tables.rows import Tier, bundled, gpu_prices, prices
from kvmath.tables.rows import node_drive, plan_defaults, pool_tier

#: which price prices a tier's capacity
TIER_MEDIUM = {"host-dram": "ddr5", "rdma": "ddr5"}  # other tiers' names start with nvme


def rfn(name):
    """The lambdified version of ``kvmath.derive.reuse.<name>``."""
    return numeric_of("kvmath.derive.reuse", name)


@lru_cache(maxsize=512, typed=True)
def _compared(model, gpu, tier, tokens, tp, compute_dtype, engine=None, resume_rate=None,
              gpu_resume_rate=None):
    """:func:`kvmath.evaluate.compare.compare` of one scenario, once per process and read-only: a plan,
    and each step of the search for its compute limit, ask for the same few scenarios.
    resume_rate: reloads per second through the tier's node hops (compare's --resume-rate);
    gpu_resume_rate: those through the GPUs' own links, where they differ."""
    return MappingProxyType(compare(model, gpu, tier, tokens, tp=tp, compute_dtype=compute_dtype,
                                    engine=engine, resume_rate=resume_rate,
                                    gpu_resume_rate=gpu_resume_rate))


def pool_price_tier(pool):
    """The tier whose price a pool's capacity is held at: its medium's (its servers, CPUs and
    NICs are not priced, so a pool's cost is a lower bound)."""
    return "nvme" if pool.medium == "nvme" else "host-dram"


def tier_read_bytes(r, tier_name):
    """Bytes one resume reads from a tier of a compare() result: every rank's copy from host
    memory unless the engine reads once (each rank loads the shared slot), the stored bytes from
    a drive."""
    state = r.get("state_bytes", 0.0)  # a hybrid model's state: never replicated
    return r["kv_bytes_stored"] if tier_name != "host-dram" else (
        r["node_hop_copies"] * (r["kv_bytes_unique"] - state) + state)


_kind = logic.pause_kind


def price_rows(overrides=()):
    """prices.csv's rows by name, with ``overrides`` (((name, Price row), ...): a user's prices
    file or price flags) in place of the bundled rows they name."""
    return {**prices(), **dict(overrides)}


def tier_prices(tier_name, drive=None, overrides=()):
    """(c_cap in $ per byte-second, c_wear in $ per byte written) of a tier
    (:func:`kvmath.logic.tier_prices`, at prices.csv's values with ``overrides`` in
    place of the rows they name; ``drive``: the node's drive row, whose rated lifetime writes
    spread NVMe's wear)."""
    price = {k: p.value for k, p in price_rows(overrides).items()}
    return tuple(logic.tier_prices(tier_name, price,
                                   drive.lifetime_drive_writes if drive else None))


def gpu_second_price(gpu, usd_per_gpu_hour=None):
    """$ per GPU-second of a GPU (a Gpu row or its name): the given hourly price, else the
    GPU's own listed price (gpu_prices.csv); ScenarioError when it has none."""
    return logic.gpu_hour_price(getattr(gpu, "name", gpu), usd_per_gpu_hour) / 3600


def prices_used(gpu, tier_names, usd_per_gpu_hour=None, overrides=()):
    """{what: observed date} of the bundled prices an answer uses: the GPU's hour (unless one
    was given) and the holding price of each tier (host DRAM or NVMe; HBM costs nothing)."""
    out = {}
    if usd_per_gpu_hour is None:
        name = getattr(gpu, "name", gpu)
        if name in gpu_prices():
            out[f"{name} GPU-hour"] = gpu_prices()[name].observed
    pr = price_rows(overrides)
    for t in tier_names:
        key = "nvme_usd_per_GB" if t.startswith("nvme") else (
            "ddr5_usd_per_GB" if t != "hbm" else None)
        if key:
            out[key] = pr[key].observed
    return out


def _iso(used):
    return {k: (str(d) if d is not None else None) for k, d in used.items()}


def price_warnings(used, today=None):
    """One line per price in ``used`` ({what: observed date or ISO text}) observed more than
    plan_defaults.csv's price_stale_after_days before ``today`` (default: the day it runs)."""
    from kvmath.tables.rows import plan_defaults
    today = today or datetime.date.today()
    limit = plan_defaults()["price_stale_after_days"].value
    used = {k: datetime.date.fromisoformat(str(d)) if d is not None else None
            for k, d in used.items()}
    return [f"price {what} was observed on {day.isoformat()}, {(today - day).days} days ago "
            f"(more than {limit:g}): check it, or pass your own" for what, day in used.items()
            if day is not None and (today - day).days > limit]


def cdf(pause, tau):
    return rfn(f"F_{_kind(pause)}").take({**pause_values(pause), "tau": tau})


def held_caches(pause, tau, resume_rate, reach=1.0):
    """Caches held at once with TTL tau (Little's law)."""
    return rfn(f"held_{_kind(pause)}").take({**pause_values(pause, reach), "tau": tau,
                                              "r": resume_rate})


def reuse(model, gpu, tier, tokens, pause, tp=None, gpu_price=None, compute_dtype=None,
          c_cap=None, drive=None, engine=None, price_overrides=(), reach=1.0, price_tier=None,
          turn_new_tokens=None, codec=None):
    """Break-even return probability and the best TTL for offloading one conversation.

    reach: h_route, the probability the returning turn reaches the node holding the cache (1
    for a pool every node reads); the break-even p is then the return probability needed with
    that reach. price_tier: the tier whose price the capacity is held at (a pool: its medium's).
    turn_new_tokens: tokens a returning turn adds, all a cache whose previous version the tier
    holds writes (default plan_defaults.csv's, as the node plan). codec: a codecs.csv row the
    cache is stored and moved in: the tier holds and the drives write 1/ratio of the KV bytes
    (kvmath.derive.kv.kv_bytes_stored) and the reload decodes them (compare's codec); encoding
    is not charged (no published rate).

    c_cap: price of holding a byte for a second ($); default the tier's amortised purchase
    price (a node being built); pass :func:`opportunity_price` for a node already bought.
    price_overrides: ((name, Price row), ...) in place of prices.csv's rows they name.
    """
    r = compare(model, gpu, tier, tokens, tp=tp, compute_dtype=compute_dtype, engine=engine,
                codec=codec)
    price = {k: p.value for k, p in price_rows(price_overrides).items()}
    answer = logic.reuse_of(r, pause, {
        "price": price, "usd_per_gpu_hour": gpu_price, "reach": reach, "price_tier": price_tier,
        "lifetime_drive_writes": drive.lifetime_drive_writes if drive else None,
        "turn_new_tokens": turn_new_tokens, "c_cap": c_cap})
    head = {"model": model.name, "gpu": gpu.name, "tier": tier.name, "tokens": tokens,
            "tp": r["tp"], "compute_dtype": r["compute_dtype"], "engine": r["engine"],
            "pause": pause.name, "kv_bytes": answer["kv_bytes"], "recompute_s": r["recompute_s"],
            "reload_s": r["reload_s"]}
    order = ("saving_gpu_s", "saving_usd", "gpu_usd_per_hour", "prices_observed",
             "capacity_usd_per_byte_s", "write_usd_per_byte", "return_probability",
             "new_fraction", "codec", "codec_what_if")
    answer.update(prices_observed=_iso(prices_used(gpu, [price_tier or tier.name], gpu_price,
                                                   price_overrides)),
                  codec=r.get("codec"), codec_what_if=r.get("codec_what_if"))
    return {**head, **{k: answer[k] for k in order}, **answer}


def ttl_filling(pause, resume_rate, kv_bytes, capacity_bytes, start_tau=0.0, reach=1.0,
                reach_above=None):
    """Largest TTL whose caches, aged from start_tau to it, fit in capacity_bytes (s).

    reach_above: for a pool written back below a fleet's node tiers, the nodes' reach: the
    caches it holds include those returned to another node before start_tau (held_back_extra)."""
    base = held_caches(pause, start_tau, resume_rate, reach) if start_tau > 0 else 0.0
    held, values = rfn(f"held_{_kind(pause)}"), {**pause_values(pause, reach), "r": resume_rate}
    extra = None
    if reach_above is not None and start_tau > 0:
        extra = rfn("held_back_extra")
        values.update(h_above=reach_above, tau_lo=start_tau,
                      F_lo=_cdf_or(pause, start_tau, 0.0, 1.0))

    def used(t):  # held_caches, with the function and the pause's values looked up once
        values["tau"] = t
        out = held.take(values) - base
        return (out + (extra.take(values) if extra is not None else 0.0)) * kv_bytes
    lo, hi = max(start_tau, 1e-6), max(start_tau, 1.0) * 2
    if used(lo) >= capacity_bytes:
        return start_tau
    while used(hi) < capacity_bytes:
        hi *= 2
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid == lo or mid == hi:  # lo and hi are adjacent floats: nothing can change now
            break
        if used(mid) < capacity_bytes:
            lo = mid
        else:
            hi = mid
    return lo


def _nvme_bandwidths(node, gpu, drive):
    """(read, write) bandwidth of the node's NVMe tier, B/s: its drives striped, then host
    DRAM and the GPUs' host links (node-shared hops split over the node's GPUs)."""
    cat = bundled()
    base = cat.tiers["nvme"]
    drive_link = cat.links[node.nvme_drive_link]
    rest = Tier("nvme-path", "", tuple(h for h in base.hops if h.link != base.hops[0].link))
    rest_bw = path_values(rest, gpu, node.gpus)[0] * node.gpus
    per_drive = (drive.read_Bps, drive.write_Bps) if drive else (drive_link.bandwidth_Bps,) * 2
    eff = drive_link.efficiency
    return tuple(min(rest_bw, node.nvme_drives * b * eff) for b in per_drive)


def _cdf_or(pause, tau, at_zero, at_inf):
    if not tau > 0:
        return at_zero
    return cdf(pause, tau) if math.isfinite(tau) else at_inf


def hbm_tier_capacity(node, gpu, model, tp, kv_batch_bytes, batch_seqs, utilisation, reserve,
                      weight_dtype=None):
    """HBM the paused caches may use (B; negative when the running batch does not fit);
    weights in weight_dtype (default: the model's)."""
    return float(rfn("hbm_tier_bytes").take({
        "N_gpus": node.gpus, "C_hbm": gpu.hbm_capacity_bytes, "u_hbm": utilisation,
        "a_act": reserve, "W_bytes": _weights_bytes(model, weight_dtype), "K": tp, "n_batch": batch_seqs,
        "Q_batch": kv_batch_bytes}))


def _cache_cap(wanted, held, what, medium, node, source=None):
    """The bytes an engine caches in a medium: what its settings give (None: all the node
    holds), refused when beyond what the node holds, naming where the size came from."""
    if wanted is None:
        return float(held)
    if wanted > held * (1 + 1e-12):
        raise ScenarioError(f"{source + ': ' if source else ''}the engine's {what} of "
                            f"{wanted:.4g} B exceeds node {node.name}'s {medium} of {held:.4g} B")
    return float(wanted)


def node_capacities(node, model, gpu=None, tp=None, compute_dtype=None, batch_seqs=None,
                    batch_context=None, gpu_memory_utilization=None, activation_reserve=None,
                    writes_within_rating=False, host_cache_bytes=None, disk_cache_bytes=None,
                    host_cache_hbm_ratio=None, cache_source=None, pool=None, pool_nodes=None):
    """Capacity (B) and read/write bandwidth (B/s, node totals) of a node's KV tiers, the one
    source for both the analytic plan (:func:`tier_plan`) and the trace replay
    (:func:`kvmath.traces.replay.node_tiers`).

    HBM: what :func:`hbm_tier_capacity` leaves after the activation reserve, the weights and
    the running batch (batch_seqs sequences of batch_context tokens; defaults in
    plan_defaults.csv), moved at the GPUs' HBM bandwidth. Host DRAM: the node's DRAM over
    the host-dram path. NVMe: the drive array, read and write bandwidth from drives.csv
    (capped by the host path), and with writes_within_rating the write bandwidth capped at
    the drives' rated drive writes per day.

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
    tp = tp or node_tp(model, node.gpus)
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
    q_batch = (_compared(model, gpu, cat.tiers["host-dram"], batch_context, tp,
                         compute_dtype)["kv_bytes"] if batch_seqs else 0.0)
    weight_dtype = choose_layout(model, gpu, tp=tp, compute_dtype=compute_dtype, check_fit=False).weight_dtype
    hbm = hbm_tier_capacity(node, gpu, model, tp, q_batch, batch_seqs, util, reserve, weight_dtype)
    dram_bw = path_values(cat.tiers["host-dram"], gpu, node.gpus)[0] * node.gpus
    nvme_read, nvme_write = _nvme_bandwidths(node, gpu, drive) if node.nvme_drives else (0.0, 0.0)
    if writes_within_rating and drive and node.nvme_drives:  # admit only what the rating allows
        nvme_write = min(nvme_write, float(rfn("endurance_write_budget").take({
            "DWPD_rated": drive.drive_writes_per_day, "n_drives": node.nvme_drives,
            "C_drive": node.nvme_drive_bytes})))
    hbm_bw = gpu.hbm_bandwidth_Bps * node.gpus
    if host_cache_hbm_ratio is not None:  # the host pool as a multiple of the device KV pool
        kv_pool = hbm_tier_capacity(node, gpu, model, tp, 0.0, 0, util, reserve, weight_dtype)
        host_cache_bytes = host_cache_hbm_ratio * max(kv_pool, 0.0)
    host_source, disk_source = cache_source or (None, None)  # where each size came from
    given = 0.0 if pool is None or not pool.on_gpu_nodes else pool.storage_node_bytes
    if pool is not None:  # a pool the node cannot hold or reach: the shared rule's one line
        node_tier(node, pool_tier(pool, pool_nodes or pool.gpu_nodes))
    # a pool of the nodes' own DRAM takes its share from the node's host-DRAM tier
    host = _cache_cap(host_cache_bytes, node.host_dram_bytes - given, "host cache", "DRAM", node,
                      host_source)
    tiers = {"hbm": {"capacity_bytes": max(hbm, 0.0), "read_Bps": hbm_bw, "write_Bps": hbm_bw},
             "host-dram": {"capacity_bytes": host, "read_Bps": dram_bw, "write_Bps": dram_bw}}
    if node.nvme_drives and disk_cache_bytes != 0:
        tiers["nvme"] = {"capacity_bytes": _cache_cap(
                             disk_cache_bytes, node.nvme_drives * node.nvme_drive_bytes,
                             "disk cache", "drives", node, disk_source),
                         "read_Bps": nvme_read, "write_Bps": nvme_write}
    elif disk_cache_bytes and not node.nvme_drives:
        raise ScenarioError(f"a disk cache of {disk_cache_bytes:.4g} B on node {node.name}, "
                            "which has no NVMe drives")
    if pool is not None:
        n = pool_nodes or pool.gpu_nodes
        bw = path_values(pool_tier(pool, n), gpu, node.gpus)[0] * node.gpus
        # writes: at the read path's rate (the servers' NICs bound both, an ASSUMPTION), over
        # the servers each chunk's copies cross
        tiers["pool"] = {"capacity_bytes": pool.capacity(n) / n, "read_Bps": bw,
                         "write_Bps": bw / pool.replicas, "path": pool_tier(pool, n),
                         "pool_nodes": n}
    return {"tiers": tiers, "drive": drive, "gpu": gpu, "tp": tp, "hbm_free_bytes": hbm,
            "gpu_memory_utilization": util, "activation_reserve_fraction": reserve,
            "batch_seqs": batch_seqs, "batch_context_tokens": batch_context,
            "batch_seq_kv_bytes": q_batch}


def tier_plan(node, model, tokens, resume_rate, pause, tp=None, gpu=None, compute_dtype=None,
              batch_seqs=None, batch_context=None, gpu_memory_utilization=None,
              activation_reserve=None, gpu_price=None, writes_within_rating=False,
              find_limit=True, engine=None, price_overrides=(), host_cache_bytes=None,
              disk_cache_bytes=None, host_cache_hbm_ratio=None, cache_source=None,
              at_load=True, pool=None, pool_nodes=None, reach=1.0, pool_writes="through",
              turn_new_tokens=None, writes="back"):
    """Which tier holds which caches, the traffic each carries, and whether the node can run it.

    Caches cascade by age: HBM (after the activation reserve, weights and the running batch)
    holds the youngest, host DRAM the next, the NVMe array the oldest; a cache older than
    the last tier's TTL is recomputed. A tier short of bandwidth admits only the share of
    caches its reads and writes can carry together (time-shared); the rest are dropped,
    counted and recomputed. Defaults of the HBM reserve and batch: kvmath/data/plan_defaults.csv.

    pool: a :class:`~kvmath.tables.rows.Pool` below the node's tiers, shared by pool_nodes GPU
    nodes (every bundled engine puts its remote store last: SGLang HiCache's L3, LMCache's
    remote backend, Dynamo KVBM's G4), holding the node's share of it. reach: h_route, the
    probability a returning turn reaches this node (:func:`kvmath.evaluate.routing.reach`);
    the node's own tiers serve only those turns, the pool every one. pool_writes: "through"
    (every offload is written to the pool too, which holds every cache from age 0 and serves
    the returns the node's tiers miss: LMCache stores each chunk in every backend) or "back"
    (a cache reaches the pool when it ages out of the node's tiers). turn_new_tokens: tokens a
    returning turn adds to its cache, all the engine writes where the tier still holds the rest
    (default plan_defaults.csv's, measured on the conversation trace). writes: how the node's
    offload tiers are written (kvmath.traces.replay.WRITE_MODES): "back" (the cascade above) or
    "through" (every offload written to host DRAM and the drives at once, each then holding
    every cache from age 0 to its own TTL and serving the returns the tiers above it miss:
    kvmath.derive.reuse.tier_writes_through).
    """
    if writes not in ("back", "through"):
        raise ScenarioError(f"--writes must be back or through, got {writes!r}")
    args = (node, model, tokens, resume_rate, pause, tp, gpu, compute_dtype, batch_seqs,
            batch_context, gpu_memory_utilization, activation_reserve, gpu_price,
            writes_within_rating, find_limit, engine, tuple(price_overrides), host_cache_bytes,
            disk_cache_bytes, host_cache_hbm_ratio, cache_source, at_load, pool, pool_nodes,
            reach, pool_writes, turn_new_tokens, writes)
    try:
        hash(args)
    except TypeError:  # an input that cannot be remembered: plan it afresh
        return _tier_plan.__wrapped__(*args)
    return copy.deepcopy(_tier_plan(*args))  # the caller's own copy of the remembered plan


@lru_cache(maxsize=1024, typed=True)
def _tier_plan(node, model, tokens, resume_rate, pause, tp, gpu, compute_dtype, batch_seqs,
               batch_context, gpu_memory_utilization, activation_reserve, gpu_price,
               writes_within_rating, find_limit, engine=None, price_overrides=(),
               host_cache_bytes=None, disk_cache_bytes=None, host_cache_hbm_ratio=None,
               cache_source=None, at_load=True, pool=None, pool_nodes=None, reach=1.0,
               pool_writes="through", turn_new_tokens=None, writes="back"):
    """:func:`tier_plan`, once per process for each set of inputs (the rows and frozen tables
    fix the plan): a chapter asks for the same plans in several places, and a sweep of the
    NVMe tier's value for the plans a sweep of the plans already made."""
    cat = bundled()
    gpu = gpu or cat.gpus[node.gpu]
    tp = tp or node_tp(model, node.gpus)
    if tp > node.gpus:
        raise ScenarioError(f"--tp {tp} exceeds the node's {node.gpus} GPUs")
    base = _compared(model, gpu, cat.tiers["host-dram"], tokens, tp, compute_dtype, engine)
    compute_dtype = base["compute_dtype"]
    q = base["kv_bytes_stored"]  # what one cache occupies and writes in host memory or drives
    q_hbm = base["kv_bytes"]  # in HBM every rank holds its own copy
    if not math.isfinite(resume_rate * q * 86400 / pause.return_probability):
        raise ScenarioError(f"--resume-rate {resume_rate:g} overflows the plan's traffic "
                            "(expected a rate whose bytes per second are finite)")
    nc = node_capacities(node, model, gpu=gpu, tp=tp, compute_dtype=compute_dtype,
                         batch_seqs=batch_seqs, batch_context=batch_context or tokens,
                         gpu_memory_utilization=gpu_memory_utilization,
                         activation_reserve=activation_reserve,
                         writes_within_rating=writes_within_rating,
                         host_cache_bytes=host_cache_bytes, disk_cache_bytes=disk_cache_bytes,
                         host_cache_hbm_ratio=host_cache_hbm_ratio, cache_source=cache_source,
                         pool=pool, pool_nodes=pool_nodes)
    turn_new = d_turn_new(turn_new_tokens)
    f_new = new_fraction(turn_new, tokens)
    util, reserve, batch_seqs = nc["gpu_memory_utilization"], nc["activation_reserve_fraction"], \
        nc["batch_seqs"]
    batch_context, q_batch, hbm, drive = nc["batch_context_tokens"], nc["batch_seq_kv_bytes"], \
        nc["hbm_free_bytes"], nc["drive"]
    capacities = {name: t["capacity_bytes"] for name, t in nc["tiers"].items()}
    bandwidths = {name: (t["read_Bps"], t["write_Bps"]) for name, t in nc["tiers"].items()}
    bandwidths["hbm"] = (math.inf, math.inf)  # a hit in HBM moves nothing
    c_gpu = gpu_second_price(gpu, gpu_price)
    rows, pending, tau_prev, node_full = [], [], 0.0, False
    for name, cap in capacities.items():
        if (name == "nvme" and not node.nvme_drives) or (node_full and name != "pool"):
            continue
        q_tier = q_hbm if name == "hbm" else q
        h = 1.0 if name == "pool" else reach  # every node reaches the pool
        # a node tier written through holds every cache from age 0, as a write-through pool
        node_through = writes == "through" and name not in ("hbm", "pool")
        through = (name == "pool" and pool_writes == "through") or node_through
        back = name == "pool" and not through
        # a write-through pool holds every cache from age 0; a write-back one the oldest, and
        # with them the caches whose conversation returned to another node
        tau = ttl_filling(pause, resume_rate, q_tier, cap, 0.0 if through else tau_prev, h,
                          reach_above=reach if back else None)
        f_prev = _cdf_or(pause, tau_prev, 0.0, 1.0)
        f_now = _cdf_or(pause, tau, 0.0, 1.0)
        # through: F_lo is the share of returns the node's tiers serve (reach x F at their
        # last age, or at the pool's own if it is shorter)
        f_lo = ((1.0 if node_through else reach) * _cdf_or(pause, min(tau_prev, tau), 0.0, 1.0)
                if through else f_prev)
        tier_name = "host-dram" if name == "hbm" else name
        # a hit on the node's drives reloads over their own path (count and model), not the
        # bundled eight-drive tier; a pool's over its own path, at the node's share
        path = (node_nvme_tier(node) if name == "nvme" else nc["tiers"]["pool"]["path"]
                if name == "pool" else cat.tiers[tier_name])
        price_name = pool_price_tier(pool) if name == "pool" else tier_name
        r = _compared(model, gpu, path, tokens, tp, compute_dtype, engine)
        b_read, b_write = bandwidths[name]
        row = {"tier": name, "capacity_bytes": cap, "caches_held": cap / q_tier, "reach": h,
               "ttl_from_s": 0.0 if through else tau_prev, "ttl_to_s": tau,
               "resume_fraction_by_capacity": (1.0 if through else h) * max(f_now - f_lo, 0.0),
               "read_bandwidth_Bps": b_read, "bandwidth_Bps": b_read,
               "write_bandwidth_Bps": b_write,
               # an HBM hit moves nothing but still runs the request's one-token forward pass
               "reload_s": r["reload_step_s"] if name == "hbm" else r["reload_s"]}
        if name == "pool":
            row.update(pool=pool.name, pool_nodes=nc["tiers"]["pool"]["pool_nodes"],
                       pool_capacity_bytes=pool.capacity(nc["tiers"]["pool"]["pool_nodes"]),
                       pool_writes=pool_writes, pool_replicas=pool.replicas,
                       pool_on_gpu_nodes=pool.on_gpu_nodes,
                       path=path.description)
        if name == "hbm":  # a hit in HBM moves nothing and nothing is written to it
            row.update(resume_fraction=h * (f_now - f_prev), read_Bps=0.0, write_Bps=0.0,
                       read_demand_Bps=0.0, write_demand_Bps=0.0, dropped_write_Bps=0.0,
                       headroom=math.inf, admitted_fraction=1.0)
        else:
            at = {"r": resume_rate, "p": pause.return_probability, "h_route": h, "Q": q, "f_new": f_new,
                  "Q_r": tier_read_bytes(r, tier_name), "F_lo": min(f_lo, f_now),
                  "F_hi": f_now, "B_tier": b_read, "B_write": b_write, "h_above": reach}
            # a write-through tier takes every offload; a write-back pool the caches its nodes
            # did not keep, their conversation not having returned to them
            w = "_through" if through else "_back" if back else ""
            reads = float(rfn("tier_reads").take(at))
            admitted = float(rfn(f"tier_admitted{w}").take(at))
            carried = float(rfn(f"tier_writes{w}_carried").take(at))
            row.update(resume_fraction=float(rfn(f"tier_served{w}").take(at)),
                       read_Bps=reads * admitted, write_Bps=min(carried, b_write),
                       read_demand_Bps=reads,
                       write_demand_Bps=float(rfn(f"tier_writes{w}").take(at)),
                       dropped_write_Bps=float(rfn(f"tier_writes{w}_dropped").take(at)),
                       headroom=float(rfn(f"tier_headroom{w}").take(at)), admitted_fraction=admitted)
        row["bandwidth_limited"] = row["headroom"] < 1
        row.update(_endurance(name, node, drive, row["write_Bps"]))
        c_buy, _ = tier_prices(price_name, drive if name != "pool" else None, price_overrides)
        row["capacity_usd_per_byte_s_purchase"] = c_buy
        pending.append((row, path, tau, q_tier, h))
        rows.append(row)
        if through and not node_through:  # the pool's ages are its own: the cascade's end
            break
        tau_prev = max(tau_prev, tau) if node_through else tau
        if not math.isfinite(tau):  # every cache kept: nothing ages further, and only a
            if pool is None or pool_writes != "through":  # write-through pool is left
                break
            node_full = True
    # every tier's reads cross the GPUs' own links (HBM hits move nothing); a tier's offload
    # writes load its node hops only (on the GPU's link they run the other way, which the
    # link's measured duplex share already charges the reloads)
    gpu_rate = resume_rate * sum(row["resume_fraction"] for row in rows if row["tier"] != "hbm")
    for row, path, tau, q_tier, h in pending:
        if row["tier"] != "hbm":
            _reload_at_load(row, model, gpu, path, tokens, tp, compute_dtype, engine,
                            resume_rate, gpu_rate, at_load)
        saving = tp * saved_s(base, row["reload_s"])
        row["capacity_usd_per_byte_s_opportunity"] = opportunity_price(
            pause, tau, max(saving, 0.0), c_gpu, q_tier, resume_rate, h)
    served = sum(row["resume_fraction"] for row in rows)
    plan = {"model": model.name, "node": node.name, "gpu": gpu.name, "gpus": node.gpus,
            "tp": tp, "tokens": tokens, "compute_dtype": compute_dtype,
            "resume_rate_per_s": resume_rate, "pause": pause.name, "kv_bytes": q,
            "kv_bytes_hbm": q_hbm, "engine": base["engine"],
            "recompute_s": base["recompute_s"], "saved_by_hit_s": saved_s(base, 0.0),
            "gpu_usd_per_hour": c_gpu * 3600,
            "prices_observed": _iso(prices_used(
                gpu, [pool_price_tier(pool) if r["tier"] == "pool" else r["tier"] for r in rows],
                gpu_price, price_overrides)),
            "reach": reach, "pool": pool.name if pool else None, "writes": writes,
            "turn_new_tokens": turn_new, "new_fraction": f_new,
            "drive": drive.name if drive else None,
            "gpu_memory_utilization": util, "activation_reserve_fraction": reserve,
            "batch_seqs": batch_seqs, "batch_context_tokens": batch_context,
            "batch_kv_bytes": batch_seqs * q_batch, "hbm_free_bytes": hbm,
            "hbm_feasible": hbm >= 0, "writes_within_rating": writes_within_rating, "tiers": rows,
            "recomputed_fraction": min(max(1 - served, 0.0), 1.0)}
    plan.update(_compute(plan, node, tp))
    plan["endurance_ok"] = all(t["endurance_ok"] is not False for t in rows)
    plan["feasible"] = plan["hbm_feasible"] and plan["compute_feasible"] and plan["endurance_ok"]
    if find_limit:
        kw = dict(tp=tp, gpu=gpu, compute_dtype=compute_dtype, batch_seqs=batch_seqs,
                  batch_context=batch_context, gpu_memory_utilization=util,
                  activation_reserve=reserve, gpu_price=gpu_price, find_limit=False,
                  writes_within_rating=writes_within_rating, engine=engine,
                  price_overrides=price_overrides, host_cache_bytes=host_cache_bytes,
                  disk_cache_bytes=disk_cache_bytes, host_cache_hbm_ratio=host_cache_hbm_ratio,
                  cache_source=cache_source, pool=pool, pool_nodes=pool_nodes, reach=reach,
                  pool_writes=pool_writes, turn_new_tokens=turn_new, writes=writes)
        plan["compute_limit_resume_rate_per_s"] = compute_limit(node, model, tokens, pause, **kw)
    return plan


def _reload_at_load(row, model, gpu, path, tokens, tp, compute_dtype, engine, resume_rate,
                    gpu_rate, at_load):
    """A tier row's reload at the stated load: it shares the tier's node hops with the traffic
    in flight there (this tier's own resumes, resume_rate x its share, and the offload writes
    it carries, counted as that many more reloads' bytes) and the GPUs' own links with every
    tier's reads (gpu_rate per second at the node)."""
    rate = resume_rate * row["resume_fraction"]
    row["reload_resumes_per_s"] = rate
    row["reload_load_from"] = "no resumes reach it"
    if rate > 0 and at_load and row["headroom"] >= 1:
        traffic = (row["read_Bps"] + row["write_Bps"]) / max(row["read_Bps"], 1e-300)
        row["reload_load_per_s"] = rate * traffic  # compare --resume-rate of it
        row["reload_gpu_load_per_s"] = gpu_rate
        try:
            loaded = _compared(model, gpu, path, tokens, tp, compute_dtype, engine,
                               rate * traffic, gpu_rate)
            row["reload_s"] = loaded["reload_s"]
            row["reload_load_from"] = "the tier's own resumes and offload writes"
        except ScenarioError:  # that traffic fills the path
            row["reload_load_from"] = ("saturated: its traffic fills the path, so a "
                                       "reload waits without bound (reload_s: every "
                                       "replica at once, a floor)")
    elif rate > 0 and row["headroom"] < 1:
        row["reload_load_from"] = ("saturated: the tier admits only what its bandwidth "
                                   "carries (reload_s: every replica at once, a floor)")
    elif rate > 0:
        row["reload_load_from"] = "every replica at once (not priced at the load)"


def d_turn_new(turn_new_tokens=None):
    """Tokens a returning turn adds: the given, else plan_defaults.csv's turn_new_tokens."""
    return plan_defaults()["turn_new_tokens"].value if turn_new_tokens is None else turn_new_tokens


def _endurance(name, node, drive, write_Bps):
    if name != "nvme":
        return {"drive_writes_per_day": None, "drive_lifetime_years": None,
                "endurance_ok": None}
    at = {"W_carried": write_Bps, "n_drives": node.nvme_drives, "C_drive": node.nvme_drive_bytes}
    dwpd = float(rfn("drive_writes_per_day").take(at))
    if drive is None:
        return {"drive_writes_per_day": dwpd, "drive_lifetime_years": None, "endurance_ok": None}
    life = (float(rfn("drive_lifetime_years").take({**at, "DWPD_rated": drive.drive_writes_per_day,
                                                     "Y_rated": drive.warranty_years}))
            if write_Bps > 0 else math.inf)
    return {"drive_writes_per_day": dwpd, "drive_lifetime_years": life,
            "endurance_ok": dwpd <= drive.drive_writes_per_day}


def _compute(plan, node, tp):
    at = {"r": plan["resume_rate_per_s"], "f_rec": plan["recomputed_fraction"],
          "t_rec": plan["recompute_s"], "K": tp, "N_gpus": node.gpus}
    demand = float(rfn("prefill_demand").take(at))
    return {"prefill_demand_gpu_s_per_s": demand, "compute_feasible": demand <= node.gpus}


def compute_limit(node, model, tokens, pause, lo=1e-4, hi=1e6, **kw):
    """Resume rate (per s) above which recomputing the misses needs more GPU-seconds per second
    than the node has (demand grows with the rate); inf if not reached by hi."""
    def over(rate):  # compute feasibility reads no reload time: not priced at the load
        return not tier_plan(node, model, tokens, rate, pause, at_load=False,
                             **kw)["compute_feasible"]
    if not over(hi):
        return math.inf
    if over(lo):
        return lo
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if over(mid) else (mid, hi)
        if hi / lo < 1.001:
            break
    return math.sqrt(lo * hi)


def opportunity_price(pause, tau, saving_gpu_s, c_gpu, kv_bytes, resume_rate, reach=1.0):
    """$ per byte-second a held cache costs on a node already bought: the GPU time saved by
    the marginal hits one more byte would hold at the TTL edge tau (0 when tau is 0 or inf)."""
    if not (tau > 0 and math.isfinite(tau)) or saving_gpu_s <= 0:
        return 0.0
    with np.errstate(over="ignore"):  # far past the pause, e^(lambda tau) overflows: the price is 0
        return float(rfn(f"c_cap_opportunity_{_kind(pause)}").take({
            **pause_values(pause, reach), "tau": tau, "r": resume_rate, "Q": kv_bytes,
            "S_gpu": saving_gpu_s, "c_gpu": c_gpu}))


def _weights_bytes(model, weight_dtype=None):
    from kvmath.evaluate.api import architecture_values
    v = architecture_values(model, weight_dtype=weight_dtype)
    return v["N_tot"] * v["b_w"]


def nvme_value(node, model, tokens, resume_rate, pause, tp=None, basis="purchase", **kw):
    """Dollars per hour that the node's NVMe tier saves, net of its cost, and the plan.

    basis "purchase": capacity at amortised purchase price plus wear (a node being built);
    "fixed": the drives are already bought, only wear on bytes actually written is paid.
    Wear is charged only on writes the drives carry, never on dropped ones.
    """
    plan = tier_plan(node, model, tokens, resume_rate, pause, tp, find_limit=False, **kw)
    nv = next((t for t in plan["tiers"] if t["tier"] == "nvme"), None)
    if nv is None:
        return 0.0, plan
    tp = plan["tp"]
    c_cap, c_wear = tier_prices("nvme", node_drive(node), kw.get("price_overrides", ()))
    value = rfn("tier_value_rate" if basis == "purchase" else "tier_value_rate_fixed").take({
        "r": resume_rate, "p": pause.return_probability, "h_route": plan["reach"],
        "Q": plan["kv_bytes"],
        "f_new": plan["new_fraction"],
        "Q_r": plan["kv_bytes"], "F_lo": _cdf_or(pause, nv["ttl_from_s"], 0.0, 1.0),
        "F_hi": _cdf_or(pause, nv["ttl_to_s"], 0.0, 1.0),
        "B_tier": nv["read_bandwidth_Bps"], "B_write": nv["write_bandwidth_Bps"],
        "S_gpu": tp * (plan["saved_by_hit_s"] - nv["reload_s"]),
        "c_gpu": gpu_second_price(plan["gpu"], kw.get("gpu_price")), "c_cap": c_cap, "c_wear": c_wear,
        "C_tier": nv["capacity_bytes"]})
    return float(value) * 3600, plan
