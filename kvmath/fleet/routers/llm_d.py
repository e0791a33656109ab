"""**llm-d**: the llm-d router's endpoint picker as deployed: each replica scored by weighted
scorers, the highest total taken (``max-score-picker``, ties at random). The scorers
(kubernetes-sigs/gateway-api-inference-extension@32970c0b pkg/epp/scheduling/framework/plugins):

- prefix: ``precise`` 1, the blocks each replica's HBM holds as its KV events report them
  (llm-d's ``prefix-cache-scorer`` in ``cache_tracking`` mode), the longest run of leading
  blocks, a block the node's first tier below HBM holds weighing ``cpu_weight``, min-max
  normalised over the replicas holding some (llm-d/llm-d-inference-scheduler@b9c56d36
  pkg/plugins/scorer/utils.go ``indexedScoresToNormalizedScoredPods``: 1 when all equal, 0 for a
  replica with none); ``precise`` 0, the router's own index of what it sent where, an LRU of
  ``index_tokens`` per replica, the leading blocks matched over the prompt's, at most
  ``match_tokens`` (multi/prefix/plugin.go:39-63, 181-208: 256 blocks of 64 characters, 31,250
  blocks a server, about four characters a token: 4,096 and 500,000 tokens);
- kv-cache utilisation: 1 - the share of the replica's KV that running requests hold
  (scorer/kvcache_utilization.go:67);
- queue: ``(max - q) / (max - min)`` of the replicas' waiting queues, 1 when all equal
  (scorer/queue.go:66-92).

Default weights: prefix 3, kv-cache 2, queue 2, the approximate prefix scorer
(llm-d/llm-d-router@0b59e4ed pkg/epp/config/loader/defaults.go ``loadDefaultConfig``). The
"KV-cache wins" benchmark's precise configuration used the same weights with ``precise`` 1
(llm-d/llm-d-kv-cache@7be76e11 benchmarking/73-capacity/README.md). Reach 1: a returning turn
goes where its prefix is, an ASSUMPTION the load scorers can break."""
from kvmath.fleet.routers.router import Param, Router

_DEF = "llm-d/llm-d-router@0b59e4ed pkg/epp/config/loader/defaults.go"
_GIE = ("kubernetes-sigs/gateway-api-inference-extension@32970c0b pkg/epp/scheduling/framework/"
        "plugins/multi/prefix/plugin.go:39-63")


def reach(nodes):
    return 1.0


ROUTER = Router(name="llm-d", code=5, reach=reach, params=(
    Param("prefix_weight", 3.0, "weight of the prefix-cache scorer", _DEF),
    Param("kv_weight", 2.0, "weight of the KV-cache utilisation scorer", _DEF),
    Param("queue_weight", 2.0, "weight of the queue scorer", _DEF),
    Param("precise", 0.0, "1: the replicas' own KV blocks (KV events); 0: the router's index",
          _DEF + " (the approximate prefix-cache-scorer)"),
    Param("cpu_weight", 0.8, "a block the node's host tier holds, against one in HBM (precise)",
          "llm-d/llm-d-kv-cache@7be76e11 pkg/kvcache/backend.go (medium weights gpu 1.0, cpu "
          "0.8)"),
    Param("index_tokens", 500_000, "tokens the router's index keeps per replica", _GIE +
          ": DefaultLRUCapacityPerServer 31250 blocks of 64 characters, ~4 characters a token"),
    Param("match_tokens", 4096, "tokens of a prompt the index matches at most", _GIE +
          ": DefaultMaxPrefixBlocks 256 of 64 characters")),
    index=("index_tokens", "match_tokens"),
    source="kubernetes-sigs/gateway-api-inference-extension@32970c0b, llm-d/llm-d-router@0b59e4ed")
