"""What every command prints: one JSON object or its human lines.

Shared by every command group's module (:mod:`kvmath.cli`), so none imports another for it.
"""
from __future__ import annotations

import json
import math

from kvmath.tables.rows import projections_used
from kvmath.version import with_version


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
    does not use (another command's) are named, never skipped silently."""
    unused = getattr(args, "scenario_keys_not_used", None)
    if args.scenario:
        result["scenario_keys_not_used"] = unused or []
    used = projections_used()
    if used:  # every answer that rests on an announced part says so
        result["projections"] = used
    if args.json:
        print(dump(result))
        return
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
        line += f"; not modelled: {', '.join(cfg['not_modelled'])}"
    return line
