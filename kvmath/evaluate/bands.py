"""Uncertainty: the evidence behind the bands on recompute and reload times, and the band
(:func:`kvmath.logic.bands.band` over :func:`band_data`), kept inside physical limits.

* Recompute, calibrated model: the held-out error of the operator fit (90th percentile of
  |error| on profiles the fit never saw, ``kvmath/data/prefill_heldout.csv``) either way,
  but never faster than the ideal roofline, which no prefill beats.
* Recompute, ideal model: from the lowest measured/predicted speed of the dense prefill rows
  of ``validation.csv`` up to the default efficiency (an upper bound).
* Reload: the binding hop's efficiency moves over the spread of the measured/predicted
  ratios of the validation rows on that link (with the known limits a reload can meet),
  clamped to efficiency 1: a link never runs
  above its datasheet or spec rate. A link without rows has no band. An engine whose offload
  writes overlap its reloads keeps the host link's duplex share nominally; the band's fast end
  is the link to itself (nothing else offloading meanwhile). A drive's band reaches down to
  the share a GPU across a PCIe switch measured (``placement`` in efficiencies.csv).
* A one-token forward the model misses (a failing batch-1 decode row of the configuration)
  moves the reload's own step by that miss.
* A GPU whose prefill is another GPU's fit (no operator profile of its own) takes the widest
  error that borrowed fit showed on rows expected to hold; an engine with fitted request costs
  widens the reload by its widest error on held-apart reload rows.
* A configuration a validation row shows the model missing (expect = fail: same model, GPU,
  TP and expert layout) takes that row's measured/predicted into its band and is named.
"""
from __future__ import annotations

import math
from functools import lru_cache

from kvmath.codegen.own_values import MODEL_SYMBOLS
from kvmath.evaluate.api import crossings, fn, scenario, scenario_values
from kvmath.evaluate.validation import measurements, model_of, predict
from kvmath.logic import bands as _bands
from kvmath.logic.rules import shape_key
from kvmath.tables.rows import bundled
from kvmath.tables.schema import table

@lru_cache(maxsize=None)
def efficiency_range():
    """(low, high) factor on the flat prefill efficiency, from the dense-model prefill rows
    (the flat model does not describe MoE prefill at all: see the validation chapter)."""
    from kvmath.evaluate.validation import model_of
    ratios = [predict(m, {"prefill": "ideal"}) / m.measured_value for m in measurements()
              if m.quantity in ("ttft_s", "prefill_s") and m.expect == "pass"
              and not model_of(m.model).is_moe]
    return (min(ratios + [1.0]), 1.0)


#: the prefill rows of validation.csv a GPU's fit is judged on (published prefills no fit saw)
PREFILL_QUANTITIES = ("ttft_s", "prefill_s", "ttft_recompute_s")


@lru_cache(maxsize=None)
def prefill_row_errors(gpu_name):
    """The signed misses of the GPU's published prefill rows expected to hold, on one node (a
    multi-node layout's misses are its own known limits), as a share of the predicted prefill:
    (predicted - measured) over the recompute the row's prediction holds (a time to first token
    adds the request's costs, which the recompute band does not scale)."""
    from kvmath.evaluate.validation import ttft_result
    cat = bundled()
    out = []
    for m in measurements():
        if (m.quantity in PREFILL_QUANTITIES and m.gpu == gpu_name and m.expect == "pass"
                and max(m.tp, m.ep or 1) <= cat.gpus[m.gpu].gpus_per_node):
            p = predict(m)
            prefill = ttft_result(m)["recompute_s"] if m.quantity == "ttft_recompute_s" else p
            out.append((p - m.measured_value) / prefill)  # signed: > 0 predicted slow
    return out


#: prefill_heldout.csv's profile name for a GPU's published prefill rows (its p90 column holds
#: their widest miss; scripts/fit_prefill.py writes them from prefill_row_errors)
PUBLISHED_PROFILE = "published prefill rows (validation.csv)"


@lru_cache(maxsize=None)
def calibrated_error(gpu_name):
    """The calibrated model's error either way on a GPU, from prefill_heldout.csv: the widest
    miss of its published prefill rows that no fit saw (:func:`prefill_row_errors`, written by
    scripts/fit_prefill.py) and, where the GPU has Vidur's profiles (a second harness no GEMM fit
    saw), the 90th percentile of the per-layer error on them; a GPU with neither: the largest
    over the GPUs with fits of their own that have them (a borrowed fit carries its own, wider
    factor: :func:`borrowed_fit_factor`)."""
    rows = [r for r in table("prefill_heldout").values() if r.set == "held-out"
            and not r.profile.startswith("aiconfigurator")]
    own = [r.p90_abs_error for r in rows if r.gpu == gpu_name]
    if own:
        return max(own)
    return max([max(r.p90_abs_error for r in rows if r.gpu == g) for g in bundled().gpus
                if g != gpu_name and g not in borrowed_fit_gpus()
                and [r for r in rows if r.gpu == g]])


@lru_cache(maxsize=None)
def bandwidth_range(link):
    """(low, high) factor on a link's effective bandwidth, from its measurements: the rows
    expected to hold, and the known limits a reload can meet (``widens_band``: many NICs at
    once, large drive reads), not those of other copy sizes or buffers."""
    ratios = [m.measured_value / predict(m) for m in measurements()
              if m.quantity == "bandwidth_Bps" and m.link == link
              and (m.expect == "pass" or m.widens_band)]
    # a drive read from a GPU across a PCIe switch keeps only its measured share
    # (efficiencies.csv, quantity placement)
    ratios.append(bundled().links[link].placement_retained)
    return (min(ratios + [1.0]), max(ratios + [1.0]))


#: how close the path's B must be to the narrowest per-GPU hop for that hop to bind (relative)
BINDING_REL_TOL = 1e-12


def binding_hop(v, hops):
    """The hop that sets the path's bandwidth (logic.binding_hop)."""
    return _bands.binding_hop(v, hops, band_data())


def reload_bandwidth_range(v, hops):
    """(low, high) effective per-GPU reload bandwidth, B/s (logic.reload_bandwidth_range)."""
    return tuple(_bands.reload_bandwidth_range(v, hops, band_data()))


def band(model, gpu, tier, tokens, **fields):
    """Nominal comparison plus its range (logic.band) of the scenario of ``fields`` (the
    scenario record's, by name): recompute and reload times at the ends of their bands, whether
    the verdict flips inside them; each range a (low, high) tuple."""
    return band_of(scenario(model, gpu, tier, **fields), tokens)


def band_of(s, tokens):
    """:func:`band` of a scenario record."""
    b = _bands.band(s, tokens, band_data())
    for key in ("recompute_s", "reload_s", "ttft_recompute_s", "ttft_reload_s",
                "reload_bandwidth_Bps"):
        b[key] = tuple(b[key])
    return b


def reload_floor(r, step_s):
    """The fastest a compare() result's reload can be with an engine step of step_s, s
    (logic.reload_floor)."""
    return _bands.reload_floor(r, step_s)


def engine_cost_factor(engine_name):
    """The reload band's widening for an engine whose request costs are fitted: its
    held_out_reload_factor in engine_costs.csv (kvmath.evaluate.engine_fit.held_out_reload_factor,
    written by scripts/fit_engine_costs.py); 1 for an engine without fitted costs."""
    from kvmath.tables.rows import engine_costs
    row = engine_costs(engine_name).get("held_out_reload_factor")
    return row.value if row is not None else 1.0


@lru_cache(maxsize=None)
def borrowed_fit_gpus():
    """GPUs whose calibrated prefill is another GPU's fit (prefill_fit.csv rows that are
    assumptions): no operator profile of their own."""
    return frozenset(r.gpu for r in table("prefill_fit").values()
                     if r.kind == "assumption" and r.parameter == "eta_g")


_PREFILL_QUANTITIES = ("ttft_s", "prefill_s", "ttft_recompute_s")


@lru_cache(maxsize=None)
def borrowed_fit_factor():
    """The widest predicted/measured (either way) of the prefill and cold-TTFT rows expected
    to hold on GPUs with a borrowed fit: how far such a fit was from measurements (1 with none;
    the rows it misses outright are known limits, carried by :func:`known_limits`)."""
    ratios = [predict(m) / m.measured_value for m in measurements()
              if m.quantity in _PREFILL_QUANTITIES and m.gpu in borrowed_fit_gpus()
              and m.expect == "pass"]
    return max([max(r, 1 / r) for r in ratios] + [1.0])


@lru_cache(maxsize=None)
def _failing_rows():
    return tuple((m, m.measured_value / predict(m)) for m in measurements()
                 if m.expect == "fail" and m.model and m.gpu and m.tp
                 and m.quantity in (*_PREFILL_QUANTITIES, "ttft_reload_s", "decode_step_s")
                 # a batched decode row times a decode batch, not a reload's one-token step
                 and (m.quantity != "decode_step_s" or m.batch == 1))


def shape(model):
    """The architecture of a model row, as text (logic.shape_key)."""
    return shape_key(model)


@lru_cache(maxsize=None)
def _shape_of(name):
    return shape(model_of(name))


def known_limits(model, gpu_name, r):
    """(row, measured/predicted) of the validation rows outside their tolerance whose model
    architecture (its shapes, whatever its name), GPU, tensor-parallel degree and expert layout
    are those of compare() result r (logic.known_limits)."""
    rows = {m.id: (m, ratio) for m, ratio in _failing_rows()}
    s = scenario(model, gpu_name, None)
    return [rows[k["id"]] for k in _bands.known_limits(s, r, band_data())]


def tornado(model, gpu, tier, tokens, tp=None, output="speedup", **kw):
    """Swing of one output (``speedup`` of reload over recompute, or ``crossing``: the largest
    crossing length) of the flat model as each input moves across its range, others at nominal.

    Inputs: prefill efficiency and path bandwidth (measured ranges), the engine's wait (its
    steps, up to one more: an asynchronous load also waits for a step boundary, which the
    profiles do not count) and HBM bandwidth (halved and doubled: no measured spread is bundled).
    The engine step, a one-token prefill on this flat model, is re-timed as the inputs move, and
    never drops below it.
    """
    if kw.get("codec") is not None:  # its swing is the path's rate, not the decoded one
        from kvmath.logic.runtime import ScenarioError
        raise ScenarioError("tornado takes no codec: its bandwidth swing is the path's own rate")
    v, hops = scenario_values(model, gpu, tier, tp=tp, **kw)
    for key in ("layout", "engine", "copy_bytes"):
        v.pop(key)

    def out(values):
        if output == "crossing":
            cs = crossings(values)
            return max(cs) if cs else math.nan
        at = {**values, "T": float(tokens)}
        return float(fn("t_recompute").take(at)) / float(fn("t_reload").take(at))

    base = out(v)
    e_lo, e_hi = efficiency_range()
    b_lo, b_hi = (x / v["B"] for x in reload_bandwidth_range(v, hops))
    steps = v["n_step"]
    swings = {"prefill efficiency": ("eta", e_lo, e_hi), "reload bandwidth": ("B", b_lo, b_hi),
              "engine wait": ("n_step", 1.0, (steps + 1) / steps if steps else 1.0),
              "HBM bandwidth": ("B_hbm", 0.5, 2.0)}
    def moved(sym, factor):
        """The values with one input scaled, the engine step (a one-token prefill on this flat
        model) and the fixed cost re-timed to match."""
        values = {**v, sym: v[sym] * factor}
        values["t_step"] = float(fn("t_step_ideal").take(values))
        values["t_0"] = float(fn("fixed_cost").take(values))
        return values

    rows = []
    for label, (sym, lo, hi) in swings.items():
        a = out(moved(sym, lo))
        b = out(moved(sym, hi))
        # a crossing that appears or vanishes inside the range is the largest swing of all
        swing = math.inf if math.isnan(a) != math.isnan(b) else (
            0.0 if math.isnan(a) else abs(b - a))
        rows.append({"input": label, "low_factor": lo, "high_factor": hi, "at_low": a,
                     "at_high": b, "swing": swing})
    rows.sort(key=lambda r: -r["swing"])
    return base, rows


@lru_cache(maxsize=None)
def band_data():
    """The measured factors :func:`kvmath.logic.bands.band` applies (by link, GPU and engine) and the
    configurations validation rows show the model missing (each with its architecture as
    logic.shape_key): computed once from the tables and the validation rows; the calculator
    holds the same (kvmath.present.calculator)."""
    cat = bundled()
    limits = [{"id": m.id, "shape": _shape_of(m.model), "gpu": m.gpu, "gpus": m.tp,
               "ep": m.ep if m.ep and m.ep > 1 else None, "dp_attention": bool(m.dp_attention),
               "quantity": m.quantity, "ratio": ratio} for m, ratio in _failing_rows()]
    from kvmath.tables.rows import engines
    return {"bandwidth_range": {name: list(bandwidth_range(name)) for name in cat.links},
            "calibrated_error": {g: calibrated_error(g) for g in cat.gpus},
            "calibrated_error_default": calibrated_error("h100-sxm"),
            "borrowed_fit_gpus": sorted(borrowed_fit_gpus()),
            "borrowed_fit_factor": borrowed_fit_factor(),
            "efficiency_low": efficiency_range()[0],
            "engine_cost_factor": {e: engine_cost_factor(e) for e in engines()},
            "known_limits": limits, "binding_rel_tol": BINDING_REL_TOL,
            "model_symbols": list(MODEL_SYMBOLS)}


def gpu_fit_summary():
    """One row per bundled GPU: which prefill fit it runs ("own": aiconfigurator's tables of
    that GPU; "borrowed": H100's, an assumption), its GEMM (BF16) and attention held-out
    median |error| on the operator tables, and its published prefill rows no fit saw
    (validation.csv ttft_s, prefill_s, ttft_recompute_s): how many, how many hold, and the
    widest |error| of those expected to hold; the recompute band it takes."""
    heldout = [r for r in table("prefill_heldout").values() if r.set == "held-out"]
    out = []
    for g in bundled().gpus:
        def held(profile):
            rs = [r.median_abs_error for r in heldout if r.gpu == g and r.profile == profile]
            return rs[0] if rs else None
        rows = [(m, predict(m) / m.measured_value) for m in measurements()
                if m.quantity in PREFILL_QUANTITIES and m.gpu == g]
        ok = [abs(r - 1) for m, r in rows if m.expect == "pass"]
        out.append({"gpu": g, "fit": "borrowed" if g in borrowed_fit_gpus() else "own",
                    "gemm_held": held("aiconfigurator gemm bfloat16 (n or k 2048, 7168)"),
                    "attention_held": held("aiconfigurator attention (fewer heads)"),
                    "rows": len(rows), "within": sum(
                        1 for m, r in rows if 1 / m.tolerance_factor <= r <= m.tolerance_factor),
                    "worst_pass": max(ok) if ok else None, "band": calibrated_error(g)})
    return out
