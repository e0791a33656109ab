"""**least-load**: the replica with the fewest requests in flight at the router (routed and not yet
answered), ties at random: KubeAI's default ``LeastLoad`` (substratusai/kubeai@2f32ef49
internal/loadbalancer/balance_least_load.go: the endpoint of least ``inFlight``, walking a Go
map, whose order is random; api/k8s/v1/model_types.go: ``+kubebuilder:default=LeastLoad``),
Dynamo's ``least-loaded`` mode. It ignores where a cache is: reach 1/N."""
from kvmath.fleet.routers.router import Router


def reach(nodes):
    return 1.0 / nodes


ROUTER = Router(name="least-load", code=3, reach=reach,
                source="substratusai/kubeai@2f32ef49 internal/loadbalancer/"
                "balance_least_load.go")
