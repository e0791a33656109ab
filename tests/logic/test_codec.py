"""Compressed KV: number formats' scale bytes and a codec (fewer bytes moved, decode added)."""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmath import bundled
from kvmath.cli.main import main
from kvmath.evaluate.api import compare
from kvmath.tables.rows import DTYPE_BYTES, codecs

CAT = bundled()
M, G, T = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"], CAT.tiers["rdma"]
CACHEGEN = codecs()["cachegen"]


def test_a_codec_moves_one_ratioth_of_the_bytes_and_adds_its_decode():
    plain = compare(M, G, T, 32768)
    coded = compare(M, G, T, 32768, codec=replace(CACHEGEN, pipelined=False))
    r = CACHEGEN.compression_ratio
    for a, b in zip(plain["path"], coded["path"]):
        assert b["bytes"] == pytest.approx(a["bytes"] / r, rel=1e-12)
    wire = plain["reload_bandwidth_Bps"]
    assert coded["reload_wire_bandwidth_Bps"] == pytest.approx(wire, rel=1e-12)
    # decode after transfer (pipelined false): 1 / (1 / (r B_wire) + 1 / B_dec)
    assert coded["reload_bandwidth_Bps"] == pytest.approx(
        1 / (1 / (r * wire) + 1 / CACHEGEN.decode_Bps), rel=1e-12)
    kv = plain["kv_bytes_per_gpu"]
    assert coded["kv_bytes_moved_per_gpu"] == pytest.approx(kv / r, rel=1e-12)
    assert coded["codec_decode_s"] == pytest.approx(kv / CACHEGEN.decode_Bps, rel=1e-12)
    assert coded["reload_s"] - plain["reload_s"] == pytest.approx(
        kv / coded["reload_bandwidth_Bps"] - kv / wire, rel=1e-9)


def test_a_pipelined_codec_is_bound_by_the_slower_of_wire_and_decode():
    fast = replace(CACHEGEN, pipelined=True)
    coded = compare(M, G, T, 32768, codec=fast)
    assert coded["reload_bandwidth_Bps"] == pytest.approx(min(
        fast.compression_ratio * coded["reload_wire_bandwidth_Bps"], fast.decode_Bps), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.floats(1, 50), st.floats(1e8, 1e14), st.booleans(), st.integers(64, 131072),
       st.sampled_from(["host-dram", "nvme", "rdma"]))
def test_no_codec_beats_its_wire_or_its_decode(ratio, decode, pipelined, tokens, tier):
    # physics: the coded reload takes at least the encoded bytes over the wire and at least
    # the decode of every byte, beside the fixed cost and the connector
    codec = replace(CACHEGEN, compression_ratio=ratio, decode_Bps=decode, pipelined=pipelined)
    r = compare(M, G, CAT.tiers[tier], tokens, codec=codec)
    floor = r["reload_fixed_s"] + r["hit_cost_s"] + max(
        r["kv_bytes_moved_per_gpu"] / r["reload_wire_bandwidth_Bps"], r["codec_decode_s"])
    assert r["reload_s"] >= floor * (1 - 1e-12)
    assert r["reload_bandwidth_Bps"] <= min(ratio * r["reload_wire_bandwidth_Bps"], decode) * (1 + 1e-12)


def test_the_band_keeps_the_codec():
    from kvmath.evaluate.bands import band
    b = band(M, G, T, 32768, codec=CACHEGEN)
    lo, hi = b["reload_bandwidth_Bps"]
    assert lo <= b["nominal"]["reload_bandwidth_Bps"] <= hi <= CACHEGEN.decode_Bps * (1 + 1e-12)
    assert b["reload_s"][0] <= b["nominal"]["reload_s"] <= b["reload_s"][1]


def test_compressed_kv_dtypes_shrink_the_bytes_by_their_size():
    b200 = CAT.gpus["b200"]  # NVFP4 KV needs FP4 tensor cores
    plain = compare(M, b200, T, 32768)
    for dt in ("nvfp4", "int4", "fp8"):
        r = compare(M, b200, T, 32768, kv_dtype=dt)
        assert r["kv_bytes"] == pytest.approx(plain["kv_bytes"] * DTYPE_BYTES[dt] / 2, rel=1e-12)


def test_nvfp4_kv_on_a_gpu_without_fp4_tensor_cores_is_one_line(capsys):
    assert main(["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "rdma",
                 "--tokens", "4096", "--kv-dtype", "nvfp4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs FP4 tensor cores" in err[0] and "h100-sxm" in err[0]


@pytest.mark.parametrize("argv, words", [
    (["--codec", "cachegen", "--kv-dtype", "fp8"], "encodes 16-bit KV"),
    (["--codec", "cachegen", "--tier", "hbm"], "moves nothing to decode"),
    (["--codec", "zstd"], "unknown KV codec 'zstd'"),
])
def test_a_codec_the_scenario_cannot_use_is_one_line(capsys, argv, words):
    base = ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tokens", "4096"]
    if "--tier" not in argv:
        base += ["--tier", "rdma"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_a_load_shares_the_encoded_bytes():
    # the hop a load shares carries 1/ratio of the bytes, so it is busy 1/ratio as long: a
    # load the plain path saturates fits once encoded (the review found the uncoded time used)
    from kvmath.tiers.build import pool_tier
    from kvmath.tables.rows import pools
    lustre = pools()["lustre-gcp"]
    tier = pool_tier(lustre, lustre.gpu_nodes)
    qwen, h200 = CAT.models["qwen3-235b-a22b"], CAT.gpus["h200"]
    from kvmath.evaluate.api import ScenarioError
    with pytest.raises(ScenarioError, match="saturates"):
        compare(qwen, h200, tier, 16000, resume_rate=2)
    coded = compare(qwen, h200, tier, 16000, resume_rate=2, codec=CACHEGEN)
    alone = compare(qwen, h200, tier, 16000, resume_rate=1e-6, codec=CACHEGEN)
    assert 1 < coded["concurrent_reloads"] < 2 and alone["concurrent_reloads"] == pytest.approx(1)
    nvme = CAT.tiers["nvme"]
    plain = compare(M, G, nvme, 32000, resume_rate=4)["concurrent_reloads"]
    assert compare(M, G, nvme, 32000, resume_rate=4, codec=CACHEGEN)["concurrent_reloads"] < plain


def test_a_load_shares_the_gpus_decoder_too():
    # decoding is each replica's own GPU work (the review found it never shared): the per-GPU
    # server is the link and the decoder, so a load the decoder cannot keep up with is refused
    # (Mistral-7B, 25,000 tokens from a remote DRAM pool: about 34 resumes/s fit at the node)
    from kvmath.evaluate.api import ScenarioError
    m, t = CAT.models["mistral-7b"], CAT.tiers["rdma"]
    with pytest.raises(ScenarioError, match="decoder"):
        compare(m, G, t, 25000, resume_rate=150, codec=CACHEGEN)
    low = compare(m, G, t, 25000, resume_rate=1, codec=CACHEGEN)
    high = compare(m, G, t, 25000, resume_rate=30, codec=CACHEGEN)
    assert high["gpu_reloads"] > low["gpu_reloads"] >= 1
    # the decode each reload sees is its share of the decoder
    assert high["codec_decode_s"] == pytest.approx(low["codec_decode_s"] / low["gpu_reloads"]
                                                   * high["gpu_reloads"], rel=1e-12)
    assert high["reload_s"] > low["reload_s"]


def test_the_minimum_bandwidth_with_a_codec_is_a_path_rate_it_can_reach():
    # in decoded bytes a codec never exceeds its decode rate: the minimum is the path rate
    # that gives the break-even once decoded, or none
    r = compare(M, G, T, 32000, codec=CACHEGEN)
    assert r["min_reload_bandwidth_Bps"] == float("inf")
    slow = replace(CACHEGEN, decode_Bps=1e12)
    r = compare(M, G, T, 32000, codec=slow)
    plain = compare(M, G, T, 32000)["min_reload_bandwidth_Bps"]
    # pipelined: decoded rate = ratio x path rate below the decode rate
    assert r["min_reload_bandwidth_Bps"] == pytest.approx(plain / slow.compression_ratio, rel=1e-9)


def test_int4s_scale_is_shared_by_one_head_of_the_models_own_width():
    # LMDeploy's INT4 keeps a 16-bit scale and zero point per token and KV head: a 64-wide head
    # (gpt-oss) pays twice the share a 128-wide one does; an MLA latent counts as one head
    for name, width in (("llama-3.1-8b", 128), ("gpt-oss-120b", 64), ("deepseek-v3", 512 + 64)):
        m = CAT.models[name]
        plain = compare(m, CAT.gpus["h200"], T, 8192, kv_dtype="bf16")
        r = compare(m, CAT.gpus["h200"], T, 8192, kv_dtype="int4")
        assert r["kv_bytes_per_token"] == pytest.approx(
            plain["kv_bytes_per_token"] * (0.5 + 32 / 8 / width) / 2, rel=1e-12), name


def test_reuse_stores_and_moves_the_encoded_bytes(capsys):
    """reuse --codec (issue 22 item 3): the tier holds 1/ratio of the KV (what the capacity and
    the writes are priced on) and the reload is compare's with the codec."""
    import json
    from kvmath.book import reuse, pauses
    cat = bundled()
    m, g, t = cat.models["mistral-7b"], cat.gpus["h100-sxm"], cat.tiers["rdma"]
    c = codecs()["cachegen"]
    plain = reuse(m, g, t, 25000, pauses()["conversation-fitted"])
    coded = reuse(m, g, t, 25000, pauses()["conversation-fitted"], codec=c)
    assert coded["kv_bytes"] == pytest.approx(plain["kv_bytes"] / c.compression_ratio, rel=1e-12)
    assert coded["reload_s"] == pytest.approx(compare(m, g, t, 25000, codec=c)["reload_s"], rel=1e-12)
    assert coded["codec"] == "cachegen" and plain["codec"] is None
    # cheaper to hold: the break-even return probability falls
    assert coded["p_breakeven"] < plain["p_breakeven"]
    argv = ["reuse", "--model", "mistral-7b", "--gpu", "h100-sxm", "--tier", "rdma", "--tokens",
            "25000", "--codec", "cachegen"]
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes"] == pytest.approx(coded["kv_bytes"])
    # the node plan stores caches uncoded: refused together, in words
    assert main(argv + ["--resume-rate", "1"]) == 2
    assert "--codec with --resume-rate" in capsys.readouterr().err
