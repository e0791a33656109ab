"""The README's command-line examples are the CLI's real output, so they cannot drift."""
import re
import shlex
from pathlib import Path

import pytest

from kvmath.cli.main import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
EXAMPLES = re.findall(r"```sh\n\.venv/bin/python -m kvmath ((?:compare|reuse|tiers|trace|route|fleet) [^\n]+)\n```\n\n```text\n(.*?)```",
                      README, flags=re.S)


def test_readme_has_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("argv,expected", EXAMPLES)
def test_readme_example_output(capsys, argv, expected):
    assert main(shlex.split(argv)) == 0
    assert capsys.readouterr().out == expected


def test_readme_names_the_test_command():
    assert "make test" in README and "make book" in README
