"""**affinity**: session stickiness. The traces carry no session id, so a request continues the
session of its previous turn (:func:`kvmath.traces.statistics.continuations`: the latest earlier
request whose whole prompt it repeats) and goes to that turn's replica; any other request opens
a new session, placed on the replica with the fewest requests in flight (random among ties).
Reach 1: a returning turn goes to its cache's node, an ASSUMPTION that holds while the holder
has room (a sticky session moves when its node fails or is drained)."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0


ROUTER = Router(name="affinity", code=2, reach=reach, source="a session-sticky gateway (no "
                "one product's rule: the chain of turns a trace's prompts make)")
