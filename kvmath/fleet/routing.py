"""Routing a trace over a fleet: which node each request reaches, and what that costs in hits.

A per-node cache helps a resumed turn only when the router sends the turn to the node holding
its prefix. :func:`route` replays a trace through N nodes, each caching KV blocks in an LRU of
``capacity_blocks`` (every tier of the node together: HBM, host DRAM, drives), under one of
the routers of :mod:`kvmath.fleet.routers` (random, round-robin, affinity, kv-aware: each
module says how it places a request). The load the affinity and kv-aware routers balance is a
node's active blocks: the blocks of the requests routed to it in the last ``load_window_s``
seconds, a stand-in for the KV its running requests hold.

Reported per router: ``token_hit_rate`` (prompt tokens found on the node reached),
``reach_continuation`` (of the requests that continue an earlier turn, the share routed to the
node that served that turn: the h_route of the analytic reuse condition, measured),
``token_reach`` (the hits over the tokens of the longest prefix cached anywhere in the fleet,
shared prefixes included: the share of the fleet's cache the router captures), ``reach`` (of
the requests whose longest cached prefix was on some node, the share routed to a node holding
all of it), and
``load_imbalance`` (the busiest node's routed prompt tokens over the mean). Memory: the nodes'
LRUs (bounded by capacity), one entry per prompt not yet continued (the sessions), and
per-request and per-node counters; the trace's blocks are read once, in order, a chunk at a
time.
"""
from __future__ import annotations

import numpy as np

from kvmath.fleet.routers import router as router_named
from kvmath.logic.runtime import ScenarioError

#: kv-aware's weight of the blocks to prefill against the blocks active on a node: Dynamo's
#: default (ai-dynamo/dynamo lib/llm/src/kv_router/config.rs, impl Default for KvRouterConfig,
#: 'overlap_score_weight: 1.0'; docs/architecture/kv_cache_routing.md, 'Cost formula: cost =
#: overlap_score_weight * prefill_blocks + decode_blocks'), retrieved 2026-12-01
OVERLAP_WEIGHT = 1.0
#: seconds of routed requests whose blocks count as active on a node: an ASSUMPTION standing
#: for the requests running there (the traces carry no completion times); route(load_window_s=)
LOAD_WINDOW_S = 10.0


def route(trace, nodes, router, capacity_blocks, seed=0, load_window_s=LOAD_WINDOW_S,
          overlap_weight=OVERLAP_WEIGHT, assignment=False, parent=None, spill=None):
    """Replay ``trace`` over ``nodes`` nodes under ``router``; the dict described above, with
    ``assignment`` (the node of each request, an int32 array) when asked for.

    Compiled (:class:`kvmath.traces.simulate.routing.Routing`), the trace read a chunk of
    requests at a time (:func:`kvmath.traces.trace.block_chunks`); memory: the nodes' LRUs
    (bounded by their capacity) and a few per-request arrays. parent: the previous turns
    (:func:`~kvmath.traces.statistics.continuations`), computed first when not given.
    spill: called with (first request, end request, hashes, nodes of those requests) after each
    chunk is routed (the fleet sorts the blocks by node there)."""
    from kvmath.traces.simulate.routing import Routing
    from kvmath.traces.trace import block_chunks
    declared = router_named(router)
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    if trace.sample_rate < 1:
        raise ScenarioError("routing needs the whole trace, not a SHARDS sample")
    if parent is None:  # a pass of its own: its map is gone before the nodes' LRUs are made
        from kvmath.traces.statistics import continuations
        parent = continuations(trace)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, nodes, size=trace.n_requests) if declared.draws else None
    state = Routing(trace, nodes, declared.code, capacity_blocks, draws=draws,
                    load_window_s=load_window_s, overlap_weight=overlap_weight)
    for a, b, hashes in block_chunks(trace):
        state.feed(a, b, hashes, parent[a:b])
        if spill is not None:
            spill(a, b, hashes, state.chosen[a:b])
    del draws
    continued, followed, holder_requests, reached = (int(x) for x in state.counts[:4])
    hit_tokens, best_tokens = float(state.sums[0]), float(state.sums[1])
    routed_tokens, tokens = state.routed, trace.prompt_tokens
    mean = routed_tokens.mean() if nodes else 0.0
    out = {"assignment": state.chosen} if assignment else {}
    return out | {"router": router, "nodes": nodes, "requests": trace.n_requests,
            "capacity_blocks_per_node": state.cap,
            "token_hit_rate": float(hit_tokens / max(float(tokens.sum()), 1.0)),
            "reach_continuation": float(followed / continued) if continued else None,
            "continuations": continued,
            "token_reach": float(hit_tokens / best_tokens) if best_tokens else None,
            "reach": float(reached / holder_requests) if holder_requests else None,
            "requests_with_a_cached_prefix": holder_requests,
            "load_imbalance": float(routed_tokens.max() / mean) if mean > 0 else None,
            "routed_prompt_tokens": routed_tokens.tolist()}
