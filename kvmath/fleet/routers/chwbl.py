"""**chwbl**: consistent hashing with bounded loads, KubeAI's ``PrefixHash`` strategy
(substratusai/kubeai@2f32ef49 internal/loadbalancer/balance_chwbl.go): a ring of ``replication``
points per replica; a request's key (KubeAI hashes the first ``prefixCharLength`` characters of
its first user message) is looked up on the ring and the walk from there takes the first replica
whose requests in flight are at most ``(all in flight + 1) / replicas x load_factor``
(``chwblLoadOK``), else the first one seen. Defaults: ``meanLoadFactor`` 125 %, ``replication``
256, ``prefixCharLength`` 100 (api/k8s/v1/model_types.go:189-207). A trace carries no text: the
key is the hash of the prompt's first ``key_blocks`` blocks (ASSUMED: 100 characters, some 25
tokens, lie within a conversation's first block, which stays the same over its turns). Reach 1
while the load bound holds (a sticky key moves when its replica is over the bound)."""
from kvmath.fleet.routers.router import Param, Router

_SRC = "substratusai/kubeai@2f32ef49 api/k8s/v1/model_types.go:189-207 (PrefixHash)"


def reach(nodes):
    return 1.0


ROUTER = Router(name="chwbl", code=4, reach=reach, params=(
    Param("load_factor", 1.25, "the bound on a replica's load over the mean", _SRC +
          ": meanLoadFactor default 125"),
    Param("replication", 256, "points of each replica on the ring", _SRC +
          ": replication default 256"),
    Param("key_blocks", 1, "blocks of the prompt hashed into its key", "ASSUMED: KubeAI "
          "hashes 100 characters (prefixCharLength default 100)")),
    source="substratusai/kubeai@2f32ef49 internal/loadbalancer/balance_chwbl.go")
