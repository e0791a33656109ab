"""The attention families as the answer path sees them: names, fields and rules from
:mod:`kvmath.derive.attention`, printed into the generated code (no SymPy here)."""
from __future__ import annotations

from dataclasses import dataclass

from kvmath._generated import numeric as _numeric

#: the generated table (absent only while scripts/generate_numeric.py writes a first or stale
#: file: tests/codegen/test_numeric.py fails on a stale one)
_FAMILIES = getattr(_numeric, "FAMILIES", {})


@dataclass(frozen=True)
class FamilyInfo:
    """One attention family's metadata (kvmath.derive.attention.Family.metadata)."""

    name: str
    title: str  #: MLA, DSA, ...; "GQA" families go by MHA, GQA or MQA (:meth:`kind`)
    about: str
    fields: dict  #: symbol name -> models.csv field
    derived: tuple  #: symbols it derives from its fields (d_qk, d_v)
    required: tuple  #: fields that must hold a positive integer
    divides: tuple  #: (part, whole): a field that must divide another, or ()
    replicated_latent: bool  #: its KV is one tensor every rank holds whole
    aux: bool = False  #: its layers cache more than the KV (a sparse model's indexer keys)

    def kind(self, n_q, n_kv):
        """The name a model of this family goes by: GQA by heads (MHA, GQA, MQA), else the title."""
        if self.title != "GQA":
            return self.title
        return {n_q: "MHA", 1: "MQA"}.get(n_kv, "GQA")


#: every family by its models.csv name
FAMILIES = {name: FamilyInfo(**meta) for name, meta in _FAMILIES.items()}


def family(name):
    """The family of a models.csv ``attention`` value (KeyError if none)."""
    return FAMILIES[name]
