"""LRU stack distances of a trace's block accesses (numba): for every access, the distinct blocks
used since its block's last use, and the prefix distance (the largest over the request's leading
blocks up to it), which place the access in every LRU cache size at once (Mattson et al. 1970;
:func:`kvmath.traces.replay.stack_distances`). A compiled loop, where numpy's whole-array steps
would hold many access-length temporaries at once (issue 20: memory must not grow past what the
trace itself holds by more than a few access-length arrays).

:func:`prefix_distances` computes the LRU stack distance of every access with a Fenwick tree
over the access sequence (Bennett and Kruskal, 1975; as in Almasi et al., "Calculating stack
distances efficiently", 2002): position j holds a mark while it is the last use of its block,
so the distinct blocks used between two positions are the marks between them. Marks are
counted per SHARDS stratum in integers (the rate-1 stratum and the hash-sampled one), so a
weighted distance is exact arithmetic on two counts and does not depend on summation order.

Memory: two int32 trees and an int32 last-use per distinct block, beside the outputs (two float64
per access); time O(n log n).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

_compiled = {}


class Accesses(NamedTuple):
    """The access sequence and what each access is."""
    order: np.ndarray  #: trace indices, requests in turn, each tail first (int32)
    rid: np.ndarray  #: the request of each access
    ids: np.ndarray  #: the dense block id of each access (0 .. n_ids - 1, int32)
    full: np.ndarray  #: whether an access is in the rate-1 stratum (bool)


def _kernel():
    """The compiled kernel (numba is imported and the function compiled, or loaded from its
    on-disk cache, on first use only)."""
    if "prefix" not in _compiled:
        from kvmath.traces.simulate.compiled import njit

        @njit(cache=True, nogil=True)
        def prefix(accesses, n_ids, inv_rate, d, e):  # pragma: no cover (compiled)
            order, rid, ids, full = accesses
            n = len(order)
            tree_full = np.zeros(n + 1, dtype=np.int32)
            tree_hashed = np.zeros(n + 1, dtype=np.int32)
            last = np.full(n_ids, -1, dtype=np.int32)
            s = 0
            while s < n:
                r = rid[order[s]]
                c = s
                while c < n and rid[order[c]] == r:
                    c += 1
                # distances of the request's accesses, all against the cache as it was at s
                for q in range(s, c):
                    i = order[q]
                    p = last[ids[i]]
                    if p < 0:
                        d[i] = np.inf
                        continue
                    # marks in (p, s): prefix sums to s - 1 less those to p (1-based tree)
                    a_full = 0
                    a_hashed = 0
                    k = s
                    while k > 0:
                        a_full += tree_full[k]
                        a_hashed += tree_hashed[k]
                        k -= k & -k
                    k = p + 1
                    while k > 0:
                        a_full -= tree_full[k]
                        a_hashed -= tree_hashed[k]
                        k -= k & -k
                    own = 1.0 if full[i] else inv_rate
                    d[i] = a_full + a_hashed * inv_rate + own
                # the request's uses become the last uses of their blocks
                for q in range(s, c):
                    i = order[q]
                    p = last[ids[i]]
                    if p >= 0:  # the old mark leaves the tree of its own stratum (a hash the
                        # trace repeats at another position sits in the other)
                        old = tree_full if full[order[p]] else tree_hashed
                        k = p + 1
                        while k <= n:
                            old[k] -= 1
                            k += k & -k
                    tree = tree_full if full[i] else tree_hashed
                    k = q + 1
                    while k <= n:
                        tree[k] += 1
                        k += k & -k
                    last[ids[i]] = q
                # prefix distance: running maximum head first (the sequence runs tail first)
                run = 0.0
                for q in range(c - 1, s - 1, -1):
                    i = order[q]
                    if d[i] > run:
                        run = d[i]
                    e[i] = run
                s = c

        _compiled["prefix"] = prefix
    return _compiled["prefix"]


def prefix_distances(order, rid, ids, full, n_ids, inv_rate):
    """(D, E): stack and prefix distance of every access (float64, in trace order; inf: a block
    never used before, or a prefix holding one).

    order: the access sequence (trace indices, requests in turn, each tail first), int32;
    rid: request of each access; ids: dense block id of each access (0 .. n_ids - 1), int32;
    full: whether an access is in the rate-1 stratum (weight 1; else weight inv_rate).
    """
    n = len(order)
    d = np.empty(n, dtype=np.float64)
    e = np.empty(n, dtype=np.float64)
    if n:
        _kernel()(Accesses(order, rid, ids, full), int(n_ids), float(inv_rate), d, e)
    return d, e
