"""**Generic** (JSONL or Parquet, one request per line/row): ``timestamp_s`` (s),
``prompt_tokens``, ``block_hashes`` (non-negative 64-bit integers, head first; a block's hash
must identify its whole prefix, as vLLM's and SGLang's chained block hashes do),
``block_tokens`` (tokens per block, the same on every row), optional ``output_tokens``. A
``session_id`` is refused, not dropped: kvmath matches a turn to the one it continues by its
prefix hashes (:func:`kvmath.traces.statistics.continuations`), so a session id would change no
answer. A JSONL record holding ``block_hashes`` names the format; every ``.parquet`` file is read
as it, its columns of the types :data:`PARQUET_TYPES` lists."""
from kvmath.traces.formats.format import SESSION_ID, Format

_INTEGERS = ("BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT", "USMALLINT", "TINYINT",
             "UTINYINT")
#: Parquet column types each field may have (DuckDB's names): a string timestamp or a float
#: token count is refused, not cast
PARQUET_TYPES = {"timestamp_s": ("DOUBLE", "FLOAT") + _INTEGERS + ("DECIMAL",),
                 "prompt_tokens": _INTEGERS, "block_tokens": _INTEGERS,
                 "output_tokens": _INTEGERS,
                 "block_hashes": ("UBIGINT[]", "BIGINT[]", "UINTEGER[]", "INTEGER[]")}

FORMAT = Format(
    name="generic", named="generic ones",
    fields={"timestamp_s": ("DOUBLE", "number"), "prompt_tokens": ("BIGINT", "integer"),
            "block_hashes": ("UBIGINT[]", "hashes"), "block_tokens": ("BIGINT", "integer")},
    optional={"output_tokens": ("BIGINT", "integer")},
    marker="block_hashes",
    timestamp="timestamp_s", timestamp_per_s=1.0,
    prompt="prompt_tokens", output="output_tokens", hashes="block_hashes",
    block_tokens="block_tokens",
    refused={"session_id": SESSION_ID},
    parquet_types=PARQUET_TYPES,
)
