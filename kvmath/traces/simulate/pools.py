"""A pool the fleet shares, as one LRU over the whole trace in arrival order (numba).

Written through (:class:`SharedLRU`): every request reads its leading blocks present, then writes
all its blocks (tail first, head last; a block present is only refreshed), so the pool's contents
are an LRU over the whole trace whichever node served each request. Written back
(:class:`BackLRU`): each request reads the blocks beyond its node's own hit that the pool holds,
then the pool takes the blocks its node let go while serving it (the nodes' first pass records
them). Either way the pool is one list of the keyed store (:mod:`kvmath.traces.simulate.store`),
bounded by its capacity, fed a chunk of requests at a time.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.store import (CNT, META, Store, add, find, link_tail, pop_head,
                                          remove, touch)


class Chunk(NamedTuple):
    """A chunk of requests, in order."""
    off: np.ndarray  #: where each request's blocks begin in ``hashes`` (n + 1, int64)
    hashes: np.ndarray  #: their block hashes, head first (uint64)
    hits: np.ndarray  #: filled in: each request's leading blocks found (int64)


class Handed(NamedTuple):
    """What the nodes hand a write-back pool while serving a chunk of requests."""
    node_hit: np.ndarray  #: per request, its node's own hit, blocks (int64)
    node_of: np.ndarray  #: per request, its node (int64)
    n_exits: np.ndarray  #: per request, the blocks its node let go while serving it (int64)
    seg: np.ndarray  #: those blocks' hashes, each node's together, in order (uint64)
    cursor: np.ndarray  #: per node, where its next block is in ``seg`` (int64; advanced)


# ------------------------------------------------------------------ a shared write-through LRU
@njit(cache=True, nogil=True)
def _shared_lru(r0, S, cap, chunk, counters, need):  # pragma: no cover (compiled)
    """Requests r0.. of a chunk against one LRU of ``cap`` blocks that every request reads,
    then writes (tail first, head last); the chunk's hits: leading blocks present; counters[0]:
    blocks absent when their request began (written)."""
    off, hashes, hits = chunk
    n = len(off) - 1
    for r in range(r0, n):
        o = off[r]
        m = off[r + 1] - o
        if S[META][0] < need:
            return r
        h = 0
        while h < m and find(S, hashes[o + h], 0) >= 0:
            h += 1
        hits[r] = h
        absent = 0
        for j in range(h, m):
            if find(S, hashes[o + j], 0) < 0:
                absent += 1
        counters[0] += absent
        for j in range(m - 1, -1, -1):
            b = hashes[o + j]
            e = find(S, b, 0)
            if e >= 0:
                touch(S, e)
            else:
                e = add(S, b, 0)
                link_tail(S, e)
                if S[CNT][0] > cap:
                    old = pop_head(S, 0)
                    remove(S, old)
    return n


class SharedLRU:
    """A write-through LRU of ``capacity`` blocks that every request reads then writes (a pool
    the fleet shares), fed a chunk of requests at a time."""

    def __init__(self, capacity, expect=1 << 16):
        self.cap = int(min(max(capacity, 0), 2 ** 62))
        self.store = Store(min(self.cap + 1, expect) + 64, 1)
        self.counters = np.zeros(1, np.int64)

    @property
    def written(self):
        return int(self.counters[0])

    def feed(self, n_blocks, hashes):
        """Leading blocks of each request present (int64), the requests in order."""
        n = len(n_blocks)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(n_blocks, out=off[1:])
        hits = np.zeros(n, np.int64)
        need = int(np.max(n_blocks)) + 1 if n else 1
        r = 0
        while r < n:
            self.store.ensure(need)
            r = _shared_lru(r, self.store.S, self.cap, Chunk(off, hashes, hits), self.counters,
                            need)
        return hits


# ------------------------------------------------------------------ a shared write-back LRU
@njit(cache=True, nogil=True)
def _back_lru(r0, S, cap, chunk, handed, counters, need):  # pragma: no cover (compiled)
    """Requests r0.. of a chunk against one LRU of ``cap`` blocks that the nodes' evicted
    blocks are written to (:class:`Handed`): each request first reads from it the blocks beyond
    its node's own hit that it holds, in order, touching them (the chunk's hits: its node's and
    the store's leading blocks together), then the n_exits[r] blocks its node evicted while
    serving it (seg from cursor[node_of[r]] on) are written, an existing one only refreshed;
    counters[0]: blocks written (absent when offered)."""
    off, hashes, hits = chunk
    node_hit, node_of, n_exits, seg, cursor = handed
    n = len(off) - 1
    for r in range(r0, n):
        if S[META][0] < need:
            return r
        o = off[r]
        m = off[r + 1] - o
        h = node_hit[r]
        while h < m:
            e = find(S, hashes[o + h], 0)
            if e < 0:
                break
            touch(S, e)
            h += 1
        hits[r] = h
        nd = node_of[r]
        c = cursor[nd]
        for i in range(n_exits[r]):
            b = seg[c + i]
            e = find(S, b, 0)
            if e >= 0:
                touch(S, e)
                continue
            e = add(S, b, 0)
            link_tail(S, e)
            counters[0] += 1
            if S[CNT][0] > cap:
                old = pop_head(S, 0)
                remove(S, old)
        cursor[nd] = c + n_exits[r]
    return n


class BackLRU(SharedLRU):
    """A write-back LRU of ``capacity`` blocks that the fleet shares (a pool the nodes write
    their evicted blocks to), fed a chunk of requests at a time."""

    def feed_back(self, n_blocks, hashes, node_hit, node_of, n_exits, seg, starts):
        """Leading blocks of each request its node and the store hold (int64), the requests in
        order; seg: the exits of the chunk's requests, each node's together from starts[node]."""
        n = len(n_blocks)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(n_blocks, out=off[1:])
        hits = np.zeros(n, np.int64)
        need = int(np.max(n_exits)) + 1 if n else 1
        handed = Handed(np.asarray(node_hit, np.int64), np.asarray(node_of, np.int64),
                        np.asarray(n_exits, np.int64), seg, np.asarray(starts, np.int64).copy())
        r = 0
        while r < n:
            self.store.ensure(need)
            r = _back_lru(r, self.store.S, self.cap, Chunk(off, hashes, hits), handed,
                          self.counters, need)
        return hits

