"""Previous turns (numba): the earlier request each request continues, the latest whose whole
prompt it repeats (:func:`kvmath.traces.statistics.continuations`).

A plain map from a prompt's last full block to its request (no order, not the keyed store): a
request looks up its own full blocks, longest prefix first, and the first found names its previous
turn, which leaves the map (a turn is continued once); then the request's own last full block
enters it. One 16-byte slot an entry at half load, as the map holds every prompt not yet
continued; it doubles when half full. Fed a chunk of requests at a time (:class:`Continuations`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.store import slot


class Prompts(NamedTuple):
    """A chunk of requests, in order."""
    off: np.ndarray  #: where each request's blocks begin in ``hashes`` (n + 1, int64)
    hashes: np.ndarray  #: their block hashes, head first (uint64)
    tokens: np.ndarray  #: their prompts' tokens (int64)


# A plain map from a prompt's last full block to its request (+ 1; 0: an empty slot), no order:
# one 16-byte slot an entry at half load, as it holds every prompt not yet continued
@njit(cache=True, nogil=True)
def _map_delete(tab, i):  # pragma: no cover (compiled)
    mask = tab.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if tab[j, 1] == np.uint64(0):
            break
        h = slot(tab[j, 0], 0, mask)
        if i <= j:
            movable = h <= i or h > j
        else:
            movable = h <= i and h > j
        if movable:
            tab[i, 0] = tab[j, 0]
            tab[i, 1] = tab[j, 1]
            i = j
    tab[i, 1] = np.uint64(0)


@njit(cache=True, nogil=True)
def _map_find(tab, key):  # pragma: no cover (compiled)
    mask = tab.shape[0] - 1
    i = slot(key, 0, mask)
    while tab[i, 1] != np.uint64(0):
        if tab[i, 0] == key:
            return i
        i = (i + 1) & mask
    return -1 - i  # absent: -1 - the empty slot it would take


@njit(cache=True, nogil=True)
def _continuations(r0, base, tab, count, prompts, bt, parent):  # pragma: no cover (compiled)
    """readers.continuations' loop for requests r0.. of a chunk (:class:`Prompts`; request
    base + r of the trace) of ``bt`` tokens a block, each one's previous turn written to parent;
    stops when the map is half full (count[0]: its entries)."""
    off, hashes, prompt = prompts
    n = len(off) - 1
    limit = tab.shape[0] // 2
    for r in range(r0, n):
        if count[0] >= limit:
            return r
        o = off[r]
        m = off[r + 1] - o
        full = min(prompt[r] // bt, m)
        for j in range(full - 1, -1, -1):  # the longest earlier whole prompt first
            i = _map_find(tab, hashes[o + j])
            if i >= 0:
                parent[r] = np.int64(tab[i, 1]) - 1
                _map_delete(tab, i)
                count[0] -= 1
                break
        if full > 0:
            b = hashes[o + full - 1]
            i = _map_find(tab, b)
            if i < 0:
                i = -1 - i
                tab[i, 0] = b
                count[0] += 1
            tab[i, 1] = np.uint64(base + r + 1)
    return n


@njit(cache=True, nogil=True)
def _map_rehash(old, tab):  # pragma: no cover (compiled)
    for i in range(old.shape[0]):
        if old[i, 1] != np.uint64(0):
            j = -1 - _map_find(tab, old[i, 0])
            tab[j, 0] = old[i, 0]
            tab[j, 1] = old[i, 1]


class Continuations:
    """The previous turn of each request (readers.continuations), fed a chunk at a time."""

    def __init__(self, block_tokens, expect=1 << 16):
        self.bt = int(block_tokens)
        self.tab = np.zeros((1 << max(int(2 * expect - 1).bit_length(), 4), 2), np.uint64)
        self.count = np.zeros(1, np.int64)
        self.base = 0

    def feed(self, n_blocks, prompt_tokens, hashes):
        n = len(n_blocks)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(n_blocks, out=off[1:])
        parent = np.full(n, -1, np.int64)
        prompts = Prompts(off, hashes, np.asarray(prompt_tokens, np.int64))
        r = 0
        while True:
            r = _continuations(r, self.base, self.tab, self.count, prompts, self.bt, parent)
            if r >= n:
                break
            old, self.tab = self.tab, np.zeros((2 * self.tab.shape[0], 2), np.uint64)
            _map_rehash(old, self.tab)
            del old
        self.base += n
        return parent

