"""The chapters' facade: every name a chapter of the book uses, from the layer that defines it.
A chapter imports ``kvmath.book`` and nothing else of kvmath (tests/book/test_book.py checks), so the
package can move beneath the book without a chapter changing. Grouped by layer, lowest first.
"""
from kvmath.derive import (kv as derive_kv, prefill as derive_prefill, reuse as derive_reuse,
    serving as derive_serving, symbols, symcache)
from kvmath.derive.attention import FAMILIES as attention_families
from kvmath.codegen.catalogue import expression as catalogued_expression
from kvmath.codegen.javascript import calculator_keys
from kvmath.codegen.numpy_printer import render_logic
from kvmath.tables.rows import (Pause, bundled, codecs, data_path, deployments, drives,
    engine_costs, engines, gpu_prices, nodes, pauses, plan_defaults, pools, prices, read,
    resolve_gpu, resolve_model, resolve_tier, rope_scalings, thresholds, transfer_curves)
from kvmath.tiers.build import pool_tier, pool_tiers
from kvmath.tables.schema import table as data_table
from kvmath.evaluate import engine_fit
from kvmath.evaluate.bands import (band, bandwidth_range, borrowed_fit_factor, borrowed_fit_gpus,
    calibrated_error, efficiency_range, engine_cost_factor, gpu_fit_summary, tornado)
from kvmath.evaluate import copy_fit as copy_fit_module, operator_fit
from kvmath.evaluate.copy_fit import fit as copy_fit
from kvmath.tables.copies import copy_paths
from kvmath.evaluate.changes import (EARLIER_RELEASE, LAST_RELEASE, MOVED_FRACTION,
    OTHER_CAUSE, PREVIOUS_RELEASE, WHY_KERNEL, WHY_LAYOUT, WHY_MLA, WHY_MOE, WHY_NOW_LAYOUT,
    WHY_NOW_RECOMPUTE, WHY_NOW_RELOAD, breakeven_then_now, cause, diff, diff_since_earlier,
    diff_since_last, snapshot, tp_moves)
from kvmath.evaluate.api import (DEFAULT_ENGINE, Numeric, ScenarioError, architecture_values,
    node_layout_tp,
    compare, crossings, default_concurrency, engine_costs_calibrated, fit_transfer_curve, fn,
    node_nvme_tier,
    parameter_counts, path_values, replication, scenario, scenario_values, sweep)
from kvmath.logic.constants import PARTS as PREFILL_PARTS_NAMES
from kvmath.logic.rules import served_model, stores_once
from kvmath.logic.path import tier_exists_on
from kvmath.evaluate.prefill import fitted_parameters, prefill_time
from kvmath.evaluate.reuse import gpu_second_price, pause_values, reuse, rfn, saved_s, tier_prices
from kvmath.node.plan import nvme_value, tier_plan
from kvmath.fleet.routers import ROUTERS, reach
from kvmath.evaluate.serving import busy, overlap, split
from kvmath.evaluate.validation import MARGIN_FACTOR, measurements, table as validation_table
from kvmath.scenario.options import DEFAULT_PAUSE
from kvmath.traces import readers as trace_readers, replay as trace_replay
from kvmath.traces.statistics import batch_context_of
from kvmath.traces.generate import agent_parameters, agent_trace
from kvmath.traces.plan_vs_replay import max_abs, plan_vs_replay, trace_pause
from kvmath.traces import policies as trace_policies
from kvmath.fleet.routers import BY_NAME as router_rows
from kvmath.fleet.routing import route
from kvmath.fleet.changes import fleet_since, fleet_snapshot
from kvmath.fleet.metrics import parse_slo, slo_label
from kvmath.fleet.run import fleet, fleet_cost, meets, nodes_needed
from kvmath.fleet.validation import (case as fleet_case, case_names as fleet_cases,
    case_node as fleet_case_node,
    error_summary as fleet_error_summary, predictions as fleet_predictions,
    table as fleet_validation_table, why_not as fleet_why_not)
from kvmath.scenario.schedulers import DEFAULT as DEFAULT_SCHEDULER, PROFILES as SCHEDULERS
from kvmath.cli.reference import argument_rows, commands, output_of as command_output
from kvmath.present.calculator import (DEFAULTS, ERF_TOLERANCE, PLOT_TIERS, calculator_gpus,
    calculator_tiers)
from kvmath.present.figures import hop_figure, tier_diagram, ttft_curves, ttft_figure
from kvmath.present.report import (decision, decision_rows, decision_table, fmt_bw, fmt_bytes,
    fmt_time, fmt_tokens, latex, layout_cell, md_table)
