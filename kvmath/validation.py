"""Predictions held against published measurements (``kvmath/data/validation.csv``).

Each row names a quantity, the conditions, the measured value and a tolerance
factor f with its reason: the prediction must lie within [measured/f, measured*f].
Rows marked ``expect=fail`` document a known limit of the model: they must stay
outside their tolerance, so a change that silently "fixes" them is noticed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .evaluate import compare, fn, scenario_values
from .tables import DataError, _read, bundled, data_path, resolve_model

VALIDATION_FIELDS = ("id", "source_key", "quantity", "measured_value", "model", "gpu", "tp",
                     "ep", "dp_attention", "tokens", "batch", "compute_dtype", "link", "count", "transfer_bytes",
                     "tolerance_factor", "expect", "tolerance_reason", "in_sample",
                     "read_from_plot", "conditions", "source", "source_location", "retrieved")
QUANTITIES = {"ttft_s", "prefill_s", "bandwidth_Bps", "kv_bytes"}


@dataclass(frozen=True)
class Measurement:
    id: str
    source_key: str
    quantity: str
    measured_value: float
    model: str
    gpu: str
    tp: int | None  #: GPUs of one replica (all of them under data-parallel attention)
    ep: int | None  #: expert-parallel ranks (None: experts tensor-parallel over tp)
    dp_attention: bool
    tokens: int | None
    batch: int
    compute_dtype: str
    link: str
    count: int | None
    transfer_bytes: float | None
    tolerance_factor: float
    expect: str
    tolerance_reason: str
    in_sample: bool
    read_from_plot: bool
    conditions: str
    source: str
    source_location: str
    retrieved: str


def load_validation(path=None):
    path = path or data_path("validation.csv")
    cat = bundled()
    out = []
    for r in _read(path, VALIDATION_FIELDS):
        q = r.choice("quantity", QUANTITIES)
        m = Measurement(
            id=r.text("id"), source_key=r.text("source_key"), quantity=q,
            measured_value=r.number("measured_value"), model=r.text("model", required=False),
            gpu=r.text("gpu", required=False), tp=r.integer("tp", required=False),
            ep=r.integer("ep", required=False),
            dp_attention=(r.choice("dp_attention", {"true", "false"}, required=False) == "true"),
            tokens=r.integer("tokens", required=False),
            batch=r.integer("batch", required=False) or 1,
            compute_dtype=r.text("compute_dtype", required=False) or "bf16",
            link=r.text("link", required=False), count=r.integer("count", required=False),
            transfer_bytes=r.number("transfer_bytes", required=False),
            tolerance_factor=r.number("tolerance_factor"), expect=r.choice("expect", {"pass", "fail"}),
            tolerance_reason=r.text("tolerance_reason"), in_sample=r.boolean("in_sample"),
            read_from_plot=r.boolean("read_from_plot"), conditions=r.text("conditions"),
            source=r.text("source"), source_location=r.text("source_location"),
            retrieved=r.date("retrieved"))
        if m.tolerance_factor < 1:
            raise r.err("tolerance_factor", "expected a factor >= 1")
        if m.model and m.model not in cat.models and not validation_model_path(m.model).exists():
            raise r.err("model", f"unknown model {m.model!r} (neither bundled nor in "
                        "kvmath/data/validation_models/)")
        if m.gpu and m.gpu not in cat.gpus:
            raise r.err("gpu", f"unknown GPU {m.gpu!r}")
        if m.link and m.link not in cat.links:
            raise r.err("link", f"unknown link {m.link!r}")
        needs = {"ttft_s": ("model", "gpu", "tp", "tokens"),
                 "prefill_s": ("model", "gpu", "tp", "tokens"), "kv_bytes": ("model", "tokens"),
                 "bandwidth_Bps": ("link", "count")}[q]
        for name in needs:
            if getattr(m, name) in (None, ""):
                raise r.err(name, f"required for quantity {q}")
        out.append(m)
    ids = [m.id for m in out]
    if len(set(ids)) != len(ids):
        raise DataError(path, None, "id", "duplicate ids")
    return out


def validation_model_path(name):
    """Models measured in published work but not bundled live in data/validation_models/."""
    return data_path("validation_models") / f"{name}.csv"


def model_of(name):
    cat = bundled()
    return cat.models[name] if name in cat.models else resolve_model(str(validation_model_path(name)))


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
            from .prefill import prefill_time
            layout = (dict(ep=m.ep or m.tp, dp_attention=True, tp_attn=1) if m.dp_attention
                      else dict(ep=m.ep if m.ep and m.ep > 1 else None))
            return float(prefill_time(model_of(m.model), cat.gpus[m.gpu], float(m.tokens),
                                      tp=m.tp, compute_dtype=m.compute_dtype, batch=m.batch,
                                      **layout)["total_s"])
        v, _ = scenario_values(model_of(m.model), cat.gpus[m.gpu], cat.tiers["host-dram"],
                               tp=m.tp, compute_dtype=m.compute_dtype,
                               efficiency=overrides.get("eta"))
        return float(fn("t_recompute_batch").take({**v, "T": float(m.tokens), "n_seq": m.batch}))
    if m.quantity == "kv_bytes":
        r = compare(model_of(m.model), cat.gpus["h100-sxm"], cat.tiers["host-dram"], m.tokens)
        return r["kv_bytes"]
    link = cat.links[m.link]
    eff = overrides.get("link_efficiency", link.efficiency)
    bandwidth = link.bandwidth_Bps * eff * m.count
    if m.transfer_bytes is None:
        return bandwidth
    return float(_bw_at_size()(s=m.transfer_bytes, B=bandwidth, t_0=link.latency_s))


def table():
    """One dict per measurement: prediction, ratio predicted/measured, within tolerance."""
    rows = []
    for m in measurements():
        p = predict(m)
        ratio = p / m.measured_value
        within = 1 / m.tolerance_factor <= ratio <= m.tolerance_factor
        rows.append({"measurement": m, "predicted": p, "ratio": ratio, "within": within,
                     "as_expected": within == (m.expect == "pass")})
    return rows
