"""Overlap (CachedAttention), split (Cake) and the busy server: identities, limits, properties."""

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath import bundled, compare
from kvmath.derive import serving as DS
from kvmath.derive import symbols as S
from kvmath.evaluate.api import scenario_values
from kvmath.logic.path import tier_exists_on
from kvmath.evaluate.serving import busy, overlap, sfn, split

CAT = bundled()
FULL = sorted(n for n, m in CAT.models.items() if m.window_layers == 0 and m.chunk_layers == 0)
H100 = CAT.gpus["h100-sxm"]
#: the tiers an H100 has (not a Grace tray's, not another family's peer link)
H100_TIERS = sorted(n for n, t in CAT.tiers.items() if tier_exists_on(t, "h100-sxm"))


def test_extend_flops_is_difference_of_prefills():
    """F(T + n) - F(T) for n = 1 on a 1-layer, 1-head toy: the new query sees T + 1 keys."""
    toy = {S.N_lin: 0, S.n_q: 1, S.d_qk: 1, S.d_v: 1, S.L_full: 1, S.L_win: 0, S.L_rec: 0,
           S.L_chunk: 0, S.H_I: 0, S.k_sel: sp.oo}  # dense: every key of every query
    assert sp.simplify(DS.flops_extend.subs(toy).subs(S.n_new, 1) - 4 * (S.T + 1)) == 0


@given(st.floats(1e-6, 10), st.floats(1e-6, 10))
def test_pipeline_formula_limits(load, new):
    """One layer: no overlap (serial). Many layers: the slower stage alone."""
    a, b = sp.symbols("a b", positive=True)
    expr = DS.ttft_pipeline.subs({DS.load_time: a, DS.forward_time: b}).subs({S.L_win: 0,
                                                                              S.L_chunk: 0})
    assert expr.free_symbols == {S.t_lat, S.c_hit, S.T, a, b, S.L_full}
    f = sp.lambdify([S.t_lat, S.c_hit, a, b, S.L_full], expr.subs(S.T, 1000))
    assert f(0.0, 0.0, load, new, 1) == pytest.approx(load + new, rel=1e-12)
    assert f(0.0, 0.0, load, new, 10**9) == pytest.approx(max(load, new), rel=1e-6)


def test_a_reload_in_serving_pays_the_new_turns_forward_once():
    """The engine step is the new turn's own forward pass: serial TTFT is latency, the connector's
    cost per loaded token, load and that forward (compare's reload step for the same turn), with
    no second step; the request's own costs are paid either way and left out of both sides."""
    m = CAT.models["llama-3.1-8b"]
    r = overlap(m, H100, CAT.tiers["host-dram"], 32768, 16, tp=1)
    v, _ = scenario_values(m, H100, CAT.tiers["host-dram"], tp=1)
    c = compare(m, H100, CAT.tiers["host-dram"], 32768, tp=1, new_tokens=16)
    assert r["t_forward_new"] == pytest.approx(c["reload_step_s"], rel=1e-9)
    assert r["t_forward_new"] >= r["t_new"]
    assert r["ttft_serial"] == pytest.approx(v["t_lat"] + v["c_hit"] * 32768 + r["t_load"]
                                             + r["t_forward_new"], rel=1e-12)


@pytest.mark.parametrize("prefill", ["calibrated", "ideal"])
def test_overlap_and_split_time_compute_as_compare_does(prefill):
    """The serving what-ifs use compare's prefill model (issue 18: the overlap had used the flat
    roofline while compare printed the calibrated recompute): recomputing history and new tokens
    costs what compare says T + n tokens cost, and the split's pure recompute what T cost."""
    m = CAT.models["llama-3.1-70b"]
    tier = CAT.tiers["host-dram"]
    r = overlap(m, H100, tier, 32768, 512, tp=8, prefill=prefill)
    c = compare(m, H100, tier, 32768 + 512, tp=8, prefill=prefill)
    assert r["ttft_recompute"] == pytest.approx(c["recompute_s"], rel=1e-9)
    s = split(m, H100, tier, 32768, tp=8, prefill=prefill)
    c = compare(m, H100, tier, 32768, tp=8, prefill=prefill)
    assert s["t_recompute_s"] == pytest.approx(c["recompute_s"], rel=1e-9)
    assert r["prefill_model"] == s["prefill_model"] == prefill


@given(st.sampled_from(FULL), st.sampled_from(H100_TIERS), st.floats(100, 1e5),
       st.floats(1, 1e4))
@settings(max_examples=60)
def test_overlap_never_slower_than_serial(model, tier, t, n):
    r = overlap(CAT.models[model], H100, CAT.tiers[tier], t, n, tp=1)
    assert r["ttft_overlap"] <= r["ttft_serial"] * (1 + 1e-12)
    assert r["ttft_overlap"] >= max(r["t_load"], r["t_new"])
    assert r["hides"] == (r["t_load"] <= r["t_forward_new"])


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3"])
def test_hiding_threshold_equalises_load_and_compute(model):
    m = CAT.models[model]
    r = overlap(m, H100, CAT.tiers["nvme"], 32768, 1, tp=1)
    n = r["n_hide_tokens"]
    assert n == int(n)  # whole tokens: the fewest that hide the load
    assert overlap(m, H100, CAT.tiers["nvme"], 32768, n, tp=1)["hides"]
    assert not overlap(m, H100, CAT.tiers["nvme"], 32768, n - 1, tp=1)["hides"]


@given(st.sampled_from(FULL), st.sampled_from(H100_TIERS), st.floats(10, 2e5))
@settings(max_examples=60)
def test_split_beats_both_pure_strategies(model, tier, t):
    r = split(CAT.models[model], H100, CAT.tiers[tier], t, tp=1)
    assert 0 <= r["x_tokens"] <= t
    assert r["t_split_s"] <= min(r["t_reload_s"], r["t_recompute_s"]) * (1 + 1e-9)


def test_split_parts_balance():
    m = CAT.models["llama-3.1-70b"]
    v, _ = scenario_values(m, H100, CAT.tiers["nvme-1drive"], tp=8)
    r = split(m, H100, CAT.tiers["nvme-1drive"], 32768, tp=8)
    at = {**v, "T": 32768.0, "x": r["x_tokens"]}
    part = compare(m, H100, CAT.tiers["nvme-1drive"], r["x_tokens"], tp=8)["recompute_s"]
    assert part == pytest.approx(sfn("t_split_load").take(at), rel=1e-9)


def test_free_tokens_are_the_ridge_point_for_dense_models():
    """With N_tot = N_lin, p_free = eta P b_w / (2 B_hbm) - b_dec: the roofline ridge in tokens."""
    expr = DS.p_free.subs(S.N_tot, S.N_lin)
    assert sp.simplify(expr - (S.eta * S.P * S.b_w / (2 * S.B_hbm) - S.b_dec)) == 0


def test_busy_server_marginal_cost_zero_below_free_tokens():
    m = CAT.models["llama-3.1-8b"]
    r = busy(m, H100, CAT.tiers["host-dram"], 100, decode_batch=16)
    assert r["free_tokens"] > 100 and r["recompute_marginal_s"] == 0
    assert r["winner"] == "recompute"


@given(st.floats(0, 1e-2), st.floats(0, 1e-2))
@settings(max_examples=40)
def test_short_crossing_grows_with_request_overhead(a, b):
    lo, hi = sorted((a, b))
    m = CAT.models["llama-3.1-8b"]
    c_lo = busy(m, H100, CAT.tiers["host-dram"], 1000, decode_batch=32, request_overhead_s=lo)
    c_hi = busy(m, H100, CAT.tiers["host-dram"], 1000, decode_batch=32, request_overhead_s=hi)
    assert c_hi["short_prompt_crossing_tokens"] >= c_lo["short_prompt_crossing_tokens"] * (1 - 1e-12)


def test_short_crossing_equalises_costs():
    m = CAT.models["llama-3.1-8b"]
    r = busy(m, H100, CAT.tiers["host-dram"], 1000, decode_batch=32, request_overhead_s=1e-3)
    t = r["short_prompt_crossing_tokens"]
    at = busy(m, H100, CAT.tiers["host-dram"], t, decode_batch=32, request_overhead_s=1e-3)
    assert at["reload_s"] == pytest.approx(at["recompute_marginal_s"], rel=1e-9)


@given(st.sampled_from(FULL), st.sampled_from(H100_TIERS), st.floats(2, 2e5))
@settings(max_examples=40)
def test_a_split_that_recomputes_pays_a_weight_read(model, tier, t):
    """A split's recompute part is a pass of its own: never faster than one read of the weights."""
    m = CAT.models[model]
    r = split(m, H100, CAT.tiers[tier], t, tp=1)
    if 0 < r["x_tokens"] < t:
        v, _ = scenario_values(m, H100, CAT.tiers[tier], tp=1)
        from kvmath.evaluate.api import fn
        assert r["t_split_s"] >= float(fn("t_weights").take({**v, "T": t})) * (1 - 1e-12)
