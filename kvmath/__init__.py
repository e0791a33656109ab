"""kvmath: when does reloading a paused conversation's KV cache beat recomputing it?

Layout: :mod:`kvmath.derive` (the SymPy derivations), :mod:`kvmath.tables` (the sourced data
tables), :mod:`kvmath.logic` (the scenario's logic, written once for the command line and the
calculator), :mod:`kvmath.scenario` (options, the scenario record, scenario files),
:mod:`kvmath.evaluate.api` (the Python face), :mod:`kvmath.cli` (the command line).

Importing the package loads nothing but its version: the names below load on first use, so the
command line's entry point (:mod:`kvmath.entry`) is in charge before anything heavy loads (an
interrupt then is one line, not a traceback), and modules that never need the SymPy derivations
(traces, cachesim) do not pay for them.
"""
__all__ = ["compare", "crossings", "sweep", "DataError", "bundled", "resolve_gpu",
           "resolve_model", "resolve_tier"]


def __getattr__(name):
    """The version (one place: kvmath/version.py), the tables' names and compare, crossings,
    sweep, each on first use."""
    if name == "__version__":
        from kvmath.version import __version__
        return __version__
    if name in ("DataError", "bundled", "resolve_gpu", "resolve_model", "resolve_tier"):
        from kvmath.tables import rows
        return getattr(rows, name)
    if name in ("compare", "crossings", "sweep"):
        from kvmath.evaluate import api
        return getattr(api, name)
    raise AttributeError(f"module 'kvmath' has no attribute {name!r}")
