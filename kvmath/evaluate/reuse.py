"""Numbers for the reuse condition (lambdified :mod:`kvmath.derive.reuse`): what a tier's capacity
and wear cost, whether offloading one conversation pays, and how long a TTL fills a capacity.

Money is in US dollars from ``kvmath/data/prices.csv``; capacity is priced as capex amortised over
the months in that table, at the price its tier kind names (:mod:`kvmath.tiers.kinds`). Pause
distributions come from ``kvmath/data/pauses.csv``. The node's plan, which tier holds which
caches, is :mod:`kvmath.node`.
"""
from __future__ import annotations

import datetime
import math
from functools import lru_cache
from types import MappingProxyType

from kvmath.evaluate.api import compare, numeric_of
# the reuse condition's rules, one implementation for the command line and the calculator
from kvmath.logic import reuse as logic
from kvmath.logic.reuse import (KEEP_HORIZON_S, best_ttl, breakeven_p,  # noqa: F401
                                capacity_pricing, new_fraction, pause_values, saved_s)
from kvmath.tables.rows import gpu_prices, prices
from kvmath.tiers.kinds import KINDS


def rfn(name):
    """The lambdified version of ``kvmath.derive.reuse.<name>``."""
    return numeric_of("kvmath.derive.reuse", name)


@lru_cache(maxsize=512, typed=True)
def compared(model, gpu, tier, tokens, tp, compute_dtype, engine=None, resume_rate=None,
             gpu_resume_rate=None, kv_dtype=None, ep=None):
    """:func:`kvmath.evaluate.api.compare` of one scenario, once per process and read-only: a
    plan, and each step of the search for its compute limit, ask for the same few scenarios.
    resume_rate: reloads per second through the tier's node hops (compare's --resume-rate);
    gpu_resume_rate: those through the GPUs' own links, where they differ; kv_dtype, ep: the
    KV's element type and the experts' ranks, where given."""
    extra = {k: v for k, v in (("kv_dtype", kv_dtype), ("ep", ep)) if v is not None}
    return MappingProxyType(compare(model, gpu, tier, tokens, tp=tp, compute_dtype=compute_dtype,
                                    engine=engine, resume_rate=resume_rate,
                                    gpu_resume_rate=gpu_resume_rate, **extra))


def tier_read_bytes(r, kind):
    """Bytes one resume reads from a tier of kind ``kind`` (its name), of a compare() result:
    every rank's copy from host memory (a kind that reads every rank's: host memory) unless the
    engine reads once (each rank loads the shared slot), the stored bytes elsewhere (a drive)."""
    state = r.get("state_bytes", 0.0)  # a hybrid model's state: never replicated
    return r["kv_bytes_stored"] if KINDS[kind].reads != "every-rank" else (
        r["node_hop_copies"] * (r["kv_bytes_unique"] - state) + state)


_kind = logic.pause_kind


def price_rows(overrides=()):
    """prices.csv's rows by name, with ``overrides`` (((name, Price row), ...): a user's prices
    file or price flags) in place of the bundled rows they name."""
    return {**prices(), **dict(overrides)}


def tier_prices(tier, drive=None, overrides=()):
    """(c_cap in $ per byte-second, c_wear in $ per byte written) of a tier (a Tier, whose kind
    and medium say what prices it: :func:`kvmath.logic.reuse.capacity_pricing`;
    :func:`kvmath.logic.reuse.tier_prices`), at prices.csv's values with ``overrides`` in place
    of the rows they name; ``drive``: the node's drive row, whose rated lifetime writes spread a
    drive's wear."""
    price = {k: p.value for k, p in price_rows(overrides).items()}
    return tuple(logic.tier_prices(capacity_pricing(tier.kind, tier.medium), price,
                                   drive.lifetime_drive_writes if drive else None))


def gpu_second_price(gpu, usd_per_gpu_hour=None):
    """$ per GPU-second of a GPU (a Gpu row or its name): the given hourly price, else the
    GPU's own listed price (gpu_prices.csv); ScenarioError when it has none."""
    return logic.gpu_hour_price(getattr(gpu, "name", gpu), usd_per_gpu_hour) / 3600


def prices_used(gpu, tiers, usd_per_gpu_hour=None, overrides=()):
    """{what: observed date} of the bundled prices an answer uses: the GPU's hour (unless one
    was given) and the holding price of each tier (Tiers, or (kind, medium) pairs) its kind
    names (HBM's is an assumption, not a price anyone observed: left out)."""
    out = {}
    if usd_per_gpu_hour is None:
        name = getattr(gpu, "name", gpu)
        if name in gpu_prices():
            out[f"{name} GPU-hour"] = gpu_prices()[name].observed
    pr = price_rows(overrides)
    for t in tiers:
        kind, medium = (t.kind, t.medium) if hasattr(t, "kind") else t
        key = capacity_pricing(kind, medium)[0]
        if kind != "hbm" and isinstance(key, str):
            out[key] = pr[key].observed
    return out


def iso(used):
    """{what: ISO date} of prices_used's dates."""
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


def reuse(model, gpu, tier, tokens, pause, c_cap=None, drive=None, price_overrides=(),
          **fields):
    """Break-even return probability and the best TTL for offloading one conversation: the
    scenario of ``fields`` (the scenario record's by name: tp, compute_dtype, engine, codec,
    gpu_price, reach, turn_new_tokens) through :func:`kvmath.logic.reuse.reuse_answer`, the
    calculator's own.

    reach: h_route, the probability the returning turn reaches the node holding the cache (a
    store every node reads, a pool, is reached by all); the break-even p is then the return
    probability needed with that reach. The capacity is priced as the tier's kind says (a
    pool's by its medium). turn_new_tokens: tokens a returning turn adds, all a cache whose
    previous version the tier holds writes (default plan_defaults.csv's, as the node plan).
    codec: a codecs.csv row the cache is stored and moved in: the tier holds and the drives
    write 1/ratio of the KV bytes (kvmath.derive.kv.kv_bytes_stored) and the reload decodes them
    (compare's codec); encoding is not charged (no published rate).

    c_cap: price of holding a byte for a second ($); default the tier's amortised purchase
    price (a node being built); pass the node plan's opportunity price for a node already
    bought (kvmath.node.plan.opportunity_price). drive: the node's drive, whose rated lifetime
    writes spread its wear. price_overrides: ((name, Price row), ...) in place of prices.csv's
    rows they name.
    """
    from kvmath.scenario.record import scenario
    s = scenario(model, gpu, tier, **fields)
    price = {k: p.value for k, p in price_rows(price_overrides).items()}
    r, answer = logic.reuse_answer(s, tokens, pause, price, {
        "lifetime_drive_writes": drive.lifetime_drive_writes if drive else None, "c_cap": c_cap})
    head = {"model": s.model.name, "gpu": s.gpu.name, "tier": s.tier.name, "tokens": tokens,
            "tp": r["tp"], "compute_dtype": r["compute_dtype"], "engine": r["engine"],
            "pause": pause.name, "kv_bytes": answer["kv_bytes"], "recompute_s": r["recompute_s"],
            "reload_s": r["reload_s"]}
    order = ("saving_gpu_s", "saving_usd", "gpu_usd_per_hour", "prices_observed",
             "capacity_usd_per_byte_s", "write_usd_per_byte", "return_probability",
             "new_fraction", "codec", "codec_what_if")
    answer.update(prices_observed=iso(prices_used(s.gpu, [s.tier], s.gpu_price,
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
                      F_lo=cdf_or(pause, start_tau, 0.0, 1.0))

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


def cdf_or(pause, tau, at_zero, at_inf):
    if not tau > 0:
        return at_zero
    return cdf(pause, tau) if math.isfinite(tau) else at_inf


