"""The fleet then and now: a release's own ``kvmath fleet`` answers, stored when it was cut
(``kvmath/data/snapshots/fleet-<release>.json``, written by ``scripts/snapshot_fleet.py`` with
that release's code), set beside today's fleet on the same case (the What changed page).

Release 0.3.0's fleet decoded in a fixed running batch and prefilled one request at a time per
replica; today's schedules every step as the engine does (:mod:`kvmath.fleet.serving`). The
same trace, model, node, router name and node count go to both; a router name that now names
another router (``kv-aware``, now Dynamo's) is said beside its row.
"""
from __future__ import annotations

import json
from functools import lru_cache

from kvmath.tables.schema import data_path


def fleet_snapshot(release):
    """The stored fleet answers of a release (a dict with 'rows')."""
    with open(data_path("snapshots") / f"fleet-{release}.json") as fh:
        return json.load(fh)


@lru_cache(maxsize=None)
def fleet_since(release):
    """Each stored row of ``release`` beside today's answer for the same router and node count:
    {router, router_now, nodes, keeps_up_then, keeps_up_now, p50_then, p50_now, p99_then,
    p99_now, hit_then, hit_now, tp_then, tp_now}; remembered per process (read it, do not
    change it)."""
    from kvmath.fleet.routers import router
    from kvmath.fleet.run import fleet
    from kvmath.tables.rows import bundled, resolve_node
    from kvmath.traces import readers as T
    snap = fleet_snapshot(release)
    trace = T.load(str(data_path("traces") / snap["trace"].split("/")[-1]))
    model, node = bundled().models[snap["model"]], resolve_node(snap["node"])
    out = []
    for row in snap["rows"]:
        now = fleet(trace, model, node, row["nodes"], row["router"], tier_replay=False,
                    percentiles=(50.0, 99.0))
        out.append({"router": row["router"], "router_now": router(row["router"]).name,
                    "nodes": row["nodes"], "keeps_up_then": row["feasible"],
                    "keeps_up_now": now["keeps_up"],
                    "p50_then": row["ttft_s"]["p50"], "p50_now": now["ttft_s"]["p50"],
                    "p99_then": row["ttft_s"]["p99"], "p99_now": now["ttft_s"]["p99"],
                    "hit_then": row["token_hit_rate"], "hit_now": now["token_hit_rate"],
                    "tp_then": row["tp"], "tp_now": now["tp"]})
    return tuple(out)
