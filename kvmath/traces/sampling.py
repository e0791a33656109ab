"""Stratified SHARDS sampling of a trace's block accesses: which accesses a sample keeps
(:func:`shards_keep`), a sample of a trace in memory (:func:`sample`), and one gathered as a
file is read (:class:`Sample`, what :func:`kvmath.traces.reading.load` holds at a rate below 1).
"""
from __future__ import annotations

import numpy as np

from kvmath.traces.trace import Trace

#: SHARDS spatial sampling (Waldspurger et al., "Efficient MRC Construction with SHARDS",
#: FAST'15): a block is kept iff mix(hash) < R * 2^32, where mix folds the 64-bit hash to 32
#: bits, adds a seed and applies MurmurHash3's 32-bit finaliser (fmix32). Stratified here: the
#: blocks at the first positions of a request are kept at rate 1 (see :func:`shards_keep`)
SHARDS_MODULUS = 2 ** 32
SHARDS_SEED = 0x9E3779B9


def mix(h):
    """The sampling hash of 64-bit block hashes, as uint32 (arithmetic wraps mod 2^32)."""
    h = np.asarray(h, dtype=np.uint64)
    x = h.astype(np.uint32)
    x ^= (h >> np.uint64(32)).astype(np.uint32)
    x += np.uint32(SHARDS_SEED)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def shards_rate(sample_rate):
    """The rate a SHARDS sample at ``sample_rate`` really keeps: a block is kept iff the 32-bit
    mix of its hash is below floor(R x 2^32), so the rate is that over 2^32 (0 below 2^-32:
    then no hash samples in)."""
    return int(sample_rate * SHARDS_MODULUS) / SHARDS_MODULUS


def shards_keep(hashes, sample_rate, pos=None, full_positions=0):
    """Which accesses a stratified SHARDS sample keeps: every block at a position below
    full_positions of its request (a hash names a whole prefix, so a block's position is fixed
    and the strata partition the blocks), and the others iff their hash samples in at rate R.

    The first blocks of requests are few and very hot (one shared head per conversation or
    system prompt); a 1% hash sample keeps or misses them whole, which moves the curve by
    their share of accesses. Sampling them at rate 1 removes that error for little cost.
    """
    keep = mix(hashes) < np.uint64(int(sample_rate * SHARDS_MODULUS))
    if pos is not None and full_positions > 0:
        keep |= np.asarray(pos) < full_positions
    return keep


def sample(trace, sample_rate, full_positions=1):
    """A stratified SHARDS sample of an in-memory trace (the same blocks as
    :func:`kvmath.traces.reading.load`)."""
    keep = shards_keep(trace.hashes, sample_rate, trace.pos, full_positions)
    return Trace(name=trace.name, timestamp_s=trace.timestamp_s,
                 prompt_tokens=trace.prompt_tokens, output_tokens=trace.output_tokens,
                 n_blocks=trace.n_blocks, rid=trace.rid[keep], pos=trace.pos[keep],
                 hashes=trace.hashes[keep], block_tokens=trace.block_tokens,
                 sample_rate=shards_rate(sample_rate), full_positions=full_positions)


class Sample:
    """The accesses a stratified SHARDS sample keeps (:func:`shards_keep`), gathered a chunk of
    requests at a time, in order: what :func:`kvmath.traces.reading.load` holds at a rate below
    1 instead of every access."""

    def __init__(self, rate, full_positions):
        self.threshold = np.uint32(int(rate * SHARDS_MODULUS))
        self.full_positions = full_positions
        self.parts, self.requests = [], 0

    def __call__(self, h, n_blocks):
        """A chunk of requests from the compiled reader: their hashes, head first, and blocks."""
        n = len(n_blocks)
        r = np.repeat(np.arange(self.requests, self.requests + n, dtype=np.int64), n_blocks)
        starts = np.zeros(n, np.int64)
        np.cumsum(n_blocks[:-1], out=starts[1:])
        p = (np.arange(len(h), dtype=np.int64) - starts[r - self.requests]).astype(np.int32)
        self.requests += n
        self.add(h, r, p, mix(h))

    def add(self, h, r, p, mixed):
        keep = (mixed < self.threshold) | (p < self.full_positions)
        self.parts.append((h[keep], r[keep], p[keep]))

    def arrays(self):
        """(hashes, rid, pos) of the kept accesses."""
        if not self.parts:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int32)
        return tuple(np.concatenate([part[k] for part in self.parts]) for k in range(3))
