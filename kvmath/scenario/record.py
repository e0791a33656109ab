"""One scenario, one record: :class:`Scenario`, built from the option declarations.

Every option of :mod:`kvmath.scenario.options` that describes the scenario (not the prompt's
length, which varies per evaluation, nor how a command runs or prints) is a field of the record,
named by its declaration (``Option.record_field``), in the record's unit (``--bandwidth`` in GB/s
is ``bandwidth_Bps``) and with its declared default; an option naming a row (``Option.row``: the
model, the GPU, the tier, the node, the engine, the codec, the pool, the pause) holds the row.
Two fields no option sets: ``own``, a reader's own symbol values (the calculator's), and
``gpu_resume_rate``, the reloads per second over the GPUs' own links where they differ from
``resume_rate``'s through the node's hops (the tier plan's).

Adding an option is one declaration (its field comes with it), and the rule that reads it. The
command line (every command, by :func:`kvmath.scenario.build.scenario_of`), the Python face
(:func:`scenario`) and the calculator (its form's fields carry ``field`` and ``scale``:
kvmath.present.calculator) all build this record, and the logic (:mod:`kvmath.logic`) reads it,
so every command gives the same numbers for it.
"""
from __future__ import annotations

import dataclasses

from kvmath.scenario.options import OPTIONS

#: fields no option sets: (name, default)
EXTRA_FIELDS = (("own", None), ("gpu_resume_rate", None))


def _type(o):
    k = o.kind
    if o.row:
        return object
    if k.flag:
        return bool
    if k.choices or k.text:
        return str | None
    return (int if k.integer else float) | None


def _fields():
    out, seen = [], set()
    for o in OPTIONS:
        name = o.record_field
        if name is None or name in seen:
            continue
        seen.add(name)
        default = o.default * o.scale if o.default is not None and o.scale != 1 else o.default
        if o.row:  # a row: the caller resolves it (a pause's default name included)
            default = None
        out.append((name, _type(o), dataclasses.field(default=default)))
    out += [(name, object, dataclasses.field(default=d)) for name, d in EXTRA_FIELDS]
    return out


#: the scenario record: every field an option declares, and :data:`EXTRA_FIELDS`
Scenario = dataclasses.make_dataclass(
    "Scenario", _fields(), frozen=True,
    namespace={"__doc__": "One scenario: the rows it names and every option's value, in the "
                          "record's units (kvmath.scenario.record; the fields come from the "
                          "option declarations, kvmath.scenario.options)."})
Scenario.__module__ = __name__  # found by name, so a record pickles (to a Dask worker)

#: the record's fields, in declaration order
FIELDS = tuple(f.name for f in dataclasses.fields(Scenario))


def defaults():
    """{field: default} of the record (rows None): what the calculator starts a record from."""
    return {f.name: f.default for f in dataclasses.fields(Scenario)}


def scenario(model, gpu, tier, **fields):
    """The record of a scenario given in Python: rows, or for the model, GPU, tier, engine and
    codec their bundled names (or CSV paths); any other field by its record name (``tp=2``,
    ``bandwidth_Bps=20e9``); TypeError naming an unknown field."""
    from kvmath.tables import rows as R
    if isinstance(model, str):
        model = R.resolve_model(model)
    if isinstance(gpu, str):
        gpu = R.resolve_gpu(gpu)
    if isinstance(tier, str):
        tier = R.resolve_tier(tier)
    if isinstance(fields.get("engine"), str):
        fields["engine"] = R.resolve_engine(fields["engine"])
    if isinstance(fields.get("codec"), str):
        fields["codec"] = R.resolve_codec(fields["codec"])
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise TypeError(f"no scenario field {', '.join(unknown)}; the fields: {', '.join(FIELDS)}")
    return Scenario(model=model, gpu=gpu, tier=tier, **fields)


def record_values(args):
    """{field: value} of every option with a record field that ``args`` (parsed options, a
    scenario file merged) holds, in the record's units; the rows are left to the caller."""
    out = {}
    for o in OPTIONS:
        name = o.record_field
        if name is None or o.row:
            continue
        value = getattr(args, o.key, None)
        if value is not None and o.repeat:
            out[name] = tuple(value)
        elif value is not None:
            out[name] = value * o.scale if o.scale != 1 else value
    return out
