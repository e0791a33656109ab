"""kvmath: when does reloading a paused conversation's KV cache beat recomputing it?

Layout: :mod:`kvmath.derive.symbols` (symbols), :mod:`kvmath.derive.kv` (SymPy derivations),
:mod:`kvmath.tables.rows` (sourced data tables), :mod:`kvmath.evaluate.compare` (lambdified
numbers), :mod:`kvmath.cli.main` (command line).
"""
from kvmath.tables.rows import DataError, bundled, resolve_gpu, resolve_model, resolve_tier

__all__ = ["compare", "crossings", "sweep", "DataError", "bundled", "resolve_gpu",
           "resolve_model", "resolve_tier"]
from kvmath.version import __version__  # noqa: E402  (one place: kvmath/version.py)


def __getattr__(name):
    """compare, crossings, sweep on first use: the SymPy derivations behind them take seconds
    to import, which modules that never need them (traces, cachesim) should not pay."""
    if name in ("compare", "crossings", "sweep"):
        from kvmath.evaluate import compare as evaluate
        return getattr(evaluate, name)
    raise AttributeError(f"module 'kvmath' has no attribute {name!r}")
