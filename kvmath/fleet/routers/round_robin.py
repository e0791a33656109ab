"""**round-robin**: request i to replica i mod N (Dynamo's frontend default, an SGLang data-parallel
controller without its router). It ignores where a cache is: over N nodes a returning turn
lands on its cache's node with probability 1/N."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0 / nodes


ROUTER = Router(name="round-robin", code=1, reach=reach,
                source="ai-dynamo==1.6.1 wheel, dynamo/frontend/frontend_args.py (router mode "
                "default round-robin)")
