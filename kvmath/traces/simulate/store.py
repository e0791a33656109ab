"""The keyed store every compiled cache simulation keeps what a cache holds in (numba).

An open-addressing hash table (linear probing, backward-shift deletion) maps a key (a block hash
and a list number) to an entry, and per list a doubly linked LRU order runs over its entries. A
list is a tier of a node (the tier replay: block b in tier k is the entry (b, k)), a node of the
fleet (the routers) or the one list of a pool's LRU. Memory follows what the caches hold, not the
trace: an entry lives while its block is in its list, and the store grows (doubling,
:meth:`Store.ensure`) only when a request could not otherwise be placed; the per-block counts a
policy reads (``selective``'s uses, ``ttl``'s last use) are entries of one more list that are
never dropped, as the Python replay's dictionaries held every block the trace named.

The store is a tuple of arrays (positions :data:`TAB` ... :data:`FVAL`) that the kernels take as
their ``S``; :func:`find`, :func:`add`, :func:`remove`, :func:`link_tail`, :func:`unlink`,
:func:`touch` and :func:`pop_head` are its operations (an OrderedDict per list: lookup, insertion,
deletion, move_to_end, popitem(last=False)). A kernel stops at a request boundary when the store
could fill, and its driver grows it and resumes.
"""
from __future__ import annotations

import numpy as np
from kvmath.traces.simulate.compiled import njit

_G = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# positions in a store tuple: the table (key, list << 32 | entry per slot), each entry's key
# and its (list, previous, next), the free entries, the free count, and per list its least and
# most recent entry and its length; one int64 and one float64 per entry where asked for
TAB, KEY, LINK, FREE, META, HEAD, TAIL, CNT, IVAL, FVAL = range(10)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


@njit(cache=True, inline="always")
def slot(key, lst, mask):  # pragma: no cover (compiled)
    """splitmix64's finaliser of the key and its list: the home slot."""
    x = key ^ (np.uint64(lst) * _G)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return np.int64(x & np.uint64(mask))


@njit(cache=True, nogil=True)
def find(S, key, lst):  # pragma: no cover (compiled)
    tab = S[TAB]
    mask = tab.shape[0] - 1
    i = slot(key, lst, mask)
    want = np.uint64(lst)
    while True:
        v = tab[i, 1]
        if v == _EMPTY:
            return -1
        if tab[i, 0] == key and (v >> _SHIFT) == want:
            return np.int64(v & _LOW)
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def add(S, key, lst):  # pragma: no cover (compiled)
    """A new entry (key, lst), not linked into its list's order; the caller checked that the
    key is absent and that a free entry is left."""
    tab, link, free, meta = S[TAB], S[LINK], S[FREE], S[META]
    meta[0] -= 1
    e = free[meta[0]]
    S[KEY][e] = key
    link[e, 0] = lst
    link[e, 1] = -1
    link[e, 2] = -1
    mask = tab.shape[0] - 1
    i = slot(key, lst, mask)
    while tab[i, 1] != _EMPTY:
        i = (i + 1) & mask
    tab[i, 0] = key
    tab[i, 1] = (np.uint64(lst) << _SHIFT) | np.uint64(e)
    return e


@njit(cache=True, nogil=True)
def remove(S, e):  # pragma: no cover (compiled)
    """Drop entry e (already unlinked) from the table (backward-shift deletion) and free it."""
    tab, link, free, meta = S[TAB], S[LINK], S[FREE], S[META]
    mask = tab.shape[0] - 1
    lst = link[e, 0]
    if e < 0 or lst < 0:
        raise RuntimeError("a cache simulation freed a free entry: a bug in kvmath")
    i = slot(S[KEY][e], lst, mask)
    v = (np.uint64(lst) << _SHIFT) | np.uint64(e)
    while tab[i, 1] != v:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        f = tab[j, 1]
        if f == _EMPTY:
            break
        h = slot(tab[j, 0], f >> _SHIFT, mask)
        if i <= j:
            movable = h <= i or h > j
        else:
            movable = h <= i and h > j
        if movable:
            tab[i, 0] = tab[j, 0]
            tab[i, 1] = f
            i = j
    tab[i, 1] = _EMPTY
    link[e, 0] = -1
    free[meta[0]] = e
    meta[0] += 1


@njit(cache=True, nogil=True)
def link_tail(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent."""
    link, head, tail, cnt = S[LINK], S[HEAD], S[TAIL], S[CNT]
    lst = link[e, 0]
    t = tail[lst]
    link[e, 1] = t
    link[e, 2] = -1
    if t >= 0:
        link[t, 2] = e
    else:
        head[lst] = e
    tail[lst] = e
    cnt[lst] += 1


@njit(cache=True, nogil=True)
def unlink(S, e):  # pragma: no cover (compiled)
    link, head, tail, cnt = S[LINK], S[HEAD], S[TAIL], S[CNT]
    lst = link[e, 0]
    p = link[e, 1]
    q = link[e, 2]
    if p >= 0:
        link[p, 2] = q
    else:
        head[lst] = q
    if q >= 0:
        link[q, 1] = p
    else:
        tail[lst] = p
    link[e, 1] = -1
    link[e, 2] = -1
    cnt[lst] -= 1


@njit(cache=True, nogil=True)
def touch(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent (OrderedDict.move_to_end)."""
    if S[TAIL][S[LINK][e, 0]] != e:
        unlink(S, e)
        link_tail(S, e)


@njit(cache=True, nogil=True)
def pop_head(S, lst):  # pragma: no cover (compiled)
    """Unlink and return the least recent entry of a list (OrderedDict.popitem(last=False))."""
    e = S[HEAD][lst]
    if e < 0:
        raise RuntimeError("a cache simulation popped an empty list: a bug in kvmath")
    unlink(S, e)
    return e


@njit(cache=True, nogil=True)
def _rebuild(tab, keys, link):  # pragma: no cover (compiled)
    mask = tab.shape[0] - 1
    for e in range(len(keys)):
        lst = link[e, 0]
        if lst >= 0:
            i = slot(keys[e], lst, mask)
            while tab[i, 1] != _EMPTY:
                i = (i + 1) & mask
            tab[i, 0] = keys[e]
            tab[i, 1] = (np.uint64(lst) << _SHIFT) | np.uint64(e)


class Store:
    """A keyed store of ``lists`` LRU lists (see the module's docstring), growing on demand;
    ``ints`` / ``floats``: one int64 / float64 value per entry."""

    def __init__(self, entries, lists, ints=False, floats=False):
        n = max(int(entries), 64)
        self.ints, self.floats = ints, floats
        link = np.full((n, 4), -1, np.int32)
        self.S = (self._table(n), np.zeros(n, np.uint64), link,
                  np.arange(n - 1, -1, -1, dtype=np.int32), np.array([n], np.int64),
                  np.full(lists, -1, np.int32), np.full(lists, -1, np.int32),
                  np.zeros(lists, np.int64), np.zeros(n if ints else 0, np.int64),
                  np.zeros(n if floats else 0, np.float64))

    @staticmethod
    def _table(n):
        """At least twice the entries' slots (a power of two): load at most one half."""
        return np.full((1 << max(int(2 * n - 1).bit_length(), 4), 2), _EMPTY, np.uint64)

    @property
    def free(self):
        return int(self.S[META][0])

    @property
    def size(self):
        return len(self.S[KEY])

    def count(self, lst):
        """Entries in list ``lst``."""
        return int(self.S[CNT][lst])

    def ensure(self, wanted):
        """Grow (doubling) until at least ``wanted`` entries are free."""
        while self.free < wanted:
            S, n = self.S, self.size
            m = 2 * n
            if m >= 2 ** 31:
                raise MemoryError("a cache simulation needs more than 2**31 entries")

            def longer(a, fill):
                out = np.full((m,) + a.shape[1:], fill, a.dtype)
                out[:n] = a
                return out
            nfree = self.free
            free = np.empty(m, np.int32)
            free[:m - n] = np.arange(m - 1, n - 1, -1, dtype=np.int32)
            free[m - n:m - n + nfree] = S[FREE][:nfree]
            keys, link = longer(S[KEY], 0), longer(S[LINK], -1)
            tab = self._table(m)
            _rebuild(tab, keys, link)
            self.S = (tab, keys, link, free, np.array([nfree + m - n], np.int64), S[HEAD],
                      S[TAIL], S[CNT], longer(S[IVAL], 0) if self.ints else S[IVAL],
                      longer(S[FVAL], 0.0) if self.floats else S[FVAL])

    def nbytes(self):
        return sum(a.nbytes for a in self.S)

