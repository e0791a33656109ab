"""The contract held everywhere (issue 37, item 5): one line naming what went wrong, exit 2, for
an output that cannot be written (a full disk: fleet and route had exited 1) and a work
directory that fills (a trace's blocks on a full disk: said to be "the output"); and every name
printed from a user's file or the command line (a node, a pool, a model, a path) shows as one
visible line: a terminal escape or a newline in it is escaped, never acted on."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest

from kvmath.cli.main import main
from kvmath.tables.rows import data_path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "list": ["list"],
    "compare": ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme",
                "--tokens", "4096"],
    "reuse": ["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme",
              "--tokens", "4096"],
    "tiers": ["tiers", "--model", "llama-3.1-8b", "--tokens", "4096", "--resume-rate", "1"],
    "trace": ["trace", "synthetic", "--model", "llama-3.1-8b"],
    "route": ["route", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2"],
    "fleet": ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--dask", "none"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("as_json", [False, True])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(command, as_json):
    """issue 37: fleet and route into /dev/full exited 1 where the contract says 2."""
    argv = COMMANDS[command] + (["--json"] if as_json and command != "list" else [])
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "kvmath", *argv], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "cannot write the output" in p.stderr, p.stderr


CHILD = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a
resource.setrlimit(resource.RLIMIT_FSIZE, (40960, 40960))  # full disk, not a killed process
from kvmath.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def parquet_trace(tmp_path_factory):
    """The synthetic trace as a generic Parquet file (DuckDB parses it into a database file in
    the work directory)."""
    import duckdb
    src = data_path("traces/synthetic_trace.jsonl.gz")
    path = tmp_path_factory.mktemp("p") / "syn.parquet"
    duckdb.sql(f"COPY (SELECT timestamp / 1000.0 AS timestamp_s, input_length AS prompt_tokens, "
               f"hash_ids::UBIGINT[] AS block_hashes, 512::BIGINT AS block_tokens, "
               f"output_length::BIGINT AS output_tokens FROM read_json('{src}')) "
               f"TO '{path}' (FORMAT parquet)")
    return path


@pytest.mark.parametrize("argv", [
    ["route", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2"],
    ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--dask", "none"],
    ["route", "PARQUET", "--model", "llama-3.1-8b", "--nodes", "2"],
    ["fleet", "PARQUET", "--model", "llama-3.1-8b", "--nodes", "2", "--dask", "none"],
    ["trace", "PARQUET", "--model", "llama-3.1-8b", "--sample-rate", "0.5"],
])
def test_a_work_directory_that_fills_is_one_line_and_exit_2(parquet_trace, argv):
    """issue 37: a trace's blocks on a full disk were said to be "the output" (exit 1), or the
    trace was called unreadable."""
    argv = [str(parquet_trace) if a == "PARQUET" else a for a in argv]
    p = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and "the work directory cannot hold the trace's blocks" \
        in p.stderr and "TMPDIR" in p.stderr and "Traceback" not in p.stderr, p.stderr


# ---------------------------------------------------------------------------- control characters
EVIL = "evil\x1b[31m\nname\u202e"


def _row_file(path, table, base, **change):
    with open(data_path(f"{table}.csv"), newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    row = dict(next(r for r in rows if r["name"] == base), **change)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerow(row)
    return str(path)


def _one_visible_block(out, baseline):
    """No control character reaches the terminal, and the answer has the lines it has with a
    plain name (a newline in a name made two)."""
    assert "\x1b" not in out and "\u202e" not in out
    assert out.count("\n") == baseline.count("\n"), out
    if "plain" in baseline:  # the name is printed: escaped
        assert "evil\\x1b[31m\\nname\\u202e" in out, out


@pytest.mark.parametrize("argv", [
    ["tiers", "--model", "llama-3.1-8b", "--tokens", "4096", "--resume-rate", "1", "--node",
     "NODE"],
    ["compare", "--model", "llama-3.1-8b", "--tier", "nvme", "--tokens", "4096", "--node",
     "NODE"],
    ["trace", "synthetic", "--model", "llama-3.1-8b", "--node", "NODE"],
    ["route", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--node", "NODE"],
    ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--node", "NODE",
     "--dask", "none"],
    ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tokens", "4096", "--pool",
     "POOL"],
    ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2", "--pool", "POOL",
     "--dask", "none"],
    ["compare", "--model", "MODEL", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens", "4096"],
])
def test_a_name_with_a_terminal_escape_or_a_newline_prints_as_one_visible_name(
        tmp_path, capsys, argv):
    """issue 37: a pool or node name with a terminal escape or a newline was printed raw."""
    files = {}
    for key, table, base in (("NODE", "nodes", "dgx-h100"), ("POOL", "pools", "3fs-nvme"),
                             ("MODEL", "models", "llama-3.1-8b")):
        files[key] = (_row_file(tmp_path / f"{table}-plain.csv", table, base, name="plain"),
                      _row_file(tmp_path / f"{table}-evil.csv", table, base, name=EVIL))
    plain = [files[a][0] if a in files else a for a in argv]
    evil = [files[a][1] if a in files else a for a in argv]
    assert main(plain) == 0
    baseline = capsys.readouterr().out
    code = main(evil)
    out, err = capsys.readouterr()
    assert code == 0, err
    _one_visible_block(out, baseline)


def test_an_error_naming_a_path_with_control_characters_is_one_line(tmp_path, capsys):
    path = tmp_path / "a\nb\x1b[2J.csv"
    code = main(["compare", "--model", str(path), "--gpu", "h100-sxm", "--tier", "nvme",
                 "--tokens", "4096"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err and "a\\nb\\x1b[2J" in err
