"""Hostile input to the command line: every answer is a clean number or one line and exit 2.

Integer overflow, NaN and infinity, absurd magnitudes in options and in a user's model row,
and a byte-order mark on a CSV header: never a traceback, never nan or inf printed.
"""
import csv
import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kvmath.cli.main import main
from kvmath.tables.rows import data_path

NUMBERS = st.one_of(
    st.integers(-10, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["9223372036854775807", "1e300", "-0", "nan", "inf", "1e-300", "0x10",
                     "", " ", "1_000", "١٢٣"]),
)


def _clean(code, out, err):
    assert code in (0, 2)
    assert "Traceback" not in out + err
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("kvmath: error:")
    else:
        assert err == ""
        low = out.lower()
        assert "nan" not in low.replace("nanosecond", "") and "infx" not in low
        if out.lstrip().startswith("{"):
            json.loads(out)  # strict JSON: no NaN or Infinity tokens
            assert "NaN" not in out and "Infinity" not in out


@given(tokens=NUMBERS, tp=NUMBERS, bandwidth=NUMBERS, efficiency=NUMBERS,
       as_json=st.booleans())
@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])
# a subnormal bandwidth times a tiny efficiency once underflowed to a division by zero
@example(tokens="1", tp="1", bandwidth="2.225073858507e-311", efficiency="1e-300", as_json=False)
def test_compare_options(capsys, tokens, tp, bandwidth, efficiency, as_json):
    argv = ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme",
            "--tokens", tokens, "--tp", tp, "--bandwidth", bandwidth, "--efficiency", efficiency]
    code = main(argv + (["--json"] if as_json else []))
    _clean(code, *capsys.readouterr())


FIELDS = ["layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "vocab_size", "max_context_tokens", "window_layers"]


@given(field=st.sampled_from(FIELDS), value=NUMBERS, tokens=st.sampled_from(["1", "4096"]))
@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_hostile_model_row(tmp_path_factory, capsys, field, value, tokens):
    with open(data_path("models.csv"), newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    row = dict(next(r for r in rows if r["name"] == "llama-3.1-8b"), name="mine")
    row[field] = value
    path = tmp_path_factory.mktemp("m") / "model.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerow(row)
    code = main(["compare", "--model", str(path), "--gpu", "h100-sxm", "--tier", "host-dram",
                 "--tokens", tokens, "--json"])
    _clean(code, *capsys.readouterr())


@given(rate=NUMBERS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tiers_resume_rate(capsys, rate):
    code = main(["tiers", "--model", "llama-3.1-8b", "--tokens", "8192", "--resume-rate", rate])
    _clean(code, *capsys.readouterr())


def test_named_cases(capsys, tmp_path):
    """The cases issue 8 names, one by one."""
    code = main(["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme",
                 "--tokens", "9223372036854775807"])
    out, err = capsys.readouterr()
    assert code == 2 and "--tokens" in err
    code = main(["tiers", "--model", "llama-3.1-70b", "--tokens", "32768", "--resume-rate", "1e300"])
    out, err = capsys.readouterr()
    assert code == 2 and "--resume-rate" in err and "nan" not in out + err
    with open(data_path("models.csv"), newline="") as fh:
        text = fh.read()
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeff".encode() + text.encode())
    code = main(["compare", "--model", str(bom), "--gpu", "h100-sxm", "--tier", "host-dram",
                 "--tokens", "1000"])
    out, err = capsys.readouterr()
    assert code == 2 and "expected exactly one row" in err  # the header was read, BOM and all
    huge = tmp_path / "huge.csv"
    rows = list(csv.DictReader(text.splitlines()))
    row = dict(next(r for r in rows if r["name"] == "llama-3.1-8b"), head_dim="1e300", name="h")
    with open(huge, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerow(row)
    code = main(["compare", "--model", str(huge), "--gpu", "h100-sxm", "--tier", "host-dram",
                 "--tokens", "1000", "--tp", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
