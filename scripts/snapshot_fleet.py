"""Write kvmath/data/snapshots/fleet-<release>.json: a release's own ``kvmath fleet`` answers
for the fleet chapter's case (the bundled conversation trace, llama-3.1-70b on dgx-h100
nodes), per router and node count, so the What changed page can set today's fleet beside it.

Run it with the release's code on the path, through its command line (stable across releases),
when a release is cut:

    git worktree add /tmp/r 0.3.0-commit
    PYTHONPATH=/tmp/r python scripts/snapshot_fleet.py 0.3.0 round-robin kv-aware

Each row keeps what every release prints: whether the fleet keeps up ("feasible"), the time to
first token at each percentile it gives, the tokens hit and the tensor-parallel degree.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = "kvmath/data/traces/conversation_trace.jsonl.gz"
MODEL, NODE, NODES = "llama-3.1-70b", "dgx-h100", (2, 4, 6, 8)


def answer(router, nodes):
    out = subprocess.run([sys.executable, "-m", "kvmath", "fleet", TRACE, "--model", MODEL,
                          "--node", NODE, "--nodes", str(nodes), "--router", router, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def row(router, nodes):
    r = answer(router, nodes)
    ttft = r.get("ttft_s")
    if isinstance(ttft, dict):  # from release 0.4.0: every percentile in one object
        pct = {k: v for k, v in ttft.items() if k != "mean"}
    else:
        pct = {k[len("ttft_s_"):]: v for k, v in r.items() if k.startswith("ttft_s_p")}
    feasible = r.get("keeps_up", r.get("feasible"))
    return {"router": router, "nodes": nodes, "feasible": bool(feasible), "ttft_s": pct,
            "token_hit_rate": r["token_hit_rate"], "tp": r.get("tp")}


def main(release, *routers):
    import kvmath
    version = subprocess.run([sys.executable, "-m", "kvmath", "--version"], check=True,
                             capture_output=True, text=True).stdout.split()
    commit = subprocess.run(["git", "-C", str(Path(kvmath.__file__).parent), "rev-parse",
                             "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    rows = [row(r, n) for r in routers for n in NODES]
    out = {"release": release, "commit": commit, "version_printed": " ".join(version),
           "trace": TRACE, "model": MODEL, "node": NODE,
           "computed_with": "scripts/snapshot_fleet.py (the release's kvmath fleet --json)",
           "rows": rows}
    path = ROOT / "kvmath" / "data" / "snapshots" / f"fleet-{release}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    main(*sys.argv[1:])
