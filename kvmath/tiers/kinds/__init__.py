"""Tier kinds, one module each (defining ``KIND``, a :class:`~kvmath.tiers.kind.TierKind` whose
name is the module's with ``-`` for ``_``): how a kind's tiers sit on a node, what prices their
capacity and wear, whether an engine codes KV on them, and where they stand in a node's plan.

A tier of tiers.csv names its kind (its ``kind`` column); a pool (pools.csv) is of kind ``pool``
and a prefix still in GPU memory of kind ``hbm``. Adding a kind is one module here (its tiers in
tiers.csv, or in the module's ``tiers``): the registry finds it, the logic prices it
(:mod:`kvmath.logic.path`, :mod:`kvmath.logic.reuse`) and the node plan places it
(:mod:`kvmath.node`); tests/tiers/test_tier_kinds.py adds one of its own.
"""
import importlib
import pkgutil

from kvmath.tiers.kind import TierKind


def _discover():
    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        kind = importlib.import_module(f"{__name__}.{info.name}").KIND
        assert isinstance(kind, TierKind) and kind.name == info.name.replace("_", "-"), info.name
        out[kind.name] = kind
    return out


#: every tier kind by name, in name order
KINDS = _discover()


def kind(name):
    """The kind of that name; KeyError naming the kinds when there is none."""
    if name not in KINDS:
        raise KeyError(f"unknown tier kind {name!r}; the kinds: {', '.join(KINDS)}")
    return KINDS[name]
