"""Writes as engines make them (issue 21 item 4): only new blocks, written back or through, in
the replay and in the analytic plan alike; a generated agent-like trace to hold the plan to."""
import json

import numpy as np
import pytest

from kvmath.cli.main import main
from kvmath.node.plan import tier_plan
from kvmath.evaluate.api import ScenarioError
from kvmath.tables.rows import nodes, pauses, plan_defaults, resolve_model
from kvmath.traces import readers as T
from kvmath.traces import replay as C
from kvmath.traces.generate import PARAMETERS, agent_parameters, agent_trace

NODE, MODEL, PAUSE = nodes()["dgx-h100"], resolve_model("llama-3.1-70b"), pauses()["conversation-fitted"]
# (timestamp, prompt tokens, block hashes): r1 repeats r0's prefix and adds a block
TINY = [(0.0, 2, [1, 2]), (1.0, 3, [1, 2, 3]), (2.0, 2, [4, 5])]


def tiers(hbm_blocks, dram_blocks=10, nvme_blocks=10):
    return [C.TierSpec("hbm", hbm_blocks, 1e9, 1e9),
            C.TierSpec("host-dram", dram_blocks, 1e9, 1e9, "host-dram"),
            C.TierSpec("nvme", nvme_blocks, 1e9, 1e9, "nvme", drive_bytes=nvme_blocks)]


def test_written_through_every_new_block_reaches_every_tier_once():
    """HBM large enough to evict nothing: written back, nothing reaches DRAM or the drives;
    written through, each distinct block is written to each once, a block held never again."""
    trace = T.from_requests(TINY)
    back = C.replay(trace, tiers(100), block_bytes=1)
    through = C.replay(trace, tiers(100), block_bytes=1, writes="through")
    assert [t["writes"] for t in back["tiers"][1:]] == [0, 0]
    assert [t["writes"] for t in through["tiers"][1:]] == [5, 5]  # blocks 1..5, once each
    assert through["token_hit_rate"] == back["token_hit_rate"]


def test_written_through_an_eviction_writes_nothing_below():
    """HBM of one block: written back, its evictions cascade to DRAM; written through, DRAM
    already holds every block, so it takes exactly the distinct blocks, and a DRAM too small
    for them drops its oldest without writing them to the drives."""
    trace = T.from_requests(TINY)
    back = C.replay(trace, tiers(1), block_bytes=1)
    through = C.replay(trace, tiers(1), block_bytes=1, writes="through")
    assert through["tiers"][1]["writes"] == 5 and back["tiers"][1]["writes"] == 4
    small = C.replay(trace, tiers(1, dram_blocks=2), block_bytes=1, writes="through")
    assert small["tiers"][2]["writes"] == 5  # the drives took each block once, when it was new


def test_an_unknown_write_mode_is_refused():
    with pytest.raises(ValueError, match="write mode"):
        C.replay(T.from_requests(TINY), tiers(1), block_bytes=1, writes="around")
    with pytest.raises(ScenarioError, match="--writes"):
        tier_plan(NODE, MODEL, 32768, 0.5, PAUSE, find_limit=False, writes="around")


def test_the_plan_written_through_holds_every_cache_from_age_zero():
    back = tier_plan(NODE, MODEL, 32768, 0.5, PAUSE, find_limit=False)
    through = tier_plan(NODE, MODEL, 32768, 0.5, PAUSE, find_limit=False, writes="through")
    assert through["writes"] == "through" and back["writes"] == "back"
    for t in through["tiers"][1:]:
        assert t["ttl_from_s"] == 0.0
    # written through, DRAM takes every offload; written back only what outlives HBM
    assert through["tiers"][1]["write_demand_Bps"] >= back["tiers"][1]["write_demand_Bps"]
    # the tiers serve each return once: the shares add up to at most one
    assert sum(t["resume_fraction"] for t in through["tiers"]) <= 1 + 1e-12


def test_the_agent_trace_is_seeded_and_sourced():
    a, b = agent_trace(), agent_trace()
    assert np.array_equal(a.hashes, b.hashes) and np.array_equal(a.timestamp_s, b.timestamp_s)
    d = plan_defaults()
    for k in PARAMETERS:  # every parameter a labelled assumption
        assert d[f"agent_{k}"].kind == "assumption"
    assert (np.diff(a.timestamp_s) >= 0).all()
    assert (a.n_blocks == -(-a.prompt_tokens // a.block_tokens)).all()
    assert a.prompt_tokens.max() <= agent_parameters()["max_context_tokens"]
    # a request's hashes are distinct, and a session's full blocks persist into its next turn
    for r in range(0, a.n_requests, 97):
        h = a.hashes[a.rid == r]
        assert len(set(h.tolist())) == len(h)
    s = T.reuse_stats(a)
    assert s["max_token_hit_rate"] > 0.8  # an agent re-sends almost all of its context
    with pytest.raises(ValueError, match="unknown agent-trace parameter"):
        agent_trace(sesions_per_s=1)


def test_more_sessions_make_a_longer_trace():
    assert agent_trace(sessions_per_s=0.1).n_requests > agent_trace().n_requests


def test_plan_against_replay_takes_the_write_mode():
    from kvmath.traces.plan_vs_replay import plan_vs_replay
    r = plan_vs_replay("agent", MODEL, NODE, trace=agent_trace(sessions_per_s=0.01),
                       writes="through")
    assert r["writes"] == "through" and r["replay"]["writes"] == "through"
    assert r["plan"]["writes"] == "through"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_takes_the_write_mode(capsys):
    code, out, err = run(capsys, "tiers", "--model", "llama-3.1-70b", "--tokens", "32768",
                         "--resume-rate", "0.5", "--writes", "through", "--json")
    assert code == 0, err and json.loads(out)["writes"] == "through"
    code, out, err = run(capsys, "trace", "synthetic", "--model", "llama-3.1-8b", "--writes",
                         "through")
    assert code == 0, err
    assert "written through" in out
    code, out, err = run(capsys, "tiers", "--model", "llama-3.1-70b", "--tokens", "32768",
                         "--resume-rate", "0.5", "--writes", "sideways")
    assert code == 2 and "--writes" in err and "Traceback" not in err
