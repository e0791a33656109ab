"""Uncertainty: bands on recompute and reload times, kept inside physical limits.

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
from dataclasses import replace
from functools import lru_cache

from kvmath.evaluate.compare import Layout, compare, crossings, fn, scenario_values
from kvmath.tables.schema import table
from kvmath.tables.rows import bundled
from kvmath.evaluate.validation import measurements, model_of, predict
from kvmath.evaluate.values import coded_values

@lru_cache(maxsize=None)
def efficiency_range():
    """(low, high) factor on the flat prefill efficiency, from the dense-model prefill rows
    (the flat model does not describe MoE prefill at all: see the validation chapter)."""
    from kvmath.evaluate.validation import model_of
    ratios = [predict(m, {"prefill": "ideal"}) / m.measured_value for m in measurements()
              if m.quantity in ("ttft_s", "prefill_s") and m.expect == "pass"
              and not model_of(m.model).is_moe]
    return (min(ratios + [1.0]), 1.0)


@lru_cache(maxsize=None)
def calibrated_error(gpu_name):
    """90th-percentile |error| of the calibrated operator model on held-out profiles (the
    largest over the GPU's held-out profiles; H100's for GPUs without profiles)."""
    rows = [r for r in table("prefill_heldout").values() if r.set == "held-out"]
    own = [r.p90_abs_error for r in rows if r.gpu == gpu_name]
    return max(own or [r.p90_abs_error for r in rows if r.gpu == "h100-sxm"])


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
    """The hop that sets the path's bandwidth: the narrowest per-GPU hop when it binds, else
    the narrowest node-shared hop."""
    gpu_hops = [h for h in hops if h.scope == "per-gpu"]
    node_hops = [h for h in hops if h.scope == "per-node"]
    narrow_gpu = min(gpu_hops, key=lambda h: h.effective_Bps, default=None)
    wire = v.get("B_wire", v["B"])  # the path's own rate, before a codec's decoding
    if narrow_gpu is not None and math.isclose(wire, narrow_gpu.effective_Bps, rel_tol=BINDING_REL_TOL):
        return narrow_gpu
    return min(node_hops or gpu_hops, key=lambda h: h.effective_Bps)


def reload_bandwidth_range(v, hops):
    """(low, high) effective per-GPU reload bandwidth, B/s: the binding hop's measured spread,
    the high end clamped so that the hop's efficiency never exceeds 1."""
    hop = binding_hop(v, hops)
    link = bundled().links[hop.link]
    lo, hi = bandwidth_range(link.name)
    hi = min(hi, 1.0 / link.efficiency)  # efficiency x factor <= 1: at most the spec rate
    wire = v.get("B_wire", v["B"])
    return wire * lo, wire * hi


def band(model, gpu, tier, tokens, tp=None, **kw):
    """Nominal comparison plus its range: recompute and reload times at the ends of their
    bands, whether the verdict flips inside them, and the crossing range."""
    nominal = compare(model, gpu, tier, tokens, tp=tp, **kw)
    layout = Layout(nominal["tp"], nominal["ep"], nominal["dp_attention"], nominal["weight_dtype"],
                    nominal["compute_dtype"], nominal["kv_dtype"], nominal["layout_from"])
    keep = ("bandwidth_Bps", "engine", "codec")
    v, hops = scenario_values(model, gpu, tier, layout=layout,
                              concurrent_reloads=nominal["concurrent_reloads"],  # at the load
                              **{k: x for k, x in kw.items() if k in keep})
    at = {k: x for k, x in v.items() if k not in ("layout", "engine", "copy_bytes")}
    # the tokens reloaded: a hybrid model's last state checkpoint (compare's tail aside)
    at["T"] = float(nominal.get("state_checkpoint_at_tokens", tokens))
    at["t_0"] = nominal["reload_fixed_s"]  # its step timed by the nominal prefill model
    fastest = nominal["reload_s"]  # the reload the engine-cost widening is taken around
    if hops:
        b_lo, b_hi = reload_bandwidth_range(v, hops)
        codec = kw.get("codec")
        if codec is not None:  # in decoded bytes: decode after the slow end's transfer, and
            # overlapped with the fast end's (chunk by chunk, as a pipelined engine does)
            b_lo = coded_values(codec, tier, nominal["kv_dtype"], b_lo, pipelined=False)["B"]
            b_hi = coded_values(codec, tier, nominal["kv_dtype"], b_hi, pipelined=True)["B"]
        eng = v["engine"]
        if eng.writes_overlap or eng.copy_batched:  # the fast end: nothing else offloading
            # meanwhile (the host link without the duplex share other requests' writes leave),
            # and a batched call's copies at the driver's per-descriptor cost
            kw_alone = {**{k: x for k, x in kw.items() if k in keep},
                        "engine": replace(eng, writes_overlap=False, fast_copies=True)}
            alone, _ = scenario_values(model, gpu, tier, layout=layout,
                                       concurrent_reloads=nominal["concurrent_reloads"],
                                       **kw_alone)
            b_hi = max(b_hi, alone["B"])
            fastest = min(fastest, float(fn("t_reload").take({**at, "B": alone["B"]})))
        if eng.load_kernel(v["copy_bytes"], gpu.platform):  # the slow end: the driver
            # copies the kernel replaced
            kw_dma = {**{k: x for k, x in kw.items() if k in keep},
                      "engine": replace(eng, driver_copies=True)}
            dma, _ = scenario_values(model, gpu, tier, layout=layout,
                                     concurrent_reloads=nominal["concurrent_reloads"], **kw_dma)
            b_lo = min(b_lo, dma["B"])
        reload = (float(fn("t_reload").take({**at, "B": b_hi})),
                  float(fn("t_reload").take({**at, "B": b_lo})))
    else:  # a prefix still in HBM moves nothing: its reload is the engine step alone
        b_lo = b_hi = None
        reload = (nominal["reload_s"], nominal["reload_s"])
    own_fit = gpu.name not in borrowed_fit_gpus()
    if nominal["prefill_model"] == "calibrated":
        e = calibrated_error(gpu.name)
        ideal = float(fn("t_recompute").take(at))
        # never faster than the ideal roofline, except where the calibrated model is already
        # below it (an MoE prompt too short to touch every expert the roofline reads)
        floor = min(ideal, nominal["recompute_s"])
        lo, hi = 1 - e, 1 + e
        if not own_fit:  # a borrowed fit: as wrong as it was on the GPUs it was held against
            f = borrowed_fit_factor()
            lo, hi = min(lo, 1 / f), max(hi, f)
        recompute = (max(nominal["recompute_s"] * lo, floor), nominal["recompute_s"] * hi)
    else:
        e_lo, _ = efficiency_range()
        recompute = (nominal["recompute_s"], nominal["recompute_s"] / e_lo)
    # a configuration the model is known to miss carries that miss: the failing row's
    # measured/predicted widens its side's band
    limits = known_limits(model, gpu.name, nominal)
    # a batch-1 decode row is a one-token forward: it speaks for a one-token turn's step only
    step_ratios = [ratio for m, ratio in limits if m.quantity == "decode_step_s"
                   and nominal["new_tokens"] == 1]
    for m, ratio in limits:  # ratio: measured / predicted
        if m.quantity == "decode_step_s":  # the reload's own step, below
            continue
        if m.quantity == "ttft_reload_s":
            reload = (min(reload[0], nominal["reload_s"] * ratio),
                      max(reload[1], nominal["reload_s"] * ratio))
        else:
            recompute = (min(recompute[0], nominal["recompute_s"] * ratio),
                         max(recompute[1], nominal["recompute_s"] * ratio))
    f = engine_cost_factor(nominal["engine"])  # the fitted request costs' held-out error
    reload = (min(reload[0], fastest / f), max(reload[1], nominal["reload_s"] * f))
    # the reload's own step is a forward pass priced by the same prefill model: it moves with
    # the recompute's band
    step = nominal["reload_fixed_s"] - nominal["reload_latency_s"]
    step_lo, step_hi = (step * x / nominal["recompute_s"] for x in recompute)
    # a one-token forward the model is known to miss (a failing batch-1 decode row) carries it
    step_lo = min([step_lo] + [step * x for x in step_ratios])
    step_hi = max([step_hi] + [step * x for x in step_ratios])
    reload = (reload[0] - (step - step_lo), reload[1] + (step_hi - step))
    # no widening beats physics: the latency, the step at its band's low end and every hop at
    # its spec rate
    reload = (max(reload[0], min(reload_floor(nominal, step_lo), nominal["reload_s"])),
              reload[1])
    # the verdict compares times to first token: each band shifted by what the TTFT adds to
    # its part (the request's costs; the recompute of the new tokens on the cold side)
    cold_add = nominal["ttft_recompute_s"] - nominal["recompute_s"]
    hit_add = nominal["ttft_reload_s"] - nominal["reload_s"]
    ttft_recompute = tuple(x + cold_add for x in recompute)
    # what a layer-by-layer load hides under the step, at each end's own load and step (the
    # nominal's hidden part is in hit_add): min(load, step)(1 - 1/L)
    hidden = nominal["overlap_hidden_s"]
    ends = (hidden, hidden)
    if hops and v["o_lay"]:
        kv, layers = nominal["kv_bytes_per_gpu"], v["L_full"] + v["L_win"]
        ends = tuple(v["o_lay"] * min(kv / b, s) * (1 - 1 / layers)
                     for b, s in ((b_hi, step_lo), (b_lo, step_hi)))
    ttft_reload = tuple(x + hit_add + hidden - h for x, h in zip(reload, ends))
    winners = {nominal["winner"]}
    for rc in ttft_recompute:
        for rl in ttft_reload:
            winners.add("reload" if rl < rc else "recompute")
    return {"nominal": nominal, "recompute_s": recompute, "reload_s": reload,
            "ttft_recompute_s": ttft_recompute, "ttft_reload_s": ttft_reload,
            "reload_bandwidth_Bps": (b_lo, b_hi), "flips": len(winners) > 1,
            "binding_hop": binding_hop(v, hops).link if hops else None,
            "prefill_fit_own": own_fit, "known_limits": [m.id for m, _ in limits]}


def reload_floor(r, step_s):
    """The fastest a compare() result's reload can be with an engine step of step_s, s: the
    path's latency, the step and each hop's bytes at the link's datasheet or spec rate (the
    slowest hop binds)."""
    links = bundled().links
    return r["reload_latency_s"] + step_s + max(
        [h["bytes"] / (links[h["link"]].bandwidth_Bps * h["count"]) for h in r["path"]] + [0.0])


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
    return frozenset(r.gpu for r in table("prefill_fit").values() if r.kind == "assumption")


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


#: the fields of a model row that set its FLOPs and bytes: two models equal in these are one
#: architecture to the arithmetic (a validation-only model, as Llama-3-8B-1M is Llama-3.1-8B's)
SHAPE_FIELDS = ("attention", "layers", "window_layers", "window", "hidden_size",
                "num_attention_heads", "num_key_value_heads", "head_dim", "kv_lora_rank",
                "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
                "intermediate_size", "moe_intermediate_size", "num_experts", "experts_per_token",
                "shared_experts", "dense_layers", "vocab_size", "tie_word_embeddings",
                "weight_dtype", "kv_dtype")


def shape(model):
    """The architecture of a model row, as :data:`SHAPE_FIELDS`."""
    return tuple(getattr(model, f) for f in SHAPE_FIELDS)


@lru_cache(maxsize=None)
def _shape_of(name):
    return shape(model_of(name))


def known_limits(model, gpu_name, r):
    """(row, measured/predicted) of the validation rows outside their tolerance whose model
    architecture (its shapes, whatever its name), GPU, tensor-parallel degree and expert layout
    are those of compare() result r."""
    ep = r["ep"] if r["ep"] > 1 else None
    arch = shape(model)
    return [(m, ratio) for m, ratio in _failing_rows()
            if _shape_of(m.model) == arch and m.gpu == gpu_name and m.tp == r["gpus"]
            and (m.ep if m.ep and m.ep > 1 else None) == ep
            and bool(m.dp_attention) == bool(r["dp_attention"])]


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
        from kvmath.evaluate.values import ScenarioError
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


def calculator_band_data():
    """What the calculator needs to draw :func:`band` (kvmath.present.calculator): the
    measured factors by link, GPU and engine, and the configurations validation rows show the
    model missing, each with the bundled models of its architecture. _ext/kvcalc.js applies
    them as :func:`band` does; tests/test_webcalc.py holds the two equal."""
    cat = bundled()
    by_shape = {}
    for m in cat.models.values():
        by_shape.setdefault(shape(m), []).append(m.name)
    limits = []
    for m, ratio in _failing_rows():
        models = by_shape.get(_shape_of(m.model), [])
        if models:
            limits.append({"id": m.id, "models": sorted(models), "gpu": m.gpu, "gpus": m.tp,
                           "ep": m.ep if m.ep and m.ep > 1 else None,
                           "dp_attention": bool(m.dp_attention), "quantity": m.quantity,
                           "ratio": ratio})
    from kvmath.tables.rows import engines
    return {"bandwidth_range": {name: list(bandwidth_range(name)) for name in cat.links},
            "link_spec_Bps": {name: l.bandwidth_Bps for name, l in cat.links.items()},
            "link_efficiency": {name: l.efficiency for name, l in cat.links.items()},
            "calibrated_error": {g: calibrated_error(g) for g in cat.gpus},
            "borrowed_fit_gpus": sorted(borrowed_fit_gpus()),
            "borrowed_fit_factor": borrowed_fit_factor(),
            "efficiency_low": efficiency_range()[0],
            "engine_cost_factor": {e: engine_cost_factor(e) for e in engines()},
            "known_limits": limits, "binding_rel_tol": BINDING_REL_TOL}
