"""The file named is the file read (issue 37, item 3 and the trace cases of item 5): a trace's
path reaches its reader literally, so DuckDB expands no glob or bracket in it (``h[1].parquet``
beside ``h1.parquet`` read the other file; ``j*.jsonl`` several) and takes no ``x=1`` directory
as a column; a FIFO, a directory, a name too long or deep nesting is one line saying what it
is, for every command that reads a trace (trace, route, fleet)."""
import json
import os

import pytest

from kvmath.cli.main import main

MODEL = ["--model", "llama-3.1-8b"]
#: what each command that reads a trace needs beside it
EXTRA = {"trace": [], "route": ["--nodes", "2"], "fleet": ["--nodes", "2", "--dask", "none"]}


def records(n):
    """n generic records (the DuckDB path for JSONL, not the compiled canonical one: a
    generic trace and its Parquet twin go through the same SQL)."""
    return [{"timestamp_s": float(i), "prompt_tokens": 1024,
             "block_hashes": [2 * i + 1, 2 * i + 2], "block_tokens": 512, "output_tokens": 5}
            for i in range(n)]


def write(path, n, form):
    """A trace of n requests at path, as JSONL or Parquet."""
    text = "".join(json.dumps(r) + "\n" for r in records(n))
    if form == "jsonl":
        path.write_text(text)
        return
    import duckdb
    src = path.with_name(f"src-{n}.jsonl.tmp")
    src.write_text(text)
    lit = str(src).replace("'", "''")
    duckdb.sql(f"COPY (SELECT timestamp_s, prompt_tokens, block_hashes::UBIGINT[] AS "
               f"block_hashes, block_tokens, output_tokens FROM read_json('{lit}', "
               f"hive_partitioning=false)) TO "
               f"'{str(path).replace(chr(39), chr(39) * 2)}' (FORMAT parquet)")
    src.unlink()


def requests(capsys, command, path):
    code = main([command, str(path), *MODEL, *EXTRA[command], "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)["requests"]


@pytest.mark.parametrize("command", ["trace", "route", "fleet"])
@pytest.mark.parametrize("form", ["jsonl", "parquet"])
@pytest.mark.parametrize("named, decoys", [
    ("h[1]", ["h1"]),             # a bracket: DuckDB read h1 instead
    ("j*", ["j1", "j2"]),         # a star: DuckDB read every file it matched
    ("x?", ["xa"]),
    ("[!a]", ["b"]),
    ("it's", []),                 # a quote, doubled in the SQL literal
])
def test_a_glob_character_in_a_trace_path_is_literal(capsys, tmp_path, command, form, named,
                                                     decoys):
    for i, decoy in enumerate(decoys):
        write(tmp_path / f"{decoy}.{form}", 7 + i, form)
    path = tmp_path / f"{named}.{form}"
    write(path, 5, form)
    assert requests(capsys, command, path) == 5


@pytest.mark.parametrize("command", ["trace", "route"])
@pytest.mark.parametrize("form", ["jsonl", "parquet"])
def test_a_directory_named_like_a_hive_partition_is_no_column(capsys, tmp_path, command, form):
    """DuckDB took a directory x=1 in the path for a column x (hive partitioning): the Parquet
    trace was refused for an unknown column it does not hold."""
    d = tmp_path / "block_tokens=7"
    d.mkdir()
    path = d / f"t.{form}"
    write(path, 5, form)
    assert requests(capsys, command, path) == 5


def one_line(code, out, err, *expected):
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith("kvmath: error: ") and "Traceback" not in err
    for x in expected:
        assert x in err, (x, err)


@pytest.mark.parametrize("command", ["trace", "route", "fleet"])
def test_a_fifo_or_a_directory_is_named_as_what_it_is(capsys, tmp_path, command):
    """issue 37: both were called "no such trace file"."""
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    for path, what in ((fifo, "a FIFO, not a regular file"),
                       (folder, "a directory, not a regular file")):
        code = main([command, str(path), *MODEL, *EXTRA[command]])
        one_line(code, *capsys.readouterr(), str(path), what)
    code = main([command, str(tmp_path / "none.jsonl"), *MODEL, *EXTRA[command]])
    one_line(code, *capsys.readouterr(), "no such trace file")


@pytest.mark.parametrize("command", ["trace", "route", "fleet"])
@pytest.mark.parametrize("where", ["first", "third"])
def test_a_trace_nested_deep_is_one_line(capsys, tmp_path, command, where):
    """issue 37: a JSON line nested 100,000 deep ended route in a RecursionError traceback."""
    deep = "[" * 100_000 + "]" * 100_000
    lines = [json.dumps(r) for r in records(4)]
    i = 0 if where == "first" else 2
    lines[i] = lines[i][:-1] + f', "x": {deep}}}'
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code = main([command, str(path), *MODEL, *EXTRA[command]])
    one_line(code, *capsys.readouterr(), f"line {i + 1}")


@pytest.mark.parametrize("command", ["trace", "route", "fleet"])
def test_a_path_too_long_or_with_a_newline_is_one_line(capsys, tmp_path, command):
    """issue 37: a path holding a newline made a two-line error; a name longer than the
    system's (ENAMETOOLONG) is said, not a traceback."""
    for path in (tmp_path / "two\nlines.jsonl", tmp_path / ("a" * 300 + ".jsonl"),
                 tmp_path / "esc\x1b[31mred.jsonl"):
        code = main([command, str(path), *MODEL, *EXTRA[command]])
        out, err = capsys.readouterr()
        one_line(code, out, err)
        assert "\x1b" not in err
