"""The book's build executed every chapter, from the inputs as they are, and got what a fresh
kernel gets.

Runs after `make book` (make test does both). scripts/execute_book.py runs the chapters in a
few shared kernels, each from a clean namespace; the committed notebooks were executed in a
fresh kernel each and nbval re-checks them that way, so equal outputs here mean no chapter
leaned on another's state. Images and cells tagged nbval-ignore-output are left out, as nbval
leaves them out.
"""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))
from book_inputs import CACHE, cache_is_current  # noqa: E402
from execute_book import chapters  # noqa: E402

pytestmark = pytest.mark.skipif(not CACHE.is_dir(), reason="book not built (make book)")


def comparable(cell):
    """A code cell's outputs without images, execution counts or stream splits."""
    if "nbval-ignore-output" in cell.metadata.get("tags", []):
        return None
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(("stream", o.name, o.text))
        elif o.output_type in ("display_data", "execute_result"):
            data = {k: v for k, v in o.data.items() if not k.startswith("image/")}
            out.append((o.output_type, data, o.get("metadata", {}).get("scrapbook")))
    return out


def test_cache_is_from_these_inputs():
    assert cache_is_current(), "the execution cache is not from the current inputs (make book)"


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.stem)
def test_build_outputs_equal_committed(path):
    from jupyter_cache import get_cache
    committed = nbformat.read(path, as_version=4)
    _, built = get_cache(str(CACHE)).merge_match_into_notebook(committed)
    pairs = [(c, b) for c, b in zip(committed.cells, built.cells) if c.cell_type == "code"]
    assert len(pairs) == sum(c.cell_type == "code" for c in committed.cells)
    for i, (c, b) in enumerate(pairs):
        assert comparable(b) == comparable(c), f"{path.name}, code cell {i}: {c.source[:80]!r}"
