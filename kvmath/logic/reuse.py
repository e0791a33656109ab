"""Reuse: is an offload worth it. The expected value of offloading one conversation's cache
against holding and writing it, at the best time to live, the least return probability at which
some TTL pays, and the prices a tier's capacity and wear are held at (kvmath.derive.reuse).
"""
from __future__ import annotations

import math

from kvmath.logic.comparison import compare
from kvmath.logic.runtime import (DATA, ScenarioError, formula, formula_quiet, is_float, vmap,
                                  with_fields)

#: the TTLs searched for the best TTL and the break-even: this many, log-spaced from TTL_MIN_S to
#: TTL_MAX_S (10 ms to about three years), then refined between the best one's neighbours
TTL_MIN_S = 1e-2
TTL_MAX_S = 1e8
TTL_POINTS = 4001
#: the TTL at which "keep until return" (an infinite TTL) is evaluated: every pause is over, s
KEEP_HORIZON_S = 1e12
#: each pause distribution's expressions (kvmath.derive.reuse), by kind
REUSE_KEYS = {
    "exp": {"value": "derive_reuse.value_exp", "F": "derive_reuse.F_exp",
            "p_breakeven": "derive_reuse.p_breakeven_exp", "dvalue": "derive_reuse.dvalue_exp",
            "tau_opt": "derive_reuse.tau_opt_exp[0]"},
    "logn": {"value": "derive_reuse.value_logn", "F": "derive_reuse.F_logn",
             "p_breakeven": "derive_reuse.p_breakeven_logn",
             "dvalue": "derive_reuse.dvalue_logn"},
}


#: the per-item price options and the prices.csv row each replaces
PRICE_OPTIONS = {"dram_price": "ddr5_usd_per_GB", "nvme_price": "nvme_usd_per_GB"}


def pause_kind(pause):
    """A pauses.csv row's kind of distribution: exp or logn."""
    return "exp" if pause.distribution == "exponential" else "logn"


def pause_values(pause, reach=1.0):
    """Substitution values of a pause distribution (exp: lambda; lognormal: mu, sigma), p, and
    h_route: the probability a returning conversation reaches the node holding its cache (1 on
    one node)."""
    if pause.distribution == "exponential":
        return {"lambda": math.log(2) / pause.median_s, "p": pause.return_probability,
                "h_route": reach}
    return {"mu": math.log(pause.median_s), "sigma": pause.sigma,
            "p": pause.return_probability, "h_route": reach}


def capacity_pricing(kind, medium=None):
    """[what prices a tier's capacity: a prices.csv row or USD per GB, what its writes wear:
    "drive" or None] by its kind (kvmath.tiers.kinds), by the tier's medium where the kind
    prices by medium (a pool's)."""
    k = DATA.tier_kinds[kind]
    if k["price_by_medium"] is not None:
        if medium not in k["price_by_medium"]:
            raise ScenarioError(f"a tier of kind {kind} priced by its medium names medium "
                                f"{medium!r}; expected one of {', '.join(list(k['price_by_medium']))}")
        return k["price_by_medium"][medium]
    return [k["price"], k["wear"]]


def tier_prices(pricing, price, lifetime_drive_writes=None):
    """[c_cap in $ per byte-second, c_wear in $ per byte written] of a tier priced by
    ``pricing`` (:func:`capacity_pricing`), from ``price`` (prices.csv's values by name, or a
    user's in their place): capacity at its purchase price amortised over
    price['amortisation_months']; a drive's wear spreads a byte's price over the drive's rated
    lifetime writes (DWPD x warranty days) when the drive is known, else over prices.csv's
    assumed lifetime writes; no wear otherwise."""
    at = {"p_GB": pricing[0] if is_float(pricing[0]) else price[pricing[0]],
          "m_amort": price["amortisation_months"]}
    if pricing[1] == "drive":
        at["W_life"] = (lifetime_drive_writes if lifetime_drive_writes
                        else price["nvme_drive_writes_lifetime"])
        return [float(formula("derive_reuse.capacity_price", at)),
                float(formula("derive_reuse.wear_price", at))]
    return [float(formula("derive_reuse.capacity_price", at)), 0.0]


def gpu_hour_price(gpu_name, usd_per_gpu_hour=None):
    """$ per GPU-hour: the given price, else the GPU's listed one (gpu_prices.csv)."""
    if usd_per_gpu_hour is not None:
        return usd_per_gpu_hour
    if gpu_name not in DATA.gpu_prices:
        raise ScenarioError(f"no GPU-hour price for {gpu_name} in gpu_prices.csv; pass "
                            "--gpu-price (USD per GPU-hour)")
    return DATA.gpu_prices[gpu_name]


def ttl_grid():
    """The TTLs searched, s (log-spaced)."""
    lo = math.log(TTL_MIN_S)
    step = (math.log(TTL_MAX_S) - lo) / (TTL_POINTS - 1)
    return [math.exp(lo + i * step) for i in range(TTL_POINTS)]


def breakeven_p(kind, v):
    """The least return probability at which some TTL makes offloading pay (infinity: none).

    The value is linear in p, so at each TTL one p sets it to zero (``p_breakeven_<kind>``);
    the break-even is that p minimised over the TTL (above 1: no p pays), found on the TTL grid
    and refined by golden section on log TTL. Where the expression is not defined (at the
    shortest TTLs holding and writing cancel to 0 or below in floating point; at the longest it
    overflows) no p pays there."""
    key = REUSE_KEYS[kind]["p_breakeven"]

    def usable(p):
        return p if math.isfinite(p) and p >= 0 else math.inf

    def at(log_tau):
        return usable(float(formula_quiet(key, {**v, "tau": math.exp(log_tau)})))
    taus = ttl_grid()
    ps = [usable(p) for p in vmap(lambda t: formula_quiet(key, {**v, "tau": t}), taus)]
    i = 0
    for j in range(len(ps)):
        if ps[j] < ps[i]:
            i = j
    lo = math.log(taus[max(i - 1, 0)])
    hi = math.log(taus[min(i + 1, len(taus) - 1)])
    g = (math.sqrt(5) - 1) / 2
    a = hi - g * (hi - lo)
    b = lo + g * (hi - lo)
    fa = at(a)
    fb = at(b)
    for _ in range(60):  # golden section: the bracket shrinks by 0.618 a step
        if fa <= fb:
            hi = b
            b = a
            fb = fa
            a = hi - g * (hi - lo)
            fa = at(a)
        else:
            lo = a
            a = b
            fa = fb
            b = lo + g * (hi - lo)
            fb = at(b)
    return min(fa, fb, ps[i])


def best_ttl(kind, v):
    """The TTL (s) maximising the expected net value of an offload: for an exponential pause
    the stationary point in closed form (``tau_opt_exp``; keep for ever or not at all when
    every conversation returns, or holding is free, by the value's slope); for a lognormal
    one, the best of the TTL grid refined by bisection on the first-order condition."""
    keys = REUSE_KEYS[kind]
    if kind == "exp":
        if v["p"] < 1 and v["c_cap"] > 0:
            t = float(formula_quiet(keys["tau_opt"], v))
            if math.isfinite(t):
                return t if t > 0 else 0.0
        return math.inf if float(formula(keys["dvalue"], {**v, "tau": 1.0})) > 0 else 0.0
    taus = ttl_grid()
    vals = vmap(lambda t: formula(keys["value"], {**v, "tau": t}), taus)
    i = 0
    for j in range(len(vals)):
        if vals[j] > vals[i]:
            i = j
    if vals[i] <= 0 and i == 0:
        return 0.0
    lo = taus[max(i - 1, 0)]
    hi = taus[min(i + 1, len(taus) - 1)]
    for _ in range(100):  # bisection on the first-order condition
        mid = math.sqrt(lo * hi)
        if float(formula(keys["dvalue"], {**v, "tau": mid})) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def saved_s(r, reload_s=None):
    """Seconds one reuse saves on each GPU: the difference of the times to first token of a
    comparison (the request's own costs, paid either way, cancel), with the reload of another
    tier of the same scenario (reload_s) if given."""
    if reload_s is None:
        reload_s = r["reload_s"]
    return r["ttft_recompute_s"] - r["request_s"] - reload_s


def new_fraction(turn_new_tokens, tokens):
    """f_new: the share of a cache of ``tokens`` a returning turn adds (1: the whole cache)."""
    return 1.0 if turn_new_tokens is None else min(1.0, turn_new_tokens / tokens)


def reuse_of(r, pause, economics):
    """Whether offloading one conversation pays, from its comparison ``r`` (``compare``'s
    answer): the GPU-seconds a reuse saves against holding the cache for the best TTL and
    writing it, at the GPU-hour's price, with the return probability the pause row states times
    the reach. ``economics``: price (prices.csv's values by name, or a user's in their place),
    and where given usd_per_gpu_hour (else the GPU's listed price), reach (the share of returns
    that reach the cache's node; 1), pricing (what prices the capacity and wear, in place of the
    tier kind's: :func:`capacity_pricing`), lifetime_drive_writes (the node's drive's), turn_new_tokens (tokens a
    returning turn adds) and c_cap (a holding price of your own, $ per byte-second: an
    opportunity cost)."""
    price = economics["price"]
    reach = economics.get("reach")
    if reach is None:
        reach = 1.0
    c_cap = economics.get("c_cap")
    turn_new_tokens = economics.get("turn_new_tokens")
    saving = r["gpus"] * saved_s(r)
    pricing = economics.get("pricing")
    if pricing is None:
        pricing = capacity_pricing(r["tier_kind"], r["tier_medium"])
    prices = tier_prices(pricing, price, economics.get("lifetime_drive_writes"))
    c_gpu = gpu_hour_price(r["gpu"], economics.get("usd_per_gpu_hour")) / 3600
    turn_new = DATA.turn_new_tokens if turn_new_tokens is None else turn_new_tokens
    v = {**pause_values(pause, reach), "S_gpu": max(saving, 1e-300), "c_gpu": c_gpu,
         "c_cap": prices[0] if c_cap is None else c_cap, "c_wear": prices[1],
         "Q": r["kv_bytes_stored"], "f_new": new_fraction(turn_new, r["tokens"])}
    out = {"pause": pause.name, "kv_bytes": r["kv_bytes_stored"], "saving_gpu_s": saving,
           "saving_usd": saving * c_gpu, "gpu_usd_per_hour": c_gpu * 3600,
           "capacity_usd_per_byte_s": v["c_cap"], "write_usd_per_byte": v["c_wear"],
           "return_probability": pause.return_probability, "new_fraction": v["f_new"]}
    if saving <= 0:
        out.update({"ttl_s": 0.0, "p_breakeven": None, "offload_can_pay": False,
                    "value_usd": 0.0, "hit_probability": 0.0,
                    "verdict": "do not offload: reload is not faster than recompute"})
        return out
    kind = pause_kind(pause)
    keys = REUSE_KEYS[kind]
    tau = best_ttl(kind, v)
    at = {**v, "tau": tau if math.isfinite(tau) else KEEP_HORIZON_S}
    value = float(formula(keys["value"], at)) if tau > 0 else 0.0  # TTL 0: nothing held
    pays = tau > 0 and value > 0
    # no TTL pays: the best choice is not to write the cache at all (TTL 0, value 0)
    p_star = breakeven_p(kind, v)
    out.update({"ttl_s": tau if pays else 0.0,
                "hit_probability": reach * float(formula(keys["F"], at)) if pays else 0.0,
                "value_usd": value if pays else 0.0,
                "p_breakeven": p_star if p_star <= 1 else None,
                "offload_can_pay": p_star <= 1,  # False: not even p = 1 repays holding, writing
                "verdict": "offload" if pays else ("do not offload" if p_star <= 1 else
                           "do not offload: holding and writing the cache cost more than the "
                           "saving even if every conversation returns")})
    return out




def reuse_scenario(s):
    """The comparison reuse makes of scenario ``s``: its own options only (TP, compute dtype,
    engine, codec, the model as served), one reload alone, no stated load."""
    return with_fields(s, {"bandwidth_Bps": None, "efficiency": None, "kv_dtype": None,
                           "concurrent_reloads": None, "ep": None, "batch": 1,
                           "allow_beyond_context": False, "prefill": "calibrated",
                           "new_tokens": 1, "token_ids": False, "resume_rate": None,
                           "gpu_resume_rate": None})


def reuse_answer(s, tokens, pause, price, extras):
    """[the comparison, ``reuse``'s answer] for scenario ``s`` (the command line's and the
    calculator's): the comparison reuse makes (:func:`reuse_scenario`), then :func:`reuse_of` at
    ``price``
    (prices.csv's values by name) with the scenario's per-item prices (:data:`PRICE_OPTIONS`:
    its dram_price and nvme_price) in place of theirs, its GPU-hour price (gpu_price), its reach
    (every node reaches a store its tier kind says is shared: a pool) and the tokens a returning
    turn adds. ``extras``: lifetime_drive_writes (the node's drive's, for its drives' wear),
    c_cap (a holding price of your own)."""
    r = compare(reuse_scenario(s), tokens)
    price = dict(price)
    if s.dram_price is not None:
        price[PRICE_OPTIONS["dram_price"]] = s.dram_price
    if s.nvme_price is not None:
        price[PRICE_OPTIONS["nvme_price"]] = s.nvme_price
    reach = s.reach
    if DATA.tier_kinds[s.tier.kind]["shared"] or reach is None:  # a pool: every node reads it
        reach = 1.0
    return [r, reuse_of(r, pause, {"price": price, "usd_per_gpu_hour": s.gpu_price,
                                   "reach": reach,
                                   "lifetime_drive_writes": extras.get("lifetime_drive_writes"),
                                   "turn_new_tokens": s.turn_new_tokens,
                                   "c_cap": extras.get("c_cap")})]
