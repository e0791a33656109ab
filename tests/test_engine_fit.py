"""The engines' request costs: the committed values are the fit's, the fit saw only its named
rows, and a time to first token is what the engine charges plus what the physics costs."""
import pytest

from kvmath import bundled, compare
from kvmath.engine_fit import FITTED, committed, fit
from kvmath.evaluate import HBM_TIER, ScenarioError
from kvmath.tables import engine_costs
from kvmath.validation import table

CAT = bundled()


def test_committed_costs_are_the_fit():
    """engine_costs.csv holds what scripts/fit_engine_costs.py computes (6 significant figures)."""
    f = fit()
    for p in FITTED:
        assert committed()[p] == pytest.approx(f["values"][p], rel=1e-5)
    rows = {r.parameter: r for r in engine_costs("vllm-cross-layer").values()}
    assert rows["hit_token_s"].calibration_rows.split("; ") == list(f["calibration_rows"])


def test_held_out_rows_are_the_rest():
    f = fit()
    assert set(f["calibration_rows"]).isdisjoint(f["held_out"])
    sources = {r["measurement"].source_key for r in table()
               if r["measurement"].id in f["calibration_rows"]}
    assert len(sources) >= 2  # two independent sources, neither alone sets every cost


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
    assert ideal["request_s"] == 0 and ideal["engine_costs_calibrated"]


def test_new_tokens_must_fit_the_window():
    m, g = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"]
    with pytest.raises(ScenarioError, match="context window"):
        compare(m, g, CAT.tiers["host-dram"], m.max_context_tokens, new_tokens=100)
    with pytest.raises(ScenarioError, match="--new-tokens"):
        compare(m, g, CAT.tiers["host-dram"], 1000, new_tokens=0)
