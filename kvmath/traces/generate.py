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
