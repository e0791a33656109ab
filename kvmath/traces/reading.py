"""Reading a trace file (a bundled trace's short name, or a path) into a :class:`~kvmath.traces.
trace.Trace` (:func:`load`, sampled as it is read at a rate below 1) or a :class:`~kvmath.traces.
trace.TraceFile` (:func:`stream`): DuckDB parses the file once, by SQL built from its format's
declaration (:mod:`kvmath.traces.formats`), and large JSONL files in canonical form take the
compiled path (:mod:`kvmath.traces.jsonl`); what either finds wrong is named by
:mod:`kvmath.traces.checking`'s line-by-line checks. The contract every format keeps is
:mod:`kvmath.traces.readers`'."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kvmath.tables.rows import data_path
from kvmath.traces.checking import (MAX_LINE_BYTES, check_lines, detect, file_data, is_gzip,
                                    is_parquet, locate_jsonl, locate_parquet, parquet_columns,
                                    sql_path)
from kvmath.traces.sampling import Sample, mix, shards_rate
from kvmath.traces.trace import CHUNK_REQUESTS, Trace, TraceError, TraceFile

#: bundled traces by short name (Mooncake's, :mod:`kvmath.traces.formats.mooncake`)
BUNDLED = {"conversation": "conversation_trace.jsonl.gz", "synthetic": "synthetic_trace.jsonl.gz"}
#: DuckDB's memory limit while it parses a trace into a database file on disk
#: (:func:`stream`): past it, DuckDB spills to that directory
STREAM_MEMORY_LIMIT = "384MB"


def resolve_path(name_or_path):
    """A bundled trace's path by short name, or the given path, which must be a regular file:
    a FIFO would block the read for ever and a device never end (each is named as what it is,
    not as a missing file)."""
    import stat
    if name_or_path in BUNDLED:
        return data_path(f"traces/{BUNDLED[name_or_path]}")
    path = Path(name_or_path)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        import errno
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TraceError(path, None, None, "no such trace file; bundled traces: "
                             + ", ".join(sorted(BUNDLED))) from None
        raise TraceError(path, None, None, f"cannot read file ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device or socket")
        raise TraceError(path, None, None, f"{what}, not a regular file (expected a trace "
                         "file: JSONL, gzipped or not, or Parquet)")
    return path


def _full(exc):
    """Whether an error is a write that found no room: an OSError of a full disk, file size
    limit or quota, numpy's short write ("... requested and ... written"), or DuckDB's I/O
    error saying so."""
    import errno
    if isinstance(exc, OSError):
        return exc.errno in {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", 122)} or (
            exc.errno is None and "requested and" in str(exc) and "written" in str(exc))
    text = str(exc)
    return "duckdb" in type(exc).__module__ and (
        "No space left" in text or "File too large" in text or "quota exceeded" in text.lower())


class WorkDirectory:
    """A temporary work directory (``with WorkDirectory("kvmath-route-") as work``) for a trace's
    blocks, removed after: a directory that cannot be made (TMPDIR missing or not writable) or
    that fills up (a full disk) is one line naming it, a :class:`TraceError` (exit 2), not a
    traceback or "cannot write the output" (issue 37: route and fleet said so, exit 1)."""

    def __init__(self, prefix):
        import tempfile
        try:
            self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        except OSError as exc:
            raise TraceError(tempfile.gettempdir(), None, None, "cannot make a work directory "
                             f"for the trace's blocks here ({exc.strerror or exc}); set TMPDIR "
                             "to a writable directory") from None
        self.name = self._tmp.name

    def __enter__(self):
        return self.name

    def __exit__(self, kind, exc, tb):
        try:
            self._tmp.cleanup()
        except OSError:
            pass
        if exc is not None and not isinstance(exc, TraceError) and _full(exc):
            raise TraceError(self.name, None, None, "the work directory cannot hold the "
                             f"trace's blocks ({getattr(exc, 'strerror', None) or exc}); set "
                             "TMPDIR to a disk with room") from None
        return False


def _canonical_chunks(path):
    """The file's data for the compiled JSONL reader (:func:`kvmath.traces.jsonl.read`), its
    chunks at most ``CHUNK_BYTES`` decompressed (a gzip bomb inflates no further); a file that
    is not whole gives it up (DuckDB's reader, and :func:`check_lines`, then name it)."""
    from kvmath.traces import jsonl
    try:
        yield from file_data(path, is_gzip(path), {"lines": 0}, jsonl.CHUNK_BYTES)
    except TraceError:
        raise jsonl.GiveUp from None


def _source_sql(path, fmt, parquet=False, columns=(), gz=False):
    """A SELECT normalising a file of a format to ts_s, prompt, output, hashes, bt (parquet:
    the file is Parquet; columns: its own, from :func:`~kvmath.traces.checking.parquet_columns`)
    and, for JSONL, ``strict_bad``: whether a record holds a field the format does not name or
    a field of another JSON type than the format documents (DuckDB's typed reader would cast
    "100" to a number, 1024.5 to an integer and true to 1; nonzero sends the file to the
    line-by-line check, which names the line and field). JSONL is read as objects and each
    record's fields extracted in one parse; gz: the file is gzip (by its first bytes, whatever
    its name: DuckDB goes by the name)."""
    p = sql_path(path)  # this file, literally: no glob, no hive columns
    out = fmt.output
    if parquet:
        col = {name: name for name in fmt.parquet_types}
        if out is None or (out in fmt.optional and out not in columns):
            output = "0"
        else:
            output = f"coalesce({out}, 0)" if out in fmt.optional else out
        # TRY_CAST: a value the cast cannot hold (a negative hash in a BIGINT[] column, a
        # UBIGINT past 2^63) is NULL, a bad row that locate_parquet names, not a conversion
        # error naming no row
        output = f"TRY_CAST({output} AS BIGINT)"
        strict, src = "false", f"read_parquet({p}, hive_partitioning=false)"
    else:
        fields, optional = fmt.fields, fmt.optional
        names = fmt.names
        col = {name: f"v[{i + 1}]" for i, name in enumerate(names)}
        known = ", ".join(f"'{k}'" for k in names)
        checks = [f"list_bool_and(list_transform(json_keys(json), lambda k: k IN ({known})))",
                  # a field given twice: DuckDB would read the first, json.loads the last
                  "len(json_keys(json)) = len(list_distinct(json_keys(json)))"]
        for name, (_, kind) in {**fields, **optional}.items():
            if kind == "hashes":  # an array of integers (or empty): its elements' one JSON type
                ok = (f"json_type({col[name]}) = 'ARRAY' AND json_structure({col[name]}) IN "
                      "('[\"UBIGINT\"]', '[\"BIGINT\"]', '[\"NULL\"]')")
            else:
                ok = (f"json_type({col[name]}) IN "
                      f"({', '.join(repr(t) for t in _JSON_TYPES[kind])})")
            if name in optional:
                ok = f"({col[name]} IS NULL OR json_type({col[name]}) = 'NULL' OR {ok})"
            checks.append(f"coalesce({ok}, false)")
        strict = f"NOT ({' AND '.join(checks)})"
        paths = ", ".join(f"'$.{n}'" for n in names)
        src = (f"(SELECT json, json_extract(json, [{paths}]) AS v "
               f"FROM read_ndjson_objects({p}, compression='{'gzip' if gz else 'none'}', "
               # the longest object: a line and its end (check_lines)
               f"hive_partitioning=false, maximum_object_size={MAX_LINE_BYTES + 2}))")
        if out is None:
            output = "0::BIGINT"
        elif out in optional:  # absent or null: none
            output = f"coalesce(TRY_CAST({col[out]} AS BIGINT), 0)"
        else:
            output = f"TRY_CAST({col[out]} AS BIGINT)"
    ts = f"TRY_CAST({col[fmt.timestamp]} AS DOUBLE)"
    if fmt.timestamp_per_s != 1:
        ts += f" / {fmt.timestamp_per_s!r}"
    bt = (f"{fmt.block_tokens}::BIGINT" if isinstance(fmt.block_tokens, int)
          else f"TRY_CAST({col[fmt.block_tokens]} AS BIGINT)")
    return (f"SELECT {ts} AS ts_s, "
            f"TRY_CAST({col[fmt.prompt]} AS BIGINT) AS prompt, "
            f"{output} AS output, "
            f"TRY_CAST({col[fmt.hashes]} AS UBIGINT[]) AS hashes, "
            f"{bt} AS bt, {strict} AS strict_bad FROM {src}")


#: JSON types DuckDB reports for a field of each kind (json_type)
_JSON_TYPES = {"number": ("UBIGINT", "BIGINT", "DOUBLE"), "integer": ("UBIGINT", "BIGINT")}


_BAD_ROW = ("ts_s IS NULL OR prompt IS NULL OR hashes IS NULL OR bt IS NULL OR ts_s < 0 "
            "OR output IS NULL OR NOT isfinite(ts_s) OR prompt <= 0 OR bt <= 0 OR output < 0 "
            "OR list_count(hashes) != len(hashes) "
            "OR (len(hashes) != prompt // bt AND len(hashes) != (prompt + bt - 1) // bt) "
            "OR len(list_distinct(hashes)) != len(hashes)")


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
    takes it for a bad file; raise the error itself if it is a full disk (:func:`_full`). DuckDB raises its InterruptException, or a plain RuntimeError
    "Query interrupted" from a statement it was running (issue 20: a traceback)."""
    import duckdb
    if isinstance(exc, duckdb.InterruptException) or (
            type(exc) is RuntimeError and str(exc).strip() == "Query interrupted"):
        raise KeyboardInterrupt from None
    if _full(exc):  # its work directory's disk, not the trace: WorkDirectory says so
        raise exc


def _memory(exc, path, con=None):
    """Raise a TraceError that says so when a DuckDB error is its memory limit running out (a
    large trace is not a malformed one: issue 35)."""
    import duckdb
    if isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory" in str(exc):
        limit = None
        try:
            limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        except Exception:  # noqa: BLE001 - the limit is only for the message
            pass
        raise TraceError(path, None, None, "DuckDB ran out of memory reading it"
                         + (f" (its limit: {limit})" if limit else "") + ": the file may be "
                         "well formed but too large for this machine's memory; free memory or "
                         f"read it on a larger machine ({str(exc).splitlines()[0]})") from None


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
        self.parquet = is_parquet(path)
        checker = threading.Thread(target=check, daemon=True) if not self.parquet else None
        if checker:
            checker.start()
        try:
            self.fmt, _ = detect(path)
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
            columns = parquet_columns(con, path, fmt) if self.parquet else ()
        except duckdb.Error as exc:
            _interrupt(exc)
            raise TraceError(path, None, None, f"not a readable trace "
                             f"({str(exc).splitlines()[0]})") from None
        src = _source_sql(path, fmt, self.parquet, columns, is_gzip(path))
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
            _memory(exc, path, con)
            if self.parquet:
                locate_parquet(con, path, fmt)
                raise TraceError(path, None, None, f"not a readable trace "
                                 f"({str(exc).splitlines()[0]})") from None
            bad = True
        if checker:
            checker.join()
            if gz_error:
                raise gz_error[0]
        if bad:
            if self.parquet:
                locate_parquet(con, path, fmt)
                raise TraceError(path, None, None, "not readable as a trace (the reader "
                                 "failed but no bad row was found)")
            locate_jsonl(path, fmt)
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
            if self.parquet:
                raise TraceError(path, int(back[0]) + 2, fmt.timestamp,
                                 "timestamp goes backwards (expected requests in arrival order)",
                                 unit="row")
            locate_jsonl(path, fmt)
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
            _memory(exc, path, self.con)
            raise TraceError(path, None, None, f"not a readable trace "
                             f"({str(exc).splitlines()[0]})") from None
        if len(h) != offsets[b] - offsets[a]:
            raise TraceError(path, None, None, "block hashes read back out of step with "
                             "their requests")
        r = np.repeat(np.arange(a, b, dtype=np.int64), n_blocks[a:b])
        p = (np.arange(offsets[a], offsets[b], dtype=np.int64) - offsets[r]).astype(np.int32)
        mixed = mix(h)
        if len(h):
            rep = _first_repeat(h, r, mixed)
            if rep is not None:
                if self.parquet:
                    raise TraceError(path, rep + 1, fmt.hashes, "expected distinct "
                                     "hashes within a request (a hash names a whole prefix)",
                                     unit="row")
                locate_jsonl(path, fmt)
                raise TraceError(path, None, fmt.hashes, "a request repeats a block hash "
                                 "(expected distinct hashes within a request)")
        return h, r, p, mixed

    def close(self):
        if getattr(self, "con", None) is not None:
            self.con.close()
            self.con = None


def load(name_or_path, sample_rate=None, full_positions=1):
    """Read a trace (bundled name or path) into a :class:`Trace`.

    The file is parsed once, into a DuckDB table; block accesses reach numpy in chunks of
    :data:`~kvmath.traces.trace.CHUNK_REQUESTS` requests. sample_rate R in (0, 1): a
    *stratified* SHARDS sample (see :func:`~kvmath.traces.sampling.shards_keep`): the blocks at
    positions below full_positions of their request are all kept, the others only if their hash
    samples in; the sample is taken as the file is read (:func:`_load_sampled`), so memory holds
    the kept accesses, never every access.
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


def _load_sampled(name_or_path, rate, full_positions):
    """:func:`load` at a SHARDS rate below 1, sampling as the file is read: JSONL in the
    compiled reader's canonical form through it (:func:`kvmath.traces.jsonl.read`), any other
    file (and one it gives up on) parsed by DuckDB into a database file in a temporary
    directory (its memory limited to :data:`STREAM_MEMORY_LIMIT`, as :func:`stream`'s) and read
    a chunk of requests at a time. Memory: the per-request columns and the kept accesses (issue
    20: the whole trace had been loaded before it was sampled). The same Trace as sampling the
    whole one (tests hold it to :func:`~kvmath.traces.sampling.sample`)."""
    path = resolve_path(name_or_path)
    sample, cols = Sample(rate, full_positions), None
    try:
        fmt, _ = detect(path)
    except TraceError:
        fmt = None  # DuckDB's reading below raises what is wrong, in its order
    if fmt is not None and not is_parquet(path):
        from kvmath.traces import jsonl
        cols = jsonl.read(_canonical_chunks(path), fmt, sample, MAX_LINE_BYTES)
        if cols is None:
            sample = Sample(rate, full_positions)  # what it was given before it gave up
    if cols is None:
        with WorkDirectory("kvmath-trace-") as work:
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
        fmt, _ = detect(path)
    except TraceError:
        fmt = None  # DuckDB's reading below raises what is wrong, in its order
    if fmt is not None and not is_parquet(path):
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
