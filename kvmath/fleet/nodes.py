"""One node of a fleet: its tiers, block size and cost model (:func:`node_setup`), its share of a
served trace (:class:`NodeBlocks`, :func:`node_requests`), and its tiers' answer
(:func:`replay_node`): its requests replayed through its own tiers in arrival order
(:func:`kvmath.traces.replay.replay`), for the traffic, writes and wear of each tier. The times
requests see come from the fleet's schedule (:mod:`kvmath.fleet.serving`), not from here.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.traces import readers as T
from kvmath.traces import replay as C


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
               kv_dtype=None, **cache_kw):
    """(tier specs, block bytes, cost model, blocks a node holds in all its tiers, TP); kv_dtype:
    the KV's element type where it is not the model's."""
    from kvmath.evaluate.api import node_layout_tp
    from kvmath.tables.rows import bundled
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    batch_context = batch_context or T.batch_context_of(trace, model)
    tp = tp or node_layout_tp(model, node, batch_context, gpu=gpu, engine=engine,
                             batch_seqs=batch_seqs, batch_context=batch_context)
    specs = C.node_tiers(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context,
                         **cache_kw)
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens, engine, kv_dtype)
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens, engine=engine,
                                   kv_dtype=kv_dtype)
    blocks = int(sum(s.capacity_bytes // (s.block_bytes or block_bytes) for s in specs))
    return specs, block_bytes, C.HitCost(model, gpu, specs, tp, node.gpus, engine=engine,
                                         kv_dtype=kv_dtype), blocks, tp


def replay_node(n, sub, specs, block_bytes, cost, *, span_s, shared=None, writes="back"):
    """Node n's tiers: its requests ``sub`` replayed through them (``specs``, priced by
    ``cost``), rates over the whole trace's span ``span_s`` (so the nodes' add up to the
    fleet's): each tier's hit rate, reads and writes, a drive tier's writes a day. shared,
    writes: as :func:`~kvmath.traces.replay.replay`'s."""
    if hasattr(sub, "loaded"):  # a node's share whose hashes wait in a file
        sub = sub.loaded()
    if sub.n_requests == 0:
        return {"node": n, "requests": 0, "replay_token_hit_rate": None, "tiers": []}
    rep = C.replay(sub, specs, block_bytes, shared=shared, writes=writes)
    scale = max(sub.duration_s, 1.0) / max(span_s, 1.0)
    return {"node": n, "requests": sub.n_requests,
            "replay_token_hit_rate": rep["token_hit_rate"],
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
