"""Human output that cannot be misread: units, joined lists, aligned columns, override notes,
and the version every result carries."""
import json
import re
import subprocess

import pytest

from kvmath.cli.compare import override_note
from kvmath.cli.main import main
from kvmath.cli.tiers import columns
from kvmath.present.format import fmt_time, fmt_token_list, join_and
from kvmath.version import version_info, version_line


@pytest.mark.parametrize("seconds,text", [
    (2.8e-6, "2.8 µs"), (0.196, "196 ms"), (7.44, "7.44 s"), (59.96, "1 min"),
    (1030, "17.2 min"), (3490, "58.2 min"), (7200, "2 h"), (1e7, "2,778 h"), (3e-10, "0.3 ns"),
    (0.0009996, "1 ms"), (0, "0 s")])
def test_durations_in_human_units(seconds, text):
    assert fmt_time(seconds) == text


def test_lists_join_in_words():
    assert fmt_token_list([61.2, 176907.4]) == "61 and 176,907 tokens"
    assert fmt_token_list([5]) == "5 tokens"
    assert fmt_token_list([]) == "none"
    assert join_and(["a", "b", "c"]) == "a, b, and c"


def test_columns_align_whatever_the_format():
    lines = columns(["name", "value"], [["a", "1 B/s"], ["long-name", "38.31 GB/s"]])
    ends = {len(line) for line in lines}
    assert len(ends) == 1, lines  # right-aligned numbers end in one column
    assert lines[1].startswith("a ") and lines[2].startswith("long-name")


def test_tiers_columns_line_up(capsys):
    assert main(["tiers", "--model", "llama-3.1-70b", "--tokens", "32768",
                 "--resume-rate", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("tier "))
    end = next(i for i, line in enumerate(out) if line.startswith("recomputed:"))
    table = out[start:end]
    assert len(table) >= 2 and len({len(line) for line in table}) == 1, table


def _compare(capsys, *extra, tokens="32768", model="llama-3.1-70b", tier="nvme-1drive"):
    assert main(["compare", "--model", model, "--gpu", "h100-sxm", "--tier", tier,
                 "--tokens", tokens, *extra]) == 0
    return capsys.readouterr().out


def test_crossings_written_in_words(capsys):
    # an MoE model from one drive crosses once: reload wins the short prompts (only the
    # touched experts are charged, so no artefact window at a few tokens)
    out = _compare(capsys, model="mixtral-8x7b")
    assert re.search(r"break-even at\s+[\d,]+ tokens", out), out
    from kvmath.present.format import fmt_token_list
    assert fmt_token_list([162.0, 4776.0]) == "162 and 4,776 tokens"


def test_override_note_names_the_calibrated_prefill(capsys):
    out = _compare(capsys, tokens="30", model="mixtral-8x7b")
    assert "verdict: reload wins" in out and "division says recompute wins" in out
    assert "the calibrated prefill" in out.splitlines()[-1]


def test_override_note_names_the_fixed_cost(capsys):
    out = _compare(capsys, "--prefill", "ideal", tokens="30", tier="host-dram")
    assert "verdict: recompute wins" in out and "division says reload wins" in out
    assert any("the reload's fixed cost" in line for line in out.splitlines()[-3:])


def test_override_note_names_the_attention_term(capsys):
    out = _compare(capsys, tokens="32768", model="llama-3.1-8b", tier="nvme")
    assert "the attention term at 32,768 tokens" in out.splitlines()[-1]


def test_no_note_when_the_division_agrees(capsys):
    out = _compare(capsys, tier="host-dram", model="llama-3.1-70b")
    # no override note (the copy kernel's note, a line of its own, may follow the verdict)
    assert "division says" not in out
    r = json.loads(_compare(capsys, "--json", tier="host-dram", model="llama-3.1-70b"))
    assert override_note(r) is None


def test_json_carries_the_version(capsys):
    r = json.loads(_compare(capsys, "--json"))
    assert r["kvmath_version"] == version_info()
    assert set(r["kvmath_version"]) == {"version", "commit", "date"}


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == version_line()


def test_commit_comes_from_git():
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git")
    assert version_info()["commit"].split("-")[0] == head
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", version_info()["date"])


def test_version_agrees_everywhere():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    pyproject = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M)
    cff = yaml.safe_load((root / "CITATION.cff").read_text())
    assert pyproject.group(1) == version_info()["version"] == cff["version"]


@pytest.mark.parametrize("argv", [
    ["reuse", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens", "32768"],
    ["tiers", "--model", "llama-3.1-70b", "--tokens", "32768", "--resume-rate", "2"],
    ["trace", "synthetic", "--model", "llama-3.1-8b"],
])
def test_every_json_carries_the_version(capsys, argv):
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kvmath_version"] == version_info()
