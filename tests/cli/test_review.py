"""kvmath review: the design-review section of the README's scenario file, its numbers held to
the commands it summarises (compare, reuse, tiers and fleet, each run on the file as a user
runs it), its figures to compare's record, and what it says when the file leaves a part out."""
import json
import re
import shlex
from pathlib import Path

import pytest

from kvmath.cli.main import main
from kvmath.present.format import fmt_bytes, fmt_time

ROOT = Path(__file__).resolve().parents[2]
FILE = "examples/review.toml"


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    """The section of the README's scenario file: the answers it summarises (--json), and the
    files it writes."""
    import contextlib
    import io
    import os
    out = tmp_path_factory.mktemp("review")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["review", FILE, "--json"]) == 0
        facts = json.loads(buf.getvalue())
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["review", FILE, "--out", str(out)]) == 0
    finally:
        os.chdir(cwd)
    return facts, out


def _command(capsys, argv):
    import os
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(shlex.split(argv) + ["--json"]) == 0
    finally:
        os.chdir(cwd)
    return json.loads(capsys.readouterr().out)


def test_the_readme_names_the_review_of_its_scenario_file():
    readme = (ROOT / "README.md").read_text()
    assert f"kvmath review {FILE}" in readme and (ROOT / FILE).is_file()


def _equal(a, b, path=""):
    """The review's answer and the command's, key by key (the version stamp aside)."""
    if isinstance(b, dict):
        for k in b:
            if k in ("kvmath_version",):
                continue
            _equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def test_every_tier_is_compares_answer(review, capsys):
    facts, _ = review
    assert facts["tiers"][:1] == ["host-dram"] and len(facts["compare"]) == len(facts["tiers"])
    answered = 0
    for tier, got in facts["compare"].items():
        if "refused" in got:  # refused by compare too, with the same words
            assert main(["compare", "--scenario", str(ROOT / FILE), "--tier", tier]) == 2
            assert got["refused"] in capsys.readouterr().err
            continue
        answered += 1
        _equal(got, _command(capsys, f"compare --scenario {FILE} --tier {tier}"))
    assert answered >= 3


def test_the_reuse_economics_tiers_plan_and_fleet_are_the_commands(review, capsys):
    facts, _ = review
    for tier, got in facts["reuse"].items():
        if "refused" not in got:
            _equal(got, _command(capsys, f"reuse --scenario {FILE} --tier {tier}"))
    _equal(facts["plan"], _command(capsys, f"tiers --scenario {FILE}"))
    fleet = _command(capsys, f"fleet conversation --scenario {FILE} --dask none")
    _equal(facts["fleet"], fleet)
    assert fleet["nodes_needed"] and fleet["nodes"] == facts["keys"]["nodes"]


def test_the_section_states_the_commands_numbers(review):
    """What a reader of review.md sees: each tier's times and verdict as compare prints them,
    the reuse answers, the plan's tiers and the fleet's size, each beside its command."""
    facts, out = review
    md = (out / "review.md").read_text()
    for tier, r in facts["compare"].items():
        if "refused" in r:
            assert f"| {tier} | not evaluated: " in md
            continue
        row = next(line for line in md.splitlines() if line.startswith(f"| {tier} | "))
        for x in (r["ttft_reload_s"], r["ttft_recompute_s"], *r["ttft_reload_s_band"],
                  *r["ttft_recompute_s_band"]):
            assert fmt_time(x) in row, (tier, x, row)
        assert f"{r['winner']}, {r['speedup']:.3g}x" in row
        assert f"`kvmath compare --tier {tier} --scenario {FILE}`" in row
    for tier, r in facts["reuse"].items():
        if "refused" not in r:
            row = next(line for line in md.splitlines() if line.startswith(f"| {tier} | ")
                       and "GPU-s" in line)
            assert f"{r['p_breakeven']:.3g}" in row and f"${r['value_usd']:.3g}" in row
    for t in facts["plan"]["tiers"]:
        assert f"| {t['tier']} | {fmt_bytes(t['capacity_bytes'], 4)} |" in md
    fl = facts["fleet"]
    assert f"that {fl['nodes_needed_for']}: {fl['nodes_needed']}," in md
    assert "ttft p90 <= 4 s" in fl["nodes_needed_for"]  # the file's objective
    assert f"p90 {fmt_time(fl['ttft_s']['p90'])}" in md
    # the caveats that apply: the engine's version, the assumed load, the trace
    assert "**Engine version.**" in md and "v0.29.0" in md
    assert f"{facts['keys']['resume_rate']:g} resumes per second" in md and "**The trace.**" in md
    # every input row with its source
    assert re.search(r"\| gpus.csv \| h100-sxm \| https://", md)
    assert "| links.csv | pcie-gen5-x16 |" in md and "| engines.csv | vllm-lbhnc |" in md


def test_the_figures_draw_compares_numbers_and_the_html_stands_alone(review):
    facts, out = review
    page = (out / "review.html").read_text()
    assert page.count('role="img"') == 2 and "<title id=\"review-ttft-title\">" in page
    assert 'src="' not in page  # the figures inline: nothing to fetch
    for name in ("ttft.svg", "tiers.svg"):
        svg = (out / name).read_text()
        assert svg.startswith("<?xml") and "<desc id=" in svg
    md = (out / "review.md").read_text()
    assert "](ttft.svg)" in md and "](tiers.svg)" in md
    # the chart's words are compare's numbers at the file's length
    desc = re.search(r'<desc id="review-ttft-desc">(.*?)</desc>', page, flags=re.S).group(1)
    for tier, r in facts["compare"].items():
        if "refused" not in r:
            assert f"reload from {tier} {fmt_time(r['ttft_reload_s'])}" in desc, (tier, desc)


def test_a_file_that_leaves_out_the_load_and_the_fleet_says_so(tmp_path, capsys):
    f = tmp_path / "small.toml"
    f.write_text('model = "llama-3.1-8b"\ngpu = "h100-sxm"\ntokens = 8192\n')
    assert main(["review", str(f), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "review.md").read_text()
    assert "Not planned: the file states no resume_rate" in md
    assert "Not sized: the file states no nodes" in md
    assert "every replica of the node reloading at once, the worst case" in md


def test_a_bad_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text('model = "llama-3.1-70b"\ntokens = "many"\n')
    assert main(["review", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tokens" in err and str(f) in err
    assert main(["review", str(tmp_path / "missing.toml")]) == 2
