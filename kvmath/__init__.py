"""kvmath: when does reloading a paused conversation's KV cache beat recomputing it?

Layout: :mod:`kvmath.symbols` (symbols), :mod:`kvmath.derive` (SymPy derivations),
:mod:`kvmath.tables` (sourced data tables), :mod:`kvmath.evaluate` (lambdified
numbers), :mod:`kvmath.cli` (command line).
"""
from .tables import DataError, bundled, resolve_gpu, resolve_model, resolve_tier

__all__ = ["compare", "crossings", "sweep", "DataError", "bundled", "resolve_gpu",
           "resolve_model", "resolve_tier"]
__version__ = "0.1.0"


def __getattr__(name):
    """compare, crossings, sweep on first use: the SymPy derivations behind them take seconds
    to import, which modules that never need them (traces, cachesim) should not pay."""
    if name in ("compare", "crossings", "sweep"):
        from . import evaluate
        return getattr(evaluate, name)
    raise AttributeError(f"module 'kvmath' has no attribute {name!r}")
