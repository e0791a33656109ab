"""Workloads and deployments of the fleet (issue 35 items 3 and 5): the benchmark workloads
``kvmath trace generate`` writes, a trace's load scaled, the deployment options every planning
command takes, a rack slice as a node, and errors named for what they are."""
import gzip
import json

import numpy as np
import pytest

from kvmath.cli.main import main
from kvmath.traces import generate as G
from kvmath.traces import readers as T


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_load_ladder_sends_its_stages_requests_in_turn():
    ts = G.poisson_arrivals([(10, 20), (0, 5), (30, 10)], seed=1)
    assert np.all(np.diff(ts) >= 0)
    assert abs((ts < 20).sum() - 200) < 60 and not ((ts >= 20) & (ts < 25)).any()
    assert G.stage_counts([(15, 50), (3, 20)]) == [750, 60]


def test_the_shared_prefix_workload_shares_a_groups_system_prompt():
    """inference-perf's shared prefix: a group's prompts share the system prompt's full blocks
    and nothing after; the prompts cycle, so the same prompt repeats exactly."""
    tr = G.shared_prefix_trace(3, 2, 128, 64, 10, np.arange(12.0), block_tokens=32)
    off = np.r_[0, np.cumsum(tr.n_blocks)]
    blocks = [tr.hashes[off[i]:off[i + 1]].tolist() for i in range(tr.n_requests)]
    assert all(len(b) == 6 for b in blocks) and tr.prompt_tokens[0] == 192
    firsts = {tuple(b[:4]) for b in blocks}
    assert len(firsts) == 3  # three groups' system prompts
    assert blocks[0] == blocks[6] and len({tuple(b) for b in blocks}) == 6  # a cycle of 6


def test_sessions_chain_as_continued_turns():
    tr = G.sessions_trace(20, 4, 100.0, 20, system_tokens=64, turns_min=2, block_tokens=16)
    parent = T.continuations(tr)
    assert (parent >= 0).sum() == tr.n_requests - 20  # every turn but the first continues
    assert np.all(tr.prompt_tokens[parent[parent >= 0]] < tr.prompt_tokens[parent >= 0])


def test_trace_generate_writes_a_generic_trace(capsys, tmp_path):
    out = tmp_path / "w.jsonl.gz"
    code, text, err = run(capsys, "trace", "generate", "--workload", "shared-prefix",
                          "--groups", "4", "--prompts-per-group", "3", "--system-tokens",
                          "256", "--question-tokens", "64", "--output-tokens", "8",
                          "--stages", "5:4,2:5", "--out", str(out))
    assert code == 0, err
    first = json.loads(gzip.open(out, "rt").readline())
    assert set(first) == {"timestamp_s", "prompt_tokens", "output_tokens", "block_hashes",
                          "block_tokens"}
    tr = T.load(str(out))
    assert tr.prompt_tokens[0] == 320 and tr.block_tokens == 64 and "requests" in text
    code, text, err = run(capsys, "trace", "generate", "--workload", "sessions", "--sessions",
                          "5", "--pause", "conversation-fitted", "--session-rate", "1",
                          "--out", str(tmp_path / "s.jsonl"))
    assert code == 0, err and T.load(str(tmp_path / "s.jsonl")).n_requests >= 5
    code, text, err = run(capsys, "trace", "generate", "--workload", "shared-prefix",
                          "--stages", "5:x", "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "RATE:SECONDS" in err


def test_a_rate_scale_brings_the_arrivals_closer(capsys):
    base = ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "1", "--dask", "none",
            "--json"]
    _, one, _ = run(capsys, *base)
    _, two, _ = run(capsys, *base, "--rate-scale", "4")
    one, two = json.loads(one), json.loads(two)
    assert two["span_s"] < one["span_s"] and two["ttft_s"]["p90"] >= one["ttft_s"]["p90"]


def test_a_closed_loop_of_users(capsys):
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "1",
                         "--users", "8", "--think-time", "1", "--dask", "none", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["workload"]["users"] == 8 and r["requests_served"] > 0
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "1",
                         "--think-time", "1")
    assert code == 2 and "--think-time needs --users" in err


def test_every_planning_command_takes_the_deployment(capsys):
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--gpu",
                         "h200", "--nodes", "1", "--kv-dtype", "fp8", "--dask", "none",
                         "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["node"] == "dgx-h200"
    tiers = ["tiers", "--model", "llama-3.1-70b", "--tokens", "32768", "--resume-rate", "0.5",
             "--json"]
    _, bf16, _ = run(capsys, *tiers)
    _, fp8, _ = run(capsys, *tiers, "--kv-dtype", "fp8")
    assert json.loads(fp8)["hbm_free_bytes"] > json.loads(bf16)["hbm_free_bytes"]
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "1",
                         "--host-cache-bytes", "0", "--dask", "none", "--json")
    assert code == 0, err  # no host tier, refused before


def test_a_rack_slice_is_a_node():
    from kvmath.scenario.build import node_slice
    from kvmath.tables.rows import nodes
    rack = nodes()["gb200-nvl72"]
    s = node_slice(rack, 8)
    assert s.gpus == 8 and s.nics == 8 and s.nvme_drives == 8
    assert s.host_dram_bytes == pytest.approx(rack.host_dram_bytes * 8 / 72)
    from kvmath.logic.runtime import ScenarioError
    with pytest.raises(ScenarioError, match="has 72 GPUs"):
        node_slice(rack, 80)


def test_a_layout_that_leaves_no_kv_is_refused_in_words(capsys):
    code, out, err = run(capsys, "fleet", "synthetic", "--model", "llama-3.1-70b", "--nodes",
                         "1", "--tp", "1", "--dask", "none")
    assert code == 2 and ("cannot hold" in err or "does not fit" in err) and "fits" in err


def test_a_memory_limit_is_not_a_malformed_trace():
    import duckdb
    from kvmath.traces.reading import _memory
    from kvmath.traces.trace import TraceError
    with pytest.raises(TraceError, match="ran out of memory"):
        _memory(duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate"), "t.jsonl")
    _memory(duckdb.ConversionException("no"), "t.jsonl")  # anything else passes through
