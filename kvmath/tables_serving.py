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
from typing import Annotated as A

from .schema import FieldError, Flag, Fraction, NonNeg, OneOf, Pos, PosInt, Source, Text, load_table
from .tables import Dtype, bundled, data_path, known, single


@dataclass(frozen=True)
class Engine:
    name: A[str, Text]
    engine: A[str, Text]
    layout: A[str, OneOf("page-per-layer", "contiguous-block", "ideal")]
    copy_tokens: A[float | None, Pos]  #: tokens one host-link copy moves; None: asymptotic bandwidth
    copy_spans_layers: A[bool, Flag]  #: one copy carries every layer (else one layer)
    kv_split: A[bool, Flag]  #: keys and values are copied separately
    request_fixed_s: A[float, NonNeg]  #: per-request fixed cost of the reload path, s
    replicated_read_once: A[bool, Flag]  #: a replicated head / MLA latent crosses node hops once
    storage_io_bytes: A[float | None, Pos]  #: bytes of one storage read; None: asymptotic bandwidth
    queue_depth: A[float | None, Pos]  #: storage reads in flight
    request_steps: A[float, NonNeg]  #: engine steps a finished reload waits before its request runs
    writes_overlap: A[bool, Flag]  #: offload writes share the host link with reloads (full duplex)
    hbm_usable_fraction: A[float, Fraction]  #: share of HBM for weights, KV and activations
    source: Source

    def check(self):
        if (self.storage_io_bytes is None) != (self.queue_depth is None):
            raise FieldError("queue_depth", "give storage_io_bytes and queue_depth together")


@dataclass(frozen=True)
class Deployment:
    model: A[str, Text]
    gpu: A[str, Text]
    weight_dtype: A[str, Dtype]
    compute_dtype: A[str, OneOf("bf16", "fp8")]
    kv_dtype: A[str, Dtype]
    tp: A[int, PosInt]  #: attention tensor parallelism (GPUs that split one request's KV)
    dp_attention: A[bool, Flag]
    ep: A[int, PosInt]  #: GPUs the routed experts are spread over
    source: Source

    def check(self, models=(), gpus=()):
        known(self.model, models, "model", "model")
        known(self.gpu, gpus, "GPU", "gpu")


def load_engines(path):
    return load_table(path, Engine)


def load_deployments(path, model_names, gpu_names):
    return load_table(path, Deployment, key=("model", "gpu"), models=model_names, gpus=gpu_names)


@lru_cache(maxsize=None)
def engines():
    """Bundled engine profiles by name."""
    return load_engines(data_path("engines.csv"))


@lru_cache(maxsize=None)
def deployments():
    """Sourced deployments by (model, gpu)."""
    cat = bundled()
    return load_deployments(data_path("deployments.csv"), set(cat.models), set(cat.gpus))


def resolve_engine(name_or_path):
    """A bundled engine profile by name, or the single row of a CSV file in that format."""
    return single(name_or_path, engines(), load_engines, "engine")
