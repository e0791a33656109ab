"""Routing a trace over a fleet: which node each request reaches, and what that costs in hits.

A per-node cache helps a resumed turn only when the router sends the turn to the node holding
its prefix. :func:`route` replays a trace through N nodes, each caching KV blocks in an LRU of
``capacity_blocks`` (every tier of the node together: HBM, host DRAM, drives), under one of
:data:`ROUTERS`:

- ``random``: a node drawn uniformly (seeded), as gateways' random policy;
- ``round-robin``: request i to node i mod N;
- ``affinity``: session stickiness. The traces carry no session id, so a request continues the
  session of its previous turn (:func:`kvmath.traces.readers.continuations`: the latest earlier
  request whose whole prompt it repeats) and goes to that turn's node; any other request opens
  a new session, placed on the least-loaded node;
- ``kv-aware``: the node of least cost, cost = ``overlap_weight`` x the blocks it would have
  to prefill + the blocks active on it (Dynamo's KV router's cost; llm-d's scheduler weighs a
  prefix-cache score against load the same way), ties to the least loaded. Active blocks: the
  blocks of the requests routed to the node in the last ``load_window_s`` seconds, a stand-in
  for the KV its running requests hold.

Reported per router: ``token_hit_rate`` (prompt tokens found on the node reached),
``reach_continuation`` (of the requests that continue an earlier turn, the share routed to the
node that served that turn: the h_route of the analytic reuse condition, measured),
``token_reach`` (the hits over the tokens of the longest prefix cached anywhere in the fleet,
shared prefixes included: the share of the fleet's cache the router captures), ``reach`` (of
the requests whose longest cached prefix was on some node, the share routed to a node holding
all of it), and
``load_imbalance`` (the busiest node's routed prompt tokens over the mean). Memory: the nodes'
LRUs (bounded by capacity), one entry per block hash for the sessions (affinity only), and
per-node counters; the trace itself is read once, in order.
"""
from __future__ import annotations

from collections import OrderedDict, deque

import numpy as np

from kvmath.evaluate.routing import ROUTERS
from kvmath.evaluate.values import ScenarioError

#: kv-aware's weight of the blocks to prefill against the blocks active on a node: Dynamo's
#: default (ai-dynamo/dynamo lib/llm/src/kv_router/config.rs, impl Default for KvRouterConfig,
#: 'overlap_score_weight: 1.0'; docs/architecture/kv_cache_routing.md, 'Cost formula: cost =
#: overlap_score_weight * prefill_blocks + decode_blocks'), retrieved 2026-12-01
OVERLAP_WEIGHT = 1.0
#: seconds of routed requests whose blocks count as active on a node: an ASSUMPTION standing
#: for the requests running there (the traces carry no completion times); route(load_window_s=)
LOAD_WINDOW_S = 10.0


def route(trace, nodes, router, capacity_blocks, seed=0, load_window_s=LOAD_WINDOW_S,
          overlap_weight=OVERLAP_WEIGHT, assignment=False):
    """Replay ``trace`` over ``nodes`` nodes under ``router``; the dict described above, with
    ``assignment`` (the node of each request, an int32 array) when asked for."""
    if router not in ROUTERS:
        raise ScenarioError(f"unknown router {router!r}; expected one of {', '.join(ROUTERS)}")
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    if trace.sample_rate < 1:
        raise ScenarioError("routing needs the whole trace, not a SHARDS sample")
    cap = max(int(capacity_blocks), 0)
    stores = [OrderedDict() for _ in range(nodes)]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, nodes, size=trace.n_requests) if router == "random" else None
    offsets = np.r_[0, np.cumsum(trace.n_blocks)]
    hashes = trace.hashes
    times = trace.timestamp_s
    tokens = trace.prompt_tokens
    bt = trace.block_tokens
    recent = deque()  # (time, node, blocks) of the requests routed in the load window
    load = np.zeros(nodes, dtype=np.int64)  # active blocks per node
    routed_tokens = np.zeros(nodes, dtype=np.float64)
    from kvmath.traces.readers import continuations
    parent = continuations(trace)
    chosen = np.empty(trace.n_requests, dtype=np.int32)  # the node of each request
    continued = followed = 0
    hit_tokens = best_tokens = 0.0
    holder_requests = reached = 0
    for r in range(trace.n_requests):
        now = float(times[r])
        while recent and now - recent[0][0] > load_window_s:
            _, n_old, k_old = recent.popleft()
            load[n_old] -= k_old
        blocks = hashes[offsets[r]:offsets[r + 1]].tolist()
        # the longest cached prefix on each node (hash ids chain the prefix: block i's id names
        # blocks 0..i, so the match is the leading run present in the node's store)
        match = np.zeros(nodes, dtype=np.int64)
        for n, store in enumerate(stores):
            m = 0
            for b in blocks:
                if b not in store:
                    break
                m += 1
            match[n] = m
        best = int(match.max()) if nodes else 0
        if router == "random":
            node = int(draws[r])
        elif router == "round-robin":
            node = r % nodes
        elif router == "affinity":  # the previous turn's node, else the least loaded
            node = int(chosen[parent[r]]) if parent[r] >= 0 else int(np.argmin(load))
        else:  # kv-aware
            cost = overlap_weight * (len(blocks) - match) + load
            cands = np.flatnonzero(cost == cost.min())
            node = int(cands[np.argmin(load[cands])])
        if best > 0:
            holder_requests += 1
            reached += int(match[node] == best)
        chosen[r] = node
        if parent[r] >= 0:
            continued += 1
            followed += int(chosen[parent[r]] == node)
        m = int(match[node])
        hit_tokens += min(m * bt, int(tokens[r]))
        best_tokens += min(best * bt, int(tokens[r]))
        routed_tokens[node] += int(tokens[r])
        load[node] += len(blocks)
        recent.append((now, node, len(blocks)))
        store = stores[node]
        for b in blocks:  # the request's blocks are the node's most recent
            if b in store:
                store.move_to_end(b)
            else:
                store[b] = True
        while len(store) > cap:
            store.popitem(last=False)
    mean = routed_tokens.mean() if nodes else 0.0
    out = {"assignment": chosen} if assignment else {}
    return out | {"router": router, "nodes": nodes, "requests": trace.n_requests,
            "capacity_blocks_per_node": cap,
            "token_hit_rate": float(hit_tokens / max(float(tokens.sum()), 1.0)),
            "reach_continuation": float(followed / continued) if continued else None,
            "continuations": continued,
            "token_reach": float(hit_tokens / best_tokens) if best_tokens else None,
            "reach": float(reached / holder_requests) if holder_requests else None,
            "requests_with_a_cached_prefix": holder_requests,
            "load_imbalance": float(routed_tokens.max() / mean) if mean > 0 else None,
            "routed_prompt_tokens": routed_tokens.tolist()}
