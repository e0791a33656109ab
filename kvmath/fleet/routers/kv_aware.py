"""**kv-aware**: the node of least cost, cost = ``overlap_weight`` x the blocks it would have to
prefill + the blocks active on it (Dynamo's KV router's cost; llm-d's scheduler weighs a
prefix-cache score against load the same way), ties to the least loaded, then the first. Active
blocks: the blocks of the requests routed to the node in the last ``load_window_s`` seconds, a
stand-in for the KV its running requests hold (:mod:`kvmath.fleet.routing`). Reach 1: a
returning turn goes to the node with its longest cached prefix, an ASSUMPTION that holds while
the holder has room (a kv-aware router sends a turn elsewhere when the holder is loaded)."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0


ROUTER = Router(name="kv-aware", code=3, reach=reach)
