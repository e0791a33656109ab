"""The batched driver copy's per-copy cost and rate, fitted on measured batch rates
(``transfer_curves.csv``, vLLM PR 42212's table of one cuMemcpyBatchAsync call by page size and
descriptor count N on an H100), and the copy kernel's assumed rate that follows from vLLM's
threshold (``copy_paths.csv``; ``scripts/fit_copy_paths.py`` writes them, a test checks them).

A copy of s bytes in one batched call costs t = t_copy + s / B (kvmath.derive.kv.bandwidth_at_size);
the copy engine runs pages under 28 KiB ("the DMA small-page cliff") at a rate of their own, so
each class of copies has its own (t_copy, B): pages under 28 KiB both, pages from 28 KiB the
per-copy cost alone at the link's measured asymptote. The nominal is fitted on the points of
N >= 50,000 descriptors (a long prefix: a 32K-token Llama-3.1-8B load is 65,536 of them); the
band's ends on the N = 10,000 column and on the single fastest point. Least squares on
log(predicted/measured). The held-apart check is PR 48434's solo loads (validation.csv).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares

from kvmath.tables.rows import bundled, transfer_curves

#: the link the measured curves are of, and the curves by descriptor count
LINK = "pcie-gen5-x16"
CURVES = {10000: "h100-batched-h2d-n10000", 50000: "h100-batched-h2d-n50000",
          100000: "h100-batched-h2d-n100000"}
#: where the copy engine's small-page cliff ends (the PR's table: flat to 24 KiB, the ceiling
#: from 28 KiB; vLLM's THRESHOLD_BYTES is the same 28 KiB)
CLIFF_BYTES = 28672
#: vLLM issue 57555's A30 table: driver time / Triton time at 16 KiB, N = 1,024 (the lowest of
#: 3.24 to 3.73 over N = 1,024 to 4,096): the kernel's low end is this times the batched rate
A30_RATIO_16K = 3.24
#: vLLM PR 48434's microbenchmark (H100 PCIe Gen5): 5,153 us to submit 8,192 descriptors of
#: 8 KiB, the small class's slow end per copy
SUBMIT_PER_COPY_S = 5153e-6 / 8192


def _points(ns, small):
    pts = []
    for n in ns:
        for p in transfer_curves()[CURVES[n]]:
            if (p.transfer_bytes < CLIFF_BYTES) == small:
                pts.append((p.transfer_bytes, p.bandwidth_Bps, n))
    return pts


def _fit_small(pts, base):
    def resid(x):
        return [math.log(s / (x[0] * 1e-6 + s / (x[1] * base)) / r) for s, r, _ in pts]
    res = least_squares(resid, [0.5, 0.15], bounds=([0.0, 1e-3], [50.0, 1.0]))
    return float(res.x[0]) * 1e-6, float(res.x[1]), float(np.exp(np.abs(res.fun)).max())


def _fit_large(pts, base):
    def resid(x):
        return [math.log(s / (x[0] * 1e-6 + s / base) / r) for s, r, _ in pts]
    res = least_squares(resid, [0.2], bounds=([0.0], [50.0]))
    return float(res.x[0]) * 1e-6, float(np.exp(np.abs(res.fun)).max())


def fit():
    """{"small": {...}, "large": {...}, "kernel": {...}}: per_copy_s, rate_fraction and their band
    ends for the link's batched copies under and from CLIFF_BYTES, the copy kernel's fractions,
    and each fit's worst |predicted/measured| ratio ("worst")."""
    link = bundled().links[LINK]
    base = link.bandwidth_Bps * link.efficiency
    small = _fit_small(_points((50000, 100000), True), base)
    # the N = 10,000 column: its 24 KiB point is already past the cliff at that N
    fast_small = _fit_small([p for p in _points((10000,), True) if p[0] < 24576], base)
    large = _fit_large(_points((50000, 100000), False), base)
    slow_large = _fit_large(_points((10000,), False), base)
    fast_large = min([s / r - s / base for s, r, _ in _points((50000, 100000), False)])
    at_cliff = [p[1] for p in _points((10000, 50000, 100000), False) if p[0] == CLIFF_BYTES]
    nominal_cliff = CLIFF_BYTES / (large[0] + CLIFF_BYTES / base)
    small16 = [p[1] for p in _points((100000,), True) if p[0] == 16384][0]
    return {
        "small": {"per_copy_s": small[0], "rate_fraction": small[1], "worst": small[2],
                  "per_copy_fast_s": fast_small[0], "per_copy_slow_s": SUBMIT_PER_COPY_S},
        "large": {"per_copy_s": large[0], "worst": large[1], "per_copy_slow_s": slow_large[0],
                  "per_copy_fast_s": fast_large},
        "kernel": {"rate_fraction": nominal_cliff / base, "rate_fraction_high": max(at_cliff) / base,
                   "rate_fraction_low": A30_RATIO_16K * small16 / base},
    }
