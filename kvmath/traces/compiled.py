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

# positions in a store tuple
_TBL, _KEY, _LST, _PREV, _NXT, _FREE, _META, _HEAD, _TAIL, _CNT, _IVAL, _FVAL = range(12)


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


@njit(cache=True)
def _find(S, key, lst):  # pragma: no cover (compiled)
    tbl, keys, lsts = S[_TBL], S[_KEY], S[_LST]
    mask = len(tbl) - 1
    i = _slot(key, lst, mask)
    while True:
        e = tbl[i]
        if e < 0:
            return -1
        if keys[e] == key and lsts[e] == lst:
            return e
        i = (i + 1) & mask


@njit(cache=True)
def _add(S, key, lst):  # pragma: no cover (compiled)
    """A new entry (key, lst), not linked into its list's order; the caller checked that the
    key is absent and that a free entry is left."""
    tbl, keys, lsts, prev, nxt, free, meta = (S[_TBL], S[_KEY], S[_LST], S[_PREV], S[_NXT],
                                              S[_FREE], S[_META])
    meta[0] -= 1
    e = free[meta[0]]
    keys[e] = key
    lsts[e] = lst
    prev[e] = -1
    nxt[e] = -1
    mask = len(tbl) - 1
    i = _slot(key, lst, mask)
    while tbl[i] >= 0:
        i = (i + 1) & mask
    tbl[i] = e
    return e


@njit(cache=True)
def _remove(S, e):  # pragma: no cover (compiled)
    """Drop entry e (already unlinked) from the table (backward-shift deletion) and free it."""
    tbl, keys, lsts, free, meta = S[_TBL], S[_KEY], S[_LST], S[_FREE], S[_META]
    mask = len(tbl) - 1
    i = _slot(keys[e], lsts[e], mask)
    while tbl[i] != e:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        f = tbl[j]
        if f < 0:
            break
        h = _slot(keys[f], lsts[f], mask)
        if i <= j:
            movable = h <= i or h > j
        else:
            movable = h <= i and h > j
        if movable:
            tbl[i] = f
            i = j
    tbl[i] = -1
    lsts[e] = -1
    free[meta[0]] = e
    meta[0] += 1


@njit(cache=True)
def _link_tail(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent."""
    lsts, prev, nxt, head, tail, cnt = S[_LST], S[_PREV], S[_NXT], S[_HEAD], S[_TAIL], S[_CNT]
    lst = lsts[e]
    t = tail[lst]
    prev[e] = t
    nxt[e] = -1
    if t >= 0:
        nxt[t] = e
    else:
        head[lst] = e
    tail[lst] = e
    cnt[lst] += 1


@njit(cache=True)
def _unlink(S, e):  # pragma: no cover (compiled)
    lsts, prev, nxt, head, tail, cnt = S[_LST], S[_PREV], S[_NXT], S[_HEAD], S[_TAIL], S[_CNT]
    lst = lsts[e]
    p = prev[e]
    q = nxt[e]
    if p >= 0:
        nxt[p] = q
    else:
        head[lst] = q
    if q >= 0:
        prev[q] = p
    else:
        tail[lst] = p
    prev[e] = -1
    nxt[e] = -1
    cnt[lst] -= 1


@njit(cache=True)
def _touch(S, e):  # pragma: no cover (compiled)
    """Entry e becomes its list's most recent (OrderedDict.move_to_end)."""
    if S[_TAIL][S[_LST][e]] != e:
        _unlink(S, e)
        _link_tail(S, e)


@njit(cache=True)
def _pop_head(S, lst):  # pragma: no cover (compiled)
    """Unlink and return the least recent entry of a list (OrderedDict.popitem(last=False))."""
    e = S[_HEAD][lst]
    _unlink(S, e)
    return e


@njit(cache=True)
def _rebuild(tbl, keys, lsts):  # pragma: no cover (compiled)
    mask = len(tbl) - 1
    for e in range(len(keys)):
        if lsts[e] >= 0:
            i = _slot(keys[e], lsts[e], mask)
            while tbl[i] >= 0:
                i = (i + 1) & mask
            tbl[i] = e


class Store:
    """A keyed store of ``lists`` LRU lists (see the module's docstring), growing on demand;
    ``ints`` / ``floats``: one int64 / float64 value per entry."""

    def __init__(self, entries, lists, ints=False, floats=False):
        n = max(int(entries), 64)
        self.ints, self.floats = ints, floats
        self.S = (self._table(n), np.zeros(n, np.uint64), np.full(n, -1, np.int32),
                  np.full(n, -1, np.int32), np.full(n, -1, np.int32),
                  np.arange(n - 1, -1, -1, dtype=np.int32), np.array([n], np.int64),
                  np.full(lists, -1, np.int32), np.full(lists, -1, np.int32),
                  np.zeros(lists, np.int64), np.zeros(n if ints else 0, np.int64),
                  np.zeros(n if floats else 0, np.float64))

    @staticmethod
    def _table(n):
        return np.full(1 << max(int(2 * n - 1).bit_length(), 4), -1, np.int32)

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
                out = np.full(m, fill, a.dtype)
                out[:n] = a
                return out
            nfree = self.free
            free = np.empty(m, np.int32)
            free[:m - n] = np.arange(m - 1, n - 1, -1, dtype=np.int32)
            free[m - n:m - n + nfree] = S[_FREE][:nfree]
            keys, lsts = longer(S[_KEY], 0), longer(S[_LST], -1)
            tbl = self._table(m)
            _rebuild(tbl, keys, lsts)
            self.S = (tbl, keys, lsts, longer(S[_PREV], -1), longer(S[_NXT], -1), free,
                      np.array([nfree + m - n], np.int64), S[_HEAD], S[_TAIL], S[_CNT],
                      longer(S[_IVAL], 0) if self.ints else S[_IVAL],
                      longer(S[_FVAL], 0.0) if self.floats else S[_FVAL])

    def nbytes(self):
        return sum(a.nbytes for a in self.S)


# ------------------------------------------------------------------ the tiered replay
POLICIES = {"lru": 0, "ttl": 1, "selective": 2}


@njit(cache=True)
def _offer(S, k, b, now, w, T, cap, size, wbps, drive, policy, ttl, min_uses, through, nwr,
           dropped, filtered, wr):  # pragma: no cover (compiled)
    """Block b offered to tier k (an eviction from the tier above, or a write-through): the
    Python replay's offer(), line for line."""
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
                return
        if wr[k, w] + size[k] > wbps[k]:
            dropped[k] += 1
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
            return
        k += 1


@njit(cache=True)
def _replay(r0, S, ts, wid, off, hashes, cap, size, wbps, drive, policy, ttl, min_uses,
            through, sh, shared_size, hits, nwr, dropped, filtered, rd, wr, srd, counters,
            hit_blocks, run_r, run_k, run_a, run_b, need):  # pragma: no cover (compiled)
    """Requests r0.. through the tiers; returns the request it stopped before (len(ts) when
    done; earlier when the store has fewer than ``need`` free entries or the run arrays could
    fill). counters: [blocks read from the shared store, runs written]."""
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
        if S[_META][0] < need or counters[1] + m + 2 > len(run_r):
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
                           through, nwr, dropped, filtered, wr)
            while S[_CNT][0] > cap[0]:
                old = _pop_head(S, 0)
                ob = S[_KEY][old]
                _remove(S, old)
                if not through:
                    _offer(S, 1, ob, now, w, T, cap, size, wbps, drive, policy, ttl, min_uses,
                           through, nwr, dropped, filtered, wr)
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


def replay_arrays(timestamp_s, n_blocks, hashes, cap, size, wbps, drive, policy, ttl,
                  min_uses, through, shared_hits=None, shared_size=0.0):
    """Run the compiled replay over requests (arrival times, block counts, their hashes head
    first, flat) through tiers (capacity in blocks, block bytes, write bandwidth B/s, drive or
    not). Returns a dict of arrays: per tier hits, writes, dropped, filtered and the bytes of
    each 1-s window with requests (``rd``, ``wr``: [tier, window]); ``srd`` the shared store's
    reads per window; per request ``hit_blocks``; the hit runs (``runs``: r, k, a, b)."""
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
    counters = np.zeros(2, np.int64)
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
                    srd, counters, hit_blocks, *runs, need)
        if r >= n:
            break
        store.ensure(need)
        if counters[1] + nmax + 2 > len(runs[0]):
            runs = [np.concatenate([a, np.empty(len(a), np.int64)]) for a in runs]
    q = int(counters[1])
    return {"hits": hits, "writes": nwr, "dropped": dropped, "filtered": filtered, "rd": rd,
            "wr": wr, "srd": srd, "shared_blocks": int(counters[0]), "hit_blocks": hit_blocks,
            "runs": tuple(a[:q] for a in runs), "windows_with_requests": W}


@njit(cache=True)
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
@njit(cache=True)
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


# ------------------------------------------------------------------ previous turns
@njit(cache=True)
def _continuations(r0, base, S, n_blocks, prompt, bt, off, hashes, parent):  # pragma: no cover
    """readers.continuations' loop for requests r0.. of a chunk (request base + r)."""
    n = len(off) - 1
    for r in range(r0, n):
        if S[_META][0] < 1:
            return r
        o = off[r]
        m = off[r + 1] - o
        full = min(prompt[r] // bt, m)
        for j in range(full - 1, -1, -1):  # the longest earlier whole prompt first
            e = _find(S, hashes[o + j], 0)
            if e >= 0:
                parent[r] = S[_IVAL][e]
                _remove(S, e)
                break
        if full > 0:
            b = hashes[o + full - 1]
            e = _find(S, b, 0)
            if e < 0:
                e = _add(S, b, 0)
            S[_IVAL][e] = base + r
    return n


class Continuations:
    """The previous turn of each request (readers.continuations), fed a chunk at a time."""

    def __init__(self, block_tokens, expect=1 << 16):
        self.bt = int(block_tokens)
        self.store = Store(expect, 1, ints=True)
        self.base = 0

    def feed(self, n_blocks, prompt_tokens, hashes):
        n = len(n_blocks)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(n_blocks, out=off[1:])
        parent = np.full(n, -1, np.int64)
        r = 0
        while r < n:
            self.store.ensure(1)
            r = _continuations(r, self.base, self.store.S, np.asarray(n_blocks, np.int64),
                               np.asarray(prompt_tokens, np.int64), self.bt, off, hashes, parent)
        self.base += n
        return parent


# ------------------------------------------------------------------ routing
ROUTER_CODES = {"random": 0, "round-robin": 1, "affinity": 2, "kv-aware": 3}


@njit(cache=True)
def _route(r0, r1, base, S, nodes, cap, router, ts, nb, tokens, bt, off, hashes, parent, draws,
           window, overlap, chosen, load, routed, sums, counts, need):  # pragma: no cover
    """routing.route's loop for the global requests r0..r1 (hashes and off local to the chunk
    that begins at request base).
    sums: [hit tokens, best tokens]; counts: [continued, followed, holders, reached, the
    first request still in the load window]."""
    match = np.zeros(nodes, np.int64)
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
        for j in range(m):  # the request's blocks are the node's most recent
            b = hashes[o + j]
            e = _find(S, b, node)
            if e >= 0:
                _touch(S, e)
            else:
                e = _add(S, b, node)
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
        self.parent = np.full(n, -1, np.int64)
        self.load = np.zeros(self.nodes, np.int64)
        self.routed = np.zeros(self.nodes, np.float64)
        self.sums = np.zeros(2, np.float64)
        self.counts = np.zeros(5, np.int64)
        total = int(np.sum(n_blocks, dtype=np.int64))
        self.store = Store(min(self.nodes * (self.cap + 1), total, 1 << 20) + 64, self.nodes)
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


# ------------------------------------------------------------------ first come, first served
@njit(cache=True)
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
