"""The engines' request costs: the committed values are the fit's, the fit saw only its named
rows, and a time to first token is what the engine charges plus what the physics costs."""
from dataclasses import replace

import pytest

from kvmath import bundled, compare
from kvmath.evaluate.engine_fit import FITTED, committed, fit
from kvmath.evaluate.api import HBM_TIER, ScenarioError
from kvmath.tables.rows import engine_costs, engines
from kvmath.evaluate.validation import table

CAT = bundled()
CAT_ENGINES = engines()


def test_committed_costs_are_the_fit():
    """engine_costs.csv holds what scripts/fit_engine_costs.py computes (6 significant figures)."""
    f = fit()
    for p in FITTED:
        assert committed()[p] == pytest.approx(f["values"][p], rel=1e-5)
    rows = {r.parameter: r for r in engine_costs("vllm-lbhnc").values()}
    assert rows["hit_token_s"].calibration_rows.split("; ") == list(f["calibration_rows"])
    assert tuple(FITTED) == ("request_fixed_s", "hit_token_s")  # two free parameters
    # tokenising is a direct measurement of a tokeniser, not a fit (issue 34 item 5)
    assert rows["tokenize_token_s"].kind == "measurement"
    assert 1.7e-6 < rows["tokenize_token_s"].value < 2.2e-6


def test_held_out_rows_are_other_sources():
    """The fit saw one source's rows; every row it holds apart is another source's (a second
    point of a fitted figure is not held apart)."""
    f = fit()
    assert set(f["calibration_rows"]).isdisjoint(f["held_out"])
    by_id = {r["measurement"].id: r["measurement"] for r in table()}
    fitted = {by_id[i].source_key for i in f["calibration_rows"]}
    held = {by_id[i].source_key for i in f["held_out"]}
    assert fitted and held and fitted.isdisjoint(held)
    assert len(f["calibration_rows"]) > len(FITTED)  # spare degrees of freedom


def test_an_engine_on_fewer_than_three_sources_says_so():
    """compare's JSON and output name what the request costs rest on (replacing the bare
    engine_costs_calibrated): vLLM's two TTFT sources, fewer than three; SGLang's and LMCache's
    are vLLM's, an assumption, with a band twice them; the ideal engine charges none."""
    m, g, t = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"]
    r = compare(m, g, t, 8192)
    assert "engine_costs_calibrated" not in r
    assert "fewer than 3" in r["engine_costs_caveat"] and "blog.vllm.ai" in r["engine_costs_caveat"]
    for eng in ("sglang-hicache", "lmcache"):
        c = compare(m, g, t, 8192, engine=eng)
        assert "an assumption" in c["engine_costs_caveat"] and c["request_fixed_s"] > 0
    assert compare(m, g, t, 8192, engine="ideal")["engine_costs_caveat"] == ""
    from kvmath.evaluate.bands import engine_cost_factor
    assert engine_cost_factor("sglang-hicache") == 2.0 > engine_cost_factor("vllm-lbhnc") > 1


def test_ttft_is_physics_plus_request_costs():
    """Both TTFTs exceed their physics by exactly the request's costs; an HBM hit moves nothing
    and beats a host-DRAM hit; the new tokens cost something on both sides."""
    m, g = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"]
    dram = compare(m, g, CAT.tiers["host-dram"], 32768)
    hbm = compare(m, g, HBM_TIER, 32768)
    assert dram["ttft_reload_s"] == pytest.approx(dram["request_s"] + dram["reload_s"], rel=1e-12)
    assert hbm["hit_cost_s"] == 0 and hbm["ttft_reload_s"] < dram["ttft_reload_s"]
    assert hbm["reload_s"] == pytest.approx(hbm["reload_step_s"], rel=1e-12)
    more = compare(m, g, CAT.tiers["host-dram"], 32768, new_tokens=2048)
    assert more["ttft_recompute_s"] > dram["ttft_recompute_s"]
    assert more["ttft_reload_s"] > dram["ttft_reload_s"]
    ids = compare(m, g, CAT.tiers["host-dram"], 32768, token_ids=True)
    assert ids["tokenize_token_s"] == 0 and ids["ttft_reload_s"] < dram["ttft_reload_s"]
    ideal = compare(m, g, CAT.tiers["host-dram"], 32768, engine="ideal")
    assert ideal["request_s"] == 0 and ideal["engine_costs_caveat"] == ""


def test_new_tokens_must_fit_the_window():
    m, g = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"]
    with pytest.raises(ScenarioError, match="context window"):
        compare(m, g, CAT.tiers["host-dram"], m.max_context_tokens, new_tokens=100)
    with pytest.raises(ScenarioError, match="--new-tokens"):
        compare(m, g, CAT.tiers["host-dram"], 1000, new_tokens=0)


def test_resume_rate_sets_the_reloads_in_flight():
    """Processor sharing on the node's drive: a reload arriving at utilisation u shares it with
    1/(1-u) reloads on average, u = rate x one reload's time on the drive alone; the added
    time grows with the rate, vanishes at no load and the hop saturates at u = 1."""
    m, g, t = CAT.models["deepseek-v3"], CAT.gpus["h200"], CAT.tiers["nvme-1drive"]
    alone = compare(m, g, t, 32768, concurrent_reloads=1)
    drive = next(h for h in alone["path"] if h["scope"] == "per-node")
    prev = 0.0
    for rate in (1e-6, 0.5, 1.0, 2.0):
        r = compare(m, g, t, 32768, resume_rate=rate)
        u = rate * drive["time_s"]
        assert r["concurrent_reloads"] == pytest.approx(1 / (1 - u), rel=1e-9)
        assert r["reload_queue_s"] == pytest.approx(r["reload_s"] - alone["reload_s"], rel=1e-9)
        assert r["reload_queue_s"] >= prev and r["load_from"] == "resume rate"
        prev = r["reload_queue_s"]
    assert compare(m, g, t, 32768, resume_rate=1e-6)["reload_queue_s"] < 1e-6
    with pytest.raises(ScenarioError, match="saturates"):
        compare(m, g, t, 32768, resume_rate=1.01 / drive["time_s"])
    with pytest.raises(ScenarioError, match="not both"):
        compare(m, g, t, 32768, resume_rate=1.0, concurrent_reloads=2)
    worst = compare(m, g, t, 32768)
    assert worst["load_from"] == "every replica at once" and worst["reload_queue_s"] == 0


def test_every_ttft_row_lies_in_the_band_printed_for_it_or_is_a_known_limit():
    """The band compare prints for a validation row's configuration holds its measurement,
    unless the row is a documented limit (expect = fail)."""
    from kvmath.evaluate.bands import band
    from kvmath.evaluate.validation import measurements, model_of
    checked = 0
    for m in measurements():
        if m.quantity not in ("ttft_recompute_s", "ttft_reload_s") or m.expect == "fail":
            continue
        tier = HBM_TIER if m.tier == "hbm" else CAT.tiers[m.tier or "host-dram"]
        b = band(model_of(m.model), CAT.gpus[m.gpu], tier, m.tokens, tp=m.tp, engine=m.engine,
                 concurrent_reloads=1, new_tokens=m.new_tokens, token_ids=m.token_ids)
        lo, hi = b[m.quantity]
        assert lo <= m.measured_value <= hi, (m.id, lo, m.measured_value, hi)
        checked += 1
    assert checked >= 10


def test_a_configuration_the_model_misses_carries_the_miss():
    """Llama-3.3-70B's architecture in FP8 on two H100s is the layout a NIM TTFT (v1.5.0) shows
    the model missing: the cell names the row and its band reaches the measured error; a GPU on
    a borrowed fit says so."""
    from kvmath.evaluate.bands import band
    b = band(CAT.models["llama-3.1-70b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"], 8192,
             tp=2, compute_dtype="fp8")
    assert b["known_limits"] == ["nim-70b-5000-v150"] and b["prefill_fit_own"]
    row = next(r for r in table() if r["measurement"].id == "nim-70b-5000-v150")
    assert b["recompute_s"][0] <= b["nominal"]["recompute_s"] / row["ratio"] * (1 + 1e-12)
    own = band(CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"], 8192)
    assert own["known_limits"] == [] and own["prefill_fit_own"]
    h20 = band(CAT.models["llama-3.1-8b"], CAT.gpus["h20"], CAT.tiers["host-dram"], 8192)
    assert not h20["prefill_fit_own"]


def test_the_reload_band_factor_is_the_held_out_error():
    from kvmath.evaluate.engine_fit import held_out_reload_factor
    assert engine_costs("vllm-lbhnc")["held_out_reload_factor"].value == pytest.approx(
        held_out_reload_factor(), rel=1e-5)


@pytest.mark.parametrize("tier", ["host-dram"])
@pytest.mark.parametrize("tokens", [512, 8192, 65536])
def test_a_layer_by_layer_load_hides_at_most_the_smaller_of_load_and_step(tier, tokens):
    """SGLang's HiCache loads layer l + 1 while its step computes layer l (layer_overlap): the
    pipeline of L equal layers hides min(load, step) (1 - 1/L), never more; vLLM's connector
    loads before its step and hides nothing; a prefix in HBM loads nothing to hide; a drive's
    or NIC's read is prefetched into host memory first and hides nothing either."""
    m, g = CAT.models["llama-3.1-70b"], CAT.gpus["h100-sxm"]
    over = compare(m, g, CAT.tiers[tier], tokens, tp=8, engine="sglang-hicache")
    load = over["kv_bytes_per_gpu"] / over["reload_bandwidth_Bps"]
    layers = m.layers
    assert over["overlap_hidden_s"] == pytest.approx(
        min(load, over["reload_step_s"]) * (1 - 1 / layers), rel=1e-12)
    assert over["ttft_reload_s"] == pytest.approx(
        over["request_s"] + over["reload_s"] - over["overlap_hidden_s"], rel=1e-12)
    # the pipeline never finishes before the longer of its two parts
    assert over["ttft_reload_s"] >= over["request_s"] + over["reload_latency_s"] + max(
        load, over["reload_step_s"]) * (1 - 1e-12)
    assert compare(m, g, CAT.tiers[tier], tokens, tp=8)["overlap_hidden_s"] == 0
    assert compare(m, g, HBM_TIER, tokens, tp=8, engine="sglang-hicache")["overlap_hidden_s"] == 0
    for other in ("nvme", "nvme-1drive", "rdma"):
        assert compare(m, g, CAT.tiers[other], tokens, tp=8,
                       engine="sglang-hicache")["overlap_hidden_s"] == 0


@pytest.mark.parametrize("new_tokens", [1, 512, 4096])
def test_an_overlapped_reloads_band_never_beats_its_load(new_tokens):
    """After review: the band's fast end had subtracted the nominal hidden part from a faster
    load and a shorter step, below the load at the link's spec rate; each end now hides
    min(load, step)(1 - 1/L) at its own load and step."""
    from kvmath.evaluate.bands import band
    m, g = CAT.models["llama-3.1-70b"], CAT.gpus["h100-sxm"]
    b = band(m, g, CAT.tiers["host-dram"], 32768, engine="sglang-hicache",
             new_tokens=new_tokens)
    n = b["nominal"]
    spec = n["kv_bytes_per_gpu"] / CAT.links[g.host_link].bandwidth_Bps
    assert b["ttft_reload_s"][0] >= n["request_s"] + n["reload_latency_s"] + spec
    assert b["ttft_reload_s"][0] <= n["ttft_reload_s"] <= b["ttft_reload_s"][1]
