"""Predictions held against published measurements (``kvmath/data/validation.csv``).

Each row names a quantity, the conditions, the measured value and a tolerance
factor f with its reason: the prediction must lie within [measured/f, measured*f].
Rows marked ``expect=fail`` document a known limit of the model: they must stay
outside their tolerance, so a change that silently "fixes" them is noticed.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from kvmath.evaluate.api import HBM_TIER, compare, fn, scenario_values
from kvmath.logic.constants import DEFAULT_ENGINE
from kvmath.tables.schema import read
from kvmath.tables.rows import Measurement, bundled, model_of, resolve_engine  # noqa: F401 (model_of re-exported)


def load_validation(path=None):
    return list(read(Measurement, path).values())




@lru_cache(maxsize=None)
def measurements():
    return tuple(load_validation())


@lru_cache(maxsize=None)
def _bw_at_size():
    return fn("bandwidth_at_size")


def predict(m: Measurement, overrides=None):
    """The model's prediction for a measurement row, in the row's unit.

    overrides: optional dict of {'prefill': 'ideal' | 'calibrated', 'eta': ...,
    'link_efficiency': ...} for uncertainty bands. Prefill rows use the calibrated model
    unless told otherwise (an explicit eta is the flat model).
    """
    overrides = overrides or {}
    cat = bundled()
    if m.quantity in ("ttft_s", "prefill_s"):
        kind = "ideal" if "eta" in overrides else overrides.get("prefill", "calibrated")
        if kind == "calibrated":
            from kvmath.evaluate.prefill import prefill_time
            layout = (dict(ep=m.ep or m.tp, dp_attention=True, tp_attn=1) if m.dp_attention
                      else dict(ep=m.ep if m.ep and m.ep > 1 else None))
            return float(prefill_time(model_of(m.model), cat.gpus[m.gpu], float(m.tokens),
                                      tp=m.tp, compute_dtype=m.compute_dtype, batch=m.batch,
                                      kernels=m.kernels or None, **layout)["total_s"])
        v, _ = scenario_values(model_of(m.model), cat.gpus[m.gpu], cat.tiers["host-dram"],
                               tp=m.tp, compute_dtype=m.compute_dtype,
                               efficiency=overrides.get("eta"))
        return float(fn("t_recompute_batch").take({**v, "T": float(m.tokens), "n_seq": m.batch}))
    if m.quantity in ("ttft_recompute_s", "ttft_reload_s"):  # one request alone
        return ttft_result(m)[m.quantity]
    if m.quantity == "decode_step_s":  # one token's forward over a prefix of m.tokens in HBM
        return decode_step(m)
    if m.quantity == "kv_bytes":
        r = compare(model_of(m.model), cat.gpus["h100-sxm"], cat.tiers["host-dram"], m.tokens)
        return r["kv_bytes"]
    link = cat.links[m.link]
    if m.copy_path:  # copies of transfer_bytes by one copy path (copy_paths.csv)
        from kvmath.logic.path import copy_rate
        return m.count * copy_rate(link, m.copy_path, float(m.transfer_bytes))
    eff = overrides.get("link_efficiency", link.efficiency)
    bandwidth = link.bandwidth_Bps * eff * m.count
    if m.transfer_bytes is None:
        return bandwidth
    return float(_bw_at_size()(s=m.transfer_bytes, B=bandwidth, t_0=link.latency_s))


def alone(engine_name, kernels=""):
    """The engine profile for one request alone on the node: nothing else offloads while it
    loads, so its copies keep the host link to themselves (writes_overlap off; a serving node's
    profile keeps the link's measured duplex share for the other requests' offloads); a row that
    names the engine whose kernels ran its forward (kernels) runs them."""
    eng = resolve_engine(engine_name or DEFAULT_ENGINE)
    if engine_name:
        eng = replace(eng, writes_overlap=False)
    if kernels:
        eng = replace(eng, kernels=kernels)
    return eng if engine_name or kernels else None


def ttft_result(m: Measurement):
    """compare() for a TTFT row: its engine, tier (host DRAM for a cold row, where the tier does
    not enter), new tokens and prompt form, one request alone (one reload in flight, no other
    request's offload sharing the host link)."""
    cat = bundled()
    tier = HBM_TIER if m.tier == HBM_TIER.name else cat.tiers[m.tier or "host-dram"]
    return compare(model_of(m.model), cat.gpus[m.gpu], tier, m.tokens, tp=m.tp,
                   compute_dtype=m.compute_dtype, engine=alone(m.engine, m.kernels),
                   concurrent_reloads=1,
                   new_tokens=m.new_tokens, token_ids=m.token_ids)


def decode_step(m: Measurement):
    """A decode step of ``m.batch`` sequences, each the forward of one new token over a prefix of
    ``m.tokens`` already in HBM, s. At batch 1 it is the engine step a reload pays (compare's
    reload_step_s on the hbm tier, timed by the calibrated prefill model in the row's layout); at
    a larger batch :func:`kvmath.evaluate.serving.decode_cost` (the same forward of the whole
    batch, then every sequence's KV read once), as the fleet charges decode."""
    cat = bundled()
    ep = m.ep if m.ep and m.ep > 1 else None
    if m.batch > 1 or m.kv_dtype:
        from kvmath.evaluate.serving import decode_cost
        return decode_cost(model_of(m.model), cat.gpus[m.gpu], m.tp, m.batch, m.tokens,
                           compute_dtype=m.compute_dtype, kv_dtype=m.kv_dtype or None,
                           ep=ep, engine=alone(None, m.kernels))["decode_step_s"]
    return compare(model_of(m.model), cat.gpus[m.gpu], HBM_TIER, m.tokens, tp=m.tp,
                   ep=ep, compute_dtype=m.compute_dtype, engine=alone(None, m.kernels),
                   concurrent_reloads=1, new_tokens=1)["reload_step_s"]


#: a ratio within this factor of an edge of its tolerance band, inside or out, is marginal:
#: its verdict is weak evidence either way
MARGIN_FACTOR = 1.05


def marginal(ratio, tolerance_factor):
    """Whether predicted/measured lies within MARGIN_FACTOR of either edge of [1/f, f]. A band
    no wider than the margin (an arithmetic check) has no marginal zone."""
    if tolerance_factor <= MARGIN_FACTOR:
        return False
    return any(edge / MARGIN_FACTOR <= ratio <= edge * MARGIN_FACTOR
               for edge in (tolerance_factor, 1 / tolerance_factor))


def table():
    """One dict per measurement: prediction, ratio predicted/measured, within tolerance, and
    whether that verdict is marginal."""
    rows = []
    for m in measurements():
        p = predict(m)
        ratio = p / m.measured_value
        within = 1 / m.tolerance_factor <= ratio <= m.tolerance_factor
        rows.append({"measurement": m, "predicted": p, "ratio": ratio, "within": within,
                     "as_expected": within == (m.expect == "pass"),
                     "marginal": marginal(ratio, m.tolerance_factor)})
    return rows
