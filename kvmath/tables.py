"""The data tables (CSV, one row per item), declared in :mod:`kvmath.schema`'s terms.

Every number carries its source; units live in field names (``_Bps`` bytes per second,
``_flops`` FLOP/s, ``_bytes``, ``_s`` seconds), all SI decimal. A malformed file raises
:class:`DataError` naming the file, the row and the field, and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Annotated as A

from .schema import (Count, DataError, Date, FieldError, Flag, Fraction, NonNeg, OneOf, Pos, PosInt,
                     Source, Text, load_table)

__all__ = ["DataError", "Source", "load_table"]
#: bytes per element of each dtype; mxfp4 is 4-bit values plus one 8-bit scale per 32
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
Dtype = OneOf(*DTYPE_BYTES)
KINDS = {"datasheet-peak", "derived-from-spec", "measurement", "config", "assumption"}
#: hop name that stands for the GPU's own host link in a tier
GPU_HOST_LINK = "gpu-host-link"


def data_path(name):
    """Path of a bundled data file."""
    return Path(str(resources.files("kvmath") / "data" / name))


def known(value, names, what, field):
    """FieldError unless value is one of names."""
    if value not in names:
        raise FieldError(field, f"unknown {what} {value!r}; expected one of {', '.join(sorted(names))}")


@dataclass(frozen=True)
class Gpu:
    name: A[str, Text]
    description: A[str, Text]
    bf16_dense_flops: A[float, Pos]  #: FLOP/s, dense
    fp8_dense_flops: A[float | None, Pos]  #: FLOP/s, dense; None if no FP8 tensor cores
    hbm_capacity_bytes: A[float, Pos]
    hbm_bandwidth_Bps: A[float, Pos]
    host_link: A[str, Text]
    gpus_per_node: A[int, PosInt]  #: GPUs of one node (baseboard): they share its DRAM, drives, NICs
    source: Source
    prefill_efficiency: A[float | None, Fraction] = None  #: achieved fraction of dense peak in prefill
    hbm_efficiency: A[float | None, Fraction] = None  #: achieved fraction of HBM bandwidth

    def dense_flops(self, dtype="bf16"):
        """Dense peak FLOP/s in the compute dtype."""
        value = self.fp8_dense_flops if dtype == "fp8" else self.bf16_dense_flops
        if value is None:
            raise ValueError(f"GPU {self.name} has no {dtype} tensor-core peak")
        return value

    def check(self, links=None, efficiencies=None):
        if links is not None:
            known(self.host_link, links, "link", "host_link")
        for quantity in ("prefill", "hbm") if efficiencies is not None else ():
            if getattr(self, f"{quantity}_efficiency") is None and (self.name, quantity) not in efficiencies:
                raise FieldError(f"{quantity}_efficiency", f"no {quantity} efficiency for GPU "
                                 f"{self.name!r}: add a {quantity}_efficiency column (0 < value <= 1)")


@dataclass(frozen=True)
class Link:
    name: A[str, Text]
    description: A[str, Text]
    bandwidth_Bps: A[float, Pos]  #: peak, one direction
    latency_s: A[float, NonNeg]  #: fixed cost of one transfer
    scope: A[str, OneOf("per-gpu", "per-node")]  #: per-gpu: each GPU its own; per-node: shared
    source: Source
    efficiency: float | None = None  #: achieved fraction of bandwidth_Bps (efficiencies.csv)
    duplex_retained: float = 1.0  #: fraction of that left while the reverse direction is busy


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    item: A[str, Text]
    quantity: A[str, OneOf("prefill", "prefill-fp8", "hbm", "link", "duplex")]
    measured_value: A[float | None, Pos]
    peak_value: A[float | None, Pos]
    same_as: A[str, Text] = ""
    kind: A[str, OneOf("measurement", "assumption")]
    source: A[str, Text] = ""
    source_location: A[str, Text] = ""
    retrieved: A[str, Date]
    conditions: A[str, Text]
    value: float = float("nan")  #: measured/peak, capped at 1

    def check(self):
        for name in ("source", "source_location") if self.kind == "measurement" else ():
            if not getattr(self, name):
                raise FieldError(name, "missing value (expected text for a measurement)")
        for name in ("measured_value", "peak_value") if not self.same_as else ():
            if getattr(self, name) is None:
                raise FieldError(name, "missing value (expected a positive number)")


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
class TierRow:
    tier: A[str, Text]
    hop: A[str, Text]
    count: A[int, PosInt]
    description: A[str | None, Text]
    source: A[str | None, Text]
    source_location: A[str | None, Text]
    retrieved: A[str | None, Date]

    def check(self, links):
        if self.hop != GPU_HOST_LINK:
            known(self.hop, links, "link", "hop")


_NEEDS = {"gqa": ("num_key_value_heads", "head_dim"),
          "mla": ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}


@dataclass(frozen=True)
class Model:
    name: A[str, Text]
    hf_repo: A[str, Text]
    attention: A[str, OneOf("gqa", "mla")]  #: gqa (covers MHA and MQA) or mla
    layers: A[int, PosInt]
    window_layers: A[int, Count]
    window: A[int | None, PosInt]
    hidden_size: A[int, PosInt]
    num_attention_heads: A[int, PosInt]
    num_key_value_heads: A[int | None, PosInt]
    head_dim: A[int | None, PosInt]
    kv_lora_rank: A[int | None, PosInt]
    qk_rope_head_dim: A[int | None, PosInt]
    qk_nope_head_dim: A[int | None, PosInt]
    v_head_dim: A[int | None, PosInt]
    q_lora_rank: A[int | None, Count]
    intermediate_size: A[int | None, PosInt]
    moe_intermediate_size: A[int | None, PosInt]
    num_experts: A[int | None, PosInt]
    experts_per_token: A[int | None, PosInt]
    shared_experts: A[int | None, Count]
    dense_layers: A[int, Count]
    vocab_size: A[int, PosInt]
    tie_word_embeddings: A[bool, Flag]
    weight_dtype: A[str, Dtype]
    kv_dtype: A[str, Dtype]
    max_context_tokens: A[int, PosInt]  #: the context window (max_position_embeddings)
    source: Source

    def check(self):
        def need(names, why):
            for name in names:
                if getattr(self, name) is None:
                    raise FieldError(name, f"required {why}")
        need(_NEEDS[self.attention], f"for attention {self.attention} (expected a positive integer)")
        if self.attention == "gqa" and self.num_attention_heads % self.num_key_value_heads:
            raise FieldError("num_key_value_heads", f"num_attention_heads ({self.num_attention_heads}) "
                             f"must be divisible by num_key_value_heads ({self.num_key_value_heads})")
        for name in ("window_layers", "dense_layers"):
            if getattr(self, name) > self.layers:
                raise FieldError(name, f"expected at most layers ({self.layers})")
        need(("window",) if self.window_layers else (), "when window_layers > 0 (expected tokens)")
        need(("intermediate_size",) if self.dense_layers else (), "when dense_layers > 0")
        if self.dense_layers < self.layers:
            need(("moe_intermediate_size", "num_experts", "experts_per_token"),
                 "when dense_layers < layers (MoE layers)")
            if self.experts_per_token > self.num_experts:
                raise FieldError("experts_per_token", f"expected at most num_experts ({self.num_experts})")

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


load_gpus, load_links, load_models = (partial(load_table, cls=c) for c in (Gpu, Link, Model))


def load_tiers(path, link_names):
    out = {}
    for r in load_table(path, TierRow, key=None, links=link_names):
        t = out.setdefault(r.tier, Tier(r.tier, r.description or "", ()))
        out[r.tier] = replace(t, hops=t.hops + (Hop(r.hop, r.count),))
    return out


def load_efficiencies(path):
    rows = load_table(path, Efficiency, key=("item", "quantity"))
    out = {k: replace(e, value=min(1.0, e.measured_value / e.peak_value))
           for k, e in rows.items() if not e.same_as}
    for i, (k, e) in enumerate(rows.items(), start=1):
        if e.same_as:
            if (e.same_as, e.quantity) not in out:
                raise DataError(path, i, "same_as", f"no measured {e.quantity} efficiency for {e.same_as!r}")
            out[k] = replace(e, value=out[(e.same_as, e.quantity)].value)
    return {k: out[k] for k in rows}


@dataclass(frozen=True)
class Catalogue:
    gpus: dict
    links: dict
    tiers: dict
    models: dict
    efficiencies: dict
    data_dir: Path


def _with_efficiency(gpu, eff):
    return replace(gpu, **{f"{q}_efficiency": getattr(gpu, f"{q}_efficiency") or eff[(gpu.name, q)].value
                           for q in ("prefill", "hbm")})


@lru_cache(maxsize=None)
def bundled():
    """The catalogue shipped with the package, validated and cross-checked."""
    eff = load_efficiencies(data_path("efficiencies.csv"))
    links = load_links(data_path("links.csv"))
    for name, link in links.items():
        if (name, "link") not in eff:
            raise DataError(data_path("efficiencies.csv"), None, "item",
                            f"no link efficiency row for link {name!r}")
        duplex = eff.get((name, "duplex"))
        links[name] = replace(link, efficiency=eff[(name, "link")].value,
                              duplex_retained=duplex.value if duplex else 1.0)
    gpus = load_gpus(data_path("gpus.csv"), links=links, efficiencies=eff)
    gpus = {n: _with_efficiency(g, eff) for n, g in gpus.items()}
    tiers = load_tiers(data_path("tiers.csv"), set(links))
    return Catalogue(gpus, links, tiers, load_models(data_path("models.csv")), eff, data_path(""))


def single(name_or_path, items, load, what):
    """A bundled item by name, or the single row of a CSV file in the same format."""
    if name_or_path in items:
        return items[name_or_path]
    if Path(name_or_path).suffix == ".csv" or Path(name_or_path).exists():
        got = load(name_or_path)
        if len(got) != 1:
            raise DataError(name_or_path, None, None, f"expected exactly one row, found {len(got)}")
        return next(iter(got.values()))
    raise KeyError(f"unknown {what} {name_or_path!r}; bundled: {', '.join(sorted(items))}")


def resolve_model(name_or_path):
    """A bundled model by name, or the single model in a CSV file in the bundled format."""
    return single(name_or_path, bundled().models, load_models, "model")


def resolve_gpu(name_or_path):
    """A bundled GPU by name, or the single GPU in a CSV file in the bundled format."""
    cat = bundled()
    return _with_efficiency(single(name_or_path, cat.gpus, lambda p: load_gpus(
        p, links=cat.links, efficiencies=cat.efficiencies), "GPU"), cat.efficiencies)


def resolve_tier(name):
    tiers = bundled().tiers
    if name not in tiers:
        raise KeyError(f"unknown tier {name!r}; bundled: {', '.join(sorted(tiers))}")
    return tiers[name]


@dataclass(frozen=True)
class Node:
    name: A[str, Text]
    description: A[str, Text]
    gpu: A[str, Text]
    gpus: A[int, PosInt]
    host_dram_bytes: A[float, Pos]
    nvme_drives: A[int, Count]
    nvme_drive_bytes: A[float, Pos]
    nvme_drive_link: A[str, Text]
    nics: A[int, Count]
    source: Source
    drive: A[str, Text] = ""  #: drive model (kvmath/data/drives.csv); empty: none stated

    def check(self, gpus=(), links=()):
        known(self.gpu, gpus, "GPU", "gpu")
        known(self.nvme_drive_link, links, "link", "nvme_drive_link")


@dataclass(frozen=True)
class CurvePoint:
    curve: A[str, Text]
    transfer_bytes: A[float, Pos]
    bandwidth_Bps: A[float, Pos]
    kind: A[str, OneOf("measurement")]
    source: A[str, Text]
    source_location: A[str, Text]
    retrieved: A[str, Date]
    conditions: A[str, Text]


CURVE_FIELDS = tuple(CurvePoint.__dataclass_fields__)


def load_nodes(path, gpu_names, link_names):
    return load_table(path, Node, gpus=gpu_names, links=link_names)


def load_transfer_curves(path):
    """Measured bandwidth against transfer size, grouped by curve name."""
    curves = {}
    for p in load_table(path, CurvePoint, key=None):
        curves.setdefault(p.curve, []).append(p)
    return curves


@lru_cache(maxsize=None)
def nodes():
    cat = bundled()
    return load_nodes(data_path("nodes.csv"), set(cat.gpus), set(cat.links))


@lru_cache(maxsize=None)
def transfer_curves():
    return load_transfer_curves(data_path("transfer_curves.csv"))


@dataclass(frozen=True)
class Price:
    name: A[str, Text]
    value: A[float, Pos]
    source: Source


@dataclass(frozen=True)
class Pause:
    name: A[str, Text]
    distribution: A[str, OneOf("lognormal", "exponential")]
    median_s: A[float, Pos]
    sigma: A[float | None, Pos]
    return_probability: A[float, Fraction]
    source: Source

    def check(self):
        if self.distribution == "lognormal" and self.sigma is None:
            raise FieldError("sigma", "missing value (expected a positive number for lognormal)")


@dataclass(frozen=True)
class Threshold:
    name: A[str, Text]
    system: A[str, Text]
    parameter: A[str, Text]
    value_tokens: A[float, Pos]
    source: Source


load_prices, load_pauses = partial(load_table, cls=Price), partial(load_table, cls=Pause)


def resolve_pause(name_or_path):
    """A bundled pause distribution by name, or the single row of a CSV file in that format."""
    return single(name_or_path, pauses(), load_pauses, "pause distribution")


@lru_cache(maxsize=None)
def prices():
    return load_prices(data_path("prices.csv"))


@lru_cache(maxsize=None)
def pauses():
    return load_pauses(data_path("pauses.csv"))


@lru_cache(maxsize=None)
def thresholds():
    """Short-prompt thresholds real systems chose, with their sources."""
    return load_table(data_path("thresholds.csv"), Threshold)
