"""CSV tables checked against their Frictionless Table Schema (``kvmath/data/datapackage.json``).

The data package declares each table's fields (units in the names), types, constraints,
primary and foreign keys, and the source fields of sourced rows; a field with a ``default``
may be left out of the header, and an empty cell is missing. pydantic-core (pydantic v2's
engine, imported at the first read) validates each row, which becomes a :class:`Row`. Any
failure is one :class:`DataError` line: file, row (1 = first data row), field, what was
expected and what was found. The header may start with a byte-order mark.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime
import inspect
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

TYPES = {"string": str, "number": float, "integer": int, "boolean": bool, "date": str}


class DataError(ValueError):
    """A table that does not validate: file, row (1 = first data row), field and what was expected."""

    def __init__(self, path, row, field_name, message):
        self.path, self.row, self.field, self.message = str(path), row, field_name, message
        where = f"{path}" + (f", row {row}" if row is not None else "")
        super().__init__(where + (f", field '{field_name}'" if field_name else "") + f": {message}")


class FieldError(ValueError):
    """Raised by a row's ``check``: the message is about ``field``."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def data_path(name):
    """Path of a bundled data file."""
    return Path(str(resources.files("kvmath") / "data" / name))


@lru_cache(maxsize=None)
def package():
    """The data package descriptor (kvmath/data/datapackage.json)."""
    return json.loads(data_path("datapackage.json").read_text(encoding="utf-8"))


def resource(name):
    """The data package's descriptor of table ``name``."""
    return next(r for r in package()["resources"] if r["name"] == name)


class Row:
    """A row type: ``class Gpu(Row, table="gpus")`` becomes a frozen keyword-only dataclass with the
    table's fields, then the class's own annotated fields (with defaults). ``check(self)`` holds
    rules across fields, raising :class:`FieldError`."""
    types = {}  #: table name -> row type

    def __init_subclass__(cls, table, **kw):
        super().__init_subclass__(**kw)
        fields = resource(table)["schema"]["fields"]
        cls.__annotations__ = {f["name"]: TYPES[f["type"]] for f in fields} | inspect.get_annotations(cls)
        for f in fields:
            if not _required(f):
                setattr(cls, f["name"], f.get("default"))
        cls.table, Row.types[table] = table, cls
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)

    def check(self):
        pass

    def _sourced(self):
        """Every table: a measurement names its source and where in it."""
        for name in ("source", "source_location") if getattr(self, "kind", None) == "measurement" else ():
            if getattr(self, name, "x") in (None, ""):
                raise FieldError(name, "missing value (expected text for a measurement)")


def row_type(name):
    """The row type of table ``name`` (:mod:`kvmath.tables` declares one for every table)."""
    from . import tables  # noqa: F401
    return Row.types[name]


def _required(f):
    return f.get("constraints", {}).get("required", False)


def _nullable(f):
    return not _required(f) and f.get("default") is None


def _words(f):
    """What a field accepts, in words."""
    c, t = f.get("constraints", {}), f["type"]
    if "enum" in c:
        return "one of " + ", ".join(sorted(c["enum"]))
    if t == "number" and c.get("exclusiveMinimum") == 0:
        return "a fraction in (0, 1]" if c.get("maximum") == 1 else "a positive number"
    if t in ("number", "integer") and "minimum" in c:
        return {("number", 0): "a non-negative number", ("integer", 0): "a non-negative integer",
                ("integer", 1): "a positive integer"}.get((t, c["minimum"]), f"a {t} >= {c['minimum']}")
    return {"date": "a date YYYY-MM-DD", "boolean": "one of false, true", "number": "a number",
            "integer": "an integer"}.get(t, "text")


def _core(cs, f):
    """pydantic-core schema of one field."""
    c, t = f.get("constraints", {}), f["type"]
    bounds = {k: c[j] for j, k in (("minimum", "ge"), ("maximum", "le"), ("exclusiveMinimum", "gt")) if j in c}
    if "enum" in c or t == "boolean":
        enum = cs.literal_schema(sorted(c.get("enum", ["false", "true"])))
        return enum if "enum" in c else cs.no_info_after_validator_function(lambda v: v == "true", enum)
    if t == "date":
        return cs.no_info_after_validator_function(lambda v: datetime.date.fromisoformat(v) and v, cs.str_schema())
    return {"number": lambda: cs.float_schema(allow_inf_nan=False, **bounds),
            "integer": lambda: cs.int_schema(**bounds)}.get(t, cs.str_schema)()


@lru_cache(maxsize=None)
def _validator(name):
    from pydantic_core import SchemaValidator, core_schema as cs
    return SchemaValidator(cs.typed_dict_schema({f["name"]: cs.typed_dict_field(
        cs.nullable_schema(_core(cs, f)) if _nullable(f) else _core(cs, f), required=_required(f))
        for f in resource(name)["schema"]["fields"]}))


def _error(path, i, fields, exc):
    e = exc.errors()[0]
    name, raw = e["loc"][0], e["input"]
    if e["type"] == "missing":
        return DataError(path, i, name, f"missing value (expected {_words(fields[name])})")
    if e["type"].endswith("_parsing") and fields[name]["type"] in ("number", "integer"):
        try:
            float(raw)
        except ValueError:
            return DataError(path, i, name, f"expected a number, got {raw!r}")
    return DataError(path, i, name, f"expected {_words(fields[name])}, got {raw!r}")


def _rows(path):
    """Header and rows of a CSV file."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM is not a field name
            reader = csv.DictReader(fh)
            return reader.fieldnames or [], list(reader)
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable CSV file ({exc})") from None


def read(cls, path=None):
    """Rows of a CSV file (the bundled one by default) as ``cls`` items: a dict by the table's
    primary key (a tuple when it has several fields), or a list in file order when it has none.
    Foreign keys are checked against the bundled tables."""
    schema = resource(cls.table)["schema"]
    path = Path(path or data_path(resource(cls.table)["path"]))
    fields = {f["name"]: f for f in schema["fields"]}
    header, rows = _rows(path)
    if not header:
        raise DataError(path, None, None, "empty file (expected a CSV header)")
    for name in (n for n in header if n not in fields):
        raise DataError(path, None, name, "unknown field (check its name and unit suffix); "
                        f"expected fields: {', '.join(fields)}")
    for name in (n for n, f in fields.items() if "default" not in f and n not in header):
        raise DataError(path, None, name, "missing column")
    if not rows:
        raise DataError(path, None, None, "no rows")
    from pydantic_core import ValidationError
    refs = [(fk["fields"][0], resource(fk["reference"]["resource"])["title"], table(fk["reference"]["resource"]))
            for fk in schema.get("foreignKeys", ())]
    keys, items, seen = schema.get("primaryKey", ()), [], {}
    for i, data in enumerate(rows, start=1):
        if None in data:
            raise DataError(path, i, None, "more values than header fields")
        if None in data.values():
            raise DataError(path, i, next(k for k, v in data.items() if v is None),
                            "missing value (the row has fewer values than the header)")
        # an empty cell is None where the field may be empty, else its default (or missing)
        d = {k: v.strip() or None for k, v in data.items()}
        try:
            item = cls(**_validator(cls.table).validate_python(
                {k: v for k, v in d.items() if v is not None or _nullable(fields[k])}))
        except ValidationError as exc:
            raise _error(path, i, fields, exc) from None
        try:
            for name, what, known in refs:
                if getattr(item, name) not in (None, "", *known):
                    raise FieldError(name, f"unknown {what} {getattr(item, name)!r}; "
                                     f"expected one of {', '.join(sorted(known))}")
            item._sourced()
            item.check()
        except FieldError as exc:
            raise DataError(path, i, exc.field, str(exc)) from None
        k = tuple(getattr(item, n) for n in keys)
        if keys and k in seen:
            raise DataError(path, i, keys[0], f"duplicate {', '.join(map(str, k))} (first in row {seen[k]})")
        seen[k] = i
        items.append(item)
    return {k if len(k) > 1 else k[0]: it for k, it in zip(seen, items)} if keys else items


@lru_cache(maxsize=None)
def table(name):
    """The bundled table ``name``, read once."""
    return read(row_type(name))
