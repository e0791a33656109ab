"""Reading request traces of prefix-block hashes, and what they say about reuse: the names the
CLI, the chapters, the benchmarks and the tests use, gathered from the modules that hold them.

Formats, one module each in :mod:`kvmath.traces.formats` (Mooncake JSONL, generic JSONL or
Parquet; each module describes its fields), are read gzipped or not, under one contract:

A trace needs ``ceil`` or ``floor`` of prompt_tokens / block_tokens hashes (the last, partial
block hashed or not), distinct within a request, and non-decreasing timestamps. Fields have the
JSON (or Parquet) types their format documents, never cast (a string timestamp, a fractional
token count or a boolean hash is an error), a field given twice in a record is an error, and a
field or column the format does not name is refused (a ``session_id`` by name: kvmath matches a
turn to the one it continues by its prefix hashes, :func:`continuations`). A line holds at most
:data:`MAX_LINE_BYTES`, and gzip is told by its bytes (not the file's name) and inflated a
bounded chunk at a time, so no reader's memory grows with a line. :func:`load` parses a file
once, by DuckDB, into a table; per-request columns, then block accesses in chunks of requests,
reach numpy, where the accesses are checked. A sample (stratified SHARDS, :func:`shards_keep`)
is taken as the file is read, so only the kept accesses are held; :func:`stream` keeps the
accesses in a file on disk. A bad file raises :class:`TraceError` naming the file, line (a
Parquet file's row) and field. Blank lines in JSONL are not records and are passed over, as
JSONL readers do.

Where each part lives: :mod:`~kvmath.traces.trace` (the trace types, :class:`TraceError`),
:mod:`~kvmath.traces.checking` (bytes, lines, records, the checks that name a line and field,
format detection), :mod:`~kvmath.traces.reading` (DuckDB's reading, :func:`load`,
:func:`stream`), :mod:`~kvmath.traces.sampling` (SHARDS), :mod:`~kvmath.traces.statistics`
(reuse, pauses, turns).
"""
from kvmath.traces.checking import (GZIP_MAGIC, MAX_LINE_BYTES, READ_BYTES,  # noqa: F401
                                    check_lines, file_data, is_gzip)
from kvmath.traces.formats.mooncake import (MOONCAKE_BLOCK_TOKENS,  # noqa: F401
                                            MOONCAKE_COMMIT, MOONCAKE_SOURCE)
from kvmath.traces.reading import (BUNDLED, STREAM_MEMORY_LIMIT, WorkDirectory,  # noqa: F401
                                   load, resolve_path, stream)
from kvmath.traces.sampling import (SHARDS_MODULUS, SHARDS_SEED, sample,  # noqa: F401
                                    shards_keep, shards_rate)
from kvmath.traces.statistics import (PAUSE_ROW_FIELDS, QUANTILES,  # noqa: F401
                                      batch_context_of, continuations, decode_context_of,
                                      fit_lognormal, fit_pauses, reuse_stats, turn_new_tokens)
from kvmath.traces.trace import (CHUNK_REQUESTS, NodeRequests, RequestColumns,  # noqa: F401
                                 Trace, TraceError, TraceFile, block_chunks, block_ids,
                                 from_requests)
