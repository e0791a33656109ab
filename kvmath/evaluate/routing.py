"""How often a returning conversation reaches the node that holds its cache: h_route of the
reuse condition (:mod:`kvmath.derive.reuse`), per routing policy, as an analytic default.

- ``random`` and ``round-robin`` ignore where a cache is: over N nodes a turn lands on the
  holder with probability 1/N;
- ``affinity`` (sticky sessions) and ``kv-aware`` (the node with the longest cached prefix,
  weighed against load) send it to the holder: 1, an ASSUMPTION that holds while the holder has
  room (a kv-aware router sends a turn elsewhere when the holder is loaded; a sticky session
  moves when its node fails or is drained).

``kvmath route TRACE`` measures the share on a trace (:mod:`kvmath.traces.routing`), shared
prefixes and load balancing included; ``--reach H`` states it (a what-if).
"""
from __future__ import annotations

from kvmath.logic.runtime import ScenarioError

#: the routing policies
ROUTERS = ("random", "round-robin", "affinity", "kv-aware")


def reach(router, nodes):
    """h_route: the probability a returning turn reaches its cache's node (1 on one node)."""
    if router not in ROUTERS:
        raise ScenarioError(f"unknown router {router!r}; expected one of {', '.join(ROUTERS)}")
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    return 1.0 / nodes if router in ("random", "round-robin") else 1.0
