"""KV bytes per token are exact integers: checked symbolically and through lambdify."""
import pytest
import sympy as sp

from kvmath.derive import kv as D
from kvmath.derive import symbols as S
from kvmath.derive.attention import FAMILIES
from kvmath import resolve_gpu, resolve_model, resolve_tier, compare
from kvmath.evaluate.api import architecture_values, fn

# Worked by hand from each config.json: 2 (K and V) x layers x KV heads x head_dim x 2 B,
# or for MLA (kv_lora_rank + qk_rope_head_dim) x layers x 2 B.
EXACT_BF16 = {
    "llama-2-7b": 2 * 32 * 32 * 128 * 2,  # 524,288 (MHA)
    "llama-3.1-8b": 2 * 32 * 8 * 128 * 2,  # 131,072
    "llama-3.1-70b": 2 * 80 * 8 * 128 * 2,  # 327,680
    "llama-3.1-405b": 2 * 126 * 8 * 128 * 2,  # 516,096
    "qwen2.5-7b": 2 * 28 * 4 * 128 * 2,  # 57,344
    "qwen3-8b": 2 * 36 * 8 * 128 * 2,  # 147,456
    "qwen3-30b-a3b": 2 * 48 * 4 * 128 * 2,  # 98,304
    "qwen3-235b-a22b": 2 * 94 * 4 * 128 * 2,  # 192,512
    "deepseek-v3": (512 + 64) * 61 * 2,  # 70,272 (MLA)
    "gpt-oss-120b": 2 * 36 * 8 * 64 * 2,  # 73,728 while T <= 128
}


def test_issue_values():
    assert EXACT_BF16["llama-3.1-70b"] == 327_680
    assert EXACT_BF16["deepseek-v3"] == 70_272
    assert EXACT_BF16["llama-2-7b"] == 524_288


@pytest.mark.parametrize("name,expected", sorted(EXACT_BF16.items()))
def test_kv_bytes_per_token_exact(name, expected):
    model = resolve_model(name)
    v = architecture_values(model)
    e_kv = FAMILIES[model.attention].e_kv
    expr = D.kv_bytes_per_token.subs(S.e_kv, e_kv)
    exact = expr.subs({s: sp.nsimplify(v[s.name]) for s in expr.free_symbols})
    assert exact == sp.Integer(expected)
    numeric = fn("kv_bytes_per_token").take(v)
    assert numeric == expected and float(numeric).is_integer()


def test_fp8_kv_halves_bytes():
    m = resolve_model("llama-3.1-70b")
    assert fn("kv_bytes_per_token").take(architecture_values(m, "fp8")) == 327_680 / 2


def test_sliding_window_caps_bytes():
    """gpt-oss-120b: 18 full layers hold every token, 18 sliding layers at most 128."""
    m, g, t = resolve_model("gpt-oss-120b"), resolve_gpu("h100-sxm"), resolve_tier("host-dram")
    per_layer = 2 * 8 * 64 * 2
    for tokens in (100, 128, 32_768):
        r = compare(m, g, t, tokens)
        assert r["kv_bytes"] == per_layer * (18 * tokens + 18 * min(tokens, 128))


def test_mistral_window_applies_to_every_layer():
    m, g, t = resolve_model("mistral-7b"), resolve_gpu("h100-sxm"), resolve_tier("host-dram")
    assert compare(m, g, t, 10_000)["kv_bytes"] == 131_072 * 4096


@pytest.mark.parametrize("tp,copies", [(2, 1), (4, 1), (8, 1), (16, 2)])
def test_tp_replicates_gqa_heads_beyond_kv_heads(tp, copies):
    m, g, t = resolve_model("llama-3.1-70b"), resolve_gpu("h100-sxm"), resolve_tier("host-dram")
    r = compare(m, g, t, 1000, tp=tp)
    assert r["kv_replication"] == copies
    assert r["kv_bytes"] == 327_680 * 1000 * copies
    assert r["kv_bytes_per_gpu"] == 327_680 * 1000 * copies / tp


def test_mla_latent_replicated_on_every_rank():
    m, g, t = resolve_model("deepseek-v3"), resolve_gpu("h200"), resolve_tier("host-dram")
    r = compare(m, g, t, 1000, tp=8)
    assert r["kv_bytes_per_gpu"] == 70_272 * 1000
    assert r["kv_bytes"] == 8 * 70_272 * 1000


# ---------------------------------------------------------------- bytes counted per hop
def _hop(r, link):
    return next(h for h in r["path"] if h["link"] == link)


def test_replicated_latent_crosses_a_shared_drive_once():
    """DeepSeek-V3 at TP8 on an 8xH200 node, one drive: every rank needs the whole 2.3 GB
    latent, but an engine that reads it once and fans it out moves 2.3 GB through the drive
    (about a third of a second at 6.8 GB/s), not 8 x 2.3 GB."""
    m, g, t = resolve_model("deepseek-v3"), resolve_gpu("h200"), resolve_tier("nvme-1drive")
    once = compare(m, g, t, 32768, tp=8, engine="ideal")
    latent = 70_272 * 32768
    assert once["kv_bytes_unique"] == latent and once["kv_bytes_per_gpu"] == latent
    assert once["concurrent_reloads"] == 1 and once["node_hop_copies"] == 1
    drive = _hop(once, "nvme-gen4-x4-drive")
    assert drive["bytes"] == latent
    assert drive["time_s"] == pytest.approx(latent / 6.8e9)
    assert once["reload_s"] == pytest.approx(once["reload_fixed_s"] + latent / 6.8e9)
    per_rank = compare(m, g, t, 32768, tp=8, engine="vllm-cross-layer-v0.26")
    assert per_rank["node_hop_copies"] == 8
    assert _hop(per_rank, "nvme-gen4-x4-drive")["bytes"] == 8 * latent
    assert per_rank["kv_bytes_stored"] == 8 * latent


def test_single_copy_mla_slot_vllm_027():
    """vLLM from v0.27.0 (PRs 48906, 50301) stores one copy of DeepSeek-V3's latent per node and
    every rank loads that shared slot: the drive behind host memory holds and is read for one
    copy, host DRAM still carries all eight ranks' copies, and a cache occupies one latent."""
    m, g, t = resolve_model("deepseek-v3"), resolve_gpu("h200"), resolve_tier("nvme-1drive")
    r = compare(m, g, t, 32768, tp=8, engine="vllm-cross-layer")
    latent = 70_272 * 32768
    assert r["kv_bytes_stored"] == latent and r["kv_bytes"] == 8 * latent
    assert _hop(r, "nvme-gen4-x4-drive")["bytes"] == latent
    assert _hop(r, "host-dram-ddr5-4800-2s")["bytes"] == 8 * latent
    # a GQA model is stored per rank still (the canonical layout of PR 48414 is opt-in)
    g70 = compare(resolve_model("llama-3.1-70b"), g, t, 32768, tp=8, engine="vllm-cross-layer")
    assert g70["kv_bytes_stored"] == g70["kv_bytes"]
    # beyond one node the single copy does not apply (the PR's condition: world size = TP on
    # one node): two H100 nodes at TP16 store and read it once per rank
    two = compare(m, resolve_gpu("h100-sxm"), resolve_tier("nvme"), 8192, tp=16,
                  engine="vllm-cross-layer")
    assert two["kv_bytes_stored"] == two["kv_bytes"]


def test_shared_hops_split_among_concurrent_reloads():
    """Llama-3.1-8B at TP1 on an 8-GPU node: the 8 striped drives (56 GB/s) serve 8 replicas
    at once, 6.8 GB/s each; alone, one replica gets the whole array up to its PCIe link."""
    m, g, t = resolve_model("llama-3.1-8b"), resolve_gpu("h100-sxm"), resolve_tier("nvme")
    busy = compare(m, g, t, 8192, tp=1, engine="ideal")
    assert busy["concurrent_reloads"] == 8
    assert busy["reload_bandwidth_Bps"] == pytest.approx(8 * 6.8e9 / 8)
    alone = compare(m, g, t, 8192, tp=1, engine="ideal", concurrent_reloads=1)
    assert alone["reload_bandwidth_Bps"] == pytest.approx(min(8 * 6.8e9, 54.8e9))


def test_per_gpu_hop_carries_each_gpus_bytes():
    m, g, t = resolve_model("llama-3.1-70b"), resolve_gpu("h100-sxm"), resolve_tier("host-dram")
    r = compare(m, g, t, 32768, tp=4, engine="ideal")
    assert _hop(r, "pcie-gen5-x16")["bytes"] == 327_680 * 32768 / 4
    assert _hop(r, "host-dram-ddr5-4800-2s")["bytes"] == 2 * 327_680 * 32768  # 2 replicas


@pytest.mark.parametrize("model,engine,copies", [
    ("deepseek-v3", "lmcache", 1.0),          # MLA latent: rank 0 reads it, then broadcasts
    ("deepseek-v3", "vllm-cross-layer", 8.0),  # every rank reads its replica
    ("qwen3-30b-a3b", "lmcache", 2.0),         # GQA heads replicated at TP 8 > 4 KV heads: LMCache
                                               # saves from rank 0 only for MLA (save_only_first_rank = use_mla)
    ("qwen3-30b-a3b", "ideal", 1.0),           # the ideal engine always reads once
])
def test_replicated_kv_crosses_node_hops_once_only_where_the_engine_does(model, engine, copies):
    from kvmath import bundled
    from kvmath.evaluate.api import compare
    cat = bundled()
    r = compare(cat.models[model], cat.gpus["h200"], cat.tiers["nvme"], 32768, tp=8, engine=engine)
    assert r["node_hop_copies"] == copies


def test_an_mla_latent_is_copied_whole_where_gqa_copies_keys_and_values_apart():
    """vllm-per-layer copies K and V apart (kv_split); an MLA latent is one tensor per layer."""
    from kvmath import bundled
    from kvmath.evaluate.api import scenario_values
    cat = bundled()
    mla, _ = scenario_values(cat.models["deepseek-v3"], cat.gpus["h200"], cat.tiers["nvme"], tp=8,
                          engine="vllm-per-layer", tokens=32768)
    gqa, _ = scenario_values(cat.models["llama-3.1-70b"], cat.gpus["h200"], cat.tiers["nvme"], tp=8,
                          engine="vllm-per-layer", tokens=32768)
    assert mla["c_split"] == 1.0 and gqa["c_split"] == 2.0


@pytest.mark.parametrize("model,layers_per_copy", [("gpt-oss-120b", 1.0), ("mistral-7b", 32.0),
                                                   ("llama-3.1-8b", 32.0)])
def test_cross_layer_copies_only_for_uniform_models(model, layers_per_copy):
    """vLLM allocates cross-layer blocks only when every layer shares one KV layout: gpt-oss
    (half its layers windowed) copies per layer; all-windowed Mistral and Llama span layers."""
    from kvmath import bundled
    from kvmath.evaluate.api import scenario_values
    cat = bundled()
    v, _ = scenario_values(cat.models[model], cat.gpus["h100-sxm"], cat.tiers["host-dram"],
                           engine="vllm-cross-layer", tokens=8192)
    assert v["c_lay"] == layers_per_copy
    assert v["c_split"] == (2.0 if layers_per_copy == 1 else 1.0)  # per-layer copies split K and V


@pytest.mark.parametrize("model,engine,copies", [
    # Llama-3.1-405B, 8 KV heads at TP16 over two 8-GPU nodes: each head sits on two adjacent
    # ranks, so one node's eight ranks hold heads 0-3 (or 4-7), half the unique KV, twice over
    ("llama-3.1-405b", "ideal", 0.5),             # read once: the node's distinct half
    ("llama-3.1-405b", "vllm-cross-layer", 1.0),  # per rank: 8 ranks x 1/8 of the unique KV each
    # DeepSeek-V3's latent is on every rank: each node needs all of it
    ("deepseek-v3", "lmcache", 1.0),
    ("deepseek-v3", "vllm-cross-layer", 8.0),
])
def test_a_replica_spanning_two_nodes_carries_through_each_only_what_its_ranks_hold(model, engine, copies):
    m, g, t = resolve_model(model), resolve_gpu("h100-sxm"), resolve_tier("nvme")
    r = compare(m, g, t, 8192, tp=16, engine=engine)
    assert r["node_hop_copies"] == copies
    assert _hop(r, "nvme-gen4-x4-drive")["bytes"] == pytest.approx(copies * r["kv_bytes_unique"])
