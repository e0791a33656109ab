"""scripts/execute_book.py: a chapter that raises fails the run and leaves no stamp; chapters
that pass are cached with the stamp of their inputs, each from a clean namespace."""
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import execute_book as E  # noqa: E402


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _setup(monkeypatch, tmp_path, paths):
    monkeypatch.setattr(E, "chapters", lambda: list(paths))
    for name, where in (("CACHE", "cache"), ("DOCTREES", "doctrees"), ("TIMINGS", "t.json")):
        monkeypatch.setattr(E, name, tmp_path / where)
    monkeypatch.setattr(E, "STAMP", tmp_path / "cache" / "stamp")


def test_failing_chapter_fails_the_run(monkeypatch, tmp_path, capsys):
    ok = _nb(tmp_path / "a.ipynb", "x = 1\nx")
    bad = _nb(tmp_path / "b.ipynb", "assert 'x' not in dir(), 'state leaked'\nraise ValueError('boom')")
    _setup(monkeypatch, tmp_path, [ok, bad])
    assert E.main(["--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert "b.ipynb" in err and "boom" in err and "state leaked" not in err
    assert not (tmp_path / "cache" / "stamp").exists()


def test_passing_chapters_are_cached_and_stamped(monkeypatch, tmp_path):
    from jupyter_cache import get_cache
    paths = [_nb(tmp_path / f"{n}.ipynb", f"print({n!r})") for n in "abc"]
    _setup(monkeypatch, tmp_path, paths)
    assert E.main(["--workers", "2"]) == 0
    assert (tmp_path / "cache" / "stamp").read_text() == E.inputs_digest()
    cache = get_cache(str(tmp_path / "cache"))
    for p in paths:
        _, nb = cache.merge_match_into_notebook(nbformat.read(p, as_version=4))
        assert nb.cells[0].outputs[0].text == f"{p.stem}\n"
