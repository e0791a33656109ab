"""A trace file's bytes, lines and records, and the checks that name a bad one's line (a Parquet
file's row) and field: what :mod:`kvmath.traces.reading` falls back on when DuckDB's reading
finds something wrong, and what tells a file's format (:func:`detect`). Every check is written
once, over what a format declares (:mod:`kvmath.traces.formats`)."""
from __future__ import annotations

import json
import math
import os
import re

import numpy as np

from kvmath.traces import formats
from kvmath.traces.trace import TraceError

GZIP_MAGIC = b"\x1f\x8b"
#: the longest line a JSONL trace may hold, bytes (DuckDB's default largest JSON object): about
#: 760,000 hashes of 20 digits, the prompt of the longest context window a bundled model takes
#: (Llama 4 Scout's 10,485,760 tokens) in vLLM's default 16-token blocks, with room to spare
#: (tests/traces/test_hostile_traces.py holds it to the models). A longer line is refused by number,
#: so no reader ever holds an unbounded line (issue 20: a 5 GB file without a newline took
#: 10.6 GB, a gzip bomb 4 GB)
MAX_LINE_BYTES = 16 << 20
#: bytes read, or decompressed, at a time while a file is checked or searched line by line
READ_BYTES = 1 << 20
#: bytes JSON counts as whitespace: a line of only these is blank (no record)
_WS = np.zeros(256, dtype=bool)
_WS[[9, 10, 13, 32]] = True


#: the characters DuckDB's readers take as a glob in a path (``*``, ``?``, ``[``): each is
#: matched literally when written as a one-character class (``[*]``, ``[?]``, ``[[]``)
_GLOB = re.compile(r"([*?\[])")


def sql_path(path):
    """``path`` as a DuckDB reader's SQL string literal that names this one file and no other:
    absolute (a leading ``~`` or a URL scheme is not expanded), its glob characters matched
    literally (DuckDB expands ``*``, ``?`` and ``[...]``: ``h[1].parquet`` would read
    ``h1.parquet``, ``j*.jsonl`` every file it matches), its quotes doubled. Every reader is
    also given ``hive_partitioning=false``: a directory ``x=1`` in the path is not a column."""
    literal = _GLOB.sub(r"[\1]", os.path.abspath(os.fspath(path)))
    return "'" + literal.replace("'", "''") + "'"


def is_gzip(path):
    """Whether a file is gzip data, by its first two bytes (whatever its name says)."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def file_data(path, gz, progress, chunk=READ_BYTES):
    """A file's bytes a chunk at a time, decompressed if gz: at most ``chunk`` bytes of output a
    step, so a gzip bomb inflates no further than one chunk ahead of its reader. A gzip file
    must decompress whole: corrupt data, a file cut before a member's end marker, or bytes
    after the last member raise TraceError saying how far the data got
    (``progress["lines"]``: the lines the caller has counted); concatenated members are valid
    gzip and read on."""
    import zlib
    with open(path, "rb") as fh:
        if not gz:
            while True:
                block = fh.read(chunk)
                if not block:
                    return
                yield block
        size = os.fstat(fh.fileno()).st_size
        d, taken, member_end, pending, more = zlib.decompressobj(wbits=31), 0, 0, b"", False
        while True:
            if not pending and not more:
                pending = fh.read(max(chunk // 4, 1 << 16))  # about a chunk once inflated
                if not pending:
                    break
                taken += len(pending)
            if d.eof:  # a member ended: another must follow
                if not pending.startswith(GZIP_MAGIC[:len(pending)]):
                    raise TraceError(path, None, None, f"{size - member_end:,} bytes after the "
                                     f"gzip data (which ends at byte {member_end:,}, "
                                     f"{progress['lines']:,} lines): not a gzip member")
                d = zlib.decompressobj(wbits=31)
            try:
                out = d.decompress(pending, chunk)
            except zlib.error as exc:
                raise TraceError(path, None, None, f"corrupt gzip data after "
                                 f"{taken - len(pending):,} compressed bytes and "
                                 f"{progress['lines']:,} lines ({exc})") from None
            if out:
                yield out
            if d.eof:
                pending, more = d.unused_data, False
                member_end = taken - len(pending)
            else:  # input left over, or output held back for want of room
                pending, more = d.unconsumed_tail, len(out) == chunk
        if not d.eof:
            raise TraceError(path, None, None, f"truncated gzip file: the compressed data ends "
                             f"after {taken:,} bytes and {progress['lines']:,} complete lines, "
                             "before its end marker")


def _too_long(path, line, done, gz):
    return TraceError(path, line, None, f"longer than {MAX_LINE_BYTES:,} bytes, the most one "
                      f"trace record may take (the read stopped after {done:,} "
                      f"{'decompressed ' if gz else ''}bytes)")


def check_lines(path, chunk=READ_BYTES):
    """Raise TraceError unless a JSONL trace reads whole: a gzip file decompresses whole
    (:func:`file_data`), and no line is longer than :data:`MAX_LINE_BYTES` (the first that is
    named, with how far the read got). One pass, a chunk at a time: bounded memory."""
    gz = is_gzip(path)
    progress, line, done = {"lines": 0}, 0, 0
    for data in file_data(path, gz, progress, chunk):
        n = data.count(b"\n")
        if n:  # the lines between the first and last newline are shorter than a chunk
            if line + data.find(b"\n") > MAX_LINE_BYTES:
                raise _too_long(path, progress["lines"] + 1, done + data.find(b"\n"), gz)
            line = len(data) - data.rfind(b"\n") - 1
        else:
            line += len(data)
        progress["lines"] += n
        done += len(data)
        if line > MAX_LINE_BYTES:
            raise _too_long(path, progress["lines"] + 1, done, gz)


def lines(path):
    """(number, bytes) of each non-blank line of a JSONL file (1 = the first line), gzip or
    not: read a chunk at a time, a line longer than :data:`MAX_LINE_BYTES` refused by number
    (memory stays bounded), and blank lines found by numpy, a chunk at once."""
    gz = is_gzip(path)
    progress, parts, size, blank, done = {"lines": 0}, [], 0, True, 0
    for data in file_data(path, gz, progress):
        arr = np.frombuffer(data, np.uint8)
        nl = np.flatnonzero(arr == 10)
        if not len(nl):
            size += len(data)
            if size > MAX_LINE_BYTES:
                raise _too_long(path, progress["lines"] + 1, done + len(data), gz)
            parts.append(data)
            blank = blank and bool(_WS[arr].all())
            done += len(data)
            continue
        first = int(nl[0])
        if size + first > MAX_LINE_BYTES:
            raise _too_long(path, progress["lines"] + 1, done + first, gz)
        if not (blank and _WS[arr[:first]].all()):  # the line the last chunk left open
            yield progress["lines"] + 1, b"".join(parts) + data[:first]
        nonws = np.zeros(len(arr) + 1, np.int32)
        np.cumsum(~_WS[arr], out=nonws[1:])
        starts, ends = nl[:-1] + 1, nl[1:]
        for k in np.flatnonzero(nonws[ends] > nonws[starts]):
            yield progress["lines"] + 2 + int(k), data[starts[k]:ends[k]]
        del nonws
        progress["lines"] += len(nl)
        tail = int(nl[-1]) + 1
        parts, size = [data[tail:]], len(data) - tail
        blank = bool(_WS[arr[tail:]].all())
        done += len(data)
    if parts and not blank:
        yield progress["lines"] + 1, b"".join(parts)


class _Repeated(ValueError):
    def __init__(self, key):
        self.key = key


def _no_repeats(pairs):
    """A JSON object's pairs as a dict; a key given twice is an error (json.loads would keep
    the last value and DuckDB the first, so neither may be used)."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise _Repeated(key)
        obj[key] = value
    return obj


def record(path, i, line):
    """Line i of a JSONL trace parsed as one JSON object, or TraceError naming the line (and
    the field given twice)."""
    try:
        obj = json.loads(line, object_pairs_hook=_no_repeats)
    except UnicodeDecodeError:
        raise TraceError(path, i, None, "not UTF-8 text (expected one JSON object per "
                         "line)") from None
    except _Repeated as exc:
        raise TraceError(path, i, exc.key, "given twice in one record (expected each field "
                         "once)") from None
    except RecursionError:  # arrays or objects nested thousands deep: no trace field is
        raise TraceError(path, i, None, "JSON nested too deep (expected one flat object per "
                         "line: numbers and a list of hashes)") from None
    except ValueError:
        raise TraceError(path, i, None, "malformed JSON (expected one object per line)") \
            from None
    if not isinstance(obj, dict):
        raise TraceError(path, i, None, "expected a JSON object")
    return obj


def is_parquet(path):
    """Whether a trace file is read as Parquet (by its name), not as JSONL."""
    return path.suffix == ".parquet"


def detect(path):
    """(format, first line number): the format of a JSONL file's first non-blank line, the
    first in the registry's order whose marker it holds (:func:`kvmath.traces.formats.detect`);
    a Parquet file's format, and None."""
    if is_parquet(path):
        return formats.parquet(), None
    try:
        for i, line in lines(path):
            obj = record(path, i, line)
            fmt = formats.detect(obj)
            if fmt is not None:
                return fmt, i
            raise TraceError(path, i, None, formats.unknown())
    except OSError as exc:
        raise TraceError(path, None, None, f"cannot read file ({exc})") from None
    raise TraceError(path, None, None, "empty trace (expected at least one request)")


def _check_value(kind, value):
    """None if value fits kind, else what was expected."""
    if kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value) and value >= 0
        return None if ok else "a non-negative number"
    if kind == "integer":  # a 64-bit signed integer, as the readers hold it
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 63
        return None if ok else "a non-negative integer below 2^63"
    ok = isinstance(value, list) and all(isinstance(h, int) and not isinstance(h, bool)
                                         and 0 <= h < 2 ** 64 for h in value)
    return None if ok else "a list of non-negative 64-bit integer hashes"


def _shown(value):
    """A field's value as an error message quotes it: JSON, at most 60 characters; a number
    that is not finite is said in words (no nan or inf is printed)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "a number that is not finite"
    try:
        return json.dumps(value, allow_nan=False)[:60]
    except ValueError:  # a list holding a number that is not finite
        return "a list holding a number that is not finite"


def record_problem(fmt, obj, prev_ts, block_tokens_seen):
    """(field, message) of the first problem with one parsed record (a dict) of a format, or
    None."""
    fields, optional = fmt.fields, fmt.optional
    refused = sorted(set(obj) & set(fmt.refused))
    if refused:
        return refused[0], fmt.refused[refused[0]]
    unknown = sorted(set(obj) - set(fields) - set(optional))
    if unknown:  # every field a reader is given is used or refused (issue 20)
        return unknown[0], ("unknown field; expected only "
                            + ", ".join(list(fields) + list(optional)))
    for name, (_, kind) in fields.items():
        if name not in obj:
            return name, "missing field"
        expected = _check_value(kind, obj[name])
        if expected:
            return name, f"expected {expected}, got {_shown(obj[name])}"
    for name, (_, kind) in optional.items():
        if obj.get(name) is not None:
            expected = _check_value(kind, obj[name])
            if expected:
                return name, f"expected {expected}, got {_shown(obj[name])}"
    ts_f, prompt_f, hash_f = fmt.timestamp, fmt.prompt, fmt.hashes
    bt = fmt.block_tokens_of(obj)
    if bt <= 0:
        return fmt.block_field, "expected a positive integer"
    if block_tokens_seen is not None and bt != block_tokens_seen:
        return fmt.block_field, (f"expected the same block size on every record "
                                f"({block_tokens_seen}), got {bt}")
    if obj[prompt_f] <= 0:
        return prompt_f, "expected a positive number of prompt tokens"
    n, p = len(obj[hash_f]), obj[prompt_f]
    if n not in (p // bt, -(-p // bt)):
        return hash_f, (f"expected {-(-p // bt)} (or {p // bt}) block hashes for {p} tokens "
                        f"in blocks of {bt}, got {n}")
    if len(set(obj[hash_f])) != n:
        return hash_f, "expected distinct hashes within a request (a hash names a whole prefix)"
    ts = obj[ts_f] / fmt.timestamp_per_s
    if prev_ts is not None and ts < prev_ts:
        return ts_f, "timestamp goes backwards (expected requests in arrival order)"
    return None


def locate_jsonl(path, fmt):
    """Stream a JSONL file of a format and raise TraceError at its first bad line (memory
    bounded by :data:`MAX_LINE_BYTES`)."""
    prev_ts, bt_seen, any_row = None, None, False
    for i, line in lines(path):
        obj = record(path, i, line)
        problem = record_problem(fmt, obj, prev_ts, bt_seen)
        if problem:
            raise TraceError(path, i, *problem)
        any_row = True
        prev_ts, bt_seen = fmt.seconds(obj[fmt.timestamp]), fmt.block_tokens_of(obj)
    if not any_row:
        raise TraceError(path, None, None, "empty trace (expected at least one request)")


def parquet_columns(con, path, fmt):
    """The fields a Parquet trace holds, each of a type its format documents
    (``fmt.parquet_types``); a column of another name or type is refused (it was cast, or
    dropped without a word)."""
    types = fmt.parquet_types
    cols = {name: typ for name, typ, *_ in con.execute(
        f"DESCRIBE SELECT * FROM read_parquet({sql_path(path)}, hive_partitioning=false)"
    ).fetchall()}
    for name, typ in cols.items():
        if name in fmt.refused:
            raise TraceError(path, None, name, fmt.refused[name])
        if name not in types:
            raise TraceError(path, None, name, "unknown column; expected only "
                             + ", ".join(types))
        base = typ.split("(")[0] if not typ.endswith("[]") else typ
        if base not in types[name]:
            raise TraceError(path, None, name, f"expected a column of type "
                             f"{' or '.join(types[name][:3])}, got {typ}")
    for name in fmt.fields:
        if name not in cols:
            raise TraceError(path, None, name, "missing column")
    return set(cols)


def locate_parquet(con, path, fmt, batch=10_000):
    """Raise TraceError at the first bad row of a Parquet trace of a format, naming its row
    (1 = first) and field: its rows read in order, a batch at a time (bounded memory), each
    checked as a JSONL record is (:func:`record_problem`: types, values, the block size of
    every row, hashes that fit the prompt and are distinct, timestamps in order)."""
    import decimal
    cur = con.execute(f"SELECT * FROM read_parquet({sql_path(path)}, hive_partitioning=false)")
    names = [d[0] for d in cur.description]
    prev_ts, bt_seen, i = None, None, 0
    while True:
        chunk = cur.fetchmany(batch)
        if not chunk:
            return
        for values in chunk:
            i += 1
            obj = {k: float(v) if isinstance(v, decimal.Decimal) else v
                   for k, v in zip(names, values)}
            for name in fmt.optional:
                if obj.get(name, 0) is None:
                    del obj[name]  # null: none given, as the reader takes it (no output)
            problem = record_problem(fmt, obj, prev_ts, bt_seen)
            if problem:
                raise TraceError(path, i, *problem, unit="row")
            prev_ts, bt_seen = fmt.seconds(obj[fmt.timestamp]), fmt.block_tokens_of(obj)
