"""Hybrid models (issue 22 item 1): recurrent layers whose state does not grow with the prompt
beside a few attention layers, the checkpoints engines keep it at, and its costs."""
import json
import math

import pytest

from kvmath.cli.main import main
from kvmath.evaluate.api import compare, compare_at
from kvmath.evaluate.api import ScenarioError, heads_fit, parameter_counts
from kvmath.tables.rows import bundled

CAT = bundled()
QWEN, KIMI = CAT.models["qwen3-next-80b-a3b"], CAT.models["kimi-linear-48b-a3b"]
H100, DRAM = CAT.gpus["h100-sxm"], CAT.tiers["host-dram"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_hybrid_models_bundled_with_their_configs():
    for m in (QWEN, KIMI):
        assert m.recurrent_layers > 0 and m.source.startswith("https://") and m.kind == "config"
        assert m.layers - m.recurrent_layers - m.window_layers > 0  # some full attention
    assert (QWEN.layers, QWEN.recurrent_layers) == (48, 36)  # every fourth layer attends
    assert (KIMI.layers, KIMI.recurrent_layers) == (27, 20)  # 3:1 KDA to MLA, 7 MLA layers


@pytest.mark.parametrize("model,total,active", [(QWEN, 80e9, 3e9), (KIMI, 48e9, 3e9)])
def test_parameters_are_the_model_cards(model, total, active):
    """Qwen3-Next's card: '80B in total and 3B activated'; Kimi Linear's name: 48B, 3B active.
    Within 5 % (the cards round; norms and the attention's output gate are not counted)."""
    n_lin, n_tot, _ = parameter_counts(model)
    assert n_tot == pytest.approx(total, rel=0.05) and n_lin == pytest.approx(active, rel=0.1)


def test_the_state_by_hand_and_it_does_not_grow():
    """Qwen3-Next: 36 layers x (32 value heads x 128 x 128 state + 3 x (2 x 16 x 128 + 32 x 128)
    convolution inputs) x 2 B, the same at any prompt length and TP; the KV grows by the 12
    attention layers' 2 KV heads of 256, keys and values, 2 B, per token (x2 copies at TP 4)."""
    state = 36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 2
    a, b = (compare_at(QWEN, H100, DRAM, t, tp=4) for t in (8192, 16384))
    assert a["state_bytes"] == b["state_bytes"] == state
    assert a["state_bytes_per_gpu"] == state / 4
    assert b["kv_bytes"] - a["kv_bytes"] == pytest.approx(2 * 12 * 2 * 2 * 256 * 2 * 8192, rel=1e-12)
    assert a["state_share_of_reload_bytes"] > b["state_share_of_reload_bytes"]
    assert "state_bytes" not in compare(CAT.models["llama-3.1-8b"], H100, DRAM, 8192)


def test_kimis_state_is_float32():
    r = compare_at(KIMI, H100, DRAM, 8192, tp=2)
    assert r["state_dtype"] == "fp32"
    assert r["state_bytes"] == 20 * (32 * 128 * 128 + 3 * (2 * 32 * 128 + 32 * 128)) * 4


def test_a_reload_resumes_at_the_last_checkpoint():
    """vLLM keeps the state on its block grid: a prefix reloads the KV and state of its last
    checkpoint and computes the tail with the new turn, so it equals compare_at there."""
    r = compare(QWEN, H100, DRAM, 32768, tp=4, new_tokens=3)
    c = r["state_checkpoint_tokens"]
    at = math.floor(32768 / c) * c
    assert r["state_checkpoint_at_tokens"] == at and r["state_tail_tokens"] == 32768 - at
    assert r["tokens"] == 32768 and r["new_tokens"] == 3
    direct = compare_at(QWEN, H100, DRAM, at, tp=4, new_tokens=3 + 32768 - at)
    assert r["reload_s"] == direct["reload_s"] and r["ttft_reload_s"] == direct["ttft_reload_s"]
    # the recompute is the same prefill of T + n tokens either way
    plain = compare_at(QWEN, H100, DRAM, 32768, tp=4, new_tokens=3)
    assert r["ttft_recompute_s"] == pytest.approx(plain["ttft_recompute_s"], rel=1e-12)
    # a block's attention KV per GPU is at least one layer's state per GPU (vLLM's page rule)
    kv_token_layer = 2 * 2 * 256 * 2 * 2 / 4  # 2 KV heads, keys and values, 2 B; x2 copies / 4
    assert c * kv_token_layer >= r["state_bytes_per_gpu"] / 36 > (c - 1) * kv_token_layer


def test_below_the_first_checkpoint_nothing_reloads(capsys):
    with pytest.raises(ScenarioError, match="no checkpoint to reload"):
        compare(QWEN, H100, DRAM, 100, tp=4)
    code, out, err = run(capsys, "compare", "--model", "qwen3-next-80b-a3b", "--gpu", "h100-sxm",
                         "--tier", "host-dram", "--tokens", "100", "--tp", "4")
    assert code == 2 and "checkpoint" in err and "Traceback" not in err and out == ""


def test_the_state_is_a_fixed_cost_so_short_prompts_gain_less():
    """The state's load is paid at any length: at short prompts it is a large share of the
    reload, and the reload's advantage over recompute grows with the prompt."""
    short, long_ = (compare(QWEN, H100, CAT.tiers["nvme"], t, tp=4) for t in (2048, 65536))
    assert short["state_load_s"] == pytest.approx(long_["state_load_s"], rel=1e-12)
    assert short["state_load_s"] / short["reload_s"] > long_["state_load_s"] / long_["reload_s"]
    assert short["ttft_recompute_s"] / short["ttft_reload_s"] < \
        long_["ttft_recompute_s"] / long_["ttft_reload_s"]


def test_recurrent_heads_must_split_by_tp():
    assert heads_fit(QWEN, 16) and not heads_fit(QWEN, 32)


@pytest.mark.parametrize("fields,field,words", [
    ({"recurrent_layers": "40"}, "recurrent_layers", "exceed layers"),
    ({"recurrent_key_heads": ""}, "recurrent_key_heads", "a positive integer"),
    ({"recurrent_value_heads": "24"}, "recurrent_value_heads", "multiple of recurrent_key_heads"),
    ({"state_dtype": "fp6"}, "state_dtype", "unknown format"),
])
def test_a_hybrid_row_that_does_not_add_up_is_refused(capsys, model_file, fields, field, words):
    path = model_file(base="qwen3-next-80b-a3b", window_layers="10", **fields) \
        if field == "recurrent_layers" else model_file(base="qwen3-next-80b-a3b", **fields)
    code, out, err = run(capsys, "compare", "--model", str(path), "--gpu", "h100-sxm", "--tier",
                         "host-dram", "--tokens", "32768")
    assert code == 2 and f"field '{field}'" in err and words in err and "Traceback" not in err


def test_compare_json_says_what_the_state_holds_and_costs(capsys):
    code, out, err = run(capsys, "compare", "--model", "qwen3-next-80b-a3b", "--gpu", "h200",
                         "--tier", "nvme", "--tokens", "65536", "--json")
    assert code == 0, err
    r = json.loads(out)
    keys = {k for k in r if "state" in k}
    assert {"state_bytes", "state_bytes_per_gpu", "state_load_s", "state_checkpoint_tokens",
            "state_checkpoint_at_tokens", "state_tail_tokens", "state_dtype"} <= keys


@pytest.mark.parametrize("model", [QWEN, KIMI], ids=lambda m: m.name)
@pytest.mark.parametrize("tp", [4, 8])
@pytest.mark.parametrize("tier", ["nvme", "host-dram", "nvme-1drive"])
@pytest.mark.parametrize("engine", [None, "lmcache", "ideal"])
def test_no_reload_beats_its_hops_and_the_state_moves_at_its_own_rate(model, tp, tier, engine):
    """The KV at the path's rate and the state at its own, one after the other: never below the
    slowest hop's time for the whole cache, never above twice it (each part at most that hop's
    time for all the bytes). The review's case: Kimi at TP 4 from NVMe, replicated KV read
    once, had charged its KV at the state's rate, 3.6 times the slowest hop."""
    r = compare_at(model, H100, CAT.tiers[tier], 32768, tp=tp, engine=engine)
    moved = r["reload_s"] - r["reload_fixed_s"] - r["hit_cost_s"]
    slowest = max(h["time_s"] for h in r["path"])
    assert slowest * (1 - 1e-9) <= moved <= 2 * slowest * (1 + 1e-9)


def test_a_hybrid_trace_replays_and_its_blocks_are_attention_kv():
    """A 512-token block of Kimi Linear at TP 8, by hand: its 7 MLA layers' latent and RoPE key
    (512 + 64 elements, bf16), stored once by the default engine (one latent per node) and held
    on every one of the 8 ranks in HBM. The review found HBM blocks sized by a ratio the state
    skewed (several times too small) and the checkpoint refusal reaching the replay."""
    from kvmath.traces import replay as C
    block = 512 * (512 + 64) * 7 * 2
    assert C.kv_block_bytes(KIMI, H100, 8, 512) == block
    specs = C.with_hbm_blocks([C.TierSpec("hbm", 1e12, 1e12, 1e12)], KIMI, H100, 8, 512)
    assert specs[0].block_bytes == 8 * block


def test_a_crossing_is_never_below_the_first_checkpoint():
    r = compare(QWEN, H100, DRAM, 32768, tp=4)
    assert all(x >= r["state_checkpoint_tokens"] for x in r["breakeven_tokens"])


def test_a_stored_cache_holds_one_state():
    r = compare_at(QWEN, H100, DRAM, 32768, tp=8, engine="vllm-per-layer")
    assert r["kv_bytes_stored"] == pytest.approx(
        r["kv_stored_copies"] * (r["kv_bytes_unique"] - r["state_bytes"]) + r["state_bytes"])
