"""**random**: a node drawn uniformly for each request (seeded), as gateways' random policy. It
ignores where a cache is: over N nodes a returning turn lands on its cache's node with
probability 1/N."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0 / nodes


ROUTER = Router(name="random", code=0, reach=reach, draws=True)
