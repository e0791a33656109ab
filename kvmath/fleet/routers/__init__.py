"""The routers a fleet places requests with, one module each, found here: each declares its name,
its code in the compiled routing kernel and its reach rule (:class:`~kvmath.fleet.routers.router.
Router`).

The reach is h_route of the reuse condition (:mod:`kvmath.derive.reuse`): how often a returning
conversation reaches the node that holds its cache, per router, as an analytic default (a
router that ignores where a cache is lands a turn on its holder 1 time in N over N nodes; one
that follows the cache sends it there). ``kvmath route TRACE`` measures the share on a trace
(:func:`kvmath.fleet.routing.route`), shared prefixes and load balancing included; ``--reach H``
states it (a what-if).

The compiled kernel (:func:`kvmath.traces.simulate.routing._route`) picks a request's node by
its router's code. Adding a router is one module beside these (defining ``ROUTER``, its
``name`` the module's with ``-`` for ``_``, its ``code`` the next one), its name in
:data:`ORDER`, and its branch of the kernel. This package imports nothing heavy (the options
list the routers' names).
"""
import importlib

from kvmath.logic.runtime import ScenarioError
from kvmath.fleet.routers.router import Router

#: the routers' modules (``-`` for ``_``), in the order commands list and compare them
ORDER = ("random", "round-robin", "affinity", "kv-aware")


def _load():
    out = {}
    for name in ORDER:
        router = importlib.import_module(f"{__name__}.{name.replace('-', '_')}").ROUTER
        assert isinstance(router, Router) and router.name == name, name
        out[name] = router
    assert sorted(r.code for r in out.values()) == list(range(len(out))), "codes 0, 1, ..."
    return out


#: every router by name, in :data:`ORDER`
BY_NAME = _load()
#: the routing policies' names
ROUTERS = tuple(BY_NAME)


def router(name):
    """The router of that name (a :class:`~kvmath.evaluate.values.ScenarioError` naming the
    others if none)."""
    if name not in BY_NAME:
        raise ScenarioError(f"unknown router {name!r}; expected one of {', '.join(ROUTERS)}")
    return BY_NAME[name]


def reach(name, nodes):
    """h_route: the probability a returning turn reaches its cache's node (1 on one node)."""
    r = router(name)
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    return r.reach(nodes)
