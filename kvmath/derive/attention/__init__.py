"""Attention families, one module each: what a layer's KV holds, how tensor parallelism copies
it, what its projections weigh and cost in a prefill.

A family is named by the ``attention`` value of a model row (``kvmath/data/models.csv``). Every
expression downstream (KV bytes, FLOPs, times) is written once, in
:mod:`kvmath.derive.kv` and :mod:`kvmath.derive.prefill`, in terms of the symbols a family
defines here: the KV elements per token and layer ``e_kv``, the copies ``rho`` across ``K``
tensor-parallel GPUs, the attention weights per layer, the query/key and value widths one
query-key pair costs (``d_qk``, ``d_v``), the GEMM shapes of its projections. Adding a family is
one module beside these (defining ``FAMILY``) and its value in the data package's
``attention`` enum (tests/tables/test_tables.py holds the two equal).
"""
import importlib
import pkgutil

from kvmath.derive.attention.family import Family


def _discover():
    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "family":
            continue
        fam = importlib.import_module(f"{__name__}.{info.name}").FAMILY
        assert isinstance(fam, Family) and fam.name == info.name, info.name
        out[fam.name] = fam
    return out


#: every family by its models.csv name (its module's name), in name order
FAMILIES = _discover()


def family(name):
    """The family of a models.csv ``attention`` value (KeyError if none)."""
    return FAMILIES[name]
