"""A scenario's engine from the engine's own offload settings (issue 19, item 1)."""
import json
import subprocess
import sys

import pytest

from kvmath.scenario.engine_config import read
from kvmath.tables.rows import DataError, engine_settings


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_vllm_offloading_json_with_size_suffixes(tmp_path):
    p = _write(tmp_path, "kv.json", '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both", '
               '"kv_connector_extra_config": {"cpu_bytes_to_use": 80G, "block_size": 256}}')
    cfg = read(p)
    assert cfg.format == "vllm" and cfg.host_cache_bytes_per_engine == 80 * 2 ** 30  # binary G
    assert cfg.disk_tier is False and cfg.not_modelled == ("block_size",)
    p = _write(tmp_path, "kv2.json", '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both",'
               ' "kv_connector_extra_config": {"cpu_bytes_to_use": 80g, "canonical_layout": true,'
               ' "spec_name": "TieringOffloadingSpec", "secondary_tiers": [{"type": "fs", '
               '"root_dir": "/mnt"}]}}')
    cfg = read(p)
    # canonical_layout is read, not modelled: host capacity is still reserved for every rank
    assert cfg.host_cache_bytes_per_engine == 80e9 and cfg.disk_tier
    assert cfg.engine.stored_once == "mla-single-node-cuda" and "canonical_layout" in cfg.not_modelled


def test_a_size_suffix_inside_a_string_is_text(tmp_path):
    # vLLM expands 80G outside strings only: a directory named "kv 80g, x" keeps its name
    p = _write(tmp_path, "kv.json", '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both", '
               '"kv_connector_extra_config": {"cpu_bytes_to_use": 8G, "spec_name": '
               '"TieringOffloadingSpec", "secondary_tiers": [{"type": "fs", "root_dir": '
               '"/mnt/kv 80g, x \\" 5G]"}]}}')
    from kvmath.scenario.engine_config import _expand_sizes
    text = p.read_text()
    assert '"/mnt/kv 80g, x \\" 5G]"' in _expand_sizes(text)
    cfg = read(p)
    assert cfg.host_cache_bytes_per_engine == 8 * 2 ** 30 and cfg.disk_tier


def test_lmcache_yaml_sizes_are_gib_per_worker(tmp_path):
    p = _write(tmp_path, "lm.yaml", "chunk_size: 512\nmax_local_cpu_size: 40\n"
               "local_disk: /mnt/nvme\nmax_local_disk_size: 400\n"
               "extra_config:\n  save_only_first_rank: false\n")
    cfg = read(p)
    assert cfg.engine.name == "lmcache" and cfg.engine.copy_tokens == 512
    assert cfg.host_cache_bytes_per_gpu == 40 * 2 ** 30 and cfg.disk_cache_bytes_per_gpu == 400 * 2 ** 30
    assert cfg.engine.stored_once == cfg.engine.replicated_read_once == "never"
    # defaults from engine_settings.csv: 5 GiB of host memory, no disk tier without both keys
    cfg = read(_write(tmp_path, "lm2.yaml", "local_disk: /mnt/nvme\n"))
    assert cfg.host_cache_bytes_per_gpu == engine_settings()["lmcache-max-local-cpu-size"].value * 2 ** 30
    assert cfg.disk_tier is False and cfg.engine.copy_tokens == 256


def test_sglang_flags_pick_the_profile_and_page_size(tmp_path):
    cfg = read(_write(tmp_path, "sg.txt", "--enable-hierarchical-cache --hicache-size 64 "
                      "--hicache-mem-layout page_first_direct --page-size 32 --tp 8\n"))
    assert cfg.engine.name == "sglang-hicache-direct" and cfg.engine.copy_tokens == 32
    assert cfg.host_cache_bytes_per_gpu == 64e9 and cfg.not_modelled == ("--tp",)
    cfg = read(_write(tmp_path, "sg2.txt", "--enable-hicache --hicache-storage-backend file"))
    assert cfg.engine.name == "sglang-hicache" and cfg.host_cache_hbm_ratio == 2.0 and cfg.disk_tier


@pytest.mark.parametrize("text, words", [
    ('{"kv_connector": "NixlConnector", "kv_role": "kv_both"}', "no kvmath engine profile"),
    ('{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}', "cpu_bytes_to_use"),
    ('{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": '
     '{"cpu_bytes_to_use": -1}}', "field 'cpu_bytes_to_use': expected a number of at least 1"),
    ('{"kv_connector": "OffloadingConnector", "kv_bufer_size": 1}', "field 'kv_bufer_size'"),
    ('{"kv_connector": ', "not readable JSON"),
    ("chunk_size: many\n", "field 'chunk_size': expected a whole number"),
    ("max_local_cpu_size: .nan\n", "field 'max_local_cpu_size'"),
    ("--hicache-size 10\n", "--enable-hierarchical-cache"),
    ("--enable-hicache --hicache-io-backend magic\n", "expected one of direct, kernel"),
    ("--enable-hicache --page-size 0\n", "field '--page-size'"),
    ("just words\n", "not an engine's offload settings"),
])
def test_bad_settings_name_the_file_and_the_setting(tmp_path, text, words):
    p = _write(tmp_path, "bad.cfg", text)
    with pytest.raises(DataError) as info:
        read(p)
    assert str(p) in str(info.value) and words in str(info.value), str(info.value)


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "kvmath", *argv], capture_output=True, text=True)


def test_every_command_takes_the_engines_settings(tmp_path):
    """compare, reuse, tiers and trace read the same file: the same profile, and the plan's
    host tier is the engine's 40 GiB per GPU, not the node's 2 TiB."""
    p = _write(tmp_path, "lm.yaml", "max_local_cpu_size: 40\n")
    base = ["--model", "llama-3.1-70b", "--engine-config", str(p), "--json"]
    out = {}
    for cmd in (["compare", "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "32768"],
                ["reuse", "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "32768"],
                ["tiers", "--tokens", "32768", "--resume-rate", "1"],
                ["trace", "conversation"]):
        r = _cli(*cmd, *base)
        assert r.returncode == 0, r.stderr
        out[cmd[0]] = json.loads(r.stdout)
        assert out[cmd[0]]["engine_config"]["engine"] == "lmcache"
    dram = next(t for t in out["tiers"]["tiers"] if t["tier"] == "host-dram")
    assert dram["capacity_bytes"] == 8 * 40 * 2 ** 30
    assert next(t for t in out["trace"]["tiers"] if t["tier"] == "host-dram")[
        "capacity_bytes"] == 8 * 40 * 2 ** 30
    assert not any(t["tier"] == "nvme" for t in out["tiers"]["tiers"])  # no disk tier set
    r = _cli("compare", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens", "32768", *base)
    assert r.returncode == 2 and "configure no disk tier" in r.stderr
    r = _cli("compare", "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "32768",
             "--engine", "lmcache", *base)
    assert r.returncode == 2 and "give one" in r.stderr


def test_a_host_cache_beyond_the_node_is_refused(tmp_path):
    p = _write(tmp_path, "kv.json", '{"kv_connector": "OffloadingConnector", '
               '"kv_connector_extra_config": {"cpu_bytes_to_use": 5T}}')
    r = _cli("tiers", "--model", "llama-3.1-70b", "--tokens", "32768", "--resume-rate", "1",
             "--engine-config", str(p))
    assert r.returncode == 2 and "field 'cpu_bytes_to_use'" in r.stderr and "exceeds node dgx-h100's DRAM" in r.stderr, r.stderr


def test_sizes_per_engine_and_per_storing_rank(tmp_path):
    """After review: vLLM's cpu_bytes_to_use is one engine's (a replica of TP ranks), so a node
    of 8 GPUs at TP 1 holds eight of them; LMCache's per-worker size counts only rank 0 of each
    engine for an MLA model (save_only_first_rank's default)."""
    import argparse
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.tables.rows import bundled, nodes
    node, cat = nodes()["dgx-h200"], bundled()
    none = argparse.Namespace(host_cache_bytes=None, disk_cache_bytes=None)
    v = read(_write(tmp_path, "kv.json", '{"kv_connector": "OffloadingConnector", '
                    '"kv_connector_extra_config": {"cpu_bytes_to_use": 8G}}'))
    assert cache_sizes(none, v, node, 1, cat.models["llama-3.1-8b"])["host_cache_bytes"] == 8 * 8 * 2 ** 30
    assert cache_sizes(none, v, node, 8, cat.models["llama-3.1-8b"])["host_cache_bytes"] == 8 * 2 ** 30
    lm = read(_write(tmp_path, "lm.yaml", "max_local_cpu_size: 100\n"))
    assert cache_sizes(none, lm, node, 8, cat.models["deepseek-v3"])["host_cache_bytes"] == 100 * 2 ** 30
    assert cache_sizes(none, lm, node, 8, cat.models["llama-3.1-70b"])["host_cache_bytes"] == 8 * 100 * 2 ** 30


@pytest.mark.parametrize("text, name, words", [
    ('{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": '
     + "9" * 5000 + "}}", "kv.json", "not readable JSON"),
    ('{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": '
     + "9" * 400 + "}}", "kv.json", "field 'cpu_bytes_to_use'"),
    ("chunk_size: " + "9" * 5000 + "\n", "lm.yaml", "lm.yaml"),
    ("max_local_cpu_size: 1.0e+300\n", "lm.yaml", "at most"),
    ("--enable-hicache --hicache-ratio 0.5\n", "sg.txt", "above 1"),
    ("!!python/object:os.system\n", "lm.yaml", "not readable YAML"),
])
def test_hostile_sizes_are_one_line(tmp_path, text, name, words):
    """After review: a 5,000-digit integer gave a traceback, a 400-digit one the generic 'out
    of range', 1e300 was accepted, and SGLang's host pool could be smaller than its device's."""
    with pytest.raises(DataError) as info:
        read(_write(tmp_path, name, text))
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_older_vllm_fields_are_read_not_refused(tmp_path):
    cfg = read(_write(tmp_path, "kv.json", '{"kv_connector": "OffloadingConnector", '
                      '"kv_buffer_size": 1e9, "kv_connector_extra_config": {"cpu_bytes_to_use": 8G}}'))
    assert "kv_buffer_size" in cfg.not_modelled


def test_the_command_line_overrides_the_files_engine(tmp_path):
    """After review: a scenario's engine with --engine-config on the line was refused ('give
    one'), though the line overrides the file; the line's choice wins and the file's key is
    named as not used."""
    s = _write(tmp_path, "s.toml", 'model = "llama-3.1-8b"\ngpu = "h100-sxm"\n'
               'tier = "host-dram"\ntokens = 4096\nengine = "lmcache"\n')
    lm = _write(tmp_path, "lm.yaml", "chunk_size: 512\n")
    r = _cli("compare", "--scenario", str(s), "--engine-config", str(lm), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["engine_config"]["copy_tokens"] == 512 and "engine" in out["scenario_keys_not_used"]


# ---------------------------------------------------------------------------- issue 37, item 2
@pytest.mark.parametrize("command", ["compare", "reuse"])
@pytest.mark.parametrize("name, text, setting", [
    ("kv.json", '{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": '
     '{"cpu_bytes_to_use": 1}}', "cpu_bytes_to_use"),
    ("lm.yaml", "max_local_cpu_size: 0.0001\n", "max_local_cpu_size"),
    ("lm.yaml", "local_cpu: false\n", "local_cpu"),
    ("sg.txt", "--enable-hierarchical-cache --hicache-size 0.001\n", "--hicache-size"),
])
def test_a_host_cache_too_small_for_the_prompt_says_the_reload_cannot_happen(
        tmp_path, command, name, text, setting):
    """issue 37: a vLLM cpu_bytes_to_use of 1 byte, or an LMCache max_local_cpu_size of 0.0001
    GiB, and compare --tier host-dram answered as if the host cache held the prompt."""
    p = _write(tmp_path, name, text)
    r = _cli(command, "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "host-dram",
             "--tokens", "32768", "--engine-config", str(p))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert f"({p}, field '{setting}') holds" in r.stderr and "cannot happen" in r.stderr
    assert "of this prompt's" in r.stderr and "%" in r.stderr


def test_a_disk_cache_too_small_for_the_prompt_says_how_much_it_holds(tmp_path):
    p = _write(tmp_path, "lm.yaml", "local_disk: /mnt/kv\nmax_local_disk_size: 0.5\n")
    r = _cli("compare", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "nvme",
             "--tokens", "32768", "--tp", "4", "--engine-config", str(p))
    # 0.5 GiB on each of 4 ranks: 2.147 GB of the prompt's 10.74 GB, 20.00 %
    assert r.returncode == 2 and "field 'max_local_disk_size') holds 2.147 GB over its 4 " \
        "rank(s), 20.00% of this prompt's 10.74 GB" in r.stderr, r.stderr
    # a cache that holds the prompt answers
    p = _write(tmp_path, "lm2.yaml", "local_disk: /mnt/kv\nmax_local_disk_size: 3\n")
    r = _cli("compare", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "nvme",
             "--tokens", "32768", "--tp", "4", "--engine-config", str(p))
    assert r.returncode == 0, r.stderr


def test_the_single_copy_note_speaks_only_of_a_model_it_applies_to(tmp_path):
    """issue 37: LMCache's single-copy note spoke of "an MLA latent" for Llama-3.1-70B, a GQA
    model (save_only_first_rank applies to MLA only: every rank of a GQA model stores)."""
    p = _write(tmp_path, "lm.yaml", "max_local_cpu_size: 40\n")
    for model, note in (("llama-3.1-70b", False), ("deepseek-v3", True)):
        r = _cli("compare", "--model", model, "--gpu", "h200", "--tier", "host-dram",
                 "--tokens", "8192", "--engine-config", str(p))
        assert r.returncode == 0, r.stderr
        assert ("MLA latent" in r.stdout) is note, r.stdout
        r = _cli("compare", "--model", model, "--gpu", "h200", "--tier", "host-dram",
                 "--tokens", "8192", "--engine-config", str(p), "--json")
        assert json.loads(r.stdout)["engine_config"]["first_rank_only"] is note


def test_unknown_settings_are_summarised(tmp_path):
    """issue 37: an LMCache file of 20,000 unknown keys printed them all on one line."""
    p = _write(tmp_path, "lm.yaml", "max_local_cpu_size: 40\n"
               + "".join(f"key_{i}: {i}\n" for i in range(20_000)))
    r = _cli("compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
             "--tokens", "4096", "--engine-config", str(p))
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("engine settings"))
    assert len(line) < 400 and "and 19,988 more" in line, line
    r = _cli("compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
             "--tokens", "4096", "--engine-config", str(p), "--json")
    cfg = json.loads(r.stdout)["engine_config"]
    assert cfg["not_modelled_count"] == 20_000 and len(cfg["not_modelled"]) == 12


def test_a_configuration_file_has_a_size_limit(tmp_path):
    """issue 37: a 60 MB configuration file was read whole."""
    from kvmath.scenario.engine_config import MAX_CONFIG_BYTES
    p = tmp_path / "lm.yaml"
    with open(p, "w") as fh:
        fh.write("max_local_cpu_size: 40\n")
        fh.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no 60 MB written
    with pytest.raises(DataError) as info:
        read(p)
    assert "larger than any engine's offload settings" in str(info.value)


@pytest.mark.parametrize("name, text, words", [
    ("kv.json", '{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": '
     '{"cpu_bytes_to_use": 1e300}}', "at most 1e+15 B"),
    ("lm.yaml", "max_local_cpu_size: 1e7\n", "at most 1e+06 GiB"),
    ("lm.yaml", "chunk_size: 10000000000\n", "at most 1e+09 tokens"),
    ("sg.txt", "--enable-hicache --hicache-size 1e9\n", "at most 1e+06 GB"),
])
def test_settings_beyond_their_physical_bounds_name_the_unit(tmp_path, name, text, words):
    with pytest.raises(DataError) as info:
        read(_write(tmp_path, name, text))
    assert words in str(info.value), str(info.value)
