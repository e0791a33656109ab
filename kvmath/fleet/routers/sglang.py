"""**sglang**: SGLang's router, its ``cache_aware`` policy (sgl-project/sglang
sgl-router/src/policies/cache_aware.rs ``select_worker``): when the replicas' loads (requests in
flight at the router) differ by more than ``balance_abs`` and the largest exceeds the smallest
times ``balance_rel``, the least loaded; else the replica whose index of what the router sent it
matches the largest share of the prompt, if that share exceeds ``cache_threshold``, else the
replica whose index is smallest; the prompt then enters the chosen replica's index (an LRU of
``tree_tokens``: the router's radix tree of characters, evicted to ``max_tree_size``, ASSUMED
four characters a token). Defaults: sglang-router's RouterArgs (cache_threshold 0.3,
balance_abs_threshold 64, balance_rel_threshold 1.5, max_tree_size 2**26; 0.5 / 32 / 1.0001 /
2**24 in sglang-router 0.1.0, sglang_router/launch_router.py:36-40, the v0.4 blog's router).
Reach 1 while loads stay balanced."""
from kvmath.fleet.routers.router import Param, Router

_SRC = ("sgl-project/sglang sgl-model-gateway bindings/python sglang_router/router_args.py "
        "RouterArgs (read in a stored copy)")


def reach(nodes):
    return 1.0


ROUTER = Router(name="sglang", code=7, reach=reach, params=(
    Param("cache_threshold", 0.3, "share of the prompt matched that keeps cache affinity", _SRC),
    Param("balance_abs", 64, "load difference (requests) beyond which it balances", _SRC),
    Param("balance_rel", 1.5, "load ratio beyond which it balances", _SRC),
    Param("tree_tokens", 2 ** 26 / 4, "tokens each replica's index keeps", _SRC +
          ": max_tree_size 2**26 characters, ASSUMED 4 a token")),
    index=("tree_tokens", None),
    source="sgl-project/sglang sgl-router/src/policies/cache_aware.rs")
