"""Each node's blocks gathered from a served trace (numba): a counting sort of the block accesses
by their request's node (:func:`split_by_node`), each node's in order, for the nodes' tier
replays. Which node serves a request is the fleet's schedule's
(:mod:`kvmath.traces.simulate.serve`).
"""
from __future__ import annotations

import numpy as np
from kvmath.traces.simulate.compiled import njit


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

