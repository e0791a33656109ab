"""Fleet benchmark (issue 21 item 5, issue 35): prints ONE JSON line with the time and peak memory
of the whole ``kvmath fleet`` (read the trace, serve it step by step on every replica under the
router, replay every node's tiers, price) on the bundled conversation trace and on the tiled
conversation trace at each size asked for (default 1,000,000 requests), 16 x DGX H100 serving
Llama-3.1-70B under the kv-aware (Dynamo) router, the nodes' tier replays on a local Dask cluster
(``--dask local``). Goals (issue 35): the bundled trace within 60 s; a million requests within
600 s and 2 GiB on two cores. (The schedule is one compiled loop over every replica; the tier
replays are split by node.)

Each run is a fresh subprocess: ``seconds`` is its wall time (imports included), ``cpu_s`` its
CPU time, ``peak_rss_bytes`` its VmHWM (the most resident memory it held at once, DuckDB's and
numba's included; the local cluster runs its workers as threads of that process, so nothing
runs outside it). The tiled trace (the bundled conversation trace repeated: tile t's
timestamps shifted by t x (its last timestamp + 1 s) and its block ids by t x (its largest id +
1), the last tile cut short; the same trace as benchmarks/trace_bench.py's) is written once as
gzipped JSONL into --cache (not timed) and reused.

    PYTHONPATH=$PWD python benchmarks/fleet_bench.py [--requests 1000000 10000000]
        [--dask local|none] [--cache DIR]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import contextlib, io, json, os, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from kvmath.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        rc = main({argv!r})
    except SystemExit as exc:
        rc = exc.code
t1 = time.perf_counter()
r = json.loads(out.getvalue())
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
cpu = os.times()
print(json.dumps({{"seconds": t1 - t0, "cpu_s": cpu.user + cpu.system, "rc": rc,
                  "requests": r["requests"], "token_hit_rate": r["token_hit_rate"],
                  "ttft_s_p90": r["ttft_s"]["p90"], "ttft_s_p99": r["ttft_s"]["p99"],
                  "keeps_up": r["keeps_up"],
                  "peak_rss_bytes": int(hwm) * 1024}}))
"""


def tile(path, requests):
    """Write the tiled conversation trace of ``requests`` requests (gzip level 1)."""
    from kvmath.traces import readers as T
    conv = T.load("conversation")
    n = conv.n_requests
    ts = [int(round(t * 1000)) for t in conv.timestamp_s.tolist()]  # the file's milliseconds
    dur = max(ts) + 1000
    top = int(conv.hashes.max()) + 1
    offsets = [0, *__import__("itertools").accumulate(conv.n_blocks.tolist())]
    hashes = conv.hashes.tolist()
    rows = [(ts[i], int(conv.prompt_tokens[i]), int(conv.output_tokens[i]),
             hashes[offsets[i]:offsets[i + 1]]) for i in range(n)]
    tmp = path.with_suffix(".part")
    with gzip.open(tmp, "wt", compresslevel=1) as fh:
        for t in range(-(-requests // n)):
            lines = []
            for i in range(min(n, requests - t * n)):
                s, p, o, h = rows[i]
                ids = ",".join(str(x + t * top) for x in h)
                lines.append(f'{{"timestamp":{s + t * dur},"input_length":{p},'
                             f'"output_length":{o},"hash_ids":[{ids}]}}\n')
            fh.write("".join(lines))
    tmp.rename(path)


def run_fleet(path, dask):
    argv = ["fleet", str(path), "--model", "llama-3.1-70b", "--nodes", "16", "--json",
            "--dask", dask]  # none: in process (the command's default is a local cluster)
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), argv=argv)],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"kvmath fleet failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, nargs="+", default=[1_000_000],
                    help="tiled trace sizes (the bundled conversation trace runs first)")
    ap.add_argument("--dask", default="local", help="'local' (default), 'none' (in process) "
                    "or a scheduler's address")
    ap.add_argument("--cache", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                    "kvmath-fleet-bench"),
                    help="directory the tiled traces are written to and reused from")
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in [None, *args.requests]:
        path = cache / f"conversation_tiled_{n}.jsonl.gz" if n else "conversation"
        write_s = None
        if n and not path.exists():
            t0 = time.perf_counter()
            tile(path, n)
            write_s = round(time.perf_counter() - t0, 1)
        load_before = os.getloadavg()[0]
        r = run_fleet(path, args.dask)
        runs.append({"requests": r["requests"], "seconds": round(r["seconds"], 1),
                     "cpu_s": round(r["cpu_s"], 1), "peak_rss_bytes": r["peak_rss_bytes"],
                     "token_hit_rate": r["token_hit_rate"], "ttft_s_p90": r["ttft_s_p90"],
                     "ttft_s_p99": r["ttft_s_p99"], "keeps_up": r["keeps_up"],
                     "file_bytes_gz": path.stat().st_size if n else None, "write_s": write_s,
                     "load_average_1min_before": round(load_before, 2),
                     "load_average_1min_after": round(os.getloadavg()[0], 2)})
    print(json.dumps({"fleet": {"nodes": 16, "node": "dgx-h100", "model": "llama-3.1-70b",
                                "router": "kv-aware", "dask": args.dask},
                      "runs": runs, "target_s_bundled": 60, "target_s_at_1M": 600,
                      "target_bytes": 2 * 2 ** 30,
                      "cores": os.cpu_count()}))


if __name__ == "__main__":
    main()
