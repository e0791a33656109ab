"""A fast path for reading large JSONL traces (:func:`kvmath.traces.reading.stream`): the file is
decompressed a few megabytes at a time and each line parsed by a compiled loop, which takes only
a narrow, canonical form of the formats' records (one object per line; only the format's fields,
each once; integers without sign, fraction or exponent; hashes as arrays of such integers,
distinct within a request;
timestamps as non-negative decimals whose value one IEEE operation gives correctly rounded, as
DuckDB's parser gives it: see :func:`_number`).
Anything else, a file that
is not canonical, a problem any check finds (a count of hashes that does not fit the prompt, a
repeated hash, a timestamp going backwards, a truncated gzip file, a line longer than
:data:`~kvmath.traces.checking.MAX_LINE_BYTES`) or a file without requests,
makes it give up (``None``): the caller then reads the file with DuckDB (:class:`~kvmath.traces.
reading._Parsed`), whose checks name the file, line and field. So the fast path never accepts a
file the DuckDB reader would refuse, and gives the values it would give.

Why: DuckDB's strict reading of JSONL (the records read as objects, each field's JSON type
checked, the hashes cast) ran at about 36,000 requests a second on this 2-core machine, about
280 s for 10 million requests; this reads them in a small fraction of that (README, Benchmark).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

# field kinds
NUMBER, INTEGER, HASHES = 0, 1, 2
_POW10 = np.array([10.0 ** k for k in range(23)])  # exact doubles
_TWO53 = np.uint64(2 ** 53)
_U64MAX_DIV10 = np.uint64((2 ** 64 - 1) // 10)
_U64MAX_MOD10 = np.uint64((2 ** 64 - 1) % 10)
_I64MAX = np.uint64(2 ** 63 - 1)


@njit(cache=True, nogil=True, inline="always")
def _ws(buf, a, q):  # pragma: no cover (compiled)
    while a < q and (buf[a] == 32 or buf[a] == 9 or buf[a] == 13):
        a += 1
    return a


@njit(cache=True, nogil=True, inline="always")
def _end_of_value(buf, a, q):  # pragma: no cover (compiled)
    """A value's last character is followed by whitespace, ',', '}' or ']' (or the line end)."""
    return a >= q or buf[a] in (32, 9, 13, 44, 125, 93)


@njit(cache=True, nogil=True)
def _uint(buf, a, q, out):  # pragma: no cover (compiled)
    """A JSON integer without sign at a (0 or no leading zero), at most 2**64 - 1: its end, the
    value in out[0]; -1 if none."""
    if a >= q or buf[a] < 48 or buf[a] > 57:
        return -1
    if buf[a] == 48:
        out[0] = np.uint64(0)
        a += 1
        return a if _end_of_value(buf, a, q) else -1
    v = np.uint64(0)
    while a < q and 48 <= buf[a] <= 57:
        d = np.uint64(buf[a] - 48)
        if v > _U64MAX_DIV10 or (v == _U64MAX_DIV10 and d > _U64MAX_MOD10):
            return -1
        v = v * np.uint64(10) + d
        a += 1
    out[0] = v
    return a if _end_of_value(buf, a, q) else -1


@njit(cache=True, nogil=True)
def _number(buf, a, q, out):  # pragma: no cover (compiled)
    """A non-negative JSON number at a whose value a double holds exactly after one rounding
    (Clinger's fast path: at most 2**53 as an integer of its significant digits, times or over
    a power of ten up to 1e22, both exact, so one IEEE operation rounds it correctly): its end,
    the value in out[0]; -1 otherwise (a negative number, too many digits, too large an
    exponent: left to DuckDB)."""
    w = np.uint64(0)
    digits = 0
    if a >= q or buf[a] < 48 or buf[a] > 57:
        return -1
    if buf[a] == 48:
        a += 1
        if a < q and 48 <= buf[a] <= 57:
            return -1  # a leading zero
    else:
        while a < q and 48 <= buf[a] <= 57:
            if digits >= 19:
                return -1
            w = w * np.uint64(10) + np.uint64(buf[a] - 48)
            if w > np.uint64(0):
                digits += 1
            a += 1
    e10 = 0
    if a < q and buf[a] == 46:  # fraction
        a += 1
        if a >= q or buf[a] < 48 or buf[a] > 57:
            return -1
        while a < q and 48 <= buf[a] <= 57:
            if digits >= 19:
                return -1
            w = w * np.uint64(10) + np.uint64(buf[a] - 48)
            if w > np.uint64(0):
                digits += 1
            e10 -= 1
            a += 1
    if a < q and (buf[a] == 101 or buf[a] == 69):  # exponent
        a += 1
        sign = 1
        if a < q and (buf[a] == 43 or buf[a] == 45):
            sign = -1 if buf[a] == 45 else 1
            a += 1
        if a >= q or buf[a] < 48 or buf[a] > 57:
            return -1
        x = 0
        while a < q and 48 <= buf[a] <= 57:
            if x > 1000:
                return -1
            x = x * 10 + (buf[a] - 48)
            a += 1
        e10 += sign * x
    if not _end_of_value(buf, a, q):
        return -1
    if w == np.uint64(0):
        out[0] = 0.0
        return a
    if w > _TWO53 or e10 > 22 or e10 < -22:
        return -1
    if e10 >= 0:
        out[0] = np.float64(w) * _POW10[e10]
    else:
        out[0] = np.float64(w) / _POW10[-e10]
    return a


@njit(cache=True, nogil=True)
def _distinct(h):  # pragma: no cover (compiled)
    n = len(h)
    if n <= 32:
        for i in range(n):
            for j in range(i + 1, n):
                if h[i] == h[j]:
                    return False
        return True
    s = np.sort(h)
    for i in range(1, n):
        if s[i] == s[i - 1]:
            return False
    return True


class Fields(NamedTuple):
    """A format's fields as the parser matches them (:func:`fields`), one row each."""
    keys: np.ndarray  #: the field's name, bytes (uint8, [field, byte], zero-padded)
    klen: np.ndarray  #: the name's length (int64)
    kinds: np.ndarray  #: NUMBER, INTEGER or HASHES (int64)
    required: np.ndarray  #: whether every record holds it (bool)
    column: np.ndarray  #: an integer field's column in ``Parsed.ints`` (-1: not an integer)


class Parsed(NamedTuple):
    """What the parser writes, per request (row i)."""
    nums: np.ndarray  #: its number field (float64)
    ints: np.ndarray  #: its integer fields ([i, column], int64; -1: absent or null)
    nblk: np.ndarray  #: its hashes' count (int64)
    hashes: np.ndarray  #: every request's hashes, appended in order (uint64)
    counts: np.ndarray  #: [requests, hashes] so far (int64)


@njit(cache=True, nogil=True)
def _parse(buf, start, end, final, maxline, fields, out):  # pragma: no cover (compiled)
    """Parse the complete lines of buf[start:end] (and the last, unterminated one if final), each
    at most maxline bytes, matching the format's :class:`Fields`, into :class:`Parsed`.
    Returns (where it stopped, status): 0 every complete line read, 1 the output arrays are full
    (resume there), 2 not canonical (give up)."""
    keys, klen, kinds, required, column = fields
    nums, ints, nblk, hashes, counts = out
    K = len(klen)
    seen = np.zeros(K, np.bool_)
    u = np.zeros(1, np.uint64)
    f = np.zeros(1, np.float64)
    p = start
    while p < end:
        q = p
        while q < end and buf[q] != 10:
            q += 1
        if q == end and not final:
            return p, 0
        if q - p > maxline:  # longer than a trace line may be: DuckDB's reader names it
            return p, 2
        a = _ws(buf, p, q)
        if a == q:  # a blank line is no record
            p = q + 1
            continue
        i = counts[0]
        h0 = counts[1]
        if i >= len(nums) or h0 + (q - a) // 2 + 1 > len(hashes):
            return p, 1
        if buf[a] != 123:  # {
            return p, 2
        a = _ws(buf, a + 1, q)
        for k in range(K):
            seen[k] = False
        for c in range(ints.shape[1]):
            ints[i, c] = -1
        nh = 0
        while True:
            if a >= q or buf[a] != 34:  # "
                return p, 2
            k0 = a + 1
            k1 = k0
            while k1 < q and buf[k1] != 34:
                if buf[k1] == 92:  # an escape
                    return p, 2
                k1 += 1
            if k1 >= q:
                return p, 2
            key = -1
            for k in range(K):
                if klen[k] == k1 - k0:
                    same = True
                    for t in range(klen[k]):
                        if keys[k, t] != buf[k0 + t]:
                            same = False
                            break
                    if same:
                        key = k
                        break
            if key < 0 or seen[key]:  # a field the format does not name, or twice
                return p, 2
            seen[key] = True
            a = _ws(buf, k1 + 1, q)
            if a >= q or buf[a] != 58:  # :
                return p, 2
            a = _ws(buf, a + 1, q)
            if a >= q:
                return p, 2
            kind = kinds[key]
            if (not required[key] and q - a >= 4 and buf[a] == 110 and buf[a + 1] == 117
                    and buf[a + 2] == 108 and buf[a + 3] == 108):  # null
                a += 4
                if not _end_of_value(buf, a, q):
                    return p, 2
            elif kind == NUMBER:
                a = _number(buf, a, q, f)
                if a < 0:
                    return p, 2
                nums[i] = f[0]
            elif kind == INTEGER:
                a = _uint(buf, a, q, u)
                if a < 0 or u[0] > _I64MAX:
                    return p, 2
                ints[i, column[key]] = np.int64(u[0])
            elif kind == HASHES:
                if buf[a] != 91:  # [
                    return p, 2
                a = _ws(buf, a + 1, q)
                if a < q and buf[a] == 93:
                    a += 1
                else:
                    while True:
                        a = _uint(buf, a, q, u)
                        if a < 0:
                            return p, 2
                        hashes[h0 + nh] = u[0]
                        nh += 1
                        a = _ws(buf, a, q)
                        if a < q and buf[a] == 44:
                            a = _ws(buf, a + 1, q)
                        elif a < q and buf[a] == 93:
                            a += 1
                            break
                        else:
                            return p, 2
                if not _end_of_value(buf, a, q):
                    return p, 2
                if not _distinct(hashes[h0:h0 + nh]):  # a hash names a whole prefix
                    return p, 2
            else:
                return p, 2
            a = _ws(buf, a, q)
            if a < q and buf[a] == 44:
                a = _ws(buf, a + 1, q)
                continue
            if a < q and buf[a] == 125:  # }
                a = _ws(buf, a + 1, q)
                break
            return p, 2
        if a != q:
            return p, 2
        for k in range(K):
            if required[k] and not seen[k]:
                return p, 2
        nblk[i] = nh
        counts[0] = i + 1
        counts[1] = h0 + nh
        p = q + 1
    return end, 0


_KINDS = {"number": NUMBER, "integer": INTEGER, "hashes": HASHES}


def fields(fmt):
    """(field, kind, required, integer column) of each field a format
    (:class:`~kvmath.traces.formats.format.Format`) names, required first, as the format
    declares them: its integer fields are columns 0, 1, ... in that order."""
    out, column = [], 0
    for name in fmt.names:
        kind = _KINDS[{**fmt.fields, **fmt.optional}[name][1]]
        out.append((name, kind, name in fmt.fields, column if kind == INTEGER else -1))
        column += kind == INTEGER
    return tuple(out)


#: decompressed bytes parsed at once (the chunks the caller hands :func:`read`)
CHUNK_BYTES = 16 << 20


class GiveUp(Exception):
    """Raised by the data a caller hands :func:`read` when the file cannot be read whole (a
    gzip file cut short): the fast path gives up, and the caller's other reader names it."""


def read(chunks, fmt, sink, max_line):
    """Per-request columns {ts_s, prompt, output, n_blocks, block_tokens} (int32 where they fit)
    of a JSONL trace of a format (:class:`~kvmath.traces.formats.format.Format`) in canonical
    form, from its bytes ``chunks`` (an iterable of the file's
    data, decompressed, a bounded chunk at a time; it may raise :class:`GiveUp`), its hashes
    handed a chunk of requests at a time, in order, to ``sink(hashes, n_blocks)`` (the caller
    writes them to a file, or keeps a sample); or None (not canonical, a line longer than
    ``max_line`` bytes, or a check failed: the caller drops what the sink was given and reads
    the file with DuckDB)."""
    spec = fields(fmt)
    col = {name: c for name, _, _, c in spec}
    K = len(spec)
    width = max(len(name) for name, *_ in spec)
    keys = np.zeros((K, width), np.uint8)
    klen = np.array([len(name) for name, *_ in spec], np.int64)
    for k, (name, *_) in enumerate(spec):
        keys[k, :len(name)] = np.frombuffer(name.encode(), np.uint8)
    kinds = np.array([x[1] for x in spec], np.int64)
    required = np.array([x[2] for x in spec], np.bool_)
    column = np.array([x[3] for x in spec], np.int64)
    n_int = int(column.max()) + 1
    matched = Fields(keys, klen, kinds, required, column)
    cols = _Columns()
    carry = b""
    last_ts, bt_seen = -np.inf, None
    try:
        chunks = iter(chunks)
        while True:
            data = next(chunks, None)
            final = data is None
            buf = carry + (data or b"")
            if not buf and final:
                break
            arr = np.frombuffer(buf, np.uint8)
            lines = int(np.count_nonzero(arr == 10)) + 1
            nums = np.zeros(lines)
            ints = np.full((lines, n_int), -1, np.int64)
            nblk = np.zeros(lines, np.int64)
            hashes = np.empty(len(buf) // 2 + 1, np.uint64)
            counts = np.zeros(2, np.int64)
            pos, status = _parse(arr, 0, len(arr), final, max_line, matched,
                                 Parsed(nums, ints, nblk, hashes, counts))
            if status != 0:
                return None
            n, nh = int(counts[0]), int(counts[1])
            ts, nb, h = nums[:n], nblk[:n], hashes[:nh]
            if fmt.timestamp_per_s != 1:
                ts = ts / fmt.timestamp_per_s
            prompt = ints[:n, col[fmt.prompt]]
            bt = (np.full(n, fmt.block_tokens, np.int64) if isinstance(fmt.block_tokens, int)
                  else ints[:n, col[fmt.block_tokens]])
            if fmt.output is None:
                output = np.zeros(n, np.int64)
            elif fmt.output in fmt.optional:
                output = np.maximum(ints[:n, col[fmt.output]], 0)  # absent or null: none
            else:
                output = ints[:n, col[fmt.output]]
            if n:
                if bt_seen is None:
                    bt_seen = int(bt[0])
                ok = (bool((prompt > 0).all()) and bool((bt == bt_seen).all()) and bt_seen > 0
                      and bool(((nb == prompt // bt_seen)
                                | (nb == -(-prompt // bt_seen))).all())
                      and ts[0] >= last_ts and bool((np.diff(ts) >= 0).all()))
                if not ok:
                    return None
                last_ts = float(ts[-1])
                sink(h, nb)
                cols.add(ts, prompt, output, nb)
            carry = buf[pos:] if not final else b""
            if len(carry) > max_line:  # a line too long: bounded here, named by DuckDB's
                return None
            if final:
                break
    except GiveUp:  # a gzip file that is not whole: DuckDB's reader names it
        return None
    if cols.n == 0:
        return None
    return {**cols.arrays(), "block_tokens": bt_seen}


class _Columns:
    """Per-request columns, a chunk at a time (int32 while they fit), joined at the end one
    column at a time."""

    def __init__(self):
        self.n = 0
        self.parts = {"ts_s": [], "prompt": [], "output": [], "n_blocks": []}

    def add(self, ts, prompt, output, nb):
        self.n += len(ts)
        for key, x in (("ts_s", ts), ("prompt", prompt), ("output", output), ("n_blocks", nb)):
            if key != "ts_s":
                x = x.astype(np.int32) if len(x) == 0 or int(x.max()) < 2 ** 31 else x
            self.parts[key].append(np.array(x))

    def arrays(self):
        out = {}
        wide = any(p.dtype == np.int64 for key in ("prompt", "output", "n_blocks")
                   for p in self.parts[key])
        for key in list(self.parts):
            parts = self.parts.pop(key)
            dtype = np.float64 if key == "ts_s" else (np.int64 if wide else np.int32)
            out[key] = np.concatenate(parts).astype(dtype, copy=False)
            del parts
        return out
