"""**round-robin**: request i to node i mod N. It ignores where a cache is: over N nodes a
returning turn lands on its cache's node with probability 1/N."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0 / nodes


ROUTER = Router(name="round-robin", code=1, reach=reach)
