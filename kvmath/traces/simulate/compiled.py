"""numba's ``njit`` for the simulations, its on-disk cache keyed on their sources.

numba caches a compiled function beside its own file and checks only that file's time stamp:
a kernel that calls a function of another module keeps the callee it was compiled with after
that module changes (found after review: a fix to ``engine.lookup`` left the cached
``serve.run_fleet`` crashing as before). The simulations' kernels call across this package's
modules, so their cache lives in a directory named by a hash of every module here: a change to
any of them compiles them all afresh. ``NUMBA_CACHE_DIR`` set by the user is kept.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from numba import njit  # noqa: F401  (re-exported: the modules here take it from this one)
from numba.core import config

_HERE = Path(__file__).resolve().parent


def cache_key():
    """A hash of the package's sources (every module of kvmath/traces/simulate)."""
    h = hashlib.sha256()
    for p in sorted(_HERE.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _cache_dir():
    """Beside the sources when writable (their __pycache__), else the user's cache."""
    name = f"numba-{cache_key()}"
    local = _HERE / "__pycache__"
    try:
        local.mkdir(exist_ok=True)
        if os.access(local, os.W_OK):
            return local / name
    except OSError:
        pass
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kvmath" / name


if not os.environ.get("NUMBA_CACHE_DIR"):
    config.CACHE_DIR = str(_cache_dir())
