"""``kvmath trace generate --workload W --out FILE``: a generic trace (:mod:`kvmath.traces.formats.
generic`) of the workloads benchmark reports describe, for ``fleet``, ``route`` and ``trace`` to
read (:mod:`kvmath.traces.generate`):

- ``shared-prefix``: groups of prompts sharing a system prompt, each with its own question
  (inference-perf's ``shared_prefix``, cycled; SGLang's ``generated-shared-prefix``, ``--once``),
  Poisson arrivals at ``--rate`` for ``--duration`` s or in ``--stages`` RATE:SECONDS,...;
- ``sessions``: multi-turn conversations, each turn's prompt the conversation so far, sessions
  starting at ``--session-rate`` and a turn following the last after a pause drawn from a
  pauses.csv row (``--pause``) or ``--pause-s`` s (a closed loop, ``fleet --users``, ignores the
  times);
- ``agent``: the agent-like trace of plan_defaults.csv's ``agent_*`` rows.

Seeded: the same options write the same file on every machine.
"""
from __future__ import annotations

import argparse
import math

from kvmath.errors import UsageError


def parser(make):
    p = make(prog="python -m kvmath trace generate",
             description="write a generic trace of a benchmark workload")
    p.add_argument("--workload", required=True, choices=("shared-prefix", "sessions", "agent"))
    p.add_argument("--out", required=True, metavar="FILE.jsonl[.gz]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-tokens", type=int, default=64, metavar="N",
                   help="tokens a hashed block (default 64: vLLM 0.34's default block size)")
    g = p.add_argument_group("shared-prefix")
    g.add_argument("--groups", type=int, default=64)
    g.add_argument("--prompts-per-group", type=int, default=16)
    g.add_argument("--system-tokens", type=int, default=None,
                   help="shared-prefix default 2048 (SGLang's bench_serving); sessions 0")
    g.add_argument("--question-tokens", type=int, default=128)
    g.add_argument("--output-tokens", type=int, default=256)
    g.add_argument("--rate", type=float, default=None, help="requests (sessions) a second")
    g.add_argument("--duration", type=float, default=None, metavar="S")
    g.add_argument("--stages", default=None, metavar="RATE:SECONDS,...")
    g.add_argument("--requests", type=int, default=None,
                   help="with no rate: this many requests at once")
    g.add_argument("--once", action="store_true", help="each prompt once (else cycled)")
    s = p.add_argument_group("sessions")
    s.add_argument("--sessions", type=int, default=100)
    s.add_argument("--turns-mean", type=float, default=5.0)
    s.add_argument("--turns-min", type=int, default=1)
    s.add_argument("--turns-max", type=int, default=None)
    s.add_argument("--turn-tokens", type=float, default=200.0, help="median tokens a user turn")
    s.add_argument("--turn-tokens-sigma", type=float, default=0.0,
                   help="sigma of a lognormal turn length (0: every turn the median)")
    s.add_argument("--session-rate", type=float, default=None)
    s.add_argument("--pause", default=None, metavar="NAME_OR_CSV",
                   help="a pauses.csv row the pause between turns is drawn from")
    s.add_argument("--pause-s", type=float, default=None, help="a constant pause, s")
    return p


def _positive(name, v, integer=False):
    if v is None or not (math.isfinite(v) and v > 0) or (integer and int(v) != v):
        raise UsageError(f"--{name} {v}: expected a positive {'integer' if integer else 'number'}")


def _stages(args):
    if args.stages:
        out = []
        for part in args.stages.split(","):
            rate, _, secs = part.partition(":")
            try:
                out.append((float(rate), float(secs)))
            except ValueError:
                raise UsageError(f"--stages {args.stages!r}: expected RATE:SECONDS,... "
                                 "(15:50,3:20)") from None
            if not (math.isfinite(out[-1][0]) and out[-1][0] >= 0 and out[-1][1] > 0
                    and math.isfinite(out[-1][1])):
                raise UsageError(f"--stages {args.stages!r}: a rate must be finite and not "
                                 "negative, a duration positive")
        return out
    if args.rate is not None:
        _positive("rate", args.rate)
        _positive("duration", args.duration)
        return [(args.rate, args.duration)]
    return None


def generate(args):
    """The trace the options describe (a :class:`~kvmath.traces.trace.Trace`)."""
    import numpy as np

    from kvmath.traces import generate as G
    _positive("block-tokens", args.block_tokens, True)
    if args.workload == "agent":
        return G.agent_trace(block_tokens=args.block_tokens, seed=args.seed)
    if args.workload == "shared-prefix":
        for k in ("groups", "prompts_per_group", "question_tokens", "output_tokens"):
            _positive(k.replace("_", "-"), getattr(args, k), True)
        system = 2048 if args.system_tokens is None else args.system_tokens
        stages = _stages(args)
        if stages is None:
            n = args.requests or args.groups * args.prompts_per_group
            _positive("requests", n, True)
            arrivals = np.zeros(n)
        else:
            arrivals = G.poisson_arrivals(stages, args.seed)
        return G.shared_prefix_trace(args.groups, args.prompts_per_group, system,
                                     args.question_tokens, args.output_tokens, arrivals,
                                     block_tokens=args.block_tokens, cycle=not args.once,
                                     seed=args.seed)
    for k in ("sessions", "turns_mean", "turn_tokens", "output_tokens"):
        _positive(k.replace("_", "-"), getattr(args, k))
    pause = None
    if args.pause:
        from kvmath.tables.rows import resolve_pause
        row = resolve_pause(args.pause)
        pause = (lambda rng, m=row.median_s, s=row.sigma: rng.lognormal(math.log(m), s))
    elif args.pause_s is not None:
        pause = (lambda rng, v=args.pause_s: v)
    median, sigma = args.turn_tokens, args.turn_tokens_sigma
    turn = ((lambda rng: rng.lognormal(math.log(median), sigma)) if sigma > 0 else median)
    return G.sessions_trace(int(args.sessions), args.turns_mean, turn, args.output_tokens,
                            system_tokens=args.system_tokens or 0, turns_min=args.turns_min,
                            turns_max=args.turns_max, session_rate=args.session_rate,
                            pause=pause, block_tokens=args.block_tokens, seed=args.seed)


def run(argv, make=argparse.ArgumentParser):
    """Run ``kvmath trace generate``; returns the exit status."""
    args = parser(make).parse_args(argv)
    from kvmath.traces.generate import write_generic
    trace = generate(args)
    try:
        write_generic(trace, args.out)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write it ({exc.strerror or exc})") from None
    print(f"{args.out}: {trace.n_requests:,} requests over {trace.duration_s:,.0f} s, "
          f"{int(trace.prompt_tokens.sum()):,} prompt tokens in blocks of "
          f"{trace.block_tokens} (a generic trace)")
    return 0
