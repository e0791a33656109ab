"""A model served beyond its config's window by the RoPE scaling its card states (issue 19):
rope_scaling.csv, --rope-scaling in every command, the scenario file and the calculator."""
import json

import pytest

from kvmath import bundled
from kvmath.cli.main import main
from kvmath.evaluate.api import ScenarioError, compare
from kvmath.logic.rules import served_model
from kvmath.tables.rows import rope_scalings


def test_every_row_names_a_bundled_model_and_its_source():
    cat = bundled()
    for (model, method), r in rope_scalings().items():
        assert model in cat.models and method == r.method
        assert r.source.startswith("https://") and r.source_location and r.retrieved


@pytest.mark.parametrize("model", ["qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b"])
def test_qwen3_cards_window_with_yarn_is_reproduced(model):
    # each card: "Context Length: 32,768 natively and 131,072 tokens with YaRN"
    m = bundled().models[model]
    assert m.max_context_tokens == 40960  # the config's max_position_embeddings
    assert served_model(m, "yarn").max_context_tokens == 131072
    assert served_model(m, None) is m


def test_scaling_changes_the_window_and_nothing_else():
    cat = bundled()
    m, g, t = cat.models["qwen3-8b"], cat.gpus["h100-sxm"], cat.tiers["host-dram"]
    plain = compare(m, g, t, 30000)
    scaled = compare(served_model(m, "yarn"), g, t, 30000)
    assert scaled.pop("context_window_tokens") == 131072
    assert plain.pop("context_window_tokens") == 40960
    # the crossings' bisection runs over the window, so its last digits may differ
    cross = [scaled.pop("breakeven_tokens"), plain.pop("breakeven_tokens")]
    assert cross[0] == pytest.approx(cross[1], rel=1e-9)
    assert scaled == plain  # KV bytes and FLOPs per token do not change with the window
    with pytest.raises(ScenarioError, match="--rope-scaling yarn"):
        compare(m, g, t, 100000)  # the refusal offers the scaling
    assert compare(served_model(m, "yarn"), g, t, 100000)["tokens"] == 100000


def test_a_model_without_the_scaling_is_refused_by_name():
    with pytest.raises(ScenarioError, match="states no yarn scaling for llama-3.1-8b"):
        served_model(bundled().models["llama-3.1-8b"], "yarn")


@pytest.mark.parametrize("argv", [
    ["compare", "--gpu", "h100-sxm", "--tier", "host-dram", "--tokens", "100000"],
    ["reuse", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens", "100000"],
    ["tiers", "--tokens", "100000", "--resume-rate", "0.05"],
])
def test_every_command_serves_the_scaled_window(capsys, argv):
    base = [argv[0], "--model", "qwen3-8b"] + argv[1:]
    assert main(base + ["--json"]) == 2
    err = capsys.readouterr().err
    assert "--rope-scaling yarn" in err and err.count("\n") == 1
    assert main(base + ["--rope-scaling", "yarn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_trace_takes_it_and_the_scenario_file_holds_it(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('model = "qwen3-8b"\nrope_scaling = "yarn"\ngpu = "h100-sxm"\n'
                 'tier = "host-dram"\ntokens = 100000\n')
    assert main(["compare", "--scenario", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context_window_tokens"] == 131072
    assert main(["trace", "synthetic", "--model", "qwen3-8b", "--rope-scaling", "yarn",
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier",
                 "host-dram", "--tokens", "1000", "--rope-scaling", "yarn"]) == 2
    assert "states no yarn scaling for llama-3.1-8b" in capsys.readouterr().err
