"""kvmath: when does reloading a paused conversation's KV cache beat recomputing it?

Layout: :mod:`kvmath.symbols` (symbols), :mod:`kvmath.derive` (SymPy derivations),
:mod:`kvmath.tables` (sourced data tables), :mod:`kvmath.evaluate` (lambdified
numbers), :mod:`kvmath.cli` (command line).
"""
from .evaluate import compare, crossings, sweep
from .tables import DataError, bundled, resolve_gpu, resolve_model, resolve_tier

__all__ = ["compare", "crossings", "sweep", "DataError", "bundled", "resolve_gpu",
           "resolve_model", "resolve_tier"]
from .version import __version__  # noqa: E402
