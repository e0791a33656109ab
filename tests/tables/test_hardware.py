"""Blackwell and beyond (issue 22, item 4): the GB200/GB300 trays, NVFP4 compute, Grace memory,
peer HBM and CXL as tiers, and projection rows that no command uses unasked."""
import json

import pytest

from kvmath.tables.rows import fitted_parameters

from kvmath.cli.main import main
from kvmath.evaluate.api import compare
from kvmath.evaluate.prefill import prefill_time
from kvmath.tables.rows import (DataError, Link, Measurement, Node, TierRow, bundled, data_path,
                                projections_allowed, read, resolve_gpu, resolve_model,
                                resolve_node, resolve_tier, row_location)
from kvmath.tiers.build import tiers_of

from conftest import bundled_rows, write_csv


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code, out, err):
    return code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


def _hop(r, link):
    return next(h for h in r["path"] if h["link"] == link)


LLAMA8_KV = 2 * 32 * 8 * 128 * 2  # K and V x layers x KV heads x head_dim x 2 B
TOKENS = 8192


# ---------------------------------------------------------------- the new tiers, by hand
def test_grace_memory_over_c2c_is_shared_by_the_trays_four_gpus():
    """Llama-3.1-8B at TP 1 on a GB200 tray, every replica reloading: the tray's two Graces
    (2 x 512 GB/s at the 342/512 STREAM fraction = 684 GB/s) carry all four GPUs' caches, so
    each GPU gets 171 GB/s, just under its own NVLink-C2C share (225 GB/s at GH200's measured
    346/450 = 173 GB/s)."""
    node = resolve_node("gb200-nvl72-tray")
    gpu = resolve_gpu(node.gpu)
    r = compare(resolve_model("llama-3.1-8b"), gpu, resolve_tier("grace-c2c"), TOKENS, tp=1,
                engine="ideal")
    kv = LLAMA8_KV * TOKENS
    assert r["kv_bytes_per_gpu"] == kv and r["concurrent_reloads"] == 4
    grace, c2c = _hop(r, "grace-lpddr5x-gb200-tray"), _hop(r, "nvlink-c2c-gb200")
    assert grace["bytes"] == 4 * kv and c2c["bytes"] == kv
    assert grace["effective_Bps"] == pytest.approx(1024e9 * 342 / 512)
    assert c2c["effective_Bps"] == pytest.approx(225e9 * 346 / 450)
    assert r["reload_bandwidth_Bps"] == pytest.approx(1024e9 * 342 / 512 / 4)
    # the same path as the GB200's host-dram tier: the named tier only refuses other GPUs
    same = compare(resolve_model("llama-3.1-8b"), gpu, resolve_tier("host-dram"), TOKENS, tp=1,
                   engine="ideal")
    assert same["reload_s"] == r["reload_s"]


def test_peer_hbm_over_nvlink5_is_each_gpus_own_link():
    """From a peer B200's HBM: only the loading GPU's NVLink 5 (900 GB/s a direction at NVLink
    4's measured 376.65/450), not shared with the node's other reloads."""
    r = compare(resolve_model("llama-3.1-8b"), resolve_gpu("b200"),
                resolve_tier("peer-hbm-nvlink5"), TOKENS, tp=1, engine="ideal")
    hop = _hop(r, "nvlink5-peer")
    assert hop["scope"] == "per-gpu" and hop["bytes"] == LLAMA8_KV * TOKENS
    assert hop["effective_Bps"] == pytest.approx(900e9 * 376.65 / 450)
    assert r["reload_bandwidth_Bps"] == pytest.approx(900e9 * 376.65 / 450)
    assert hop["time_s"] == pytest.approx(LLAMA8_KV * TOKENS / (900e9 * 376.65 / 450))


def test_cxl_modules_are_shared_then_the_gpus_host_link():
    """Four CZ120 modules (4 x 31.5 GB/s at the PCIe Gen5 fraction 54.8/63 = 109.6 GB/s) serve an
    8-GPU H100 node's eight replicas: 13.7 GB/s each, below each GPU's own PCIe link."""
    r = compare(resolve_model("llama-3.1-8b"), resolve_gpu("h100-sxm"), resolve_tier("cxl"),
                TOKENS, tp=1, engine="ideal")
    cxl, pcie = _hop(r, "cxl-cz120-gen5-x8"), _hop(r, "pcie-gen5-x16")
    assert cxl["count"] == 4 and cxl["bytes"] == 8 * LLAMA8_KV * TOKENS
    assert cxl["effective_Bps"] == pytest.approx(4 * 31.5e9 * 54.8 / 63.0)
    assert pcie["bytes"] == LLAMA8_KV * TOKENS
    assert r["reload_bandwidth_Bps"] == pytest.approx(4 * 31.5e9 * 54.8 / 63.0 / 8)
    assert not any(h["link"].startswith("host-dram") for h in r["path"])  # no bounce


def test_a_tier_of_one_gpu_family_is_refused_elsewhere(capsys):
    for gpu, tier in (("h100-sxm", "grace-c2c"), ("gb200", "cxl"), ("h100-sxm", "peer-hbm-nvlink5"),
                      ("l40s", "peer-hbm-nvlink4")):
        code, out, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--gpu", gpu,
                             "--tier", tier, "--tokens", "4096")
        assert one_line(code, out, err), (gpu, tier, err)
        assert f"tier {tier} exists only on" in err and "field 'gpus'" in err


def test_tiers_and_compare_take_a_gb200_tray(capsys):
    code, out, err = run(capsys, "tiers", "--gpu", "gb200", "--model", "llama-3.1-70b",
                         "--tokens", "16000", "--resume-rate", "2", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["node"] == "gb200-nvl72-tray" and plan["gpus"] == 4
    host = next(t for t in plan["tiers"] if t["tier"] == "host-dram")
    assert host["capacity_bytes"] == 960e9  # the tray's two Graces, 480 GB each
    code, out, err = run(capsys, "compare", "--node", "gb200-nvl72-tray", "--model",
                         "llama-3.1-70b", "--tier", "grace-c2c", "--tokens", "16000", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["gpu"] == "gb200" and {h["link"] for h in r["path"]} == {
        "grace-lpddr5x-gb200-tray", "nvlink-c2c-gb200"}


# ---------------------------------------------------------------- NVFP4 compute
def test_nvfp4_compute_where_the_gpu_has_fp4(capsys):
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-70b", "--gpu", "b200", "--tier",
                         "host-dram", "--tokens", "8192", "--compute-dtype", "nvfp4", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["compute_dtype"] == "nvfp4" and r["weight_dtype"] == "nvfp4"  # NVFP4 GEMMs read NVFP4 weights


@pytest.mark.parametrize("argv", [
    ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
     "--tokens", "4096", "--compute-dtype", "nvfp4"],
    ["compare", "--model", "llama-3.1-8b", "--gpu", "mi355x", "--tier", "host-dram",
     "--tokens", "4096", "--compute-dtype", "nvfp4"],
    ["tiers", "--node", "dgx-h100", "--model", "llama-3.1-8b", "--tokens", "4096",
     "--resume-rate", "1", "--compute-dtype", "nvfp4"],
    ["reuse", "--model", "llama-3.1-8b", "--gpu", "a100-sxm", "--tier", "host-dram",
     "--tokens", "4096", "--compute-dtype", "nvfp4"],
])
def test_a_dtype_the_gpu_cannot_compute_in_names_its_row_and_field(capsys, argv):
    code, out, err = run(capsys, *argv)
    gpu = argv[argv.index("--gpu") + 1] if "--gpu" in argv else "h100-sxm"
    path, row = row_location("gpus", gpu)
    assert one_line(code, out, err), err
    assert f"{path}, row {row}, field 'fp4_dense_flops'" in err and "nvfp4" in err


def test_a_gemm_runs_at_its_own_dtypes_measured_efficiency():
    """Issue 34: a GPU with measured GEMM tables in a dtype runs its GEMMs on that dtype's own
    fitted curve (prefill_fit.csv eta_g.nvfp4, eta_g.fp8), not the BF16 curve scaled by the
    matmul-ceiling ratio: on B200 an NVFP4 GEMM beats a BF16 one by far less than the 4x its peak
    promises (aiconfigurator's vLLM tables: about 0.39 of the FP4 peak against 0.73 of BF16's)."""
    from kvmath.evaluate.prefill import calibrated_values
    m, g = resolve_model("llama-3.1-70b"), resolve_gpu("b200")
    bf16 = prefill_time(m, g, 32768.0, tp=2, compute_dtype="bf16")
    fp4 = prefill_time(m, g, 32768.0, tp=2, compute_dtype="nvfp4")
    assert g.fp4_dense_flops == 4 * g.bf16_dense_flops
    fit = fitted_parameters()["b200"]
    measured = fit["eta_g"] * g.bf16_dense_flops / (fit["eta_g.nvfp4"] * g.fp4_dense_flops)
    assert fp4["gemm_s"] / bf16["gemm_s"] == pytest.approx(measured, rel=0.05)
    assert 0.25 < fp4["gemm_s"] / bf16["gemm_s"] < 0.6
    # BF16 tensor cores either way (the per-layer kernel cost is the GEMM dtype's t_kern)
    assert fp4["attention_s"] == pytest.approx(bf16["attention_s"], rel=1e-2)
    cv = calibrated_values(m, g, tp=2, compute_dtype="nvfp4")
    assert cv["eta_g"] == fit["eta_g.nvfp4"] and cv["r_dt"] == 1.0
    # a GPU no one measured keeps the ratio rule, an assumption (efficiencies.csv)
    e = bundled().efficiencies
    assert e[("b200", "prefill-nvfp4")].kind == "assumption"
    h20 = calibrated_values(m, resolve_gpu("h20"), tp=2, compute_dtype="fp8")
    assert h20["r_dt"] != 1.0


# ---------------------------------------------------------------- projections
def test_a_projection_is_refused_unless_asked_for(capsys):
    path, row = row_location("gpus", "rubin")
    argv = ["compare", "--model", "llama-3.1-70b", "--gpu", "rubin", "--tier", "host-dram",
            "--tokens", "8192"]
    code, out, err = run(capsys, *argv)
    assert one_line(code, out, err) and f"{path}, row {row}, field 'kind'" in err
    assert "--allow-projection" in err
    code, out, err = run(capsys, *argv, "--allow-projection", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert "GPU rubin (gpus.csv)" in r["projections"]
    assert "link nvlink-c2c-vera-rubin (links.csv)" in r["projections"]
    code, out, err = run(capsys, *argv, "--allow-projection")
    assert code == 0 and "projection: this answer uses GPU rubin" in out
    # a measured part's answer names none
    code, out, _ = run(capsys, "compare", "--model", "llama-3.1-70b", "--gpu", "b200", "--tier",
                       "host-dram", "--tokens", "8192", "--json")
    assert code == 0 and "projections" not in json.loads(out)


def test_a_projection_link_in_a_tier_is_refused(capsys):
    path, row = row_location("links", "cxl-gen6-x8")
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                         "--tier", "cxl-gen6", "--tokens", "4096")
    assert one_line(code, out, err) and f"{path}, row {row}, field 'kind'" in err


def test_the_scenario_file_may_allow_projections_and_the_policy_ends_with_the_command(capsys, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('model = "llama-3.1-8b"\ngpu = "rubin"\ntier = "peer-hbm-nvlink6"\n'
                        'tokens = 4096\nallow_projection = true\n')
    code, out, err = run(capsys, "compare", "--scenario", str(scenario), "--json")
    assert code == 0, err
    assert "link nvlink6-peer (links.csv)" in json.loads(out)["projections"]
    with pytest.raises(DataError, match="projection"):  # the library refuses again afterwards
        resolve_gpu("rubin")
    with projections_allowed() as used:  # a what-if in the book asks for them
        assert resolve_gpu("rubin").name == "rubin"
    assert "GPU rubin (gpus.csv)" in used


def test_a_users_projection_node_is_refused_naming_its_file(capsys, tmp_path):
    header, rows = bundled_rows("nodes.csv")
    base = next(r for r in rows if r["name"] == "gb200-nvl72-tray")
    node = write_csv(tmp_path / "vr.csv", header, [dict(base, name="vr-tray", gpu="rubin",
                                                        kind="projection")])
    argv = ["tiers", "--node", str(node), "--model", "llama-3.1-8b", "--tokens", "4096",
            "--resume-rate", "1", "--gpu-price", "10"]
    code, out, err = run(capsys, *argv)
    assert one_line(code, out, err) and f"{node}, row 1, field 'kind'" in err
    code, out, err = run(capsys, *argv, "--allow-projection")
    assert code == 0, err
    assert "node vr-tray (vr.csv)" in out and "GPU rubin (gpus.csv)" in out
    # a row that claims to be measured while resting on a projection is malformed
    bad = write_csv(tmp_path / "bad.csv", header, [dict(base, name="vr-tray", gpu="rubin")])
    code, out, err = run(capsys, "tiers", "--node", str(bad), "--model", "llama-3.1-8b",
                         "--tokens", "4096", "--resume-rate", "1", "--allow-projection")
    assert one_line(code, out, err) and f"{bad}, row 1, field 'kind'" in err
    assert "expected projection" in err


# ---------------------------------------------------------------- malformed rows
def test_malformed_tier_and_link_rows_name_file_row_and_field(tmp_path):
    header, rows = bundled_rows("tiers.csv")
    cxl = [r for r in rows if r["tier"] == "cxl"]
    path = write_csv(tmp_path / "t.csv", header, [dict(cxl[0], gpus="h100-sxm;tpu-v9"), cxl[1]])
    with pytest.raises(DataError, match="unknown GPU 'tpu-v9'") as info:
        read(TierRow, path)
    assert (info.value.row, info.value.field) == (1, "gpus")
    path = write_csv(tmp_path / "t.csv", header, [cxl[0], dict(cxl[1], gpus="b200")])
    with pytest.raises(DataError, match="expected the same or empty") as info:
        tiers_of(read(TierRow, path), path)
    assert (info.value.row, info.value.field) == (2, "gpus")
    header, rows = bundled_rows("links.csv")
    link = next(r for r in rows if r["name"] == "cxl-cz120-gen5-x8")
    for change, field in ((dict(bandwidth_Bps="-36e9"), "bandwidth_Bps"),
                          (dict(kind="rumour"), "kind"), (dict(scope="per-rack"), "scope")):
        with pytest.raises(DataError) as info:
            read(Link, write_csv(tmp_path / "l.csv", header, [dict(link, **change)]))
        assert (info.value.row, info.value.field) == (1, field)
        assert str(info.value).count("\n") == 0


def test_a_measurement_of_an_announced_part_is_refused(tmp_path):
    header, rows = bundled_rows("validation.csv")
    row = next(r for r in rows if r["gpu"] == "b200")
    with pytest.raises(DataError, match="projection") as info:
        read(Measurement, write_csv(tmp_path / "v.csv", header, [dict(row, gpu="rubin")]))
    assert info.value.field == "gpu"


def test_every_projection_row_is_labelled_and_sourced():
    from kvmath.tables.schema import table
    for name in ("gpus", "links", "nodes", "drives"):
        for r in table(name).values():
            if r.kind == "projection":
                assert r.source and r.source_location and "PROJECTION" in r.notes, r.name
    assert table("gpus")["rubin"].kind == "projection"
    assert str(data_path("gpus.csv")).endswith("gpus.csv")
    node = table("nodes")["gb200-nvl72-tray"]
    assert isinstance(node, Node) and node.gpus == 4 and node.nvme_drives == 4


def test_list_marks_projections_and_one_family_tiers(capsys):
    code, out, _ = run(capsys, "list")
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert code == 0 and "(projection: --allow-projection)" in lines["rubin"]
    assert "[on gb200, gb300]" in lines["grace-c2c"]
    assert "(projection" in lines["cxl-gen6"] and "(projection" not in lines["cxl"]
    assert "(projection" not in lines["b200"]
