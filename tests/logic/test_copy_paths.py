"""Copies as engines issue them (copy_paths.csv, kvmath.logic.rules.copy_path,
kvmath.logic.path.copy_rate): the path an engine's code takes for a load's copies, each path's
measured cost per copy and rate, physics (a bigger copy is never slower per byte through the same
path; nothing beats the link), the committed figures are the fit's, and compare says which path
ran and why a kernel engine fell back."""
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from kvmath import bundled, compare
from kvmath.cli.compare import copy_note
from kvmath.evaluate.copy_fit import CLIFF_BYTES, LINK, fit
from kvmath.logic.path import copy_rate
from kvmath.logic.rules import copy_path
from kvmath.tables.rows import copy_paths, engines

CAT = bundled()
ENG = engines()
ENDS = ("nominal", "fast", "slow")
LINKS = sorted(copy_paths())


@settings(max_examples=200, deadline=None)
@given(link=st.sampled_from(LINKS), path=st.sampled_from(["kernel", "batched", "driver"]),
       end=st.sampled_from(ENDS), small=st.floats(64, 2e7), grow=st.floats(1.0, 1e3))
def test_a_bigger_copy_is_never_slower_per_byte_through_the_same_path(link, path, end, small,
                                                                         grow):
    """Through the same path and end of its spread, time per byte never grows with the copy
    size (across the small-page class's edge too), and no copy beats the link's spec rate."""
    lk = CAT.links[link]
    big = small * grow
    r_small = copy_rate(lk, path, small, end)
    r_big = copy_rate(lk, path, big, end)
    assert r_big >= r_small * (1 - 1e-12)
    assert r_big <= lk.bandwidth_Bps


@pytest.mark.parametrize("link", LINKS)
def test_the_band_brackets_the_nominal(link):
    """The fast end is never slower than the nominal, the slow end never faster."""
    lk = CAT.links[link]
    for path in ("kernel", "batched"):
        for s in (4096.0, 16384.0, CLIFF_BYTES - 1.0, CLIFF_BYTES, 65536.0, 2e6):
            fast, nom, slow = (copy_rate(lk, path, s, e) for e in ("fast", "nominal", "slow"))
            assert fast >= nom >= slow > 0


def test_committed_copy_figures_are_the_fit():
    """copy_paths.csv holds what scripts/fit_copy_paths.py computes (4 significant figures)."""
    f = fit()
    rows = copy_paths()[LINK]
    small, large = rows["batched h2d"]
    kernel = rows["kernel h2d"][0]
    for row, part in ((small, "small"), (large, "large"), (kernel, "kernel")):
        for k, v in f[part].items():
            if k != "worst":
                assert getattr(row, k) == pytest.approx(v, rel=1e-3), (part, k)
    assert f["small"]["worst"] < 1.1 and f["large"]["worst"] < 1.1


def test_the_engines_gates_as_its_code_states_them():
    """vllm-lbhnc (v0.29.0 to v0.34.0): its copy kernel for copies under 28 KiB on CUDA, one
    batched driver call from 28 KiB, driver copies one by one on ROCm (no kernel, no batched
    call there); an engine without batching copies one by one; an engine with no copy size runs
    at the link's asymptote."""
    lb = ENG["vllm-lbhnc"]
    assert copy_path(lb, 16384.0, "cuda") == ["kernel", ""]
    assert copy_path(lb, 32768.0, "cuda") == ["batched", ""]
    path, why = copy_path(lb, 16384.0, "rocm")
    assert path == "driver" and "rocm" in why
    assert copy_path(ENG["vllm-cross-layer-v0.19"], 2e6, "cuda") == ["driver", ""]
    assert copy_path(ENG["sglang-hicache"], None, "cuda") == ["asymptote", ""]
    assert "v0.34.0" in lb.version


def test_halving_the_bytes_never_makes_a_reload_seven_times_faster():
    """The issue's case: Llama-3.1-8B on H100 from host DRAM at 32K tokens, one reload, TP 1, 2
    and 4: 64 KiB pages by the batched call, 32 KiB by the batched call, 16 KiB by the kernel.
    Each halving of the bytes per GPU at most halves the load (no cliff that runs the wrong way),
    and the per-GPU rates sit within 25 % of each other."""
    m, g, t = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"]
    r = {tp: compare(m, g, t, 32768, tp=tp, concurrent_reloads=1) for tp in (1, 2, 4)}
    assert [r[tp]["copy_path"] for tp in (1, 2, 4)] == ["batched", "batched", "kernel"]
    for a, b in ((1, 2), (2, 4)):
        load_a = r[a]["kv_bytes_per_gpu"] / r[a]["reload_bandwidth_Bps"]
        load_b = r[b]["kv_bytes_per_gpu"] / r[b]["reload_bandwidth_Bps"]
        assert load_b >= load_a / 2 * 0.999
    rates = [r[tp]["reload_bandwidth_Bps"] for tp in (1, 2, 4)]
    assert max(rates) / min(rates) < 1.25


def test_compare_notes_the_path_and_a_fallback():
    m, t = CAT.models["llama-3.1-8b"], CAT.tiers["host-dram"]
    amd = compare(m, CAT.gpus["mi300x"], t, 32768, tp=4, concurrent_reloads=1)
    assert amd["copy_path"] == "driver" and "CUDA only" in amd["copy_path_fallback"]
    assert "falls back from its copy kernel" in copy_note(amd)
    kernel = compare(m, CAT.gpus["h100-sxm"], t, 32768, tp=4, concurrent_reloads=1)
    assert kernel["copy_path_fallback"] == "" and "assumption" in copy_note(kernel)
    plain = compare(m, CAT.gpus["h100-sxm"], t, 32768, tp=4, concurrent_reloads=1,
                    engine="sglang-hicache")
    assert copy_note(plain) == ""


def test_the_band_covers_a_kernel_loads_evidence():
    """A load by vLLM's copy kernel (no published absolute rate) carries its assumed rate's band:
    the slow end runs the kernel at the evidence's low end, the fast end at its high end."""
    from kvmath.evaluate.bands import band
    m, g, t = CAT.models["llama-3.1-8b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"]
    b = band(m, g, t, 32768, tp=4, concurrent_reloads=1)
    n = b["nominal"]
    assert b["reload_bandwidth_Bps"][0] < n["reload_bandwidth_Bps"] < b["reload_bandwidth_Bps"][1]
    slow = compare(m, g, t, 32768, tp=4, concurrent_reloads=1,
                   engine=replace(ENG["vllm-lbhnc"], copy_end="slow"))
    assert slow["reload_bandwidth_Bps"] < 0.5 * n["reload_bandwidth_Bps"]


def test_engines_as_they_ship():
    """Issue 34 item 6: SGLang's MLA host dedup is a what-if of unreleased code, stored and read
    once per node; Dynamo's KVBM 1.6.1 is a vLLM connector (KVCR found nowhere); every vLLM
    profile names its versions and the copy path of each."""
    eng = engines()
    dedup = eng["sglang-hicache-mla-dedup"]
    assert "NOT IN ANY SGLang RELEASE" in dedup.version and dedup.kind == "assumption"
    assert "page_first_direct" in dedup.notes and "attention-TP > 1" in dedup.notes
    kvbm = eng["dynamo-kvbm-vllm"]
    assert "kvbm 1.6.1" in kvbm.version and "KVCR" in kvbm.notes and kvbm.kernels == "vllm"
    m, g, t = CAT.models["deepseek-v3"], CAT.gpus["h200"], CAT.tiers["host-dram"]
    plain = compare(m, g, t, 32768, engine="sglang-hicache")
    once = compare(m, g, t, 32768, engine="sglang-hicache-mla-dedup")
    assert once["kv_bytes_stored"] == pytest.approx(plain["kv_bytes_stored"] / plain["tp"])
    assert eng["vllm-cross-layer-v0.19"].copy_batched is False
    assert eng["vllm-per-layer"].kernel_below_bytes == 28672
