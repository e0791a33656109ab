"""Fuzzing every file a user hands kvmath (issue 20, item 8): scenario TOML, trace lines (JSONL
and Parquet), engine settings, GPU and engine CSV rows. Each input gets the contract: a finite
answer, or one line naming the file (and row, line or field) with exit 2; never a traceback,
a hang, a warning or nan/inf printed."""
import csv
import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kvmath.cli.main import main
from kvmath.tables.rows import data_path

from test_hostile_arguments import NUMBERS, _clean

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

#: values a TOML key may be given: any TOML type, of any magnitude
TOML_VALUES = st.one_of(
    st.integers(-10 ** 20, 10 ** 20).map(str), st.floats(allow_nan=True, allow_infinity=True)
    .map(lambda x: "nan" if x != x else ("inf" if x == float("inf") else
                                         "-inf" if x == float("-inf") else repr(x))),
    st.booleans().map(lambda b: str(b).lower()), st.text(max_size=12).map(json.dumps),
    st.sampled_from(['[1, 2]', '{a = 1}', '"llama-3.1-8b"', '"nvme"', '"dgx-h100"',
                     '"vllm-lbhnc"', '"/dev/zero"', '"../../etc/passwd"', '""', '"fp8"']))
KEYS = st.sampled_from(["model", "gpu", "tier", "tokens", "tp", "ep", "batch", "engine",
                        "node", "resume_rate", "concurrent_reloads", "prefill", "kv_dtype",
                        "batch_seqs", "gpu_price", "dram_price", "sample_rate", "policy",
                        "engine_config", "host_cache_bytes", "no_such_key"])


@given(pairs=st.lists(st.tuples(KEYS, TOML_VALUES), max_size=6, unique_by=lambda p: p[0]),
       command=st.sampled_from(["compare", "reuse", "tiers", "trace"]))
@example(pairs=[("batch", "1112")], command="compare")  # no TP holds the batch: names --batch
@FUZZ
def test_scenario_files(tmp_path_factory, capsys, pairs, command):
    base = {"model": '"llama-3.1-8b"', "gpu": '"h100-sxm"', "tier": '"host-dram"',
            "tokens": "4096", "resume_rate": "1"}
    base.update(dict(pairs))
    path = tmp_path_factory.mktemp("s") / "s.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in base.items()))
    argv = [command] + (["synthetic"] if command == "trace" else []) + ["--scenario", str(path)]
    code, (out, err) = main(argv), capsys.readouterr()
    _clean(code, out, err)
    if code == 2 and "Error" not in err:
        # names the file, the file it names, or the option
        assert str(path) in err or "--" in err or "/dev/" in err or "etc/passwd" in err, err


GOOD = {"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}
JSON_VALUES = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False),
                        st.booleans(), st.none(), st.text(max_size=6),
                        st.lists(st.integers(-5, 2 ** 65), max_size=4))


@given(field=st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids",
                              "extra"]), value=JSON_VALUES, line=st.integers(0, 3),
       gz=st.booleans())
@FUZZ
def test_trace_lines(tmp_path_factory, capsys, field, value, line, gz):
    import gzip
    rows = [dict(GOOD, timestamp=10 * i, hash_ids=[2 * i + 1, 2 * i + 2]) for i in range(4)]
    rows[line][field] = value
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path = tmp_path_factory.mktemp("t") / ("t.jsonl.gz" if gz else "t.jsonl")
    path.write_bytes(gzip.compress(text) if gz else text)
    code, (out, err) = main(["trace", str(path), "--model", "llama-3.1-8b"]), capsys.readouterr()
    _clean(code, out, err)
    if code == 2:
        assert str(path) in err, err


@given(column=st.sampled_from(["timestamp_s", "prompt_tokens", "block_tokens",
                               "output_tokens", "priority"]),
       value=st.sampled_from(["'x'", "-1", "1.5", "NULL", "0", "10000000000", "true"]))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_parquet_columns(tmp_path_factory, capsys, column, value):
    import duckdb
    cols = {"timestamp_s": "1.0", "prompt_tokens": "1024",
            "block_hashes": "[1, 2]::UBIGINT[]", "block_tokens": "512"}
    cols[column] = value
    path = tmp_path_factory.mktemp("p") / "t.parquet"
    select = ", ".join(f"{v} AS {k}" for k, v in cols.items())
    duckdb.sql(f"COPY (SELECT {select}) TO '{path}' (FORMAT parquet)")
    code, (out, err) = main(["trace", str(path), "--model", "llama-3.1-8b"]), capsys.readouterr()
    _clean(code, out, err)


SETTINGS_TEXT = st.one_of(
    st.builds(lambda v: '{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": '
              '{"cpu_bytes_to_use": %s}}' % v, NUMBERS.filter(lambda s: s.strip() != "")),
    st.builds(lambda k, v: f"{k}: {v}\n", st.sampled_from(
        ["chunk_size", "max_local_cpu_size", "max_local_disk_size", "local_disk", "local_cpu",
         "extra_config"]), NUMBERS),
    st.builds(lambda k, v: f"--enable-hierarchical-cache {k} {v}\n", st.sampled_from(
        ["--hicache-size", "--hicache-ratio", "--page-size", "--hicache-io-backend",
         "--hicache-mem-layout"]), NUMBERS),
    st.text(max_size=40))


@given(text=SETTINGS_TEXT, suffix=st.sampled_from([".json", ".yaml", ".txt", ""]),
       command=st.sampled_from(["compare", "tiers"]))
@FUZZ
def test_engine_settings_files(tmp_path_factory, capsys, text, suffix, command):
    path = tmp_path_factory.mktemp("e") / f"settings{suffix}"
    path.write_text(text)
    argv = ([command, "--model", "llama-3.1-8b", "--tokens", "4096", "--engine-config", str(path)]
            + (["--gpu", "h100-sxm", "--tier", "host-dram"] if command == "compare"
               else ["--resume-rate", "1"]))
    code, (out, err) = main(argv), capsys.readouterr()
    _clean(code, out, err)
    if code == 2:
        assert str(path) in err or "--" in err, err


def _row(table, name, field, value):
    with open(data_path(f"{table}.csv"), newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    row = dict(next(r for r in rows if r["name"] == name), name="mine")
    row[field] = value
    return header, row


@given(table_field=st.sampled_from(
           [("gpus", f) for f in ("bf16_dense_flops", "hbm_capacity_bytes", "hbm_bandwidth_Bps",
                                  "gpus_per_node", "host_link", "platform")]
           + [("engines", f) for f in ("copy_tokens", "request_steps", "stored_once",
                                       "kernel_below_bytes", "hbm_usable_fraction", "kv_split",
                                       "queue_depth")]),
       value=NUMBERS)
@FUZZ
def test_gpu_and_engine_rows(tmp_path_factory, capsys, table_field, value):
    table, field = table_field
    header, row = _row(table, "h100-sxm" if table == "gpus" else "vllm-lbhnc", field, value)
    path = tmp_path_factory.mktemp("r") / f"{table}.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerow(row)
    flag = "--gpu" if table == "gpus" else "--engine"
    argv = ["compare", "--model", "llama-3.1-8b", "--tier", "host-dram", "--tokens", "4096",
            flag, str(path)] + (["--gpu", "h100-sxm"] if table == "engines" else [])
    code, (out, err) = main(argv), capsys.readouterr()
    _clean(code, out, err)
    if code == 2:
        assert err.startswith("kvmath: error: "), err
