"""Write kvmath/data/traces/pauses_fitted.csv: pause distributions fitted to the bundled traces,
and the same rows (NAME-fitted) into kvmath/data/pauses.csv, where conversation-fitted is the
default pause of ``reuse`` and ``tiers``.

    PYTHONPATH=$PWD python scripts/fit_pauses.py

tests/traces/test_traces.py fails if either file drifts from what kvmath.traces.readers.fit_pauses computes.
"""
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvmath.traces.readers import BUNDLED, PAUSE_ROW_FIELDS, fit_pauses  # noqa: E402

OUT = ROOT / "kvmath" / "data" / "traces" / "pauses_fitted.csv"


def main():
    with open(OUT, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=PAUSE_ROW_FIELDS, lineterminator="\n")
        w.writeheader()
        for name in sorted(BUNDLED):
            w.writerow(fit_pauses(name))
    bundled = ROOT / "kvmath" / "data" / "pauses.csv"
    with open(bundled, newline="") as fh:
        others = [r for r in csv.DictReader(fh) if not r["name"].endswith("-fitted")]
    with open(bundled, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=PAUSE_ROW_FIELDS, lineterminator="\n")
        w.writeheader()
        for row in [fit_pauses(name) for name in sorted(BUNDLED)] + others:
            w.writerow(row)
    print(f"wrote {OUT.relative_to(ROOT)} and the fitted rows of {bundled.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
