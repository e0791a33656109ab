"""Extract a filtered subset of aiconfigurator-core's measured operator tables for kvmath.

Usage (with aiconfigurator-core 0.12.0, PyYAML and pyarrow installed, or a downloaded wheel):
    python scripts/extract_aiconfigurator.py [--wheel PATH.whl] [--out DIR]
    python scripts/extract_aiconfigurator.py --check [--wheel PATH.whl]

--check writes the subset to a temporary directory and exits 1 unless every file is byte for
byte the one committed under kvmath/data/aiconfigurator/ (the subset is reproducible from the
pinned wheel). aiconfigurator-core is not one of kvmath's requirements: the subset is vendored.

Reads the pinned aiconfigurator-core wheel (version PINNED below): by default the installed package
(``import aiconfigurator_core``), or with ``--wheel`` the wheel file itself (a zip; nothing is
installed or imported from it; its sha256 must be the pinned one). Every file read is checked
against the sha256 the wheel's own RECORD gives it. Writes small, sorted CSVs under DIR (default ./subset):

    gemm.csv               GEMM latency by dtype and (m, n, k), one backend per GPU
    context_attention.csv  context (prefill) attention kernel, batch 1, by sequence length and heads
    context_mla.csv        context MLA attention kernel (kernel only, no projections), batch 1
    moe.csv                fused MoE layer (routing + grouped GEMMs, no all-to-all) by layout,
                           for each engine's own kernels (vLLM, SGLang, TensorRT-LLM)
    allreduce.csv          the serving engine's custom all-reduce, by message size and GPUs
    nccl.csv               nccl-tests all_reduce and alltoall
    systems.csv            the per-system constants aiconfigurator itself assumes (its YAML)
    silicon_sample_c1.csv  measured end-to-end rows at concurrency 1 (validation only, never fit)
    SOURCES.csv            every wheel file read: its sha256 (checked against the wheel's RECORD),
                           rows read, rows kept, output file, the versions its rows carry

Units are the wheel's: latency in milliseconds (CUDA-event mean per call, collector/helper.py
benchmark_with_power); message_size in elements (collector/network/*.py). Deterministic: the
rows are sorted on their key columns and floats are written with 6 significant digits.

Dependencies: pyarrow (aiconfigurator-core itself depends on it) and PyYAML.
"""
from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import sys
import zipfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

PINNED = "0.12.0"
#: where the subset is vendored (with its README and LICENSE, which this script does not write)
VENDORED = Path(__file__).resolve().parents[1] / "kvmath" / "data" / "aiconfigurator"
WHEEL_NAME = f"aiconfigurator_core-{PINNED}-cp311-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "aadc4aad0a00bf8a61c477c62bef43de479849c3aa0b1c3078068e08309eccc4"  # PyPI file
PKG = "aiconfigurator_core"

#: aiconfigurator system directory -> kvmath GPU name (kvmath/data/gpus.csv)
SYSTEMS = {
    "a100_sxm": "a100-sxm",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
}
#: kvmath GPUs aiconfigurator does not measure (no data directory, or an empty one)
UNMEASURED = {
    "h100-pcie": "systems/h100_pcie.yaml exists but systems/data/h100_pcie/ holds only .gitkeep",
    "mi300x": "AMD: no aiconfigurator system",
    "mi355x": "AMD: no aiconfigurator system",
    "h20": "no aiconfigurator system",
    "rubin": "no aiconfigurator system (not shipping)",
}

#: one backend per family (the version is the wheel's own "current" slot, systems/query_versions.yaml)
BACKEND = {
    "gemm": "vllm",
    # vLLM's fp8_block GEMM rows are timed eagerly (its collector passes use_cuda_graph=False for
    # fp8_block), so host overhead dominates them at small m (0.2-1.0 ms at m=1 on Blackwell);
    # TRT-LLM's are graph-timed like every other row
    "gemm:fp8_block": "trtllm",
    "attention": "vllm",
    # MoE: every engine's own kernels (their layouts differ in kind: TensorRT-LLM's CUTLASS MoE
    # slows with expert-TP width, vLLM's expert-parallel path is FlashInfer's), MOE_BACKENDS
    "custom_allreduce": "vllm",
    # vLLM ships only the whole MLA module (projections included); the kernel-only table is
    # TRT-LLM's or SGLang's, and SGLang's Hopper rows run at ~175 TFLOP/s at every length
    # (a fallback kernel), so TRT-LLM's
    "mla": "trtllm",
}

GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4")
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192, 16384)
GEMM_NK = (1024, 2048, 4096, 7168, 8192, 16384)
ATTN_BATCH = (1,)
ATTN_MIN_ISL = 16  # isl 1 rows are decode-shaped
ATTN_HEADS = (1, 2, 4, 8, 16, 32, 64)  # query heads on one GPU
ATTN_HEAD_DIM = (64, 128)
ATTN_KV_DTYPE = ("bfloat16",)
MLA_BATCH = (1,)
MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4")
MOE_BACKENDS = ("vllm", "sglang", "trtllm")
#: balanced for every layout; the power law (the wheel's default workload, EP rank 0 the busiest)
#: only where it differs in kind, across expert-parallel ranks
MOE_DIST = ("balanced", "power_law_1.01")
#: (moe_tp, moe_ep): pure expert-TP or pure EP, as kvmath's layouts, and two mixed ones (held
#: out: they test the expert-width term)
MOE_LAYOUTS = ((1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (1, 4), (1, 8), (1, 16), (1, 32),
               (2, 4), (4, 2))
MOE_TOKENS = (1, 128, 1024, 4096, 8192, 16384)
#: SGLang's wide-EP context MoE (DeepEP dispatch, DeepGEMM grouped GEMMs: the path of its
#: data-parallel attention), whose num_tokens are the whole expert-parallel group's
WIDEEP_TOKENS = (1024, 4096, 16384, 65536, 262144, 524288)
#: (hidden_size, inter_size, topk, num_experts) of kvmath's bundled MoE models
#: (kvmath/data/models.csv: mixtral-8x7b, qwen3-30b-a3b, qwen3-235b-a22b, deepseek-v3(.2),
#: gpt-oss-120b, llama-4-scout); qwen3-next-80b-a3b and kimi-linear-48b-a3b are not measured
MOE_SHAPES = ((4096, 14336, 2, 8), (2048, 768, 8, 128), (4096, 1536, 8, 128),
              (7168, 2048, 8, 256), (2880, 2880, 4, 128), (5120, 8192, 1, 16))
NCCL_OPS = ("all_reduce", "alltoall")
NCCL_DTYPE = ("half",)


# ------------------------------------------------------------------------------ sources
class Source:
    """Files of the pinned package: an installed tree or the wheel zip, read as bytes."""

    def __init__(self, wheel: str | None):
        self.wheel = wheel
        self.read_log: dict[str, str] = {}
        if wheel:
            self.zip = zipfile.ZipFile(wheel)
            names = self.zip.namelist()
            meta = [n for n in names if n.endswith(".dist-info/METADATA")]
            version = _metadata_version(self.zip.read(meta[0]).decode())
            self.names = sorted(n for n in names if n.startswith(PKG + "/"))
            with open(wheel, "rb") as fh:
                sha = hashlib.sha256(fh.read()).hexdigest()
            if sha != WHEEL_SHA256:
                raise SystemExit(f"{wheel}: sha256 {sha}, the pinned wheel's is {WHEEL_SHA256}")
        else:
            import importlib.metadata as md

            import aiconfigurator_core

            version = md.version("aiconfigurator-core")
            root = Path(aiconfigurator_core.__file__).parent
            self.root = root.parent
            self.names = sorted(str(p.relative_to(self.root)).replace(os.sep, "/")
                                for p in root.rglob("*") if p.is_file())
        if version != PINNED:
            raise SystemExit(f"aiconfigurator-core {version} found, {PINNED} pinned")
        self.version = version
        self.record = self._record()

    def _record(self) -> dict[str, str]:
        """path -> sha256 hex from the wheel's RECORD (its own hash of every file)."""
        name = f"aiconfigurator_core-{PINNED}.dist-info/RECORD"
        text = (self.zip.read(name) if self.wheel else (self.root / name).read_bytes()).decode()
        out = {}
        for row in csv.reader(io.StringIO(text)):
            if len(row) >= 2 and row[1].startswith("sha256="):
                b64 = row[1][len("sha256="):]
                out[row[0]] = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
        return out

    def read(self, name: str) -> bytes:
        data = self.zip.read(name) if self.wheel else (self.root / name).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if self.record.get(name) != sha:
            raise SystemExit(f"{name}: sha256 {sha} is not the wheel RECORD's "
                             f"{self.record.get(name)}")
        self.read_log[name] = sha
        return data

    def exists(self, name: str) -> bool:
        return name in set(self.names)

    def listdir(self, prefix: str) -> list[str]:
        """Immediate subdirectory names under prefix/."""
        out = set()
        for n in self.names:
            if n.startswith(prefix + "/"):
                rest = n[len(prefix) + 1:]
                if "/" in rest:
                    out.add(rest.split("/", 1)[0])
        return sorted(out)


def _metadata_version(text: str) -> str:
    m = re.search(r"^Version: (.+)$", text, re.M)
    return m.group(1).strip() if m else ""


DATA = f"{PKG}/systems/data"


ROW_VERSIONS: dict[str, str] = {}


def table(src: Source, path: str):
    """The parquet table; notes the versions its rows carry in their own `version` column (which
    can differ from the directory's: nccl/2.27.3/ holds rows stamped 2.29.2, for one)."""
    t = pq.read_table(io.BytesIO(src.read(path)))
    if "version" in t.column_names:
        ROW_VERSIONS[path] = " ".join(sorted({str(v) for v in t["version"].to_pylist()}))
    return t


def _vkey(v: str):
    from packaging.version import InvalidVersion, Version
    try:
        return (0, Version(v))
    except InvalidVersion:
        return (1, v)


def resolve(src: Source, system: str, family: str, backend: str, version: str, filename: str):
    """(version, path) of the table: the requested version's, else the newest older version that
    has it (the wheel's own backward fill: systems/query_versions.yaml), else None."""
    path = f"{DATA}/{system}/{family}/{backend}/{version}/{filename}"
    if src.exists(path):
        return version, path
    older = [v for v in src.listdir(f"{DATA}/{system}/{family}/{backend}")
             if _vkey(v) <= _vkey(version)
             and src.exists(f"{DATA}/{system}/{family}/{backend}/{v}/{filename}")]
    if not older:
        return None, None
    v = max(older, key=_vkey)
    return v, f"{DATA}/{system}/{family}/{backend}/{v}/{filename}"


def current_versions(src: Source) -> dict:
    q = yaml.safe_load(src.read(f"{PKG}/systems/query_versions.yaml"))
    out = {}
    for system in SYSTEMS:
        d = dict(q["defaults"])
        d.update(q.get("overrides", {}).get(system, {}))
        out[system] = {fw: v["current"] for fw, v in d.items()}
    return out


# ------------------------------------------------------------------------------ writing
def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if v != v:
            return ""
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.6g}"
    return str(v)


def write_csv(path: Path, header: list[str], rows: list[dict], key: list[str]):
    rows = sorted(rows, key=lambda r: tuple(_sortable(r[k]) for k in key + ["latency_ms"]
                                            if k in r))
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([fmt(r.get(h)) for h in header])
    return len(rows)


def _sortable(v):
    if isinstance(v, (int, float)):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def rows_of(tbl, cols):
    d = tbl.select([c for c in cols if c in tbl.column_names]).to_pydict()
    n = tbl.num_rows
    return [{c: (d[c][i] if c in d else None) for c in cols} for i in range(n)]


def isin(tbl, col, values):
    return pc.is_in(tbl[col], value_set=__import__("pyarrow").array(list(values)))


# ------------------------------------------------------------------------------ families
def extract_gemm(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        by_backend = {}
        for dt in GEMM_DTYPES:
            by_backend.setdefault(BACKEND.get(f"gemm:{dt}", BACKEND["gemm"]), []).append(dt)
        for be, dtypes in sorted(by_backend.items()):
            ver, path = resolve(src, system, "gemm", be, cur[system][be], "gemm_perf.parquet")
            if path is None:
                continue
            t = table(src, path)
            n0 = t.num_rows
            mask = pc.and_(pc.and_(isin(t, "gemm_dtype", dtypes), isin(t, "m", GEMM_M)),
                           pc.and_(isin(t, "n", GEMM_NK), isin(t, "k", GEMM_NK)))
            t = t.filter(mask)
            for r in rows_of(t, ["gemm_dtype", "kernel_source", "m", "n", "k", "latency"]):
                out.append(dict(gpu=gpu, aic_system=system, backend=be, version=ver,
                                dtype=r["gemm_dtype"], kernel_source=r["kernel_source"],
                                m=int(r["m"]), n=int(r["n"]), k=int(r["k"]),
                                latency_ms=float(r["latency"])))
            log.append((path, n0, t.num_rows, "gemm.csv"))
    return out


def extract_attention(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        be = BACKEND["attention"]
        ver, path = resolve(src, system, "attention", be, cur[system][be],
                            "context_attention_perf.parquet")
        t = table(src, path)
        n0 = t.num_rows
        mask = pc.and_(isin(t, "batch_size", ATTN_BATCH), isin(t, "head_dim", ATTN_HEAD_DIM))
        mask = pc.and_(mask, pc.and_(pc.greater_equal(t["isl"], ATTN_MIN_ISL),
                                     isin(t, "num_heads", ATTN_HEADS)))
        mask = pc.and_(mask, isin(t, "kv_cache_dtype", ATTN_KV_DTYPE))
        if "window_size" in t.column_names:
            mask = pc.and_(mask, pc.equal(pc.fill_null(t["window_size"], 0), 0))
        t = t.filter(mask)
        for r in rows_of(t, ["kernel_source", "batch_size", "isl", "num_heads",
                             "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype",
                             "latency"]):
            out.append(dict(gpu=gpu, aic_system=system, backend=be, version=ver,
                            kernel_source=r["kernel_source"], batch_size=int(r["batch_size"]),
                            isl=int(r["isl"]), num_heads=int(r["num_heads"]),
                            num_kv_heads=int(r["num_key_value_heads"]),
                            head_dim=int(r["head_dim"]), attn_dtype=r["attn_dtype"],
                            kv_cache_dtype=r["kv_cache_dtype"], latency_ms=float(r["latency"])))
        log.append((path, n0, t.num_rows, "context_attention.csv"))
    return out


def extract_mla(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        be = BACKEND["mla"]
        ver, path = resolve(src, system, "mla", be, cur[system][be], "context_mla_perf.parquet")
        if path is None:
            continue
        t = table(src, path)
        n0 = t.num_rows
        t = t.filter(isin(t, "batch_size", MLA_BATCH))
        for r in rows_of(t, ["kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads",
                             "batch_size", "isl", "tp_size", "latency"]):
            out.append(dict(gpu=gpu, aic_system=system, backend=be, version=ver,
                            kernel_source=r["kernel_source"], mla_dtype=r["mla_dtype"],
                            kv_cache_dtype=r["kv_cache_dtype"], num_heads=int(r["num_heads"]),
                            tp_size=int(r["tp_size"]), batch_size=int(r["batch_size"]),
                            isl=int(r["isl"]), latency_ms=float(r["latency"])))
        log.append((path, n0, t.num_rows, "context_mla.csv"))
    return out


def extract_moe(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        for be in MOE_BACKENDS:
            ver, path = resolve(src, system, "moe", be, cur[system][be], "moe_perf.parquet")
            if path is None:
                continue
            t = table(src, path)
            n0 = t.num_rows
            mask = pc.and_(isin(t, "moe_dtype", MOE_DTYPES), isin(t, "distribution", MOE_DIST))
            mask = pc.and_(mask, isin(t, "num_tokens", MOE_TOKENS))
            t = t.filter(mask)
            keep = []
            for r in rows_of(t, ["kernel_source", "moe_dtype", "num_tokens", "hidden_size",
                                 "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size",
                                 "distribution", "latency"]):
                shape = (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"])
                if shape not in MOE_SHAPES or (r["moe_tp_size"], r["moe_ep_size"]) not in MOE_LAYOUTS:
                    continue
                if r["distribution"] != "balanced" and (r["moe_ep_size"] == 1 or be != "vllm"):
                    continue
                keep.append(r)
            for r in keep:
                out.append(dict(gpu=gpu, aic_system=system, backend=be, version=ver,
                                kernel_source=r["kernel_source"], dtype=r["moe_dtype"],
                                num_tokens=int(r["num_tokens"]), hidden_size=int(r["hidden_size"]),
                                inter_size=int(r["inter_size"]), topk=int(r["topk"]),
                                num_experts=int(r["num_experts"]), moe_tp=int(r["moe_tp_size"]),
                                moe_ep=int(r["moe_ep_size"]), distribution=r["distribution"],
                                latency_ms=float(r["latency"])))
            log.append((path, n0, len(keep), "moe.csv"))
        ver, path = resolve(src, system, "moe", "sglang", cur[system]["sglang"],
                            "wideep_context_moe_perf.parquet")
        if path is None:
            continue
        t = table(src, path)
        n0 = t.num_rows
        t = t.filter(pc.and_(pc.equal(t["distribution"], "uniform"),
                             isin(t, "num_tokens", WIDEEP_TOKENS)))
        keep = [r for r in rows_of(t, ["kernel_source", "moe_dtype", "num_tokens", "hidden_size",
                                       "inter_size", "topk", "num_experts", "moe_tp_size",
                                       "moe_ep_size", "distribution", "latency"])
                if (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"]) in MOE_SHAPES]
        for r in keep:
            out.append(dict(gpu=gpu, aic_system=system, backend="sglang", version=ver,
                            kernel_source=r["kernel_source"], dtype=r["moe_dtype"],
                            num_tokens=int(r["num_tokens"]), hidden_size=int(r["hidden_size"]),
                            inter_size=int(r["inter_size"]), topk=int(r["topk"]),
                            num_experts=int(r["num_experts"]), moe_tp=int(r["moe_tp_size"]),
                            moe_ep=int(r["moe_ep_size"]), distribution=r["distribution"],
                            latency_ms=float(r["latency"])))
        log.append((path, n0, len(keep), "moe.csv"))
    return out


def extract_allreduce(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        be = BACKEND["custom_allreduce"]
        ver, path = resolve(src, system, "comm", be, cur[system][be],
                            "custom_allreduce_perf.parquet")
        t = table(src, path)
        impl = "backend" if "backend" in t.column_names else "implementation"
        for r in rows_of(t, ["kernel_source", "allreduce_dtype", "num_gpus", "message_size",
                             impl, "latency"]):
            out.append(dict(gpu=gpu, aic_system=system, backend=be, version=ver,
                            kernel_source=r["kernel_source"], mode=r[impl] or "",
                            dtype=r["allreduce_dtype"], num_gpus=int(r["num_gpus"]),
                            message_elements=int(r["message_size"]),
                            latency_ms=float(r["latency"])))
        log.append((path, t.num_rows, t.num_rows, "allreduce.csv"))
    return out


def extract_nccl(src, cur, log):
    out = []
    for system, gpu in SYSTEMS.items():
        spec = yaml.safe_load(src.read(f"{PKG}/systems/{system}.yaml"))
        ver = str(spec["misc"]["nccl_version"])
        path = f"{DATA}/{system}/comm/nccl/{ver}/nccl_perf.parquet"
        t = table(src, path)
        n0 = t.num_rows
        t = t.filter(pc.and_(isin(t, "op_name", NCCL_OPS), isin(t, "nccl_dtype", NCCL_DTYPE)))
        for r in rows_of(t, ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"]):
            out.append(dict(gpu=gpu, aic_system=system, backend="nccl", version=ver,
                            op=r["op_name"], dtype=r["nccl_dtype"], num_gpus=int(r["num_gpus"]),
                            message_elements=int(r["message_size"]),
                            latency_ms=float(r["latency"])))
        log.append((path, n0, t.num_rows, "nccl.csv"))
    return out


def extract_systems(src, log):
    out = []
    for system, gpu in SYSTEMS.items():
        path = f"{PKG}/systems/{system}.yaml"
        s = yaml.safe_load(src.read(path))
        g, n = s["gpu"], s["node"]
        out.append(dict(gpu=gpu, aic_system=system, mem_bw_Bps=g.get("mem_bw"),
                        mem_bw_empirical_scaling_factor=g.get("mem_bw_empirical_scaling_factor"),
                        mem_empirical_constant_latency_s=g.get("mem_empirical_constant_latency"),
                        bfloat16_tc_flops=g.get("bfloat16_tc_flops"),
                        fp8_tc_flops=g.get("fp8_tc_flops"), fp4_tc_flops=g.get("fp4_tc_flops"),
                        sm_version=g.get("sm_version"), num_gpus_per_node=n.get("num_gpus_per_node"),
                        intra_node_bw_Bps=n.get("intra_node_bw"),
                        nccl_version=s["misc"].get("nccl_version")))
        log.append((path, 1, 1, "systems.csv"))
    return out


def extract_silicon(src, log):
    path = f"{PKG}/systems/silicon_sample.csv"
    text = src.read(path).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    keep = []
    for r in rows:
        m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
        m = m or re.search(r"_c(\d+)(?:_|$)", r["id"])
        conc = int(m.group(1)) if m else None
        if conc != 1 or r["system"] not in SYSTEMS:
            continue
        r = dict(r)
        r["gpu"] = SYSTEMS[r["system"]]
        r["concurrency"] = conc
        keep.append(r)
    log.append((path, len(rows), len(keep), "silicon_sample_c1.csv"))
    return keep


SILICON_COLS = ["id", "gpu", "system", "backend", "backend_version", "model_path", "precision",
                "mode", "isl", "osl", "concurrency", "batch_size", "tp_size", "pp_size",
                "attention_dp_size", "moe_tp_size", "moe_ep_size", "gemm_quant_mode",
                "moe_quant_mode", "prefill_num_workers", "prefill_tp_size",
                "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size",
                "decode_num_workers", "decode_tp_size", "silicon_ttft_ms", "silicon_tpot_ms",
                "silicon_data_source"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help=f"read {WHEEL_NAME} itself instead of the installed package")
    ap.add_argument("--out", default=str(VENDORED))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the subset written now is the committed one")
    a = ap.parse_args(argv)
    if a.check:
        import filecmp
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            main([x for x in (argv or sys.argv[1:]) if x != "--check"] + ["--out", tmp])
            names = sorted(p.name for p in Path(tmp).iterdir())
            bad = [n for n in names if not (VENDORED / n).exists()
                   or not filecmp.cmp(Path(tmp) / n, VENDORED / n, shallow=False)]
        print("subset matches the pinned wheel" if not bad else f"differs: {', '.join(bad)}")
        return 1 if bad else 0
    src = Source(a.wheel)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cur = current_versions(src)
    log = []
    n = {}
    base = ["gpu", "backend", "version"]  # aic_system: systems.csv
    n["gemm.csv"] = write_csv(
        out / "gemm.csv", base + ["dtype", "kernel_source", "m", "n", "k", "latency_ms"],
        extract_gemm(src, cur, log), ["gpu", "dtype", "n", "k", "m", "kernel_source"])
    n["context_attention.csv"] = write_csv(
        out / "context_attention.csv",
        base + ["kernel_source", "batch_size", "isl", "num_heads", "num_kv_heads", "head_dim",
                "attn_dtype", "kv_cache_dtype", "latency_ms"],
        extract_attention(src, cur, log),
        ["gpu", "kernel_source", "head_dim", "num_heads", "num_kv_heads", "kv_cache_dtype",
         "batch_size", "isl"])
    n["context_mla.csv"] = write_csv(
        out / "context_mla.csv",
        base + ["kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "tp_size",
                "batch_size", "isl", "latency_ms"],
        extract_mla(src, cur, log),
        ["gpu", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl"])
    n["moe.csv"] = write_csv(
        out / "moe.csv",
        base + ["kernel_source", "dtype", "hidden_size", "inter_size", "topk", "num_experts",
                "moe_tp", "moe_ep", "distribution", "num_tokens", "latency_ms"],
        extract_moe(src, cur, log),
        ["gpu", "backend", "dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp",
         "moe_ep", "distribution", "num_tokens", "kernel_source"])
    n["allreduce.csv"] = write_csv(
        out / "allreduce.csv",
        base + ["kernel_source", "mode", "dtype", "num_gpus", "message_elements", "latency_ms"],
        extract_allreduce(src, cur, log),
        ["gpu", "kernel_source", "mode", "num_gpus", "message_elements"])
    n["nccl.csv"] = write_csv(
        out / "nccl.csv",
        base + ["op", "dtype", "num_gpus", "message_elements", "latency_ms"],
        extract_nccl(src, cur, log), ["gpu", "op", "dtype", "num_gpus", "message_elements"])
    n["systems.csv"] = write_csv(
        out / "systems.csv",
        ["gpu", "aic_system", "mem_bw_Bps", "mem_bw_empirical_scaling_factor",
         "mem_empirical_constant_latency_s", "bfloat16_tc_flops", "fp8_tc_flops", "fp4_tc_flops",
         "sm_version", "num_gpus_per_node", "intra_node_bw_Bps", "nccl_version"],
        extract_systems(src, log), ["gpu"])
    n["silicon_sample_c1.csv"] = write_csv(
        out / "silicon_sample_c1.csv", SILICON_COLS, extract_silicon(src, log),
        ["gpu", "model_path", "backend", "mode", "isl", "id"])
    # provenance of everything read (query_versions.yaml and the system YAMLs included)
    kept = {p: (r0, r1, f) for p, r0, r1, f in log}
    src_rows = []
    for name, sha in sorted(src.read_log.items()):
        r0, r1, f = kept.get(name, ("", "", "(versions / constants)"))
        src_rows.append(dict(path_in_wheel=name, sha256=sha, rows_read=r0, rows_kept=r1,
                             output=f, row_versions=ROW_VERSIONS.get(name, "")))
    with open(out / "SOURCES.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["package", "version", "wheel", "wheel_sha256"])
        w.writerow(["aiconfigurator-core", src.version, WHEEL_NAME, WHEEL_SHA256])
        w.writerow([])
        w.writerow(["path_in_wheel", "sha256", "rows_read", "rows_kept", "output",
                    "row_versions (the table's own version column)"])
        for r in src_rows:
            w.writerow([r["path_in_wheel"], r["sha256"], r["rows_read"], r["rows_kept"],
                        r["output"], r["row_versions"]])
    for k, v in n.items():
        print(f"{k}: {v} rows, {os.path.getsize(out / k)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
