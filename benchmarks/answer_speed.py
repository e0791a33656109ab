"""Benchmark: interactive time of an answer, the grid ratio and the book build, one JSON line.

* ``cli_compare_s`` and ``import_sympy_numpy_s``: medians of ``--runs`` wall times each, the
  two taken in turn in one run (target: ratio <= 1.5);
* ``grid_ratio``: generated / hand-written numpy on the 1,008,000-point grid, runs taken in
  turn (benchmarks/evaluate_grid.py; target <= 1.2);
* with ``--book``: ``make book`` from clean (``_build`` removed) and again (a rebuild), s
  (targets 60 and 30); both execute every chapter (``scripts/execute_book.py``, then
  ``jupyter-book build`` reads the execution cache).

Run: ``python benchmarks/answer_speed.py [--runs 5] [--book]`` from the repository root.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPARE = [sys.executable, "-m", "kvmath", "compare", "--model", "llama-3.1-70b", "--gpu",
           "h100-sxm", "--tier", "nvme", "--tokens", "32768"]
IMPORT = [sys.executable, "-c", "import sympy, numpy"]
#: this checkout's kvmath, also in the book's kernels (not an installed copy elsewhere)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--book", action="store_true", help="also time a clean book build and a rebuild")
    args = ap.parse_args()
    wall(COMPARE), wall(IMPORT)  # warm the file cache and the bytecode
    cli, imp = [], []
    for _ in range(args.runs):
        cli.append(wall(COMPARE))
        imp.append(wall(IMPORT))
    out = {"cli_compare_s": statistics.median(cli), "import_sympy_numpy_s": statistics.median(imp)}
    out["cli_over_import"] = out["cli_compare_s"] / out["import_sympy_numpy_s"]
    grid = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "evaluate_grid.py")], cwd=ROOT,
                          env=ENV, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    out["grid_ratio"] = json.loads(grid)["lambdified_over_handwritten"]
    if args.book:
        execute = [sys.executable, str(ROOT / "scripts" / "execute_book.py")]
        build = [str(pathlib.Path(sys.executable).parent / "jupyter-book"), "build", ".", "--all",
                 "-W", "-n", "--keep-going"]
        shutil.rmtree(ROOT / "_build", ignore_errors=True)
        for name in ("book_clean", "book_rebuild"):
            out[f"{name}_execute_s"] = wall(execute)
            out[f"{name}_s"] = out[f"{name}_execute_s"] + wall(build)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
