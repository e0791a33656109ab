"""A fleet serving its requests, step by step (numba): every replica's scheduler
(:mod:`kvmath.traces.simulate.batching`) driven in time order, the router placing each request
as it arrives from what the replicas hold and run at that moment, and the arrivals an open loop
(the trace's times) or a closed loop (users each sending a session's turns one after another,
the next a think time after the last one's answer).

The loop takes the earliest event: an arrival (routed to a replica, queued there, and an idle
replica starts a step at once), or a replica's step ending (its tokens fed, its finished
requests retired, a closed loop's next turns queued, and its next step scheduled at once; a
replica with nothing to run sleeps until an arrival, or until a load it waits for completes).
An arrival at the same time as a step's end comes first. The replicas' next events are kept in a
tournament tree (the earliest in O(1), an update in O(log replicas)).

The routers, by the code their modules declare (:mod:`kvmath.fleet.routers`), see each replica
as a deployed router does (:func:`pick`): its requests in flight, its waiting queue, its KV in
use, its cached prefix (the HBM blocks a KV-event index reports; the blocks the node's tiers
hold, where a router weighs them), or the router's own index of what it routed there. Each
module's docstring gives its rule and sources; they are read with no delay (a deployed router
scrapes metrics every 50 ms or so: ASSUMED negligible).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.batching import (end_step, free_waiting, schedule_sglang,
                                             schedule_vllm)
from kvmath.traces.simulate.engine import (DONE, LOADING, PENDING, REFUSED, WAITING,
                                           push_back)
from kvmath.traces.simulate.store import (CNT, META, add, find, link_tail, pop_head, remove,
                                          touch)

INF = np.inf


class Route(NamedTuple):
    """How the router places a request."""
    code: int  #: the router's code (:mod:`kvmath.fleet.routers`)
    w: np.ndarray  #: its parameters (float64; each router module says which is which)
    idx_cap: int  #: blocks the router's own index keeps per replica (0: none)
    idx_match: int  #: blocks of a prompt that index matches at most
    ring: np.ndarray  #: consistent hashing: the ring's points, sorted (uint64)
    owner: np.ndarray  #: the replica of each point (int64)
    key: np.ndarray  #: each request's hash key (uint64)
    parent: np.ndarray  #: each request's previous turn (-1: none; int64)
    rng: np.ndarray  #: the router's random state (uint64[1], xorshift64*)


class Load(NamedTuple):
    """Where arrivals come from."""
    ts: np.ndarray  #: open loop: arrival times (sorted), s
    users: int  #: closed loop: users (0: open loop)
    think: float  #: closed loop: think time after an answer, s (its mean, exponential)
    think_exp: bool  #: exponential think times (else constant)
    heads: np.ndarray  #: closed loop: each session's first turn, in order (int64)
    child: np.ndarray  #: closed loop: each turn's next (-1: the session ends; int64)
    rng: np.ndarray  #: the think times' random state (uint64[1])
    #: stages (a load ladder as inference-perf sends it): each request's stage (int64; empty:
    #: none), ``ts`` then being its time from its stage's start; a stage starts when the one
    #: before has every request answered and its duration is up, after ``interval`` s
    stage: np.ndarray
    stage_dur: np.ndarray  #: each stage's duration, s
    stage_left: np.ndarray  #: each stage's requests not yet answered (int64; counted down)
    stage_start: np.ndarray  #: each stage's start, s (filled in as stages are released)
    interval: float


class Clock(NamedTuple):
    """The loop's own state, so it can stop (its store full) and resume."""
    #: [next open arrival, next session, heap size, round-robin, the latest stage started]
    state: np.ndarray
    heap_t: np.ndarray  #: closed loop: pending sends, a binary heap of times
    heap_q: np.ndarray  #: ... and their requests
    ev: np.ndarray  #: each replica's next event (its step's end, or a wake), s
    tree: np.ndarray  #: the tournament tree over ev (int64: the replica of the minimum)
    fin: np.ndarray  #: scratch: the requests a step finished
    refused: np.ndarray  #: per request: 1 too large for a replica's KV (int8)


# ------------------------------------------------------------------ the router's tools
@njit(cache=True, inline="always")
def _rand(rng):  # pragma: no cover (compiled)
    x = rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[0] = x
    return (x * np.uint64(0x2545F4914F6CDD1D)) >> np.uint64(11)


@njit(cache=True)
def _uniform(rng):  # pragma: no cover (compiled)
    return float(_rand(rng)) / 9007199254740992.0


@njit(cache=True)
def _leading(S, hashes, o, m, lst):  # pragma: no cover (compiled)
    c = 0
    while c < m and find(S, hashes[o + c], lst) >= 0:
        c += 1
    return c


@njit(cache=True)
def _best(values, rng, lowest):  # pragma: no cover (compiled)
    """The index of the largest (smallest) value, ties broken at random (llm-d's max-score
    picker shuffles; KubeAI's least load walks a Go map, in random order)."""
    n = len(values)
    best = values[0]
    for i in range(1, n):
        if (values[i] < best) if lowest else (values[i] > best):
            best = values[i]
    ties = 0
    for i in range(n):
        if values[i] == best:
            ties += 1
    k = np.int64(_rand(rng) % np.uint64(ties)) if ties > 1 else np.int64(0)
    for i in range(n):
        if values[i] == best:
            if k == 0:
                return i
            k -= 1
    return 0


@njit(cache=True)
def _index_add(S, hashes, o, m, lst, cap):  # pragma: no cover (compiled)
    """The router's own index of replica lst: the request's blocks become its most recent
    (an LRU of ``cap`` blocks)."""
    for j in range(m - 1, -1, -1):
        e = find(S, hashes[o + j], lst)
        if e >= 0:
            touch(S, e)
        else:
            e = add(S, hashes[o + j], lst)
            link_tail(S, e)
    while S[CNT][lst] > cap:
        old = pop_head(S, lst)
        remove(S, old)


@njit(cache=True)
def pick(S, sim, route, q, rr):  # pragma: no cover (compiled)
    """The replica router ``route.code`` sends request q to (rr: the round-robin counter)."""
    rq, rep, tiers = sim.rq, sim.rep, sim.tiers
    R = tiers.replicas
    w = route.w
    code = route.code
    if code == 0:  # random
        return np.int64(_rand(route.rng) % np.uint64(R))
    if code == 1:  # round-robin
        return rr % R
    load = rep.inflight.astype(np.float64)
    if code == 2:  # affinity: the previous turn's replica, else the least loaded
        p = route.parent[q]
        if p >= 0 and sim.wk.replica[p] >= 0:
            return int(sim.wk.replica[p])
        return _best(load, route.rng, True)
    if code == 3:  # least load
        return _best(load, route.rng, True)
    if code == 4:  # consistent hashing with bounded load
        ring = route.ring
        i = np.searchsorted(ring, route.key[q])
        if i >= len(ring):
            i = 0
        total = 0.0
        for r in range(R):
            total += load[r]
        limit = (total + 1.0) / R * w[0]
        for _ in range(len(ring)):
            r = route.owner[i]
            if total == 0 or load[r] <= limit:
                return int(r)
            i += 1
            if i >= len(ring):
                i = 0
        return int(route.owner[np.searchsorted(ring, route.key[q]) % len(ring)])
    o, m = rq.off[q], rq.nb[q]
    NT = len(tiers.cap)
    IX = R + tiers.nodes * NT + 1
    score = np.zeros(R)
    if code == 5:  # llm-d: weighted scorers, the highest total
        pref = np.zeros(R)
        if w[3] > 0:  # precise: the blocks each replica caches (KV events)
            for r in range(R):
                c = _leading(S, rq.hashes, o, m, r)
                x = float(c)
                if NT > 0 and c < m:
                    base = R + (r // tiers.per_node) * NT
                    x += w[4] * _leading(S, rq.hashes, o + c, m - c, base)
                pref[r] = x
            lo, hi, some = INF, -INF, False
            for r in range(R):
                if pref[r] > 0:
                    some = True
                    lo = min(lo, pref[r])
                    hi = max(hi, pref[r])
            for r in range(R):
                if pref[r] > 0:
                    pref[r] = 1.0 if hi == lo else (pref[r] - lo) / (hi - lo)
            if not some:
                pref[:] = 0.0
        else:  # approximate: the router's own index of what it sent where
            mm = min(m, route.idx_match)
            for r in range(R):
                pref[r] = (_leading(S, rq.hashes, o, mm, IX + r) / mm) if mm > 0 else 0.0
        qmin, qmax = INF, -INF
        for r in range(R):
            qmin = min(qmin, float(rep.n_wait[r]))
            qmax = max(qmax, float(rep.n_wait[r]))
        for r in range(R):
            used = (rep.kv_used[r] - S[CNT][r] * tiers.bt) / sim.eng.kv_cap
            qs = 1.0 if qmax == qmin else (qmax - rep.n_wait[r]) / (qmax - qmin)
            score[r] = w[0] * pref[r] + w[1] * (1.0 - used) + w[2] * qs
        r = _best(score, route.rng, False)
        if route.idx_cap > 0:
            _index_add(S, rq.hashes, o, min(m, route.idx_match), IX + r, route.idx_cap)
        return r
    if code == 6:  # Dynamo's KV router: the least cost
        for r in range(R):
            dev = _leading(S, rq.hashes, o, m, r)
            credit = w[1] * dev
            c = dev
            base = R + (r // tiers.per_node) * NT
            for k in range(NT):
                if c >= m:
                    break
                more = _leading(S, rq.hashes, o + c, m - c, base + k)
                credit += (w[2] if k == 0 else w[3]) * more
                c += more
            raw = rep.prefill_blk[r] + m
            score[r] = (w[0] * max(raw - credit, 0.0) + rep.active_tok[r] / tiers.bt + m
                        + w[5] * rep.inflight[r])
        if w[4] > 0:  # temperature: a softmax over the costs scaled to [0, 1]
            lo, hi = score.min(), score.max()
            p = np.exp(-(score - lo) / ((hi - lo) if hi > lo else 1.0) / w[4])
            u = _uniform(route.rng) * p.sum()
            for r in range(R):
                u -= p[r]
                if u <= 0:
                    return r
            return R - 1
        return _best(score, route.rng, True)
    # code 7, SGLang's cache-aware router
    lmax, lmin = load.max(), load.min()
    if lmax - lmin > w[1] and lmax > lmin * w[2]:
        r = int(np.argmin(load))
    else:
        best, rate = 0, -1.0
        for x in range(R):
            v = (_leading(S, rq.hashes, o, m, IX + x) / m) if m > 0 else 0.0
            if v > rate:
                best, rate = x, v
        if rate > w[0]:
            r = best
        else:
            r = 0
            for x in range(1, R):
                if S[CNT][IX + x] < S[CNT][IX + r]:
                    r = x
    if route.idx_cap > 0:
        _index_add(S, rq.hashes, o, m, IX + r, route.idx_cap)
    return r


# ------------------------------------------------------------------ the event queue
@njit(cache=True, inline="always")
def _tree_set(clock, r, t):  # pragma: no cover (compiled)
    """Replica r's next event at t: the tournament tree's path to the root updated."""
    ev, tree = clock.ev, clock.tree
    ev[r] = t
    P = len(tree) // 2
    i = (P + r) // 2
    while i >= 1:
        a, b = tree[2 * i], tree[2 * i + 1]
        tree[i] = a if (b < 0 or (a >= 0 and ev[a] <= ev[b])) else b
        i //= 2


@njit(cache=True)
def _heap_push(clock, t, q):  # pragma: no cover (compiled)
    ht, hq, st = clock.heap_t, clock.heap_q, clock.state
    i = st[2]
    st[2] += 1
    while i > 0:
        p = (i - 1) // 2
        if ht[p] <= t:
            break
        ht[i], hq[i] = ht[p], hq[p]
        i = p
    ht[i], hq[i] = t, q


@njit(cache=True)
def _heap_pop(clock):  # pragma: no cover (compiled)
    ht, hq, st = clock.heap_t, clock.heap_q, clock.state
    q = hq[0]
    st[2] -= 1
    n = st[2]
    t, x = ht[n], hq[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and ht[c + 1] < ht[c]:
            c += 1
        if ht[c] >= t:
            break
        ht[i], hq[i] = ht[c], hq[c]
        i = c
    if n > 0:
        ht[i], hq[i] = t, x
    return q


@njit(cache=True)
def _release(load, clock, k, now):  # pragma: no cover (compiled)
    """Stage k is over at ``now``: the next stages with requests start."""
    n = len(load.stage_dur)
    while k + 1 < n:
        t = max(now, load.stage_start[k] + load.stage_dur[k]) + load.interval
        load.stage_start[k + 1] = t
        clock.state[4] = k + 1
        if load.stage_left[k + 1] > 0:
            return
        k += 1
        now = t


@njit(cache=True)
def _next_turn(sim, load, clock, q, now):  # pragma: no cover (compiled)
    """Request q answered (or refused) at ``now``: a load ladder's stage may end; in a closed
    loop its user sends the session's next turn, or starts the next session, after a think
    time."""
    if len(load.stage) > 0:
        k = load.stage[q]
        load.stage_left[k] -= 1
        if load.stage_left[k] == 0:
            _release(load, clock, k, now)
    if load.users == 0:
        return
    nxt = load.child[q]
    if nxt < 0:
        k = clock.state[1]
        if k >= len(load.heads):
            return
        clock.state[1] = k + 1
        nxt = load.heads[k]
    think = load.think
    if load.think_exp and think > 0:
        think = -think * np.log(1.0 - _uniform(load.rng))
    _heap_push(clock, now + think, nxt)


@njit(cache=True)
def _arrive(S, sim, route, load, clock, q, now):  # pragma: no cover (compiled)
    rq, wk, tm, rep, eng = sim.rq, sim.wk, sim.tm, sim.rep, sim.eng
    tm.sent[q] = now
    if clock.refused[q]:
        wk.status[q] = 5  # REFUSED
        tm.done[q] = now
        _next_turn(sim, load, clock, q, now)
        return
    r = np.int64(pick(S, sim, route, q, clock.state[3]))
    clock.state[3] += 1
    wk.replica[q] = r
    wk.status[q] = WAITING
    push_back(wk, rep, r, q)
    rep.inflight[r] += 1
    rep.active_tok[r] += rq.prompt[q]
    rep.prefill_blk[r] += rq.nb[q]
    if not rep.busy[r] and clock.ev[r] > now:
        _tree_set(clock, r, now)


@njit(cache=True)
def _wake(sim, r):  # pragma: no cover (compiled)
    """When an idle replica must look again: its earliest load's completion (inf: none)."""
    wk = sim.wk
    t = INF
    q = sim.rep.w_head[r]
    while q >= 0:
        if wk.status[q] == LOADING and wk.ready[q] < t:
            t = wk.ready[q]
        q = wk.nxt[q]
    return t


@njit(cache=True)
def _step(S, sim, load, clock, r, now):  # pragma: no cover (compiled)
    rep = sim.rep
    if rep.busy[r]:
        n = end_step(S, sim, r, now, clock.fin)
        for i in range(n):
            _next_turn(sim, load, clock, clock.fin[i], now)
        rep.busy[r] = False
    dt = 0.0
    for _ in range(2):  # a step that only preempted runs nothing: the engine schedules again
        if sim.eng.policy == 0:
            dt = schedule_vllm(S, sim, r, now)
        else:
            dt = schedule_sglang(S, sim, r, now)
        if dt > 0 or rep.n_wait[r] == 0:
            break
        if rep.run_n[r] == 0 and (_wake(sim, r) <= now or _wake(sim, r) == INF):
            if not free_waiting(S, sim, r):  # the queue behind the head holds KV: let it go
                break
    if dt > 0:
        rep.busy[r] = True
        rep.sums[r, 0] += dt
        rep.sums[r, 1] += 1
        rep.sums[r, 2] += (rep.kv_used[r] - S[CNT][r] * sim.tiers.bt) * dt
        _tree_set(clock, r, now + dt)
    else:
        _tree_set(clock, r, _wake(sim, r))


@njit(cache=True)
def run_fleet(S, sim, route, load, clock, need):  # pragma: no cover (compiled)
    """The fleet's events in time order until none is left (returns 0), or until the store has
    fewer than ``need`` free entries (returns 1: the driver grows it and calls again)."""
    ts = load.ts
    st = clock.state
    while True:
        if S[META][0] < need:
            return 1
        ta = INF
        src = 0
        if load.users == 0:
            if st[0] < len(ts):
                if len(load.stage) == 0:
                    ta = ts[st[0]]
                elif load.stage[st[0]] <= st[4]:  # its stage has started
                    ta = load.stage_start[load.stage[st[0]]] + ts[st[0]]
        elif st[2] > 0:
            ta = clock.heap_t[0]
            src = 1
        r = clock.tree[1]
        te = clock.ev[r]
        if ta == INF and te == INF:
            return 0
        if ta <= te:
            if src == 0:
                q = st[0]
                st[0] += 1
            else:
                q = _heap_pop(clock)
            _arrive(S, sim, route, load, clock, q, ta)
        else:
            _step(S, sim, load, clock, r, te)


# ------------------------------------------------------------------ the driver
def simulate(reqs, engine, steps, tiers, route, load, refused):
    """Run the fleet (:func:`run_fleet`) over ``reqs`` (a :class:`~kvmath.traces.simulate.
    engine.Reqs`) with each replica's ``engine`` and ``steps``, the ``tiers`` below them, the
    ``route`` and the arrivals of ``load``; refused: per request, too large for a replica
    (answered at once, never queued). Returns (Times, the replica of each request (-1: none),
    its status, each replica's sums [busy s, steps, held KV token-s, preemptions, tokens out],
    the store's peak entries)."""
    from kvmath.traces.simulate.engine import (Replicas, Sim, Times, Work)
    from kvmath.traces.simulate.store import Store
    n = len(reqs.prompt)
    R = tiers.replicas
    NT = len(tiers.cap)
    lists = R + tiers.nodes * NT + 1 + R
    i8 = np.int64
    wk = Work(status=np.zeros(n, np.int8), computed=np.zeros(n, i8), gen=np.zeros(n, i8),
              held=np.zeros(n, i8), anon=np.zeros(n, i8), sched=np.zeros(n, i8),
              ready=np.zeros(n), load_s=np.zeros(n), replica=np.full(n, -1, np.int32),
              nxt=np.full(n, -1, i8), prv=np.full(n, -1, i8), looked=np.zeros(n, np.bool_))
    tm = Times(sent=np.full(n, -1.0), admitted=np.full(n, -1.0), first=np.full(n, -1.0),
               done=np.full(n, -1.0), hit=np.zeros(n, i8), loaded=np.zeros(n, i8),
               preempted=np.zeros(n, i8))
    rep = Replicas(run=np.zeros((R, max(engine.max_seqs, 1)), i8), run_n=np.zeros(R, i8),
                   w_head=np.full(R, -1, i8), w_tail=np.full(R, -1, i8), n_wait=np.zeros(R, i8),
                   inflight=np.zeros(R, i8), kv_used=np.zeros(R, i8), active_tok=np.zeros(R, i8),
                   prefill_blk=np.zeros(R, i8), ratio=np.full(R, engine.ratio_init),
                   chunked=np.full(R, -1, i8), busy=np.zeros(R, np.bool_),
                   sums=np.zeros((R, 5)))
    sim = Sim(reqs, wk, tm, rep, engine, tiers, steps)
    P = 2
    while P < R:
        P *= 2
    tree = np.full(2 * P, -1, i8)
    tree[P:P + R] = np.arange(R)
    ev = np.full(R, np.inf)
    for i in range(P - 1, 0, -1):
        a, b = tree[2 * i], tree[2 * i + 1]
        tree[i] = a if (b < 0 or (a >= 0 and ev[a] <= ev[b])) else b
    users = len(load.heads) if load.users else 0
    clock = Clock(state=np.zeros(5, i8), heap_t=np.zeros(max(n, 1)), heap_q=np.zeros(max(n, 1), i8),
                  ev=ev, tree=tree, fin=np.zeros(max(engine.max_seqs, 1), i8),
                  refused=np.asarray(refused, np.int8))
    if load.users:  # every user starts a session at once
        for k in range(min(load.users, users)):
            _heap_push(clock, 0.0, int(load.heads[k]))
        clock.state[1] = min(load.users, users)
    nmax = int(reqs.nb.max()) if n else 1
    # the entries one event may add, a bound: a step settles at most a replica's whole KV as
    # cached blocks (its HBM list never holds more than kv_cap // bt + 1), each offered at once
    # to a tier and a pool written through; an arrival's lookup and routing index, 2 nmax + 2 R
    # (the margin had been 2 nmax + 2 R + 64 alone, which many requests back from their loads
    # settling in one step could exceed)
    need = 2 * nmax + 2 * R + 64 + 3 * (engine.kv_cap // tiers.bt + 1)
    bound = (R * (engine.kv_cap // tiers.bt + 1) + tiers.nodes * int(np.sum(tiers.cap))
             + tiers.pool_cap + R * route.idx_cap)
    store = Store(min(bound, len(reqs.hashes) + 1) + need, lists, ints=True)
    peak = 0
    while True:
        code = run_fleet(store.S, sim, route, load, clock, need)
        peak = max(peak, store.size - store.free)
        if code == 0:
            break
        store.ensure(2 * need)
    # every request done or refused has let go of its KV: what a replica holds is its cache
    from kvmath.traces.simulate.store import CNT
    held = rep.kv_used - store.S[CNT][:R] * tiers.bt
    if np.any(held != 0) or np.any((wk.status != 4) & (wk.status != 5)):
        raise RuntimeError(f"the fleet's schedule ended holding KV ({held.tolist()} tokens) or "
                           "with requests unserved: a bug")
    return tm, wk.replica, wk.status, rep.sums, peak
