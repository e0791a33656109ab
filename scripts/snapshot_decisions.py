"""Store the current decision tables as the snapshot of a release, for the next What changed page.

    python scripts/snapshot_decisions.py 0.2.0    # writes kvmath/data/snapshots/decisions-0.2.0.json

Run it when a release is cut; then set kvmath.evaluate.changes.PREVIOUS_RELEASE to that release in the
next one.
"""
import json
import subprocess
import sys

from kvmath.evaluate.changes import current_cell, snapshot
from kvmath.tables.rows import data_path


def main(release):
    grid = snapshot()["rows"]  # the same cells as the previous snapshot
    rows = []
    for g in grid:
        r = current_cell(g["model"], g["gpu"], g["tier"], g["tokens"])
        rows.append({k: g[k] for k in ("model", "gpu", "tier", "tokens")}
                    | {"tp": r["tp"], "winner": r["winner"], "speedup": r["speedup"],
                       "recompute_s": r.get("recompute_s"), "reload_s": r.get("reload_s"),
                       "breakeven_tokens": r.get("breakeven_tokens")})
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    out = {"release": release, "commit": commit.strip(), "rows": rows,
           "computed_with": "kvmath.evaluate.changes.current_cell (defaults of that release)"}
    path = data_path("snapshots") / f"decisions-{release}.json"
    path.write_text(json.dumps(out, indent=0))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1])
