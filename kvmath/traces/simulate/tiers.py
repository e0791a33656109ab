"""The tiered replay of one node (numba): every request's blocks through HBM and the tiers below
it (host DRAM, drives, a remote store), under a policy (``lru``, ``ttl``, ``selective``) and a
write mode (back: a block reaches tier k + 1 when tier k evicts it; through: every block a request
brings into HBM is offered to each lower tier at once), with each tier's write bandwidth per 1-s
window; then each hit run priced against its recompute (:func:`price_runs`).

A request looks its blocks up before it inserts any (its hit: the leading blocks present, each in
the fastest tier holding it), then inserts them tail first, head last, into HBM; what HBM evicts
is offered down (:func:`_offer`), and a block leaving the node's last tier is recorded
(:func:`_exit`) for a write-back pool below the node. The tiers' contents are lists of the keyed
store (:mod:`kvmath.traces.simulate.store`): block b in tier k is the entry (b, k), and list T
(one past the last tier) holds the per-block counts a policy reads.

Written to give exactly the Python replay's results (kept in tests/replay_oracle.py as the
oracle): the same lookups, insertions and evictions in the same order, and every floating-point
sum taken in the same order. The kernel stops at a request boundary when its store or output
arrays could fill, and :func:`replay_arrays` grows them and resumes it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.store import (CNT, FVAL, HEAD, IVAL, KEY, META, Store, add, find,
                                          link_tail, pop_head, remove, touch, unlink)

#: the policies' codes in the kernel
POLICIES = {"lru": 0, "ttl": 1, "selective": 2}


class Requests(NamedTuple):
    """The requests a node replays, in arrival order."""
    ts: np.ndarray  #: arrival, s (float64)
    window: np.ndarray  #: its 1-s window's index among the windows with requests (int64)
    off: np.ndarray  #: where each request's blocks begin in ``hashes`` (n + 1, int64)
    hashes: np.ndarray  #: the block hashes, head first (uint64)
    shared: np.ndarray  #: leading blocks of each a pool below the node holds (empty: no pool)
    shared_size: float  #: bytes of a block in that pool


class Tiers(NamedTuple):
    """The node's tiers, fastest first (the first is HBM)."""
    cap: np.ndarray  #: capacity, blocks (int64)
    size: np.ndarray  #: bytes of a block in the tier (float64)
    wbps: np.ndarray  #: write bandwidth, B/s (float64): writes beyond it in a window are dropped
    drive: np.ndarray  #: a tier of drives, whose writes ``selective`` filters (bool)


class Policy(NamedTuple):
    """How the tiers are written."""
    code: int  #: the policy (:data:`POLICIES`)
    ttl: float  #: ``ttl``: seconds a block below HBM lives unused
    min_uses: int  #: ``selective``: uses before a tier of drives takes a block
    through: bool  #: written through (else back)


class Written(NamedTuple):
    """What the writes to the tiers count."""
    writes: np.ndarray  #: per tier, blocks written (int64)
    dropped: np.ndarray  #: per tier, writes beyond its bandwidth (int64)
    filtered: np.ndarray  #: per tier, writes ``selective`` refused (int64)
    wr: np.ndarray  #: bytes written to each tier in each window ([tier, window], float64)


class Read(NamedTuple):
    """What the lookups count."""
    hits: np.ndarray  #: per tier, blocks found there (int64)
    rd: np.ndarray  #: bytes read from each tier in each window ([tier, window], float64)
    srd: np.ndarray  #: bytes read from the pool below the node in each window (float64)
    hit_blocks: np.ndarray  #: per request, its leading blocks found (int64)


class Runs(NamedTuple):
    """The hit runs, in order: request r's blocks [a, b) found in tier k (the tiers' count: the
    pool below the node)."""
    r: np.ndarray
    k: np.ndarray
    a: np.ndarray
    b: np.ndarray


class Exits(NamedTuple):
    """The blocks leaving the node, in order (recorded when the arrays are not empty)."""
    r: np.ndarray  #: the request they leave during
    h: np.ndarray  #: their hashes


class Node(NamedTuple):
    """One node's tiers, how they are written, and what a block offered to them records (what
    :func:`_offer` takes: no more, as every array it is handed is passed on each call)."""
    tiers: Tiers
    policy: Policy
    written: Written
    exits: Exits
    counters: np.ndarray  #: [blocks read from the pool, runs written, exits recorded] (int64)


@njit(cache=True, nogil=True)
def _offer(S, node, k, b, now, w, r):  # pragma: no cover (compiled)
    """Block b offered to tier k (an eviction from the tier above, or a write-through) in
    window w at time now, while request r is served: the Python replay's offer(), line for
    line. A block that leaves the node (written back: filtered, dropped, or evicted from its
    last tier; written through: evicted from its last tier) is recorded (:func:`_exit`)."""
    cap, size, wbps, drive = node.tiers
    policy, ttl, min_uses, through = node.policy
    nwr, dropped, filtered, wr = node.written
    exits, counters = node.exits, node.counters
    T = len(cap)
    while k < T:
        e = find(S, b, k)
        if e >= 0:
            touch(S, e)
            return
        if policy == 2 and drive[k]:
            s = find(S, b, T)
            u = S[IVAL][s] if s >= 0 else 0
            if u < min_uses:
                filtered[k] += 1
                if not through:  # written through, the tiers above still hold it
                    _exit(S, T, r, b, exits, counters)
                return
        if wr[k, w] + size[k] > wbps[k]:
            dropped[k] += 1
            if not through:
                _exit(S, T, r, b, exits, counters)
            return
        wr[k, w] += size[k]
        nwr[k] += 1
        e = add(S, b, k)
        link_tail(S, e)
        if policy == 1 and k > 0:
            while S[CNT][k] > 0:
                h = S[HEAD][k]
                s = find(S, S[KEY][h], T)
                if now - S[FVAL][s] > ttl:
                    unlink(S, h)
                    remove(S, h)
                else:
                    break
        if S[CNT][k] <= cap[k]:
            return
        old = pop_head(S, k)
        b = S[KEY][old]
        remove(S, old)
        if through:
            if k == T - 1:  # the last tier, the node's largest, lets it go
                _exit(S, T, r, b, exits, counters)
            return
        k += 1
    _exit(S, T, r, b, exits, counters)


@njit(cache=True, nogil=True)
def _exit(S, T, r, b, exits, counters):  # pragma: no cover (compiled)
    """Record block b leaving the node at request r (when recording: the exit arrays have room;
    counters[2] counts them), unless one of the node's T tiers still holds a copy of it (lower
    tiers keep copies of what a reload brought back up): the node has let it go only when none
    does."""
    ex_r, ex_h = exits
    for k in range(T):
        if find(S, b, k) >= 0:
            return
    q = counters[2]
    if q < len(ex_r):
        ex_r[q] = r
        ex_h[q] = b
        counters[2] = q + 1


@njit(cache=True, nogil=True)
def _replay(r0, S, requests, node, read, runs, need):  # pragma: no cover (compiled)
    """Requests r0.. (:class:`Requests`) through the node's tiers (:class:`Node`), counting
    their lookups (:class:`Read`) and hit runs (:class:`Runs`); returns the request it stopped
    before (the requests' count when done; earlier when the store has fewer than ``need`` free
    entries, or the run or exit arrays could fill). The exits are recorded when their arrays
    are not empty: at most one a block the request writes (an eviction chain ends in one
    exit)."""
    ts, wid, off, hashes, sh, shared_size = requests
    cap, size, wbps, drive = node.tiers
    policy, ttl, min_uses, through = node.policy
    nwr, dropped, filtered, wr = node.written
    exits, counters = node.exits, node.counters
    hits, rd, srd, hit_blocks = read
    run_r, run_k, run_a, run_b = runs
    ex_r = exits.r
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
        if S[META][0] < need or counters[1] + m + 2 > len(run_r) or (
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
                e = find(S, b, k)
                if e >= 0:
                    if policy == 1 and k > 0:
                        s = find(S, b, T)
                        if now - S[FVAL][s] > ttl:
                            unlink(S, e)
                            remove(S, e)
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
                touch(S, went[j])
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
                s = find(S, b, T)
                if s < 0:
                    s = add(S, b, T)
                S[IVAL][s] += 1
        elif policy == 1:
            for j in range(m):
                b = hashes[o + j]
                s = find(S, b, T)
                if s < 0:
                    s = add(S, b, T)
                S[FVAL][s] = now
        for j in range(m - 1, -1, -1):  # tail first, head last
            b = hashes[o + j]
            e = find(S, b, 0)
            if e >= 0:
                touch(S, e)
                continue
            if wr[0, w] + size[0] > wbps[0]:
                dropped[0] += 1
                continue
            wr[0, w] += size[0]
            nwr[0] += 1
            e = add(S, b, 0)
            link_tail(S, e)
            if through:
                for k in range(1, T):
                    _offer(S, node, k, b, now, w, r)
            while S[CNT][0] > cap[0]:
                old = pop_head(S, 0)
                ob = S[KEY][old]
                remove(S, old)
                if not through:
                    _offer(S, node, 1, ob, now, w, r)
                elif T == 1:  # no tier below HBM: it leaves the node
                    _exit(S, T, r, ob, exits, counters)
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


def replay_arrays(requests, tiers, policy="lru", *, ttl=None, min_uses=2, through=False,
                  shared_hits=None, shared_size=0.0, exits=None):
    """Run the compiled replay over ``requests`` (a trace: ``timestamp_s``, ``n_blocks`` and
    their ``hashes`` head first, flat) through ``tiers`` (a :class:`Tiers` of sequences:
    capacity in blocks, block bytes, write bandwidth B/s, drive or not) under ``policy``
    (:data:`POLICIES`; ``ttl`` s for ``ttl``, ``min_uses`` for ``selective``), written through
    or back. shared_hits: the leading blocks of each request a pool below the node holds (of
    ``shared_size`` bytes a block). Returns a dict of arrays: per tier hits, writes, dropped,
    filtered and the bytes of each 1-s window with requests (``rd``, ``wr``: [tier, window]);
    ``srd`` the shared store's reads per window; per request ``hit_blocks``; the hit runs
    (``runs``, a :class:`Runs`).
    exits: called with (request indices, hashes) of the blocks leaving the node (evicted from
    its last tier, or refused by a tier below the first), in order, a bounded buffer at a
    time (the arrays are reused after the call returns)."""
    timestamp_s, n_blocks, hashes = requests.timestamp_s, requests.n_blocks, requests.hashes
    n = len(timestamp_s)
    T = len(tiers.cap)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(n_blocks, out=off[1:])
    wid, W = windows_of(timestamp_s)
    nmax = int(np.max(n_blocks)) if n else 0
    need = nmax * (T + 1) + 1
    p = POLICIES[policy]
    tiers = Tiers(np.minimum(np.asarray(tiers.cap, dtype=np.float64), 2.0 ** 62).astype(np.int64),
                  np.asarray(tiers.size, np.float64), np.asarray(tiers.wbps, np.float64),
                  np.asarray(tiers.drive, np.bool_))
    # a store a little larger than the tiers' blocks, or than the trace's accesses
    store = Store(min(int(tiers.cap.sum()) + need, max(len(hashes), 1)) if p == 0
                  else min(len(hashes) + 1, 1 << 20), T + 1, ints=p == 2, floats=p == 1)
    written = Written(np.zeros(T, np.int64), np.zeros(T, np.int64), np.zeros(T, np.int64),
                      np.zeros((T, W)))
    read = Read(np.zeros(T, np.int64), np.zeros((T, W)), np.zeros(W), np.zeros(n, np.int64))
    counters = np.zeros(3, np.int64)
    ex_n = max(EXIT_BUFFER, nmax + 1) if exits is not None else 0
    ex = Exits(np.empty(ex_n, np.int64), np.empty(ex_n, np.uint64))
    runs = Runs(*(np.empty(max(2 * n, 16), np.int64) for _ in range(4)))
    sh = (np.empty(0, np.int64) if shared_hits is None
          else np.minimum(shared_hits, n_blocks).astype(np.int64))
    reqs = Requests(np.asarray(timestamp_s, np.float64), wid, off, hashes, sh, float(shared_size))
    node = Node(tiers, Policy(p, float(ttl or 0.0), int(min_uses), bool(through)), written, ex,
                counters)
    r = 0
    while True:
        r = _replay(r, store.S, reqs, node, read, runs, need)
        if exits is not None and counters[2]:
            exits(ex.r[:counters[2]], ex.h[:counters[2]])
            counters[2] = 0
        if r >= n:
            break
        store.ensure(need)
        if counters[1] + nmax + 2 > len(runs.r):
            runs = Runs(*(np.concatenate([a, np.empty(len(a), np.int64)]) for a in runs))
    q = int(counters[1])
    return {"hits": read.hits, "writes": written.writes, "dropped": written.dropped,
            "filtered": written.filtered, "rd": read.rd, "wr": written.wr, "srd": read.srd,
            "shared_blocks": int(counters[0]), "hit_blocks": read.hit_blocks,
            "runs": Runs(*(a[:q] for a in runs)), "windows_with_requests": W}


class Prices(NamedTuple):
    """What a hit run is priced at (s): each request's recompute of its whole prompt, the
    recompute of a prefix of j blocks, each tier's reload of j blocks ([tier, j]), and which
    tiers' hits are never recomputed (HBM)."""
    prompt: np.ndarray
    blocks: np.ndarray
    reload: np.ndarray
    free: np.ndarray


class Priced(NamedTuple):
    """Per tier the recompute its runs saved (s) and the blocks whose reload was slower
    (recomputed instead); each request's own time (its prompt's recompute less what its runs
    saved; empty: not asked for)."""
    saved: np.ndarray
    lost: np.ndarray
    own: np.ndarray


@njit(cache=True, nogil=True)
def _price(runs, n_blocks, prices, out, has_own):  # pragma: no cover (compiled)
    """HitCost.price's loop: each run's saving against its reload, in the runs' order (the
    requests' own times too when has_own); returns the reload time."""
    run_r, run_k, run_a, run_b = runs
    rec_prompt, rec_blk, reload_blk, free_tier = prices
    saved, lost, own = out
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
    prices = Prices(np.asarray(rec_prompt, np.float64), np.asarray(rec_blk, np.float64), table,
                    np.asarray(free_tier, np.bool_))
    rt = _price(Runs(*runs), np.asarray(n_blocks, np.int64), prices, Priced(saved, lost, own),
                bool(service))
    return saved, lost, rt, (own if service else None)

