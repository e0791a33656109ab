"""Trace formats, one module each: the fields a format's records hold (their DuckDB and JSON
types), the optional and refused ones, which field gives each part of a request (arrival time and
its unit, prompt tokens, block hashes, block size, output tokens) and how a file is recognised as
the format (:class:`~kvmath.traces.formats.format.Format`).

Reading, checking and the compiled JSONL path (:mod:`kvmath.traces.reading`,
:mod:`kvmath.traces.checking`, :mod:`kvmath.traces.jsonl`) are written once over what a format
declares, and find formats only here. Adding a format is one module beside these (defining
``FORMAT``, its ``name`` the module's), its name in :data:`ORDER`, and a test with a file of it.
"""
import importlib

from kvmath.traces.formats.format import Format

#: the formats' modules, in the order a JSONL file's first record is tried against their markers
ORDER = ("mooncake", "generic")


def _load():
    out = {}
    for name in ORDER:
        fmt = importlib.import_module(f"{__name__}.{name}").FORMAT
        assert isinstance(fmt, Format) and fmt.name == name, name
        out[name] = fmt
    assert sum(f.parquet_types is not None for f in out.values()) <= 1
    return out


#: every format by name, in :data:`ORDER`
FORMATS = _load()


def detect(record):
    """The format whose marker field a JSONL file's first record (a dict) holds, or None."""
    return next((f for f in FORMATS.values() if f.marker in record), None)


def parquet():
    """The format a ``.parquet`` file is read as (the one declaring its column types)."""
    return next(f for f in FORMATS.values() if f.parquet_types is not None)


def unknown():
    """What a record of no known format is told it should have held."""
    return "unknown format: expected " + " or ".join(
        f"{f.named} ({', '.join(f.fields)})" for f in FORMATS.values())
