"""Loading and validating the data tables (CSV, one row per item).

Every number in a table carries its source; units live in field names
(``_Bps`` bytes per second, ``_flops`` FLOP/s, ``_bytes``, ``_s`` seconds),
all SI decimal. A malformed file raises :class:`DataError` naming the file,
the row and the field, and what was expected.
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: bytes per element of each dtype; mxfp4 is 4-bit values plus one 8-bit scale per 32
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
#: what a figure is: a vendor peak, arithmetic on a spec, a measurement, a config value, or an assumption
KINDS = {"datasheet-peak", "derived-from-spec", "measurement", "config", "assumption"}
SCOPES = {"per-gpu", "per-node"}
#: hop name that stands for the GPU's own host link in a tier
GPU_HOST_LINK = "gpu-host-link"


class DataError(ValueError):
    """A table that does not validate: file, row (1 = first data row), field and what was expected."""

    def __init__(self, path, row, field_name, message):
        self.path, self.row, self.field, self.message = str(path), row, field_name, message
        where = f"{path}"
        if row is not None:
            where += f", row {row}"
        if field_name is not None:
            where += f", field '{field_name}'"
        super().__init__(f"{where}: {message}")


# ------------------------------------------------------------------ schema helpers
_SOURCE_FIELDS = ("kind", "source", "source_location", "retrieved")


class _Row:
    """One CSV row with typed, error-reporting accessors."""

    def __init__(self, path, index, data):
        self.path, self.index, self.data = path, index, data

    def err(self, name, message):
        return DataError(self.path, self.index, name, message)

    def text(self, name, required=True):
        value = (self.data.get(name) or "").strip()
        if required and not value:
            raise self.err(name, "missing value (expected text)")
        return value

    def number(self, name, required=True, allow_zero=False):
        raw = self.text(name, required)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise self.err(name, f"expected a number, got {raw!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            expected = "a non-negative number" if allow_zero else "a positive number"
            raise self.err(name, f"expected {expected}, got {raw!r}")
        return value

    def integer(self, name, required=True, allow_zero=False):
        value = self.number(name, required, allow_zero)
        if value is None:
            return None
        if value != int(value):
            raise self.err(name, f"expected an integer, got {self.data[name]!r}")
        return int(value)

    def choice(self, name, allowed, required=True):
        value = self.text(name, required)
        if value and value not in allowed:
            raise self.err(name, f"expected one of {', '.join(sorted(allowed))}, got {value!r}")
        return value

    def boolean(self, name):
        return self.choice(name, {"true", "false"}) == "true"

    def date(self, name):
        raw = self.text(name)
        try:
            _dt.date.fromisoformat(raw)
        except ValueError:
            raise self.err(name, f"expected a date YYYY-MM-DD, got {raw!r}") from None
        return raw


def _read(path, fields, optional=()):
    """Rows of a CSV file whose header holds every name in fields and no unknown name."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM is not a field name
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            rows = list(reader)
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable CSV file ({exc})") from None
    if not header:
        raise DataError(path, None, None, "empty file (expected a CSV header)")
    known = set(fields) | set(optional)
    for name in header:
        if name not in known:
            raise DataError(path, None, name, "unknown field (check its name and unit suffix); "
                            f"expected fields: {', '.join(fields)}")
    for name in fields:
        if name not in header:
            raise DataError(path, None, name, "missing column")
    out = []
    for i, data in enumerate(rows, start=1):
        if None in data:
            raise DataError(path, i, None, "more values than header fields")
        out.append(_Row(path, i, data))
    if not out:
        raise DataError(path, None, None, "no rows")
    return out


def _source(row):
    return Source(kind=row.choice("kind", KINDS), source=row.text("source"),
                  source_location=row.text("source_location"), retrieved=row.date("retrieved"),
                  verified_via=row.text("verified_via", required=False),
                  notes=row.text("notes", required=False))


def _unique(rows, items, key="name"):
    seen = {}
    for row, item in zip(rows, items):
        name = getattr(item, key)
        if name in seen:
            raise row.err(key, f"duplicate name {name!r} (first in row {seen[name]})")
        seen[name] = row.index
    return {getattr(item, key): item for item in items}


# ------------------------------------------------------------------ records
@dataclass(frozen=True)
class Source:
    kind: str
    source: str
    source_location: str
    retrieved: str
    verified_via: str = ""
    notes: str = ""


@dataclass(frozen=True)
class Gpu:
    name: str
    description: str
    bf16_dense_flops: float  #: FLOP/s, dense
    fp8_dense_flops: float | None  #: FLOP/s, dense; None if no FP8 tensor cores
    hbm_capacity_bytes: float
    hbm_bandwidth_Bps: float
    host_link: str
    gpus_per_node: int  #: GPUs of one node (baseboard), which share its DRAM, drives and NICs
    source: Source
    prefill_efficiency: float | None = None  #: achieved fraction of dense peak in prefill
    hbm_efficiency: float | None = None  #: achieved fraction of HBM bandwidth

    def dense_flops(self, dtype="bf16"):
        """Dense peak FLOP/s in the compute dtype."""
        value = self.fp8_dense_flops if dtype == "fp8" else self.bf16_dense_flops
        if value is None:
            raise ValueError(f"GPU {self.name} has no {dtype} tensor-core peak")
        return value


@dataclass(frozen=True)
class Link:
    name: str
    description: str
    bandwidth_Bps: float  #: peak, one direction
    latency_s: float  #: fixed cost of one transfer
    scope: str  #: per-gpu: each GPU has its own; per-node: shared by the node's GPUs
    source: Source
    efficiency: float | None = None  #: achieved fraction of bandwidth_Bps
    duplex_retained: float = 1.0  #: fraction of that left while the reverse direction is busy


@dataclass(frozen=True)
class Efficiency:
    item: str
    quantity: str  #: prefill, hbm or link
    measured_value: float | None
    peak_value: float | None
    same_as: str
    kind: str
    source: str
    source_location: str
    retrieved: str
    conditions: str
    value: float = field(default=float("nan"))  #: measured/peak, capped at 1


@dataclass(frozen=True)
class Hop:
    link: str
    count: int  #: parallel units striped (drives, NICs)


@dataclass(frozen=True)
class Tier:
    name: str
    description: str
    hops: tuple[Hop, ...]


@dataclass(frozen=True)
class Model:
    name: str
    hf_repo: str
    attention: str  #: gqa (covers MHA and MQA) or mla
    layers: int
    window_layers: int
    window: int | None
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int | None
    head_dim: int | None
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    qk_nope_head_dim: int | None
    v_head_dim: int | None
    q_lora_rank: int | None
    intermediate_size: int | None
    moe_intermediate_size: int | None
    num_experts: int | None
    experts_per_token: int | None
    shared_experts: int | None
    dense_layers: int
    vocab_size: int
    tie_word_embeddings: bool
    weight_dtype: str
    kv_dtype: str
    max_context_tokens: int  #: the context window (max_position_embeddings)
    source: Source

    @property
    def is_moe(self):
        return bool(self.num_experts)

    @property
    def attention_kind(self):
        """MHA, GQA, MQA (by KV heads against query heads) or MLA."""
        if self.attention == "mla":
            return "MLA"
        if self.num_key_value_heads == self.num_attention_heads:
            return "MHA"
        return "MQA" if self.num_key_value_heads == 1 else "GQA"


# ------------------------------------------------------------------ loaders
GPU_FIELDS = ("name", "description", "bf16_dense_flops", "fp8_dense_flops", "hbm_capacity_bytes",
              "hbm_bandwidth_Bps", "host_link", "gpus_per_node", *_SOURCE_FIELDS, "verified_via", "notes")
GPU_OPTIONAL = ("prefill_efficiency", "hbm_efficiency")
LINK_FIELDS = ("name", "description", "bandwidth_Bps", "latency_s", "scope", *_SOURCE_FIELDS,
               "verified_via", "notes")
TIER_FIELDS = ("tier", "hop", "count", "description", "source", "source_location", "retrieved")
EFFICIENCY_FIELDS = ("item", "quantity", "measured_value", "peak_value", "same_as", "kind",
                     "source", "source_location", "retrieved", "conditions")
MODEL_FIELDS = ("name", "hf_repo", "attention", "layers", "window_layers", "window", "hidden_size",
                "num_attention_heads", "num_key_value_heads", "head_dim", "kv_lora_rank",
                "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
                "intermediate_size", "moe_intermediate_size", "num_experts", "experts_per_token",
                "shared_experts", "dense_layers", "vocab_size", "tie_word_embeddings",
                "weight_dtype", "kv_dtype", "max_context_tokens", *_SOURCE_FIELDS, "verified_via",
                "notes")


def _efficiency_column(row, name):
    value = row.number(name, required=False)
    if value is not None and value > 1:
        raise row.err(name, f"expected a fraction in (0, 1], got {value}")
    return value


def load_gpus(path):
    rows = _read(path, GPU_FIELDS, GPU_OPTIONAL)
    gpus = [Gpu(name=r.text("name"), description=r.text("description"),
                bf16_dense_flops=r.number("bf16_dense_flops"),
                fp8_dense_flops=r.number("fp8_dense_flops", required=False),
                hbm_capacity_bytes=r.number("hbm_capacity_bytes"),
                hbm_bandwidth_Bps=r.number("hbm_bandwidth_Bps"),
                host_link=r.text("host_link"), gpus_per_node=r.integer("gpus_per_node"),
                source=_source(r),
                prefill_efficiency=_efficiency_column(r, "prefill_efficiency"),
                hbm_efficiency=_efficiency_column(r, "hbm_efficiency"))
            for r in rows]
    return rows, _unique(rows, gpus)


def load_links(path):
    rows = _read(path, LINK_FIELDS)
    links = [Link(name=r.text("name"), description=r.text("description"),
                  bandwidth_Bps=r.number("bandwidth_Bps"),
                  latency_s=r.number("latency_s", allow_zero=True),
                  scope=r.choice("scope", SCOPES), source=_source(r))
             for r in rows]
    return rows, _unique(rows, links)


def load_tiers(path, link_names):
    rows = _read(path, TIER_FIELDS)
    hops, descriptions, first_row = {}, {}, {}
    for r in rows:
        name = r.text("tier")
        hop = r.text("hop")
        if hop != GPU_HOST_LINK and hop not in link_names:
            raise r.err("hop", f"unknown link {hop!r}; expected {GPU_HOST_LINK} or one of "
                        f"{', '.join(sorted(link_names))}")
        if name not in hops:
            first_row[name] = r
            descriptions[name] = r.text("description")
            if r.text("source", required=False):
                r.date("retrieved")
                r.text("source_location")
        hops.setdefault(name, []).append(Hop(hop, r.integer("count")))
    return {n: Tier(n, descriptions[n], tuple(h)) for n, h in hops.items()}


def load_efficiencies(path):
    rows = _read(path, EFFICIENCY_FIELDS)
    parsed, by_key = [], {}
    for r in rows:
        quantity = r.choice("quantity", {"prefill", "prefill-fp8", "hbm", "link", "duplex"})
        kind = r.choice("kind", {"measurement", "assumption"})
        same_as = r.text("same_as", required=False)
        measured = r.number("measured_value", required=not same_as)
        peak = r.number("peak_value", required=not same_as)
        if kind == "measurement":
            r.text("source")
            r.text("source_location")
        r.date("retrieved")
        r.text("conditions")
        key = (r.text("item"), quantity)
        if key in by_key:
            raise r.err("item", f"duplicate efficiency for {key[0]} {quantity}")
        by_key[key] = r
        parsed.append((r, dict(item=key[0], quantity=quantity, measured_value=measured,
                               peak_value=peak, same_as=same_as, kind=kind,
                               source=r.text("source", required=False),
                               source_location=r.text("source_location", required=False),
                               retrieved=r.text("retrieved"), conditions=r.text("conditions"))))
    values = {}
    for r, p in parsed:
        if not p["same_as"]:
            values[(p["item"], p["quantity"])] = min(1.0, p["measured_value"] / p["peak_value"])
    out = {}
    for r, p in parsed:
        key = (p["item"], p["quantity"])
        if p["same_as"]:
            ref = (p["same_as"], p["quantity"])
            if ref not in values:
                raise r.err("same_as", f"no measured {p['quantity']} efficiency for {p['same_as']!r}")
            values[key] = values[ref]
        out[key] = Efficiency(**p, value=values[key])
    return out


def _model_row(r):
    attention = r.choice("attention", {"gqa", "mla"})
    layers = r.integer("layers")
    opt = lambda name, zero=False: r.integer(name, required=False, allow_zero=zero)  # noqa: E731
    m = dict(name=r.text("name"), hf_repo=r.text("hf_repo"), attention=attention, layers=layers,
             window_layers=r.integer("window_layers", allow_zero=True), window=opt("window"),
             hidden_size=r.integer("hidden_size"),
             num_attention_heads=r.integer("num_attention_heads"),
             num_key_value_heads=opt("num_key_value_heads"), head_dim=opt("head_dim"),
             kv_lora_rank=opt("kv_lora_rank"), qk_rope_head_dim=opt("qk_rope_head_dim"),
             qk_nope_head_dim=opt("qk_nope_head_dim"), v_head_dim=opt("v_head_dim"),
             q_lora_rank=opt("q_lora_rank", True), intermediate_size=opt("intermediate_size"),
             moe_intermediate_size=opt("moe_intermediate_size"), num_experts=opt("num_experts"),
             experts_per_token=opt("experts_per_token"), shared_experts=opt("shared_experts", True),
             dense_layers=r.integer("dense_layers", allow_zero=True),
             vocab_size=r.integer("vocab_size"),
             tie_word_embeddings=r.boolean("tie_word_embeddings"),
             weight_dtype=r.choice("weight_dtype", set(DTYPE_BYTES)),
             kv_dtype=r.choice("kv_dtype", set(DTYPE_BYTES)),
             max_context_tokens=r.integer("max_context_tokens"), source=_source(r))
    needs = {"gqa": ("num_key_value_heads", "head_dim"),
             "mla": ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    for name in needs[attention]:
        if m[name] is None:
            raise r.err(name, f"required for attention {attention} (expected a positive integer)")
    if attention == "gqa" and m["num_attention_heads"] % m["num_key_value_heads"]:
        raise r.err("num_key_value_heads", f"num_attention_heads ({m['num_attention_heads']}) "
                    f"must be divisible by num_key_value_heads ({m['num_key_value_heads']})")
    if m["window_layers"] > layers:
        raise r.err("window_layers", f"expected at most layers ({layers})")
    if m["window_layers"] and m["window"] is None:
        raise r.err("window", "required when window_layers > 0 (expected tokens)")
    if m["dense_layers"] > layers:
        raise r.err("dense_layers", f"expected at most layers ({layers})")
    if m["dense_layers"] and m["intermediate_size"] is None:
        raise r.err("intermediate_size", "required when dense_layers > 0")
    if m["dense_layers"] < layers:
        for name in ("moe_intermediate_size", "num_experts", "experts_per_token"):
            if m[name] is None:
                raise r.err(name, "required when dense_layers < layers (MoE layers)")
        if m["experts_per_token"] > m["num_experts"]:
            raise r.err("experts_per_token", f"expected at most num_experts ({m['num_experts']})")
    return Model(**m)


def load_models(path):
    rows = _read(path, MODEL_FIELDS)
    return rows, _unique(rows, [_model_row(r) for r in rows])


# ------------------------------------------------------------------ the bundled catalogue
@dataclass(frozen=True)
class Catalogue:
    gpus: dict
    links: dict
    tiers: dict
    models: dict
    efficiencies: dict
    data_dir: Path


def data_path(name):
    """Path of a bundled data file."""
    return Path(str(resources.files("kvmath") / "data" / name))


def _attach_gpu_efficiency(gpu, efficiencies, path, row):
    values = {}
    for quantity, attr in (("prefill", "prefill_efficiency"), ("hbm", "hbm_efficiency")):
        own = getattr(gpu, attr)
        eff = efficiencies.get((gpu.name, quantity))
        if own is None and eff is None:
            raise DataError(path, row, attr, f"no {quantity} efficiency for GPU {gpu.name!r}: "
                            f"add a {attr} column (0 < value <= 1)")
        values[attr] = own if own is not None else eff.value
    return Gpu(**{**gpu.__dict__, **values})


@lru_cache(maxsize=None)
def bundled():
    """The catalogue shipped with the package, validated and cross-checked."""
    eff = load_efficiencies(data_path("efficiencies.csv"))
    link_rows, links = load_links(data_path("links.csv"))
    for row, link in zip(link_rows, links.values()):
        e = eff.get((link.name, "link"))
        if e is None:
            raise DataError(data_path("efficiencies.csv"), None, "item",
                            f"no link efficiency row for link {link.name!r}")
        duplex = eff.get((link.name, "duplex"))
        links[link.name] = Link(**{**link.__dict__, "efficiency": e.value,
                                   "duplex_retained": duplex.value if duplex else 1.0})
    gpu_rows, gpus = load_gpus(data_path("gpus.csv"))
    for row, gpu in zip(gpu_rows, list(gpus.values())):
        if gpu.host_link not in links:
            raise row.err("host_link", f"unknown link {gpu.host_link!r}")
        gpus[gpu.name] = _attach_gpu_efficiency(gpu, eff, data_path("gpus.csv"), row.index)
    tiers = load_tiers(data_path("tiers.csv"), set(links))
    _, models = load_models(data_path("models.csv"))
    return Catalogue(gpus, links, tiers, models, eff, data_path(""))


def _single(path, loader):
    rows, items = loader(path)
    if len(items) != 1:
        raise DataError(path, None, None, f"expected exactly one row, found {len(items)}")
    return rows[0], next(iter(items.values()))


def _resolve(name_or_path, items, loader, what):
    """A bundled item by name, or the single row of a CSV file in the bundled format:
    (row or None, item)."""
    if name_or_path in items:
        return None, items[name_or_path]
    if Path(name_or_path).suffix == ".csv" or Path(name_or_path).exists():
        return _single(name_or_path, loader)
    raise KeyError(f"unknown {what} {name_or_path!r}; bundled: {', '.join(sorted(items))}")


def resolve_model(name_or_path):
    """A bundled model by name, or the single model in a CSV file in the bundled format."""
    return _resolve(name_or_path, bundled().models, load_models, "model")[1]


def resolve_gpu(name_or_path):
    """A bundled GPU by name, or the single GPU in a CSV file in the bundled format."""
    cat = bundled()
    row, gpu = _resolve(name_or_path, cat.gpus, load_gpus, "GPU")
    if row is None:
        return gpu
    if gpu.host_link not in cat.links:
        raise row.err("host_link", f"unknown link {gpu.host_link!r}; bundled links: "
                      f"{', '.join(sorted(cat.links))}")
    return _attach_gpu_efficiency(gpu, cat.efficiencies, name_or_path, row.index)


def resolve_tier(name):
    cat = bundled()
    if name in cat.tiers:
        return cat.tiers[name]
    raise KeyError(f"unknown tier {name!r}; bundled: {', '.join(sorted(cat.tiers))}")


# ------------------------------------------------------------------ nodes and transfer curves
@dataclass(frozen=True)
class Node:
    name: str
    description: str
    gpu: str
    gpus: int
    host_dram_bytes: float
    nvme_drives: int
    nvme_drive_bytes: float
    nvme_drive_link: str
    nics: int
    source: Source
    drive: str = ""  #: drive model (kvmath/data/drives.csv); empty: none stated


NODE_FIELDS = ("name", "description", "gpu", "gpus", "host_dram_bytes", "nvme_drives",
               "nvme_drive_bytes", "nvme_drive_link", "nics", *_SOURCE_FIELDS, "verified_via",
               "notes")
NODE_OPTIONAL = ("drive",)
CURVE_FIELDS = ("curve", "transfer_bytes", "bandwidth_Bps", "kind", "source", "source_location",
                "retrieved", "conditions")


@dataclass(frozen=True)
class CurvePoint:
    curve: str
    transfer_bytes: float
    bandwidth_Bps: float
    source: str
    source_location: str
    conditions: str


def load_nodes(path, gpu_names, link_names):
    rows = _read(path, NODE_FIELDS, NODE_OPTIONAL)
    nodes = []
    for r in rows:
        gpu = r.text("gpu")
        if gpu not in gpu_names:
            raise r.err("gpu", f"unknown GPU {gpu!r}")
        link = r.text("nvme_drive_link")
        if link not in link_names:
            raise r.err("nvme_drive_link", f"unknown link {link!r}")
        nodes.append(Node(name=r.text("name"), description=r.text("description"), gpu=gpu,
                          gpus=r.integer("gpus"), host_dram_bytes=r.number("host_dram_bytes"),
                          nvme_drives=r.integer("nvme_drives", allow_zero=True),
                          nvme_drive_bytes=r.number("nvme_drive_bytes"), nvme_drive_link=link,
                          nics=r.integer("nics", allow_zero=True), source=_source(r),
                          drive=r.text("drive", required=False)))
    return _unique(rows, nodes)


def load_transfer_curves(path):
    """Measured bandwidth against transfer size, grouped by curve name."""
    curves = {}
    for r in _read(path, CURVE_FIELDS):
        r.choice("kind", {"measurement"})
        r.date("retrieved")
        point = CurvePoint(r.text("curve"), r.number("transfer_bytes"), r.number("bandwidth_Bps"),
                           r.text("source"), r.text("source_location"), r.text("conditions"))
        curves.setdefault(point.curve, []).append(point)
    return curves


@lru_cache(maxsize=None)
def nodes():
    cat = bundled()
    return load_nodes(data_path("nodes.csv"), set(cat.gpus), set(cat.links))


@lru_cache(maxsize=None)
def transfer_curves():
    return load_transfer_curves(data_path("transfer_curves.csv"))


# ------------------------------------------------------------------ prices and pause distributions
@dataclass(frozen=True)
class Price:
    name: str
    value: float
    source: Source


@dataclass(frozen=True)
class Pause:
    name: str
    distribution: str  #: lognormal or exponential
    median_s: float
    sigma: float | None
    return_probability: float
    source: Source


PRICE_FIELDS = ("name", "value", *_SOURCE_FIELDS, "notes")
PAUSE_FIELDS = ("name", "distribution", "median_s", "sigma", "return_probability",
                *_SOURCE_FIELDS, "notes")


def load_prices(path):
    rows = _read(path, PRICE_FIELDS)
    return _unique(rows, [Price(r.text("name"), r.number("value"), _source(r)) for r in rows])


def load_pauses(path):
    rows = _read(path, PAUSE_FIELDS)
    out = []
    for r in rows:
        dist = r.choice("distribution", {"lognormal", "exponential"})
        sigma = r.number("sigma", required=dist == "lognormal")
        p = r.number("return_probability")
        if p > 1:
            raise r.err("return_probability", f"expected a probability in (0, 1], got {p}")
        out.append(Pause(r.text("name"), dist, r.number("median_s"), sigma, p, _source(r)))
    return _unique(rows, out)


def resolve_pause(name_or_path):
    """A bundled pause distribution by name, or the single row of a CSV file in that format."""
    def loader(path):
        items = load_pauses(path)
        return [None] * len(items), items
    return _resolve(name_or_path, pauses(), loader, "pause distribution")[1]


@lru_cache(maxsize=None)
def prices():
    return load_prices(data_path("prices.csv"))


@lru_cache(maxsize=None)
def pauses():
    return load_pauses(data_path("pauses.csv"))


@dataclass(frozen=True)
class Threshold:
    name: str
    system: str
    parameter: str
    value_tokens: float
    source: Source


THRESHOLD_FIELDS = ("name", "system", "parameter", "value_tokens", *_SOURCE_FIELDS, "notes")


@lru_cache(maxsize=None)
def thresholds():
    """Short-prompt thresholds real systems chose, with their sources."""
    rows = _read(data_path("thresholds.csv"), THRESHOLD_FIELDS)
    return _unique(rows, [Threshold(r.text("name"), r.text("system"), r.text("parameter"),
                                    r.number("value_tokens"), _source(r)) for r in rows])
