"""Symbolic identities: the closed forms agree with the expressions they came from."""
import random

import numpy as np
import pytest
import sympy as sp

from kvmath.derive import kv as D
from kvmath.derive import symbols as S
from kvmath import bundled, compare
from kvmath.logic.path import tier_exists_on
from kvmath.evaluate.api import Numeric, ScenarioError, crossings, fn, heads_fit, scenario_values, sweep


def exact_subs(expr, values):
    """expr with every free symbol replaced by an exact rational of its value."""
    return expr.subs({s: sp.nsimplify(values[s.name], rational=True) for s in expr.free_symbols})


def random_scenarios(n, seed=0):
    """Scenario values from the bundled tables with random length, bandwidth, latency and TP."""
    rng = random.Random(seed)
    cat = bundled()
    out = []
    while len(out) < n:
        model = rng.choice(list(cat.models.values()))
        gpu = rng.choice(list(cat.gpus.values()))
        tier = rng.choice([t for t in cat.tiers.values() if tier_exists_on(t, gpu.name)])
        tp = rng.choice([k for k in (1, 2, 4, 8) if heads_fit(model, k)])
        v, _ = scenario_values(model, gpu, tier, tp=tp,
                               bandwidth_Bps=10 ** rng.uniform(8.5, 11.5))
        v["t_0"] = 10 ** rng.uniform(-7, -2)
        out.append(v)
    return out


def test_core_crossing_is_a_root():
    """Each closed-form root of the core regime makes reload equal compute time."""
    for root in D.core_crossings:
        assert sp.simplify(D.core_advantage.subs(S.T, root)) == 0


def test_one_positive_core_crossing_when_latency_positive():
    """Product of the core quadratic's roots is -a0/alpha < 0: exactly one positive root. a0 is
    the fixed latency and, for a hybrid model, moving its recurrent state (the same at any
    prompt length), both positive."""
    a2, a1, a0 = D.quadratic_coefficients(D.core_advantage)
    assert sp.simplify(a0 - S.t_0 - D.state_bytes / (S.K * S.B_state)) == 0
    assert sp.simplify(a0.subs(S.L_rec, 0) - S.t_0) == 0
    assert sp.simplify(a2 + S.n_q * (S.d_qk + S.d_v) * S.L_full / (S.K * S.eta * S.P)) == 0


@pytest.mark.parametrize("v", random_scenarios(40, seed=1))
def test_reported_crossings_equalise_times(v):
    reload, recompute = fn("t_reload"), fn("t_recompute")
    for t in crossings(v):
        at = {**v, "T": t}
        a, b = reload.take(at), recompute.take(at)
        assert a == pytest.approx(b, rel=1e-6)


@pytest.mark.parametrize("v", random_scenarios(40, seed=2))
def test_winner_changes_exactly_at_crossings(v):
    """Between consecutive crossings (and beyond them) the sign of the advantage is constant
    and flips across each crossing: the crossing list misses none."""
    adv = fn("t_advantage")
    grid = np.geomspace(1, 2e6, 20000)
    signs = np.sign(adv.take({**v, "T": grid}))
    flips = grid[1:][signs[1:] * signs[:-1] < 0]
    cs = [c for c in crossings(v) if 1 <= c <= 2e6]
    assert len(flips) == len(cs)
    for f, c in zip(flips, cs):  # each flip lies within one grid step after its crossing
        assert c <= f <= c * 1.001


NAMES = ["kv_bytes_total", "flops_prefill", "t_compute", "t_weights", "t_recompute",
         "t_reload", "t_advantage", "breakeven_bandwidth", "model_flops_per_kv_byte_at_T"]


@pytest.mark.parametrize("v", random_scenarios(12, seed=3))
def test_lambdified_equals_subs_evalf(v):
    at = {**v, "T": random.Random(str(v)).uniform(1, 2e5)}
    for name in NAMES:
        expr = getattr(D, name)
        expected = float(exact_subs(expr, at).evalf(30))
        assert float(fn(name).take(at)) == pytest.approx(expected, rel=1e-12), name


def test_numeric_is_vectorised_and_keyword_checked():
    f = Numeric(D.t_reload)
    out = f(t_0=1e-6, B=1e9, K=1, e_kv=2048, b_kv=2, rho=1, L_full=32, L_win=0, W=1, c_hit=0.0,
            L_rec=0, b_st=2, n_rk=0, n_rv=0, d_rk=0, d_rv=0, k_conv=0, B_state=1e9,
            L_chunk=0, C_ch=1, e_aux=0, b_aux=1, T=np.array([1.0, 10.0]))
    assert out.shape == (2,) and out[1] > out[0]
    with pytest.raises(TypeError, match="missing values"):
        f(B=1e9)


def test_one_division_is_the_linear_ratio():
    """model_flops_per_kv_byte = 2 N_lin / (KV bytes per token x copies)."""
    assert sp.simplify(D.model_flops_per_kv_byte
                       - 2 * S.N_lin / ((S.L_full + S.L_win + S.L_chunk)
                                        * (S.e_kv * S.b_kv + S.e_aux * S.b_aux) * S.rho)) == 0


def test_attention_convention_two_flops_per_mac_causal():
    """A 1-layer, 1-head model with d_qk = d_v = 1 at T = 3: 6 causal pairs x 4 FLOP."""
    expr = D.dense(D.flops_attention).subs({S.n_q: 1, S.d_qk: 1, S.d_v: 1, S.L_full: 1,
                                            S.L_win: 0})
    assert expr.subs(S.T, 3) == 24


def test_window_pairs_piecewise():
    """Query i sees min(i, W) keys: W = 2, T = 4 gives 1 + 2 + 2 + 2 = 7 pairs."""
    assert D.pairs_window.subs({S.T: 4, S.W: 2}) == 7
    assert D.pairs_window.subs({S.T: 2, S.W: 4}) == 3


def test_recompute_never_beats_weight_read():
    cat = bundled()
    r = compare(cat.models["llama-3.1-70b"], cat.gpus["h100-sxm"], cat.tiers["host-dram"], 2,
                prefill="ideal")
    assert r["recompute_s"] == r["weights_read_s"] > r["compute_s"]
    calibrated = compare(cat.models["llama-3.1-70b"], cat.gpus["h100-sxm"],
                         cat.tiers["host-dram"], 2)
    assert calibrated["prefill_model"] == "calibrated"
    assert calibrated["recompute_s"] > r["recompute_s"]  # the ideal is an upper bound on speed


def test_batch_recompute_reduces_to_single_prompt():
    assert D.t_recompute_batch.subs(S.n_seq, 1) == D.t_recompute


def test_implied_efficiency_inverts_compute_time():
    assert sp.simplify(D.t_compute.subs(S.eta, D.eta_implied) - S.t_meas) == 0


def test_a_one_token_reload_is_the_prefill_plus_its_load():
    """The reloading request's own engine step is the prefill model's one-token forward pass
    and a read of the loaded KV (t_suffix at a short prefix),
    under either prefill model and every engine that charges a step (the ideal profile charges
    none); crossings start at two tokens, and a one-token prefix is refused."""
    cat = bundled()
    m, g, t = cat.models["llama-3.1-8b"], cat.gpus["h100-sxm"], cat.tiers["host-dram"]
    for prefill in ("calibrated", "ideal"):
        for engine in ("vllm-cross-layer", "lmcache", "sglang-hicache"):
            r = compare(m, g, t, 2, prefill=prefill, engine=engine)
            one = compare(m, g, t, 2, prefill=prefill, engine="ideal")
            # the new token's forward pass alone, plus one read of the prefix's KV from HBM
            one_token = float(sweep(m, g, t, [1.0], prefill=prefill, engine=engine)[1][0])
            kv_read = r["kv_bytes_per_gpu"] / (g.hbm_bandwidth_Bps * g.hbm_efficiency)
            assert r["reload_step_s"] == pytest.approx(one_token + kv_read, rel=1e-12)
            assert r["reload_fixed_s"] >= r["reload_step_s"] and one["reload_fixed_s"] < r["reload_step_s"]
            assert all(x >= 2 for x in r["breakeven_tokens"])
    with pytest.raises(ScenarioError, match="at least 2"):
        compare(m, g, t, 1)
