"""A trace as kvmath holds it: its requests' columns (:class:`RequestColumns`), with their block
accesses in memory (:class:`Trace`), with their hashes in a file on disk (:class:`TraceFile`), or
flat, as a fleet's node gets its share (:class:`NodeRequests`); the error a bad trace raises
(:class:`TraceError`); reading any of them a chunk of requests at a time (:func:`block_chunks`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvmath.tables.rows import DataError
from kvmath.traces.formats.mooncake import MOONCAKE_BLOCK_TOKENS

#: requests per chunk when block accesses are fetched from DuckDB or read from a file (bounds
#: numpy's working set)
CHUNK_REQUESTS = 100_000


class TraceError(DataError):
    """A trace that cannot be read: file, line (1 = first line; a Parquet file's row, with
    unit="row"), field and what was expected."""

    def __init__(self, path, line, field_name, message, unit="line"):
        self.path, self.row, self.field, self.message = str(path), line, field_name, message
        where = str(path)
        if line is not None:
            where += f", {unit} {line}"
        if field_name is not None:
            where += f", field '{field_name}'"
        ValueError.__init__(self, f"{where}: {message}")


@dataclass
class RequestColumns:
    """A trace's requests: per request (length n_requests) ``timestamp_s``, ``prompt_tokens``,
    ``output_tokens`` and ``n_blocks`` (hashes in the request before sampling)."""
    name: str
    timestamp_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    n_blocks: np.ndarray

    @property
    def n_requests(self):
        return len(self.timestamp_s)

    @property
    def duration_s(self):
        return float(self.timestamp_s[-1] - self.timestamp_s[0])


@dataclass
class Trace(RequestColumns):
    """Requests and their block accesses, head first within a request.

    Per request (length n_requests): ``timestamp_s``, ``prompt_tokens``, ``output_tokens``,
    ``n_blocks`` (hashes in the request before sampling). Per kept access: ``rid`` (request
    index), ``pos`` (block position in its request), ``hashes``. ``sample_rate`` < 1 means
    the accesses are a stratified SHARDS sample: blocks at positions below ``full_positions``
    all kept (weight 1), the others hash-sampled at sample_rate (weight 1 / sample_rate).
    """
    rid: np.ndarray
    pos: np.ndarray
    hashes: np.ndarray
    block_tokens: int
    sample_rate: float = 1.0
    full_positions: int = 0

    def weights(self):
        """Accesses each kept access stands for (1, or 1 / sample_rate in the sampled stratum)."""
        if self.sample_rate >= 1:
            return np.ones(len(self.hashes))
        return np.where(self.pos < self.full_positions, 1.0, 1.0 / self.sample_rate)

    def access_tokens(self):
        """Tokens each kept access covers (the last block of a prompt may be partial)."""
        left = self.prompt_tokens[self.rid] - self.pos.astype(np.int64) * self.block_tokens
        return np.clip(left, 0, self.block_tokens)


@dataclass
class TraceFile(RequestColumns):
    """A trace too large to hold its block accesses in memory
    (:func:`kvmath.traces.reading.stream`): its per-request columns as a :class:`Trace`'s (int32
    where they fit), its block hashes (head first, 8 bytes an access) in a flat file, read a
    chunk of requests at a time (:meth:`block_chunks`). Only what reads requests in order takes
    it: routing, the fleet's replay, the previous turns."""
    block_tokens: int
    hashes_path: str
    sample_rate: float = 1.0
    full_positions: int = 0

    @property
    def n_accesses(self):
        return int(np.sum(self.n_blocks, dtype=np.int64))

    def block_chunks(self, requests=CHUNK_REQUESTS):
        """(first request, end request, their hashes) in order, ``requests`` at a time, read
        from the file (not mapped: what has been read is not held)."""
        with open(self.hashes_path, "rb") as fh:
            for a in range(0, self.n_requests, requests):
                b = min(a + requests, self.n_requests)
                count = int(np.sum(self.n_blocks[a:b], dtype=np.int64))
                yield a, b, np.fromfile(fh, dtype=np.uint64, count=count)


@dataclass
class NodeRequests(RequestColumns):
    """Requests and their block hashes, head first and flat (no per-access request or position):
    what the replay reads, as a fleet's node gets its share of a routed trace. ``hashes`` may
    be the path of a flat uint64 file holding them (:meth:`loaded` reads it)."""
    hashes: np.ndarray | str
    block_tokens: int
    sample_rate: float = 1.0

    def loaded(self):
        """These requests with their hashes in memory."""
        if not isinstance(self.hashes, str):
            return self
        from dataclasses import replace
        return replace(self, hashes=np.fromfile(self.hashes, dtype=np.uint64))


def block_chunks(trace, requests=None):
    """(first request, end request, their block hashes head first) of a trace, a chunk of
    :data:`CHUNK_REQUESTS` requests at a time: the trace's own ``block_chunks`` (a trace
    streamed from disk), else slices of its hashes."""
    if hasattr(trace, "block_chunks"):
        yield from trace.block_chunks(requests or CHUNK_REQUESTS)
        return
    offsets = np.zeros(trace.n_requests + 1, np.int64)
    np.cumsum(trace.n_blocks, out=offsets[1:])
    step = requests or CHUNK_REQUESTS
    for a in range(0, trace.n_requests, step):
        b = min(a + step, trace.n_requests)
        yield a, b, trace.hashes[offsets[a]:offsets[b]]


def from_requests(requests, block_tokens=MOONCAKE_BLOCK_TOKENS, name="in-memory"):
    """A Trace from a list of (timestamp_s, prompt_tokens, [hashes]) (tests, examples)."""
    ts = np.array([r[0] for r in requests], dtype=float)
    prompt = np.array([r[1] for r in requests], dtype=np.int64)
    n = np.array([len(r[2]) for r in requests], dtype=np.int64)
    hashes = np.array([h for r in requests for h in r[2]], dtype=np.uint64)
    rid = np.repeat(np.arange(len(requests), dtype=np.int64), n)
    pos = np.array([j for r in requests for j in range(len(r[2]))], dtype=np.int32)
    return Trace(name=name, timestamp_s=ts, prompt_tokens=prompt,
                 output_tokens=np.zeros_like(prompt), n_blocks=n, rid=rid, pos=pos, hashes=hashes,
                 block_tokens=block_tokens)


def block_ids(hashes):
    """(ids, n): a dense id per access (int32 where they fit) for its block hash, and how many
    distinct blocks there are (one stable sort of the hashes; no inverse of np.unique, whose
    temporaries are several access-length int64 arrays)."""
    n = len(hashes)
    small = np.int32 if n < 2 ** 31 - 1 else np.int64
    by = np.argsort(hashes, kind="stable")
    sorted_h = hashes[by]
    new = np.empty(n, dtype=small)
    if n:
        new[0] = 0
        np.not_equal(sorted_h[1:], sorted_h[:-1], out=new[1:], casting="unsafe")
    del sorted_h
    np.cumsum(new, out=new)
    ids = np.empty(n, dtype=small)
    ids[by] = new
    return ids, (int(new[-1]) + 1 if n else 0)
