"""The README is a landing page whose every generated part is current: its command-line examples
are the CLI's real output, its headline figure is the answer page's drawn from the data, its
speed line is benchmarks/measurements.csv's, and it stays under 10 KB
(scripts/refresh_readme.py writes them all)."""
import re
import shlex
import sys
from pathlib import Path

import pytest

from kvmath.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
EXAMPLES = re.findall(r"```sh\n\.venv/bin/python -m kvmath ((?:compare|reuse|tiers|trace|route|fleet) [^\n]+)\n```\n\n```text\n(.*?)```",
                      README, flags=re.S)
sys.path.insert(0, str(ROOT / "scripts"))
import refresh_readme  # noqa: E402

#: the README is a landing page (issue 36): the reference lives in the book
MAX_BYTES = 10 * 1024


def test_readme_has_examples():
    assert len(EXAMPLES) >= 2
    commands = re.findall(r"^\.venv/bin/python -m kvmath (\w+)", README, flags=re.M)
    assert len(commands) == 3 and "review" in commands  # three example commands


@pytest.mark.parametrize("argv,expected", EXAMPLES)
def test_readme_example_output(capsys, argv, expected):
    assert main(shlex.split(argv)) == 0
    assert capsys.readouterr().out == expected


def test_readme_names_the_set_up_commands_and_their_times():
    assert "make test" in README and "make venv" in README and "make book" in README
    setup = README.split("## Set-up")[1].split("## ")[0]
    assert "minute" in setup and "two cores" in setup


def test_readme_is_a_landing_page():
    assert len(README.encode("utf-8")) <= MAX_BYTES, len(README.encode("utf-8"))
    first = README.split("\n## ")[0]  # the question, the answer and its figure come first
    assert "**The question.**" in first and "**The answer.**" in first
    assert "docs/answer-ttft.svg" in first
    for layer in ("derive/", "tables/", "tiers/", "logic/", "scenario/", "evaluate/", "node/",
                  "traces/", "fleet/", "present/", "cli/"):
        assert f"`{layer}`" in README, layer
        assert (ROOT / "kvmath" / layer).is_dir(), layer


def test_readme_figure_and_speed_are_current():
    """The headline figure (file, alt text and caption) and the speed line are what
    scripts/refresh_readme.py writes now."""
    fig = refresh_readme.headline_figure()
    assert (ROOT / "docs" / "answer-ttft.svg").read_text() == fig.file_text()
    block = refresh_readme.FIGURE_BLOCK.search(README).group(2)
    assert block == refresh_readme.figure_block(fig)
    assert refresh_readme.SPEED_BLOCK.search(README).group(2) == refresh_readme.speed_block()
    assert "import sympy, numpy" in refresh_readme.speed_block()
