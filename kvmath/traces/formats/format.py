"""One trace format's declaration (:class:`Format`); the registry is :mod:`kvmath.traces.formats`.
How every format is read and checked (DuckDB's SQL, the line-by-line checks, the compiled JSONL
path) is written once, in :mod:`kvmath.traces.reading` and :mod:`kvmath.traces.checking`, in
terms of what a format declares here."""
from __future__ import annotations

from dataclasses import dataclass, field

#: why a ``session_id`` is refused by name, not dropped: every field a reader is given is used
#: or refused (issue 20)
SESSION_ID = ("not used: kvmath matches a turn to the one it continues by its prefix hashes, "
              "not by session, so a session id would change no answer (remove the field)")

#: the JSON kinds a field may have: a non-negative finite number, a non-negative integer below
#: 2^63, a list of non-negative 64-bit integer hashes (checking._check_value)
KINDS = ("number", "integer", "hashes")


@dataclass(frozen=True)
class Format:
    """One trace format: its records' fields, which of them plays each part of a request, and
    how a file is recognised as it."""

    name: str  #: the registry's key (the module's name)
    #: how the error for a file of no known format names this format's fields, before their
    #: list: "Mooncake fields" -> "expected Mooncake fields (timestamp, ...) or ..."
    named: str
    #: the fields every record holds, in order: name -> (DuckDB type, JSON kind of KINDS)
    fields: dict
    #: a field whose presence in a JSONL file's first record names this format (formats are
    #: tried in the registry's order)
    marker: str
    timestamp: str  #: the field of the request's arrival time
    #: the timestamp field's units per second (1000.0: milliseconds); seconds = value / this
    timestamp_per_s: float
    prompt: str  #: the field of the prompt's tokens
    hashes: str  #: the field of the prompt's prefix-block hashes, head first
    #: the field of the tokens per block (the same on every record), or the format's fixed count
    block_tokens: str | int
    #: the field of the output tokens (None: the format has none, read as 0)
    output: str | None = None
    #: fields a record may hold or leave out (or give as null): name -> (DuckDB type, JSON kind)
    optional: dict = field(default_factory=dict)
    #: fields refused by name, and why (a field neither declared nor refused is refused too, as
    #: unknown)
    refused: dict = field(default_factory=dict)
    #: Parquet column -> the DuckDB column types it may have (a string timestamp or a float
    #: token count is refused, not cast); None: the format is JSONL only. The one format that
    #: sets it reads every ``.parquet`` file
    parquet_types: dict | None = None

    def __post_init__(self):
        spec = {**self.fields, **self.optional}
        assert all(kind in KINDS for _, kind in spec.values()), self.name
        roles = (self.timestamp, self.prompt, self.hashes, self.marker) + \
            ((self.block_tokens,) if isinstance(self.block_tokens, str) else ())
        assert all(role in self.fields for role in roles), self.name
        assert self.output is None or self.output in spec, self.name
        assert spec[self.hashes][1] == "hashes" and spec[self.timestamp][1] == "number", self.name

    @property
    def names(self):
        """Every field the format names, required first."""
        return list(self.fields) + list(self.optional)

    @property
    def block_field(self):
        """The field an error about the block size names."""
        return self.block_tokens if isinstance(self.block_tokens, str) else "block_tokens"

    def block_tokens_of(self, record):
        """Tokens per block of one record (a dict of its fields)."""
        return self.block_tokens if isinstance(self.block_tokens, int) \
            else record[self.block_tokens]

    def seconds(self, value):
        """A timestamp field's value in seconds (the value itself when it is in seconds)."""
        return value if self.timestamp_per_s == 1 else value / self.timestamp_per_s
