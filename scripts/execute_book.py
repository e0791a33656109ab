"""Execute every chapter notebook of the book, in parallel, into the cache the book build reads.

`make book` runs this and then `jupyter-book build` (``execute_notebooks: cache``), so every
build re-executes every chapter; this only makes that parallel and cheaper. Each worker
starts one kernel and runs its chapters in it in turn, each from a clean namespace
(``%reset -f``, matplotlib's settings and the working directory restored), so the imports
(SymPy, matplotlib, kvmath) are paid once per worker rather than once per chapter.
``make test`` still runs every notebook in a fresh kernel of its own (nbval), so a chapter
that leaned on another's state would fail there.

The cache is emptied first, then each executed notebook is stored with a stamp of the
inputs (kvmath's code and data, the notebooks, the pinned requirements); the book's
extension (``_ext/kvmath_site.py``) empties the cache when the stamp does not match, so a
bare ``jupyter-book build`` can never render outputs of other inputs.

Usage: python scripts/execute_book.py [--workers N]   (default: the CPU count, at most 4)
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
from book_inputs import CACHE, DOCTREES, STAMP, inputs_digest  # noqa: E402

#: each chapter's last execution time, to start the longest first (kept outside _build)
TIMINGS = ROOT / ".chapter-seconds.json"
#: once per kernel: matplotlib's settings and the working directory to restore before each
#: chapter, and a rarer cyclic garbage collection (SymPy and matplotlib make many objects that
#: live long; it changes no output)
INIT = ("import builtins, gc, os, matplotlib, matplotlib.pyplot\n"
        "builtins._kvmath_rc, builtins._kvmath_cwd = matplotlib.rcParams.copy(), os.getcwd()\n"
        "gc.freeze()\ngc.set_threshold(200_000, 50, 50)")
RESET = ("%reset -f\nimport builtins as _b, os as _os, warnings as _w, matplotlib as _m\n"
         "with _w.catch_warnings():\n    _w.simplefilter('ignore')\n    _m.rcParams.update(_b._kvmath_rc)\n"
         "_os.chdir(_b._kvmath_cwd)\ndel _b, _os, _w, _m")


def chapters():
    """Notebook paths in the order of _toc.yml (pages without a notebook are skipped)."""
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"], *(c["file"] for c in toc.get("chapters", []))]
    return [ROOT / f"{f}.ipynb" for f in files if (ROOT / f"{f}.ipynb").exists()]


def worker(todo, done):
    """Run notebooks from the queue in one kernel; put (path, notebook or error, seconds)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    book = chapters()[0].parent
    client = NotebookClient(nbformat.v4.new_notebook(), timeout=600, kernel_name="python3",
                            allow_errors=False, record_timing=False,  # cell metadata is hashed
                            shutdown_kernel="immediate",  # nothing is left to save
                            resources={"metadata": {"path": str(book)}})

    def run(code):  # in a scratch notebook: execute_cell stores the cell back into client.nb
        client.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        client.execute_cell(client.nb.cells[0], 0)

    with client.setup_kernel():
        run(INIT)
        for path in iter(todo.get, None):
            start, nb = time.perf_counter(), nbformat.read(path, as_version=4)
            try:
                run(RESET)
                client.nb = nb
                for index, cell in enumerate(nb.cells):
                    client.execute_cell(cell, index)
            except CellExecutionError as exc:  # the chapter's error: report it, go on
                done.put((str(path), str(exc).strip().splitlines()[-1], None))
                continue
            except Exception as exc:  # the kernel died or timed out: this worker stops
                done.put((str(path), f"{type(exc).__name__}: {exc}", None))
                return
            done.put((str(path), nb, time.perf_counter() - start))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    paths, digest = chapters(), inputs_digest()  # the inputs as they are when execution starts
    seconds = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    paths.sort(key=lambda p: -seconds.get(p.name, 1e9))  # longest first
    shutil.rmtree(CACHE, ignore_errors=True)
    shutil.rmtree(DOCTREES, ignore_errors=True)  # a build after this one must read every chapter again
    todo, done = mp.Queue(), mp.Queue()
    for p in paths:
        todo.put(p)
    workers = [mp.Process(target=worker, args=(todo, done)) for _ in range(max(1, args.workers))]
    for w in workers:
        todo.put(None)
        w.start()
    from jupyter_cache import get_cache  # after the workers start: they need none of it
    from jupyter_cache.base import CacheBundleIn
    cache = get_cache(str(CACHE))
    t0, failed = time.perf_counter(), []
    for _ in paths:
        while True:
            try:
                path, nb, took = done.get(timeout=5)
                break
            except queue.Empty:
                if not any(w.is_alive() for w in workers):
                    failed.append("every worker stopped before all chapters ran (see the errors above)")
                    break
        if failed and failed[-1].startswith("every worker"):
            break
        if took is None:
            failed.append(f"{os.path.relpath(path, ROOT)}: {nb}")
            continue
        seconds[Path(path).name] = round(took, 2)
        cache.cache_notebook_bundle(CacheBundleIn(nb, path, data={"execution_seconds": took}),
                                    check_validity=False, overwrite=True)
        print(f"executed {os.path.relpath(path, ROOT)} in {took:.1f} s", flush=True)
    for w in workers:
        w.join()
    if inputs_digest() != digest:
        failed.append("an input changed while the chapters ran: run again")
    if failed:
        print("\n".join(["chapters that failed:", *failed]), file=sys.stderr)
        return 1
    STAMP.write_text(digest)
    TIMINGS.write_text(json.dumps(seconds, indent=1, sort_keys=True))
    print(f"{len(paths)} chapters in {time.perf_counter() - t0:.1f} s on {len(workers)} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
