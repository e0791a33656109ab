"""CSV tables as declared row types, validated by pydantic-core (pydantic v2's engine).

A row type is a frozen dataclass whose fields are the CSV columns: units in the names,
constraints in the annotations (``Annotated[float, Pos]``, :func:`OneOf`), optional columns
with a default, cross-field rules in a ``check(self)`` raising :class:`FieldError`. A field
``source: Source`` stands for the kind/source/source_location/retrieved (required) and
verified_via/notes (optional) columns. pydantic-core is imported only when a table is read;
any failure is one :class:`DataError` line: file, row (1 = first data row), field, what was
expected and what was found. The header may start with a byte-order mark.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime
import typing
from functools import lru_cache
from pathlib import Path


class DataError(ValueError):
    """A table that does not validate: file, row (1 = first data row), field and what was expected."""

    def __init__(self, path, row, field_name, message):
        self.path, self.row, self.field, self.message = str(path), row, field_name, message
        where = f"{path}" + (f", row {row}" if row is not None else "")
        where += f", field '{field_name}'" if field_name is not None else ""
        super().__init__(f"{where}: {message}")


class FieldError(ValueError):
    """Raised by a row's ``check``: the message is about ``field``."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


class Col:
    """A column type: words for what it accepts, and its pydantic-core schema (built lazily)."""

    def __init__(self, words, make, number=False):
        self.words, self.make, self.number = words, make, number


def _date(text):
    datetime.date.fromisoformat(text)
    return text


Text = Col("text", lambda cs: cs.str_schema(min_length=1))
Pos = Col("a positive number", lambda cs: cs.float_schema(gt=0, allow_inf_nan=False), True)
NonNeg = Col("a non-negative number", lambda cs: cs.float_schema(ge=0, allow_inf_nan=False), True)
Fraction = Col("a fraction in (0, 1]", lambda cs: cs.float_schema(gt=0, le=1), True)
PosInt = Col("a positive integer", lambda cs: cs.int_schema(gt=0), True)
Count = Col("a non-negative integer", lambda cs: cs.int_schema(ge=0), True)
Date = Col("a date YYYY-MM-DD", lambda cs: cs.no_info_after_validator_function(_date, cs.str_schema()))
Flag = Col("one of false, true", lambda cs: cs.no_info_after_validator_function(
    lambda v: v == "true", cs.literal_schema(["false", "true"])))


def OneOf(*values):
    """A column type: one of the given words."""
    return Col("one of " + ", ".join(sorted(values)), lambda cs: cs.literal_schema(sorted(values)))


#: what a figure is: a vendor peak, arithmetic on a spec, a measurement, a config value, or an assumption
Kind = OneOf("datasheet-peak", "derived-from-spec", "measurement", "config", "assumption")


@dataclasses.dataclass(frozen=True)
class Source:
    kind: typing.Annotated[str, Kind]
    source: typing.Annotated[str, Text]
    source_location: typing.Annotated[str, Text]
    retrieved: typing.Annotated[str, Date]
    verified_via: typing.Annotated[str, Text] = ""
    notes: typing.Annotated[str, Text] = ""


@lru_cache(maxsize=None)
def _columns(cls):
    """{column: (Col, required in the header, may be empty)} of a row type; ``source: Source``
    expands to its columns."""
    out = {}
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        if hints[f.name] is Source:
            out.update(_columns(Source))
        elif typing.get_origin(hints[f.name]) is typing.Annotated:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            nullable = type(None) in typing.get_args(hints[f.name].__origin__)
            out[f.name] = (hints[f.name].__metadata__[0], required, nullable)
    return out


@lru_cache(maxsize=None)
def _validator(cls):
    from pydantic_core import SchemaValidator, core_schema as cs
    return SchemaValidator(cs.typed_dict_schema({
        name: cs.typed_dict_field(cs.nullable_schema(col.make(cs)) if null else col.make(cs),
                                  required=req and not null)
        for name, (col, req, null) in _columns(cls).items()}, extra_behavior="forbid"))


def _error(path, index, cls, exc):
    e = exc.errors()[0]
    name = e["loc"][0] if e["loc"] else None
    col = _columns(cls)[name][0]
    if e["type"] == "missing":
        return DataError(path, index, name, f"missing value (expected {col.words})")
    raw = e["input"]
    if e["type"].endswith("_parsing") and col.number:
        try:
            float(raw)
        except ValueError:
            return DataError(path, index, name, f"expected a number, got {raw!r}")
    return DataError(path, index, name, f"expected {col.words}, got {raw!r}")


def load_table(path, cls, key="name", **context):
    """Rows of a CSV file as ``cls`` items: a dict by ``key`` (a field name or a tuple of
    them; a duplicate is an error) or, with key None, a list in file order. ``context`` is
    passed to each row's ``check(self, **context)``."""
    path, columns = Path(path), _columns(cls)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM is not a field name
            reader = csv.DictReader(fh)
            header, rows = reader.fieldnames or [], list(reader)
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable CSV file ({exc})") from None
    if not header:
        raise DataError(path, None, None, "empty file (expected a CSV header)")
    for name in header:
        if name not in columns:
            raise DataError(path, None, name, "unknown field (check its name and unit suffix); "
                            f"expected fields: {', '.join(columns)}")
    for name in (c for c, (_, req, _) in columns.items() if req and c not in header):
        raise DataError(path, None, name, "missing column")
    if not rows:
        raise DataError(path, None, None, "no rows")
    from pydantic_core import ValidationError
    nested = [f.name for f in dataclasses.fields(cls) if f.type in (Source, "Source")]
    keys = (key,) if isinstance(key, str) else key
    items, seen = [], {}
    for i, data in enumerate(rows, start=1):
        if None in data:
            raise DataError(path, i, None, "more values than header fields")
        if None in data.values():
            raise DataError(path, i, next(k for k, v in data.items() if v is None),
                            "missing value (the row has fewer values than the header)")
        # an empty cell is None where the column may be empty, else the default (or missing)
        d = {k: v.strip() or None for k, v in data.items()}
        d = {k: v for k, v in d.items() if v is not None or columns[k][2]}
        try:
            d = _validator(cls).validate_python(d)
        except ValidationError as exc:
            raise _error(path, i, cls, exc) from None
        if nested:
            d["source"] = Source(**{k: d.pop(k) for k in _columns(Source) if k in d})
        item = cls(**d)
        try:
            getattr(item, "check", lambda **_: None)(**context)
        except FieldError as exc:
            raise DataError(path, i, exc.field, str(exc)) from None
        if keys:
            k = tuple(getattr(item, n) for n in keys)
            if k in seen:
                raise DataError(path, i, keys[0], f"duplicate {', '.join(map(str, k))} "
                                f"(first in row {seen[k]})")
            seen[k] = i
        items.append(item)
    return {k if len(k) > 1 else k[0]: it for k, it in zip(seen, items)} if keys else items
