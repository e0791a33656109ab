"""Every data-validation error names the file, the row and the field."""
import pytest

from kvmath import DataError, bundled, resolve_gpu, resolve_model
from kvmath.logic.rules import dense_flops
from kvmath.tables.schema import resource, table
from kvmath.tables.rows import (DTYPE_BYTES, Link, Model, TierRow, VidurMlp, data_path,
                                efficiencies_of, read)
from kvmath.tiers.build import tiers_of

KINDS = set(next(f for f in resource("gpus")["schema"]["fields"] if f["name"] == "kind")["constraints"]["enum"])

from conftest import bundled_rows, write_csv


def test_bundled_catalogue_complete():
    cat = bundled()
    assert set(cat.gpus) >= {"a100-sxm", "h100-sxm", "h100-pcie", "h200", "b200", "gb200",
                             "l40s", "mi300x"}
    assert set(cat.tiers) >= {"host-dram", "nvme", "rdma"}
    assert set(cat.models) >= {"llama-2-7b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                               "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b",
                               "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                               "deepseek-v3", "gpt-oss-120b"}
    links = {"pcie-gen4-x16", "pcie-gen5-x16", "pcie-gen6-x16", "nvlink-c2c-gh200",
             "host-dram-ddr5-4800-2s", "nvme-gen4-x4-drive", "nvme-gen5-x4-drive", "nic-400g"}
    assert set(cat.links) >= links


def test_one_drive_one_figure():
    """A bundled node's drive link reads at its drive's rated read, and a drive link whose name
    says a PCIe generation matches the drive's: the compare tiers and the tier plan price the
    same drive (they once read a Micron 9400 at 7.0 GB/s and a 7450 PRO at 6.8 GB/s)."""
    cat, drives = bundled(), table("drives")
    for node in table("nodes").values():
        link, drive = cat.links[node.nvme_drive_link], drives[node.drive]
        assert link.bandwidth_Bps == drive.read_Bps, node.name
        assert f"gen{drive.pcie_gen}" in link.name, node.name
    for drive in drives.values():  # every drive's generation has a link at or above its read
        assert cat.links[f"nvme-gen{drive.pcie_gen}-x4-drive"].bandwidth_Bps >= drive.read_Bps, drive.name


@pytest.mark.parametrize("name", ["gpus.csv", "links.csv", "models.csv"])
def test_every_row_has_a_source(name):
    header, rows = bundled_rows(name)
    for row in rows:
        assert row["source"].strip() and row["source_location"].strip(), row["name"]
        assert row["kind"] in KINDS
        assert row["retrieved"].strip()


def test_efficiencies_are_fractions_with_provenance():
    for (item, quantity), e in bundled().efficiencies.items():
        assert 0 < e.value <= 1, item
        if e.kind == "measurement":
            assert e.source and e.source_location and e.conditions
        else:
            assert e.conditions, f"assumption for {item} {quantity} must say why"


def test_gpu_peaks_are_dense():
    """Dense BF16 equals half the vendor's with-sparsity headline for NVIDIA parts."""
    g = bundled().gpus
    assert g["h100-sxm"].bf16_dense_flops == 989.4e12
    assert g["a100-sxm"].fp8_dense_flops is None


# ---------------------------------------------------------------- model rows
@pytest.mark.parametrize("overrides,field,message", [
    (dict(layers=""), "layers", "missing value"),
    (dict(layers="-4"), "layers", "an integer from 1 to 10,000 layers"),
    (dict(layers="0"), "layers", "an integer from 1 to 10,000 layers"),
    (dict(hidden_size="4096.5"), "hidden_size", "integer"),
    (dict(hidden_size="big"), "hidden_size", "expected a number"),
    (dict(kv_dtype="int3"), "kv_dtype", "expected one of"),
    (dict(weight_dtype="bf17"), "weight_dtype", "expected one of"),
    (dict(attention="linear"), "attention", "expected one of"),
    (dict(num_key_value_heads="5"), "num_key_value_heads", "divisible"),
    (dict(window_layers="4"), "window", "when window_layers"),
    (dict(window_layers="40", window="128"), "window_layers", "at most layers"),
    (dict(retrieved="yesterday"), "retrieved", "YYYY-MM-DD"),
    (dict(source=""), "source", "missing value"),
    (dict(tie_word_embeddings="maybe"), "tie_word_embeddings", "expected one of"),
    (dict(dense_layers="0"), "moe_intermediate_size", "MoE layers"),
])
def test_model_row_errors(model_file, overrides, field, message):
    path = model_file(**overrides)
    with pytest.raises(DataError, match=message) as info:
        resolve_model(str(path))
    err = info.value
    assert err.path == str(path) and err.row == 1 and err.field == field
    assert str(path) in str(err) and "row 1" in str(err) and field in str(err)


def test_mla_row_needs_latent_fields(model_file):
    with pytest.raises(DataError) as info:
        resolve_model(str(model_file(base="deepseek-v3", kv_lora_rank="")))
    assert info.value.field == "kv_lora_rank"


def test_moe_experts_per_token_bounded(model_file):
    with pytest.raises(DataError) as info:
        resolve_model(str(model_file(base="mixtral-8x7b", experts_per_token="9")))
    assert info.value.field == "experts_per_token"


def test_unknown_unit_in_field_name(model_file, gpu_file):
    with pytest.raises(DataError, match="unknown field") as info:
        resolve_gpu(str(gpu_file(header_rename=("hbm_bandwidth_Bps", "hbm_bandwidth_GBps"))))
    assert info.value.field == "hbm_bandwidth_GBps"


def test_user_model_file_works(model_file):
    m = resolve_model(str(model_file(name="my-8b", layers="16", dense_layers="16")))
    assert m.name == "my-8b" and m.layers == 16


def test_user_gpu_file_needs_efficiency(gpu_file):
    path = gpu_file(name="my-gpu")
    with pytest.raises(DataError, match="prefill efficiency") as info:
        resolve_gpu(str(path))
    assert info.value.field == "prefill_efficiency"
    g = resolve_gpu(str(gpu_file(name="my-gpu", extra=dict(prefill_efficiency=0.5,
                                                            hbm_efficiency=0.9))))
    assert g.prefill_efficiency == 0.5


def test_user_gpu_unknown_host_link(gpu_file):
    with pytest.raises(DataError, match="unknown link") as info:
        resolve_gpu(str(gpu_file(host_link="pcie-gen9-x16")))
    assert info.value.field == "host_link" and info.value.row == 1


def test_user_gpu_efficiency_above_one(gpu_file):
    with pytest.raises(DataError, match=r"\(0, 1\]") as info:
        resolve_gpu(str(gpu_file(extra=dict(prefill_efficiency=1.5))))
    assert info.value.field == "prefill_efficiency"


def test_file_with_two_rows(tmp_path):
    header, rows = bundled_rows("models.csv")
    path = write_csv(tmp_path / "two.csv", header, rows[:2])
    with pytest.raises(DataError, match="exactly one row"):
        resolve_model(str(path))


def test_duplicate_names(tmp_path):
    header, rows = bundled_rows("models.csv")
    path = write_csv(tmp_path / "dup.csv", header, [rows[0], rows[0]])
    with pytest.raises(DataError, match="duplicate") as info:
        read(Model, path)
    assert info.value.row == 2


def test_missing_column_and_unreadable_and_empty(tmp_path):
    header, rows = bundled_rows("models.csv")
    path = write_csv(tmp_path / "m.csv", [h for h in header if h != "vocab_size"],
                     [{k: v for k, v in rows[0].items() if k != "vocab_size"}])
    with pytest.raises(DataError, match="missing column") as info:
        resolve_model(str(path))
    assert info.value.field == "vocab_size"
    with pytest.raises(DataError, match="cannot read"):
        resolve_model(str(tmp_path / "absent.csv"))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="empty file"):
        resolve_model(str(tmp_path / "empty.csv"))
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(DataError):
        resolve_model(str(tmp_path / "binary.csv"))


def test_extra_values_in_row(tmp_path):
    header, rows = bundled_rows("models.csv")
    text = ",".join(header) + "\n" + ",".join(rows[0][h] for h in header).replace("\n", " ")
    (tmp_path / "x.csv").write_text(text.split("\n")[0] + "\n" + "a," * (len(header) + 2) + "\n")
    with pytest.raises(DataError, match="more values") as info:
        resolve_model(str(tmp_path / "x.csv"))
    assert info.value.row == 1


def test_link_errors(tmp_path):
    header, rows = bundled_rows("links.csv")
    bad = dict(rows[0], scope="per-rack")
    with pytest.raises(DataError, match="expected one of") as info:
        read(Link, write_csv(tmp_path / "l.csv", header, [bad]))
    assert info.value.field == "scope"
    bad = dict(rows[0], latency_s="-1")
    with pytest.raises(DataError, match="a number from 0 to 1 s") as info:
        read(Link, write_csv(tmp_path / "l.csv", header, [bad]))
    assert info.value.field == "latency_s"


def test_tier_unknown_hop(tmp_path):
    header, rows = bundled_rows("tiers.csv")
    bad = dict(rows[0], hop="tape-drive")
    with pytest.raises(DataError, match="unknown link") as info:
        tiers_of(read(TierRow, write_csv(tmp_path / "t.csv", header, [bad])))
    assert info.value.field == "hop" and info.value.row == 1


def test_efficiency_errors(tmp_path):
    header, rows = bundled_rows("efficiencies.csv")
    assumption = next(r for r in rows if r["same_as"])
    bad = dict(assumption, same_as="no-such-gpu")
    with pytest.raises(DataError, match="no measured") as info:
        efficiencies_of(write_csv(tmp_path / "e.csv", header, [bad]))
    assert info.value.field == "same_as"
    measured = next(r for r in rows if r["kind"] == "measurement")
    with pytest.raises(DataError) as info:
        efficiencies_of(write_csv(tmp_path / "e.csv", header, [dict(measured, source="")]))
    assert info.value.field == "source"


def test_dtypes_known():
    assert DTYPE_BYTES["bf16"] == 2 and DTYPE_BYTES["fp8"] == 1
    for name in ("weight_dtype", "kv_dtype"):
        field = next(f for f in resource("models")["schema"]["fields"] if f["name"] == name)
        assert set(field["constraints"]["enum"]) == set(DTYPE_BYTES)


def test_every_table_in_the_package_validates():
    """Every bundled CSV is a resource of the data package, and each reads cleanly."""
    import json
    package = json.loads(data_path("datapackage.json").read_text())
    paths = {r["path"] for r in package["resources"]}
    assert {p.name for p in data_path("").glob("*.csv")} <= paths
    for r in package["resources"]:
        assert table(r["name"]), r["name"]
    for path in data_path("vidur").glob("*.csv"):  # one resource, a file per GPU and model
        assert read(VidurMlp, path)


@pytest.mark.parametrize("name", ["gpus", "links", "models", "nodes", "drives", "engines",
                                  "deployments", "prices", "pauses", "thresholds", "plan_defaults"])
def test_sourced_tables_require_their_source_fields(name):
    fields = {f["name"]: f for f in resource(name)["schema"]["fields"]}
    for f in ("kind", "source", "source_location", "retrieved"):
        assert fields[f]["constraints"]["required"], (name, f)


def test_data_ships_inside_package():
    assert data_path("models.csv").is_file()


def test_attention_kind_labels():
    m = bundled().models
    assert m["llama-2-7b"].attention_kind == "MHA"
    assert m["llama-3.1-8b"].attention_kind == "GQA"
    assert m["deepseek-v3"].attention_kind == "MLA"


def test_row_types_do_not_depend_on_import_order():
    """Reading a table first thing still applies its declared rules (FitRow, Measurement)."""
    import subprocess
    import sys
    code = ("from kvmath.tables.schema import table\nt = table('prefill_fit'); v = table('validation')\n"
            "print(type(next(iter(t.values()))).__name__, type(next(iter(v.values()))).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["FitRow", "Measurement"]


def test_rows_pickle():
    import pickle
    for name in ("deployments", "prices", "gpus", "transfer_curves"):
        rows = table(name)
        row = next(iter(rows.values())) if isinstance(rows, dict) else rows[0]
        assert pickle.loads(pickle.dumps(row)) == row


def test_host_memory_is_the_gpus_own_or_does_not_bind():
    """A GB200 reloads from its Grace LPDDR5X; a GPU sold in other x86 hosts reads the DGX H100's
    DDR5 (an assumption) only where its own host links, all busy, bind before that memory does,
    so the assumption cannot move an answer at the default concurrency."""
    cat = bundled()
    assert cat.gpus["gb200"].host_memory_link == "grace-lpddr5x-gb200-tray"
    for g in cat.gpus.values():
        if g.host_memory_link == "host-dram-ddr5-4800-2s" and g.name not in ("h100-sxm", "h200"):
            host, mem = cat.links[g.host_link], cat.links[g.host_memory_link]
            assert g.gpus_per_node * host.bandwidth_Bps * host.efficiency <= \
                mem.bandwidth_Bps * mem.efficiency, g.name


def test_a_measured_efficiency_divides_by_the_peak_it_multiplies():
    """A GPU's measured prefill fraction is over its own gpus.csv peak (and a link's over its
    links.csv bandwidth, where the measurement is of that link), so fraction x peak gives back
    the measurement, not a figure a rounded peak in the source inflates."""
    cat = bundled()
    for (item, quantity), e in cat.efficiencies.items():
        if e.same_as or e.kind != "measurement":
            continue
        if quantity.startswith("prefill"):
            assert e.peak_value == dense_flops(cat.gpus[item], "fp8" if quantity.endswith("fp8") else "bf16"), item
        # measured over four 200G NICs (twice one 400G NIC's peak); on one of a tray's two Graces;
        # over a 3FS storage node's two 200G NICs
        per_unit = {"nic-400g": 2, "grace-lpddr5x-gb200-tray": 0.5, "nic-200g-ib": 2}
        if quantity == "link" and item in cat.links:
            assert e.peak_value == cat.links[item].bandwidth_Bps * per_unit.get(item, 1), item


def test_number_formats_count_their_block_scales():
    # (bits + scale bits / block) / 8, exactly: NVFP4's FP8 scale per 16 (vLLM's page of
    # head_size / 2 + head_size / 16 bytes), MXFP4's 8-bit scale per 32, LMDeploy's INT4 with a
    # 16-bit scale and zero point per 128-element head
    assert DTYPE_BYTES["nvfp4"] == 9 / 16
    assert DTYPE_BYTES["mxfp4"] == 4.25 / 8
    assert DTYPE_BYTES["int4"] == 0.5 + 4 / 128
    assert DTYPE_BYTES["fp32"] == 4 and DTYPE_BYTES["fp16"] == 2


def test_a_format_row_whose_scale_does_not_add_up_is_refused(tmp_path):
    from kvmath.tables.rows import Dtype
    header = [f["name"] for f in resource("dtypes")["schema"]["fields"]]
    row = {k: "" for k in header} | dict(name="x4", description="x", element_bits=4,
                                         scale_bits=0, block_elements=16, block_is_head="false",
                                         needs_fp4_tensor_cores="false", kind="config",
                                         source="s", source_location="l", retrieved="2026-12-01")
    with pytest.raises(DataError) as info:
        read(Dtype, write_csv(tmp_path / "d.csv", header, [row]))
    assert info.value.field == "block_elements" and "d.csv" in str(info.value)


def test_attention_enum_is_the_family_registry():
    """models.csv's attention values are exactly the families of kvmath.derive.attention, and
    the answer path's copy of their rules (kvmath.tables.families) is the registry's."""
    import json
    from kvmath.derive.attention import FAMILIES
    from kvmath.tables.families import FAMILIES as INFO
    from kvmath.tables.schema import data_path
    pkg = json.loads(data_path("datapackage.json").read_text())
    models = next(r for r in pkg["resources"] if r["name"] == "models")
    enum = next(f for f in models["schema"]["fields"] if f["name"] == "attention")["constraints"]["enum"]
    assert sorted(enum) == sorted(FAMILIES)
    assert {n: vars(i) for n, i in INFO.items()} == {n: f.metadata() for n, f in FAMILIES.items()}
