"""Reading request traces of prefix-block hashes, and what they say about reuse.

Two formats are read, gzipped or not:

* **Mooncake JSONL** (the FAST'25 release, bundled as ``conversation`` and ``synthetic``):
  ``timestamp`` (ms), ``input_length``, ``output_length`` (tokens), ``hash_ids`` (hashes of the
  prompt's 512-token prefix blocks, head first).
* **Generic** (JSONL or Parquet, one request per line/row): ``timestamp_s`` (s),
  ``prompt_tokens``, ``block_hashes`` (non-negative 64-bit integers, head first; a block's hash
  must identify its whole prefix, as vLLM's and SGLang's chained block hashes do),
  ``block_tokens`` (tokens per block, the same on every row), optional ``output_tokens``. A
  ``session_id`` is refused, not dropped: kvmath matches a turn to the one it continues by its
  prefix hashes (:func:`continuations`), so a session id would change no answer.

A trace needs ``ceil`` or ``floor`` of prompt_tokens / block_tokens hashes (the last, partial
block hashed or not), distinct within a request, and non-decreasing timestamps. Fields have the
JSON (or Parquet) types documented here, never cast (a string timestamp, a fractional token
count or a boolean hash is an error), a field given twice in a record is an error, and a field
or column the format does not name is refused. A line holds at most :data:`MAX_LINE_BYTES`, and
gzip is told by its bytes (not the file's name) and inflated a bounded chunk at a time, so no
reader's memory grows with a line. :func:`load` parses a file once, by DuckDB, into a table;
per-request columns, then block accesses in chunks of requests, reach numpy, where the accesses
are checked. A sample (stratified SHARDS, :func:`shards_keep`) is taken as the file is read, so
only the kept accesses are held; :func:`stream` keeps the accesses in a file on disk. A bad file
raises :class:`TraceError` naming the file, line (a Parquet file's row) and field. Blank lines
in JSONL are not records and are passed over, as JSONL readers do.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvmath.tables.rows import DataError, data_path

MOONCAKE_BLOCK_TOKENS = 512
#: bundled traces by short name
BUNDLED = {"conversation": "conversation_trace.jsonl.gz", "synthetic": "synthetic_trace.jsonl.gz"}
MOONCAKE_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"
MOONCAKE_SOURCE = f"https://github.com/kvcache-ai/Mooncake/tree/{MOONCAKE_COMMIT}/FAST25-release/traces"
#: SHARDS spatial sampling (Waldspurger et al., "Efficient MRC Construction with SHARDS",
#: FAST'15): a block is kept iff mix(hash) < R * 2^32, where mix folds the 64-bit hash to 32
#: bits, adds a seed and applies MurmurHash3's 32-bit finaliser (fmix32). Stratified here: the
#: blocks at the first positions of a request are kept at rate 1 (see :func:`shards_keep`)
SHARDS_MODULUS = 2 ** 32
SHARDS_SEED = 0x9E3779B9


def _mix(h):
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


_FORMATS = {
    "mooncake": {"timestamp": ("DOUBLE", "number"), "input_length": ("BIGINT", "integer"),
                 "output_length": ("BIGINT", "integer"), "hash_ids": ("UBIGINT[]", "hashes")},
    "generic": {"timestamp_s": ("DOUBLE", "number"), "prompt_tokens": ("BIGINT", "integer"),
                "block_hashes": ("UBIGINT[]", "hashes"), "block_tokens": ("BIGINT", "integer")},
}
_OPTIONAL = {"mooncake": {}, "generic": {"output_tokens": ("BIGINT", "integer")}}
#: fields a trace may hold that kvmath refuses by name, and why: every field a reader is given
#: is used or refused (issue 20), never dropped without a word
_REFUSED = {"session_id": ("not used: kvmath matches a turn to the one it continues by its "
                           "prefix hashes, not by session, so a session id would change no "
                           "answer (remove the field)")}


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
class Requests:
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
class Trace(Requests):
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


# ------------------------------------------------------------------ reading
def resolve_path(name_or_path):
    """A bundled trace's path by short name, or the given path."""
    if name_or_path in BUNDLED:
        return data_path(f"traces/{BUNDLED[name_or_path]}")
    path = Path(name_or_path)
    if not path.is_file():
        raise TraceError(path, None, None, "no such trace file; bundled traces: "
                         + ", ".join(sorted(BUNDLED)))
    return path


GZIP_MAGIC = b"\x1f\x8b"
#: the longest line a JSONL trace may hold, bytes (DuckDB's default largest JSON object): about
#: 760,000 hashes of 20 digits, the prompt of the longest context window a bundled model takes
#: (Llama 4 Scout's 10,485,760 tokens) in vLLM's default 16-token blocks, with room to spare
#: (tests/test_trace_hardening.py holds it to the models). A longer line is refused by number,
#: so no reader ever holds an unbounded line (issue 20: a 5 GB file without a newline took
#: 10.6 GB, a gzip bomb 4 GB)
MAX_LINE_BYTES = 16 << 20
#: bytes read, or decompressed, at a time while a file is checked or searched line by line
READ_BYTES = 1 << 20
#: bytes JSON counts as whitespace: a line of only these is blank (no record)
_WS = np.zeros(256, dtype=bool)
_WS[[9, 10, 13, 32]] = True


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


def _canonical_chunks(path):
    """The file's data for the compiled JSONL reader (:func:`kvmath.traces.jsonl.read`), its
    chunks at most ``CHUNK_BYTES`` decompressed (a gzip bomb inflates no further); a file that
    is not whole gives it up (DuckDB's reader, and :func:`check_lines`, then name it)."""
    from kvmath.traces import jsonl
    try:
        yield from file_data(path, is_gzip(path), {"lines": 0}, jsonl.CHUNK_BYTES)
    except TraceError:
        raise jsonl.GiveUp from None


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


def _lines(path):
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


def _record(path, i, line):
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
    except ValueError:
        raise TraceError(path, i, None, "malformed JSON (expected one object per line)") \
            from None
    if not isinstance(obj, dict):
        raise TraceError(path, i, None, "expected a JSON object")
    return obj


def _detect(path):
    """(format, first line number) from the first non-blank line of a JSONL file."""
    if path.suffix == ".parquet":
        return "parquet", None
    try:
        for i, line in _lines(path):
            obj = _record(path, i, line)
            if "hash_ids" in obj:
                return "mooncake", i
            if "block_hashes" in obj:
                return "generic", i
            raise TraceError(path, i, None, "unknown format: expected Mooncake fields "
                             "(timestamp, input_length, output_length, hash_ids) or "
                             "generic ones (timestamp_s, prompt_tokens, block_hashes, "
                             "block_tokens)")
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


def _record_problem(fmt, obj, prev_ts, block_tokens_seen):
    """(field, message) of the first problem with one parsed record, or None."""
    fields, optional = _FORMATS[fmt], _OPTIONAL[fmt]
    refused = sorted(set(obj) & set(_REFUSED))
    if refused:
        return refused[0], _REFUSED[refused[0]]
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
    ts_f, prompt_f, hash_f = (("timestamp", "input_length", "hash_ids") if fmt == "mooncake"
                              else ("timestamp_s", "prompt_tokens", "block_hashes"))
    bt = MOONCAKE_BLOCK_TOKENS if fmt == "mooncake" else obj["block_tokens"]
    if bt <= 0:
        return "block_tokens", "expected a positive integer"
    if block_tokens_seen is not None and bt != block_tokens_seen:
        return "block_tokens", (f"expected the same block size on every record "
                                f"({block_tokens_seen}), got {bt}")
    if obj[prompt_f] <= 0:
        return prompt_f, "expected a positive number of prompt tokens"
    n, p = len(obj[hash_f]), obj[prompt_f]
    if n not in (p // bt, -(-p // bt)):
        return hash_f, (f"expected {-(-p // bt)} (or {p // bt}) block hashes for {p} tokens "
                        f"in blocks of {bt}, got {n}")
    if len(set(obj[hash_f])) != n:
        return hash_f, "expected distinct hashes within a request (a hash names a whole prefix)"
    ts = obj[ts_f] / (1000.0 if fmt == "mooncake" else 1.0)
    if prev_ts is not None and ts < prev_ts:
        return ts_f, "timestamp goes backwards (expected requests in arrival order)"
    return None


def _locate_jsonl(path, fmt):
    """Stream a JSONL file and raise TraceError at its first bad line (memory bounded by
    :data:`MAX_LINE_BYTES`)."""
    prev_ts, bt_seen, any_row = None, None, False
    for i, line in _lines(path):
        obj = _record(path, i, line)
        problem = _record_problem(fmt, obj, prev_ts, bt_seen)
        if problem:
            raise TraceError(path, i, *problem)
        any_row = True
        prev_ts = obj["timestamp"] / 1000.0 if fmt == "mooncake" else obj["timestamp_s"]
        bt_seen = MOONCAKE_BLOCK_TOKENS if fmt == "mooncake" else obj["block_tokens"]
    if not any_row:
        raise TraceError(path, None, None, "empty trace (expected at least one request)")


#: Parquet column types each generic field may have (DuckDB's names): a string timestamp or a
#: float token count is refused, not cast
_PARQUET_TYPES = {"timestamp_s": ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "UBIGINT", "UINTEGER",
                                  "SMALLINT", "USMALLINT", "TINYINT", "UTINYINT", "DECIMAL"),
                  "prompt_tokens": ("BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT",
                                    "USMALLINT", "TINYINT", "UTINYINT"),
                  "block_tokens": ("BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT",
                                   "USMALLINT", "TINYINT", "UTINYINT"),
                  "output_tokens": ("BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT",
                                    "USMALLINT", "TINYINT", "UTINYINT"),
                  "block_hashes": ("UBIGINT[]", "BIGINT[]", "UINTEGER[]", "INTEGER[]")}


def _parquet_columns(con, path):
    """The generic fields a Parquet trace holds, each of a type the format documents; a column
    of another name or type is refused (it was cast, or dropped without a word)."""
    p = str(path).replace("'", "''")
    cols = {name: typ for name, typ, *_ in
            con.execute(f"DESCRIBE SELECT * FROM read_parquet('{p}')").fetchall()}
    for name, typ in cols.items():
        if name in _REFUSED:
            raise TraceError(path, None, name, _REFUSED[name])
        if name not in _PARQUET_TYPES:
            raise TraceError(path, None, name, "unknown column; expected only "
                             + ", ".join(_PARQUET_TYPES))
        base = typ.split("(")[0] if not typ.endswith("[]") else typ
        if base not in _PARQUET_TYPES[name]:
            raise TraceError(path, None, name, f"expected a column of type "
                             f"{' or '.join(_PARQUET_TYPES[name][:3])}, got {typ}")
    for name in _FORMATS["generic"]:
        if name not in cols:
            raise TraceError(path, None, name, "missing column")
    return set(cols)


def _source_sql(path, fmt, columns=(), gz=False):
    """A SELECT normalising the file to ts_s, prompt, output, hashes, bt (columns: a Parquet
    trace's own, from :func:`_parquet_columns`) and, for JSONL, ``strict_bad``: whether a record
    holds a field the format does not name or a field of another JSON type than the format
    documents (DuckDB's typed reader would cast "100" to a number, 1024.5 to an integer and
    true to 1; nonzero sends the file to the line-by-line check, which names the line and
    field). JSONL is read as objects and each record's fields extracted in one parse; gz: the
    file is gzip (by its first bytes, whatever its name: DuckDB goes by the name)."""
    p = str(path).replace("'", "''")
    if fmt == "parquet":
        output = "coalesce(output_tokens, 0)" if "output_tokens" in columns else "0"
        # TRY_CAST: a value the cast cannot hold (a negative hash in a BIGINT[] column, a
        # UBIGINT past 2^63) is NULL, a bad row that _locate_parquet names, not a conversion
        # error naming no row
        return (f"SELECT TRY_CAST(timestamp_s AS DOUBLE) AS ts_s, "
                f"TRY_CAST(prompt_tokens AS BIGINT) AS prompt, "
                f"TRY_CAST({output} AS BIGINT) AS output, "
                f"TRY_CAST(block_hashes AS UBIGINT[]) AS hashes, "
                f"TRY_CAST(block_tokens AS BIGINT) AS bt, false AS strict_bad "
                f"FROM read_parquet('{p}')")
    fields, optional = _FORMATS[fmt], _OPTIONAL[fmt]
    names = list(fields) + list(optional)
    at = {name: f"v[{i + 1}]" for i, name in enumerate(names)}
    known = ", ".join(f"'{k}'" for k in names)
    checks = [f"list_bool_and(list_transform(json_keys(json), lambda k: k IN ({known})))",
              # a field given twice: DuckDB would read the first, json.loads the last
              "len(json_keys(json)) = len(list_distinct(json_keys(json)))"]
    for name, (_, kind) in {**fields, **optional}.items():
        if kind == "hashes":  # an array of integers (or empty): its elements' one JSON type
            ok = (f"json_type({at[name]}) = 'ARRAY' AND json_structure({at[name]}) IN "
                  "('[\"UBIGINT\"]', '[\"BIGINT\"]', '[\"NULL\"]')")
        else:
            ok = f"json_type({at[name]}) IN ({', '.join(repr(t) for t in _JSON_TYPES[kind])})"
        if name in optional:
            ok = f"({at[name]} IS NULL OR json_type({at[name]}) = 'NULL' OR {ok})"
        checks.append(f"coalesce({ok}, false)")
    strict = f"NOT ({' AND '.join(checks)})"
    paths = ", ".join(f"'$.{n}'" for n in names)
    src = (f"(SELECT json, json_extract(json, [{paths}]) AS v "
           f"FROM read_ndjson_objects('{p}', compression='{'gzip' if gz else 'none'}', "
           f"maximum_object_size={MAX_LINE_BYTES + 2}))")  # a line and its end (check_lines)
    if fmt == "mooncake":
        return (f"SELECT TRY_CAST({at['timestamp']} AS DOUBLE) / 1000.0 AS ts_s, "
                f"TRY_CAST({at['input_length']} AS BIGINT) AS prompt, "
                f"TRY_CAST({at['output_length']} AS BIGINT) AS output, "
                f"TRY_CAST({at['hash_ids']} AS UBIGINT[]) AS hashes, "
                f"{MOONCAKE_BLOCK_TOKENS}::BIGINT AS bt, {strict} AS strict_bad FROM {src}")
    return (f"SELECT TRY_CAST({at['timestamp_s']} AS DOUBLE) AS ts_s, "
            f"TRY_CAST({at['prompt_tokens']} AS BIGINT) AS prompt, "
            f"coalesce(TRY_CAST({at['output_tokens']} AS BIGINT), 0) AS output, "
            f"TRY_CAST({at['block_hashes']} AS UBIGINT[]) AS hashes, "
            f"TRY_CAST({at['block_tokens']} AS BIGINT) AS bt, {strict} AS strict_bad FROM {src}")


#: JSON types DuckDB reports for a field of each kind (json_type)
_JSON_TYPES = {"number": ("UBIGINT", "BIGINT", "DOUBLE"), "integer": ("UBIGINT", "BIGINT")}


_BAD_ROW = ("ts_s IS NULL OR prompt IS NULL OR hashes IS NULL OR bt IS NULL OR ts_s < 0 "
            "OR output IS NULL OR NOT isfinite(ts_s) OR prompt <= 0 OR bt <= 0 OR output < 0 "
            "OR list_count(hashes) != len(hashes) "
            "OR (len(hashes) != prompt // bt AND len(hashes) != (prompt + bt - 1) // bt) "
            "OR len(list_distinct(hashes)) != len(hashes)")


def _locate_parquet(con, path, batch=10_000):
    """Raise TraceError at the first bad row of a Parquet trace, naming its row (1 = first) and
    field: its rows read in order, a batch at a time (bounded memory), each checked as a JSONL
    record is (:func:`_record_problem`: types, values, the block size of every row, hashes
    that fit the prompt and are distinct, timestamps in order)."""
    import decimal
    p = str(path).replace("'", "''")
    cur = con.execute(f"SELECT * FROM read_parquet('{p}')")
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
            if obj.get("output_tokens", 0) is None:
                del obj["output_tokens"]  # null: no output, as the reader takes it
            problem = _record_problem("generic", obj, prev_ts, bt_seen)
            if problem:
                raise TraceError(path, i, *problem, unit="row")
            prev_ts, bt_seen = obj["timestamp_s"], obj["block_tokens"]


def _first_repeat(h, rid, mixed):
    """The first request (index) repeating a hash, or None. Keys (request, 32-bit mix of the
    hash) are sorted; only if two keys collide are the full hashes compared."""
    keys = (rid - rid[0]).astype(np.uint64) << np.uint64(32) | mixed.astype(np.uint64)
    keys.sort()
    if not (keys[1:] == keys[:-1]).any():
        return None
    o = np.lexsort((h, rid))  # a collision of the mix or a real repeat: check exactly
    dup = (h[o][1:] == h[o][:-1]) & (rid[o][1:] == rid[o][:-1])
    return int(rid[o][1:][dup].min()) if dup.any() else None


def _interrupt(exc):
    """Raise KeyboardInterrupt if a DuckDB error is an interrupt (SIGINT while a query ran), so
    the CLI ends as on any interrupt ("kvmath: interrupted", status 130) and no handler below
    takes it for a bad file. DuckDB raises its InterruptException, or a plain RuntimeError
    "Query interrupted" from a statement it was running (issue 20: a traceback)."""
    import duckdb
    if isinstance(exc, duckdb.InterruptException) or (
            type(exc) is RuntimeError and str(exc).strip() == "Query interrupted"):
        raise KeyboardInterrupt from None


#: requests per chunk when block accesses are fetched from DuckDB (bounds numpy's working set)
CHUNK_REQUESTS = 100_000
#: DuckDB's memory limit while it parses a trace into a database file on disk
#: (:func:`stream`): past it, DuckDB spills to that directory
STREAM_MEMORY_LIMIT = "384MB"


class _Parsed:
    """A trace file parsed once by DuckDB into a table ``t`` (in memory, or in a database file
    in ``workdir``) and checked: per-request columns in numpy (``ts``, ``prompt``, ``output``,
    ``n_blocks``: int64, or int32 with ``compact``), block hashes fetched a chunk of requests at
    a time (:meth:`hashes`). A JSONL file is checked whole (:func:`check_lines`: its gzip data
    whole, no line too long) in a thread while DuckDB parses it. Bad input raises TraceError
    naming the file, line and field."""

    def __init__(self, name_or_path, workdir=None, compact=False):
        import threading

        import duckdb
        self.path = path = resolve_path(name_or_path)
        gz_error = []  # what check_lines found: it explains whatever else went wrong

        def check():
            try:
                check_lines(path)
            except TraceError as exc:
                gz_error.append(exc)
        checker = (threading.Thread(target=check, daemon=True) if path.suffix != ".parquet"
                   else None)
        if checker:
            checker.start()
        try:
            self.fmt, _ = _detect(path)
        except TraceError:
            if checker:
                checker.join()
            if gz_error:
                raise gz_error[0] from None
            raise
        self.con = con = duckdb.connect(str(Path(workdir) / "trace.duckdb") if workdir else ":memory:")
        try:
            try:  # a progress bar on stdout would corrupt --json output
                con.execute("SET enable_progress_bar = false")
            except duckdb.Error as exc:
                _interrupt(exc)
                pass  # in Jupyter without ipywidgets DuckDB shows none and refuses the setting
            if workdir:
                con.execute(f"SET memory_limit = '{STREAM_MEMORY_LIMIT}'")
                con.execute(f"SET temp_directory = '{str(workdir).replace(chr(39), chr(39) * 2)}'")
            self._parse(duckdb, compact, checker, gz_error)
        except BaseException as exc:
            if checker:
                checker.join()
            self.close()
            _interrupt(exc)
            if gz_error:  # a truncated file or a line too long explains whatever else failed
                raise gz_error[0] from None
            raise

    def _parse(self, duckdb, compact, checker, gz_error):
        path, fmt, con = self.path, self.fmt, self.con
        try:
            columns = _parquet_columns(con, path) if fmt == "parquet" else ()
        except duckdb.Error as exc:
            _interrupt(exc)
            raise TraceError(path, None, None, f"not a readable trace "
                             f"({str(exc).splitlines()[0]})") from None
        src = _source_sql(path, fmt, columns, is_gzip(path))
        cheap_bad = _BAD_ROW.replace(" OR len(list_distinct(hashes)) != len(hashes)", "")
        try:
            con.execute(f"CREATE TABLE t AS SELECT ts_s, prompt, output, hashes, bt, "
                        f"coalesce({cheap_bad}, true) OR strict_bad AS bad FROM ({src})")
            n_req, any_bad, n_bt, bt = con.execute(
                "SELECT count(*), coalesce(bool_or(bad), false), count(DISTINCT bt), min(bt) "
                "FROM t").fetchone()
            bad = any_bad or n_bt > 1
        except duckdb.Error as exc:
            _interrupt(exc)
            if fmt == "parquet":
                _locate_parquet(con, path)
                raise TraceError(path, None, None, f"not a readable trace "
                                 f"({str(exc).splitlines()[0]})") from None
            bad = True
        if checker:
            checker.join()
            if gz_error:
                raise gz_error[0]
        if bad:
            if fmt == "parquet":
                _locate_parquet(con, path)
                raise TraceError(path, None, None, "not readable as a trace (the reader "
                                 "failed but no bad row was found)")
            _locate_jsonl(path, fmt)
            raise TraceError(path, None, None, "not readable as a trace (the reader failed "
                             "but no bad line was found)")
        if n_req == 0:
            raise TraceError(path, None, None, "empty trace (expected at least one request)")
        self.block_tokens = int(bt)
        small = np.int32 if compact else np.int64
        ts = np.empty(n_req, np.float64)
        prompt, output, n_blocks = (np.empty(n_req, np.int64) for _ in range(3))
        step = 1_000_000  # rows of per-request columns fetched at once
        for a in range(0, n_req, step):
            b = min(a + step, n_req)
            per = con.execute(f"SELECT ts_s, prompt, output, len(hashes) AS n FROM t "
                              f"WHERE rowid >= {a} AND rowid < {b}").fetchnumpy()
            ts[a:b], prompt[a:b] = per["ts_s"], per["prompt"]
            output[a:b], n_blocks[a:b] = per["output"], per["n"]
            del per
        back = np.flatnonzero(np.diff(ts) < 0)
        if len(back):
            if fmt == "parquet":
                raise TraceError(path, int(back[0]) + 2, "timestamp_s",
                                 "timestamp goes backwards (expected requests in arrival order)",
                                 unit="row")
            _locate_jsonl(path, fmt)
        if compact and max(int(prompt.max()), int(output.max()), int(n_blocks.max())) >= 2 ** 31:
            small = np.int64
        self.ts, self.prompt = ts, prompt.astype(small, copy=False)
        self.output, self.n_blocks = output.astype(small, copy=False), \
            n_blocks.astype(small, copy=False)
        self.offsets = np.zeros(n_req + 1, np.int64)
        np.cumsum(self.n_blocks, out=self.offsets[1:])

    @property
    def n_requests(self):
        return len(self.ts)

    def hashes(self, a, b):
        """(hashes, request of each, position in it) of requests a..b, head first, each request's
        hashes checked distinct."""
        import duckdb
        path, fmt = self.path, self.fmt
        offsets, n_blocks = self.offsets, self.n_blocks
        try:
            h = np.asarray(self.con.execute(f"SELECT unnest(hashes) AS h FROM t WHERE rowid >= {a} "
                                            f"AND rowid < {b}").fetchnumpy()["h"], dtype=np.uint64)
        except (duckdb.Error, RuntimeError) as exc:
            _interrupt(exc)
            raise TraceError(path, None, None, f"not a readable trace "
                             f"({str(exc).splitlines()[0]})") from None
        if len(h) != offsets[b] - offsets[a]:
            raise TraceError(path, None, None, "block hashes read back out of step with "
                             "their requests")
        r = np.repeat(np.arange(a, b, dtype=np.int64), n_blocks[a:b])
        p = (np.arange(offsets[a], offsets[b], dtype=np.int64) - offsets[r]).astype(np.int32)
        mixed = _mix(h)
        if len(h):
            rep = _first_repeat(h, r, mixed)
            if rep is not None:
                if fmt == "parquet":
                    raise TraceError(path, rep + 1, "block_hashes", "expected distinct "
                                     "hashes within a request (a hash names a whole prefix)",
                                     unit="row")
                _locate_jsonl(path, fmt)
                raise TraceError(path, None, "hash_ids", "a request repeats a block hash "
                                 "(expected distinct hashes within a request)")
        return h, r, p, mixed

    def close(self):
        if getattr(self, "con", None) is not None:
            self.con.close()
            self.con = None


def shards_rate(sample_rate):
    """The rate a SHARDS sample at ``sample_rate`` really keeps: a block is kept iff the 32-bit
    mix of its hash is below floor(R x 2^32), so the rate is that over 2^32 (0 below 2^-32:
    then no hash samples in)."""
    return int(sample_rate * SHARDS_MODULUS) / SHARDS_MODULUS


def load(name_or_path, sample_rate=None, full_positions=1):
    """Read a trace (bundled name or path) into a :class:`Trace`.

    The file is parsed once, into a DuckDB table; block accesses reach numpy in chunks of
    :data:`CHUNK_REQUESTS` requests. sample_rate R in (0, 1): a *stratified* SHARDS sample
    (see :func:`shards_keep`): the blocks at positions below full_positions of their request
    are all kept, the others only if their hash samples in; the sample is taken as the file is
    read (:func:`_load_sampled`), so memory holds the kept accesses, never every access.
    """
    if sample_rate is not None and not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate}")
    if sample_rate is not None and sample_rate < 1:
        return _load_sampled(name_or_path, shards_rate(sample_rate), full_positions)
    parsed = _Parsed(name_or_path)
    try:
        n_req = parsed.n_requests
        hashes, rid, pos = [], [], []
        for a in range(0, n_req, CHUNK_REQUESTS):
            h, r, p, _ = parsed.hashes(a, min(a + CHUNK_REQUESTS, n_req))
            hashes.append(h), rid.append(r), pos.append(p)
        hashes, rid, pos = np.concatenate(hashes), np.concatenate(rid), np.concatenate(pos)
    finally:
        parsed.close()
    return Trace(name=str(name_or_path), timestamp_s=parsed.ts,
                 prompt_tokens=parsed.prompt,
                 output_tokens=parsed.output, n_blocks=parsed.n_blocks,
                 rid=rid, pos=pos, hashes=hashes, block_tokens=parsed.block_tokens)


class _Sample:
    """The accesses a stratified SHARDS sample keeps (:func:`shards_keep`), gathered a chunk of
    requests at a time, in order: what :func:`_load_sampled` holds instead of every access."""

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
        self.add(h, r, p, _mix(h))

    def add(self, h, r, p, mixed):
        keep = (mixed < self.threshold) | (p < self.full_positions)
        self.parts.append((h[keep], r[keep], p[keep]))

    def arrays(self):
        """(hashes, rid, pos) of the kept accesses."""
        if not self.parts:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int32)
        return tuple(np.concatenate([part[k] for part in self.parts]) for k in range(3))


def _load_sampled(name_or_path, rate, full_positions):
    """:func:`load` at a SHARDS rate below 1, sampling as the file is read: JSONL in the
    compiled reader's canonical form through it (:func:`kvmath.traces.jsonl.read`), any other
    file (and one it gives up on) parsed by DuckDB into a database file in a temporary
    directory (its memory limited to :data:`STREAM_MEMORY_LIMIT`, as :func:`stream`'s) and read
    a chunk of requests at a time. Memory: the per-request columns and the kept accesses (issue
    20: the whole trace had been loaded before it was sampled). The same Trace as sampling the
    whole one (tests hold it to :func:`sample`)."""
    import tempfile
    path = resolve_path(name_or_path)
    sample, cols = _Sample(rate, full_positions), None
    try:
        fmt, _ = _detect(path)
    except TraceError:
        fmt = None  # DuckDB's reading below raises what is wrong, in its order
    if fmt in ("mooncake", "generic"):
        from kvmath.traces import jsonl
        cols = jsonl.read(_canonical_chunks(path), fmt, sample, MAX_LINE_BYTES)
        if cols is None:
            sample = _Sample(rate, full_positions)  # what it was given before it gave up
    if cols is None:
        with tempfile.TemporaryDirectory(prefix="kvmath-trace-") as work:
            parsed = _Parsed(name_or_path, workdir=work)
            try:
                for a in range(0, parsed.n_requests, CHUNK_REQUESTS):
                    sample.add(*parsed.hashes(a, min(a + CHUNK_REQUESTS, parsed.n_requests)))
            finally:
                parsed.close()
        cols = {"ts_s": parsed.ts, "prompt": parsed.prompt, "output": parsed.output,
                "n_blocks": parsed.n_blocks, "block_tokens": parsed.block_tokens}
    hashes, rid, pos = sample.arrays()
    wide = {k: np.asarray(cols[k], dtype=np.int64) for k in ("prompt", "output", "n_blocks")}
    return Trace(name=str(name_or_path), timestamp_s=cols["ts_s"], prompt_tokens=wide["prompt"],
                 output_tokens=wide["output"], n_blocks=wide["n_blocks"], rid=rid, pos=pos,
                 hashes=hashes, block_tokens=int(cols["block_tokens"]), sample_rate=rate,
                 full_positions=full_positions)


@dataclass
class TraceFile(Requests):
    """A trace too large to hold its block accesses in memory (:func:`stream`): its per-request
    columns as a :class:`Trace`'s (int32 where they fit), its block hashes (head first, 8 bytes
    an access) in a flat file, read a chunk of requests at a time (:meth:`block_chunks`). Only
    what reads requests in order takes it: routing, the fleet's replay, the previous turns."""
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
class Requests:
    """Requests and their block hashes, head first and flat (no per-access request or position):
    what the replay reads, as a fleet's node gets its share of a routed trace. ``hashes`` may
    be the path of a flat uint64 file holding them (:meth:`loaded` reads it)."""
    name: str
    timestamp_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    n_blocks: np.ndarray
    hashes: np.ndarray | str
    block_tokens: int
    sample_rate: float = 1.0

    @property
    def n_requests(self):
        return len(self.timestamp_s)

    @property
    def duration_s(self):
        return float(self.timestamp_s[-1] - self.timestamp_s[0])

    def loaded(self):
        """These requests with their hashes in memory."""
        if not isinstance(self.hashes, str):
            return self
        from dataclasses import replace
        return replace(self, hashes=np.fromfile(self.hashes, dtype=np.uint64))


def stream(name_or_path, workdir):
    """Read a trace (bundled name or path) as a :class:`TraceFile` in ``workdir`` (a directory
    the caller removes): the per-request columns in numpy (int32 where they fit), the block
    hashes checked a chunk of requests at a time and written to a flat file there. Memory: the
    per-request columns (about 20 bytes a request) and a chunk.

    A JSONL file in the canonical form :mod:`kvmath.traces.jsonl` reads (one object per line,
    as Mooncake's traces and ``json.dumps`` write them) is parsed by its compiled loop; any
    other file, and any file that loop gives up on, by DuckDB into a database file in
    ``workdir`` (its memory limited to :data:`STREAM_MEMORY_LIMIT`), with :func:`load`'s checks
    and errors. Both give the same columns and hashes (tests hold them to :func:`load`)."""
    workdir = Path(workdir)
    path = resolve_path(name_or_path)
    out = workdir / "hashes.u64"
    try:
        fmt, _ = _detect(path)
    except TraceError:
        fmt = None  # DuckDB's reading below raises what is wrong, in its order
    if fmt in ("mooncake", "generic"):
        from kvmath.traces import jsonl
        with open(out, "wb") as fh:
            cols = jsonl.read(_canonical_chunks(path), fmt, lambda h, nb: h.tofile(fh),
                              MAX_LINE_BYTES)
        if cols is not None:
            return TraceFile(name=str(name_or_path), timestamp_s=cols["ts_s"],
                             prompt_tokens=cols["prompt"], output_tokens=cols["output"],
                             n_blocks=cols["n_blocks"], block_tokens=cols["block_tokens"],
                             hashes_path=str(out))
    parsed = _Parsed(name_or_path, workdir=workdir, compact=True)
    try:
        with open(out, "wb") as fh:
            for a in range(0, parsed.n_requests, CHUNK_REQUESTS):
                h, *_ = parsed.hashes(a, min(a + CHUNK_REQUESTS, parsed.n_requests))
                h.tofile(fh)
    finally:
        parsed.close()
    (workdir / "trace.duckdb").unlink(missing_ok=True)
    return TraceFile(name=str(name_or_path), timestamp_s=parsed.ts,
                     prompt_tokens=parsed.prompt, output_tokens=parsed.output,
                     n_blocks=parsed.n_blocks, block_tokens=parsed.block_tokens,
                     hashes_path=str(out))


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
    return Trace(name, ts, prompt, np.zeros_like(prompt), n, rid, pos, hashes, block_tokens)


def shards_keep(hashes, sample_rate, pos=None, full_positions=0):
    """Which accesses a stratified SHARDS sample keeps: every block at a position below
    full_positions of its request (a hash names a whole prefix, so a block's position is fixed
    and the strata partition the blocks), and the others iff their hash samples in at rate R.

    The first blocks of requests are few and very hot (one shared head per conversation or
    system prompt); a 1% hash sample keeps or misses them whole, which moves the curve by
    their share of accesses. Sampling them at rate 1 removes that error for little cost.
    """
    keep = _mix(hashes) < np.uint64(int(sample_rate * SHARDS_MODULUS))
    if pos is not None and full_positions > 0:
        keep |= np.asarray(pos) < full_positions
    return keep


def sample(trace, sample_rate, full_positions=1):
    """A stratified SHARDS sample of an in-memory trace (the same blocks as :func:`load`)."""
    keep = shards_keep(trace.hashes, sample_rate, trace.pos, full_positions)
    return Trace(trace.name, trace.timestamp_s, trace.prompt_tokens, trace.output_tokens,
                 trace.n_blocks, trace.rid[keep], trace.pos[keep], trace.hashes[keep],
                 trace.block_tokens, shards_rate(sample_rate),
                 full_positions)


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


# ------------------------------------------------------------------ reuse analytics
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

    Compiled (:class:`kvmath.traces.compiled.Continuations`): a map of the prompts not yet
    continued (16 bytes each at half load: it grows with the prompts a trace never continues),
    the trace read a chunk of requests at a time."""
    from kvmath.traces.compiled import Continuations
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
