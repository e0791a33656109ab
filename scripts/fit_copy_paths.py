"""Fit the batched driver copy's per-copy costs and rates on vLLM PR 42212's measured batch
rates (transfer_curves.csv) and write them, with the copy kernel's assumed fractions that follow
from vLLM's threshold, into kvmath/data/copy_paths.csv's pcie-gen5-x16 rows
(kvmath.evaluate.copy_fit.fit). tests/evaluate/test_copy_paths.py checks that the committed
values are the fit's. ``python scripts/fit_copy_paths.py``
"""
import csv
import pathlib

from kvmath.evaluate.copy_fit import CLIFF_BYTES, LINK, fit

PATH = pathlib.Path(__file__).resolve().parents[1] / "kvmath" / "data" / "copy_paths.csv"
FIELDS = ("per_copy_s", "per_copy_fast_s", "per_copy_slow_s", "rate_fraction",
          "rate_fraction_low", "rate_fraction_high")


def main():
    f = fit()
    with PATH.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    for r in rows:
        if r["link"] != LINK or r["direction"] != "h2d":
            continue
        part = ("kernel" if r["path"] == "kernel"
                else "small" if float(r["from_bytes"]) < CLIFF_BYTES else "large")
        for k in FIELDS:
            if k in f[part]:
                r[k] = f"{f[part][k]:.4g}"
    with PATH.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f)


if __name__ == "__main__":
    main()
