"""The book's calculator: JavaScript generated from the SymPy expressions and the bundled tables.

Nothing the calculator computes is typed into JavaScript by hand. :func:`write_static` writes

* ``kvcalc-formulas.js``: the SymPy expressions as JavaScript (:mod:`kvmath.codegen.javascript`),
  generated with the numeric code by ``scripts/generate_numeric.py`` into
  ``kvmath/_generated/kvcalc_formulas.js`` (a test checks it is current);
* ``kvcalc-data.js``: the bundled models, GPUs, links, tiers, engines, deployments and the
  calibrated prefill's fitted values, as symbol values, from the tables at build time.

``_ext/kvcalc.js`` (hand-written) holds the user interface and the algorithms of
:mod:`kvmath.evaluate.compare` that are not formulas: which deployment or TP to use (a search over
the generated ``hbm_slack``), which hops a tier has, the crossings (bracketing the sign of
reload - recompute on a log grid, then bisecting), and how :func:`kvmath.evaluate.bands.band`
widens each time by the measured factors exported here. Change the core model, regenerate, rebuild
the book, and the calculator follows; ``tests/test_webcalc.py`` runs it under Node against
``compare``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from kvmath.codegen.javascript import GPU_SYMBOLS, MODEL_SYMBOLS
from kvmath.scenario.options import calculator_options
from kvmath.evaluate.compare import (DEFAULT_ENGINE, MIN_PREFIX_TOKENS, hbm_fit_fraction, TP_CANDIDATES, PREFILL_MODELS, ScenarioError,
                       _efficiency, architecture_values, heads_fit)
from kvmath.evaluate.bands import calculator_band_data
from kvmath.tables.schema import data_path, table as data_table
from kvmath.tables.rows import DTYPE_BYTES, GPU_HOST_LINK, GPU_HOST_MEMORY, PROJECTION, bundled, pool_tiers
from kvmath.present.format import TIE_SPEEDUP, _TIME_UNITS
from kvmath.version import version_info

#: the generated formulas file (scripts/generate_numeric.py)
FORMULAS = data_path("").parent / "_generated" / "kvcalc_formulas.js"

#: the scenario the page opens with (the book's headline scenario)
DEFAULTS = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768}


def _finite(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


#: the table field each own-value symbol stands for, whose schema constraints bound it
OWN_FIELDS = {"d": ("models", "hidden_size"), "n_q": ("models", "num_attention_heads"),
              "L_win": ("models", "window_layers"), "W": ("models", "window"),
              "n_kv": ("models", "num_key_value_heads"), "d_h": ("models", "head_dim"),
              "r_kv": ("models", "kv_lora_rank"), "d_rope": ("models", "qk_rope_head_dim"),
              "d_nope": ("models", "qk_nope_head_dim"), "r_q": ("models", "q_lora_rank"),
              "E_sh": ("models", "shared_experts"), "L_dense": ("models", "dense_layers"),
              "V": ("models", "vocab_size"), "d_v": ("models", "v_head_dim"),
              "P": ("gpus", "bf16_dense_flops"), "B_hbm": ("gpus", "hbm_bandwidth_Bps"),
              "C_hbm": ("gpus", "hbm_capacity_bytes"), "N_node": ("gpus", "gpus_per_node")}
#: symbols that are counts of a model's parts with no field of their own (0 where the model
#: has none: no dense FFN, no experts, no full-attention layers, no recurrent layers or their
#: heads), and d_qk (a head width)
OWN_COUNTS = {"L_full": 0, "I_ffn": 0, "I_exp": 0, "E": 0, "k_top": 0, "L_moe": 0, "d_qk": 1,
              "L_rec": 0, "n_rk": 0, "n_rv": 0, "d_rk": 0, "d_rv": 0, "k_conv": 0}


def own_bounds():
    """{symbol: {integer, minimum, exclusive_min, maximum, below_max, words}}: what a reader's
    own value may be, the constraints of the table field it stands for (tied: 0 or 1)."""
    from kvmath.scenario.options import MAX_INT
    from kvmath.tables.schema import resource
    fields = {(t, f["name"]): f for t in ("models", "gpus")
              for f in resource(t)["schema"]["fields"]}
    out = {}
    for name in (*MODEL_SYMBOLS, *GPU_SYMBOLS):
        if name == "tied":
            out[name] = dict(integer=True, minimum=0, exclusive_min=False, maximum=1,
                             below_max=False, words="0 or 1")
            continue
        if name == "b_st":  # a recurrent-state element's bytes (its format's, dtypes.csv)
            out[name] = dict(integer=False, minimum=0, exclusive_min=True, maximum=None,
                             below_max=False, words="a number above 0")
            continue
        if name in OWN_COUNTS:
            f = {"type": "integer", "constraints": {"minimum": OWN_COUNTS[name]}}
        else:
            f = fields[OWN_FIELDS[name]]
        c, integer = f.get("constraints", {}), f["type"] == "integer"
        exclusive = "exclusiveMinimum" in c
        low = c.get("exclusiveMinimum", c.get("minimum"))
        high = c.get("maximum", MAX_INT if integer else None)
        words = ((f"a whole number from {low:g} to {high:,}" if integer else
                  (f"a number above {low:g}" if exclusive else f"a number of at least {low:g}"))
                 + ("" if integer or high is None else f" and at most {high:g}"))
        out[name] = dict(integer=integer, minimum=low, exclusive_min=exclusive, maximum=high,
                         below_max=False, words=words)
    return out


def _gpu(g, cat):
    from kvmath.evaluate.prefill import BYTES_ACT, allreduce_figures, fitted_parameters
    peaks, etas = {}, {}
    for dt in ("bf16", "fp8", "nvfp4"):
        try:
            peaks[dt] = g.dense_flops(dt)
        except ValueError:
            peaks[dt] = None
        try:
            etas[dt] = _efficiency(g, dt, None)
        except ScenarioError:
            etas[dt] = None
    calibrated = None
    if g.name in fitted_parameters() and g.name in allreduce_figures():
        busbw, t_ar = allreduce_figures()[g.name]
        calibrated = {**fitted_parameters()[g.name], "busbw": busbw, "t_ar": t_ar,
                      "b_act": BYTES_ACT}
    return {"description": g.description, "P": peaks, "eta": etas,
            "prefill_efficiency": g.prefill_efficiency,
            "B_hbm": g.hbm_bandwidth_Bps * g.hbm_efficiency,  # as scenario_values sets it
            "B_peak": g.hbm_bandwidth_Bps, "C_hbm": g.hbm_capacity_bytes,
            "N_node": g.gpus_per_node, "fp4": g.fp4_dense_flops is not None, "host_link": g.host_link, "host_memory_link": g.host_memory_link,
            "platform": g.platform,
            "calibrated": calibrated}


def calculator_gpus(cat=None):
    """The GPUs the page offers: every bundled one but the projections (announced parts, which
    the command line evaluates only with --allow-projection)."""
    cat = cat or bundled()
    return {n: g for n, g in cat.gpus.items() if g.kind != PROJECTION}


def calculator_tiers(cat=None):
    """The tiers the page offers: the node's tiers that every GPU has (none of tiers.csv's
    one-family tiers: a Grace tray, NVLink to a peer, CXL) and no projection link, and the
    bundled pools (pool:NAME)."""
    cat = cat or bundled()
    return {n: t for n, t in {**cat.tiers, **pool_tiers()}.items()
            if not t.gpus and all(cat.links[h.link].kind != PROJECTION for h in t.hops
                                  if h.link in cat.links)}


def scenario_data(cat=None):
    """The bundled tables as symbol values, through the same functions compare() uses."""
    from kvmath.evaluate.prefill import DEFAULT_IMBALANCE
    from kvmath.evaluate.compare import engine_costs_calibrated
    from kvmath.tables.rows import deployments, engine_costs, engines
    cat = cat or bundled()
    models = {}
    for m in cat.models.values():
        v = architecture_values(m)
        models[m.name] = {
            "attention": "mla" if m.attention == "mla" else "gqa", "kind": m.attention_kind,
            "kv_dtype": m.kv_dtype, "weight_dtype": m.weight_dtype, "is_moe": m.is_moe,
            "max_context_tokens": m.max_context_tokens,
            "tps": [k for k in TP_CANDIDATES if heads_fit(m, k)],
            "values": {k: float(v[k]) for k in MODEL_SYMBOLS}}
    links = {name: {"B_one": link.bandwidth_Bps * link.efficiency,  # as tier_path sets it
                    "latency_s": link.latency_s, "scope": link.scope,
                    "duplex_retained": link.duplex_retained,
                    "batched_copy_s": link.batched_copy_s}
             for name, link in cat.links.items()}
    # the node's tiers, and the bundled pools at the nodes their rows deploy (pool:NAME): a hop
    # is a link, its units, the node's share of them, a scope in place of the link's, the
    # engine's requests on it and whether its storage reads size it (kvmath.tables.rows.Hop)
    tiers = {name: [{"link": h.link, "count": h.count, "share": h.share, "scope": h.scope,
                     "requests": list(h.requests) if h.requests else None,
                     "engine_io": h.engine_io} for h in t.hops]
             for name, t in calculator_tiers(cat).items()}
    engs = {}
    for e in engines().values():
        engs[e.name] = {k: getattr(e, k) for k in (
            "copy_tokens", "copy_spans_layers", "copy_batched", "kv_split",
            "replicated_read_once", "stored_once", "storage_io_bytes", "queue_depth", "request_steps",
            "writes_overlap", "layer_overlap", "kernel_below_bytes")} | {"hbm_fit_fraction": hbm_fit_fraction(e),
                                  "costs": {p: r.value for p, r in engine_costs(e.name).items()},
                                  "costs_calibrated": engine_costs_calibrated(e)}
    deps = {}
    for (model, gpu), d in deployments().items():
        deps.setdefault(model, {})[gpu] = {
            "tp": d.tp, "ep": d.ep, "dp_attention": d.dp_attention, "weight_dtype": d.weight_dtype,
            "compute_dtype": d.compute_dtype, "kv_dtype": d.kv_dtype,
            "reason": f"deployment: {d.source}"}
    return {"models": models, "gpus": {g.name: _gpu(g, cat) for g in calculator_gpus(cat).values()},
            "links": links, "tiers": tiers, "gpu_host_link": GPU_HOST_LINK, "gpu_host_memory": GPU_HOST_MEMORY,
            "engines": engs, "default_engine": DEFAULT_ENGINE, "deployments": deps,
            "tp_candidates": list(TP_CANDIDATES), "prefill_models": list(PREFILL_MODELS),
            "default_imbalance": DEFAULT_IMBALANCE, "dtype_bytes": DTYPE_BYTES,
            "time_units": [[u, s, _finite(up)] for u, s, up in _TIME_UNITS],
            "byte_units": [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]],
            # the CLI's override flags: --efficiency F sets eta, --bandwidth GBPS sets B in GB/s
            "flags": {"efficiency": {"symbol": "eta", "scale": 1.0},
                      "bandwidth": {"symbol": "B", "scale": 1e9}},
            # numeric_crossings' grid for the calibrated model (kvmath.evaluate.compare)
            "numeric_crossings": {"points": 1024, "iterations": 48, "t_min": MIN_PREFIX_TOKENS},
            "tie_speedup": TIE_SPEEDUP,
            "options": calculator_options(), "own": own_bounds(),
            # kvmath.evaluate.bands.band's measured factors and known limits
            "bands": calculator_band_data(), "model_symbols": list(MODEL_SYMBOLS),
            "fp4_kv_dtypes": sorted(n for n, d in data_table("dtypes").items()
                                    if d.needs_fp4_tensor_cores),
            # formats whose scale block is one KV head (kvmath.evaluate.values.kv_element_bytes)
            "head_block_dtypes": {n: {"n_bits": d.element_bits, "s_bits": d.scale_bits}
                                  for n, d in data_table("dtypes").items() if d.block_is_head},
            "defaults": dict(DEFAULTS), "version": version_info()}


def data_js(data):
    return ("// Generated by kvmath.present.calculator from the bundled tables; do not edit.\n"
            f"window.KVCALC_DATA = {json.dumps(data, indent=1)};\n")


def generate(expressions=None, data=None):
    """{file name: text} of the generated files.

    expressions: named SymPy expressions for the outputs (default: COMPARE_EXPRESSIONS);
    data: scenario values (default: :func:`scenario_data` of the bundled tables).
    """
    data = scenario_data() if data is None else data
    if expressions is None:
        formulas = FORMULAS.read_text(encoding="utf-8")
    else:
        from kvmath.codegen.javascript import formulas_js
        formulas = formulas_js(expressions)
    return {"kvcalc-formulas.js": formulas, "kvcalc-data.js": data_js(data)}


def write_static(folder):
    """Write the generated files into folder; returns their names."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = generate()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return list(files)
