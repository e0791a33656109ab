"""The reuse condition and the tier plan: closed forms against numerics, limits, properties."""
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath import bundled
from kvmath.derive import reuse as DR
from kvmath.derive import symbols as S
from kvmath.evaluate.reuse import best_ttl, reuse, rfn, ttl_filling, held_caches
from kvmath.node.plan import tier_plan
from kvmath.tables.rows import Pause, nodes, pauses

CAT = bundled()
H100 = CAT.gpus["h100-sxm"]
SRC = dict(kind="assumption", source="test", source_location="test", retrieved="2026-11-30")


def test_lognormal_holding_time_matches_numeric_integral():
    mu, sig, tau = math.log(30), 1.0, 45.0
    t = np.linspace(0, tau, 200001)[1:]
    surv = 1 - rfn("F_logn")(mu=mu, sigma=sig, tau=t)
    numeric = np.trapezoid(surv, t) + (t[0] * 1.0)  # survival is 1 on (0, t[0])
    closed = rfn("hold_return_logn")(mu=mu, sigma=sig, tau=tau)
    assert closed == pytest.approx(numeric, rel=1e-5)


def test_exponential_holding_time():
    assert sp.simplify(DR.hold_return_exp - (1 - sp.exp(-S.lam * S.tau)) / S.lam) == 0


def test_exponential_ttl_is_stationary_point():
    v = dict(p=0.7, h_route=1.0, f_new=1.0, S_gpu=5.0, c_gpu=1e-3, c_cap=1e-15, c_wear=0.0, Q=1e10, **{"lambda": 0.02})
    tau = best_ttl("exp", v)
    assert tau > 0
    assert rfn("dvalue_exp").take({**v, "tau": tau}) == pytest.approx(0, abs=1e-12)
    grid = np.geomspace(1, 1e5, 2000)
    assert rfn("value_exp").take({**v, "tau": tau}) >= rfn("value_exp").take({**v, "tau": grid}).max() - 1e-12


def test_lognormal_ttl_maximises_value():
    v = dict(p=0.7, h_route=1.0, f_new=1.0, S_gpu=5.0, c_gpu=1e-3, c_cap=1e-15, c_wear=0.0, Q=1e10, mu=math.log(30),
             sigma=1.0)
    tau = best_ttl("logn", v)
    assert tau > 0  # an interior optimum: holding is cheap against the saving
    best = rfn("value_logn").take({**v, "tau": tau})
    grid = np.geomspace(1e-1, 1e7, 5000)
    assert best >= rfn("value_logn").take({**v, "tau": grid}).max() - 1e-12


def test_breakeven_probability_zeroes_the_value():
    v = dict(h_route=1.0, f_new=1.0, S_gpu=5.0, c_gpu=1e-3, c_cap=1e-15, c_wear=1e-13, Q=1e10, mu=math.log(30),
             sigma=1.0, tau=300.0)
    p = rfn("p_breakeven_logn").take(v)
    assert 0 < p < 1
    assert rfn("value_logn").take({**v, "p": p}) == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("tier", ["host-dram", "nvme"])
def test_reuse_on_bundled_data(tier):
    r = reuse(CAT.models["llama-3.1-70b"], H100, CAT.tiers[tier], 32768, pauses()["chat-lognormal"])
    assert r["saving_gpu_s"] > 0 and r["ttl_s"] > 0 and 0 < r["p_breakeven"] < 1
    assert r["verdict"] == ("offload" if r["value_usd"] > 0 else "do not offload")


def test_no_offload_when_reload_is_slower():
    r = reuse(CAT.models["llama-2-7b"], H100, CAT.tiers["nvme-1drive"], 4096,
              pauses()["chat-lognormal"], tp=1)
    assert r["saving_gpu_s"] < 0 and r["verdict"].startswith("do not offload")


@given(st.floats(0.1, 100), st.floats(1.01, 10))
@settings(max_examples=40)
def test_more_saving_means_longer_ttl_and_lower_breakeven(saving, k):
    base = dict(p=0.7, h_route=1.0, f_new=1.0, c_gpu=1e-3, c_cap=1e-13, c_wear=1e-13, Q=1e10, mu=math.log(30), sigma=1.0)
    t1 = best_ttl("logn", {**base, "S_gpu": saving})
    t2 = best_ttl("logn", {**base, "S_gpu": saving * k})
    assert t2 >= t1 * (1 - 1e-6)
    p1 = rfn("p_breakeven_logn").take({**base, "S_gpu": saving, "tau": 100.0})
    p2 = rfn("p_breakeven_logn").take({**base, "S_gpu": saving * k, "tau": 100.0})
    assert p2 < p1


def test_littles_law_in_the_limit():
    """Keeping every cache until it returns (p = 1, tau large): held = rate x mean pause."""
    pz = Pause(name="x", distribution="exponential", median_s=30.0, sigma=None, return_probability=1.0, **SRC)
    held = held_caches(pz, 1e9, 2.0)
    assert held == pytest.approx(2.0 * 30.0 / math.log(2), rel=1e-9)


@given(st.floats(0.05, 20))
@settings(max_examples=25, deadline=None)
def test_tier_plan_respects_capacity(rate):
    node = nodes()["dgx-h100"]
    plan = tier_plan(node, CAT.models["llama-3.1-70b"], 32768, rate, pauses()["chat-lognormal"])
    total = 0.0
    for t in plan["tiers"]:
        if math.isfinite(t["ttl_to_s"]):
            held = (held_caches(pauses()["chat-lognormal"], t["ttl_to_s"], rate)
                    - (held_caches(pauses()["chat-lognormal"], t["ttl_from_s"], rate)
                       if t["ttl_from_s"] else 0.0)) * plan["kv_bytes"]
            assert held <= t["capacity_bytes"] * (1 + 1e-6)
        total += t["resume_fraction"]
    assert total + plan["recomputed_fraction"] == pytest.approx(1.0)


def test_higher_rate_shortens_ttls():
    node = nodes()["dgx-h100"]
    lo = tier_plan(node, CAT.models["llama-3.1-70b"], 32768, 0.5, pauses()["chat-lognormal"])
    hi = tier_plan(node, CAT.models["llama-3.1-70b"], 32768, 5.0, pauses()["chat-lognormal"])
    assert hi["tiers"][1]["ttl_to_s"] < lo["tiers"][1]["ttl_to_s"]


def test_no_ttl_when_holding_costs_more_than_saving():
    v = dict(p=0.7, h_route=1.0, f_new=1.0, S_gpu=5.0, c_gpu=1e-3, c_cap=1e-13, c_wear=0.0, Q=1e10, mu=math.log(30),
             sigma=1.0)
    assert best_ttl("logn", v) == 0.0


def test_ttl_filling_zero_capacity():
    assert ttl_filling(pauses()["chat-lognormal"], 1.0, 1e10, 0.0) == 0.0


def test_tier_served_capped_by_bandwidth():
    """A tier with half the bandwidth its traffic needs serves half its hits."""
    at = dict(r=1.0, p=1.0, h_route=1.0, f_new=1.0, Q=1e9, Q_r=1e9, F_lo=0.0, F_hi=0.5)
    need = rfn("tier_reads").take(at) + rfn("tier_writes").take(at)
    half = {**at, "B_tier": need / 2, "B_write": need / 2}
    assert rfn("tier_served").take(half) == pytest.approx(0.25)
    assert rfn("tier_served").take({**at, "B_tier": need * 10, "B_write": need * 10}) == \
        pytest.approx(0.5)


def test_nvme_value_grows_then_is_capped():
    from kvmath.node.plan import nvme_value
    node = nodes()["dgx-h100"]
    vals = [nvme_value(node, CAT.models["llama-3.1-70b"], 32768, r, pauses()["chat-lognormal"])[0]
            for r in (0.2, 4.0)]
    assert vals[0] < 0 < vals[1]  # idle drives cost money; busy ones pay


@pytest.mark.parametrize("pause", ["conversation-fitted", "chat-exponential"])
@pytest.mark.parametrize("tier", ["host-dram", "nvme", "rdma"])
def test_breakeven_is_the_least_p_that_any_ttl_pays(pause, tier):
    """The value is linear in p: below the break-even no TTL pays, above it the best TTL does.
    (Taking p* at the TTL chosen for the scenario's own p overstated it; hand-checked 0.0243
    for llama-3.1-8b in host DRAM at 8,192 tokens against 0.0549 before.)"""
    pz = pauses()[pause]
    r = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers[tier], 8192, pz)
    p = r["p_breakeven"]
    if p is None:  # no p pays: not even certainty
        assert r["ttl_s"] == 0 and r["value_usd"] == 0 and "every conversation returns" in r["verdict"]
        p_one = Pause(**{**pz.__dict__, "return_probability": 1.0})
        assert reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers[tier], 8192, p_one)["value_usd"] == 0
        return
    for factor, pays in ((0.99, False), (1.01, True)):
        q = Pause(**{**pz.__dict__, "return_probability": p * factor})
        got = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers[tier], 8192, q)
        assert (got["value_usd"] > 0) == pays and (got["verdict"] == "offload") == pays


def test_breakeven_hand_checked_value():
    """llama-3.1-8b, H100, host DRAM, 8,192 tokens, the fitted pause: p* = 0.0227 by an
    independent bisection on max over TTL of the value (scipy's lognormal, its partial
    expectation by quadrature, 400 TTLs; tolerance: its three figures). DRAM priced per 1e9 B
    (a 32 GB DIMM holds 32 GiB); at the old per-GiB price it was 0.0243, and 0.0226 while the
    reload's engine step was a bare weight read rather than the calibrated one-token prefill.
    Since the saving is the difference of times to first token (the connector's 0.3 us per loaded
    token and the step's read of the prefix's KV charged to the reload), the same bisection's
    inputs give 0.0231. With the prices of release 0.3.0 (DDR5 at 13.1 USD per 1e9 B, a Q1 2026
    contract price, was 2.474; the H100 at its own 3.99 USD per GPU-hour, was 4.916) holding a
    byte costs 5.3 times as much and a GPU-second 0.81 times: 0.147, a regression value, the
    bisection not rerun. PCIe Gen5's duplex share measured (0.834 of a direction left while
    offload writes run, vLLM's blog; was assumed 1.0) slows the reload on a serving node: 0.1506,
    a regression value, with vLLM's cross-layer blocks (its default through v0.28.0). vLLM
    v0.29.0 and later copy one 64 KiB page per layer per 16-token block (vllm-lbhnc, now the
    default), each at the per-copy curve's fixed cost: the reload is slower and p* 0.2131, a
    regression value. Issue 34: those pages go to the driver in one batched call (0.14 us a
    copy, fitted on vLLM PR 42212's batch rates), and the prefill and request costs are each
    GPU's own operator fit and the measured tokeniser: 0.1546 (cross-layer) and 0.1570 (the
    default), regression values."""
    from kvmath.tables.rows import engines
    args = (CAT.models["llama-3.1-8b"], H100, CAT.tiers["host-dram"], 8192,
            pauses()["conversation-fitted"])
    r = reuse(*args, engine=engines()["vllm-cross-layer"])
    assert r["p_breakeven"] == pytest.approx(0.1546, abs=5e-4)
    assert reuse(*args)["p_breakeven"] == pytest.approx(0.1570, abs=5e-4)


def test_never_paying_offload_reports_no_ttl_and_no_probability():
    """NVMe wear alone exceeds the saving of a short 8B prompt: no TTL, no p <= 1 pays."""
    r = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers["nvme"], 8192, pauses()["conversation-fitted"])
    assert r["saving_gpu_s"] > 0
    assert r["p_breakeven"] is None and r["ttl_s"] == 0 and r["value_usd"] == 0
    assert r["hit_probability"] == 0 and r["verdict"].startswith("do not offload")


def test_exponential_pause_sure_to_return_keeps_the_cache():
    """p = 1 with an exponential pause: the value rises with the TTL to its limit, so keep until
    return (an infinite TTL, evaluated at the horizon, not as 0 x inf)."""
    pz = Pause(**{**pauses()["chat-exponential"].__dict__, "return_probability": 1.0})
    r = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers["host-dram"], 8192, pz)
    assert r["verdict"] == "offload" and math.isinf(r["ttl_s"])
    assert r["value_usd"] > 0 and r["hit_probability"] == pytest.approx(1.0)
    almost = Pause(**{**pz.__dict__, "return_probability": 0.9999999})
    near = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers["host-dram"], 8192, almost)
    assert near["value_usd"] == pytest.approx(r["value_usd"], rel=1e-3)


@pytest.mark.parametrize("kind", ["chat-exponential", "conversation-fitted"])
def test_free_holding_breaks_even_at_zero(kind):
    """Holding priced at nothing and DRAM writes free: any return probability pays."""
    r = reuse(CAT.models["llama-3.1-8b"], H100, CAT.tiers["host-dram"], 8192, pauses()[kind], c_cap=0.0)
    assert r["p_breakeven"] == 0 and r["offload_can_pay"] and r["verdict"] == "offload"
    assert math.isinf(r["ttl_s"]) or r["ttl_s"] > 0


@pytest.mark.parametrize("rate", ["0.1", "0.01", "0.001"])
def test_reuse_on_a_fixed_node_with_an_exponential_pause_answers(rate, capsys):
    """The opportunity price of holding underflows to 0 at low resume rates: still an answer."""
    from kvmath.cli.main import main
    code = main(["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
                 "--tokens", "8192", "--pause", "chat-exponential", "--resume-rate", rate, "--json"])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err
    assert "NaN" not in out.out and "Infinity" not in out.out


def test_every_price_is_dated_and_its_age_is_flagged():
    """Each GPU-hour, DRAM and NVMe price names the day it was observed; a price older than
    price_stale_after_days on the day a command runs is named in its output, a fresh one is not."""
    import datetime
    from kvmath.evaluate.reuse import price_warnings, prices_used
    from kvmath.tables.rows import gpu_prices, prices
    assert all(p.observed for p in gpu_prices().values())
    assert all(prices()[k].observed for k in ("ddr5_usd_per_GB", "nvme_usd_per_GB"))
    from kvmath.tiers.build import HBM_TIER
    used = prices_used(H100, [bundled().tiers["host-dram"], bundled().tiers["nvme"], HBM_TIER])
    assert set(used) == {"h100-sxm GPU-hour", "ddr5_usd_per_GB", "nvme_usd_per_GB"}
    day = datetime.date.fromisoformat(str(used["h100-sxm GPU-hour"]))
    assert price_warnings(used, day) == []
    late = price_warnings(used, day + datetime.timedelta(days=800))
    assert len(late) == 3 and all("days ago" in w for w in late)
    assert "h100-sxm GPU-hour" not in prices_used(H100, [], usd_per_gpu_hour=2.0)


def test_a_gpu_without_a_price_asks_for_one():
    from kvmath.evaluate.api import ScenarioError
    from kvmath.evaluate.reuse import gpu_second_price
    with pytest.raises(ScenarioError, match="--gpu-price"):
        gpu_second_price("h20")
    assert gpu_second_price("h20", 3.6) == pytest.approx(1e-3)
