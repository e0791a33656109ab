"""Routing a trace over a fleet: which node each request reaches, and what that costs in hits
(:func:`route`), as the fleet serves it (:func:`kvmath.fleet.run.fleet_of`, no tier replay): each
router of :mod:`kvmath.fleet.routers` places every request from the replicas' live state as it
arrives, and each replica's engine schedules it.

Reported per router: ``token_hit_rate`` (prompt tokens found in the replica's HBM or loaded from
the tiers below it), ``reach_continuation`` (of the requests that continue an earlier turn, the
share routed to the node that served that turn: the h_route of the analytic reuse condition,
measured), ``load_imbalance`` (the busiest node's routed prompt tokens over the mean), and the
time to first token it gives.
"""
from __future__ import annotations

import numpy as np

from kvmath.logic.runtime import ScenarioError


def route(trace, model, node, nodes, router, seed=0, assignment=False, parent=None, **fields):
    """``trace`` served on ``nodes`` copies of ``node`` under ``router`` (any field of the
    scenario record by name: tp, scheduler, kv_capacity, router_param, ...); the dict described
    above, with ``assignment`` (the node of each request, an int32 array) when asked for."""
    from kvmath.fleet.routers import router as router_named
    from kvmath.fleet.run import fleet_of, scenario_for
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    if trace.sample_rate < 1:
        raise ScenarioError("routing needs the whole trace, not a SHARDS sample")
    name = router_named(router).name
    s = scenario_for(model, node, nodes, name, seed=seed, **fields)
    cap = {}
    a = fleet_of(trace, s, tier_replay=False, parent=parent, capture=cap)
    out = {"router": name, "nodes": nodes, "requests": trace.n_requests,
           "token_hit_rate": a["token_hit_rate"], "token_hit_rate_hbm": a["token_hit_rate_hbm"],
           "reach_continuation": a["reach_continuation"], "load_imbalance": a["load_imbalance"],
           "ttft_s": a["ttft_s"], "keeps_up": a["keeps_up"], "layout": a["layout"]}
    if assignment:
        rep = cap["out"]["replica"]
        out["assignment"] = np.where(rep >= 0, rep // a["replicas_per_node"], -1).astype(np.int32)
    return out
