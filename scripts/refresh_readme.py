"""Re-run what README.md shows and write it back: the command-line examples' outputs, the
headline figure (``docs/answer-ttft.svg``, with its alt text and caption: the answer page's
figure, drawn from the data) and the speed line (from ``benchmarks/measurements.csv``).

tests/cli/test_readme.py fails when any of them no longer matches what this script writes; run
it on purpose, review ``git diff README.md docs/``, and commit.
"""
import contextlib
import csv
import io
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIGURE = ROOT / "docs" / "answer-ttft.svg"
MEASUREMENTS = ROOT / "benchmarks" / "measurements.csv"
PATTERN = re.compile(r"(```sh\n\.venv/bin/python -m kvmath ((?:compare|reuse|tiers|trace|route|fleet) [^\n]+)\n```"
                     r"\n\n```text\n)(.*?)(```)", flags=re.S)
FIGURE_BLOCK = re.compile(r"(<!-- figure:[^\n]*-->\n)(.*?)(<!-- /figure -->)", flags=re.S)
SPEED_BLOCK = re.compile(r"(<!-- speed:[^\n]*-->\n)(.*?)(<!-- /speed -->)", flags=re.S)


def run(argv):
    from kvmath.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(shlex.split(argv)) == 0, argv
    return out.getvalue()


def headline_figure():
    """The answer page's figure: the book's headline scenario (the calculator's opening one) on
    the answer page's tiers, at the decision table's load."""
    from kvmath.evaluate.api import scenario
    from kvmath.present.calculator import DEFAULTS, PLOT_TIERS
    from kvmath.present.figures import ttft_curves, ttft_figure
    from kvmath.tables.rows import bundled
    cat = bundled()
    tiers = [cat.tiers[t] for t in PLOT_TIERS]
    s = scenario(cat.models[DEFAULTS["model"]], cat.gpus[DEFAULTS["gpu"]], tiers[0])
    return ttft_figure(ttft_curves(s, tiers, DEFAULTS["tokens"]), ident="readme-ttft", s=s)


def figure_block(fig):
    rel = FIGURE.relative_to(ROOT).as_posix()
    return f"![{fig.alt}]({rel})\n\n*{fig.caption}*\n"


def speed_block():
    """The speed benchmark's ratios (the rows of unit ratio), a line each; the other
    measurements are the book's (its command reference) and benchmarks/README.md's."""
    with open(MEASUREMENTS, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["unit"] == "ratio"]
    out = [f"- {r['what']}: {r['value']}" + (f" (target at most {r['target']})" if r["target"]
                                           else "") + f"; `benchmarks/{r['benchmark']}`, "
           f"{r['measured']}." for r in rows]
    return ("On a two-core machine; the traces' and the fleet's timings are in the book's "
            "command reference, every earlier run in `benchmarks/README.md`:\n\n"
            + "\n".join(out) + "\n")


def refreshed(text, fig):
    """README text with every generated part written anew (the figure's file aside)."""
    text = PATTERN.sub(lambda m: m.group(1) + run(m.group(2)) + m.group(4), text)
    text = FIGURE_BLOCK.sub(lambda m: m.group(1) + figure_block(fig) + m.group(3), text)
    return SPEED_BLOCK.sub(lambda m: m.group(1) + speed_block() + m.group(3), text)


def main_refresh():
    fig = headline_figure()
    fig.save(FIGURE)
    README.write_text(refreshed(README.read_text(), fig))


if __name__ == "__main__":
    main_refresh()
