"""Bounds with every declaration (issue 37, item 1): every numeric field of every table and every
numeric option carries physical bounds with its unit; a value beyond them is one line naming the
file, row and field (or the option) and what was expected, with the unit, exit 2; a value
within them is read. Hypothesis draws values across each field's bounds and beyond, through the
readers and the command line (a codec's compression_ratio of 1e300, decode_Bps 1e300, a price
of 1e300, a node's host_dram_bytes 1e300 or nvme_drives 1e9, fleet --batch-seqs 1e9 were
answered)."""
import csv
import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kvmath.cli.main import main
from kvmath.scenario import options as O
from kvmath.tables.rows import data_path
from kvmath.tables.schema import DataError, Row, _words, package, read

DRAW = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def numeric_fields():
    """(table, field descriptor) of every numeric field of the data package."""
    return [(name, f) for name, r in package().items() for f in r["schema"]["fields"]
            if f["type"] in ("number", "integer")]


def test_every_numeric_field_has_bounds_and_a_unit():
    for table, f in numeric_fields():
        c = f.get("constraints", {})
        assert "maximum" in c, (table, f["name"])
        assert "minimum" in c or "exclusiveMinimum" in c, (table, f["name"])
        assert "unit" in f, (table, f["name"])
        # a count or a quantity with a unit says it; a ratio (unit "") is dimensionless
        if f["name"].endswith(("_bytes", "_Bps", "_s", "_flops", "_tokens")):
            assert f["unit"], (table, f["name"])


def test_every_numeric_option_has_physical_bounds_and_a_unit():
    for o in O.OPTIONS:
        k = o.kind
        if k.text or k.flag or k.choices:
            assert not k.text or k.max_chars, o.name
            continue
        assert k.minimum is not None and k.maximum is not None, o.name
        if k.maximum != 1:  # a fraction is dimensionless; every other number has its unit
            assert k.unit and k.unit in k.words and k.why, o.name
            assert k.maximum < O.LARGEST or k.unit == "bytes", o.name


# ---------------------------------------------------------------------------- values drawn
def _low(f):
    c = f["constraints"]
    return c.get("exclusiveMinimum", c.get("minimum"))


def _high(table, f, row):
    """The field's maximum, or the tighter one its row's name gives (prices)."""
    by = f.get("boundsByName", {}).get(row.get("name"), {})
    return by.get("maximum", f["constraints"]["maximum"])


def inside(f, high):
    """A value within the field's bounds, as CSV text."""
    low, exclusive = _low(f), "exclusiveMinimum" in f["constraints"]
    if f["type"] == "integer":
        return st.integers(int(low) + exclusive, int(high)).map(str)
    floats = st.floats(low, high, exclude_min=exclusive, allow_nan=False)
    if low >= 0 and high > 1e3:  # across the magnitudes, not only near the top
        floats = st.one_of(floats, st.integers(-9, int(math.log10(high))).map(
            lambda e: 10.0 ** e).filter(lambda x: (x > low if exclusive else x >= low) and
                                        x <= high))
    return floats.map(repr)


def beyond(f, high):
    """A value outside the field's bounds (or not a finite number), as CSV text."""
    low, exclusive = _low(f), "exclusiveMinimum" in f["constraints"]
    integer = f["type"] == "integer"
    above = [high + 1 if integer else high * (1 + 1e-6) + 1e-9, high * 10, 1e300]
    below = [low - 1 if integer else (low if exclusive else low - max(abs(low), 1) * 1e-6),
             -1e300]
    values = [*(int(v) if integer and v < 1e18 else v for v in above + below)]
    return st.sampled_from(values + ["inf", "nan"]).map(
        lambda v: v if isinstance(v, str) else str(v) if isinstance(v, int) else repr(v))


def first_row(table):
    """(path of the bundled file, header, first row) of a table."""
    r = package()[table]
    path = data_path(r["path"]) if table != "vidur_mlp" else next(
        data_path("vidur").glob("*--mlp.csv"))
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames), next(reader)


def write(path, header, row):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerow(row)
    return path


FIELDS = numeric_fields()


@given(which=st.sampled_from(range(len(FIELDS))), data=st.data(), out=st.booleans())
@DRAW
def test_every_field_reads_within_its_bounds_and_refuses_beyond(tmp_path_factory, which, data,
                                                                out):
    table, f = FIELDS[which]
    header, row = first_row(table)
    if f["name"] not in header:
        header.append(f["name"])
    high = _high(table, f, row)
    value = data.draw(beyond(f, high) if out else inside(f, high), label="value")
    row = dict(row, **{f["name"]: value})
    path = write(tmp_path_factory.mktemp("b") / f"{table}.csv", header, row)
    try:
        read(Row.types[table], path)
    except DataError as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith(str(path)), text
        if out:  # the bound, with its unit, for this row and field
            assert f"row 1, field '{f['name']}'" in text, text
            by = f.get("boundsByName", {}).get(row.get("name"))
            assert (_words(f) in text) or (by and f"at most {by['maximum']:g} {by['unit']}"
                                           in text), text
        else:  # within its bounds: only a rule across fields may refuse it, never its bounds
            assert _words(f) not in text, text
        return
    assert not out, f"{table}.{f['name']} = {value} was read"


# ---------------------------------------------------------------------------- through the CLI
BASE = ["--model", "llama-3.1-8b", "--tokens", "4096"]
#: a user's row of each table the command line takes, and a command reading it
USER_ROWS = {
    "models": ("llama-3.1-8b", ["compare", "--gpu", "h100-sxm", "--tier", "host-dram",
                                "--tokens", "4096", "--model"]),
    "gpus": ("h100-sxm", ["compare", *BASE, "--tier", "host-dram", "--gpu"]),
    "nodes": ("dgx-h100", ["tiers", *BASE, "--resume-rate", "1", "--node"]),
    "pools": ("3fs-nvme", ["compare", *BASE, "--gpu", "h100-sxm", "--pool"]),
    "codecs": ("cachegen", ["compare", *BASE, "--gpu", "h100-sxm", "--tier", "rdma", "--codec"]),
    "engines": ("vllm-lbhnc", ["compare", *BASE, "--gpu", "h100-sxm", "--tier", "host-dram",
                               "--engine"]),
    "pauses": ("conversation-fitted", ["reuse", *BASE, "--gpu", "h100-sxm", "--tier",
                                       "host-dram", "--pause"]),
    "prices": ("ddr5_usd_per_GB", ["reuse", *BASE, "--gpu", "h100-sxm", "--tier", "host-dram",
                                   "--prices"]),
}
USER_FIELDS = [(t, f) for t, f in FIELDS if t in USER_ROWS]


def _row_of(table, name):
    header, _ = first_row(table)
    with open(data_path(package()[table]["path"]), newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["name"] == name)
    return header, row


def contract(code, out, err):
    """A finite answer, or one line and exit 2: never a traceback, nan or inf."""
    assert code in (0, 2) and "Traceback" not in out + err, (code, err)
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("kvmath: error: "), err
        return
    assert err == "" and "nan" not in out.lower().replace("nanosecond", "")
    json.loads(out)


@given(which=st.sampled_from(range(len(USER_FIELDS))), data=st.data(), out=st.booleans())
@example(which=next(i for i, (t, f) in enumerate(USER_FIELDS)
                    if (t, f["name"]) == ("codecs", "compression_ratio")), data=None, out=True)
@DRAW
def test_a_users_row_through_the_command_line(tmp_path_factory, capsys, which, data, out):
    table, f = USER_FIELDS[which]
    name, argv = USER_ROWS[table]
    header, row = _row_of(table, name)
    high = _high(table, f, row)
    value = "1e300" if data is None else data.draw(beyond(f, high) if out else inside(f, high),
                                                   label="value")
    if f["name"] not in header:
        header.append(f["name"])
    path = write(tmp_path_factory.mktemp("u") / f"{table}.csv", header,
                 dict(row, **{f["name"]: value}))
    code = main([*argv, str(path), "--json"])
    got, err = capsys.readouterr()
    contract(code, got, err)
    if out:
        assert code == 2 and f"{path}, row 1, field '{f['name']}'" in err, err


@pytest.mark.parametrize("table, field, value, words", [
    ("codecs", "compression_ratio", "1e300", "a number from 1 to 1000"),
    ("codecs", "decode_Bps", "1e300", "at most 1e+15 B/s"),
    ("codecs", "measured_gpu", "h999", "unknown GPU 'h999'"),
    ("nodes", "host_dram_bytes", "1e300", "at most 1e+15 B"),
    ("nodes", "nvme_drives", "1000000000", "an integer from 0 to 1,024 drives"),
    ("pools", "client_nics", "1000", "an integer from 1 to 256 NICs"),
    ("prices", "value", "1e300", "at most 1e+06"),
    ("prices", "value", "20000", "at most 10000 USD per 1e9 B for ddr5_usd_per_GB"),
])
def test_the_issues_rows_are_refused_in_words(tmp_path, capsys, table, field, value, words):
    name, argv = USER_ROWS[table]
    header, row = _row_of(table, name)
    path = write(tmp_path / f"{table}.csv", header, dict(row, **{field: value}))
    code = main([*argv, str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{path}, row 1, field '{field}'" in err and words in err, err


def test_a_column_given_twice_is_refused(tmp_path, capsys):
    """issue 37: a pool row with client_nics twice was read with the second value."""
    name, argv = USER_ROWS["pools"]
    header, row = _row_of("pools", name)
    path = tmp_path / "pool.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header + ["client_nics"])
        w.writerow([row[h] for h in header] + ["4"])
    code = main([*argv, str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and f"{path}, field 'client_nics': a column given twice" in err, err


def test_a_pool_read_over_more_nics_than_a_node_holds_is_refused(tmp_path, capsys):
    """issue 37: client_nics 1000 on a node of 8 GPUs was answered. Within the field's bounds,
    a pool compared without a node is held to two NICs per GPU, with a node to its own."""
    name, argv = USER_ROWS["pools"]
    header, row = _row_of("pools", name)
    path = write(tmp_path / "pool.csv", header, dict(row, client_nics="100"))
    code = main([*argv, str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "100 NICs per GPU node" in err and "at most 16 (2 per GPU)" in err
    assert f"{path}, row 1, field 'client_nics'" in err
    code = main(["compare", *BASE, "--node", "dgx-h100", "--pool", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "node dgx-h100 has 8" in err, err


# ---------------------------------------------------------------------------- options
NUMERIC = [o for o in O.OPTIONS if not (o.kind.text or o.kind.flag or o.kind.choices)]
#: a command taking each option, with what it needs beside it
COMMAND_ARGS = {
    "compare": ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier",
                "host-dram", "--tokens", "4096"],
    "reuse": ["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
              "--tokens", "4096"],
    "tiers": ["tiers", "--model", "llama-3.1-8b", "--tokens", "4096", "--resume-rate", "1"],
    "trace": ["trace", "synthetic", "--model", "llama-3.1-8b"],
    "route": ["route", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2"],
    "fleet": ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--dask", "none"],
}


def option_value(kind, out):
    lo, hi = kind.minimum, kind.maximum
    if out:
        values = [hi * 10, 1e300, "inf", "nan", -1e300]
        values += [hi + 1, lo - 1] if kind.integer else [hi * (1 + 1e-6), lo / 10 if lo > 0
                                                          else -1e-6]
        if kind.below_max:
            values.append(hi)
        return st.sampled_from(values).map(lambda v: v if isinstance(v, str) else
                                           str(int(v)) if kind.integer and abs(v) < 1e18
                                           else repr(float(v)))
    if kind.integer:
        return st.integers(int(lo), int(hi)).map(str)
    return st.floats(lo, hi, exclude_max=kind.below_max, allow_nan=False).map(repr)


@given(which=st.sampled_from(range(len(NUMERIC))), data=st.data(), out=st.booleans())
@example(which=next(i for i, o in enumerate(NUMERIC) if o.name == "max-num-seqs"), data=None,
         out=True)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_option_refuses_beyond_its_bounds(capsys, which, data, out):
    """Beyond its bounds an option is refused by argparse, naming it and its bounds with the
    unit (1e9 sequences for fleet --max-num-seqs); within them the parser takes it (what the
    command answers is its own business: the hostile-argument tests hold that contract)."""
    from kvmath.cli.main import build_parser
    from kvmath.errors import UsageError
    o = NUMERIC[which]
    command = "fleet" if data is None else next(c for c in COMMAND_ARGS if c in o.commands)
    value = "1000000000" if data is None else data.draw(option_value(o.kind, out),
                                                        label="value")
    argv = COMMAND_ARGS[command][1:] + [f"--{o.name}={value}"]  # "=": -1e300 is no flag
    parser = build_parser()
    if out:
        with pytest.raises(UsageError) as info:
            parser.parse_args([command, *argv])
        assert f"argument --{o.name}: expected {o.kind.words}" in str(info.value)
        code = main([command, *argv])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and o.kind.words in err, err
    else:
        args = parser.parse_args([command, *argv])
        assert getattr(args, o.key) == o.kind.from_text(value)


def test_fleet_says_no_hbm_holds_its_running_batch(capsys):
    """issue 37: fleet --batch-seqs 1e9 was answered feasible. Route and fleet now schedule
    their batches as the engine does (issue 35): --max-num-seqs is bounded, and a layout whose
    weights leave a replica no KV is refused in words."""
    for cmd in ("fleet", "route"):
        code = main([*COMMAND_ARGS[cmd], "--max-num-seqs", "1000000000"])
        err = capsys.readouterr().err
        assert code == 2 and "from 1 to 1,000,000" in err and err.count("\n") == 1, err
        code = main([cmd, "synthetic", "--model", "llama-3.1-70b", "--nodes", "2", "--tp", "1"])
        err = capsys.readouterr().err
        assert code == 2 and "cannot hold" in err and err.count("\n") == 1, err
    code = main([*COMMAND_ARGS["fleet"], "--batch-seqs", "16"])
    assert code == 2 and "--batch-seqs" in capsys.readouterr().err  # not silently dropped