"""The node's plan: which tier holds which caches, the traffic each carries at a resume rate,
whether the node can run it, and what each tier's capacity costs and is worth.

Caches cascade by age through the tiers the kinds place on a node (:mod:`kvmath.tiers.kinds`, in
their plan order: HBM, host memory, the node's drives, a pool below them), each tier's capacity
and rates from :func:`kvmath.node.capacities.node_capacities`.
"""
from __future__ import annotations

import copy
import math
from functools import lru_cache

import numpy as np

from kvmath.evaluate.api import ScenarioError, node_layout_tp
from kvmath.evaluate.reuse import (_kind, cdf_or, compared, gpu_second_price, iso,  # noqa: F401
                                   new_fraction, pause_values, prices_used, rfn, saved_s,
                                   tier_prices, tier_read_bytes, ttl_filling)
from kvmath.logic.path import node_tier
from kvmath.node.capacities import node_capacities
from kvmath.tables.rows import bundled, node_drive, plan_defaults
from kvmath.tiers.build import HBM_TIER
from kvmath.tiers.kinds import KINDS


def tier_plan(node, model, tokens, resume_rate, pause, tp=None, gpu=None, compute_dtype=None,
              batch_seqs=None, batch_context=None, gpu_memory_utilization=None,
              activation_reserve=None, gpu_price=None, writes_within_rating=False,
              find_limit=True, engine=None, price_overrides=(), host_cache_bytes=None,
              disk_cache_bytes=None, host_cache_hbm_ratio=None, cache_source=None,
              at_load=True, pool=None, pool_nodes=None, reach=1.0, pool_writes="through",
              turn_new_tokens=None, writes="back", kv_dtype=None, ep=None):
    """Which tier holds which caches, the traffic each carries, and whether the node can run it.

    Caches cascade by age: HBM (after the activation reserve, weights and the running batch)
    holds the youngest, host DRAM the next, the NVMe array the oldest; a cache older than
    the last tier's TTL is recomputed. A tier short of bandwidth admits only the share of
    caches its reads and writes can carry together (time-shared); the rest are dropped,
    counted and recomputed. Defaults of the HBM reserve and batch: kvmath/data/plan_defaults.csv.

    pool: a :class:`~kvmath.tables.rows.Pool` below the node's tiers, shared by pool_nodes GPU
    nodes (every bundled engine puts its remote store last: SGLang HiCache's L3, LMCache's
    remote backend, Dynamo KVBM's G4), holding the node's share of it. reach: h_route, the
    probability a returning turn reaches this node (:func:`kvmath.fleet.routers.reach`);
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
            reach, pool_writes, turn_new_tokens, writes, kv_dtype, ep)
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
               pool_writes="through", turn_new_tokens=None, writes="back", kv_dtype=None,
               ep=None):
    """:func:`tier_plan`, once per process for each set of inputs (the rows and frozen tables
    fix the plan): a chapter asks for the same plans in several places, and a sweep of the
    NVMe tier's value for the plans a sweep of the plans already made."""
    cat = bundled()
    gpu = gpu or cat.gpus[node.gpu]
    tp = tp or node_layout_tp(model, node, tokens, gpu=gpu, engine=engine,
                             compute_dtype=compute_dtype, batch_seqs=batch_seqs,
                             batch_context=batch_context)
    if tp > node.gpus:
        raise ScenarioError(f"--tp {tp} exceeds the node's {node.gpus} GPUs")
    base = compared(model, gpu, cat.tiers["host-dram"], tokens, tp, compute_dtype, engine,
                    kv_dtype=kv_dtype, ep=ep)
    compute_dtype = base["compute_dtype"]
    q = base["kv_bytes_stored"]  # what one cache occupies and writes in host memory or drives
    q_hbm = base["kv_bytes"]  # in HBM every rank holds its own copy
    if not math.isfinite(resume_rate * q * 86400 / pause.return_probability):
        raise ScenarioError(f"--resume-rate {resume_rate:g} overflows the plan's traffic "
                            "(expected a rate whose bytes per second are finite)")
    nc = node_capacities(node, model, gpu=gpu, tp=tp, compute_dtype=compute_dtype,
                         kv_dtype=kv_dtype, batch_seqs=batch_seqs,
                         batch_context=batch_context or tokens,
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
        kind = KINDS[nc["tiers"][name]["kind"]]
        hbm_row = kind.name == "hbm"
        if node_full and not kind.shared:
            continue
        q_tier = q_hbm if hbm_row else q
        h = 1.0 if kind.shared else reach  # every node reaches a shared store (a pool)
        # a node tier written through holds every cache from age 0, as a write-through pool
        node_through = writes == "through" and not hbm_row and not kind.shared
        through = (kind.shared and pool_writes == "through") or node_through
        back = kind.shared and not through
        # a write-through pool holds every cache from age 0; a write-back one the oldest, and
        # with them the caches whose conversation returned to another node
        tau = ttl_filling(pause, resume_rate, q_tier, cap, 0.0 if through else tau_prev, h,
                          reach_above=reach if back else None)
        f_prev = cdf_or(pause, tau_prev, 0.0, 1.0)
        f_now = cdf_or(pause, tau, 0.0, 1.0)
        # through: F_lo is the share of returns the node's tiers serve (reach x F at their
        # last age, or at the pool's own if it is shorter)
        f_lo = ((1.0 if node_through else reach) * cdf_or(pause, min(tau_prev, tau), 0.0, 1.0)
                if through else f_prev)
        # a hit on the node's drives reloads over their own path (count and model), not the
        # bundled eight-drive tier; a pool's over its own path, at the node's share; HBM's
        # moves nothing (its row reads the request's own step off the host-dram comparison)
        path = (nc["tiers"][name]["path"] if kind.shared else cat.tiers["host-dram"]
                if hbm_row else node_tier(node, cat.tiers[name]))
        r = compared(model, gpu, path, tokens, tp, compute_dtype, engine, kv_dtype=kv_dtype, ep=ep)
        b_read, b_write = bandwidths[name]
        row = {"tier": name, "kind": kind.name, "capacity_bytes": cap, "caches_held": cap / q_tier, "reach": h,
               "ttl_from_s": 0.0 if through else tau_prev, "ttl_to_s": tau,
               "resume_fraction_by_capacity": (1.0 if through else h) * max(f_now - f_lo, 0.0),
               "read_bandwidth_Bps": b_read, "bandwidth_Bps": b_read,
               "write_bandwidth_Bps": b_write,
               # an HBM hit moves nothing but still runs the request's one-token forward pass
               "reload_s": r["reload_step_s"] if hbm_row else r["reload_s"]}
        if kind.shared:
            row.update(pool=pool.name, pool_nodes=nc["tiers"]["pool"]["pool_nodes"],
                       pool_capacity_bytes=pool.capacity(nc["tiers"]["pool"]["pool_nodes"]),
                       pool_writes=pool_writes, pool_replicas=pool.replicas,
                       pool_on_gpu_nodes=pool.on_gpu_nodes,
                       path=path.description)
        if hbm_row:  # a hit in HBM moves nothing and nothing is written to it
            row.update(resume_fraction=h * (f_now - f_prev), read_Bps=0.0, write_Bps=0.0,
                       read_demand_Bps=0.0, write_demand_Bps=0.0, dropped_write_Bps=0.0,
                       headroom=math.inf, admitted_fraction=1.0)
        else:
            at = {"r": resume_rate, "p": pause.return_probability, "h_route": h, "Q": q, "f_new": f_new,
                  "Q_r": tier_read_bytes(r, kind.name), "F_lo": min(f_lo, f_now),
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
        row.update(_endurance(kind, node, drive, row["write_Bps"]))
        c_buy, _ = tier_prices(HBM_TIER if hbm_row else path, None if kind.shared else drive,
                               price_overrides)
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
    gpu_rate = resume_rate * sum(row["resume_fraction"] for row in rows if row["kind"] != "hbm")
    for row, path, tau, q_tier, h in pending:
        if row["kind"] != "hbm":
            _reload_at_load(row, path, {"model": model, "gpu": gpu, "tokens": tokens, "tp": tp,
                                        "compute_dtype": compute_dtype, "engine": engine,
                                        "kv_dtype": kv_dtype, "ep": ep},
                            (resume_rate, gpu_rate, at_load))
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
            "prices_observed": iso(prices_used(
                gpu, [(r["kind"], pool.medium if r["kind"] == "pool" else None) for r in rows],
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
                  pool_writes=pool_writes, turn_new_tokens=turn_new, writes=writes,
                  kv_dtype=kv_dtype, ep=ep)
        plan["compute_limit_resume_rate_per_s"] = compute_limit(node, model, tokens, pause, **kw)
    return plan


def _reload_at_load(row, path, s, load):
    """A tier row's reload at the stated load (``load``: resume_rate, gpu_rate, at_load) of the
    scenario ``s`` (model, gpu, tokens, tp, compute_dtype, engine): it shares the tier's node
    hops with the traffic in flight there (this tier's own resumes, resume_rate x its share, and
    the offload writes it carries, counted as that many more reloads' bytes) and the GPUs' own
    links with every tier's reads (gpu_rate per second at the node)."""
    resume_rate, gpu_rate, at_load = load
    rate = resume_rate * row["resume_fraction"]
    row["reload_resumes_per_s"] = rate
    row["reload_load_from"] = "no resumes reach it"
    if rate > 0 and at_load and row["headroom"] >= 1:
        traffic = (row["read_Bps"] + row["write_Bps"]) / max(row["read_Bps"], 1e-300)
        row["reload_load_per_s"] = rate * traffic  # compare --resume-rate of it
        row["reload_gpu_load_per_s"] = gpu_rate
        try:
            loaded = compared(s["model"], s["gpu"], path, s["tokens"], s["tp"],
                              s["compute_dtype"], s["engine"], resume_rate=rate * traffic,
                              gpu_resume_rate=gpu_rate, kv_dtype=s.get("kv_dtype"),
                              ep=s.get("ep"))
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


def _endurance(kind, node, drive, write_Bps):
    """What a tier's writes do to its drives (a kind that wears drives, on the node's own)."""
    if kind.wear != "drive" or kind.shared:
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


def nvme_value(node, model, tokens, resume_rate, pause, tp=None, basis="purchase", **kw):
    """Dollars per hour that the node's NVMe tier saves, net of its cost, and the plan.

    basis "purchase": capacity at amortised purchase price plus wear (a node being built);
    "fixed": the drives are already bought, only wear on bytes actually written is paid.
    Wear is charged only on writes the drives carry, never on dropped ones.
    """
    plan = tier_plan(node, model, tokens, resume_rate, pause, tp, find_limit=False, **kw)
    nv = next((t for t in plan["tiers"] if t["kind"] == "drives"), None)
    if nv is None:
        return 0.0, plan
    tp = plan["tp"]
    c_cap, c_wear = tier_prices(bundled().tiers[nv["tier"]], node_drive(node),
                                kw.get("price_overrides", ()))
    value = rfn("tier_value_rate" if basis == "purchase" else "tier_value_rate_fixed").take({
        "r": resume_rate, "p": pause.return_probability, "h_route": plan["reach"],
        "Q": plan["kv_bytes"],
        "f_new": plan["new_fraction"],
        "Q_r": plan["kv_bytes"], "F_lo": cdf_or(pause, nv["ttl_from_s"], 0.0, 1.0),
        "F_hi": cdf_or(pause, nv["ttl_to_s"], 0.0, 1.0),
        "B_tier": nv["read_bandwidth_Bps"], "B_write": nv["write_bandwidth_Bps"],
        "S_gpu": tp * (plan["saved_by_hit_s"] - nv["reload_s"]),
        "c_gpu": gpu_second_price(plan["gpu"], kw.get("gpu_price")), "c_cap": c_cap, "c_wear": c_wear,
        "C_tier": nv["capacity_bytes"]})
    return float(value) * 3600, plan
