"""Routing a trace over a fleet's nodes (numba): each request placed on a node by the router, the
node's cache then holding its blocks; and each node's blocks gathered (:func:`split_by_node`).

Each node caches the blocks of the requests it served in an LRU of a fixed capacity (one list of
the keyed store, :mod:`kvmath.traces.simulate.store`, per node). A request first measures, on
every node, the leading blocks it holds (what the kv-aware router weighs, and what the reach
counts), then the router picks a node by its code (:mod:`kvmath.fleet.routers` declares each
router and its code; a new router is a module there and a branch of :func:`_route`), and the
request's blocks become that node's most recent. The load a router balances is the blocks of the
requests routed to a node within a sliding window. Fed a chunk of requests at a time
(:class:`Routing`); the Python side (the trace read in chunks, the answer) is
:func:`kvmath.fleet.routing.route`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from kvmath.traces.simulate.store import (CNT, LINK, META, Store, add, find, link_tail, pop_head,
                                          remove, touch)


class Fleet(NamedTuple):
    """How the fleet routes."""
    nodes: int
    cap: int  #: blocks each node's LRU holds
    router: int  #: the router's code (:mod:`kvmath.fleet.routers`)
    bt: int  #: tokens a block
    window: float  #: seconds of routed requests whose blocks count as a node's load
    overlap: float  #: kv-aware's weight of the blocks to prefill against the load


class Requests(NamedTuple):
    """The trace's requests (indexed by request of the whole trace)."""
    ts: np.ndarray  #: arrival, s (float64)
    nb: np.ndarray  #: blocks
    tokens: np.ndarray  #: prompt tokens
    parent: np.ndarray  #: previous turn (-1: none)
    draws: np.ndarray  #: the random router's node for each (empty for the others)


class Tally(NamedTuple):
    """What routing decides and counts."""
    chosen: np.ndarray  #: each request's node (int32)
    load: np.ndarray  #: each node's blocks of the requests in the load window (int64)
    routed: np.ndarray  #: each node's prompt tokens routed (float64)
    sums: np.ndarray  #: [hit tokens, tokens of the longest prefix cached anywhere] (float64)
    #: [continued, followed, holders, reached, the first request still in the load window, a
    #: sink the compiler keeps loads for] (int64)
    counts: np.ndarray


class Chunk(NamedTuple):
    """The requests base..end of the trace, their blocks."""
    base: int
    end: int
    off: np.ndarray  #: where each one's blocks begin in ``hashes`` (end - base + 1, int64)
    hashes: np.ndarray  #: their block hashes, head first (uint64)


@njit(cache=True, nogil=True)
def _route(r0, S, fleet, requests, chunk, tally, need):  # pragma: no cover (compiled)
    """:func:`kvmath.fleet.routing.route`'s loop for the requests r0.. of a chunk (:class:`Chunk`;
    requests indexed over the whole trace, its blocks local to the chunk); returns the request it
    stopped before (the chunk's end when done; earlier when the store has fewer than ``need``
    free entries)."""
    nodes, cap, router, bt, window, overlap = fleet
    ts, nb, tokens, parent, draws = requests
    base, r1, off, hashes = chunk
    chosen, load, routed, sums, counts = tally
    match = np.zeros(nodes, np.int64)
    found = np.empty(max(need, 1), np.int64)
    for r in range(r0, r1):
        if S[META][0] < need:
            return r
        o = off[r - base]
        m = off[r - base + 1] - o
        now = ts[r]
        h = counts[4]
        while h < r and now - ts[h] > window:
            load[chosen[h]] -= nb[h]
            h += 1
        counts[4] = h
        best = 0
        for nd in range(nodes):
            c = 0
            while c < m and find(S, hashes[o + c], nd) >= 0:
                c += 1
            match[nd] = c
            if c > best:
                best = c
        # the routers by their codes (kvmath.fleet.routers): a new router is a branch here
        if router == 0:
            node = draws[r]
        elif router == 1:
            node = r % nodes
        elif router == 2 and parent[r] >= 0:
            node = chosen[parent[r]]
        elif router == 2:
            node = 0
            for nd in range(1, nodes):
                if load[nd] < load[node]:
                    node = nd
        else:  # kv-aware: least cost, ties to the least loaded, then the first
            node = 0
            bc = overlap * (m - match[0]) + load[0]
            for nd in range(1, nodes):
                c = overlap * (m - match[nd]) + load[nd]
                if c < bc or (c == bc and load[nd] < load[node]):
                    bc = c
                    node = nd
        if best > 0:
            counts[2] += 1
            if match[node] == best:
                counts[3] += 1
        chosen[r] = node
        if parent[r] >= 0:
            counts[0] += 1
            if chosen[parent[r]] == node:
                counts[1] += 1
        sums[0] += min(match[node] * bt, tokens[r])
        sums[1] += min(best * bt, tokens[r])
        routed[node] += tokens[r]
        load[node] += m
        # the request's blocks become the node's most recent: first every lookup (independent
        # of each other, so their cache misses overlap), then the moves and insertions in order
        # (an insertion moves no other entry, and a block found again is refreshed)
        link = S[LINK]
        warm = 0
        for j in range(m):
            e = find(S, hashes[o + j], node)
            found[j] = e
            if e >= 0:  # its neighbours' links, which the move rewrites
                warm += link[e, 0]
                if link[e, 1] >= 0:
                    warm += link[link[e, 1], 0]
                if link[e, 2] >= 0:
                    warm += link[link[e, 2], 0]
        counts[5] += warm & 1
        for j in range(m):
            e = found[j]
            if e < 0:
                e = find(S, hashes[o + j], node)  # (a hash the request repeats)
            if e >= 0:
                touch(S, e)
            else:
                e = add(S, hashes[o + j], node)
                link_tail(S, e)
        while S[CNT][node] > cap:
            old = pop_head(S, node)
            remove(S, old)
    return r1


class Routing:
    """:func:`kvmath.fleet.routing.route`'s state over a trace (its per-request columns
    ``timestamp_s``, ``n_blocks``, ``prompt_tokens``; its ``block_tokens``) fed a chunk of
    requests at a time, over ``nodes`` nodes each caching ``capacity_blocks`` under the router
    of code ``code``; draws: the random router's node for each request."""

    def __init__(self, trace, nodes, code, capacity_blocks, *, draws=None,
                 load_window_s, overlap_weight):
        n = len(trace.timestamp_s)
        self.nodes, self.cap = int(nodes), int(min(max(int(capacity_blocks), 0), 2 ** 62))
        self.fleet = Fleet(self.nodes, self.cap, int(code), int(trace.block_tokens),
                           float(load_window_s), float(overlap_weight))
        self.nb = np.asarray(trace.n_blocks)
        self.parent = np.full(n, -1, np.int32 if n < 2 ** 31 else np.int64)
        self.requests = Requests(np.asarray(trace.timestamp_s, np.float64), self.nb,
                                 np.asarray(trace.prompt_tokens), self.parent,
                                 np.zeros(0, np.int64) if draws is None else draws)
        self.tally = Tally(chosen=np.empty(n, np.int32), load=np.zeros(self.nodes, np.int64),
                           routed=np.zeros(self.nodes, np.float64), sums=np.zeros(2, np.float64),
                           counts=np.zeros(6, np.int64))
        self.chosen, self.routed = self.tally.chosen, self.tally.routed
        self.sums, self.counts = self.tally.sums, self.tally.counts
        total = int(np.sum(trace.n_blocks, dtype=np.int64))
        nmax = int(np.max(trace.n_blocks)) if n else 0
        # every node's LRU at its capacity and a request beyond it: no growth when that is
        # modest (a larger bound grows on demand, as a trace with fewer blocks needs less)
        self.store = Store(min(self.nodes * (self.cap + nmax + 1), total + 64, 1 << 23),
                           self.nodes)
        self.done = 0

    def feed(self, a, b, hashes, parent):
        """Route the requests a..b (their hashes, head first, flat; their previous turns)."""
        self.parent[a:b] = parent
        off = np.zeros(b - a + 1, np.int64)
        np.cumsum(self.nb[a:b], out=off[1:])
        need = int(np.max(self.nb[a:b])) + 1 if b > a else 1
        chunk = Chunk(a, b, off, hashes)
        r = a
        while r < b:
            self.store.ensure(need)
            r = _route(r, self.store.S, self.fleet, self.requests, chunk, self.tally, need)
        self.done = b


# ------------------------------------------------------------------ blocks sorted by node
@njit(cache=True, nogil=True)
def _split(node_of, n_blocks, hashes, nodes, out, counts):  # pragma: no cover (compiled)
    """A counting sort of the accesses by their request's node, each node's in order."""
    for r in range(len(node_of)):
        counts[node_of[r]] += n_blocks[r]
    start = np.zeros(nodes + 1, np.int64)
    for n in range(nodes):
        start[n + 1] = start[n] + counts[n]
    o = 0
    for r in range(len(node_of)):
        n = node_of[r]
        for j in range(n_blocks[r]):
            out[start[n]] = hashes[o + j]
            start[n] += 1
        o += n_blocks[r]


def split_by_node(node_of, n_blocks, hashes, nodes):
    """(hashes sorted by node, stable; blocks of each node)."""
    out = np.empty_like(hashes)
    counts = np.zeros(nodes, np.int64)
    _split(np.asarray(node_of, np.int64), np.asarray(n_blocks, np.int64), hashes, int(nodes),
           out, counts)
    return out, counts

