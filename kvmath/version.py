"""Which kvmath produced a number: version, git commit and commit date.

The commit comes from git when the package sits in its git checkout; otherwise (an installed
sdist or wheel) it is "unknown". Every ``--json`` output carries :func:`version_info` as its
``kvmath_version`` object, and ``kvmath --version`` prints :func:`version_line`.
"""
from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

__version__ = "0.4.0"

PACKAGE = Path(__file__).resolve().parent
UNKNOWN = "unknown"


def _git(*args):
    try:
        out = subprocess.run(["git", "-C", str(PACKAGE), *args], capture_output=True, text=True,
                             timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@lru_cache(maxsize=None)
def version_info():
    """{'version', 'commit', 'date'}: commit is the short hash (+'-dirty' with local changes),
    date the commit's date (YYYY-MM-DD); both "unknown" outside a git checkout of kvmath."""
    info = {"version": __version__, "commit": UNKNOWN, "date": UNKNOWN}
    top = _git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != PACKAGE.parent:
        return info  # not in git, or inside some other repository
    head = _git("log", "-1", "--format=%h %cs")
    if head:
        info["commit"], info["date"] = head.split()
        if _git("status", "--porcelain", "--untracked-files=no", "--", "."):
            info["commit"] += "-dirty"
    return info


def version_line():
    """'kvmath 0.4.0 (commit abc1234, 2026-11-30)'."""
    v = version_info()
    return f"kvmath {v['version']} (commit {v['commit']}, {v['date']})"


def with_version(result):
    """The JSON object of a result with its ``kvmath_version`` added."""
    return {**result, "kvmath_version": version_info()}
