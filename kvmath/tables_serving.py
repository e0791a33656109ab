"""Engine profiles and sourced deployments (CSV tables, same rules as :mod:`kvmath.tables`).

* ``engines.csv``: what a real engine pays on the reload path: the bytes one host-link
  copy moves (its KV layout), a per-request fixed cost (seconds plus engine steps), whether
  a replicated KV head or MLA latent is read once from a node-shared tier, the storage I/O
  size and queue depth, whether offload writes overlap reloads on the host link (the link's
  measured duplex fraction then applies), and the usable HBM fraction.
* ``deployments.csv``: how a model is served on a GPU where that is published (weight and
  compute dtype, attention TP, data-parallel attention, expert parallelism).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .tables import DTYPE_BYTES, DataError, Source, _read, _source, _unique, bundled, data_path

_SRC = ("kind", "source", "source_location", "retrieved")


@dataclass(frozen=True)
class Engine:
    name: str
    engine: str
    layout: str  #: page-per-layer or contiguous-block (or ideal)
    copy_tokens: float | None  #: tokens one host-link copy moves; None: asymptotic bandwidth
    copy_spans_layers: bool  #: one copy carries every layer (else one layer)
    kv_split: bool  #: keys and values are copied separately
    request_fixed_s: float  #: per-request fixed cost of the reload path, s
    replicated_read_once: bool  #: a replicated head / MLA latent crosses node hops once
    storage_io_bytes: float | None  #: bytes of one storage read; None: asymptotic bandwidth
    queue_depth: float | None  #: storage reads in flight
    request_steps: float  #: engine steps a finished reload waits before its request runs
    writes_overlap: bool  #: offload writes share the host link with reloads (full duplex)
    hbm_usable_fraction: float  #: share of HBM the engine gives weights, KV and activations
    source: Source


@dataclass(frozen=True)
class Deployment:
    model: str
    gpu: str
    weight_dtype: str
    compute_dtype: str
    kv_dtype: str
    tp: int  #: attention tensor parallelism (GPUs that split one request's KV)
    dp_attention: bool
    ep: int  #: GPUs the routed experts are spread over
    source: Source


ENGINE_FIELDS = ("name", "engine", "layout", "copy_tokens", "copy_spans_layers", "kv_split",
                 "request_fixed_s", "replicated_read_once", "storage_io_bytes", "queue_depth",
                 "request_steps", "writes_overlap", "hbm_usable_fraction", *_SRC, "notes")
DEPLOYMENT_FIELDS = ("model", "gpu", "weight_dtype", "compute_dtype", "kv_dtype", "tp",
                     "dp_attention", "ep", *_SRC, "notes")


def _fraction(r, name):
    value = r.number(name)
    if value > 1:
        raise r.err(name, f"expected a fraction in (0, 1], got {value}")
    return value


def load_engines(path):
    rows = _read(path, ENGINE_FIELDS)
    out = []
    for r in rows:
        out.append(Engine(
            name=r.text("name"), engine=r.text("engine"),
            layout=r.choice("layout", {"page-per-layer", "contiguous-block", "ideal"}),
            copy_tokens=r.number("copy_tokens", required=False),
            copy_spans_layers=r.boolean("copy_spans_layers"), kv_split=r.boolean("kv_split"),
            request_fixed_s=r.number("request_fixed_s", allow_zero=True),
            replicated_read_once=r.boolean("replicated_read_once"),
            storage_io_bytes=r.number("storage_io_bytes", required=False),
            queue_depth=r.number("queue_depth", required=False),
            request_steps=r.number("request_steps", allow_zero=True),
            writes_overlap=r.boolean("writes_overlap"),
            hbm_usable_fraction=_fraction(r, "hbm_usable_fraction"), source=_source(r)))
        if (out[-1].storage_io_bytes is None) != (out[-1].queue_depth is None):
            raise r.err("queue_depth", "give storage_io_bytes and queue_depth together")
    return rows, _unique(rows, out)


def load_deployments(path, model_names, gpu_names):
    rows = _read(path, DEPLOYMENT_FIELDS)
    out = {}
    for r in rows:
        d = Deployment(
            model=r.text("model"), gpu=r.text("gpu"),
            weight_dtype=r.choice("weight_dtype", set(DTYPE_BYTES)),
            compute_dtype=r.choice("compute_dtype", {"bf16", "fp8"}),
            kv_dtype=r.choice("kv_dtype", set(DTYPE_BYTES)), tp=r.integer("tp"),
            dp_attention=r.boolean("dp_attention"), ep=r.integer("ep"), source=_source(r))
        if d.model not in model_names:
            raise r.err("model", f"unknown model {d.model!r}")
        if d.gpu not in gpu_names:
            raise r.err("gpu", f"unknown GPU {d.gpu!r}")
        if (d.model, d.gpu) in out:
            raise r.err("gpu", f"duplicate deployment for {d.model} on {d.gpu}")
        out[(d.model, d.gpu)] = d
    return out


@lru_cache(maxsize=None)
def engines():
    """Bundled engine profiles by name."""
    return load_engines(data_path("engines.csv"))[1]


@lru_cache(maxsize=None)
def deployments():
    """Sourced deployments by (model, gpu)."""
    cat = bundled()
    return load_deployments(data_path("deployments.csv"), set(cat.models), set(cat.gpus))


def resolve_engine(name_or_path):
    """A bundled engine profile by name, or the single row of a CSV file in that format."""
    from pathlib import Path
    items = engines()
    if name_or_path in items:
        return items[name_or_path]
    if Path(name_or_path).suffix == ".csv" or Path(name_or_path).exists():
        rows, got = load_engines(name_or_path)
        if len(got) != 1:
            raise DataError(name_or_path, None, None, f"expected exactly one row, found {len(got)}")
        return next(iter(got.values()))
    raise KeyError(f"unknown engine {name_or_path!r}; bundled: {', '.join(sorted(items))}")


