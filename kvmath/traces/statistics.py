"""What a trace says about reuse: what an unlimited prefix cache would reuse
(:func:`reuse_stats`), the pauses between turns and their lognormal fit (:func:`fit_lognormal`,
:func:`fit_pauses`), each request's previous turn (:func:`continuations`) and what a turn adds
(:func:`turn_new_tokens`), and the mean contexts a batch and a decode step see."""
from __future__ import annotations

import math

import numpy as np

from kvmath.traces.formats.mooncake import MOONCAKE_SOURCE
from kvmath.traces.reading import BUNDLED, load
from kvmath.traces.trace import Trace, block_chunks, block_ids

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def _quantiles(x):
    x = np.asarray(x, dtype=float)
    if not len(x):
        return {f"p{round(q * 100)}": None for q in QUANTILES}
    return {f"p{round(q * 100)}": float(v) for q, v in zip(QUANTILES, np.quantile(x, QUANTILES))}


def reuse_stats(trace: Trace):
    """What an unlimited prefix cache would reuse in a whole (unsampled) trace.

    A request *hits* the longest prefix of its blocks all seen in earlier requests. Each hit is
    classified from hashes alone (there are no session ids): a **continuation** if its last hit
    block was the last full block (the *tail*) of an earlier request's prompt, i.e. the request
    extends an earlier prompt as a next conversation turn does; otherwise **shared prefix** (the
    hit stops inside earlier chains, where requests diverge: a system prompt, a shared document,
    or an identical prompt sent again). A block's *reuse time* is the time since it was last used
    (s); a continuation's *pause* is the reuse time of its last hit block (the time since the
    turn it continues, or since that prefix was last used).

    A request *returns* if a later continuation ends its hit at its tail; the return probability
    is the share of requests with a full block that return, counting only requests that arrive
    at least the 95th-percentile pause before the trace ends (later ones had no time to).
    """
    if trace.sample_rate < 1:
        raise ValueError("reuse statistics need the whole trace, not a SHARDS sample")
    n_req, bt = trace.n_requests, trace.block_tokens
    # memory follows the accesses: indices narrowed to 32 bits where they fit, and each
    # temporary as long as an access array freed once used
    small = np.int32 if max(len(trace.rid), n_req) < 2 ** 31 else np.int64
    rid, pos, ts = trace.rid.astype(small), trace.pos, trace.timestamp_s
    inv, n_ids = block_ids(trace.hashes)
    # each access's previous use: accesses grouped by block, in request order (a block is
    # used once per request, so a previous use is in an earlier request)
    by = np.lexsort((rid, inv))
    same = inv[by][1:] == inv[by][:-1]
    prev_rid = np.full(len(rid), -1, dtype=small)
    prev_rid[by[1:][same]] = rid[by[:-1][same]]
    del same
    seen = prev_rid >= 0
    m = trace.n_blocks.copy()
    np.minimum.at(m, rid[~seen], pos[~seen])  # hit length: leading blocks seen before
    del seen
    hit = pos < m[rid]
    tokens = trace.access_tokens()
    hit_tokens = np.bincount(rid, weights=np.where(hit, tokens, 0), minlength=n_req)
    del tokens
    # branch points: the request in which a block first had a second distinct successor
    # (the next block of the same request), from the accesses grouped by block
    follows = pos + 1 < trace.n_blocks[rid]
    sel = by[follows[by]]  # accesses with a successor, by block, in request order
    del by, follows
    b_sel, r_sel = inv[sel], rid[sel]
    succ = inv[sel + 1]
    del sel
    start = np.ones(len(b_sel), dtype=bool)
    start[1:] = b_sel[1:] != b_sel[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(len(b_sel), dtype=small), 0))
    del start
    differ = np.flatnonzero(succ != succ[first])  # a successor other than the block's first
    del succ, first
    g = b_sel[differ]
    once = np.ones(len(g), dtype=bool)
    once[1:] = g[1:] != g[:-1]  # the first of them in each block's group
    branch_at = np.full(n_ids, n_req, dtype=np.int64)
    branch_at[g[once]] = r_sel[differ[once]]
    del b_sel, r_sel, differ, g, once
    reuse_t = ts[rid] - ts[np.maximum(prev_rid, 0)]
    del prev_rid
    # tails: the last full block of each request
    n_full = trace.prompt_tokens // bt
    is_tail = pos == n_full[rid] - 1
    first_tail = np.full(n_ids, n_req, dtype=np.int64)
    np.minimum.at(first_tail, inv[is_tail], rid[is_tail])
    offsets = np.r_[0, np.cumsum(trace.n_blocks)[:-1]]
    reqs = np.flatnonzero(m > 0)
    last_hit = offsets[reqs] + m[reqs] - 1
    b_last = inv[last_hit]
    cont = (first_tail[b_last] < reqs) & (branch_at[b_last] >= reqs)
    pause = reuse_t[last_hit[cont]]
    kind = np.zeros(n_req, dtype=np.int8)  # 0 miss, 1 shared prefix, 2 continuation
    kind[reqs] = np.where(cont, 2, 1)
    hit_kind = kind[rid][hit]
    # return probability
    last_cont = np.full(len(first_tail), -1, dtype=np.int64)
    np.maximum.at(last_cont, inv[last_hit[cont]], reqs[cont])
    tail_req = rid[is_tail]
    horizon = float(np.quantile(pause, 0.95)) if len(pause) else 0.0
    eligible = ts[tail_req] <= ts[-1] - horizon
    returned = last_cont[inv[is_tail]] > tail_req
    p_return = float(returned[eligible].mean()) if eligible.any() else None
    blocks_total = len(rid)
    return {
        "trace": trace.name, "requests": n_req, "duration_s": trace.duration_s,
        "prompt_tokens": int(trace.prompt_tokens.sum()), "block_tokens": bt,
        "blocks": blocks_total, "distinct_blocks": n_ids,
        # no prompt fills a block: no block can be reused, and no share of them is defined
        "max_block_hit_rate": float(hit.sum() / blocks_total) if blocks_total else None,
        "max_token_hit_rate": float(hit_tokens.sum() / trace.prompt_tokens.sum()),
        "requests_with_hit": float((m > 0).mean()),
        "requests_continuation": float((kind == 2).mean()),
        "requests_shared_prefix": float((kind == 1).mean()),
        "hit_tokens_continuation": float(hit_tokens[kind == 2].sum() / trace.prompt_tokens.sum()),
        "hit_tokens_shared_prefix": float(hit_tokens[kind == 1].sum()
                                          / trace.prompt_tokens.sum()),
        "hit_tokens_quantiles": _quantiles(hit_tokens[m > 0]),
        "hit_fraction_quantiles": _quantiles((hit_tokens / trace.prompt_tokens)[m > 0]),
        "reuse_time_s_shared_prefix": _quantiles(reuse_t[hit][hit_kind == 1]),
        "reuse_time_s_continuation": _quantiles(reuse_t[hit][hit_kind == 2]),
        "pause_s": _quantiles(pause), "pauses": pause,
        "return_probability": p_return, "return_horizon_s": horizon,
        "returning_requests_counted": int(eligible.sum()),
    }


def fit_lognormal(x):
    """Maximum-likelihood lognormal of positive samples: (median s, sigma, KS distance, n, zeros)."""
    x = np.asarray(x, dtype=float)
    pos_x = np.sort(x[x > 0])
    if len(pos_x) < 2:
        raise ValueError("a lognormal fit needs at least two positive samples")
    logs = np.log(pos_x)
    mu, sigma = float(logs.mean()), float(logs.std())
    if not sigma > 0:
        raise ValueError(f"every pause is {math.exp(mu):.4g} s: no spread for a lognormal to fit")
    z = (logs - mu) / (sigma * math.sqrt(2))
    fit = 0.5 * (1 + np.vectorize(math.erf)(z))
    emp_hi = np.arange(1, len(pos_x) + 1) / len(pos_x)
    ks = float(max(np.abs(emp_hi - fit).max(), np.abs(emp_hi - 1 / len(pos_x) - fit).max()))
    return {"median_s": math.exp(mu), "sigma": sigma, "ks_distance": ks, "n": len(pos_x),
            "zeros": int((x <= 0).sum())}


PAUSE_ROW_FIELDS = ("name", "distribution", "median_s", "sigma", "return_probability", "kind",
                    "source", "source_location", "retrieved", "notes")


def fit_pauses(name):
    """A pauses.csv row fitted to a bundled trace: lognormal pause and return probability."""
    stats = reuse_stats(load(name))
    fit = fit_lognormal(stats["pauses"])
    return {
        "name": f"{name}-fitted", "distribution": "lognormal",
        "median_s": f"{fit['median_s']:.4g}", "sigma": f"{fit['sigma']:.4g}",
        "return_probability": f"{stats['return_probability']:.4g}",
        # a fit to measured arrivals; the synthetic trace's arrivals are not measured
        "kind": "assumption" if name == "synthetic" else "measurement",
        "source": f"{MOONCAKE_SOURCE}/{BUNDLED[name].removesuffix('.gz')}",
        "source_location": (f"lognormal maximum-likelihood fit (mean and s.d. of log) to "
                            f"{fit['n']} continuation pauses (kvmath.traces.readers.fit_pauses; "
                            f"{fit['zeros']} zero pauses left out; KS distance "
                            f"{fit['ks_distance']:.3f}); return probability = share of "
                            f"{stats['returning_requests_counted']} requests whose last full "
                            f"block a later request continues"),
        "retrieved": "2026-11-30",
        "notes": ("pause = time between request arrivals, so it includes the earlier turn's "
                  "generation; no session ids: turns are matched by prefix hashes; a one-hour "
                  "trace cuts off longer pauses, so the tail is short and p is a lower bound"
                  + ("; synthetic trace: Poisson arrivals, not measured think times"
                     if name == "synthetic" else "")),
    }


def batch_context_of(trace, model=None):
    """Default context of a running sequence: the trace's mean prompt + output tokens, at most
    the model's context window (no sequence runs longer)."""
    mean = int(math.ceil((trace.prompt_tokens + trace.output_tokens).mean()))
    return mean if model is None else min(mean, model.max_context_tokens)


def decode_context_of(trace, model):
    """The mean context of a decode step over the trace's output tokens, tokens: output token j
    (from 0) of a request with p prompt tokens reads p + j tokens of KV, so the mean is
    sum(o p + o (o - 1) / 2) / sum(o); at most the model's window, and the mean prompt when no
    request has output."""
    p, o = trace.prompt_tokens.astype(float), trace.output_tokens.astype(float)
    total = o.sum()
    mean = (float((o * p + o * (o - 1) / 2).sum() / total) if total > 0
            else float(p.mean()) if len(p) else 1.0)
    return max(min(mean, model.max_context_tokens), 1.0)


def continuations(trace):
    """The previous turn of each request (an int32 array, int64 past 2**31 requests; -1 for
    none): the latest earlier request
    whose whole prompt (its full blocks) this one's starts with, as a turn repeats the
    conversation so far. A prompt is continued once: the next request that repeats it is the
    conversation's next turn, and a later one repeating the same blocks is not (so a prompt of
    only a system prompt that every conversation shares does not chain them all).

    Compiled (:class:`kvmath.traces.simulate.turns.Continuations`): a map of the prompts not yet
    continued (16 bytes each at half load: it grows with the prompts a trace never continues),
    the trace read a chunk of requests at a time."""
    from kvmath.traces.simulate.turns import Continuations
    turns = Continuations(trace.block_tokens)
    parent = np.full(trace.n_requests, -1, np.int32 if trace.n_requests < 2 ** 31 else np.int64)
    for a, b, h in block_chunks(trace):
        parent[a:b] = turns.feed(trace.n_blocks[a:b], trace.prompt_tokens[a:b], h)
    return parent


def turn_new_tokens(trace, parent=None):
    """Mean tokens a turn adds to its conversation's cache: its prompt past its previous turn's
    whole prompt (:func:`continuations`), plus its output, over the requests that continue one;
    what an engine that writes only the blocks a store lacks writes at the turn's end."""
    parent = continuations(trace) if parent is None else parent
    cont = np.flatnonzero(parent >= 0)
    if not len(cont):
        return None
    bt = trace.block_tokens
    prev_full = (trace.prompt_tokens[parent[cont]] // bt) * bt
    new = np.maximum(trace.prompt_tokens[cont] - prev_full, 0) + trace.output_tokens[cont]
    return float(new.mean())
