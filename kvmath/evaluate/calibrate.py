"""Calibrate kvmath to your hardware: measure, write rows in the data format, analyse.

    python -m kvmath.evaluate.calibrate h2d --out results/          # CUDA + PyTorch: pinned H2D vs size
    python -m kvmath.evaluate.calibrate prefill --model llama-3.1-8b --out results/   # CUDA + PyTorch
    python -m kvmath.evaluate.calibrate file --path /mnt/nvme/big.bin --out results/  # any machine
    python -m kvmath.evaluate.calibrate analyse results/            # fit and report, any machine

Measurements are written as CSV in the formats of ``kvmath/data/transfer_curves.csv``
(bandwidth against transfer size) and ``prefill_measurements.csv`` (prefill time against
prompt length), each row with its provenance: device, driver, library versions, date. The
analysis (fits, implied efficiencies) needs no GPU and is tested on recorded data.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from kvmath.evaluate.api import architecture_values, fit_transfer_curve, fn
from kvmath.tables.rows import CURVE_FIELDS, DataError, resolve_model, transfer_curves

PREFILL_FIELDS = ("model", "gpu", "tp", "tokens", "prefill_s", "kind", "source",
                  "source_location", "retrieved", "conditions")


class CalibrationError(RuntimeError):
    """A measurement that cannot run here (no CUDA, no PyTorch, unreadable file)."""


def _today():
    return _dt.date.today().isoformat()


def _torch_cuda():
    try:
        import torch
    except ImportError:
        raise CalibrationError("PyTorch is not installed: the GPU measurements need torch "
                               "with CUDA") from None
    if not torch.cuda.is_available():
        raise CalibrationError("no CUDA device: the GPU measurements need one")
    return torch


def _provenance(torch):
    props = torch.cuda.get_device_properties(0)
    driver = "unknown"
    try:
        import subprocess
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"{props.name}; driver {driver}; CUDA {torch.version.cuda}; torch {torch.__version__}; "
            f"host {platform.node()}")


# ------------------------------------------------------------------ measurements
def measure_h2d(sizes=None, repeats=20):
    """Pinned host-to-device copy bandwidth (B/s) against transfer size; rows of transfer_curves."""
    torch = _torch_cuda()
    sizes = sizes or [int(s) for s in np.geomspace(4096, 1 << 30, 19)]
    prov = _provenance(torch)
    rows = []
    for size in sizes:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(size, dtype=torch.uint8, device="cuda")
        for _ in range(3):
            dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(repeats):
            start.record()
            dev.copy_(host, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        rows.append({"curve": "calibrated-h2d", "transfer_bytes": size,
                     "bandwidth_Bps": size / float(np.median(times)), "kind": "measurement",
                     "source": "kvmath.evaluate.calibrate h2d", "source_location": prov,
                     "retrieved": _today(),
                     "conditions": f"pinned host buffer, one copy at a time, median of {repeats}"})
        del host, dev
    return rows


def _llama_layer(torch, d, n_q, n_kv, d_h, inter, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    def w(*shape):
        return (torch.randn(*shape, device="cuda", dtype=dtype, generator=g) * 0.02)
    return {"qkv": w((n_q + 2 * n_kv) * d_h, d), "o": w(d, n_q * d_h), "gate_up": w(2 * inter, d),
            "down": w(d, inter)}


def _run_layer(torch, x, p, n_q, n_kv, d_h):
    import torch.nn.functional as F
    t = x.shape[0]
    qkv = x @ p["qkv"].T
    q, k, v = qkv.split([n_q * d_h, n_kv * d_h, n_kv * d_h], dim=-1)
    q = q.view(t, n_q, d_h).transpose(0, 1)
    k = k.view(t, n_kv, d_h).transpose(0, 1).repeat_interleave(n_q // n_kv, dim=0)
    v = v.view(t, n_kv, d_h).transpose(0, 1).repeat_interleave(n_q // n_kv, dim=0)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + a.transpose(0, 1).reshape(t, n_q * d_h) @ p["o"].T
    gu = x @ p["gate_up"].T
    gate, up = gu.chunk(2, dim=-1)
    return x + (F.silu(gate) * up) @ p["down"].T


def measure_prefill(model_name, lengths=None, layers=None, repeats=5):
    """Prefill time (s) of a real-shaped dense GQA model with random weights on one GPU.

    Runs `layers` identical layers (default: all) of the model's shape; the time is scaled to
    the full depth if fewer are run. Rows in the prefill_measurements format.
    """
    torch = _torch_cuda()
    m = resolve_model(model_name)
    if m.attention != "gqa" or m.num_experts:
        raise CalibrationError("the prefill measurement builds dense GQA models only")
    lengths = lengths or [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    run_layers = layers or m.layers
    dtype = torch.bfloat16
    p = _llama_layer(torch, m.hidden_size, m.num_attention_heads, m.num_key_value_heads,
                     m.head_dim, m.intermediate_size, dtype)
    prov = _provenance(torch)
    rows = []
    for t in lengths:
        x = torch.randn(t, m.hidden_size, device="cuda", dtype=dtype)
        with torch.inference_mode():
            for _ in range(2):
                _run_layer(torch, x, p, m.num_attention_heads, m.num_key_value_heads, m.head_dim)
            torch.cuda.synchronize()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                y = x
                for _ in range(run_layers):
                    y = _run_layer(torch, y, p, m.num_attention_heads, m.num_key_value_heads,
                                   m.head_dim)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        seconds = float(np.median(times)) * m.layers / run_layers
        rows.append({"model": m.name, "gpu": torch.cuda.get_device_name(0), "tp": 1, "tokens": t,
                     "prefill_s": seconds, "kind": "measurement", "source": "kvmath.evaluate.calibrate prefill",
                     "source_location": prov, "retrieved": _today(),
                     "conditions": f"random bf16 weights, {run_layers} of {m.layers} layers run "
                                   f"(scaled), SDPA causal attention, no embedding or LM head, "
                                   f"median of {repeats}"})
    return rows


def measure_file_read(path, block_bytes=16 << 20, max_bytes=8 << 30):
    """Sequential read bandwidth (B/s) of a file, page cache dropped first where possible."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise CalibrationError(f"cannot read {path}: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise CalibrationError(f"{path} is empty")
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        total, t0 = 0, time.perf_counter()
        while total < min(size, max_bytes):
            chunk = os.read(fd, block_bytes)
            if not chunk:
                break
            total += len(chunk)
        seconds = time.perf_counter() - t0
    finally:
        os.close(fd)
    return {"curve": "calibrated-file-read", "transfer_bytes": block_bytes,
            "bandwidth_Bps": total / seconds, "kind": "measurement",
            "source": "kvmath.evaluate.calibrate file", "source_location": f"{path} on {platform.node()}",
            "retrieved": _today(),
            "conditions": f"sequential os.read of {total} bytes in {block_bytes}-byte blocks, "
                          "page cache dropped with posix_fadvise where supported"}


# ------------------------------------------------------------------ writing and analysis
def write_rows(rows, path, fields):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow(r)
    return path


def analyse_transfer(points, link_peak_Bps=None):
    """Fit t = t0 + s/B to measured points: fixed cost (s), asymptotic bandwidth (B/s), and
    the fraction of a link's peak reached, if given."""
    t0, b = fit_transfer_curve(points)
    out = {"fixed_cost_s": t0, "asymptotic_Bps": b,
           "half_bandwidth_bytes": float(fn("half_bandwidth_size")(B=b, t_0=t0))}
    if link_peak_Bps:
        out["efficiency"] = b / link_peak_Bps
    return out


def analyse_prefill(rows, peak_flops):
    """Implied prefill efficiency (achieved FLOP/s over dense peak) per measured length."""
    from kvmath.tables.rows import model_of

    out = []
    for r in rows:
        v = architecture_values(model_of(r["model"]))
        at = {**v, "T": float(r["tokens"]), "K": int(r.get("tp") or 1),
              "K_e": int(r.get("tp") or 1), "P": peak_flops,
              "t_meas": float(r["prefill_s"])}
        out.append({"tokens": int(r["tokens"]), "prefill_s": float(r["prefill_s"]),
                    "flops": float(fn("flops_prefill").take(at)),
                    "efficiency": float(fn("eta_implied").take(at))})
    return out


def read_prefill(path):
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    missing = [f for f in PREFILL_FIELDS if rows and f not in rows[0]]
    if missing:
        raise DataError(path, None, missing[0], "missing column")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvmath.evaluate.calibrate", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("h2d")
    h.add_argument("--out", required=True)
    pf = sub.add_parser("prefill")
    pf.add_argument("--model", required=True)
    pf.add_argument("--layers", type=int)
    pf.add_argument("--out", required=True)
    f = sub.add_parser("file")
    f.add_argument("--path", required=True)
    f.add_argument("--out", required=True)
    a = sub.add_parser("analyse")
    a.add_argument("dir")
    a.add_argument("--peak-flops", type=float, help="dense peak FLOP/s of the measured GPU")
    a.add_argument("--link-peak", type=float, help="peak bandwidth of the measured link, B/s")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "h2d":
            print(write_rows(measure_h2d(), Path(args.out) / "transfer_curves.csv", CURVE_FIELDS))
        elif args.cmd == "prefill":
            print(write_rows(measure_prefill(args.model, layers=args.layers),
                             Path(args.out) / "prefill_measurements.csv", PREFILL_FIELDS))
        elif args.cmd == "file":
            print(write_rows([measure_file_read(args.path)], Path(args.out) / "transfer_curves.csv",
                             CURVE_FIELDS))
        else:
            d = Path(args.dir)
            report = {}
            if (d / "transfer_curves.csv").exists():
                for name, pts in transfer_curves(d / "transfer_curves.csv").items():
                    if len(pts) >= 2:
                        report[name] = analyse_transfer(pts, args.link_peak)
            if (d / "prefill_measurements.csv").exists() and args.peak_flops:
                report["prefill"] = analyse_prefill(read_prefill(d / "prefill_measurements.csv"),
                                                    args.peak_flops)
            print(json.dumps(report, indent=1))
    except (CalibrationError, DataError, KeyError) as exc:
        print(f"kvmath.evaluate.calibrate: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
