"""One attention family's expressions and rules (:class:`Family`); the registry is
:mod:`kvmath.derive.attention`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import sympy as sp


@dataclass(frozen=True)
class Family:
    """One attention family (a value of models.csv ``attention``)."""

    name: str  #: the models.csv value
    title: str  #: how the book and the CLI name it (MLA, DSA; GQA families say MHA/GQA/MQA)
    about: str  #: one sentence: what its layers keep per token
    #: symbol name -> models.csv field read as that symbol's value
    fields: dict
    #: symbol name -> SymPy expression of the fields' symbols (evaluated after them)
    derived: dict
    #: KV elements stored per token per attention layer (one copy)
    e_kv: sp.Expr
    #: copies of the KV across K tensor-parallel GPUs
    rho: sp.Expr
    #: attention weights of one layer (every projection, no norms)
    attn_params: sp.Expr
    #: (GEMM time of a list of (k, n) shapes, K_d) -> the layer's projections' time (SymPy)
    projections: Callable
    #: (K_d) -> elements per token the layer's RoPE kernel moves on one GPU
    rope_elements: Callable
    #: True when the KV is one tensor every rank holds whole (an MLA latent): any TP splits the
    #: query heads only, keys and values are not copied apart, and an engine's "mla" rules
    #: (read once, stored once per node) apply
    replicated_latent: bool
    #: elements of one token's KV head: the block a per-head scale covers (dtypes.csv
    #: block_is_head)
    head_elements: sp.Expr
    #: (field that must divide, field it divides): a rule across the row's own fields
    divides: tuple = ()
    #: extra per-token cache beside the KV, elements per token per layer (an indexer's keys);
    #: its bytes per element come from the model row's aux_kv_dtype
    aux_elements: sp.Expr = sp.Integer(0)
    #: fields that must hold a positive integer for this family
    required: tuple = field(default=())

    def metadata(self):
        """What the answer path needs of the family without SymPy (printed into
        kvmath._generated.numeric.FAMILIES): names, fields and rules, no expressions."""
        return {"name": self.name, "title": self.title, "about": self.about,
                "aux": self.aux_elements != 0,
                "fields": dict(self.fields), "derived": tuple(self.derived),
                "required": tuple(self.required), "divides": tuple(self.divides),
                "replicated_latent": self.replicated_latent}
