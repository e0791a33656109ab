"""**random**: a replica drawn uniformly for each request (seeded), as a Kubernetes Service's
kube-proxy spreads connections (KubeAI's "k8s Service" arm) and llm-d's ``random-picker``. It
ignores where a cache is: over N nodes a returning turn lands on its cache's node with
probability 1/N."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0 / nodes


ROUTER = Router(name="random", code=0, reach=reach, draws=True,
                source="substratusai/kubeai@2f32ef49 docs/blog/posts/"
                "llm-load-balancing-at-scale-chwbl.md (the Kubernetes Service arm)")
