"""Regenerate the chapter notebooks in book/ from their sources in chapters/, with outputs.

The chapters are written as MyST markdown notebooks (chapters/*.md, the source of truth).
This script converts each to book/<name>.ipynb and executes it with cwd book/, so the
stored outputs are what the library computes now. Strict nbval then guards them: a
library or data change that moves a cited number fails `make test` until this script is
run on purpose and the diff reviewed.

    make refresh-notebooks        # or: python scripts/refresh_notebooks.py [names...]
    git diff --stat book/          # review what moved, then commit
"""
import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "chapters"
BOOK = ROOT / "book"


def notebook_from_source(path):
    """The unexecuted notebook of a chapter source (also used by the sync test)."""
    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{path.stem}-{i}"
    return nb


def refresh(path):
    nb = notebook_from_source(path)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(BOOK)}}).execute()
    for cell in nb.cells:  # timings would churn every diff; the outputs are what is reviewed
        cell.metadata.pop("execution", None)
    out = BOOK / f"{path.stem}.ipynb"
    nbformat.write(nb, out)
    print(f"wrote {out.relative_to(ROOT)}")


def main(names):
    paths = [SOURCES / f"{n}.md" for n in names] if names else sorted(SOURCES.glob("*.md"))
    for p in paths:
        refresh(p)


if __name__ == "__main__":
    main(sys.argv[1:])
