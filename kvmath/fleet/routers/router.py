"""One router's declaration (:class:`Router`) and its parameters (:class:`Param`); the registry
is :mod:`kvmath.fleet.routers`. How a fleet is routed and served (every replica's live state,
what each router reads of it) is written once, in the compiled loop
(:func:`kvmath.traces.simulate.serve.pick`), in terms of what a router declares here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Param:
    """One parameter of a router, its deployed default and where that default was read."""
    name: str  #: ``--router-param NAME=VALUE``
    default: float
    help: str
    source: str


@dataclass(frozen=True)
class Router:
    """One routing policy: its name, its branch of the compiled kernel, its reach and its
    parameters (in the order of the kernel's parameter vector ``Route.w``)."""

    name: str  #: the registry's key (the module's name, ``_`` for ``-``)
    #: the kernel's branch for it (:func:`kvmath.traces.simulate.serve.pick` compares a
    #: request's router code against these): 0, 1, ... in the registry
    code: int
    #: h_route over N nodes (an int >= 1): the probability a returning turn reaches the node
    #: holding its cache, the analytic default that ``kvmath route`` measures
    reach: Callable[[int], float]
    #: it draws a node per request (seeded, uniform over the nodes)
    draws: bool = False
    params: tuple = ()  #: its :class:`Param` s, in the kernel's order
    #: the parameters (by name) that size its own index of what it routed where, in tokens:
    #: (capacity per replica, tokens of a prompt it matches); None: it keeps none
    index: tuple | None = None
    source: str = ""  #: the router as deployed: where its rule was read
