"""Production size (issue 21 item 5): a trace streamed from disk (its blocks in a flat file, read
in order) gives what the whole trace in memory gives, the fleet replays its nodes in parallel
(here, on a local Dask cluster or on one given by address) with the results of the Python
fleet it replaced, and the fleet's bad input is one line and exit 2."""
import csv
import gzip
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath.cli.main import main
from kvmath.tables.rows import data_path, nodes, pools, resolve_model
from kvmath.fleet import jobs as J, run as F
from kvmath.traces import readers as T

NODE = nodes()["dgx-h100"]
MODEL = resolve_model("llama-3.1-70b")
SMALL = resolve_model("llama-3.1-8b")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def same_trace(streamed, trace):
    assert np.array_equal(np.fromfile(streamed.hashes_path, dtype=np.uint64), trace.hashes)
    for f in ("timestamp_s", "prompt_tokens", "output_tokens", "n_blocks"):
        a, b = getattr(streamed, f), getattr(trace, f)
        assert np.array_equal(a, b) and a.dtype.kind == b.dtype.kind, f
    assert streamed.block_tokens == trace.block_tokens
    assert streamed.n_requests == trace.n_requests and streamed.duration_s == trace.duration_s


# ------------------------------------------------------------------ streamed traces
@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_a_streamed_trace_is_the_loaded_one(tmp_path, name):
    same_trace(T.stream(name, tmp_path), T.load(name))


def _write(path, records, gz=False, dumps=json.dumps):
    text = "".join(dumps(r) + "\n" for r in records)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return str(path)


def _generic(ts):
    return [{"timestamp_s": t, "prompt_tokens": 100 + 7 * i % 80, "block_hashes": [i, 10 ** 6 + i],
             "block_tokens": 64, **({"output_tokens": i} if i % 2 else {})}
            for i, t in enumerate(ts)]


@pytest.mark.parametrize("case", ["canonical", "spaced", "escaped", "exponent", "null-output",
                                  "parquet", "huge-hash"])
def test_every_form_of_a_trace_streams_as_it_loads(tmp_path, case):
    """The compiled fast path takes canonical records; anything else (escapes, numbers it cannot
    round exactly, Parquet) goes to DuckDB: the columns are the same either way."""
    ts = [0.125, 1.1, 2.0, 2.5e-3 + 3, 1e3, 1234.5678901]
    recs = _generic(ts)
    path = tmp_path / "t.jsonl"
    if case == "canonical":
        _write(path, recs, gz=True)
    elif case == "spaced":
        _write(path, recs, dumps=lambda r: " " + json.dumps(r, indent=None, separators=(" , ", " : ")) + " \r")
    elif case == "escaped":  # a key spelt with an escape (JSON allows it)
        _write(path, recs, dumps=lambda r: json.dumps(r).replace('"block_tokens"',
                                                                 '"block_token\\u0073"'))
    elif case == "exponent":
        _write(path, recs, dumps=lambda r: json.dumps(r).replace('"timestamp_s": 1000.0', '"timestamp_s": 1e3'))
    elif case == "null-output":
        recs[2]["output_tokens"] = None
        _write(path, recs)
    elif case == "huge-hash":
        recs[0]["block_hashes"] = [2 ** 64 - 1, 2 ** 63]
        _write(path, recs)
    else:
        import duckdb
        src = _write(tmp_path / "g.jsonl", recs)
        path = tmp_path / "t.parquet"
        duckdb.sql(f"COPY (SELECT timestamp_s, prompt_tokens, block_hashes::UBIGINT[] AS "
                   f"block_hashes, block_tokens, output_tokens FROM read_json('{src}')) TO "
                   f"'{path}' (FORMAT parquet)")
    same_trace(T.stream(str(path), tmp_path), T.load(str(path)))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 2 ** 60), st.floats(0, 1e9, allow_nan=False),
                          st.decimals(0, 10 ** 6, places=9).map(float)),
                min_size=1, max_size=30))
def test_timestamps_are_the_numbers_duckdb_reads(tmp_path_factory, values):
    """Whatever form a timestamp takes (an integer, a float's shortest repr, a long decimal),
    the fast path reads the double DuckDB reads, or leaves the file to DuckDB."""
    tmp = tmp_path_factory.mktemp("ts")
    path = _write(tmp / "t.jsonl", _generic(sorted(values)))
    same_trace(T.stream(path, tmp), T.load(path))


GOOD = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}


@pytest.mark.parametrize("bad", [
    '{"timestamp": 5, "input_length": 600 "output_length": 5}',
    '{"timestamp": 5, "input_length": 600, "hash_ids": [3, 4]}',
    '{"timestamp": 5, "input_length": 1200, "output_length": 5, "hash_ids": [3]}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [3, -4]}',
    '{"timestamp": 5, "input_length": "600", "output_length": 5, "hash_ids": [3, 4]}',
    '{"timestamp": "5", "input_length": 600, "output_length": 5, "hash_ids": [3, 4]}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [3, 3]}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [3, true]}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [3, 4], "x": 1}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [3, 4], '
    '"timestamp": 6}',
    '{"timestamp": 5, "input_length": 600, "output_length": 5.5, "hash_ids": [3, 4]}',
    '[1, 2]',
])
@pytest.mark.parametrize("where", ["first", "late"])
def test_a_bad_line_streams_to_the_loaders_error(tmp_path, bad, where):
    lines = [json.dumps({**GOOD, "timestamp": 10 * i, "hash_ids": [2 * i + 10, 2 * i + 11]})
             for i in range(5)]
    if where == "first":
        lines.insert(0, bad)
    else:
        lines.insert(3, bad.replace('"timestamp": 5', '"timestamp": 25'))
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    try:
        trace = T.load(str(path))
    except T.TraceError as exc:
        with pytest.raises(T.TraceError) as got:
            T.stream(str(path), tmp_path)
        assert str(got.value) == str(exc)
    else:  # a line the readers take (a repeated key: its last value, as Python's json does)
        same_trace(T.stream(str(path), tmp_path), trace)


def test_a_truncated_or_padded_gzip_trace_streams_to_the_loaders_error(tmp_path):
    data = T.resolve_path("synthetic").read_bytes()
    for name, blob in (("trunc.jsonl.gz", data[:100_000]), ("pad.jsonl.gz", data + b"junk")):
        path = tmp_path / name
        path.write_bytes(blob)
        with pytest.raises(T.TraceError) as want:
            T.load(str(path))
        with pytest.raises(T.TraceError) as got:
            T.stream(str(path), tmp_path)
        assert str(got.value) == str(want.value)


def test_a_streamed_trace_reads_its_blocks_in_order_a_chunk_at_a_time(tmp_path):
    trace = T.load("synthetic")
    streamed = T.stream("synthetic", tmp_path)
    chunks = list(streamed.block_chunks(1000))
    assert [(a, b) for a, b, _ in chunks] == [(a, min(a + 1000, trace.n_requests))
                                              for a in range(0, trace.n_requests, 1000)]
    assert np.array_equal(np.concatenate([h for *_, h in chunks]), trace.hashes)


# ------------------------------------------------------------------ the fleet
def _strip(r):
    return {k: v for k, v in r.items() if k != "per_node"}, r["per_node"]


@pytest.mark.parametrize("nodes_, router, writes, pool", [
    (3, "kv-aware", "back", None),
    (4, "affinity", "through", "3fs-nvme"),
    (5, "random", "back", "mooncake-store-dram"),
])
def test_the_streamed_fleet_is_the_fleet_in_memory(tmp_path, nodes_, router, writes, pool):
    """The fleet streamed from disk (its hashes mapped, each node's blocks to a file) gives the
    answer of the fleet whose trace is in memory, exactly."""
    trace = T.load("synthetic")
    p = pools()[pool] if pool else None
    want = F.fleet(trace, SMALL, NODE, nodes_, router, pool=p, writes=writes)
    got = F.fleet(T.stream("synthetic", tmp_path), SMALL, NODE, nodes_, router, pool=p,
                  writes=writes)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_fleet_on_a_dask_cluster_by_address_equals_in_process(tmp_path):
    """A scheduler given by address (worker processes: each node's requests and blocks are
    shipped to them) gives the in-process answer; so does the local cluster."""
    from distributed import LocalCluster
    trace = T.stream("synthetic", tmp_path)
    here = F.fleet(trace, SMALL, NODE, 3, "kv-aware", pool=pools()["3fs-nvme"])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        there = F.fleet(trace, SMALL, NODE, 3, "kv-aware", pool=pools()["3fs-nvme"],
                        dask=cluster.scheduler_address)
    local = F.fleet(trace, SMALL, NODE, 3, "kv-aware", pool=pools()["3fs-nvme"], dask="local")
    assert here == there == local and here["pool"]["hits"] > 0


def test_cli_fleet_streams_the_trace(capsys, tmp_path):
    """kvmath fleet reads its trace streamed; its answer is the in-memory fleet's."""
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "3",
                         "--json")
    assert code == 0, err
    r = json.loads(out)
    want = F.fleet(T.load("synthetic"), SMALL, NODE, 3, "kv-aware")
    assert r["per_node"] == json.loads(json.dumps(want["per_node"]))
    assert r["token_hit_rate"] == want["token_hit_rate"]


# ------------------------------------------------------------------ the fleet's bad input
def _pool_file(tmp_path, **change):
    src = pools()["3fs-nvme"]
    with open(data_path("pools.csv")) as f:
        fields = next(csv.reader(f))
    path = tmp_path / "pool.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        row = {k: str(getattr(src, k)).lower() if isinstance(getattr(src, k), bool)
               else getattr(src, k) for k in fields}
        w.writerow({**row, **change})
    return str(path)


def _node_file(tmp_path, **change):
    with open(data_path("nodes.csv")) as f:
        rows = list(csv.DictReader(f))
    row = {**next(r for r in rows if r["name"] == "dgx-h100"), **change}
    path = tmp_path / "node.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row), lineterminator="\n")
        w.writeheader()
        w.writerow(row)
    return str(path)


@pytest.mark.parametrize("argv, words", [
    (["--pool", "<malformed>"], ["pool.csv", "row 1", "nic_link", "nic-9000g"]),
    (["--pool", "<negative>"], ["pool.csv", "row 1", "replicas"]),
    (["--router", "nearest"], ["--router", "nearest"]),
    (["--nodes", "0"], ["--nodes", "'0'"]),
    (["--pool", "3fs-nvme", "--node", "<no-nics>"], ["--pool 3fs-nvme", "no NICs"]),
    (["--pool", "mooncake-store-dram", "--node", "<two-nics>"],
     ["--pool mooncake-store-dram", "8 NICs", "2"]),
])
def test_the_fleets_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, words):
    subst = {"<malformed>": lambda: _pool_file(tmp_path, nic_link="nic-9000g"),
             "<negative>": lambda: _pool_file(tmp_path, replicas="-1"),
             "<no-nics>": lambda: _node_file(tmp_path, nics="0"),
             "<two-nics>": lambda: _node_file(tmp_path, nics="2")}
    argv = [subst[a]() if a in subst else a for a in argv]
    if "--nodes" not in argv:
        argv += ["--nodes", "2"]
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_a_dask_scheduler_without_workers_is_refused_in_time(monkeypatch, capsys):
    """A scheduler that answers but has no worker would hold the replays forever: one line."""
    from distributed import LocalCluster
    monkeypatch.setattr(J, "DASK_TIMEOUT_S", 1)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes",
                             "2", "--dask", cluster.scheduler_address)
    assert code == 2 and out == "" and "has no worker after 1 s" in err, err


def test_the_dask_timeout_is_stated():
    from kvmath.scenario.options import DASK_TIMEOUT_S
    assert 0 < DASK_TIMEOUT_S <= 60 and math.isfinite(DASK_TIMEOUT_S)
