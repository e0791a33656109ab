"""CSV tables checked against their Frictionless Table Schema (``kvmath/data/datapackage.json``).

The data package declares each table's fields (units in the names), types, constraints,
primary and foreign keys, and the source fields of sourced rows; a field with a ``default``
may be left out of the header, and an empty cell is missing. pydantic-core (pydantic v2's
engine, imported at the first read) validates each row, which becomes a :class:`Row`. Any
failure is one :class:`DataError` line: file, row (1 = first data row), field, what was
expected and what was found.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime
import inspect
import json
import stat
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kvmath.errors import InputError

TYPES = {"string": str, "number": float, "integer": int, "boolean": bool, "date": str}


class DataError(ValueError, InputError):
    """A table that does not validate: file, row (1 = first data row), field and what was expected."""

    def __init__(self, path, row, field_name, message):
        self.path, self.row, self.field, self.message = str(path), row, field_name, message
        super().__init__(f"{path}" + (f", row {row}" if row else "") +
                         (f", field '{field_name}'" if field_name else "") + f": {message}")


class UnknownName(KeyError, InputError):
    """A name the user gave (a model, GPU, tier, node, engine, pause...) that no bundled row
    holds: a user error. A bare KeyError anywhere else is a bug, not exit 2."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


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
    """The data package's (kvmath/data/datapackage.json) table descriptors by name."""
    return {r["name"]: r for r in json.loads(data_path("datapackage.json").read_text("utf-8"))["resources"]}


def resource(name):
    """The data package's descriptor of table ``name``."""
    return package()[name]


class Row:
    """A row type: ``class Gpu(Row, table="gpus")`` becomes a frozen keyword-only dataclass with the
    table's fields, then the class's own annotated fields (with defaults). ``check(self)`` holds
    rules across fields, raising :class:`FieldError`."""
    types = {}  #: table name -> row type

    def __init_subclass__(cls, table, **kw):
        super().__init_subclass__(**kw)
        fields = resource(table)["schema"]["fields"]
        cls.__annotations__ = {f["name"]: TYPES[f["type"]] for f in fields} | inspect.get_annotations(cls)
        for f in (f for f in fields if not _required(f)):
            setattr(cls, f["name"], f.get("default"))
        cls.table, Row.types[table] = table, cls
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)

    def check(self):
        pass


def _required(f):
    return f.get("constraints", {}).get("required", False)


def unit_words(f):
    """A numeric field's unit as a bound is followed by it: " B/s", " (B/s or FLOP/s)", or
    nothing for a ratio (the data package's ``unit``)."""
    unit = f.get("unit", "")
    return "" if not unit else f" ({unit})" if " " in unit else f" {unit}"


def _words(f):
    """What a field accepts, in words: its type, bounds and unit."""
    c, t = f.get("constraints", {}), f["type"]
    if "enum" in c:
        return "one of " + ", ".join(sorted(c["enum"]))
    if t in ("number", "integer"):
        hi, u = c.get("maximum"), unit_words(f)
        if t == "number" and c.get("exclusiveMinimum") == 0 and hi == 1 and not u:
            return "a fraction in (0, 1]"
        kind = "an integer" if t == "integer" else "a number"
        fmt = "{:,}" if t == "integer" else "{:g}"
        if "exclusiveMinimum" in c:
            low = f"above {fmt.format(c['exclusiveMinimum'])}"
        elif "minimum" in c:
            low = f"from {fmt.format(c['minimum'])}"
        else:
            low = ""
        if hi is None:
            return f"{kind} {low}{u}".replace("  ", " ").strip()
        join = " and at most " if "exclusiveMinimum" in c else " to " if low else " of at most "
        return f"{kind} {low}{join}{fmt.format(hi)}{u}".replace("  ", " ")
    return {"date": "a date YYYY-MM-DD", "boolean": "one of false, true"}.get(t, "text")


def _core(cs, f):
    """pydantic-core schema of one field; a field with neither a default nor a requirement may be empty."""
    c, t = f.get("constraints", {}), f["type"]
    if "enum" in c or t == "boolean":
        enum = cs.literal_schema(sorted(c.get("enum", ["false", "true"])))
        s = enum if "enum" in c else cs.no_info_after_validator_function(lambda v: v == "true", enum)
    elif t == "date":
        s = cs.no_info_after_validator_function(lambda v: datetime.date.fromisoformat(v) and v, cs.str_schema())
    else:
        bounds = {k: c[j] for j, k in (("minimum", "ge"), ("maximum", "le"), ("exclusiveMinimum", "gt")) if j in c}
        s = {"number": lambda: cs.float_schema(allow_inf_nan=False, **bounds),
             "integer": lambda: cs.int_schema(strict=False, **bounds)}.get(t, cs.str_schema)()
    return s if _required(f) or "default" in f else cs.nullable_schema(s)


@lru_cache(maxsize=None)
def _validator(name):
    from pydantic_core import SchemaError, SchemaValidator, core_schema as cs
    schema = cs.typed_dict_schema({f["name"]: cs.typed_dict_field(_core(cs, f), required=_required(f))
                                   for f in resource(name)["schema"]["fields"]})
    try:
        return SchemaValidator(schema)
    except SchemaError as exc:  # pydantic-core reports Ctrl-C while it builds as its own error,
        if "KeyboardInterrupt" in str(exc):  # the interrupt named in the message only (CI saw it)
            raise KeyboardInterrupt from exc
        raise


#: the largest data or scenario file read, B: a table row or a scenario is a few kB; more is
#: not one (/dev/zero, a trace given as a model)
MAX_INPUT_BYTES = 64 * 2**20


def regular_file(path, limit=MAX_INPUT_BYTES, what="table or scenario"):
    """``path`` as a Path, refused (DataError) unless it is a regular file of at most ``limit``
    bytes (MAX_INPUT_BYTES: a table or scenario; ``what`` names the kind in the refusal): a
    FIFO would block a read for ever and a device would never end."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataError(path, None, None, "not a regular file (a FIFO, device or directory "
                        f"cannot be read as a {what})")
    if st.st_size > limit:
        raise DataError(path, None, None, f"{st.st_size:,} B is larger than any {what} "
                        f"({limit:,} B at most)")
    return p


def _rows(path):
    """Header and rows of a CSV file."""
    regular_file(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM is not a field name
            reader = csv.DictReader(fh)
            return reader.fieldnames or [], list(reader)
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable CSV file ({exc})") from None


def _item(cls, fields, data):
    """One row as ``cls``; raises FieldError. An empty cell is None where the field may be empty,
    else its default (or missing)."""
    from pydantic_core import ValidationError
    if None in data.values():
        raise FieldError(next(k for k, v in data.items() if v is None),
                         "missing value (the row has fewer values than the header)")
    d = {k: v.strip() or None for k, v in data.items()}
    try:
        return cls(**_validator(cls.table).validate_python(
            {k: v for k, v in d.items() if v is not None or "default" not in fields[k]}))
    except ValidationError as exc:
        e = exc.errors()[0]
        f, raw = fields[e["loc"][0]], e["input"]
        if e["type"] == "missing" or raw is None:
            raise FieldError(f["name"], f"missing value (expected {_words(f)})") from None
        if e["type"].endswith("_parsing") and f["type"] in ("number", "integer"):
            try:
                float(raw)
            except ValueError:
                raise FieldError(f["name"], f"expected a number, got {raw!r}") from None
        raise FieldError(f["name"], f"expected {_words(f)}, got {raw!r}") from None


def _by_name(item, name, bound):
    """Hold field ``name`` of a row to the bound its row's name gives it ({maximum, unit})."""
    value = getattr(item, name)
    if bound is not None and value is not None and not value <= bound["maximum"]:
        raise FieldError(name, f"expected at most {bound['maximum']:g} {bound['unit']} for "
                         f"{item.name}, got {value:g}")


def read(cls, path=None):
    """Rows of a CSV file (the bundled one by default) as ``cls`` items: a dict by the table's
    primary key (a tuple when it has several fields), or a list in file order when it has none.
    Foreign keys are checked against the bundled tables; a measurement must name its source."""
    schema = resource(cls.table)["schema"]
    path = Path(path or data_path(resource(cls.table)["path"]))
    fields = {f["name"]: f for f in schema["fields"]}
    header, rows = _rows(path)
    if not header:
        raise DataError(path, None, None, "empty file (expected a CSV header)")
    for name in (n for n in header if n not in fields):
        raise DataError(path, None, name, "unknown field (check its name and unit suffix); "
                        f"expected fields: {', '.join(fields)}")
    twice = sorted({n for n in header if header.count(n) > 1})
    if twice:  # a reader would keep one of the two values without a word
        raise DataError(path, None, twice[0], "a column given twice in the header (expected "
                        "each field once)")
    for name in (n for n, f in fields.items() if "default" not in f and n not in header):
        raise DataError(path, None, name, "missing column")
    if not rows:
        raise DataError(path, None, None, "no rows")
    # a foreign key's names: the table's, and those its field also knows (a GPU a codec was
    # measured on that no gpus.csv row holds)
    refs = [(fk["fields"][0], resource(fk["reference"]["resource"])["title"],
             (*table(fk["reference"]["resource"]), *fields[fk["fields"][0]].get("alsoKnown", ())))
            for fk in schema.get("foreignKeys", ())]
    by_name = [(n, f["boundsByName"]) for n, f in fields.items() if "boundsByName" in f]
    keys, items, seen = schema.get("primaryKey", ()), [], {}
    for i, data in enumerate(rows, start=1):
        if None in data:
            raise DataError(path, i, None, "more values than header fields")
        try:
            item = _item(cls, fields, data)
            for name, what, known in refs:
                if getattr(item, name) not in (None, "", *known):
                    raise FieldError(name, f"unknown {what} {getattr(item, name)!r}; "
                                     f"expected one of {', '.join(sorted(known))}")
            for name in ("source", "source_location") if getattr(item, "kind", "") == "measurement" else ():
                if getattr(item, name, "x") in (None, ""):
                    raise FieldError(name, "missing value (expected text for a measurement)")
            for name, bounds in by_name:  # a field whose bound and unit its row's name gives
                _by_name(item, name, bounds.get(item.name))
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
    """The bundled table ``name``, read once. Its row type is declared in :mod:`kvmath.tables.rows`,
    which the package kvmath.tables imports first (its __init__.py), so schema never imports it
    back."""
    return read(Row.types[name])
