"""One router's declaration (:class:`Router`); the registry is :mod:`kvmath.fleet.routers`. How a
fleet is routed (the trace read in chunks, every node's cache, the load window, what is counted)
is written once, in :func:`kvmath.fleet.routing.route` and its compiled kernel
(:mod:`kvmath.traces.simulate.routing`), in terms of what a router declares here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Router:
    """One routing policy: its name, its branch of the compiled kernel, and its reach."""

    name: str  #: the registry's key (the module's name, ``_`` for ``-``)
    #: the kernel's branch for it (:func:`kvmath.traces.simulate.routing._route` compares a
    #: request's router code against these): 0, 1, ... in the registry
    code: int
    #: h_route over N nodes (an int >= 1): the probability a returning turn reaches the node
    #: holding its cache, the analytic default that ``kvmath route`` measures
    reach: Callable[[int], float]
    #: it draws a node per request (seeded, uniform over the nodes), handed to the kernel
    draws: bool = False
