"""The command line: happy paths, and one clear line with exit status 2 for each mistake."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvmath.cli.main import main

JSON_KEYS = {"tokens", "tp", "kv_bytes_per_token", "kv_bytes", "recompute_s", "reload_s",
             "winner", "breakeven_tokens"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_issue_example_json(capsys):
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                         "--tier", "host-dram", "--tokens", "32768", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert JSON_KEYS <= set(r)
    assert r["kv_bytes_per_token"] == 327_680
    assert r["kv_bytes"] == 327_680 * 32_768
    assert r["tokens"] == 32_768 and r["tp"] == 4  # the smallest TP that holds bf16 weights + KV
    assert r["winner"] in ("reload", "recompute")
    assert isinstance(r["breakeven_tokens"], list)
    assert r["winner"] == ("reload" if r["reload_s"] < r["recompute_s"] else "recompute")


def test_human_output(capsys):
    code, out, _ = run(capsys, "compare", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                       "--tier", "nvme-1drive", "--tokens", "4096")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[-1].startswith("verdict: recompute wins")
    assert any(line.startswith("KV per token") and "524,288 B" in line for line in lines)


def test_overrides_change_the_answer(capsys):
    base = ["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme-1drive",
            "--tokens", "8192", "--json"]
    slow = json.loads(run(capsys, *base)[1])
    fast = json.loads(run(capsys, *base, "--bandwidth", "1000")[1])
    assert fast["reload_s"] < slow["reload_s"]
    assert fast["reload_bandwidth_Bps"] == 1000e9
    eff = json.loads(run(capsys, *base, "--efficiency", "0.4")[1])
    assert eff["recompute_s"] == pytest.approx(slow["compute_s"] * slow["prefill_efficiency"] / 0.4)


def test_tp_and_kv_dtype(capsys):
    r = json.loads(run(capsys, "compare", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                       "--tier", "host-dram", "--tokens", "1000", "--tp", "8", "--kv-dtype",
                       "fp8", "--json")[1])
    assert r["tp"] == 8 and r["kv_bytes"] == 163_840 * 1000


def test_list(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for name in ("llama-3.1-70b", "h100-sxm", "host-dram", "nvme", "rdma"):
        assert name in out


def test_user_files(capsys, model_file, gpu_file):
    m = model_file(name="mine")
    g = gpu_file(name="my-gpu", extra=dict(prefill_efficiency=0.5, hbm_efficiency=0.9))
    code, out, _ = run(capsys, "compare", "--model", str(m), "--gpu", str(g), "--tier",
                       "host-dram", "--tokens", "100", "--json")
    assert code == 0 and json.loads(out)["model"] == "mine"


BAD = [
    (["compare", "--model", "nope", "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "1"],
     "unknown model"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h999", "--tier", "host-dram",
      "--tokens", "1"], "unknown GPU"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "tape",
      "--tokens", "1"], "unknown tier"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "0"], "--tokens"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "-5"], "--tokens"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "ten"], "--tokens"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--tp", "0"], "--tp"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--tp", "3"], "does not fit"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--bandwidth", "0"], "--bandwidth"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--bandwidth", "nan"], "--bandwidth"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--efficiency", "1.5"], "--efficiency"),
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10", "--efficiency", "0"], "--efficiency"),
    (["compare", "--model", "/no/such/model.csv", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "10"], "cannot read"),
    (["compare", "--gpu", "h100-sxm"], "required"),
    # issue 19: tiers and reuse take no --allow-beyond-context, so they do not offer it
    (["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
      "--tokens", "200000"], "only compare takes --allow-beyond-context"),
    (["tiers", "--model", "llama-3.1-8b", "--tokens", "200000", "--resume-rate", "1"],
     "only compare takes --allow-beyond-context"),
    # issue 19: a node and a GPU that are not its own
    (["tiers", "--node", "dgx-h200", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
      "--tokens", "8192", "--resume-rate", "1"], "is not the GPU of node dgx-h200"),
    # issue 19: more replicas reloading than the node holds (8 GPUs, TP 2: four replicas)
    (["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme",
      "--tokens", "8192", "--tp", "2", "--concurrent-reloads", "8"], "exceeds the 4 replica(s)"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_input_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_malformed_user_file(capsys, model_file):
    path = model_file(layers="-1")
    code, _, err = run(capsys, "compare", "--model", str(path), "--gpu", "h100-sxm", "--tier",
                       "host-dram", "--tokens", "10")
    assert code == 2 and f"{path}, row 1, field 'layers'" in err


def test_fp8_compute_on_gpu_without_fp8_is_an_error(capsys):
    from kvmath import compare, resolve_gpu, resolve_model, resolve_tier
    from kvmath.evaluate.api import ScenarioError
    with pytest.raises(ScenarioError, match="fp8"):
        compare(resolve_model("llama-3.1-8b"), resolve_gpu("a100-sxm"),
                resolve_tier("host-dram"), 10, compute_dtype="fp8")


def test_module_entry_point():
    ok = subprocess.run([sys.executable, "-m", "kvmath", "compare", "--model", "llama-3.1-70b",
                         "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "32768",
                         "--json"], capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["kv_bytes_per_token"] == 327_680
    bad = subprocess.run([sys.executable, "-m", "kvmath", "compare", "--model", "x", "--gpu",
                          "h100-sxm", "--tier", "host-dram", "--tokens", "1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_reuse_json(capsys):
    code, out, err = run(capsys, "reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                         "--tier", "nvme", "--tokens", "32768", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    for key in ("ttl_s", "p_breakeven", "saving_gpu_s", "value_usd", "verdict", "tp"):
        assert key in r
    assert 0 < r["p_breakeven"] < 1


def test_reuse_human_and_exponential(capsys):
    code, out, _ = run(capsys, "reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier",
                       "host-dram", "--tokens", "8192", "--pause", "chat-exponential")
    assert code == 0 and out.strip().splitlines()[-1].startswith("verdict:")


def test_tiers_json(capsys):
    code, out, _ = run(capsys, "tiers", "--model", "llama-3.1-70b", "--tokens", "32768",
                       "--resume-rate", "2", "--json")
    plan = json.loads(out)
    assert code == 0 and [t["tier"] for t in plan["tiers"]] == ["hbm", "host-dram", "nvme"]
    # the layout every command takes: the smallest TP that holds the weights and one prompt
    code, out, _ = run(capsys, "compare", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                       "--tier", "host-dram", "--tokens", "32768", "--json")
    assert plan["tp"] == json.loads(out)["tp"] == 4


def test_tiers_human(capsys):
    code, out, _ = run(capsys, "tiers", "--model", "llama-3.1-8b", "--tokens", "8192",
                       "--resume-rate", "5", "--tp", "1")
    assert code == 0 and "recomputed:" in out


TIER_BAD = [
    (["reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens",
      "100", "--pause", "never"], "unknown pause"),
    (["reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens",
      "-1"], "--tokens"),
    (["tiers", "--model", "llama-3.1-70b", "--tokens", "100", "--resume-rate", "-2"],
     "--resume-rate"),
    (["tiers", "--node", "dgx-z", "--model", "llama-3.1-70b", "--tokens", "100",
      "--resume-rate", "1"], "unknown node"),
    (["tiers", "--model", "llama-3.1-70b", "--tokens", "100", "--resume-rate", "1", "--tp", "16"],
     "exceeds"),
]


@pytest.mark.parametrize("argv,message", TIER_BAD)
def test_reuse_tiers_bad_input(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_malformed_pause_file(capsys, tmp_path):
    from conftest import bundled_rows, write_csv
    header, rows = bundled_rows("pauses.csv")
    path = write_csv(tmp_path / "p.csv", header, [dict(rows[0], return_probability="1.5")])
    code, _, err = run(capsys, "reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                       "--tier", "nvme", "--tokens", "100", "--pause", str(path))
    assert code == 2 and "field 'return_probability'" in err


def test_compare_reads_a_scenario_file(capsys, tmp_path):
    """One TOML scenario for compare too; flags override it; a bad key is one line."""
    path = tmp_path / "s.toml"
    path.write_text('model = "llama-3.1-8b"\ngpu = "h100-sxm"\ntier = "nvme"\ntokens = 8192\n'
                    'engine = "ideal"\n')
    code, out, _ = run(capsys, "compare", "--scenario", str(path), "--json")
    r = json.loads(out)
    assert code == 0 and r["engine"] == "ideal" and r["tokens"] == 8192
    code, out, _ = run(capsys, "compare", "--scenario", str(path), "--tokens", "4096", "--json")
    assert json.loads(out)["tokens"] == 4096
    path.write_text('model = "llama-3.1-8b"\nflavour = 3\n')
    code, out, err = run(capsys, "compare", "--scenario", str(path))
    assert code == 2 and "field 'flavour'" in err and err.count("\n") == 1


def test_a_bug_is_not_a_user_error(capsys, monkeypatch):
    """issue 19: a bare KeyError had become exit 2 and a one-line error, so a bug looked like a
    user's mistake; only a name no bundled row holds (UnknownName) is one."""
    import kvmath.cli.listing as listing

    def broken():
        return {}["no such key"]
    monkeypatch.setattr(listing, "text", broken)
    with pytest.raises(KeyError):
        main(["list"])
    code, out, err = run(capsys, "compare", "--model", "no-such-model", "--gpu", "h100-sxm",
                         "--tier", "nvme", "--tokens", "10")
    assert code == 2 and "unknown model 'no-such-model'" in err


def test_compare_takes_the_node(capsys, node_file):
    """issue 19: compare had no --node, so four drives could be stated only as --bandwidth (which
    drops the engine model); with the node its GPU is implied, its nvme tier stripes the node's
    own drives, and a node with the bundled drives gives the bundled tier's answer."""
    path = node_file()
    got = {}
    for extra in (["--gpu", "h100-sxm"], ["--node", "dgx-h100"], ["--node", str(path)]):
        code, out, err = run(capsys, "compare", "--model", "llama-3.1-70b", "--tier", "nvme",
                             "--tokens", "32768", "--json", *extra)
        assert code == 0, err
        got[extra[-1]] = json.loads(out)
    assert got["dgx-h100"]["reload_s"] == got["h100-sxm"]["reload_s"]
    assert got[str(path)]["reload_bandwidth_Bps"] == pytest.approx(
        got["dgx-h100"]["reload_bandwidth_Bps"] / 2)
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-70b", "--tier", "nvme",
                         "--tokens", "32768", "--node", "dgx-h200", "--gpu", "h100-sxm")
    assert code == 2 and "is not the GPU of node dgx-h200" in err


def test_reuse_and_tiers_take_the_users_prices(capsys, tmp_path):
    """issue 19: only --gpu-price could be set; DRAM and NVMe prices come from a --prices file
    (prices.csv's format, its rows replacing the bundled ones they name) or --dram-price and
    --nvme-price, and the output dates each price it used."""
    base = ["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "host-dram",
            "--tokens", "8192", "--json"]
    f = tmp_path / "prices.csv"
    f.write_text("name,value,observed,kind,source,source_location,retrieved,verified_via,notes\n"
                 "ddr5_usd_per_GB,5.0,2026-11-15,assumption,a quote,our vendor,2026-12-01,,\n")
    got = {}
    for extra in ([], ["--prices", str(f)], ["--dram-price", "5"]):
        code, out, err = run(capsys, *base, *extra)
        assert code == 0, err
        got[" ".join(extra)] = json.loads(out)
    cheaper = got[f"--prices {f}"]
    assert cheaper["p_breakeven"] < got[""]["p_breakeven"]
    assert cheaper["p_breakeven"] == pytest.approx(got["--dram-price 5"]["p_breakeven"], rel=1e-12)
    assert cheaper["prices_observed"]["ddr5_usd_per_GB"] == "2026-11-15"
    bad = tmp_path / "bad.csv"
    bad.write_text("name,value,observed,kind,source,source_location,retrieved,verified_via,notes\n"
                   "hbm_usd_per_GB,5.0,2026-11-15,assumption,a quote,x,2026-12-01,,\n")
    code, out, err = run(capsys, *base, "--prices", str(bad))
    assert code == 2 and "unknown price 'hbm_usd_per_GB'" in err and err.count("\n") == 1


def test_one_scenario_file_travels_to_every_command(capsys, tmp_path):
    """issue 19: compare --scenario rejected node, reuse rejected batch_seqs; one TOML file now
    serves compare, reuse, tiers and trace alike: each uses its own keys, names the others it
    does not use, and still refuses a key no command knows."""
    f = tmp_path / "scenario.toml"
    f.write_text('model = "llama-3.1-70b"\ngpu = "h100-sxm"\nnode = "dgx-h100"\ntier = "nvme"\n'
                 'tokens = 32768\nresume_rate = 0.6\nbatch_seqs = 16\nnvme_price = 0.2\n')
    for command in (["compare"], ["reuse"], ["tiers"], ["trace", "synthetic"]):
        code, out, err = run(capsys, *command, "--scenario", str(f), "--json")
        assert code == 0, (command, err)
        assert "scenario_keys_not_used" in json.loads(out)
    code, out, err = run(capsys, "compare", "--scenario", str(f), "--json")
    assert json.loads(out)["scenario_keys_not_used"] == ["batch_seqs", "nvme_price"]
    code, out, err = run(capsys, "compare", "--scenario", str(f))
    assert "not used by compare" in out
    f.write_text('model = "llama-3.1-70b"\nfrobnicate = 1\n')
    code, out, err = run(capsys, "compare", "--scenario", str(f), "--gpu", "h100-sxm")
    assert code == 2 and "frobnicate" in err and "unknown key" in err


def test_files_that_are_not_files_are_refused(capsys, tmp_path):
    """issue 20: a FIFO as --model or --scenario hung for ever, /dev/zero exhausted memory and a
    TOML file nested 600 deep gave a RecursionError traceback: each is one line and exit 2."""
    import os
    fifo = tmp_path / "model.csv"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 600 + "]" * 600 + "\n")
    base = ["--gpu", "h100-sxm", "--tier", "nvme", "--tokens", "10"]
    for argv, message in ((["--model", str(fifo)], "not a regular file"),
                          (["--model", "/dev/zero"], "not a regular file"),
                          (["--model", "llama-3.1-8b", "--scenario", str(deep)], "nest too deep")):
        code, out, err = run(capsys, "compare", *base, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, (argv, err)


def test_a_full_disk_is_one_line():
    """issue 20: `kvmath list > /dev/full` gave a traceback."""
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "kvmath", "list"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot write" in p.stderr


def test_reuse_prices_an_nvme_hit_on_the_nodes_drives(capsys, node_file):
    """After review: reuse --node had priced an NVMe hit over the bundled eight-drive tier (while
    compare --node used the node's drives) and still required --gpu."""
    path = node_file()
    reload = {}
    for cmd in ("reuse", "compare"):
        code, out, err = run(capsys, cmd, "--model", "llama-3.1-70b", "--tier", "nvme",
                             "--tokens", "32768", "--node", str(path), "--json")
        assert code == 0, err
        reload[cmd] = json.loads(out)["reload_s"]
    assert reload["reuse"] == pytest.approx(reload["compare"], rel=1e-12)


def test_no_inf_printed_as_an_answer(capsys):
    """issue 20: `tiers --resume-rate 1e-15` printed ages held "0 - inf"; a tier that holds every
    cache it gets says so."""
    code, out, err = run(capsys, "tiers", "--model", "llama-3.1-8b", "--tokens", "8192",
                         "--resume-rate", "1e-15")
    assert code == 0 and "every age" in out
    assert not re.search(r"\binf\b|\bnan\b", out), out


@pytest.mark.parametrize("argv, words", [
    # beyond any replica: the option's physical bound (issue 37); within it, the heads
    (["--model", "llama-3.1-8b", "--tp", "1000000000"], "from 1 to 4,096, got '1000000000'"),
    (["--model", "llama-3.1-8b", "--tp", "4096"], "does not fit llama-3.1-8b's 32 attention heads"),
    (["--model", "llama-3.1-8b", "--tp", "64"], "32 attention heads"),
    (["--model", "qwen2.5-7b", "--tp", "8"], "28 attention heads"),
    (["--model", "llama-3.1-8b", "--ep", "1000"], "has no routed experts"),
    (["--model", "mixtral-8x7b", "--ep", "1000"], "has 8 routed experts"),
    (["--model", "llama-3.1-8b", "--concurrent-reloads", "100"], "exceeds the 8 replica(s)"),
])
def test_impossible_deployments_are_refused(capsys, argv, words):
    """issue 20: --tp 1000000000 (or 64 on 32 heads) and --ep 1000 got verdicts."""
    code, out, err = run(capsys, "compare", "--gpu", "h100-sxm", "--tier", "host-dram",
                         "--tokens", "4096", *argv)
    assert code == 2 and words in err and err.count("\n") == 1, err


def test_expert_parallelism_wider_than_attention_names_the_ep(capsys):
    """issue 20: --ep 3 on Mixtral answered '--tp 3 does not fit' (the calibrated prefill's
    values were taken at the node's width, which the KV heads need not fit): EP 3 is three
    attention groups of TP 1 (data-parallel attention), a deployment engines run."""
    code, out, err = run(capsys, "compare", "--gpu", "h100-sxm", "--tier", "host-dram",
                         "--tokens", "4096", "--model", "mixtral-8x7b", "--ep", "3", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert (r["tp"], r["ep"], r["dp_attention"]) == (1, 3, True)


def test_inputs_are_never_silently_dropped(capsys, tmp_path):
    """issue 20: reuse offloaded to NVMe on a node with no drives (a numpy warning, then 'out of
    range'), --resume-rate was dropped without a word for tiers outside the node plan, and
    trace --batch-seqs 200 set HBM to 0 B with no INFEASIBLE flag."""
    import csv
    rows = list(csv.DictReader(open(Path(__file__).resolve().parents[2] / "kvmath" / "data"
                                    / "nodes.csv")))
    node = {**rows[0], "name": "no-drives", "nvme_drives": "0"}
    path = tmp_path / "node.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(node), lineterminator="\n")
        w.writeheader()
        w.writerow(node)
    for cmd, tier in (("reuse", "nvme"), ("compare", "nvme-1drive")):
        code, out, err = run(capsys, cmd, "--model", "llama-3.1-70b", "--tier", tier,
                             "--tokens", "32768", "--node", str(path))
        assert code == 2 and "has no NVMe drives" in err and err.count("\n") == 1, err
    code, out, err = run(capsys, "reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                         "--tier", "rdma", "--tokens", "32768", "--resume-rate", "1", "--json")
    assert code == 0 and "not rdma" in json.loads(out)["opportunity_not_priced"]
    code, out, err = run(capsys, "trace", "conversation", "--model", "llama-3.1-70b",
                         "--batch-seqs", "200")
    assert code == 0 and "HBM: INFEASIBLE" in out and err == ""


def test_review_fixes_of_the_node_and_engine_rules(capsys):
    """After review: the default TP of a node's plan is the layout every command takes, within
    what its heads allow (Qwen2.5-7B had failed with '--tp 8', a flag nobody typed; it fits one
    H100); vLLM's single-copy MLA store and its copy
    kernel are CUDA's (on MI300X every rank stores its own copy, by driver copies); trace
    sizes a block by the copies the engine stores."""
    code, out, err = run(capsys, "tiers", "--model", "qwen2.5-7b", "--tokens", "4096",
                         "--resume-rate", "1", "--json")
    assert code == 0 and json.loads(out)["tp"] == 1, err
    r = {}
    for gpu in ("h200", "mi300x"):
        code, out, err = run(capsys, "compare", "--model", "deepseek-v3", "--gpu", gpu,
                             "--tier", "nvme-1drive", "--tokens", "32768", "--json")
        r[gpu] = json.loads(out)
    assert r["mi300x"]["kv_bytes_stored"] == pytest.approx(  # one latent per rank
        r["mi300x"]["tp"] * r["mi300x"]["kv_bytes_unique"])
    assert r["h200"]["kv_bytes_stored"] == pytest.approx(r["h200"]["kv_bytes_unique"])
    assert r["h200"]["copy_path"] == "kernel" and r["mi300x"]["copy_path"] == "driver"
    sizes = {}
    for engine in ("vllm-lbhnc", "sglang-hicache"):
        code, out, err = run(capsys, "trace", "conversation", "--model", "deepseek-v3",
                             "--node", "dgx-h200", "--engine", engine, "--json")
        sizes[engine] = json.loads(out)["block_bytes"]
    assert sizes["sglang-hicache"] == pytest.approx(8 * sizes["vllm-lbhnc"])


def test_one_scenario_gives_the_same_per_request_numbers_in_every_command(capsys, tmp_path):
    """issue 19, item 1: one scenario file, the same per-request numbers: compare, reuse and
    tiers agree on the recompute and on each tier's reload, tiers pricing a tier's reload at
    its own share of the stated resumes and the writes it carries on its node hops, and at
    every tier's reads on the GPUs' own links (compare's resume_rate and gpu_resume_rate), as
    the path is split by the reloads really in flight."""
    from kvmath.book import bundled, compare, node_nvme_tier, resolve_model, resolve_tier
    from kvmath.tables.rows import resolve_node
    f = tmp_path / "s.toml"
    # no tp: every command takes the one layout default (issue 32 item 8)
    f.write_text('model = "llama-3.1-70b"\nnode = "dgx-h100"\ntokens = 32768\n'
                 'batch_context = 32768\n')
    code, out, err = run(capsys, "tiers", "--scenario", str(f), "--resume-rate", "0.6", "--json")
    plan = json.loads(out)
    tp = plan["tp"]
    for cmd in (["trace", "conversation"], ["fleet", "conversation", "--nodes", "2",
                                              "--dask", "none"]):
        code, out, err = run(capsys, *cmd, "--scenario", str(f), "--json")
        assert code == 0 and json.loads(out)["tp"] == tp, (cmd, err)
    node, model = resolve_node("dgx-h100"), resolve_model("llama-3.1-70b")
    reads = 0.6 * sum(t["resume_fraction"] for t in plan["tiers"] if t["tier"] != "hbm")
    for tier in ("host-dram", "nvme"):
        row = next(t for t in plan["tiers"] if t["tier"] == tier)
        assert row["reload_load_from"] == "the tier's own resumes and offload writes"
        # the GPUs' links carry every tier's reads, not the writes (their duplex share does)
        assert row["reload_gpu_load_per_s"] == pytest.approx(reads, rel=1e-12)
        path = node_nvme_tier(node) if tier == "nvme" else resolve_tier(tier)
        r = compare(model, bundled().gpus[node.gpu], path, 32768, tp=tp,
                    resume_rate=row["reload_load_per_s"],
                    gpu_resume_rate=row["reload_gpu_load_per_s"])
        assert r["reload_s"] == pytest.approx(row["reload_s"], rel=1e-12), tier
        assert r["recompute_s"] == pytest.approx(plan["recompute_s"], rel=1e-12)
        code, out, err = run(capsys, "reuse", "--scenario", str(f), "--tier", tier, "--json")
        code, out2, err = run(capsys, "compare", "--scenario", str(f), "--tier", tier, "--json")
        assert json.loads(out)["reload_s"] == pytest.approx(json.loads(out2)["reload_s"], rel=1e-12)
        assert json.loads(out)["tp"] == json.loads(out2)["tp"] == tp
        # at the tier's own load, compare on the node gives the plan's reload: the node's own
        # drives for nvme
        code, out3, err = run(capsys, "compare", "--scenario", str(f), "--tier", tier,
                              "--resume-rate", str(row["reload_load_per_s"]), "--json")
        assert code == 0 and json.loads(out3)["tp"] == tp
        assert [h["link"] for h in json.loads(out3)["path"]] == [h["link"] for h in r["path"]]


def test_a_user_node_without_drives_is_named_by_file_row_and_field(capsys, tmp_path):
    """issue 20's contract for a nodes CSV: the error names the file, its row and the field
    (the shared logic names the node and field; the command line adds where it came from)."""
    from kvmath.tables.rows import data_path
    lines = data_path("nodes.csv").read_text().splitlines()
    row = lines[1].split(",")
    header = lines[0].split(",")
    row[header.index("name")], row[header.index("nvme_drives")] = "my-node", "0"
    f = tmp_path / "my-node.csv"
    f.write_text(lines[0] + "\n" + ",".join(row) + "\n")
    for cmd in ("compare", "reuse"):
        code, out, err = run(capsys, cmd, "--node", str(f), "--tier", "nvme", "--model",
                             "llama-3.1-8b", "--tokens", "8192")
        assert code == 2 and out == ""
        assert "(nvme_drives 0)" in err and f"({f}, row 1)" in err, err
    code, out, err = run(capsys, "compare", "--node", "dgx-h100", "--tier", "nvme-1drive",
                         "--model", "llama-3.1-8b", "--tokens", "8192")
    assert code == 2 and "row 1)" not in err  # a bundled node: its name says where it is


def test_an_interrupt_while_the_command_line_loads_is_one_line():
    """issue 20: Ctrl-C at any moment once the console script runs is "kvmath: interrupted",
    exit 130, never a traceback: importing the package loads only its version, and the entry
    point (kvmath.entry) catches an interrupt while the command line's modules load. Sent at
    several moments of the load (after the interpreter itself has started: an interrupt while
    Python imports its own site module, the first few hundredths of a second, is Python's)."""
    import shutil
    import signal
    import subprocess
    import sys
    import time
    exe = shutil.which("kvmath") or str(Path(sys.executable).with_name("kvmath"))
    for delay in (0.08, 0.12, 0.16, 0.2, 0.25):  # within the load, here and under CI
        p = subprocess.Popen([exe, "compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                              "--tier", "host-dram",
                              "--tokens", "8192"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err)
        # done (0); interrupted (130); or ended by the signal as the interpreter shut down,
        # its answer written (-SIGINT, nothing on stderr)
        assert p.returncode in (0, 130, -signal.SIGINT), (delay, p.returncode, err)
        if p.returncode < 0:
            assert err == "", (delay, err)
        if p.returncode == 130:
            assert err.strip() == "kvmath: interrupted", (delay, err)


def test_a_command_started_ignoring_interrupts_keeps_ignoring_them():
    """A background job of a script inherits an ignored SIGINT; the entry point does not
    override it while the modules load (the review found it did)."""
    import shutil
    import signal
    import subprocess
    import sys
    import time
    exe = shutil.which("kvmath") or str(Path(sys.executable).with_name("kvmath"))
    p = subprocess.Popen([exe, "compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                          "--tier", "host-dram", "--tokens", "8192"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    time.sleep(0.15)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "verdict" in out, (p.returncode, err)


def test_an_interrupt_a_library_wrapped_in_its_own_error_is_still_an_interrupt(capsys,
                                                                                monkeypatch):
    """CI found Ctrl-C turned into pydantic's SchemaError while a row schema was built, and a
    traceback: an error whose chain holds an interrupt is the interrupt's one line, exit 130."""
    import kvmath.cli.main as M

    def wrapped(argv=None):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ValueError("Error building a validator") from exc
    monkeypatch.setattr(M, "run", wrapped)
    assert M.main(["list"]) == 130
    assert capsys.readouterr().err == "kvmath: interrupted\n"


def test_pydantics_report_of_an_interrupt_is_the_interrupt(monkeypatch):
    """pydantic-core answers Ctrl-C while it builds a row validator with a SchemaError whose
    message names the KeyboardInterrupt (no exception chained): the table reader turns it back
    into the interrupt, which the command line answers in one line."""
    import pydantic_core

    from kvmath.tables import schema

    def interrupted(*a, **k):
        raise pydantic_core.SchemaError('Error building "literal" validator:\n  KeyboardInterrupt: ')
    monkeypatch.setattr(pydantic_core, "SchemaValidator", interrupted)
    schema._validator.cache_clear()
    try:
        with pytest.raises(KeyboardInterrupt):
            schema._validator("gpus")
    finally:
        monkeypatch.undo()
        schema._validator.cache_clear()
