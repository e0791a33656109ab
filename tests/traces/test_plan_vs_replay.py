"""Plan against replay: one source of node capacities, errors per tier as defined."""
import math

import pytest

from kvmath.traces import replay as C
from kvmath.traces.plan_vs_replay import max_abs, plan_vs_replay
from kvmath.node.capacities import node_capacities
from kvmath.tables.rows import nodes, resolve_model

MODEL = resolve_model("llama-3.1-70b")
NODE = nodes()["dgx-h100"]


@pytest.fixture(scope="module")
def result():
    return plan_vs_replay("conversation", MODEL, NODE)


def test_replay_and_plan_share_node_capacities(result):
    for row in result["tiers"]:
        assert row["capacity_bytes"] == row["replay_capacity_bytes"]
    nc = node_capacities(NODE, MODEL, batch_seqs=16, batch_context=12378)
    specs = C.node_tiers(NODE, MODEL, batch_seqs=16, batch_context=12378)
    for s in specs:
        t = nc["tiers"][s.name]
        assert (s.capacity_bytes, s.read_Bps, s.write_Bps) == \
            (t["capacity_bytes"], t["read_Bps"], t["write_Bps"])
    nvme = [s for s in specs if s.name == "nvme"][0]
    assert nvme.write_Bps < nvme.read_Bps  # drives.csv write bandwidth, not the read figure
    assert nvme.rated_dwpd == 1


def test_running_batch_shrinks_hbm():
    """At one layout (the default moves with the batch: a bigger one takes a larger TP)."""
    small = C.node_tiers(NODE, MODEL, tp=8, batch_seqs=1, batch_context=1000)[0].capacity_bytes
    big = C.node_tiers(NODE, MODEL, tp=8, batch_seqs=32, batch_context=32768)[0].capacity_bytes
    assert big < small


def test_errors_are_plan_minus_replay(result):
    for row in result["tiers"]:
        assert row["hit_share_error"] == row["plan_hit_share"] - row["replay_hit_share"]
        if row["tier"] != "hbm":
            assert row["read_error"] == pytest.approx(
                row["plan_read_Bps"] / row["replay_read_Bps"] - 1, rel=1e-12)
            assert row["write_error"] == pytest.approx(
                row["plan_write_Bps"] / row["replay_write_Bps"] - 1, rel=1e-12)
    # the plan serves only continuations: its total share cannot exceed what continuations
    # hit in an unlimited cache (a tolerance of 1e-9 for float sums)
    assert result["plan_hit_share"] <= result["replay_continuation_token_share"] + 1e-9
    assert 0 < max_abs(result["tiers"], "hit_share_error") < 1
    assert all(math.isfinite(r["plan_read_Bps"]) for r in result["tiers"])


def test_a_replay_already_run_is_reused_only_if_it_matches(result):
    again = plan_vs_replay("conversation", MODEL, NODE, replay=result["replay"])
    assert again["tiers"] == result["tiers"]
    with pytest.raises(ValueError, match="replay given"):
        plan_vs_replay("conversation", MODEL, NODE, policy="selective", replay=result["replay"])
    smaller = {**result["replay"], "tiers": result["replay"]["tiers"][:2]}
    with pytest.raises(ValueError, match="replay given"):
        plan_vs_replay("conversation", MODEL, NODE, replay=smaller)
