"""One engine replica's scheduler, step by step (numba): the KV it holds in HBM, block by block,
and the steps vLLM V1's and SGLang's schedulers build from its requests; the fleet's event loop
(:mod:`kvmath.traces.simulate.serve`) drives every replica of a fleet with these.

**KV in HBM.** A replica holds ``kv_cap`` tokens of KV. A prompt's full blocks (the trace's
hashed blocks of ``bt`` tokens) are entries of the keyed store (:mod:`kvmath.traces.simulate.
store`), list ``r`` for replica r, counted by the requests holding them (``IVAL``): a block held
by a running request is shared by every request whose prompt repeats it (vLLM's prefix caching
shares the physical block), and a block no request holds stays cached, evictable, in the list's
LRU order (the free block queue: least recent first) until room is needed. A request's other
tokens (its partial last block, its output, a chunk not yet a whole block) are its own
(``anon``). ``kv_used`` counts every entry's ``bt`` tokens and every request's own tokens; room
for ``n`` more evicts cached blocks from the LRU head, each offered to the node's tiers below
(written back; :func:`offer`); written through, a block is offered to them, and to a pool
written through, as it is computed (:func:`settle`).

**vLLM V1** (:func:`schedule_vllm`; vllm==0.11.0 ``vllm/v1/core/sched/scheduler.py``
``Scheduler.schedule``): no phases; the running requests first, in admission order, each given
``min(tokens it lacks, budget left)`` tokens (a decode 1, a prompt a chunk); a request that finds
no room preempts the last running request (``self.running.pop()``), which frees its blocks,
forgets its computed tokens and goes back to the head of the queue (recompute), until it fits
or is itself the one preempted; then, only when nothing was preempted and a running slot is
free, the waiting requests in order, each charged only the tokens its cached prefix lacks (a
full hit recomputes its last token), stopping at the first that does not fit (head of line);
with ``full_isl`` (vLLM >= 0.22, ``scheduler_reserve_full_isl``) a request is admitted only when
its whole prompt fits. A request whose prefix a tier below HBM holds waits for its load holding
its blocks but no budget nor running slot (``WAITING_FOR_REMOTE_KVS``), and is admitted like any
other once loaded; or, where the engine overlaps loads layer by layer with the request's own
forward (``load_overlap``), the step that computes its first chunk takes at least the load.

**SGLang** (:func:`schedule_sglang`; sglang 0.5: ``enable_mixed_chunk`` False, "run prefill
first if possible"): a step is a prefill batch (the queue's requests admitted in order up to
``budget`` new tokens, the last one chunked, each admitted only when the free KV covers its new
tokens plus the output the running requests may still write at ``new_token_ratio``) or else a
decode step of every running request; a decode step that finds no room retracts running
requests (most output tokens first, then the shortest prompt) back to the queue, and resets
the ratio; the ratio decays linearly to its minimum over ``decay`` decode steps.

A step's time is the calibrated operator model's at its composition
(:mod:`kvmath.evaluate.steps`): ``max(floor[n], lin[n] + attention of its chunks) + the KV its
decodes read``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.store import (CNT, IVAL, KEY, add, find, link_tail, pop_head,
                                          remove, touch, unlink)

# a request's status
PENDING, WAITING, LOADING, RUNNING, DONE, REFUSED = range(6)


class Engine(NamedTuple):
    """Every replica's engine settings (a homogeneous fleet)."""
    policy: int  #: 0 vLLM V1, 1 SGLang
    budget: int  #: tokens a step (max_num_batched_tokens; SGLang's chunked_prefill_size)
    max_seqs: int  #: running requests at most (max_num_seqs; max_running_requests)
    kv_cap: int  #: tokens of KV a replica holds
    full_isl: bool  #: admit only when the whole prompt fits (vLLM >= 0.22)
    load_overlap: bool  #: loads overlap the request's own step (else it waits for them)
    ratio_init: float  #: SGLang's new_token_ratio at start, and its floor and decay steps
    ratio_min: float
    ratio_decay: float
    clip_new: int  #: SGLang reserves at most this many future output tokens a request


class Steps(NamedTuple):
    """A step's time tables (:func:`kvmath.evaluate.steps.step_tables`)."""
    lin: np.ndarray  #: forward of n tokens without attention, s (index n)
    floor: np.ndarray  #: roofline of a step of n tokens, s
    attn: np.ndarray  #: attention of a prompt's first i * grid tokens, s
    kvread: np.ndarray  #: KV read by a decode at context i * grid, s
    grid: float  #: tokens between the points of attn and kvread


class Tiers(NamedTuple):
    """What lies below each replica's HBM: its node's tiers (host DRAM, drives), a pool."""
    replicas: int
    per_node: int  #: replicas of a node (they share its tiers)
    nodes: int
    bt: int  #: tokens a block
    cap: np.ndarray  #: blocks each node tier holds (int64; empty: none)
    pool_cap: int  #: blocks the pool holds (0: no pool)
    through: bool  #: node tiers written through (every computed block), else back (evictions)
    pool_back: bool  #: the pool takes what the node's last tier lets go, else every block
    reload: np.ndarray  #: [tier (the node's, then the pool), j]: the load of j blocks, s


class Reqs(NamedTuple):
    """The requests (inputs, fixed)."""
    prompt: np.ndarray  #: tokens (int64)
    output: np.ndarray  #: tokens to generate, at least 1 (int64)
    nb: np.ndarray  #: hashed blocks (int64)
    off: np.ndarray  #: where each one's hashes start (n + 1, int64)
    hashes: np.ndarray  #: block hashes, head first (uint64)


class Work(NamedTuple):
    """Each request's state (per request)."""
    status: np.ndarray  #: int8
    computed: np.ndarray  #: tokens whose KV is computed (int64)
    gen: np.ndarray  #: output tokens sampled (int64)
    held: np.ndarray  #: leading prompt blocks it holds as entries (int64)
    anon: np.ndarray  #: tokens of KV of its own (int64)
    sched: np.ndarray  #: tokens scheduled in the replica's current step (int64)
    ready: np.ndarray  #: when its load completes, s
    load_s: np.ndarray  #: a load its first step must cover (load_overlap), s
    replica: np.ndarray  #: int32
    nxt: np.ndarray  #: the waiting queue's links (int64)
    prv: np.ndarray
    looked: np.ndarray  #: its prefix looked up since it was queued (bool)


class Times(NamedTuple):
    """What each request saw (outputs)."""
    sent: np.ndarray  #: s
    admitted: np.ndarray  #: first scheduled, s
    first: np.ndarray  #: first token, s
    done: np.ndarray  #: last token, s
    hit: np.ndarray  #: prompt blocks found in HBM at its first admission (int64)
    loaded: np.ndarray  #: prompt blocks loaded from the tiers below (int64)
    preempted: np.ndarray  #: times preempted or retracted (int64)


class Replicas(NamedTuple):
    """Each replica's state and tallies."""
    run: np.ndarray  #: [replica, slot]: running requests in admission order (int64)
    run_n: np.ndarray
    w_head: np.ndarray  #: the waiting queue (a linked list through Work.nxt/prv)
    w_tail: np.ndarray
    n_wait: np.ndarray  #: waiting requests (loading ones included, as vLLM counts them)
    inflight: np.ndarray  #: routed and not done
    kv_used: np.ndarray  #: tokens of KV held or cached in HBM
    active_tok: np.ndarray  #: tokens of the in-flight requests (prompt and output so far)
    prefill_blk: np.ndarray  #: blocks of the in-flight requests not past their first token
    ratio: np.ndarray  #: SGLang's new_token_ratio (float64)
    chunked: np.ndarray  #: SGLang's request mid-prefill (-1: none)
    busy: np.ndarray  #: a step is running (bool)
    sums: np.ndarray  #: [replica, (busy s, steps, held KV x s, preemptions, tokens out)]


class Sim(NamedTuple):
    """Everything a replica's scheduler reads and writes (one record, handed on each call)."""
    rq: Reqs
    wk: Work
    tm: Times
    rep: Replicas
    eng: Engine
    tiers: Tiers
    st: Steps


@njit(cache=True, inline="always")
def kv_free(S, sim, r):  # pragma: no cover (compiled)
    """Tokens a replica could still allocate: free, and cached blocks it may evict."""
    return sim.eng.kv_cap - sim.rep.kv_used[r] + S[CNT][r] * sim.tiers.bt


@njit(cache=True)
def offer(S, tiers, node, k, b):  # pragma: no cover (compiled)
    """Block b offered to the node's tier k and, as each tier evicts, below it (written back),
    then to a pool that takes what the node lets go."""
    NT = len(tiers.cap)
    base = tiers.replicas + node * NT
    while k < NT:
        lst = base + k
        e = find(S, b, lst)
        if e >= 0:
            touch(S, e)
            return
        e = add(S, b, lst)
        link_tail(S, e)
        if S[CNT][lst] <= tiers.cap[k]:
            return
        old = pop_head(S, lst)
        b = S[KEY][old]
        remove(S, old)
        if tiers.through:
            break
        k += 1
    if tiers.pool_cap > 0 and tiers.pool_back:
        pool_offer(S, tiers, b)


@njit(cache=True)
def pool_offer(S, tiers, b):  # pragma: no cover (compiled)
    lst = tiers.replicas + tiers.nodes * len(tiers.cap)
    e = find(S, b, lst)
    if e >= 0:
        touch(S, e)
        return
    e = add(S, b, lst)
    link_tail(S, e)
    if S[CNT][lst] > tiers.pool_cap:
        old = pop_head(S, lst)
        remove(S, old)


@njit(cache=True)
def make_room(S, sim, r, need):  # pragma: no cover (compiled)
    """Evict cached blocks (least recent first) until ``need`` tokens fit; whether they do.
    Each evicted block goes down to the node's tiers (written back)."""
    tiers, rep = sim.tiers, sim.rep
    if kv_free(S, sim, r) < need:
        return False
    node = r // tiers.per_node
    while sim.eng.kv_cap - rep.kv_used[r] < need:
        e = pop_head(S, r)
        b = S[KEY][e]
        remove(S, e)
        rep.kv_used[r] -= tiers.bt
        if not tiers.through and len(tiers.cap) > 0:
            offer(S, tiers, node, 0, b)
        elif len(tiers.cap) == 0 and tiers.pool_cap > 0 and tiers.pool_back:
            pool_offer(S, tiers, b)
    return True


@njit(cache=True)
def hold(S, e):  # pragma: no cover (compiled)
    """One more request holds entry e (a cached block leaves the evictable LRU)."""
    if S[IVAL][e] == 0:
        unlink(S, e)
    S[IVAL][e] += 1


@njit(cache=True)
def settle(S, sim, q, r):  # pragma: no cover (compiled)
    """Request q's prompt blocks its computed tokens now cover become entries of the replica's
    cache (a block another request already computed is shared, its tokens freed); written
    through, each new block is offered to the node's tiers and the pool at once."""
    rq, wk, tiers = sim.rq, sim.wk, sim.tiers
    bt = tiers.bt
    full = min(min(wk.computed[q], rq.prompt[q]) // bt, rq.nb[q])
    o = rq.off[q]
    node = r // tiers.per_node
    while wk.held[q] < full:
        b = rq.hashes[o + wk.held[q]]
        e = find(S, b, r)
        if e >= 0:
            hold(S, e)
            sim.rep.kv_used[r] -= bt
        else:
            e = add(S, b, r)
            S[IVAL][e] = 1
            if tiers.through and len(tiers.cap) > 0:
                offer(S, tiers, node, 0, b)
            if tiers.pool_cap > 0 and not tiers.pool_back:  # a pool written through
                pool_offer(S, tiers, b)
        wk.anon[q] -= bt
        wk.held[q] += 1


@njit(cache=True)
def release(S, sim, q, r):  # pragma: no cover (compiled)
    """Request q lets go of its KV: its own tokens freed, its blocks cached (tail first, so the
    head of a prompt stays the most recent, as vLLM frees them in reverse order)."""
    rq, wk = sim.rq, sim.wk
    o = rq.off[q]
    for j in range(wk.held[q] - 1, -1, -1):
        e = find(S, rq.hashes[o + j], r)
        if e < 0:
            raise RuntimeError("a request let go of a block its replica does not hold: a bug in "
                               "kvmath")
        S[IVAL][e] -= 1
        if S[IVAL][e] == 0:
            link_tail(S, e)
    sim.rep.kv_used[r] -= wk.anon[q]
    wk.anon[q] = 0
    wk.held[q] = 0


# ------------------------------------------------------------------ the waiting queue
@njit(cache=True)
def push_back(wk, rep, r, q):  # pragma: no cover (compiled)
    t = rep.w_tail[r]
    wk.prv[q] = t
    wk.nxt[q] = -1
    if t >= 0:
        wk.nxt[t] = q
    else:
        rep.w_head[r] = q
    rep.w_tail[r] = q
    rep.n_wait[r] += 1


@njit(cache=True)
def push_front(wk, rep, r, q):  # pragma: no cover (compiled)
    h = rep.w_head[r]
    wk.nxt[q] = h
    wk.prv[q] = -1
    if h >= 0:
        wk.prv[h] = q
    else:
        rep.w_tail[r] = q
    rep.w_head[r] = q
    rep.n_wait[r] += 1


@njit(cache=True)
def unqueue(wk, rep, r, q):  # pragma: no cover (compiled)
    p, n = wk.prv[q], wk.nxt[q]
    if p >= 0:
        wk.nxt[p] = n
    else:
        rep.w_head[r] = n
    if n >= 0:
        wk.prv[n] = p
    else:
        rep.w_tail[r] = p
    rep.n_wait[r] -= 1


# ------------------------------------------------------------------ prefix and loads
@njit(cache=True)
def lookup(S, sim, q, r, now):  # pragma: no cover (compiled)
    """Request q's cached prefix on replica r, when the scheduler considers it and has not
    yet looked since it was queued: the leading blocks in HBM are held (its computed
    tokens), and the leading blocks after them that the node's tiers or the pool hold are
    loaded into room made for them: the request waits for the load holding them (or,
    overlapping, its first step covers it). Returns False, holding nothing, when the load
    does not fit (head of line)."""
    rq, wk, tm, tiers, eng = sim.rq, sim.wk, sim.tm, sim.tiers, sim.eng
    bt = tiers.bt
    o = rq.off[q]
    cap = min((rq.prompt[q] + wk.gen[q] - 1) // bt, rq.nb[q])  # a full hit recomputes a token
    h = 0
    while h < cap and find(S, rq.hashes[o + h], r) >= 0:
        h += 1
    NT = len(tiers.cap)
    node = r // tiers.per_node
    base = tiers.replicas + node * NT
    pool = tiers.replicas + tiers.nodes * NT
    per = np.zeros(NT + 1, np.int64)
    lo = h
    while lo < cap:
        b = rq.hashes[o + lo]
        k = 0
        while k < NT:
            if find(S, b, base + k) >= 0:
                break
            k += 1
        if k == NT and (tiers.pool_cap == 0 or find(S, b, pool) < 0):
            break
        per[k] += 1
        lo += 1
    # what is read is the most recent in its tier, touched before the room is made: the room's
    # evictions are offered to the same tiers and may push entries out of them (touched after,
    # a block found above could be gone, and the touch wrote through a missing entry: found
    # after review, a crash under an overload with host DRAM)
    for j in range(h, lo):
        b = rq.hashes[o + j]
        k = 0
        while k < NT:
            e = find(S, b, base + k)
            if e >= 0:
                touch(S, e)
                break
            k += 1
        if k == NT:
            touch(S, find(S, b, pool))
    for j in range(h):  # held first, so the room made below never evicts them
        hold(S, find(S, rq.hashes[o + j], r))
    wk.held[q] = h
    loads = lo - h
    if loads > 0 and not make_room(S, sim, r, loads * bt):
        release(S, sim, q, r)
        return False
    wk.computed[q] = lo * bt
    wk.looked[q] = True
    if tm.admitted[q] < 0:  # its first admission: what it found
        tm.hit[q] = h
        tm.loaded[q] = loads
    if loads > 0:
        t = 0.0
        for k in range(NT + 1):
            if per[k] > 0:
                t += tiers.reload[k, per[k]]
        sim.rep.kv_used[r] += loads * bt
        wk.anon[q] += loads * bt
        if eng.load_overlap:
            wk.load_s[q] = t
        else:
            wk.ready[q] = now + t
            wk.status[q] = LOADING
    return True


# ------------------------------------------------------------------ a step's time
@njit(cache=True, inline="always")
def _interp(table, grid, x):  # pragma: no cover (compiled)
    i = x / grid
    k = int(i)
    if k >= len(table) - 1:
        return table[-1]
    f = i - k
    return table[k] + f * (table[k + 1] - table[k])


@njit(cache=True)
def step_time(st, n, attn, kv):  # pragma: no cover (compiled)
    """A step of n tokens whose chunks' attention is ``attn`` and decodes read ``kv``, s."""
    m = min(n, len(st.lin) - 1)
    t = st.lin[m] + attn
    if st.floor[m] > t:
        t = st.floor[m]
    return t + kv


@njit(cache=True)
def chunk_cost(st, s, c, prompt):  # pragma: no cover (compiled)
    """(attention s, KV read s) of c tokens fed at offset s: a decode reads its context, a
    prefill chunk computes its causal attention."""
    if c == 1 and s >= prompt:
        return 0.0, _interp(st.kvread, st.grid, float(s))
    return (_interp(st.attn, st.grid, float(s + c)) - _interp(st.attn, st.grid, float(s))), 0.0
