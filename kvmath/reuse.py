"""Numbers for the reuse condition and the tier design (lambdified :mod:`kvmath.derive_reuse`).

Money is in US dollars from ``kvmath/data/prices.csv``; capacity is priced as capex
amortised over the months in that table. Pause distributions come from
``kvmath/data/pauses.csv``.
"""
from __future__ import annotations

import math
import numpy as np

from . import derive_reuse as DR
from .evaluate import compare, min_tp, numeric_of, path_values
from .tables import bundled, prices

SECONDS_PER_MONTH = 365.25 * 86400 / 12
#: which price prices a tier's capacity
TIER_MEDIUM = {"host-dram": "ddr5", "rdma": "ddr5"}  # other tiers' names start with nvme


def rfn(name):
    """The lambdified version of ``kvmath.derive_reuse.<name>``."""
    return numeric_of(DR, name)


def pause_values(pause):
    """Substitution values of a pause distribution (exp: lambda; lognormal: mu, sigma) and p."""
    if pause.distribution == "exponential":
        return {"lambda": math.log(2) / pause.median_s, "p": pause.return_probability}
    return {"mu": math.log(pause.median_s), "sigma": pause.sigma, "p": pause.return_probability}


def _kind(pause):
    return "exp" if pause.distribution == "exponential" else "logn"


def tier_prices(tier_name):
    """(c_cap in $ per byte-second, c_wear in $ per byte written) of a tier."""
    pr = {k: p.value for k, p in prices().items()}
    months = pr["amortisation_months"]
    if tier_name.startswith("nvme"):
        per_byte = pr["nvme_usd_per_GB"] / 1e9
        return per_byte / (months * SECONDS_PER_MONTH), per_byte / pr["nvme_drive_writes_lifetime"]
    return pr["ddr5_usd_per_GB"] / 1e9 / (months * SECONDS_PER_MONTH), 0.0


def gpu_second_price():
    return prices()["h100_usd_per_gpu_hour"].value / 3600


def cdf(pause, tau):
    return rfn(f"F_{_kind(pause)}").take({**pause_values(pause), "tau": tau})


def held_caches(pause, tau, resume_rate):
    """Caches held at once with TTL tau (Little's law)."""
    return rfn(f"held_{_kind(pause)}").take({**pause_values(pause), "tau": tau, "r": resume_rate})


def reuse(model, gpu, tier, tokens, pause, tp=None):
    """Break-even return probability and the best TTL for offloading one conversation."""
    tp = tp or min_tp(model, gpu, tokens) or 8
    r = compare(model, gpu, tier, tokens, tp=tp)
    saving = tp * (r["recompute_s"] - r["reload_s"])  # GPU-seconds one reuse saves
    c_cap, c_wear = tier_prices(tier.name)
    v = {**pause_values(pause), "S_gpu": max(saving, 1e-300), "c_gpu": gpu_second_price(),
         "c_cap": c_cap, "c_wear": c_wear, "Q": r["kv_bytes"]}
    kind = _kind(pause)
    value = rfn(f"value_{kind}")
    out = {"model": model.name, "gpu": gpu.name, "tier": tier.name, "tokens": tokens, "tp": tp,
           "pause": pause.name, "kv_bytes": r["kv_bytes"], "recompute_s": r["recompute_s"],
           "reload_s": r["reload_s"], "saving_gpu_s": saving,
           "saving_usd": saving * v["c_gpu"], "capacity_usd_per_byte_s": c_cap,
           "write_usd_per_byte": c_wear, "return_probability": pause.return_probability}
    if saving <= 0:
        out.update(ttl_s=0.0, p_breakeven=None, value_usd=0.0, hit_probability=0.0,
                   verdict="do not offload: reload is not faster than recompute")
        return out
    tau = best_ttl(value, v, kind)
    at = {**v, "tau": tau}
    out["ttl_s"] = tau
    out["hit_probability"] = float(rfn(f"F_{kind}").take(at)) if tau > 0 else 0.0
    out["value_usd"] = float(value.take(at)) if tau > 0 else 0.0
    p_star = float(rfn(f"p_breakeven_{kind}").take({**at, "tau": tau if tau > 0 else
                                                     pause_median(pause)}))
    out["p_breakeven"] = p_star
    out["verdict"] = ("offload" if out["value_usd"] > 0 else "do not offload")
    return out


def pause_median(pause):
    return pause.median_s


def best_ttl(value, v, kind):
    """TTL (s) maximising the expected net value; closed form for the exponential pause."""
    if kind == "exp":
        roots = [f.take(v) for f in rfn("tau_opt_exp")]
        roots = [float(t.real) if isinstance(t, complex) else float(t) for t in roots]
        roots = [t for t in roots if math.isfinite(t) and t > 0]
        if v["p"] >= 1:
            return math.inf
        return roots[0] if roots else 0.0
    taus = np.geomspace(1e-2, 1e8, 4001)
    vals = value.take({**v, "tau": taus})
    i = int(np.argmax(vals))
    if vals[i] <= 0 and i == 0:
        return 0.0
    lo, hi = taus[max(i - 1, 0)], taus[min(i + 1, len(taus) - 1)]
    d = rfn("dvalue_logn")
    for _ in range(100):  # bisection on the first-order condition
        mid = math.sqrt(lo * hi)
        if d.take({**v, "tau": mid}) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def ttl_filling(pause, resume_rate, kv_bytes, capacity_bytes, start_tau=0.0):
    """Largest TTL whose caches, aged from start_tau to it, fit in capacity_bytes (s)."""
    base = held_caches(pause, start_tau, resume_rate) if start_tau > 0 else 0.0
    def used(t):
        return (held_caches(pause, t, resume_rate) - base) * kv_bytes
    lo, hi = max(start_tau, 1e-6), max(start_tau, 1.0) * 2
    if used(lo) >= capacity_bytes:
        return start_tau
    while used(hi) < capacity_bytes:
        hi *= 2
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2
        if used(mid) < capacity_bytes:
            lo = mid
        else:
            hi = mid
    return lo


def tier_plan(node, model, tokens, resume_rate, pause, tp=None):
    """Which tier holds which caches, and the bandwidth each tier needs, for one node.

    Caches cascade by age: HBM (after weights) holds the youngest, host DRAM the next,
    the NVMe array the oldest; a cache older than the last tier's TTL is recomputed.
    """
    cat = bundled()
    gpu = cat.gpus[node.gpu]
    tp = tp or node.gpus
    base = compare(model, gpu, cat.tiers["host-dram"], tokens, tp=tp)
    q = base["kv_bytes"]
    weights = _weights_bytes(model)
    capacities = {
        "hbm": max(node.gpus * gpu.hbm_capacity_bytes - weights * node.gpus / tp, 0.0),
        "host-dram": node.host_dram_bytes,
        "nvme": node.nvme_drives * node.nvme_drive_bytes,
    }
    bandwidths = {"hbm": math.inf,
                  "host-dram": path_values(cat.tiers["host-dram"], gpu, tp)[0] * tp,
                  "nvme": path_values(cat.tiers["nvme"], gpu, tp)[0] * tp}
    rows, tau_prev = [], 0.0
    for name, cap in capacities.items():
        tau = ttl_filling(pause, resume_rate, q, cap, tau_prev)
        f_prev = cdf(pause, tau_prev) if tau_prev > 0 else 0.0
        f_now = cdf(pause, tau) if math.isfinite(tau) else 1.0
        tier_name = "host-dram" if name == "hbm" else name
        r = compare(model, gpu, cat.tiers[tier_name], tokens, tp=tp)
        at = {"r": resume_rate, "p": pause.return_probability, "Q": q, "F_lo": f_prev,
              "F_hi": f_now, "B_tier": bandwidths[name] if name != "hbm" else 1.0}
        if name == "hbm":  # a hit in HBM moves nothing and nothing is written to it
            reads = writes = 0.0
            headroom, served = math.inf, f_now - f_prev
        else:
            reads = float(rfn("tier_reads").take(at))
            writes = float(rfn("tier_writes").take(at))
            headroom = float(rfn("tier_headroom").take(at))
            served = float(rfn("tier_served").take(at))
        rows.append({"tier": name, "capacity_bytes": cap, "caches_held": cap / q,
                     "ttl_from_s": tau_prev, "ttl_to_s": tau, "resume_fraction": served,
                     "resume_fraction_by_capacity": f_now - f_prev,
                     "bandwidth_limited": headroom < 1,
                     "read_Bps": reads, "write_Bps": writes, "bandwidth_Bps": bandwidths[name],
                     "headroom": headroom,
                     "reload_s": 0.0 if name == "hbm" else r["reload_s"]})
        tau_prev = tau
        if not math.isfinite(tau):
            break
    served = sum(row["resume_fraction"] for row in rows)
    return {"model": model.name, "node": node.name, "tp": tp, "tokens": tokens,
            "resume_rate_per_s": resume_rate, "pause": pause.name, "kv_bytes": q,
            "recompute_s": base["recompute_s"], "tiers": rows, "recomputed_fraction": 1 - served}


def _weights_bytes(model):
    from .evaluate import architecture_values
    v = architecture_values(model)
    return v["N_tot"] * v["b_w"]


def nvme_value(node, model, tokens, resume_rate, pause, tp=None):
    """Dollars per hour that the node's NVMe tier saves, net of its capacity and wear cost."""
    plan = tier_plan(node, model, tokens, resume_rate, pause, tp)
    nv = next((t for t in plan["tiers"] if t["tier"] == "nvme"), None)
    if nv is None:
        return 0.0, plan
    tp = plan["tp"]
    c_cap, c_wear = tier_prices("nvme")
    value = rfn("tier_value_rate").take({
        "r": resume_rate, "p": pause.return_probability, "Q": plan["kv_bytes"],
        "F_lo": cdf(pause, nv["ttl_from_s"]) if nv["ttl_from_s"] > 0 else 0.0, "F_hi": (cdf(pause, nv["ttl_to_s"])
                                                     if math.isfinite(nv["ttl_to_s"]) else 1.0),
        "B_tier": nv["bandwidth_Bps"], "S_gpu": tp * (plan["recompute_s"] - nv["reload_s"]),
        "c_gpu": gpu_second_price(), "c_cap": c_cap, "c_wear": c_wear,
        "C_tier": nv["capacity_bytes"]})
    return float(value) * 3600, plan
