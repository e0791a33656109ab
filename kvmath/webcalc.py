"""The book's calculator: JavaScript generated from the SymPy expressions and the bundled tables.

Nothing the calculator computes is typed into JavaScript by hand. :func:`write_static` writes

* ``kvcalc-formulas.js``: every SymPy expression the calculator evaluates, printed by SymPy's
  ``JavascriptCodePrinter`` as ``function(values) -> number``: :data:`COMPARE_EXPRESSIONS`
  (the results ``compare`` reports), :data:`SCENARIO_EXPRESSIONS` (the layout, engine and path
  arithmetic of :func:`kvmath.evaluate.scenario_values`: copy size, transfer-size bandwidth,
  path bandwidth, fixed cost, HBM slack...), the architecture expressions that turn a model row
  into e_kv, rho, N_lin, N_tot, N_xa, N_xs, and the calibrated prefill's parts
  (:mod:`kvmath.derive_prefill`);
* ``kvcalc-data.js``: the bundled models, GPUs, links, tiers, engines, deployments and the
  calibrated prefill's fitted values, as symbol values.

``_ext/kvcalc.js`` (hand-written) holds the user interface and the algorithms of
:mod:`kvmath.evaluate` that are not formulas: which deployment or TP to use (a search over
the generated ``hbm_slack``), which hops a tier has, and the crossings (bracketing the sign of
reload - recompute on a log grid, then bisecting). Change the core model, rebuild the book, and
the calculator follows; ``tests/test_webcalc.py`` runs it under Node against ``compare``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import sympy as sp
from sympy.printing.jscode import JavascriptCodePrinter

from . import derive as D
from . import derive_prefill as DP
from .evaluate import (DEFAULT_ENGINE, TP_CANDIDATES, PREFILL_MODELS, ScenarioError,
                       _efficiency, architecture_values, heads_fit)
from .symbols import MEANING
from .tables import DTYPE_BYTES, GPU_HOST_LINK, bundled
from .units import _TIME_UNITS
from .version import version_info

#: a recompute time and a reload time, for the speedup of the winner over the loser
t_reload_s, t_recompute_s = sp.symbols("reload_s recompute_s", positive=True)

#: compare()'s numeric results the page computes from the scenario's symbol values at
#: T = tokens: JSON key -> SymPy expression. recompute_s is the ideal model's; the calibrated
#: one is the sum of :data:`PREFILL_PARTS`.
COMPARE_EXPRESSIONS = {
    "kv_bytes_per_token": D.kv_bytes_per_token,
    "kv_bytes": D.kv_bytes_total,
    "kv_bytes_unique": D.kv_bytes_unique,
    "kv_bytes_per_gpu": D.kv_bytes_per_gpu,
    "node_hop_copies": D.node_copies,
    "prefill_flops": D.flops_prefill,
    "compute_s": D.t_compute,
    "weights_read_s": D.t_weights,
    "recompute_s": D.t_recompute,
    "reload_s": D.t_reload,
    "model_flops_per_kv_byte": D.model_flops_per_kv_byte,
    "model_flops_per_kv_byte_at_tokens": D.model_flops_per_kv_byte_at_T,
    "gpu_flops_per_link_byte": D.gpu_flops_per_link_byte,
}
#: the scenario's own arithmetic (kvmath.evaluate.scenario_values, choose_layout, tier_path,
#: compare): name -> SymPy expression
SCENARIO_EXPRESSIONS = {
    "rho_gqa": D.rho_gqa, "rho_mla": D.rho_mla,
    "copy_bytes": D.copy_bytes,
    "bandwidth_at_size": D.bandwidth_at_size,
    "bandwidth_at_size_qd": D.bandwidth_at_size_qd,
    "B_path": D.B_path,
    "default_concurrency": D.default_concurrent_reloads,
    "fixed_cost": D.fixed_cost,
    "weights_per_gpu": D.weights_per_gpu,
    "hbm_slack": D.hbm_slack,
    "breakeven_bandwidth_at": D.breakeven_bandwidth_at,
    "speedup": sp.Max(t_reload_s, t_recompute_s) / sp.Min(t_reload_s, t_recompute_s),
}
#: breakeven_tokens are the positive roots in T of reload - recompute (this is the ideal one)
CROSSING_EXPRESSION = D.t_advantage
#: symbols each attention kind derives from its row, in evaluation order (name -> expression)
ARCHITECTURE_EXPRESSIONS = {
    "gqa": {"e_kv": D.e_kv_gqa, "N_lin": D.params_active_matmul(D.attn_params_gqa),
            "N_tot": D.params_total(D.attn_params_gqa), "N_xa": D.params_routed_active,
            "N_xs": D.params_routed_stored},
    "mla": {"e_kv": D.e_kv_mla, "N_lin": D.params_active_matmul(D.attn_params_mla),
            "N_tot": D.params_total(D.attn_params_mla), "N_xa": D.params_routed_active,
            "N_xs": D.params_routed_stored},
}
#: the calibrated prefill's parts (s), by attention kind; their sum is the calibrated recompute
PREFILL_PARTS = {"gqa": DP.parts_gqa, "mla": DP.parts_mla}
#: the scenario the page opens with (the book's headline scenario)
DEFAULTS = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768}


class _Printer(JavascriptCodePrinter):
    """jscode with a NaN fallback for an open Piecewise and +/-Infinity as JS constants."""

    def _print_Piecewise(self, expr):
        if expr.args[-1].cond is not sp.true:
            expr = sp.Piecewise(*expr.args, (sp.nan, True))
        return super()._print_Piecewise(expr)

    def _print_NaN(self, expr):
        return "NaN"


def js_function(expr):
    """(argument names, JavaScript function source) of a SymPy expression."""
    names = sorted(s.name for s in expr.free_symbols)
    body = _Printer({"allow_unknown_functions": False}).doprint(expr)
    return names, f"function(v) {{ const {{{', '.join(names)}}} = v; return ({body}); }}"


def _block(exprs, indent="  "):
    parts = []
    for key, e in exprs.items():
        args, src = js_function(sp.sympify(e))
        parts.append(f"{indent}  {json.dumps(key)}: {{args: {json.dumps(args)}, f: {src}}}")
    return "{\n" + ",\n".join(parts) + f"\n{indent}}}"


def formulas_js(expressions=None):
    """The formulas file: window.KVCALC_FORMULAS = {outputs, scenario, crossing, architecture,
    prefill}."""
    expressions = COMPARE_EXPRESSIONS if expressions is None else expressions
    arch = ",\n    ".join(f"{json.dumps(k)}: {_block(v, '    ')}"
                          for k, v in ARCHITECTURE_EXPRESSIONS.items())
    pre = ",\n    ".join(f"{json.dumps(k)}: {_block(v, '    ')}" for k, v in PREFILL_PARTS.items())
    args, src = js_function(CROSSING_EXPRESSION)
    return ("// Generated by kvmath.webcalc from the SymPy expressions; do not edit.\n"
            "window.KVCALC_FORMULAS = {\n"
            f"  outputs: {_block(expressions)},\n"
            f"  scenario: {_block(SCENARIO_EXPRESSIONS)},\n"
            f"  crossing: {{args: {json.dumps(args)}, f: {src}}},\n"
            f"  architecture: {{\n    {arch}\n  }},\n"
            f"  prefill: {{\n    {pre}\n  }}\n"
            "};\n")


def _finite(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


#: architecture symbols a reader may override (the model row's fields as symbols)
MODEL_SYMBOLS = ("d", "n_q", "L_full", "L_win", "W", "n_kv", "d_h", "r_kv", "d_rope", "d_nope",
                 "r_q", "I_ffn", "I_exp", "E", "k_top", "E_sh", "L_dense", "L_moe", "V", "tied",
                 "d_qk", "d_v")
#: GPU symbols a reader may override
GPU_SYMBOLS = ("P", "B_hbm", "C_hbm", "N_node")


def _inputs():
    meaning = {s.name: m for s, m in MEANING.items()}
    out = []
    for name in (*MODEL_SYMBOLS, *GPU_SYMBOLS):
        what, unit = meaning.get(name, (name, ""))
        out.append({"symbol": name, "meaning": what, "unit": unit})
    return out


def _gpu(g, cat):
    from .prefill import BYTES_ACT, allreduce_figures, fitted_parameters
    peaks, etas = {}, {}
    for dt in ("bf16", "fp8"):
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
            "N_node": g.gpus_per_node, "host_link": g.host_link, "calibrated": calibrated}


def scenario_data(cat=None):
    """The bundled tables as symbol values, through the same functions compare() uses."""
    from .prefill import DEFAULT_IMBALANCE
    from .tables import deployments, engines
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
                    "duplex_retained": link.duplex_retained}
             for name, link in cat.links.items()}
    tiers = {t.name: [{"link": h.link, "count": h.count} for h in t.hops]
             for t in cat.tiers.values()}
    engs = {}
    for e in engines().values():
        engs[e.name] = {k: getattr(e, k) for k in (
            "copy_tokens", "copy_spans_layers", "kv_split", "request_fixed_s",
            "replicated_read_once", "storage_io_bytes", "queue_depth", "request_steps",
            "writes_overlap", "hbm_usable_fraction")}
    deps = {}
    for (model, gpu), d in deployments().items():
        deps.setdefault(model, {})[gpu] = {
            "tp": d.tp, "ep": d.ep, "dp_attention": d.dp_attention, "weight_dtype": d.weight_dtype,
            "compute_dtype": d.compute_dtype, "kv_dtype": d.kv_dtype,
            "reason": f"deployment: {d.source}"}
    return {"models": models, "gpus": {g.name: _gpu(g, cat) for g in cat.gpus.values()},
            "links": links, "tiers": tiers, "gpu_host_link": GPU_HOST_LINK,
            "engines": engs, "default_engine": DEFAULT_ENGINE, "deployments": deps,
            "tp_candidates": list(TP_CANDIDATES), "prefill_models": list(PREFILL_MODELS),
            "default_imbalance": DEFAULT_IMBALANCE, "dtype_bytes": DTYPE_BYTES,
            "time_units": [[u, s, _finite(up)] for u, s, up in _TIME_UNITS],
            "byte_units": [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]],
            # the CLI's override flags: --efficiency F sets eta, --bandwidth GBPS sets B in GB/s
            "flags": {"efficiency": {"symbol": "eta", "scale": 1.0},
                      "bandwidth": {"symbol": "B", "scale": 1e9}},
            # numeric_crossings' grid for the calibrated model (kvmath.evaluate)
            "numeric_crossings": {"points": 1024, "iterations": 48, "t_min": 1.0},
            "defaults": dict(DEFAULTS), "version": version_info()}


def data_js(data):
    return ("// Generated by kvmath.webcalc from the bundled tables; do not edit.\n"
            f"window.KVCALC_DATA = {json.dumps({**data, 'inputs': _inputs()}, indent=1)};\n")


def generate(expressions=None, data=None):
    """{file name: text} of the generated files.

    expressions: named SymPy expressions for the outputs (default: COMPARE_EXPRESSIONS);
    data: scenario values (default: :func:`scenario_data` of the bundled tables).
    """
    data = scenario_data() if data is None else data
    return {"kvcalc-formulas.js": formulas_js(expressions), "kvcalc-data.js": data_js(data)}


def write_static(folder):
    """Write the generated files into folder; returns their names."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = generate()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return list(files)
