"""Random calculator scenarios (CLI flag names) and Python's compare for each, shared by the
Node test (tests/present/test_webcalc.py) and the browser test (tests/browser/test_calculator.py)."""
import math
import random

from kvmath import bundled
from kvmath.evaluate.bands import band
from kvmath.evaluate.api import PREFILL_MODELS, ScenarioError
from kvmath.logic.path import node_gpu, node_tier
from kvmath.logic.rules import served_model
from kvmath.present.calculator import calculator_gpus, calculator_tiers
from kvmath.tables.rows import engines, nodes

#: the calculator's tiers: the node's every GPU has, and the bundled pools (pool:NAME); its GPUs:
#: every bundled one but the projections
TIERS = calculator_tiers()
GPUS = sorted(calculator_gpus())

#: relative difference allowed: both sides evaluate the same expressions in IEEE doubles, so
#: only the order of operations (about 1e-15) and bisection to machine precision separate them
REL = 1e-9
#: compare --json keys checked as numbers
NUMERIC = ["recompute_s", "reload_s", "compute_s", "weights_read_s", "kv_bytes",
           "kv_bytes_per_gpu", "kv_bytes_unique", "kv_bytes_per_token", "node_hop_copies",
           "prefill_flops", "speedup", "min_reload_bandwidth_Bps", "model_flops_per_kv_byte",
           "model_flops_per_kv_byte_at_tokens", "gpu_flops_per_link_byte",
           "reload_bandwidth_Bps", "reload_latency_s", "reload_fixed_s", "reload_step_s", "request_fixed_s",
           "ttft_recompute_s", "ttft_reload_s", "overlap_hidden_s", "request_s", "hit_cost_s", "hash_token_s",
           "tokenize_token_s", "hit_token_s", "reload_queue_s",
           "kv_replication", "prefill_efficiency", "concurrent_reloads", "hbm_free_bytes_per_gpu",
           "weights_bytes_per_gpu"]
#: a hybrid model's keys (absent for the others, on both sides)
STATE = ["state_checkpoint_at_tokens", "state_tail_tokens", "state_checkpoint_tokens"]
#: keys checked for equality
EXACT = ["context_window_tokens", "engine_costs_caveat", "new_tokens", "token_ids", "winner", "tp", "ep", "gpus", "dp_attention", "engine", "prefill_model",
         "weight_dtype", "compute_dtype", "kv_dtype", "layout_from"]


def close(a, b):
    if b is None or (isinstance(b, float) and not math.isfinite(b)):
        return a is None or a == "inf" or (isinstance(a, float) and math.isinf(a))
    return a == b or abs(a - b) <= REL * max(abs(a), abs(b))


def python(s):
    """compare --json (compare() and its bands) for a scenario given by CLI flag names; None
    when it is a ScenarioError."""
    cat = bundled()
    try:
        gpu, tier = cat.gpus[s["gpu"]], TIERS[s["tier"]]
        if "node" in s:  # as compare --node: the node's GPU and count, its drives for nvme
            node = nodes()[s["node"]]
            gpu, tier = node_gpu(node, cat.gpus[node.gpu], gpu), node_tier(node, tier)
        b = band(served_model(cat.models[s["model"]], s.get("rope-scaling")), gpu, tier,
                       s["tokens"], tp=s.get("tp"), ep=s.get("ep"), batch=s.get("batch", 1),
                       engine=s.get("engine"), prefill=s.get("prefill", "calibrated"),
                       concurrent_reloads=s.get("concurrent-reloads"),
                       resume_rate=s.get("resume-rate"),
                       kv_dtype=s.get("kv-dtype"), efficiency=s.get("efficiency"),
                       bandwidth_Bps=s["bandwidth"] * 1e9 if "bandwidth" in s else None,
                       allow_beyond_context=s.get("allow-beyond-context", False))
    except ScenarioError:
        return None
    return {**b["nominal"], **{f"{k}_band": list(b[k]) for k in BAND_KEYS},
            "reload_bandwidth_Bps_band": (list(b["reload_bandwidth_Bps"])
                                          if b["reload_bandwidth_Bps"][0] is not None else None),
            "verdict_flips_in_band": b["flips"], "prefill_fit_own": b["prefill_fit_own"],
            "binding_hop": b["binding_hop"], "known_limits": b["known_limits"]}


#: band() ends checked as numbers (compare --json's KEY_band)
BAND_KEYS = ("recompute_s", "reload_s", "ttft_recompute_s", "ttft_reload_s")


#: scenarios always checked: LMCache reads a replicated MLA latent once, replicated GQA heads per
#: rank; a per-layer engine copies K and V apart, an MLA latent whole
PINNED = [{"model": m, "gpu": "h200", "tier": "nvme", "tokens": 32768, "tp": 8, "engine": e}
          for m in ("deepseek-v3", "qwen3-30b-a3b") for e in ("lmcache", "vllm-per-layer")] + [
    {"model": m, "gpu": "h100-sxm", "tier": "host-dram", "tokens": 8192, "engine": "vllm-cross-layer"}
    # a sliding-window hybrid copies per layer; all-window does not
    for m in ("gpt-oss-120b", "mistral-7b")] + [
    {"model": m, "gpu": "h200", "tier": "host-dram", "tokens": 8192, "kv-dtype": "int4"}
    for m in ("gpt-oss-120b", "deepseek-v3")] + [  # INT4's scale per head: 64 wide, an MLA latent
    # hybrid models: a state checkpoint below the prefix, its tail computed with the new turn
    {"model": "qwen3-next-80b-a3b", "gpu": "h100-sxm", "tier": "nvme", "tokens": 32768},
    {"model": "kimi-linear-48b-a3b", "gpu": "h200", "tier": "host-dram", "tokens": 100001,
     "tp": 2, "engine": "lmcache"},
    # its band at the load is taken at the checkpoint reloaded (the browser test found it at
    # the prompt's own length on one side)
    {"model": "qwen3-next-80b-a3b", "gpu": "h100-pcie", "tier": "pool:3fs-nvme", "tokens": 8127,
     "prefill": "ideal", "resume-rate": 0.294, "batch": 8},
    # served beyond its config's window by the YaRN scaling its card states
    {"model": "qwen3-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 100000,
     "rope-scaling": "yarn"},
    # a node's own drives (a GB200 tray's four) and GPU count
    {"model": "llama-3.1-70b", "gpu": "gb200", "tier": "nvme", "tokens": 32768,
     "node": "gb200-nvl72-tray"}]


def scenarios(n, seed=20261130, errors=0):
    """n scenarios that compare evaluates (the pinned ones first when n exceeds them; and
    `errors` that it refuses), with its results."""
    cat, rng = bundled(), random.Random(seed)
    good, bad = [(s, python(s)) for s in PINNED] if n > len(PINNED) else [], []
    while len(good) < n or len(bad) < errors:
        m = cat.models[rng.choice(list(cat.models))]
        s = {"model": m.name, "gpu": rng.choice(GPUS),
             "tier": rng.choice(list(TIERS)),
             "tokens": int(10 ** rng.uniform(0, math.log10(m.max_context_tokens)))}
        if rng.random() < 0.4:
            s["tp"] = rng.choice([1, 2, 4, 8, 16])
        if rng.random() < 0.5:
            s["engine"] = rng.choice(sorted(engines()))
        if rng.random() < 0.3:
            s["prefill"] = rng.choice(PREFILL_MODELS)
        if rng.random() < 0.2:
            s["concurrent-reloads"] = rng.choice([1, 2, 3.5, 8])
        if rng.random() < 0.15:  # a load: the reloads in flight follow from it
            s["resume-rate"] = round(10 ** rng.uniform(-2, 1.5), 3)
        if rng.random() < 0.15:  # NVFP4 only where the GPU has FP4 tensor cores
            s["kv-dtype"] = rng.choice(["fp8", "fp8", "nvfp4", "int4"])
        if rng.random() < 0.1:
            s["efficiency"] = round(rng.uniform(0.05, 1), 3)
        if rng.random() < 0.1:
            s["bandwidth"] = round(10 ** rng.uniform(0, 3), 3)
        if rng.random() < 0.05:
            s["batch"] = rng.choice([2, 8])
        if rng.random() < 0.1:  # a node: its GPU (the calculator's form sets it too)
            node = rng.choice(sorted(n for n, r in nodes().items() if r.gpu in GPUS))
            s["node"], s["gpu"] = node, nodes()[node].gpu
        if rng.random() < 0.1:  # experts wider than attention: data-parallel attention
            s["ep"] = rng.choice([2, 8, 16])
        want = python(s)
        if want is None:
            if len(bad) < errors:
                bad.append(s)
        elif len(good) < n:
            good.append((s, want))
    return good, bad


def mismatches(cases, got):
    """(scenario, key, calculator, compare) for every disagreement."""
    out = []
    for (s, want), have in zip(cases, got):
        if "error" in have:
            out.append((s, "error", have["error"], None))
            continue
        for key in NUMERIC:
            if not close(have[key], want[key]):
                out.append((s, key, have[key], want[key]))
        for key in STATE if "state_tail_tokens" in want else ():
            if key not in have or not close(have[key], want[key]):
                out.append((s, key, have.get(key), want[key]))
        if "state_tail_tokens" in have and "state_tail_tokens" not in want:
            out.append((s, "state_tail_tokens", have["state_tail_tokens"], None))
        for key in EXACT:
            if have[key] != want[key]:
                out.append((s, key, have[key], want[key]))
        for key in [f"{k}_band" for k in BAND_KEYS] + ["reload_bandwidth_Bps_band"]:
            hv, wv = have[key], want[key]
            if (hv is None) != (wv is None) or (wv is not None and not all(
                    close(a, b) for a, b in zip(hv, wv))):
                out.append((s, key, hv, wv))
        for key in ("verdict_flips_in_band", "prefill_fit_own", "binding_hop", "known_limits"):
            if have[key] != want[key]:
                out.append((s, key, have[key], want[key]))
        hb, wb = have["breakeven_tokens"], want["breakeven_tokens"]
        if len(hb) != len(wb) or not all(close(a, b) for a, b in zip(hb, wb)):
            out.append((s, "breakeven_tokens", hb, wb))
        for hh, wh in zip(have["path"], want["path"]):
            for key in ("effective_Bps", "bytes", "time_s"):
                if not close(hh[key], wh[key]):
                    out.append((s, f"path {wh['link']} {key}", hh[key], wh[key]))
    return out


def python_reuse(s):
    """reuse --json's answer for a page state, as the command line computes it (shared by the
    Node test and the browser test)."""
    from kvmath.tables.rows import pools
    from kvmath.logic.path import node_gpu, node_tier
    from kvmath.evaluate.reuse import reuse
    from kvmath.tables.rows import node_drive, nodes, pauses, prices
    from dataclasses import replace
    cat = bundled()
    gpu = cat.gpus[s["gpu"]]
    pool = pools()[s["tier"][5:]] if s["tier"].startswith("pool:") else None
    from kvmath.present.calculator import calculator_tiers
    tier = calculator_tiers()[s["tier"]]
    drive = None
    if "node" in s:
        node = nodes()[s["node"]]
        gpu, tier = node_gpu(node, cat.gpus[node.gpu], gpu), node_tier(node, tier)
        drive = node_drive(node) if tier.name == "nvme" else None
    over = tuple((row, replace(prices()[row], value=s[flag])) for flag, row in
                 (("dram-price", "ddr5_usd_per_GB"), ("nvme-price", "nvme_usd_per_GB"))
                 if flag in s)
    return reuse(cat.models[s["model"]], gpu, tier, s["tokens"],
                 pauses()[s.get("pause", "conversation-fitted")], tp=s.get("tp"),
                 gpu_price=s.get("gpu-price"), engine=s.get("engine"), price_overrides=over,
                 reach=1.0 if pool else s.get("reach", 1.0),
                 turn_new_tokens=s.get("turn-new-tokens"), drive=drive)
