"""SymPy's solve, simplify, integrate and simultaneous subs, remembered by their inputs across processes.

The derivations (kvmath/derive*.py) solve and simplify at import. The answer path never imports
them (it runs kvmath/_numeric.py), but every book chapter and test does, and the same inputs
give the same result: each result is stored under a hash of the function name, the inputs'
``srepr`` (symbols with their assumptions) and the SymPy version, in ``$KVMATH_CACHE``
(default ``~/.cache/kvmath``). A changed derivation is a new key, so a stored result is never
stale; an unreadable or unwritable cache only costs the time of the computation.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import sympy as sp

_FILE = Path(os.environ.get("KVMATH_CACHE") or Path.home() / ".cache" / "kvmath") / \
    f"sympy-{sp.__version__}.pickle"
_store = None


def _load():
    try:
        return pickle.loads(_FILE.read_bytes())
    except Exception:  # missing, truncated or from another SymPy: start afresh
        return {}


def _save(key, value):
    try:
        merged = {**_load(), key: value}  # keep what other processes stored meanwhile
        _FILE.parent.mkdir(parents=True, exist_ok=True)
        tmp = _FILE.with_name(f"{_FILE.name}.{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(merged))
        os.replace(tmp, _FILE)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass


def _remembered(fn):
    def call(*args):
        global _store
        if _store is None:
            _store = _load()
        key = hashlib.sha256(f"{fn.__name__}{sp.srepr(args)}".encode()).hexdigest()
        if key not in _store:
            _store[key] = fn(*args)
            _save(key, _store[key])
        return _store[key]
    call.__name__, call.__doc__ = fn.__name__, f"sympy.{fn.__name__}, remembered by its inputs."
    return call


def subs_simultaneous(expr, mapping):
    """expr.subs(mapping, simultaneous=True): slow where the result has Max/Min to compare."""
    return expr.subs(mapping, simultaneous=True)


solve, simplify, integrate = (_remembered(f) for f in (sp.solve, sp.simplify, sp.integrate))
subs = _remembered(subs_simultaneous)
