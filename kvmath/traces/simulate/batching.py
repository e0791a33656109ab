"""The steps a replica's scheduler builds (numba): vLLM V1's (:func:`schedule_vllm`) and SGLang's
(:func:`schedule_sglang`), and what a step leaves when it ends (:func:`end_step`). The semantics,
their sources and the replica's KV are described in :mod:`kvmath.traces.simulate.engine`.

A schedule call, at the end of the replica's previous step (or when an idle replica gets work),
sets each scheduled request's tokens (``Work.sched``), allocates their KV, and returns the step's
time (0: nothing to run); :func:`end_step`, at that time, feeds the tokens, samples a token for
each request that has fed every token it knows (its first is its time to first token), and
retires the finished ones.
"""
from __future__ import annotations

import numpy as np
from kvmath.traces.simulate.compiled import njit

from kvmath.traces.simulate.engine import (DONE, LOADING, RUNNING, WAITING, chunk_cost, kv_free,
                                           lookup, make_room, push_front, release, settle,
                                           step_time, unqueue)


@njit(cache=True)
def preempt(S, sim, q, r):  # pragma: no cover (compiled)
    """Request q (already out of the running list) loses its KV and its computed tokens and
    goes back to the head of the queue: it will recompute what it had (vLLM's recompute
    preemption, SGLang's retraction)."""
    wk = sim.wk
    release(S, sim, q, r)
    wk.computed[q] = 0
    wk.sched[q] = 0
    wk.status[q] = WAITING
    wk.looked[q] = False
    push_front(wk, sim.rep, r, q)
    sim.tm.preempted[q] += 1
    sim.rep.sums[r, 3] += 1


@njit(cache=True)
def _take(S, sim, r, q, c, acc):  # pragma: no cover (compiled)
    """Schedule c tokens of q (their KV already has room): acc [tokens, attention s, KV read
    s, load s] of the step grows."""
    wk = sim.wk
    wk.sched[q] = c
    sim.rep.kv_used[r] += c
    wk.anon[q] += c
    a, k = chunk_cost(sim.st, wk.computed[q], c, sim.rq.prompt[q])
    acc[0] += c
    acc[1] += a
    acc[2] += k
    if wk.load_s[q] > acc[3]:
        acc[3] = wk.load_s[q]
    wk.load_s[q] = 0.0


@njit(cache=True)
def _admit(sim, r, q, now):  # pragma: no cover (compiled)
    wk, rep = sim.wk, sim.rep
    unqueue(wk, rep, r, q)
    rep.run[r, rep.run_n[r]] = q
    rep.run_n[r] += 1
    wk.status[q] = RUNNING
    if sim.tm.admitted[q] < 0:
        sim.tm.admitted[q] = now


@njit(cache=True)
def _consider(S, sim, q, r, now):  # pragma: no cover (compiled)
    """A waiting request the scheduler reaches: -1 skip it (its load is still running, or it
    just started one), 0 stop (no room: head of line), 1 it may be scheduled; 2 as 1 but its
    prefix was looked up now (so a later refusal lets go of what it holds)."""
    wk = sim.wk
    if wk.status[q] == LOADING:
        if wk.ready[q] > now:
            return -1
        wk.status[q] = WAITING
        settle(S, sim, q, r)  # its loaded blocks are cached now
        return 1
    if wk.looked[q]:
        return 1
    if not lookup(S, sim, q, r, now):
        return 0
    if wk.status[q] == LOADING:
        return -1
    return 2


@njit(cache=True)
def _refuse(S, sim, q, r, fresh):  # pragma: no cover (compiled)
    """A request that cannot be scheduled keeps nothing it took in this look (its allocation
    failed as a whole); a request back from its load keeps its loaded blocks."""
    if fresh:
        release(S, sim, q, r)
        sim.wk.computed[q] = 0
        sim.wk.looked[q] = False


@njit(cache=True)
def schedule_vllm(S, sim, r, now):  # pragma: no cover (compiled)
    """vLLM V1's step on replica r at ``now`` (:mod:`~kvmath.traces.simulate.engine`); its time
    (0: nothing to run)."""
    rq, wk, rep, eng = sim.rq, sim.wk, sim.rep, sim.eng
    acc = np.zeros(4)
    budget = eng.budget
    preempted = False
    i = 0
    kv_cap = eng.kv_cap
    run, prompt, gen, computed = rep.run, rq.prompt, wk.gen, wk.computed
    sched, anon, kvread, grid = wk.sched, wk.anon, sim.st.kvread, sim.st.grid
    used = rep.kv_used[r]
    top = len(kvread) - 1
    n_dec = 0
    kv_dec = 0.0
    while i < rep.run_n[r] and budget > 0:
        q = run[r, i]
        s0 = computed[q]
        c = min(prompt[q] + gen[q] - s0, budget)
        if c == 1 and s0 >= prompt[q] and kv_cap - used >= 1:
            # a decode with room, the common case: its token and its read of its context
            sched[q] = 1
            used += 1
            anon[q] += 1
            n_dec += 1
            x = s0 / grid
            k = int(x)
            kv_dec += (kvread[top] if k >= top else
                       kvread[k] + (x - k) * (kvread[k + 1] - kvread[k]))
            budget -= 1
            i += 1
            continue
        rep.kv_used[r] = used
        ok = True
        while not make_room(S, sim, r, c):
            v = rep.run[r, rep.run_n[r] - 1]
            rep.run_n[r] -= 1
            preempt(S, sim, v, r)
            preempted = True
            if v == q:
                ok = False
                break
        used = rep.kv_used[r]  # what the preemptions freed
        if not ok:
            break
        _take(S, sim, r, q, c, acc)
        used = rep.kv_used[r]
        budget -= c
        i += 1
    rep.kv_used[r] = used
    acc[0] += n_dec
    acc[2] += kv_dec
    if not preempted:
        q = rep.w_head[r]
        while q >= 0 and budget > 0 and rep.run_n[r] < eng.max_seqs:
            nq = wk.nxt[q]
            seen = _consider(S, sim, q, r, now)
            if seen < 0:
                q = nq
                continue
            if seen == 0:
                break
            need = rq.prompt[q] + wk.gen[q] - wk.computed[q]
            c = min(need, budget)
            want = need if eng.full_isl else c
            if kv_free(S, sim, r) < want or not make_room(S, sim, r, c):
                _refuse(S, sim, q, r, seen == 2)
                break
            _admit(sim, r, q, now)
            _take(S, sim, r, q, c, acc)
            budget -= c
            q = nq
    if acc[0] == 0:
        return 0.0
    dt = step_time(sim.st, int(acc[0]), acc[1], acc[2])
    return dt if dt > acc[3] else acc[3]


@njit(cache=True)
def _retract_one(S, sim, r):  # pragma: no cover (compiled)
    """SGLang's retraction: the decoding request with the most output tokens (then the
    shortest prompt) leaves the running list for the queue (sglang==0.5.23
    srt/managers/schedule_batch.py:3542-3553: requests kept by (output tokens, - input tokens)
    ascending, the last retracted first)."""
    rq, wk, rep = sim.rq, sim.wk, sim.rep
    best = -1
    for i in range(rep.run_n[r]):
        q = rep.run[r, i]
        if wk.gen[q] == 0:
            continue
        if best < 0:
            best = i
            continue
        b = rep.run[r, best]
        if wk.gen[q] > wk.gen[b] or (wk.gen[q] == wk.gen[b] and rq.prompt[q] < rq.prompt[b]):
            best = i
    if best < 0:
        return False
    q = rep.run[r, best]
    for i in range(best, rep.run_n[r] - 1):
        rep.run[r, i] = rep.run[r, i + 1]
    rep.run_n[r] -= 1
    preempt(S, sim, q, r)
    return True


@njit(cache=True)
def schedule_sglang(S, sim, r, now):  # pragma: no cover (compiled)
    """SGLang's step on replica r at ``now``: a prefill batch if one can be formed, else a
    decode step of every running request; its time (0: nothing to run)."""
    rq, wk, rep, eng = sim.rq, sim.wk, sim.rep, sim.eng
    acc = np.zeros(4)
    budget = eng.budget
    ratio = rep.ratio[r]
    reserve = 0.0
    for i in range(rep.run_n[r]):
        q = rep.run[r, i]
        if wk.gen[q] > 0:
            reserve += min(rq.output[q] - wk.gen[q], eng.clip_new) * ratio
    cq = rep.chunked[r]
    if cq >= 0:
        need = rq.prompt[cq] + wk.gen[cq] - wk.computed[cq]
        c = min(need, budget)
        if make_room(S, sim, r, c):
            _take(S, sim, r, cq, c, acc)
            budget -= c
            if c == need:
                rep.chunked[r] = -1
    q = rep.w_head[r]
    while q >= 0 and budget > 0 and rep.run_n[r] < eng.max_seqs and rep.chunked[r] < 0:
        nq = wk.nxt[q]
        seen = _consider(S, sim, q, r, now)
        if seen < 0:
            q = nq
            continue
        if seen == 0:
            break
        need = rq.prompt[q] + wk.gen[q] - wk.computed[q]
        extra = min(rq.output[q] - wk.gen[q], eng.clip_new) * ratio
        c = min(need, budget)
        if kv_free(S, sim, r) - reserve < need + extra or not make_room(S, sim, r, c):
            _refuse(S, sim, q, r, seen == 2)
            break
        _admit(sim, r, q, now)
        _take(S, sim, r, q, c, acc)
        reserve += extra
        budget -= c
        if c < need:
            rep.chunked[r] = q
        q = nq
    if acc[0] > 0:
        dt = step_time(sim.st, int(acc[0]), acc[1], acc[2])
        return dt if dt > acc[3] else acc[3]
    n = 0
    for i in range(rep.run_n[r]):
        if wk.gen[rep.run[r, i]] > 0:
            n += 1
    if n == 0:
        return 0.0
    retracted = False
    while not make_room(S, sim, r, n):
        if not _retract_one(S, sim, r):
            break
        retracted = True
        n -= 1
    if retracted:  # the ratio the kept requests' progress suggests (new_token_ratio_tracker.py:
        # 41-49: decoded + SGLANG_RETRACT_DECODE_STEPS x kept over their max new tokens + 1)
        done = 0.0
        total = 1.0
        for i in range(rep.run_n[r]):
            q = rep.run[r, i]
            done += wk.gen[q] + 20.0
            total += rq.output[q]
        rep.ratio[r] = min(1.0, done / total)
    else:
        rep.ratio[r] = max(eng.ratio_min, ratio - eng.ratio_decay)
    if n == 0:
        return 0.0
    for i in range(rep.run_n[r]):
        q = rep.run[r, i]
        if wk.gen[q] > 0:
            _take(S, sim, r, q, 1, acc)
    return step_time(sim.st, int(acc[0]), acc[1], acc[2])


@njit(cache=True)
def end_step(S, sim, r, now, finished):  # pragma: no cover (compiled)
    """Replica r's step ends at ``now``: every scheduled request's tokens are fed (a prompt's
    completed blocks cached), one token is sampled for each that has fed every token it knows
    (the first at its time to first token), and the finished leave the running list, their KV
    cached or freed; their ids go to ``finished``, whose count is returned."""
    rq, wk, tm, rep = sim.rq, sim.wk, sim.tm, sim.rep
    bt = sim.tiers.bt
    # the arrays the loop touches, taken out of their records once (numba counts references
    # to an array read from a record inside a loop on every access)
    run, sched, computed, gen, held = rep.run, wk.sched, wk.computed, wk.gen, wk.held
    prompt, output, nb, first = rq.prompt, rq.output, rq.nb, tm.first
    n_fin = 0
    j = 0
    out_tokens = 0
    active = 0
    for i in range(rep.run_n[r]):
        q = run[r, i]
        c = sched[q]
        keep = True
        if c > 0:
            sched[q] = 0
            computed[q] += c
            cq = computed[q]
            if cq <= prompt[q] + bt and held[q] < min(min(cq, prompt[q]) // bt, nb[q]):
                settle(S, sim, q, r)
            if cq == prompt[q] + gen[q]:
                gen[q] += 1
                active += 1
                out_tokens += 1
                if first[q] < 0:
                    first[q] = now
                    rep.prefill_blk[r] -= nb[q]
                if gen[q] >= output[q]:
                    keep = False
                    release(S, sim, q, r)
                    wk.status[q] = DONE
                    tm.done[q] = now
                    rep.inflight[r] -= 1
                    active -= prompt[q] + gen[q]
                    finished[n_fin] = q
                    n_fin += 1
        if keep:
            run[r, j] = q
            j += 1
    rep.run_n[r] = j
    rep.active_tok[r] += active
    rep.sums[r, 4] += out_tokens
    return n_fin


@njit(cache=True)
def free_waiting(S, sim, r):  # pragma: no cover (compiled)
    """Replica r runs nothing and waits on no load, yet its head of line does not fit: the
    requests queued behind it hold KV they looked up or loaded (their cached prefix, their
    loaded blocks), and together they leave no room. Each lets go of it (to look again when the
    scheduler reaches it), as a request the engine cannot schedule keeps no blocks; whether any
    did. Without this the replica would wait for ever on its own queue."""
    wk = sim.wk
    freed = False
    q = wk.nxt[sim.rep.w_head[r]] if sim.rep.w_head[r] >= 0 else -1
    while q >= 0:
        if wk.looked[q] and (wk.status[q] == WAITING or wk.status[q] == LOADING):
            if wk.held[q] > 0 or wk.anon[q] > 0:
                freed = True
            release(S, sim, q, r)
            wk.computed[q] = 0
            wk.looked[q] = False
            wk.status[q] = WAITING
        q = wk.nxt[q]
    return freed
