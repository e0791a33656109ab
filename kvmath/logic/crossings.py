"""The crossings: the prefix lengths where the time to first token with the prefix reloaded
equals the time cold, found on a log grid by sign changes and refined by geometric bisection.
"""
from __future__ import annotations

import math

from kvmath.logic.constants import MIN_PREFIX_TOKENS
from kvmath.logic.prefill import time_step
from kvmath.logic.rules import sign
from kvmath.logic.runtime import formula, memo, vmap

#: the crossings' search: sign changes on a log grid of this many lengths, each bracket then
#: halved this many times (in log space: to machine precision)
CROSSING_POINTS = 1024
CROSSING_ITERATIONS = 48


def numeric_crossings(advantage, t_max, t_min=MIN_PREFIX_TOKENS, points=CROSSING_POINTS,
                      iterations=CROSSING_ITERATIONS):
    """Roots of a smooth advantage(T) (s) in [t_min, t_max], by sign changes on a log grid
    refined by geometric bisection (advantage is evaluated over lists of lengths: vmap)."""
    ratio = t_max / t_min
    grid = [t_min * ratio ** (i / (points - 1)) for i in range(points)]
    grid[0] = t_min
    grid[points - 1] = t_max
    vals = vmap(advantage, grid)
    lo = []
    hi = []
    f_lo = []
    for i in range(points - 1):
        if sign(vals[i]) * sign(vals[i + 1]) < 0:
            lo.append(grid[i])
            hi.append(grid[i + 1])
            f_lo.append(vals[i])
    if len(lo) == 0:
        return []
    for _ in range(iterations):
        mid = [math.sqrt(a * b) for a, b in zip(lo, hi)]
        f_mid = vmap(advantage, mid)
        for j in range(len(lo)):
            if sign(f_mid[j]) == sign(f_lo[j]):
                lo[j] = mid[j]
                f_lo[j] = f_mid[j]
            else:
                hi[j] = mid[j]
    return [math.sqrt(a * b) for a, b in zip(lo, hi)]


def ttft_crossings(s, layout, values, rec_fn, t_max):
    """The prefix lengths where the TTFT with the prefix loaded equals the TTFT cold (a list,
    tokens), each length timing its own engine step with the prefill model ``rec_fn`` ([name,
    f(T)]: kvmath.logic.prefill.recompute_fn); remembered by its inputs (the scenario's model,
    GPU and values, the layout, the prefill model: not its prompt length)."""
    rec = rec_fn[1]

    def advantage(t):
        at = time_step(dict(values), rec, t)
        return formula("derive.ttft_hit", at) - formula("derive.ttft_cold", at)

    def solve():
        return numeric_crossings(advantage, t_max)
    return memo([s.model, s.gpu, layout, t_max, values, rec_fn[0]], solve)
