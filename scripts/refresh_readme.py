"""Re-run the command-line examples in README.md and replace their output blocks.

tests/cli/test_readme.py fails when an example's output no longer matches the CLI; run this on
purpose, review `git diff README.md`, and commit.
"""
import contextlib
import io
import re
import shlex
from pathlib import Path

from kvmath.cli.main import main

README = Path(__file__).resolve().parent.parent / "README.md"
PATTERN = re.compile(r"(```sh\n\.venv/bin/python -m kvmath ((?:compare|reuse|tiers|trace|route|fleet) [^\n]+)\n```"
                     r"\n\n```text\n)(.*?)(```)", flags=re.S)


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(shlex.split(argv)) == 0, argv
    return out.getvalue()


def main_refresh():
    text = README.read_text()
    README.write_text(PATTERN.sub(lambda m: m.group(1) + run(m.group(2)) + m.group(4), text))


if __name__ == "__main__":
    main_refresh()
