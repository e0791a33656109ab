"""Scenario files: a TOML table of command-line options, so a design can be written down once.

Keys are the long option names with ``_`` for ``-`` (``resume_rate = 2``); options given on
the command line override the file. A wrong key, type or value raises :class:`DataError`
naming the file, the key and what was expected. Relative file paths (``node = "my.csv"``)
are read relative to the scenario file.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from .schema import regular_file
from .tables import DataError


def _text(v):
    if isinstance(v, str) and v.strip():
        return v.strip()
    raise ValueError("expected non-empty text")


def _positive_int(v):
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v
    raise ValueError("expected a positive integer")


def _count(v):
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    raise ValueError("expected a non-negative integer")


#: the magnitudes a real-valued option may take: beyond them products of inputs under- or
#: overflow (a bandwidth of 1e-300 GB/s times an efficiency of 1e-300 is zero)
SMALLEST, LARGEST = 1e-15, 1e15


def _positive(v):
    if (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and SMALLEST <= v <= LARGEST):
        return float(v)
    raise ValueError(f"expected a positive number from {SMALLEST:g} to {LARGEST:g}")


def _fraction(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool) and SMALLEST <= v <= 1:
        return float(v)
    raise ValueError(f"expected a fraction from {SMALLEST:g} to 1")


def _reserve(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1:
        return float(v)
    raise ValueError("expected a fraction in [0, 1)")


def _dtype(v):
    if v in ("bf16", "fp8"):
        return v
    raise ValueError("expected one of bf16, fp8")


def _prefill(v):
    if v in ("calibrated", "ideal"):
        return v
    raise ValueError("expected one of calibrated, ideal")


def _boolean(v):
    if isinstance(v, bool):
        return v
    raise ValueError("expected true or false")


#: every key a scenario may hold, with its check
KEYS = {"model": _text, "gpu": _text, "tier": _text, "tokens": _positive_int, "tp": _positive_int,
        "pause": _text, "node": _text, "resume_rate": _positive, "compute_dtype": _dtype,
        "gpu_price": _positive, "gpu_memory_utilization": _fraction,
        "activation_reserve": _reserve, "batch_seqs": _count, "batch_context": _positive_int,
        "writes_within_rating": _boolean, "ep": _positive_int, "batch": _positive_int,
        "engine": _text, "concurrent_reloads": _positive, "prefill": _prefill,
        "kv_dtype": _text, "new_tokens": _positive_int, "token_ids": _boolean,
        "prices": _text, "dram_price": _positive, "nvme_price": _positive}
#: keys that name a file when they end in .csv (read relative to the scenario)
PATH_KEYS = ("model", "gpu", "node", "pause", "engine", "prices")


def load_scenario(path, allowed):
    """{key: checked value} from a TOML file, of the keys in allowed (a subset of KEYS) only:
    one scenario file serves every command, so a key of KEYS that this command does not use is
    checked and left out (:func:`unused_keys` names them); any other key is an error."""
    path = regular_file(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable TOML file ({exc})") from None
    except RecursionError:  # tables nested hundreds deep: no scenario is
        raise DataError(path, None, None, "not a scenario: its tables nest too deep") from None
    out = {}
    for key, value in data.items():
        if key not in KEYS:
            raise DataError(path, None, key, f"unknown key; expected one of "
                            f"{', '.join(sorted(KEYS))}")
        try:
            checked = KEYS[key](value)
        except ValueError as exc:
            raise DataError(path, None, key, f"{exc}, got {value!r}") from None
        if key not in allowed:  # another command's key: checked, not used here
            continue
        out[key] = checked
        if key in PATH_KEYS and out[key].endswith(".csv") and not Path(out[key]).is_absolute():
            out[key] = str(path.parent / out[key])
    return out


def unused_keys(path, allowed):
    """The keys of a scenario file that this command (its keys: allowed) does not use, sorted."""
    if path is None:
        return []
    data = tomllib.loads(regular_file(path).read_text(encoding="utf-8"))  # checked already
    return sorted(k for k in data if k not in allowed)


def merge(args, path, allowed):
    """Fill each option of argparse namespace args left unset (None) from the scenario file,
    and record the file's keys this command does not use (``args.scenario_keys_not_used``)."""
    if path is None:
        return args
    for key, value in load_scenario(path, allowed).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.scenario_keys_not_used = unused_keys(path, allowed)
    return args
