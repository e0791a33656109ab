"""A generated agent-like trace: long sessions whose prompt grows by a tool result every turn.

An agent (a coding or tool-use agent) re-sends its whole context each turn: one system prompt
and tool schemas shared by every session, then its own history, to which each turn appends the
model's output and a tool's result. Sessions arrive as a Poisson process; a session runs a
geometric number of turns (at least one), each arriving a lognormal pause after the one before
(the output's decode and the tool's run); it ends early when its prompt would pass the context
cap. Blocks are hashed as a chained prefix hash would be: the system prompt's full blocks are
shared by all sessions, a session's full blocks are its own and stay the same from turn to
turn, and a partial last block is new each turn (its content changes as the prompt grows).

Every parameter is a labelled assumption in ``plan_defaults.csv`` (rows ``agent_*``); the
generator is seeded, so the trace is the same on every machine.
"""
from __future__ import annotations

import math

import numpy as np

from kvmath.traces.formats.mooncake import MOONCAKE_BLOCK_TOKENS
from kvmath.traces.trace import Trace

#: the plan_defaults.csv rows the generator reads, without their ``agent_`` prefix
PARAMETERS = ("sessions_per_s", "duration_s", "turns_mean", "system_tokens",
              "first_user_tokens", "tool_tokens_median", "tool_tokens_sigma",
              "output_tokens_median", "output_tokens_sigma", "pause_median_s", "pause_sigma",
              "max_context_tokens", "seed")


def agent_parameters(**overrides):
    """{parameter: value} from plan_defaults.csv's ``agent_*`` rows, with overrides."""
    from kvmath.tables.rows import plan_defaults
    d = plan_defaults()
    out = {k: d[f"agent_{k}"].value for k in PARAMETERS}
    unknown = set(overrides) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"unknown agent-trace parameter(s): {', '.join(sorted(unknown))}")
    out.update(overrides)
    return out


def agent_trace(block_tokens=MOONCAKE_BLOCK_TOKENS, **overrides):
    """The agent-like trace (a :class:`~kvmath.traces.trace.Trace` named ``agent``), requests in
    order of arrival."""
    p = agent_parameters(**overrides)
    rng = np.random.default_rng(int(p["seed"]))
    n_sessions = max(int(rng.poisson(p["sessions_per_s"] * p["duration_s"])), 1)
    starts = np.sort(rng.uniform(0.0, p["duration_s"], n_sessions))
    shared_full = int(p["system_tokens"]) // block_tokens
    cap = int(p["max_context_tokens"])
    requests = []  # (timestamp, prompt tokens, output tokens, session, turn)
    for s, t in enumerate(starts.tolist()):
        turns = int(rng.geometric(1.0 / max(p["turns_mean"], 1.0)))
        prompt = int(p["system_tokens"] + p["first_user_tokens"])
        for k in range(turns):
            out = max(int(round(rng.lognormal(math.log(p["output_tokens_median"]),
                                              p["output_tokens_sigma"]))), 1)
            if prompt > cap:
                break
            requests.append((t, prompt, out, s, k))
            tool = int(round(rng.lognormal(math.log(p["tool_tokens_median"]),
                                           p["tool_tokens_sigma"])))
            prompt += out + tool
            t += float(rng.lognormal(math.log(p["pause_median_s"]), p["pause_sigma"]))
    requests.sort(key=lambda r: (r[0], r[3], r[4]))
    ts = np.array([r[0] for r in requests], dtype=float)
    prompt = np.array([r[1] for r in requests], dtype=np.int64)
    output = np.array([r[2] for r in requests], dtype=np.int64)
    n_blocks = -(-prompt // block_tokens)  # the last, partial block hashed too
    rid = np.repeat(np.arange(len(requests), dtype=np.int64), n_blocks)
    starts_at = np.r_[0, np.cumsum(n_blocks)[:-1]]
    pos = (np.arange(int(n_blocks.sum()), dtype=np.int64) - np.repeat(starts_at, n_blocks))
    session = np.array([r[3] for r in requests], dtype=np.uint64)[rid]
    turn = np.array([r[4] for r in requests], dtype=np.uint64)[rid]
    full = (pos + 1) * block_tokens <= prompt[rid]
    # hashes: shared system blocks 1.., a session's full blocks (session, position), a partial
    # last block (session, turn, position) with the top bit set; never 0
    upos = pos.astype(np.uint64)
    hashes = np.where(
        full & (pos < shared_full), upos + np.uint64(1),
        np.where(full, ((session + np.uint64(1)) << np.uint64(24)) | upos,
                 np.uint64(1 << 63) | ((session + np.uint64(1)) << np.uint64(40))
                 | (turn << np.uint64(24)) | upos))
    return Trace(name="agent", timestamp_s=ts, prompt_tokens=prompt, output_tokens=output,
                 n_blocks=n_blocks, rid=rid, pos=pos.astype(np.int32),
                 hashes=hashes.astype(np.uint64), block_tokens=block_tokens)


# ------------------------------------------------------------------ benchmark workloads
def poisson_arrivals(stages, seed=0):
    """Arrival times, s, of Poisson stages [(requests a second, seconds), ...] one after another
    (inference-perf's ``load.stages``, SGLang's bench_serving ``--request-rate``); a rate of 0
    or inf sends the stage's requests... none (0) or is refused (inf: give requests instead)."""
    rng = np.random.default_rng(seed)
    out, t0 = [], 0.0
    for rate, seconds in stages:
        if not (rate >= 0 and math.isfinite(rate) and seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"a stage of {rate} requests a second for {seconds} s: expected a "
                             "finite rate and a positive duration")
        t = t0
        if rate > 0:
            gaps = rng.exponential(1.0 / rate, size=int(rate * seconds * 1.5) + 16)
            while True:
                ts = t + np.cumsum(gaps)
                if ts[-1] >= t0 + seconds:
                    break
                gaps = np.concatenate([gaps, rng.exponential(1.0 / rate, size=len(gaps))])
            out.append(ts[ts < t0 + seconds])
        t0 += seconds
    return np.concatenate(out) if out else np.zeros(0)


def _hash(*parts):
    """Blocks' hashes from what their content depends on (numbers or arrays; never 0)."""
    h = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        for p in parts:
            p = np.asarray(p).astype(np.uint64)
            h = (h ^ p) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
    return h | np.uint64(1)


def _blocks(tokens, bt, shared, shared_key, own_key, partial_key):
    """Hashes of a prompt of ``tokens`` tokens whose first ``shared`` tokens are shared (their
    full blocks keyed by ``shared_key``), the rest its own (``own_key``; a partial last block
    ``partial_key``): chained as an engine's prefix hashes are, a block's hash naming its whole
    prefix."""
    j = np.arange(-(-tokens // bt), dtype=np.int64)
    end = (j + 1) * bt
    full = end <= tokens
    kind = np.where(full & (end <= shared), 1, np.where(full, 2, 3))
    key = np.where(kind == 1, shared_key, np.where(kind == 2, own_key, partial_key))
    return _hash(kind, key, j)


def _trace(name, ts, prompt, output, hashes, bt):
    prompt = np.asarray(prompt, np.int64)
    n_blocks = np.array([len(h) for h in hashes], np.int64)
    rid = np.repeat(np.arange(len(prompt), dtype=np.int64), n_blocks)
    starts = np.r_[0, np.cumsum(n_blocks)[:-1]]
    pos = (np.arange(int(n_blocks.sum()), dtype=np.int64) - np.repeat(starts, n_blocks))
    flat = np.concatenate(hashes) if len(hashes) else np.zeros(0, np.uint64)
    return Trace(name=name, timestamp_s=np.asarray(ts, float), prompt_tokens=prompt,
                 output_tokens=np.asarray(output, np.int64), n_blocks=n_blocks, rid=rid,
                 pos=pos.astype(np.int32), hashes=flat.astype(np.uint64), block_tokens=bt)


def shared_prefix_trace(groups, prompts_per_group, system_tokens, question_tokens,
                        output_tokens, arrivals, block_tokens=64, cycle=True, seed=0):
    """The shared-prefix workload of inference-perf (kubernetes-sigs/inference-perf@b6687e71
    inference_perf/datagen/shared_prefix_datagen.py: ``groups`` x ``prompts_per_group`` prompts,
    each a group's system prompt of ``system_tokens`` then its own question of
    ``question_tokens``, shuffled once and sent in that order over and over (``cycle``), so a
    prompt repeats every groups x prompts_per_group requests) and of SGLang's bench_serving
    ``generated-shared-prefix`` (the same prompts, each sent once: ``cycle`` False), at the
    times ``arrivals`` (:func:`poisson_arrivals`), every request asking ``output_tokens``
    (ignore_eos). A Trace named ``shared-prefix``, hashed in blocks of ``block_tokens``."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(groups * prompts_per_group)
    n = len(arrivals) if cycle else min(len(arrivals), len(order))
    tokens = system_tokens + question_tokens
    hashes = []
    for i in range(n):
        k = int(order[i % len(order)])
        g = k // prompts_per_group
        hashes.append(_blocks(tokens, block_tokens, system_tokens, g, k + (1 << 32), k))
    return _trace("shared-prefix", np.asarray(arrivals[:n]), np.full(n, tokens),
                  np.full(n, output_tokens), hashes, block_tokens)


def stage_counts(stages):
    """Requests of each stage [(rate, seconds), ...]: int(rate x seconds), as inference-perf's
    load generator sends (kubernetes-sigs/inference-perf@b6687e71 inference_perf/loadgen/
    load_generator.py:151, ``num_requests = int(stage.rate * stage.duration)``)."""
    return [int(rate * seconds) for rate, seconds in stages]


def sessions_trace(sessions, turns_mean, turn_tokens, output_tokens, system_tokens=0,
                   turns_min=1, turns_max=None, session_rate=None, pause=None,
                   block_tokens=64, seed=0, split_tokens=None):
    """Multi-turn sessions: ``sessions`` conversations, each a shared system prompt of
    ``system_tokens`` then turns of a user message (``turn_tokens``: a number, or a function
    of the random generator giving one) and the model's reply of ``output_tokens``, each turn's
    prompt the whole conversation so far; the turns a session runs are ``turns_min`` plus a
    geometric number with mean ``turns_mean - turns_min``, at most ``turns_max``; sessions start
    as a Poisson process of ``session_rate`` a second (None: all at once) and a turn follows the
    last after ``pause`` s (a function of the generator: a pause distribution; None: 0); with
    ``split_tokens`` (a function of the generator), a session's user text is that many tokens
    split evenly over its turns instead of ``turn_tokens`` each. A closed
    loop (``fleet --users``) ignores the times and sends each turn after the last one's answer.
    A Trace named ``sessions``, hashed in blocks of ``block_tokens``: the system prompt's full
    blocks shared, a session's full blocks its own and the same from turn to turn, a partial
    last block new each turn."""
    rng = np.random.default_rng(seed)
    starts = (np.zeros(sessions) if not session_rate else
              np.cumsum(rng.exponential(1.0 / session_rate, size=sessions)))
    rows = []  # (time, prompt, output, session, turn)
    extra = max(turns_mean - turns_min, 0.0)
    for s in range(sessions):
        turns = turns_min + (int(rng.geometric(1.0 / (1.0 + extra))) - 1 if extra > 0 else 0)
        if turns_max:
            turns = min(turns, turns_max)
        t, prompt = float(starts[s]), int(system_tokens)
        share = split_tokens(rng) / turns if split_tokens is not None else None
        for k in range(turns):
            u = (share if share is not None else
                 turn_tokens(rng) if callable(turn_tokens) else turn_tokens)
            prompt += max(int(round(u)), 1)
            rows.append((t, prompt, int(output_tokens), s, k))
            prompt += int(output_tokens)
            t += float(pause(rng)) if pause is not None else 0.0
    rows.sort(key=lambda r: (r[0], r[3], r[4]))
    hashes = [_blocks(p, block_tokens, system_tokens, 0, s + 1, (s + 1) * 100_003 + k)
              for _, p, _, s, k in rows]
    return _trace("sessions", [r[0] for r in rows], [r[1] for r in rows],
                  [r[2] for r in rows], hashes, block_tokens)


def write_generic(trace, path):
    """Write ``trace`` as a generic JSONL trace (:mod:`kvmath.traces.formats.generic`: one
    request a line, timestamp_s, prompt_tokens, output_tokens, block_hashes, block_tokens),
    gzipped when the path ends in .gz."""
    import gzip
    import json
    opener = gzip.open if str(path).endswith(".gz") else open
    off = np.r_[0, np.cumsum(trace.n_blocks)]
    with opener(path, "wt") as fh:
        for i in range(trace.n_requests):
            fh.write(json.dumps({"timestamp_s": float(trace.timestamp_s[i]),
                                 "prompt_tokens": int(trace.prompt_tokens[i]),
                                 "output_tokens": int(trace.output_tokens[i]),
                                 "block_hashes": [int(h) for h in
                                                  trace.hashes[off[i]:off[i + 1]]],
                                 "block_tokens": int(trace.block_tokens)}) + "\n")
