"""What the book's executed outputs depend on, as one digest (see scripts/execute_book.py).

The digest covers kvmath's code and data, the chapter notebooks, the pinned requirements and
the Python version. The execution cache (``_build/.jupyter_cache``) is trusted only when its
stamp holds the digest of the inputs it was executed from.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = CACHE / "kvmath-inputs.sha256"
#: Sphinx's parsed pages: stale once the chapters are executed again
DOCTREES = ROOT / "_build" / ".doctrees"
INPUTS = ("kvmath/**/*", "book/*.ipynb", "requirements.txt", "pyproject.toml")


def inputs_digest(root=ROOT):
    """SHA-256 over the paths and bytes of every input file, and the Python version."""
    h = hashlib.sha256(sys.version.encode())
    files = sorted({p for pattern in INPUTS for p in root.glob(pattern)
                    if p.is_file() and "__pycache__" not in p.parts})
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def cache_is_current(cache=CACHE):
    """True when the cache was executed from the inputs as they are now."""
    stamp = Path(cache) / STAMP.name
    return stamp.exists() and stamp.read_text().strip() == inputs_digest()
