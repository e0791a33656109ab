"""Compiled cache simulations (numba): the tiered replay, the routers, the pool's LRU, the
conversations' previous turns and the first-come-first-served queue, over compact arrays.

Each simulation keeps what a cache holds in a **keyed store**: an open-addressing hash table
(linear probing, backward-shift deletion) from a key (a block hash and a list number) to an
entry, and per list a doubly linked LRU order over its entries. A list is a tier of a node
(the replay: block b in tier k is the entry (b, k)), a node of the fleet (the routers), or a
plain map (the previous turns). Memory follows what the caches hold, not the trace: an entry
lives while its block is in its list, and the store grows (doubling) only when a request could
not otherwise be placed; the per-block counts a policy reads (``selective``'s uses, ``ttl``'s
last use) are entries of one more list that are never dropped, as the Python replay's
dictionaries held every block the trace named.

The kernels are plain loops over requests in arrival order, written to give exactly the
Python replay's results (kept in tests/replay_oracle.py as the oracle): the same lookups,
insertions and evictions in the same order, and every floating-point sum taken in the same
order. A kernel stops at a request boundary when its store or output arrays could fill, and
its driver (:class:`Store`, :func:`replay_arrays`, ...) grows them and resumes it.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_G = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# positions in a store tuple: the table (key, list << 32 | entry per slot), each entry's key
# and its (list, previous, next), the free entries, the free count, and per list its least and
# most recent entry and its length; one int64 and one float64 per entry where asked for
_TAB, _KEY, _LINK, _FREE, _META, _HEAD, _TAIL, _CNT, _IVAL, _FVAL = range(10)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


@njit(cache=True, inline="always")
def _slot(key, lst, mask):  # pragma: no cover (compiled)
    """splitmix64's finaliser of the key and its list: the home slot."""
    x = key ^ (np.uint64(lst) * _G)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return np.int64(x & np.uint64(mask))


@njit(cache=True, nogil=True)
def _find(S, key, lst):  # pragma: no cover (compiled)
    tab = S[_TAB]
    mask = tab.shape[0] - 1
    i = _slot(key, lst, mask)
    want = np.uint64(lst)
    while True:
        v = tab[i, 1]
        if v == _EMPTY:
            return -1
        if tab[i, 0] == key and (v >> _SHIFT) == want:
            return np.int64(v & _LOW)
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _add(S, key, lst):  # pragma: no cover (compiled)
    """A new entry (key, lst), not linked into its list's order; the caller checked that the
    key is absent and that a free entry is left."""
    tab, link, free, meta = S[_TAB], S[_LINK], S[_FREE], S[_META]
    meta[0] -= 1
    e = free[meta[0]]
    S[_KEY][e] = key
    link[e, 0] = lst
    link[e, 1] = -1
    link[e, 2] = -1
    mask = tab.shape[0] - 1
    i = _slot(key, lst, mask)
    while tab[i, 1] != _EMPTY:
        i = (i + 1) & mask
    tab[i, 0] = key
    tab[i, 1] = (np.uint64(lst) << _SHIFT) | np.uint64(e)
    return e


@njit(cache=True, nogil=True)
def _remove(S, e):  # pragma: no cover (compiled)
    """Drop entry e (already unlinked) from the table (backward-shift deletion) and free it."""
    tab, link, free, meta = S[_TAB], S[_LINK], S[_FREE], S[_META]
    mask = tab.shape[0] - 1
    lst = link[e, 0]
    i = _slot(S[_KEY][e], lst, mask)
    v = (np.uint64(lst) << _SHIFT) | np.uint64(e)
    while tab[i, 1] != v:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        f = tab[j, 1]
        if f == _EMPTY:
            break
        h = _slot(tab[j, 0], f >> _SHIFT, mask)
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
def _link_tail(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent."""
    link, head, tail, cnt = S[_LINK], S[_HEAD], S[_TAIL], S[_CNT]
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
def _unlink(S, e):  # pragma: no cover (compiled)
    link, head, tail, cnt = S[_LINK], S[_HEAD], S[_TAIL], S[_CNT]
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
def _touch(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent (OrderedDict.move_to_end)."""
    if S[_TAIL][S[_LINK][e, 0]] != e:
        _unlink(S, e)
        _link_tail(S, e)


@njit(cache=True, nogil=True)
def _pop_head(S, lst):  # pragma: no cover (compiled)
    """Unlink and return the least recent entry of a list (OrderedDict.popitem(last=False))."""
    e = S[_HEAD][lst]
    _unlink(S, e)
    return e


@njit(cache=True, nogil=True)
def _rebuild(tab, keys, link):  # pragma: no cover (compiled)
    mask = tab.shape[0] - 1
    for e in range(len(keys)):
        lst = link[e, 0]
        if lst >= 0:
            i = _slot(keys[e], lst, mask)
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
        return int(self.S[_META][0])

    @property
    def size(self):
        return len(self.S[_KEY])

    def count(self, lst):
        """Entries in list ``lst``."""
        return int(self.S[_CNT][lst])

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
            free[m - n:m - n + nfree] = S[_FREE][:nfree]
            keys, link = longer(S[_KEY], 0), longer(S[_LINK], -1)
            tab = self._table(m)
            _rebuild(tab, keys, link)
            self.S = (tab, keys, link, free, np.array([nfree + m - n], np.int64), S[_HEAD],
                      S[_TAIL], S[_CNT], longer(S[_IVAL], 0) if self.ints else S[_IVAL],
                      longer(S[_FVAL], 0.0) if self.floats else S[_FVAL])

    def nbytes(self):
        return sum(a.nbytes for a in self.S)


# ------------------------------------------------------------------ the tiered replay
POLICIES = {"lru": 0, "ttl": 1, "selective": 2}


@njit(cache=True, nogil=True)
def _offer(S, k, b, now, w, T, cap, size, wbps, drive, policy, ttl, min_uses, through, nwr,
           dropped, filtered, wr, r, ex_r, ex_h, counters):  # pragma: no cover (compiled)
    """Block b offered to tier k (an eviction from the tier above, or a write-through): the
    Python replay's offer(), line for line. A block that leaves the node (written back:
    filtered, dropped, or evicted from its last tier; written through: evicted from its last
    tier) is recorded in ex_r / ex_h (request r, hash) when they have room for it (the caller
    sizes them: see :func:`_replay`), counters[2] counting them."""
    while k < T:
        e = _find(S, b, k)
        if e >= 0:
            _touch(S, e)
            return
        if policy == 2 and drive[k]:
            s = _find(S, b, T)
            u = S[_IVAL][s] if s >= 0 else 0
            if u < min_uses:
                filtered[k] += 1
                if not through:  # written through, the tiers above still hold it
                    _exit(S, T, r, b, ex_r, ex_h, counters)
                return
        if wr[k, w] + size[k] > wbps[k]:
            dropped[k] += 1
            if not through:
                _exit(S, T, r, b, ex_r, ex_h, counters)
            return
        wr[k, w] += size[k]
        nwr[k] += 1
        e = _add(S, b, k)
        _link_tail(S, e)
        if policy == 1 and k > 0:
            while S[_CNT][k] > 0:
                h = S[_HEAD][k]
                s = _find(S, S[_KEY][h], T)
                if now - S[_FVAL][s] > ttl:
                    _unlink(S, h)
                    _remove(S, h)
                else:
                    break
        if S[_CNT][k] <= cap[k]:
            return
        old = _pop_head(S, k)
        b = S[_KEY][old]
        _remove(S, old)
        if through:
            if k == T - 1:  # the last tier, the node's largest, lets it go
                _exit(S, T, r, b, ex_r, ex_h, counters)
            return
        k += 1
    _exit(S, T, r, b, ex_r, ex_h, counters)


@njit(cache=True, nogil=True)
def _exit(S, T, r, b, ex_r, ex_h, counters):  # pragma: no cover (compiled)
    """Record block b leaving the node at request r (when recording: ex_r has room), unless
    one of the node's T tiers still holds a copy of it (lower tiers keep copies of what a
    reload brought back up): the node has let it go only when none does."""
    for k in range(T):
        if _find(S, b, k) >= 0:
            return
    q = counters[2]
    if q < len(ex_r):
        ex_r[q] = r
        ex_h[q] = b
        counters[2] = q + 1


@njit(cache=True, nogil=True)
def _replay(r0, S, ts, wid, off, hashes, cap, size, wbps, drive, policy, ttl, min_uses,
            through, sh, shared_size, hits, nwr, dropped, filtered, rd, wr, srd, counters,
            hit_blocks, run_r, run_k, run_a, run_b, ex_r, ex_h, need):  # pragma: no cover
    """Requests r0.. through the tiers; returns the request it stopped before (len(ts) when
    done; earlier when the store has fewer than ``need`` free entries, or the run or exit
    arrays could fill). counters: [blocks read from the shared store, runs written, exits
    recorded]. ex_r / ex_h: the blocks leaving the node (request, hash), recorded when they are
    not empty: at most one a block the request writes (an eviction chain ends in one exit)."""
    T = len(cap)
    n = len(ts)
    nmax = 0
    for r in range(n):
        if off[r + 1] - off[r] > nmax:
            nmax = off[r + 1] - off[r]
    where = np.empty(nmax + 1, np.int64)
    went = np.empty(nmax + 1, np.int64)
    has_shared = len(sh) > 0
    for r in range(r0, n):
        o = off[r]
        m = off[r + 1] - o
        if S[_META][0] < need or counters[1] + m + 2 > len(run_r) or (
                len(ex_r) > 0 and counters[2] + m > len(ex_r)):
            return r
        now = ts[r]
        w = wid[r]
        nw = 0
        for j in range(m):  # lookup before insert: the leading blocks present somewhere
            b = hashes[o + j]
            found = -1
            fe = -1
            for k in range(T):
                e = _find(S, b, k)
                if e >= 0:
                    if policy == 1 and k > 0:
                        s = _find(S, b, T)
                        if now - S[_FVAL][s] > ttl:
                            _unlink(S, e)
                            _remove(S, e)
                            continue
                    found = k
                    fe = e
                    break
            if found < 0:
                break
            where[nw] = found
            went[nw] = fe
            nw += 1
        for j in range(nw):
            k = where[j]
            hits[k] += 1
            if k > 0:
                rd[k, w] += size[k]
                _touch(S, went[j])
        hit_blocks[r] = nw
        j = 0
        while j < nw:
            e2 = j
            while e2 < nw and where[e2] == where[j]:
                e2 += 1
            q = counters[1]
            run_r[q] = r
            run_k[q] = where[j]
            run_a[q] = j
            run_b[q] = e2
            counters[1] = q + 1
            j = e2
        if has_shared and sh[r] > nw:  # the shared store serves the rest
            q = counters[1]
            run_r[q] = r
            run_k[q] = T
            run_a[q] = nw
            run_b[q] = sh[r]
            counters[1] = q + 1
            srd[w] += (sh[r] - nw) * shared_size
            counters[0] += sh[r] - nw
            hit_blocks[r] = sh[r]
        if policy == 2:
            for j in range(m):
                b = hashes[o + j]
                s = _find(S, b, T)
                if s < 0:
                    s = _add(S, b, T)
                S[_IVAL][s] += 1
        elif policy == 1:
            for j in range(m):
                b = hashes[o + j]
                s = _find(S, b, T)
                if s < 0:
                    s = _add(S, b, T)
                S[_FVAL][s] = now
        for j in range(m - 1, -1, -1):  # tail first, head last
            b = hashes[o + j]
            e = _find(S, b, 0)
            if e >= 0:
                _touch(S, e)
                continue
            if wr[0, w] + size[0] > wbps[0]:
                dropped[0] += 1
                continue
            wr[0, w] += size[0]
            nwr[0] += 1
            e = _add(S, b, 0)
            _link_tail(S, e)
            if through:
                for k in range(1, T):
                    _offer(S, k, b, now, w, T, cap, size, wbps, drive, policy, ttl, min_uses,
                           through, nwr, dropped, filtered, wr, r, ex_r, ex_h, counters)
            while S[_CNT][0] > cap[0]:
                old = _pop_head(S, 0)
                ob = S[_KEY][old]
                _remove(S, old)
                if not through:
                    _offer(S, 1, ob, now, w, T, cap, size, wbps, drive, policy, ttl, min_uses,
                           through, nwr, dropped, filtered, wr, r, ex_r, ex_h, counters)
                elif T == 1:  # no tier below HBM: it leaves the node
                    _exit(S, T, r, ob, ex_r, ex_h, counters)
    return n


def windows_of(timestamp_s):
    """(index of each request's 1-s window among the windows with requests, those windows'
    count): the Python replay's int(now - t0), in arrival order."""
    t0 = float(timestamp_s[0])
    w = np.floor(timestamp_s - t0).astype(np.int64)
    new = np.empty(len(w), bool)
    new[:1] = True
    np.not_equal(w[1:], w[:-1], out=new[1:])
    wid = np.cumsum(new) - 1
    return wid, int(wid[-1]) + 1 if len(wid) else 0


#: blocks leaving a node held before they are handed on (16 bytes each)
EXIT_BUFFER = 1 << 18


def replay_arrays(timestamp_s, n_blocks, hashes, cap, size, wbps, drive, policy, ttl,
                  min_uses, through, shared_hits=None, shared_size=0.0, exits=None):
    """Run the compiled replay over requests (arrival times, block counts, their hashes head
    first, flat) through tiers (capacity in blocks, block bytes, write bandwidth B/s, drive or
    not). Returns a dict of arrays: per tier hits, writes, dropped, filtered and the bytes of
    each 1-s window with requests (``rd``, ``wr``: [tier, window]); ``srd`` the shared store's
    reads per window; per request ``hit_blocks``; the hit runs (``runs``: r, k, a, b).
    exits: called with (request indices, hashes) of the blocks leaving the node (evicted from
    its last tier, or refused by a tier below the first), in order, a bounded buffer at a
    time (the arrays are reused after the call returns)."""
    n = len(timestamp_s)
    T = len(cap)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(n_blocks, out=off[1:])
    wid, W = windows_of(timestamp_s)
    nmax = int(np.max(n_blocks)) if n else 0
    need = nmax * (T + 1) + 1
    p = POLICIES[policy]
    cap_a = np.minimum(np.asarray(cap, dtype=np.float64), 2.0 ** 62).astype(np.int64)
    # a store a little larger than the tiers' blocks, or than the trace's accesses
    store = Store(min(int(cap_a.sum()) + need, max(len(hashes), 1)) if p == 0
                  else min(len(hashes) + 1, 1 << 20), T + 1, ints=p == 2, floats=p == 1)
    hits = np.zeros(T, np.int64)
    nwr, dropped, filtered = np.zeros(T, np.int64), np.zeros(T, np.int64), np.zeros(T, np.int64)
    rd, wr, srd = np.zeros((T, W)), np.zeros((T, W)), np.zeros(W)
    counters = np.zeros(3, np.int64)
    ex_n = max(EXIT_BUFFER, nmax + 1) if exits is not None else 0
    ex_r, ex_h = np.empty(ex_n, np.int64), np.empty(ex_n, np.uint64)
    hit_blocks = np.zeros(n, np.int64)
    runs = [np.empty(max(2 * n, 16), np.int64) for _ in range(4)]
    sh = (np.empty(0, np.int64) if shared_hits is None
          else np.minimum(shared_hits, n_blocks).astype(np.int64))
    r = 0
    while True:
        r = _replay(r, store.S, np.asarray(timestamp_s, np.float64), wid, off, hashes, cap_a,
                    np.asarray(size, np.float64), np.asarray(wbps, np.float64),
                    np.asarray(drive, np.bool_), p, float(ttl or 0.0), int(min_uses),
                    bool(through), sh, float(shared_size), hits, nwr, dropped, filtered, rd, wr,
                    srd, counters, hit_blocks, *runs, ex_r, ex_h, need)
        if exits is not None and counters[2]:
            exits(ex_r[:counters[2]], ex_h[:counters[2]])
            counters[2] = 0
        if r >= n:
            break
        store.ensure(need)
        if counters[1] + nmax + 2 > len(runs[0]):
            runs = [np.concatenate([a, np.empty(len(a), np.int64)]) for a in runs]
    q = int(counters[1])
    return {"hits": hits, "writes": nwr, "dropped": dropped, "filtered": filtered, "rd": rd,
            "wr": wr, "srd": srd, "shared_blocks": int(counters[0]), "hit_blocks": hit_blocks,
            "runs": tuple(a[:q] for a in runs), "windows_with_requests": W}


@njit(cache=True, nogil=True)
def _price(run_r, run_k, run_a, run_b, n_blocks, rec_prompt, rec_blk, reload_blk, free_tier,
           saved, lost, own, has_own):  # pragma: no cover (compiled)
    """HitCost.price's loop: each run's saving against its reload, in the runs' order."""
    reload_time = 0.0
    for i in range(len(run_r)):
        r = run_r[i]
        k = run_k[i]
        a = run_a[i]
        b = run_b[i]
        rec = (rec_prompt[r] if b == n_blocks[r] else rec_blk[b]) - rec_blk[a]
        rl = reload_blk[k, b - a]
        if rl < rec or free_tier[k]:  # an HBM hit is never lost
            saved[k] += rec - rl
            reload_time += rl
            if has_own:
                own[r] -= rec - rl
        else:
            lost[k] += b - a
    return reload_time


def price_runs(runs, n_blocks, rec_prompt, rec_blk, reload_blk, free_tier, service):
    """(saved per tier, blocks lost per tier, reload time, each request's own time or None)."""
    K = len(reload_blk)
    saved, lost = np.zeros(K), np.zeros(K, np.int64)
    own = np.array(rec_prompt, dtype=float) if service else np.zeros(0)
    table = np.vstack(reload_blk) if K else np.zeros((0, 1))
    rt = _price(*runs, np.asarray(n_blocks, np.int64), np.asarray(rec_prompt, np.float64),
                np.asarray(rec_blk, np.float64), table, np.asarray(free_tier, np.bool_),
                saved, lost, own, bool(service))
    return saved, lost, rt, (own if service else None)


# ------------------------------------------------------------------ a shared write-through LRU
@njit(cache=True, nogil=True)
def _shared_lru(r0, S, cap, off, hashes, hits, counters, need):  # pragma: no cover (compiled)
    """Requests r0.. (offsets local to the hashes given) against one LRU that every request
    reads, then writes (tail first, head last); hits: leading blocks present; counters[0]:
    blocks absent when their request began (written)."""
    n = len(off) - 1
    for r in range(r0, n):
        o = off[r]
        m = off[r + 1] - o
        if S[_META][0] < need:
            return r
        h = 0
        while h < m and _find(S, hashes[o + h], 0) >= 0:
            h += 1
        hits[r] = h
        absent = 0
        for j in range(h, m):
            if _find(S, hashes[o + j], 0) < 0:
                absent += 1
        counters[0] += absent
        for j in range(m - 1, -1, -1):
            b = hashes[o + j]
            e = _find(S, b, 0)
            if e >= 0:
                _touch(S, e)
            else:
                e = _add(S, b, 0)
                _link_tail(S, e)
                if S[_CNT][0] > cap:
                    old = _pop_head(S, 0)
                    _remove(S, old)
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
            r = _shared_lru(r, self.store.S, self.cap, off, hashes, hits, self.counters, need)
        return hits


# ------------------------------------------------------------------ a shared write-back LRU
@njit(cache=True, nogil=True)
def _back_lru(r0, S, cap, off, hashes, node_hit, node_of, n_exits, seg, cursor, hits, counters,
              need):  # pragma: no cover (compiled)
    """Requests r0.. (offsets local to the hashes given) against one LRU that the nodes' evicted
    blocks are written to: each request first reads from it the blocks beyond its node's own
    hit (node_hit) that it holds, in order, touching them (hits: its node's and the store's
    leading blocks together), then the n_exits[r] blocks its node evicted while serving it
    (seg from cursor[node_of[r]] on) are written, an existing one only refreshed;
    counters[0]: blocks written (absent when offered)."""
    n = len(off) - 1
    for r in range(r0, n):
        if S[_META][0] < need:
            return r
        o = off[r]
        m = off[r + 1] - o
        h = node_hit[r]
        while h < m:
            e = _find(S, hashes[o + h], 0)
            if e < 0:
                break
            _touch(S, e)
            h += 1
        hits[r] = h
        nd = node_of[r]
        c = cursor[nd]
        for i in range(n_exits[r]):
            b = seg[c + i]
            e = _find(S, b, 0)
            if e >= 0:
                _touch(S, e)
                continue
            e = _add(S, b, 0)
            _link_tail(S, e)
            counters[0] += 1
            if S[_CNT][0] > cap:
                old = _pop_head(S, 0)
                _remove(S, old)
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
        cursor = np.asarray(starts, np.int64).copy()
        r = 0
        while r < n:
            self.store.ensure(need)
            r = _back_lru(r, self.store.S, self.cap, off, hashes,
                          np.asarray(node_hit, np.int64), np.asarray(node_of, np.int64),
                          np.asarray(n_exits, np.int64), seg, cursor, hits, self.counters, need)
        return hits


# ------------------------------------------------------------------ previous turns
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
        h = _slot(tab[j, 0], 0, mask)
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
    i = _slot(key, 0, mask)
    while tab[i, 1] != np.uint64(0):
        if tab[i, 0] == key:
            return i
        i = (i + 1) & mask
    return -1 - i  # absent: -1 - the empty slot it would take


@njit(cache=True, nogil=True)
def _continuations(r0, base, tab, count, n_blocks, prompt, bt, off, hashes,
                   parent):  # pragma: no cover (compiled)
    """readers.continuations' loop for requests r0.. of a chunk (request base + r); stops when
    the map is half full (count[0]: its entries)."""
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
        r = 0
        while True:
            r = _continuations(r, self.base, self.tab, self.count, np.asarray(n_blocks, np.int64),
                               np.asarray(prompt_tokens, np.int64), self.bt, off, hashes, parent)
            if r >= n:
                break
            old, self.tab = self.tab, np.zeros((2 * self.tab.shape[0], 2), np.uint64)
            _map_rehash(old, self.tab)
            del old
        self.base += n
        return parent


# ------------------------------------------------------------------ routing
ROUTER_CODES = {"random": 0, "round-robin": 1, "affinity": 2, "kv-aware": 3}


@njit(cache=True, nogil=True)
def _route(r0, r1, base, S, nodes, cap, router, ts, nb, tokens, bt, off, hashes, parent, draws,
           window, overlap, chosen, load, routed, sums, counts, need):  # pragma: no cover
    """routing.route's loop for the global requests r0..r1 (hashes and off local to the chunk
    that begins at request base).
    sums: [hit tokens, best tokens]; counts: [continued, followed, holders, reached, the
    first request still in the load window]."""
    match = np.zeros(nodes, np.int64)
    found = np.empty(max(need, 1), np.int64)
    for r in range(r0, r1):
        if S[_META][0] < need:
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
            while c < m and _find(S, hashes[o + c], nd) >= 0:
                c += 1
            match[nd] = c
            if c > best:
                best = c
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
        link = S[_LINK]
        warm = 0
        for j in range(m):
            e = _find(S, hashes[o + j], node)
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
                e = _find(S, hashes[o + j], node)  # (a hash the request repeats)
            if e >= 0:
                _touch(S, e)
            else:
                e = _add(S, hashes[o + j], node)
                _link_tail(S, e)
        while S[_CNT][node] > cap:
            old = _pop_head(S, node)
            _remove(S, old)
    return r1


class Router:
    """routing.route's state over a trace fed a chunk of requests at a time."""

    def __init__(self, nodes, router, capacity_blocks, timestamp_s, n_blocks, prompt_tokens,
                 block_tokens, draws, load_window_s, overlap_weight):
        self.nodes, self.code = int(nodes), ROUTER_CODES[router]
        self.cap = int(min(max(int(capacity_blocks), 0), 2 ** 62))
        n = len(timestamp_s)
        self.ts = np.asarray(timestamp_s, np.float64)
        self.nb = np.asarray(n_blocks)
        self.tokens = np.asarray(prompt_tokens)
        self.bt = int(block_tokens)
        self.draws = np.zeros(0, np.int64) if draws is None else draws
        self.window, self.overlap = float(load_window_s), float(overlap_weight)
        self.chosen = np.empty(n, np.int32)
        self.parent = np.full(n, -1, np.int32 if n < 2 ** 31 else np.int64)
        self.load = np.zeros(self.nodes, np.int64)
        self.routed = np.zeros(self.nodes, np.float64)
        self.sums = np.zeros(2, np.float64)
        self.counts = np.zeros(6, np.int64)  # (the last: a sink the compiler keeps loads for)
        total = int(np.sum(n_blocks, dtype=np.int64))
        nmax = int(np.max(n_blocks)) if n else 0
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
        r = a
        while r < b:
            self.store.ensure(need)
            r = _route(r, b, a, self.store.S, self.nodes, self.cap, self.code, self.ts, self.nb,
                       self.tokens, self.bt, off, hashes, self.parent, self.draws, self.window,
                       self.overlap, self.chosen, self.load, self.routed, self.sums,
                       self.counts, need)
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


# ------------------------------------------------------------------ first come, first served
@njit(cache=True, nogil=True)
def _fcfs(arrival, service, servers, out):  # pragma: no cover (compiled)
    free = np.zeros(servers)
    for i in range(len(arrival)):
        k = 0
        for j in range(1, servers):
            if free[j] < free[k]:
                k = j
        a = arrival[i]
        start = a if a >= free[k] else free[k]
        free[k] = start + service[i]
        out[i] = start + service[i] - a


def fcfs(arrival_s, service_s, servers):
    """Each request's time to first token over ``servers`` replicas, first come first served
    (fleet.ttft_fcfs's heap, as a scan: the replica free earliest)."""
    out = np.empty(len(arrival_s))
    if len(out):
        _fcfs(np.asarray(arrival_s, np.float64), np.asarray(service_s, np.float64),
              max(int(servers), 1), out)
    return out
