"""Trace benchmark: prints ONE JSON line.

1. exact LRU curve (stack distances, all capacities) of the bundled conversation trace: seconds
   to read the file and compute the curve;
2. a 1,000,000-request trace (the conversation trace tiled: block ids remapped per tile, times
   shifted by the trace's length, the last tile cut short) written as Mooncake JSONL.gz, read
   and SHARDS-sampled at rate R in a fresh subprocess: seconds and peak resident memory
   (the child's VmHWM, which counts DuckDB's native memory too and, unlike ru_maxrss, is
   not inherited from the parent at fork), and the largest
   hit-rate error against the exact curve, over all capacities and over those at or above
   SHARDS's resolution of 1/R blocks (a sample cannot see distances shorter than that). The exact curve of the tiled trace is computed
   exactly without simulating it: no block crosses a tile, so each tile's stack distances are
   the original ones and the curve is the access-weighted mix of whole and cut tiles;
3. the same file through ``kvmath trace --sample-rate R`` (the sample taken as the file is
   read: the LRU curve and one LRU of each of the node's tiers' capacities) in a fresh
   subprocess: seconds and peak resident memory (target 1 GiB, issue 20);
4. the same file through the whole exact ``kvmath trace`` (every access: reuse statistics, the
   exact LRU curve and the tiered replay, Llama-3.1-70B on a DGX H100) in a fresh subprocess:
   seconds and peak resident memory (target 2 GiB, issue 20), unless ``--no-exact``.

    PYTHONPATH=$PWD python benchmarks/trace_bench.py [--requests N] [--rate R]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvmath.traces import replay as C  # noqa: E402
from kvmath.traces import readers as T  # noqa: E402

CHILD = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from kvmath.traces import replay as C
from kvmath.traces import readers as T
t1 = time.perf_counter()
tr = T.load({path!r}, sample_rate={rate!r}, full_positions={full!r})
t2 = time.perf_counter()
curve = C.lru_curve(tr)
t3 = time.perf_counter()
caps = {caps!r}
b, t = curve.at(caps)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
cpu = os.times()
print(json.dumps({{"seconds": t3 - t0, "import_s": t1 - t0, "load_s": t2 - t1,
                  "curve_s": t3 - t2, "cpu_s": cpu.user + cpu.system,
                  "sampled_accesses": len(tr.hashes),
                  "requests": tr.n_requests, "block": b.tolist(), "token": t.tolist(),
                  "peak_rss_bytes": int(hwm) * 1024}}))
"""


CHILD_CLI = """
import contextlib, io, json, os, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from kvmath.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        rc = main(["trace", {path!r}, "--model", "llama-3.1-70b", "--json"] + {extra!r})
    except SystemExit as exc:
        rc = exc.code
t1 = time.perf_counter()
r = json.loads(out.getvalue())
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
cpu = os.times()
print(json.dumps({{"seconds": t1 - t0, "cpu_s": cpu.user + cpu.system, "rc": rc,
                  "requests": r["requests"], "token_hit_rate": r.get("token_hit_rate"),
                  "sampled_accesses": r.get("sampled_accesses"),
                  "max_token_hit_rate": r["max_token_hit_rate"],
                  "peak_rss_bytes": int(hwm) * 1024}}))
"""


def tile(path, requests):
    """Write the tiled trace with DuckDB (not timed)."""
    import duckdb
    src = T.resolve_path("conversation")
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # a script: no Jupyter here
    n, dur, top = con.execute(
        f"SELECT count(*), max(timestamp) + 1000, max(list_max(hash_ids)) + 1 "
        f"FROM read_json('{src}')").fetchone()
    tiles = -(-requests // n)
    con.execute(f"""COPY (
        SELECT timestamp + tile * {dur} AS timestamp, input_length, output_length,
               list_transform(hash_ids, lambda x: x + tile * {top}) AS hash_ids
        FROM (SELECT row_number() OVER () AS i, * FROM read_json('{src}'))
        CROSS JOIN range({tiles}) r(tile) ORDER BY tile, i LIMIT {requests}
        ) TO '{path}' (FORMAT json, COMPRESSION gzip)""")
    return n, tiles


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--full-positions", type=int, default=1,
                    help="leading block positions kept at rate 1 (stratified SHARDS; 0: plain)")
    ap.add_argument("--tiled", help="reuse this tiled trace file instead of writing one")
    ap.add_argument("--no-exact", action="store_true",
                    help="skip the exact kvmath trace run (about 2.5 minutes on 2 cores)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    conv = T.load("conversation")
    t_read = time.perf_counter() - t0
    curve = C.lru_curve(conv)
    t_exact = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        path = args.tiled or str(Path(tmp) / "tiled.jsonl.gz")
        t1 = time.perf_counter()
        n = conv.n_requests
        tiles = -(-args.requests // n)
        if not args.tiled:
            tile(path, args.requests)
        t_write = time.perf_counter() - t1
        full, rest = divmod(args.requests, n)
        top = max(curve.capacity_blocks[-1], 1)
        caps = np.unique(np.round(np.geomspace(1, top * 1.5, 200))).tolist()
        # exact curve of the tiled trace: access-weighted mix of whole tiles and the cut tile
        b_full, t_full = curve.at(caps)
        w_b, w_t = full * len(conv.hashes), full * conv.prompt_tokens.sum()
        b_mix, t_mix = b_full * w_b, t_full * w_t
        if rest:
            kept = conv.rid < rest
            cut = T.Trace(name="cut", timestamp_s=conv.timestamp_s[:rest],
                          prompt_tokens=conv.prompt_tokens[:rest],
                          output_tokens=conv.output_tokens[:rest], n_blocks=conv.n_blocks[:rest],
                          rid=conv.rid[kept], pos=conv.pos[kept], hashes=conv.hashes[kept],
                          block_tokens=conv.block_tokens)
            b_cut, t_cut = C.lru_curve(cut).at(caps)
            b_mix += b_cut * len(cut.hashes)
            t_mix += t_cut * cut.prompt_tokens.sum()
            w_b += len(cut.hashes)
            w_t += cut.prompt_tokens.sum()
        b_exact, t_exact_curve = b_mix / w_b, t_mix / w_t
        out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), path=path,
                                                                  rate=args.rate, full=args.full_positions,
                                                                  caps=caps)],
                             capture_output=True, text=True, check=True)
        child = json.loads(out.stdout)
        run = subprocess.run([sys.executable, "-c", CHILD_CLI.format(
            root=str(ROOT), path=path, extra=["--sample-rate", str(args.rate)])],
            capture_output=True, text=True, check=True)
        c = json.loads(run.stdout)
        sampled_cli = {"requests": c["requests"], "sample_rate": args.rate,
                       "sampled_accesses": c["sampled_accesses"],
                       "seconds": round(c["seconds"], 1), "cpu_s": round(c["cpu_s"], 1),
                       "peak_rss_bytes": c["peak_rss_bytes"], "target_bytes": 2 ** 30,
                       "max_token_hit_rate": c["max_token_hit_rate"]}
        exact = None
        if not args.no_exact:
            run = subprocess.run([sys.executable, "-c", CHILD_CLI.format(root=str(ROOT),
                                                                          path=path, extra=[])],
                                 capture_output=True, text=True, check=True)
            e = json.loads(run.stdout)
            exact = {"requests": e["requests"], "seconds": round(e["seconds"], 1),
                     "cpu_s": round(e["cpu_s"], 1), "peak_rss_bytes": e["peak_rss_bytes"],
                     "target_bytes": 2 * 2 ** 30, "token_hit_rate": e["token_hit_rate"]}
        size = Path(path).stat().st_size
    print(json.dumps({
        "exact_conversation": {"requests": conv.n_requests, "block_accesses": len(conv.hashes),
                               "read_s": round(t_read, 3), "read_and_curve_s": round(t_exact, 3),
                               "max_token_hit_rate": curve.max_token_hit_rate,
                               "target_s": 2.0},
        "shards_tiled": {"requests": child["requests"], "tiles": tiles,
                         "file_bytes_gz": size, "write_s": round(t_write, 2),
                         "sample_rate": args.rate, "full_positions": args.full_positions,
                         "sampled_accesses": child["sampled_accesses"],
                         "seconds": round(child["seconds"], 2), "target_s": 30,
                         **{k: round(child[k], 2) for k in ("import_s", "load_s", "curve_s",
                                                            "cpu_s")},
                         "peak_rss_bytes": child["peak_rss_bytes"], "target_bytes": 2 ** 30,
                         "max_abs_error_block": float(np.abs(np.array(child["block"]) - b_exact).max()),
                         "max_abs_error_token": float(np.abs(np.array(child["token"])
                                                             - t_exact_curve).max()),
                         "resolution_blocks": 1 / args.rate,
                         "max_abs_error_block_above_resolution": float(np.abs(
                             np.array(child["block"]) - b_exact)[np.array(caps) >= 1 / args.rate].max()),
                         "max_abs_error_token_above_resolution": float(np.abs(
                             np.array(child["token"]) - t_exact_curve)[np.array(caps) >= 1 / args.rate].max()),
                         "target_error": 0.01},
        "sampled_trace_tiled": sampled_cli,
        "exact_trace_tiled": exact,
        "load_average_1min": os.getloadavg()[0], "cores": os.cpu_count(),
        "peak_rss_parent_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
