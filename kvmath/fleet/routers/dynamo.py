"""**dynamo**: NVIDIA Dynamo's KV router: the replica of least cost, ties at random, where
``cost = prefill_load_scale x max(0, prefill blocks - overlap credit) + decode blocks
+ active_request_weight x requests in flight``; prefill blocks are the prompt blocks of the
replica's requests not yet past their first token plus the new request's, decode blocks the
blocks of its requests in flight plus the new one's, and the overlap credit the new prompt's
leading blocks the replica holds: ``overlap_credit`` each in HBM, ``host_weight`` each further
in the node's host tier, ``disk_weight`` each further on its drives (its KV events report all
three). A temperature above 0 samples a softmax of the costs scaled to [0, 1]
(ai-dynamo/dynamo@07a6c9ce lib/kv-router/src/scheduling/selector/default.rs ``worker_logit``,
``softmax_sample_index``). Defaults: ai-dynamo==1.6.1 wheel,
dynamo/common/configuration/groups/kv_router_args.py:326-434. ``kv-aware`` names it too. Reach
1: a returning turn goes where its prefix is, an ASSUMPTION its load term can break."""
from kvmath.fleet.routers.router import Param, Router

_SRC = "ai-dynamo==1.6.1 wheel, dynamo/common/configuration/groups/kv_router_args.py"


def reach(nodes):
    return 1.0


ROUTER = Router(name="dynamo", code=6, reach=reach, params=(
    Param("prefill_load_scale", 1.0, "weight of the prefill blocks left after the credit",
          _SRC + ":370-380 (--router-prefill-load-scale)"),
    Param("overlap_credit", 1.0, "credit of a prompt block the replica's HBM holds",
          _SRC + ":326-337 (--router-kv-overlap-score-credit)"),
    Param("host_weight", 0.75, "credit of a block its host tier holds",
          _SRC + ":398-409 (--router-host-cache-hit-weight)"),
    Param("disk_weight", 0.25, "credit of a block its drives hold",
          _SRC + ":412-423 (--router-disk-cache-hit-weight)"),
    Param("temperature", 0.0, "0: the least cost; above, a softmax sample",
          _SRC + ":425-434 (--router-temperature)"),
    Param("active_request_weight", 0.0, "cost of each request in flight",
          _SRC + ":383-395 (--router-decode-active-request-weight)")),
    source="ai-dynamo/dynamo@07a6c9ce lib/kv-router/src/scheduling/selector/default.rs")
