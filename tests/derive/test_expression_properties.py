"""Property tests (hypothesis): monotonicity and limits of the lambdified expressions."""
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvmath import bundled
from kvmath.evaluate.api import crossings, fn, heads_fit, scenario_values
from kvmath.logic.path import tier_exists_on

CAT = bundled()
models = st.sampled_from(sorted(CAT.models))
gpus = st.sampled_from(sorted(CAT.gpus))
tiers = st.sampled_from(sorted(CAT.tiers))
tokens = st.floats(1, 1e6)
bandwidth = st.floats(1e8, 1e12)


def values(model, gpu, tier, tp=1, bw=None):
    m = CAT.models[model]
    if not heads_fit(m, tp):  # a TP that does not split the heads: TP 1
        tp = 1
    if not tier_exists_on(CAT.tiers[tier], gpu):  # a tier of another GPU family: host memory
        tier = "host-dram"
    return scenario_values(m, CAT.gpus[gpu], CAT.tiers[tier], tp=tp, bandwidth_Bps=bw)[0]


@given(models, gpus, tiers, tokens, bandwidth, st.floats(1.001, 100))
def test_more_bandwidth_never_slows_reload(model, gpu, tier, t, bw, factor):
    v = values(model, gpu, tier, bw=bw)
    slow = fn("t_reload").take({**v, "T": t})
    fast = fn("t_reload").take({**v, "T": t, "B": bw * factor})
    assert fast < slow


@given(models, gpus, tiers, tokens, st.floats(1.01, 10))
def test_recompute_grows_faster_than_reload(model, gpu, tier, t, k):
    """Scaling the prefix by k scales compute by at least k and reload by at most k."""
    v = values(model, gpu, tier)
    c1, c2 = (fn("t_compute").take({**v, "T": x}) for x in (t, k * t))
    r1, r2 = (fn("t_reload").take({**v, "T": x}) for x in (t, k * t))
    assert c2 / c1 >= k * (1 - 1e-12)
    assert r2 / r1 <= k * (1 + 1e-12)
    assert c2 / c1 >= r2 / r1 * (1 - 1e-12)


@given(models, st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_tp_changes_ratio_only_through_replication(model, tp):
    v1 = values(model, "h100-sxm", "host-dram")
    vk = values(model, "h100-sxm", "host-dram", tp=tp)
    r1 = fn("model_flops_per_kv_byte").take(v1)
    rk = fn("model_flops_per_kv_byte").take(vk)
    assert math.isclose(rk * vk["rho"], r1, rel_tol=1e-12)
    if vk["rho"] == 1:
        assert math.isclose(rk, r1, rel_tol=1e-12)
    else:
        assert rk < r1


@given(models, gpus, tiers, tokens)
def test_latency_only_slows_reload(model, gpu, tier, t):
    v = values(model, gpu, tier)
    base = fn("t_reload").take({**v, "T": t, "t_0": 0.0})
    assert fn("t_reload").take({**v, "T": t}) >= base
    assert math.isclose(fn("t_reload").take({**v, "T": t, "t_0": 1.0}), base + 1.0)


@given(models, gpus, tiers, bandwidth)
@settings(max_examples=50)
def test_infinite_bandwidth_limit(model, gpu, tier, bw):
    """As B grows (and a hybrid model's state rate with it), reload tends to its fixed cost and
    the connector's per-token cost."""
    v = values(model, gpu, tier, bw=bw)
    t = fn("t_reload").take({**v, "T": 1000.0, "B": 1e30, "B_state": 1e30})
    assert math.isclose(t, v["t_0"] + 1000.0 * v["c_hit"], rel_tol=1e-9, abs_tol=1e-15)


@given(models, gpus, tiers, bandwidth)
@example(model="deepseek-v3.2", gpu="rubin", tier="cxl", bw=1e8)  # found by a CI run
@example(model="llama-4-scout", gpu="rubin", tier="cxl", bw=1e8)  # and by another
@settings(max_examples=50)
def test_at_most_three_crossings_and_long_prompts_favour_reload(model, gpu, tier, bw):
    """Where some layer attends (or, under DSA, indexes) the whole prefix, the recompute's
    quadratic term wins in the end: reload wins at long enough prompts. How long depends on how
    small that term is against the linear ones: a few full layers beside chunked or recurrent
    ones (Llama 4 Scout's 12 of 48), or DSA's indexer (about a thousandth of full attention's
    cost a token pair), on a slow path cross far beyond any served context (DeepSeek-V3.2 on a
    0.1 GB/s path near 2e7 tokens, Scout on Rubin over it near 1e8), so the prompt taken as long
    grows tenfold until reload wins, up to 1e14 tokens."""
    v = values(model, gpu, tier, bw=bw)
    cs = crossings(v)
    assert len(cs) <= 3
    m = CAT.models[model]
    if m.window_layers + m.chunk_layers + m.recurrent_layers < m.layers:
        t_long = max(cs + [1.0]) * 10 + 1e7
        while fn("t_advantage").take({**v, "T": t_long}) >= 0 and t_long < 1e14:
            t_long *= 10
        assert fn("t_advantage").take({**v, "T": t_long}) < 0, t_long
