"""What every command prints: one JSON object or its human lines.

Shared by every command group's module (:mod:`kvmath.cli`), so none imports another for it.
"""
from __future__ import annotations

import json
import math
import re

from kvmath.tables.rows import projections_used
from kvmath.version import with_version


#: a character a terminal does not print as itself: C0 and C1 controls (a newline, ESC of a
#: terminal escape, ...), DEL, and what str.isprintable refuses beyond them (line and paragraph
#: separators, bidirectional overrides)
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e"
                          r"\u2066-\u2069\ufeff]")
#: the longest error line printed: a name or value quoted in it is cut in the middle beyond
ERROR_CHARS = 2000


def printable(text):
    """``text`` with every character a terminal would act on (a newline, a terminal escape, a
    bidirectional override) written as its Python escape (``\\n``, ``\\x1b``): a name from a
    user's file or a path on the command line prints as one visible line, never moves the
    cursor, recolours the terminal or makes a second line."""
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def printable_values(x):
    """A result with every text in it :func:`printable` (keys and values, nested): what the
    human lines are formatted from."""
    if isinstance(x, str):
        return printable(x)
    if isinstance(x, dict):
        return {printable_values(k): printable_values(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(printable_values(v) for v in x)
    return x


def error_line(message):
    """An error message as the one line printed: :func:`printable`, and at most
    :data:`ERROR_CHARS` characters (the middle of a longer one, a 5 MB name quoted in it, left
    out and counted)."""
    text = printable(str(message))
    if len(text) > ERROR_CHARS:
        cut = len(text) - ERROR_CHARS
        text = (f"{text[:ERROR_CHARS * 3 // 4]} ... ({cut:,} characters left out) ... "
                f"{text[-ERROR_CHARS // 4:]}")
    return text


def dump(result):
    """``result`` as one JSON object with the version stamp; inf and nan become null."""
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    return json.dumps(clean(with_version(result)))


def print_result(args, result, human):
    """One JSON object, or the human lines; with a scenario file, the keys of it this command
    does not use (another command's) are named, never skipped silently. The human lines are
    formatted from the result with every name in it :func:`printable` (a pool or node name, a
    trace's path)."""
    unused = getattr(args, "scenario_keys_not_used", None)
    if args.scenario:
        result["scenario_keys_not_used"] = unused or []
    used = projections_used()
    if used:  # every answer that rests on an announced part says so
        result["projections"] = used
    if args.json:  # JSON escapes every control character itself
        print(dump(result))
        return
    result, used, unused = (printable_values(x) for x in (result, used, unused))
    print(human(result))
    if used:
        print(f"projection: this answer uses {', '.join(used)}: announced parts, not measured "
              "(--allow-projection)")
    cfg = result.get("engine_config")
    if cfg:
        print(engine_config_line(cfg))
    if unused:
        print(f"note: scenario key(s) {', '.join(unused)} are not used by {args.command}")


def engine_config_line(cfg):
    """The human line saying what an --engine-config file set, and what it holds that kvmath
    does not model."""
    def size(x, medium):
        return f"all of the node's {medium}" if x is None else f"{x / 1e9:,.4g} GB"
    parts = [f"engine settings {cfg['file']} ({cfg['format']}): profile {cfg['engine']}"]
    if cfg["host_cache_hbm_ratio"] is not None:
        parts.append(f"host cache {cfg['host_cache_hbm_ratio']:g}x the HBM KV pool")
    elif cfg["host_cache_bytes_per_gpu"] is not None:
        parts.append(f"host cache {size(cfg['host_cache_bytes_per_gpu'], 'DRAM')} per GPU"
                     + (" (rank 0 of each engine stores an MLA latent)"
                        if cfg["first_rank_only"] else ""))
    elif cfg["host_cache_bytes_per_engine"] is not None:
        parts.append(f"host cache {size(cfg['host_cache_bytes_per_engine'], 'DRAM')} per "
                     "engine (each replica of TP ranks)")
    else:
        parts.append("host cache all of the node's DRAM")
    if not cfg["disk_tier"]:
        parts.append("no disk tier")
    elif cfg["disk_cache_bytes_per_gpu"] is not None:
        parts.append(f"disk cache {size(cfg['disk_cache_bytes_per_gpu'], 'drives')} per GPU")
    else:
        parts.append(f"disk cache {size(cfg['disk_cache_bytes'], 'drives')}")
    line = "; ".join(parts)
    if cfg["not_modelled"]:
        more = cfg.get("not_modelled_count", 0) - len(cfg["not_modelled"])
        line += f"; not modelled: {', '.join(cfg['not_modelled'])}" + (
            f" and {more:,} more" if more > 0 else "")
    return line
