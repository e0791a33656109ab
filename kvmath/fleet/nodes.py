"""One node of a fleet: its tiers, block size and cost model (:func:`node_setup`), the decode step
its replicas run (:func:`node_decode`), its share of a routed trace (:class:`NodeBlocks`,
:func:`node_requests`), and its answer (:func:`replay_node`): its requests replayed through its
own tiers (:func:`kvmath.traces.replay.replay`, priced by :class:`~kvmath.traces.replay.HitCost`),
its prefill and decode demand against its GPUs, and each request's time to first token on its
replicas (:func:`ttft_fcfs`).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.traces import readers as T
from kvmath.traces import replay as C


def ttft_fcfs(arrival_s, service_s, servers):
    """Time to first token of each request, s: first come, first served over ``servers``
    identical replicas, each serving one request at a time (wait for the earliest free one, then
    its own service time). Requests in order of arrival. Compiled
    (:func:`kvmath.traces.simulate.queue.fcfs`)."""
    from kvmath.traces.simulate.queue import fcfs
    return fcfs(arrival_s, service_s, servers)


def check_fleet(trace, nodes):
    """Refuse a fleet of more nodes than the trace has requests (every other node would idle,
    and the routing's work grows with nodes x requests)."""
    from kvmath.logic.runtime import ScenarioError
    if nodes > max(trace.n_requests, 1):
        raise ScenarioError(f"--nodes {nodes:,} exceeds the trace's {trace.n_requests:,} "
                            "requests: at most one node per request")


def subtrace(trace, mask):
    """The requests of ``trace`` where ``mask`` holds, with their block accesses, in order."""
    keep = np.flatnonzero(mask)
    new_id = np.full(trace.n_requests, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    acc = new_id[trace.rid] >= 0
    return replace(trace, name=f"{trace.name}[{len(keep)}]", timestamp_s=trace.timestamp_s[keep],
                   prompt_tokens=trace.prompt_tokens[keep], output_tokens=trace.output_tokens[keep],
                   n_blocks=trace.n_blocks[keep], rid=new_id[trace.rid[acc]],
                   pos=trace.pos[acc], hashes=trace.hashes[acc])


def node_setup(trace, model, node, tp=None, engine=None, batch_seqs=None, batch_context=None,
               **cache_kw):
    """(tier specs, block bytes, cost model, blocks a node holds in all its tiers)."""
    from kvmath.evaluate.api import node_layout_tp
    from kvmath.tables.rows import bundled
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    batch_context = batch_context or T.batch_context_of(trace, model)
    tp = tp or node_layout_tp(model, node, batch_context, gpu=gpu, engine=engine,
                             batch_seqs=batch_seqs, batch_context=batch_context)
    specs = C.node_tiers(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context,
                         **cache_kw)
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens, engine)
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens, engine=engine)
    blocks = int(sum(s.capacity_bytes // (s.block_bytes or block_bytes) for s in specs))
    return specs, block_bytes, C.HitCost(model, gpu, specs, tp, node.gpus, engine=engine), blocks, tp


def node_decode(trace, model, node, tp, engine=None, batch_seqs=None):
    """The decode step a node's replica runs (:func:`kvmath.evaluate.serving.decode_cost`): the
    node's running batch (batch_seqs, default plan_defaults.csv) over its node.gpus / tp replicas,
    the busiest replica's share rounded up and at least one sequence, at the trace's mean decode
    context."""
    import math

    from kvmath.evaluate.serving import decode_cost
    from kvmath.tables.rows import bundled, plan_defaults
    seqs = plan_defaults()["batch_seqs"].value if batch_seqs is None else batch_seqs
    per_replica = max(1, math.ceil(seqs / max(node.gpus // tp, 1)))
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    out = decode_cost(model, gpu, tp, per_replica, T.decode_context_of(trace, model),
                      engine=engine)
    return {**out, "batch_seqs_per_node": seqs}


def replay_node(n, sub, specs, block_bytes, cost, *, span_s, gpus, replicas,
                decode_gpu_s_per_token=0.0, shared=None, writes="back"):
    """Node n's answer: its requests ``sub`` replayed through its tiers (``specs``, priced by
    ``cost``), rates over the whole trace's span ``span_s`` (so the nodes' demands add up to the
    fleet's), its decode demand on its ``gpus`` (its output tokens at
    ``decode_gpu_s_per_token`` GPU-seconds each), and each request's time to first token on the
    node's ``replicas`` (``ttft_s``, an array; None with ``ttft_s_p99`` when decode alone fills
    the node's GPUs, the queue then growing without bound). shared, writes: as
    :func:`~kvmath.traces.replay.replay`'s."""
    if hasattr(sub, "loaded"):  # a node's share whose hashes wait in a file
        sub = sub.loaded()
    if sub.n_requests == 0:
        return {"node": n, "requests": 0, "token_hit_rate": None, "prompt_tokens": 0,
                "prefill_gpu_s_per_s": 0.0, "decode_gpu_s_per_s": 0.0,
                "reload_gpu_s_per_s": 0.0, "feasible": True,
                "ttft_s_p99": None, "tiers": [], "ttft_s": np.empty(0)}
    rep = C.replay(sub, specs, block_bytes, cost=cost, service=True, shared=shared, writes=writes)
    decode = float(sub.output_tokens.sum()) * decode_gpu_s_per_token / max(span_s, 1.0)
    left = 1.0 - decode / gpus  # the share of the GPUs' time decode leaves to prefill
    ttft = (ttft_fcfs(sub.timestamp_s, rep["service_s"] / left, replicas) if left > 0 else None)
    scale = max(sub.duration_s, 1.0) / max(span_s, 1.0)
    demand = rep["prefill_gpu_s_per_s"] * scale
    return {"node": n, "requests": sub.n_requests, "token_hit_rate": rep["token_hit_rate"],
            "prompt_tokens": int(sub.prompt_tokens.sum()),
            "prefill_gpu_s_per_s": demand, "decode_gpu_s_per_s": decode,
            "reload_gpu_s_per_s": rep["reload_gpu_s_per_s"] * scale,
            "feasible": bool(demand + decode <= gpus),
            "ttft_s_p99": None if ttft is None else float(np.percentile(ttft, 99)),
            "ttft_s": ttft,
            "tiers": [{"tier": t["tier"], "hit_rate": t["hit_rate"],
                       "read_Bps": t["read_Bps_mean"] * scale,
                       **({"hits": t["hits"], "shared": True} if t.get("shared") else
                          {"write_Bps": t["write_Bps_mean"] * scale}),
                       **({"drive_writes_per_day": t["drive_writes_per_day"] * scale}
                          if "drive_writes_per_day" in t else {})} for t in rep["tiers"]]}


class NodeBlocks:
    """Each node's block hashes as routing assigns its requests, in arrival order: in memory,
    or (``directory`` given: a trace streamed from disk) appended to a flat file per node."""

    def __init__(self, trace, nodes, directory=None):
        self.n_blocks, self.nodes, self.directory = trace.n_blocks, nodes, directory
        self.parts = [[] for _ in range(nodes)]
        self.files = ([open(self.path(n), "wb") for n in range(nodes)] if directory else None)

    def path(self, n):
        import os
        return os.path.join(self.directory, f"node-{n}.u64")

    def add(self, a, b, hashes, chosen):
        from kvmath.traces.simulate.routing import split_by_node
        ordered, counts = split_by_node(chosen, self.n_blocks[a:b], hashes, self.nodes)
        o = 0
        for n, c in enumerate(counts.tolist()):
            if self.files:
                ordered[o:o + c].tofile(self.files[n])
            else:
                self.parts[n].append(ordered[o:o + c])
            o += c

    def of(self, n):
        """Node n's hashes: an array, or the path of its file."""
        if self.files:
            return self.path(n)
        return (np.concatenate(self.parts[n]) if self.parts[n]
                else np.zeros(0, np.uint64))

    def close(self):
        for f in self.files or ():
            f.close()


def node_requests(trace, where, n, blocks):
    keep = where == n
    return T.NodeRequests(name=f"{trace.name}[node {n}]", timestamp_s=trace.timestamp_s[keep],
                      prompt_tokens=trace.prompt_tokens[keep],
                      output_tokens=trace.output_tokens[keep], n_blocks=trace.n_blocks[keep],
                      hashes=blocks.of(n), block_tokens=trace.block_tokens)
