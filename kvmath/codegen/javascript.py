"""The calculator's formulas: SymPy expressions printed as JavaScript.

Every SymPy expression the calculator evaluates is printed by SymPy's ``JavascriptCodePrinter``
as ``function(values) -> number``: :data:`COMPARE_EXPRESSIONS` (the results ``compare``
reports), :data:`SCENARIO_EXPRESSIONS` (the layout, engine and path arithmetic of
:func:`kvmath.evaluate.compare.scenario_values`), the architecture expressions that turn a model row
into e_kv, rho, N_lin, N_tot, N_xa, N_xs, and the calibrated prefill's parts
(:mod:`kvmath.derive.prefill`). ``scripts/generate_numeric.py`` writes them to
``kvmath/_generated/kvcalc_formulas.js`` with the numeric code; a test checks the file is current, so
the book build needs no SymPy (:mod:`kvmath.present.calculator`).
"""
from __future__ import annotations

import json

import sympy as sp
from sympy.printing.jscode import JavascriptCodePrinter

from kvmath.derive import kv as D
from kvmath.derive import prefill as DP
from kvmath.derive.attention import FAMILIES
from kvmath.derive.symbols import MEANING

# the calculator's own values: symbols of the model and GPU rows a reader may set, as query
# parameters by symbol name (bounds from the table fields they stand for: kvmath.present.calculator)
#: architecture symbols a reader may override (the model row's fields as symbols)
MODEL_SYMBOLS = ("d", "n_q", "L_full", "L_win", "W", "n_kv", "d_h", "r_kv", "d_rope", "d_nope",
                 "r_q", "I_ffn", "I_exp", "E", "k_top", "E_sh", "L_dense", "L_moe", "V", "tied",
                 "d_qk", "d_v", "L_rec", "n_rk", "n_rv", "d_rk", "d_rv", "k_conv", "b_st")
#: GPU symbols a reader may override
GPU_SYMBOLS = ("P", "B_hbm", "C_hbm", "N_node")


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
    "node_hop_bytes": D.node_bytes,
    "state_bytes": D.state_bytes,
    "state_checkpoint_tokens": D.state_checkpoint_tokens,
    "prefill_flops": D.flops_prefill,
    "compute_s": D.t_compute,
    "weights_read_s": D.t_weights,
    "recompute_s": D.t_recompute,
    "reload_s": D.t_reload,
    "ttft_recompute_s": D.ttft_cold,
    "ttft_reload_s": D.ttft_hit,
    "overlap_hidden_s": D.t_overlap_hidden,
    "request_s": D.t_request,
    "model_flops_per_kv_byte": D.model_flops_per_kv_byte,
    "model_flops_per_kv_byte_at_tokens": D.model_flops_per_kv_byte_at_T,
    "gpu_flops_per_link_byte": D.gpu_flops_per_link_byte,
}
#: the scenario's own arithmetic (kvmath.evaluate.compare.scenario_values, choose_layout, tier_path,
#: compare): name -> SymPy expression
SCENARIO_EXPRESSIONS = {
    "copy_bytes": D.copy_bytes,
    "bandwidth_at_size": D.bandwidth_at_size,
    "bandwidth_at_size_qd": D.bandwidth_at_size_qd,
    "B_path": D.B_path,
    "B_path_state": D.B_path_state,
    "default_concurrency": D.default_concurrent_reloads,
    "fixed_cost": D.fixed_cost,
    "t_step_ideal": D.t_step_ideal,
    "t_suffix": D.t_suffix,
    "weights_per_gpu": D.weights_per_gpu,
    "hbm_slack": D.hbm_slack,
    "breakeven_bandwidth_at": D.breakeven_bandwidth_at,
    "dtype_bytes": D.dtype_bytes,
    "hop_utilisation": D.hop_utilisation,
    "concurrent_reloads_at_load": D.concurrent_reloads_at_load,
    "speedup": sp.Max(t_reload_s, t_recompute_s) / sp.Min(t_reload_s, t_recompute_s),
}
#: symbols each attention family derives from its row, in evaluation order (name -> expression)
ARCHITECTURE_EXPRESSIONS = {
    name: {"e_kv": fam.e_kv, "N_lin": D.params_active_matmul(fam.attn_params),
           "N_tot": D.params_total(fam.attn_params), "N_xa": D.params_routed_active,
           "N_xs": D.params_routed_stored}
    for name, fam in FAMILIES.items()}
#: each family's copies across K GPUs and the elements a per-head scale covers
FAMILY_EXPRESSIONS = {name: {"rho": fam.rho, "head_elements": fam.head_elements}
                      for name, fam in FAMILIES.items()}
#: the calibrated prefill's parts (s), by attention family; their sum is the calibrated recompute
PREFILL_PARTS = dict(DP.PARTS)


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
    """The formulas file: window.KVCALC_FORMULAS = {outputs, scenario, architecture, prefill,
    family}
    (breakeven_tokens are the roots of ttft_reload_s - ttft_recompute_s, found numerically)."""
    expressions = COMPARE_EXPRESSIONS if expressions is None else expressions
    arch = ",\n    ".join(f"{json.dumps(k)}: {_block(v, '    ')}"
                          for k, v in ARCHITECTURE_EXPRESSIONS.items())
    pre = ",\n    ".join(f"{json.dumps(k)}: {_block(v, '    ')}" for k, v in PREFILL_PARTS.items())
    fams = ",\n    ".join(f"{json.dumps(k)}: {_block(v, '    ')}" for k, v in FAMILY_EXPRESSIONS.items())
    return ("// Generated by kvmath.codegen.javascript (scripts/generate_numeric.py) from the SymPy expressions; do not edit.\n"
            "window.KVCALC_FORMULAS = {\n"
            f"  outputs: {_block(expressions)},\n"
            f"  scenario: {_block(SCENARIO_EXPRESSIONS)},\n"
            f"  architecture: {{\n    {arch}\n  }},\n"
            f"  prefill: {{\n    {pre}\n  }},\n"
            f"  family: {{\n    {fams}\n  }},\n"
            f"  inputs: {json.dumps(_inputs())}\n"
            "};\n")


def _inputs():
    meaning = {s.name: m for s, m in MEANING.items()}
    out = []
    for name in (*MODEL_SYMBOLS, *GPU_SYMBOLS):
        what, unit = meaning.get(name, (name, ""))
        out.append({"symbol": name, "meaning": what, "unit": unit})
    return out
