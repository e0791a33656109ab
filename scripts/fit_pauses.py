"""Write kvmath/data/traces/pauses_fitted.csv: pause distributions fitted to the bundled traces.

    PYTHONPATH=$PWD python scripts/fit_pauses.py

Rows have the columns of kvmath/data/pauses.csv, so any of them can become a default there;
tests/test_traces.py fails if the file drifts from what kvmath.traces.fit_pauses computes.
"""
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvmath.traces import BUNDLED, PAUSE_ROW_FIELDS, fit_pauses  # noqa: E402

OUT = ROOT / "kvmath" / "data" / "traces" / "pauses_fitted.csv"


def main():
    with open(OUT, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=PAUSE_ROW_FIELDS, lineterminator="\n")
        w.writeheader()
        for name in sorted(BUNDLED):
            w.writerow(fit_pauses(name))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
