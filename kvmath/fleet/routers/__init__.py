"""The routers a fleet places requests with, one module each, found here: each declares its name,
its code in the compiled loop, its reach rule, its parameters with their deployed defaults and
where they were read (:class:`~kvmath.fleet.routers.router.Router`).

The reach is h_route of the reuse condition (:mod:`kvmath.derive.reuse`): how often a returning
conversation reaches the node that holds its cache, per router, as an analytic default (a
router that ignores where a cache is lands a turn on its holder 1 time in N over N nodes; one
that follows the cache sends it there). ``kvmath route TRACE`` measures the share on a trace,
shared prefixes and load balancing included; ``--reach H`` states it (a what-if).

The compiled loop (:func:`kvmath.traces.simulate.serve.pick`) picks a request's replica by its
router's code, from every replica's live state. Adding a router is one module beside these
(defining ``ROUTER``, its ``name`` the module's with ``-`` for ``_``, its ``code`` the next one),
its name in :data:`ORDER`, and its branch of the kernel. Its parameters are set with
``--router-param NAME=VALUE`` (:func:`parameters`). This package imports nothing heavy (the
options list the routers' names).
"""
import importlib

from kvmath.fleet.routers.router import Router
from kvmath.logic.runtime import ScenarioError

#: the routers' modules (``-`` for ``_``), in the order commands list and compare them
ORDER = ("random", "round-robin", "least-load", "chwbl", "affinity", "llm-d", "dynamo",
         "sglang")
#: other names of a router: kv-aware, the name Dynamo's cost went by in kvmath before the
#: routers as deployed
ALIASES = {"kv-aware": "dynamo"}


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
#: the names an option takes (the routers' and their aliases)
NAMES = ROUTERS + tuple(ALIASES)


def router(name):
    """The router of that name or alias (a ScenarioError naming the others if none)."""
    name = ALIASES.get(name, name)
    if name not in BY_NAME:
        raise ScenarioError(f"unknown router {name!r}; expected one of {', '.join(NAMES)}")
    return BY_NAME[name]


def reach(name, nodes):
    """h_route: the probability a returning turn reaches its cache's node (1 on one node)."""
    r = router(name)
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    return r.reach(nodes)


def parameters(name, given=()):
    """{parameter: value} of router ``name``: its deployed defaults, with ``given`` (``NAME=VALUE``
    texts, as ``--router-param`` takes them) in their place; a ScenarioError naming the router's
    parameters for an unknown one or a value that is not a finite non-negative number."""
    import math
    r = router(name)
    out = {p.name: float(p.default) for p in r.params}
    for text in given or ():
        key, sep, value = str(text).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in out:
            known = ", ".join(out) or "none"
            raise ScenarioError(f"--router-param {text!r}: router {r.name} has no parameter "
                                f"{key!r} (its parameters: {known}; give NAME=VALUE)")
        try:
            v = float(value)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v >= 0):
            raise ScenarioError(f"--router-param {text!r}: expected a finite non-negative "
                                "number")
        out[key] = v
    return out
