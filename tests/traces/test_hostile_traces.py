"""Hostile trace files and the trace commands' bounds (issue 20, the failures verify-20 left):
each bad file gets exactly one stderr line naming the file, line (or row) and field, exit 2, no
traceback, no hang and bounded memory; sampling reads a sample; an interrupt ends quietly.

Big inputs are built in tmp_path (sparse files, gzip of repeated bytes), so the file runs in
well under a minute."""
import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kvmath.cli.main import main
from kvmath.traces import readers as T

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}


def rows(n=4, **change):
    """n valid Mooncake records, 1 s apart, distinct hashes."""
    return [dict(GOOD, timestamp=1000 * i, hash_ids=[2 * i + 1, 2 * i + 2], **change)
            for i in range(n)]


def write(path, lines, gz=False):
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return str(path)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, out, err, path, *expected):
    """The contract: exit 2, nothing on stdout, one stderr line naming the file and each of
    expected."""
    assert code == 2 and out == "", (code, out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"kvmath: error: {path}"), err
    for x in expected:
        assert x in err, (x, err)
    assert "nan" not in err.lower().replace("nanosecond", "") and "inf " not in err


def child(code, timeout=120, memory_bytes=None):
    """Run Python code in a fresh interpreter on this tree (peak memory from VmHWM: the last
    line it prints); (returncode, stdout, stderr)."""
    pre = ""
    if memory_bytes:  # a runaway allocation fails here instead of exhausting the machine
        pre = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory_bytes}, "
               f"{memory_bytes}))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------------ F12: an interrupt
def test_sigint_during_a_duckdb_read_is_interrupted_not_a_traceback(tmp_path):
    """issue 20 F12: SIGINT while DuckDB parsed a trace ended in a RuntimeError("Query
    interrupted") traceback (DuckDB turns the signal into its own error). A real SIGINT is sent
    while DuckDB runs the parse (a file the compiled path does not take: a key escape)."""
    path = tmp_path / "big.jsonl"
    with open(path, "w") as fh:
        for i in range(150_000):
            fh.write(f'{{"timestamp": {i}, "input_lengt\\u0068": 1024, "output_length": 5, '
                     f'"hash_ids": [{2 * i + 1}, {2 * i + 2}]}}\n')
    code = f"""
        import os, subprocess, sys
        import duckdb
        real = duckdb.connect

        class Con:  # DuckDB's connection, signalling this process once the parse has begun
            def __init__(self, *a, **k):
                self.con = real(*a, **k)
            def execute(self, sql, *a):
                if sql.startswith("CREATE TABLE"):  # from another process: a timer thread
                    # here needs the GIL, which a compiled loop after the parse may hold to the
                    # end (the signal then came at exit, and the test failed under load)
                    subprocess.Popen(["sh", "-c", f"sleep 0.05; kill -INT {{os.getpid()}}"])
                return self.con.execute(sql, *a)
            def __getattr__(self, name):
                return getattr(self.con, name)
        duckdb.connect = Con
        from kvmath.cli.main import main
        sys.exit(main(["trace", {str(path)!r}, "--model", "llama-3.1-8b"]))
    """
    rc, out, err = child(code)
    assert rc == 130 and err == "kvmath: interrupted\n", (rc, err[-2000:])


# ------------------------------------------------------------------ F10: fleet, no block
def test_fleet_on_prompts_shorter_than_a_block_answers_in_words(capsys, tmp_path):
    """issue 20 F10: no prompt fills a block, so no turn continues another and the reach is
    undefined: the fleet's summary had formatted None (a TypeError traceback)."""
    path = write(tmp_path / "short.jsonl", [
        {"timestamp": 1000 * i, "input_length": 100, "output_length": 10, "hash_ids": []}
        for i in range(6)])
    code, out, err = run(capsys, "fleet", path, "--model", "llama-3.1-8b", "--nodes", "2")
    assert code == 0 and err == "", err
    assert "no turn continues an earlier one" in out and "None" not in out
    assert "nan" not in out.lower().replace("nanosecond", "")


# ------------------------------------------------------------------ F5: a key given twice
@pytest.mark.parametrize("command", ["trace", "route"])
@pytest.mark.parametrize("first", ['"x"', "2000"])
@pytest.mark.parametrize("gz", [False, True])
def test_a_field_given_twice_names_its_line_and_field(capsys, tmp_path, command, first, gz):
    """issue 20 F5: {"timestamp": "x", "timestamp": 2000, ...} got "the reader failed but no bad
    line was found" (DuckDB reads the first value, json.loads the last); the same value twice
    was read without a word."""
    lines = [json.dumps(r) for r in rows()]
    lines[2] = lines[2].replace('{"timestamp": 2000', '{"timestamp": ' + first + ', "timestamp": 2000')
    path = write(tmp_path / ("t.jsonl.gz" if gz else "t.jsonl"), lines, gz)
    extra = ["--nodes", "2"] if command == "route" else []
    code, out, err = run(capsys, command, path, "--model", "llama-3.1-8b", *extra)
    one_error(code, out, err, path, "line 3, field 'timestamp'", "twice")


# ------------------------------------------------------------------ F19: session_id
def generic(n=4, **extra):
    return [dict({"timestamp_s": float(i), "prompt_tokens": 1024, "block_hashes": [2 * i + 1, 2 * i + 2],
                  "block_tokens": 512}, **extra) for i in range(n)]


@pytest.mark.parametrize("command", ["trace", "route"])
@pytest.mark.parametrize("form", ["jsonl", "jsonl.gz", "parquet"])
def test_a_session_id_is_refused_in_words_not_dropped(capsys, tmp_path, command, form):
    """issue 20 F19: a generic trace's session_id was type-checked, then dropped without a word
    (the same answer with or without it). Every column a reader is given is used or refused:
    the routers match turns by prefix hashes, so it is refused, naming the field and why."""
    recs = generic(session_id="s1")
    src = write(tmp_path / "g.jsonl", recs, gz=form == "jsonl.gz")
    path = src
    if form == "parquet":
        import duckdb
        path = str(tmp_path / "g.parquet")
        duckdb.sql(f"COPY (SELECT timestamp_s, prompt_tokens, block_hashes::UBIGINT[] AS "
                   f"block_hashes, block_tokens, session_id FROM read_json('{src}')) TO "
                   f"'{path}' (FORMAT parquet)")
    extra = ["--nodes", "2"] if command == "route" else []
    code, out, err = run(capsys, command, path, "--model", "llama-3.1-8b", *extra)
    expected = ["field 'session_id'", "not used"] + (["line 1"] if form != "parquet" else [])
    one_error(code, out, err, path, *expected)


# ------------------------------------------------------------------ F22: Parquet rows
PARQUET_GOOD = {"timestamp_s": "i::DOUBLE", "prompt_tokens": "1024::BIGINT",
                "block_hashes": "[2 * i + 1, 2 * i + 2]::UBIGINT[]", "block_tokens": "512::BIGINT",
                "output_tokens": "5::BIGINT"}


@pytest.mark.parametrize("column, value, expected", [
    ("output_tokens", "CASE WHEN i = 2 THEN -5 ELSE 5 END::BIGINT", "expected a non-negative integer"),
    ("timestamp_s", "CASE WHEN i = 2 THEN 'nan'::DOUBLE ELSE i END", "expected a non-negative number"),
    ("timestamp_s", "CASE WHEN i = 2 THEN 'inf'::DOUBLE ELSE i END", "not finite"),
    ("block_tokens", "CASE WHEN i = 2 THEN 256 ELSE 512 END::BIGINT", "same block size"),
    ("block_hashes", "CASE WHEN i = 2 THEN [5, -3] ELSE [2 * i + 1, 2 * i + 2] END::BIGINT[]",
     "non-negative 64-bit integer hashes"),
    ("prompt_tokens", "CASE WHEN i = 2 THEN 0 ELSE 1024 END::BIGINT", "positive number of prompt"),
    ("prompt_tokens", "CASE WHEN i = 2 THEN 18446744073709551615 ELSE 1024 END::UBIGINT",
     "below 2^63"),
    ("block_hashes", "CASE WHEN i = 2 THEN [5, 5] ELSE [2 * i + 1, 2 * i + 2] END::UBIGINT[]",
     "distinct"),
    ("block_hashes", "CASE WHEN i = 2 THEN [5] ELSE [2 * i + 1, 2 * i + 2] END::UBIGINT[]",
     "block hashes for 1024 tokens"),
    ("timestamp_s", "CASE WHEN i = 2 THEN 0.5 ELSE i END::DOUBLE", "backwards"),
])
def test_parquet_errors_name_the_row_and_field(capsys, tmp_path, column, value, expected):
    """issue 20 F22: a bad Parquet value got "line 1: bad row: expected ..." naming no field (and
    for output_tokens not mentioning it), and a negative value in a BIGINT[] block_hashes got
    DuckDB's conversion error, naming no row."""
    import duckdb
    cols = dict(PARQUET_GOOD, **{column: value})
    path = str(tmp_path / "t.parquet")
    duckdb.sql(f"COPY (SELECT {', '.join(f'{v} AS {k}' for k, v in cols.items())} "
               f"FROM range(4) r(i) ORDER BY i) TO '{path}' (FORMAT parquet)")
    code, out, err = run(capsys, "trace", path, "--model", "llama-3.1-8b")
    one_error(code, out, err, path, f"row 3, field '{column}'", expected)


# ------------------------------------------------------------------ F4, F6: long lines, bombs
def test_the_line_cap_holds_the_longest_prompt_a_bundled_model_takes():
    """MAX_LINE_BYTES is the stated reason's size: the longest context window of a bundled model
    in vLLM's default 16-token blocks, each hash 20 digits and a separator, fits one line."""
    from kvmath.tables.rows import bundled
    longest = max(m.max_context_tokens for m in bundled().models.values())
    record = len(json.dumps(dict(GOOD, input_length=longest, hash_ids=[])))
    assert record + -(-longest // 16) * len(str(2 ** 64 - 1) + ", ") <= T.MAX_LINE_BYTES


def padded(n_bytes):
    """Mooncake records whose third line is exactly n_bytes long (spaces inside the object)."""
    lines = [json.dumps(r) for r in rows()]
    lines[2] = lines[2][:-1] + " " * (n_bytes - len(lines[2])) + "}"
    assert len(lines[2]) == n_bytes
    return lines


@pytest.mark.parametrize("command", ["trace", "route"])
@pytest.mark.parametrize("gz", [False, True])
def test_a_line_at_the_cap_is_read_and_one_past_it_is_named(capsys, tmp_path, command, gz):
    """issue 20 F4: a 100 MB line got "the reader failed but no bad line was found". A line of
    MAX_LINE_BYTES is read (by DuckDB's reader for trace, the compiled one for route); one byte
    more is one line naming the line, that it is too long, and the cap."""
    extra = ["--nodes", "2"] if command == "route" else []
    name = "t.jsonl.gz" if gz else "t.jsonl"
    ok = write(tmp_path / ("ok-" + name), padded(T.MAX_LINE_BYTES), gz)
    code, out, err = run(capsys, command, ok, "--model", "llama-3.1-8b", "--json", *extra)
    assert code == 0 and err == "" and json.loads(out)["requests"] == 4, err
    bad = write(tmp_path / ("long-" + name), padded(T.MAX_LINE_BYTES + 1), gz)
    code, out, err = run(capsys, command, bad, "--model", "llama-3.1-8b", *extra)
    one_error(code, out, err, bad, "line 3", f"longer than {T.MAX_LINE_BYTES:,} bytes")


def _gzip_of(parts):
    """A gzip file of concatenated members (valid gzip): each part (bytes, repeat) compressed
    once and repeated, so gigabytes of data are built in a fraction of a second."""
    return b"".join(gzip.compress(data, 1) * repeat for data, repeat in parts)


CHILD_RUNS = """
import contextlib, io, json, sys
from kvmath.cli.main import main
out = []
for argv in {argvs!r}:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    out.append([rc, err.getvalue()])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({{"runs": out, "peak_rss_bytes": int(hwm) * 1024}}))
"""


def test_endless_lines_and_gzip_bombs_stop_at_the_cap_in_bounded_memory(tmp_path):
    """issue 20 F6: a 5 GB sparse file without a newline took 10.6 GB of memory before its
    error; a gzip bomb (2 GB of zeros in 8.7 MB) took 4 GB and 59 s; a gzip holding a 1 GB
    whitespace-padded line took 2.9 GB. Each is now read to the line cap and refused naming
    the file, the line, how far the read got and the cap, by every trace command, in bounded
    memory (one fresh process for all of them; an address-space limit guards the machine)."""
    sparse = tmp_path / "sparse.jsonl"
    with open(sparse, "wb") as fh:
        fh.truncate(5 << 30)  # 5 GiB of NUL bytes, no newline, no disk used
    zeros = tmp_path / "bomb.jsonl.gz"
    zeros.write_bytes(_gzip_of([(b"\0" * (64 << 20), 32)]))  # 2 GiB of zeros
    spaces = tmp_path / "bomb2.jsonl.gz"
    head = json.dumps(GOOD)[:-1].encode()
    spaces.write_bytes(_gzip_of([(head, 1), (b" " * (64 << 20), 16), (b"}\n", 1)]))  # 1 GiB line
    argvs = [[command, str(path), "--model", "llama-3.1-8b"] + (["--nodes", "2"] if command != "trace" else [])
             for path in (sparse, zeros, spaces) for command in ("trace", "route", "fleet")]
    rc, out, err = child(CHILD_RUNS.format(argvs=argvs), timeout=300, memory_bytes=4 << 30)
    assert rc == 0, err[-3000:]
    result = json.loads(out)
    for argv, (code, message) in zip(argvs, result["runs"]):
        one_error(code, "", message, argv[1], "line 1", f"longer than {T.MAX_LINE_BYTES:,} bytes",
                  "the read stopped after")
    assert result["peak_rss_bytes"] < 1 << 30, result["peak_rss_bytes"]


# ------------------------------------------------------------------ F2, F3: names that lie
@pytest.mark.parametrize("command", ["trace", "route"])
@pytest.mark.parametrize("name, gz", [("plain.jsonl.gz", False), ("gzip.json", True),
                                      ("gzip.jsonl", True)])
@pytest.mark.parametrize("escaped", [False, True])
def test_gzip_is_told_by_its_bytes_not_its_name(capsys, tmp_path, command, name, gz, escaped):
    """issue 20 F2, F3: plain JSONL named .gz, or gzip data named .json, got "the reader failed
    but no bad line was found" (DuckDB took the compression from the name). Both are read, by
    the compiled reader and (a key spelt with an escape) by DuckDB's, as the same file named
    right."""
    lines = [json.dumps(r) for r in rows(6)]
    if escaped:
        lines = [x.replace('"output_length"', '"output_lengt\\u0068"') for x in lines]
    path = write(tmp_path / name, lines, gz)
    right = write(tmp_path / ("right.jsonl.gz" if gz else "right.jsonl"), lines, gz)
    extra = ["--nodes", "2"] if command == "route" else []
    answers = []
    for p in (path, right):
        code, out, err = run(capsys, command, p, "--model", "llama-3.1-8b", "--json", *extra)
        assert code == 0 and err == "", err
        answers.append({k: v for k, v in json.loads(out).items() if k != "trace"})
    assert answers[0] == answers[1]


# ------------------------------------------------------------------ F1, F8: sampling
def same_sample(a, b):
    for f in ("timestamp_s", "prompt_tokens", "output_tokens", "n_blocks", "rid", "pos", "hashes"):
        x, y = getattr(a, f), getattr(b, f)
        assert np.array_equal(x, y) and x.dtype == y.dtype, f
    assert (a.block_tokens, a.sample_rate, a.full_positions) == \
        (b.block_tokens, b.sample_rate, b.full_positions)


@pytest.mark.parametrize("form", ["bundled", "escaped", "parquet"])
def test_a_sample_read_as_the_file_is_read_is_the_sample_of_the_whole(tmp_path, form):
    """load(R) samples while reading (the compiled reader, or DuckDB into a file on disk for
    what it does not take): the same accesses, weights and columns as sampling the whole."""
    path = "synthetic"
    if form != "bundled":
        src = T.resolve_path("synthetic")
        text = gzip.decompress(src.read_bytes()).decode()
        path = tmp_path / "t.jsonl"  # an escaped key: the compiled reader leaves it to DuckDB
        path.write_text(text.replace('"output_length"', '"output_lengt\\u0068"'))
        path = str(path)
        if form == "parquet":
            import duckdb
            pq = str(tmp_path / "t.parquet")
            duckdb.sql(f"COPY (SELECT timestamp / 1000.0 AS timestamp_s, input_length AS "
                       f"prompt_tokens, hash_ids::UBIGINT[] AS block_hashes, 512 AS block_tokens, "
                       f"output_length AS output_tokens FROM read_json('{src}')) TO '{pq}' "
                       f"(FORMAT parquet)")
            path = pq
    whole = T.load(path)
    for rate, full in ((0.05, 1), (0.3, 2)):
        same_sample(T.load(path, sample_rate=rate, full_positions=full),
                    T.sample(whole, rate, full_positions=full))


def test_trace_sample_rate_reads_a_sample_in_bounded_memory(tmp_path):
    """issue 20 F1: `kvmath trace FILE --sample-rate R` loaded the whole trace (and answered the
    exact replay, the sample only feeding a JSON curve): a 1M-request trace took 1.77 GiB either
    way. It now samples while reading and answers from the sample: 20 million block accesses
    (about 300 MB held whole) are read in a small fraction of that (benchmarks/trace_bench.py
    measures 1M requests)."""
    path = tmp_path / "big.jsonl"
    n, per = 100_000, 200
    with open(path, "w") as fh:
        for i in range(n):
            base = (i // 8) * 1000  # 8 requests share a chain: some reuse
            hashes = ", ".join(str(base + j) for j in range(per))
            fh.write(f'{{"timestamp": {i * 10}, "input_length": {per * 512}, "output_length": 7, '
                     f'"hash_ids": [{hashes}]}}\n')
    code = f"""
        import contextlib, io, json
        from kvmath.cli.main import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["trace", {str(path)!r}, "--model", "llama-3.1-8b", "--sample-rate", "0.01",
                       "--json"])
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
        print(json.dumps({{"rc": rc, "answer": json.loads(out.getvalue()),
                          "peak_rss_bytes": int(hwm) * 1024}}))
    """
    rc, out, err = child(code, timeout=300, memory_bytes=4 << 30)
    assert rc == 0 and err == "", err[-3000:]
    r = json.loads(out)
    a = r["answer"]
    assert r["rc"] == 0 and a["requests"] == n and a["block_accesses"] == n * per
    # every first block, and about 1% of the other 19.9M
    assert n + 0.009 * n * (per - 1) < a["sampled_accesses"] < n + 0.011 * n * (per - 1)
    # imports (numba, DuckDB) and the reader's 16 MB chunk; the accesses alone would be 400 MB
    assert r["peak_rss_bytes"] < 450 << 20, r["peak_rss_bytes"]


def test_trace_sample_rate_answers_what_a_sample_gives(capsys):
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b",
                         "--sample-rate", "0.1", "--json")
    assert code == 0 and err == "" and "NaN" not in out and "Infinity" not in out
    r = json.loads(out)
    rows_ = r["lru_at_tier_capacity"]
    assert [x["tiers"][-1] for x in rows_] == ["hbm", "host-dram", "nvme"]
    rates = [x["token_hit_rate"] for x in rows_]
    assert rates == sorted(rates) and rates[-1] <= r["max_token_hit_rate"] + 1e-12
    assert "tiers" not in r and "reuse" not in r and "every block access" in r["not_computed"]
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b",
                         "--sample-rate", "0.1")
    assert code == 0 and "one LRU of the capacity of" in out and "not computed" in out


@pytest.mark.parametrize("flag", [["--policy", "ttl"], ["--policy", "ttl", "--ttl", "5"],
                                  ["--writes", "through"],
                                  ["--policy", "selective", "--min-uses", "3"]])
def test_replay_options_beside_a_sample_are_refused(capsys, tmp_path, flag):
    """A sample answers without the tier replay: its options would be silently ignored. On the
    line or in a scenario file."""
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b",
                         "--sample-rate", "0.1", *flag)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{flag[0]} means nothing with --sample-rate" in err
    toml = tmp_path / "s.toml"
    toml.write_text(f'model = "llama-3.1-8b"\nsample_rate = 0.1\n{flag[0][2:]} = "{flag[1]}"\n')
    code, out, err = run(capsys, "trace", "synthetic", "--scenario", toml)
    assert code == 2 and f"{flag[0]} means nothing with --sample-rate" in err, err


@pytest.mark.parametrize("rate, words", [("1e-10", "keeps no block"),
                                         ("1e-15", "keeps no block"),
                                         ("1e-6", "kept none of the trace's")])
def test_a_sample_rate_that_keeps_nothing_is_refused_by_name(capsys, rate, words):
    """issue 20 F8: --sample-rate 1e-10 (inside the option's bounds) got "an input is out of
    range" naming nothing: the rate rounds to no hash at all (a 32-bit threshold of 0), and a
    weight of 1/0 overflowed. A rate that keeps no hash-sampled block is refused, naming the
    option and why."""
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b",
                         "--sample-rate", rate)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"kvmath: error: --sample-rate {float(rate):g}") and words in err, err
