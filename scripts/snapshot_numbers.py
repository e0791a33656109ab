"""Write tests/snapshots/numbers.json: the CLI's JSON answers over a fixed grid of scenarios.

tests/evaluate/test_snapshot.py checks that the library still gives these numbers (rel. diff <= 1e-9),
so a refactor (generated numeric code, the data layer) cannot silently move an answer.
Regenerate only for a deliberate change of a number: ``python scripts/snapshot_numbers.py``.
"""
import contextlib
import io
import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "snapshots" / "numbers.json"

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b",
          "mistral-7b")
GPUS = ("h100-sxm", "b200", "mi300x", "l40s")
TIERS = ("host-dram", "nvme", "rdma")
TOKENS = (1000, 32000)


def cases():
    """(name, argv) of every snapshotted command."""
    out = []
    for m in MODELS:
        for g in GPUS:
            for t in TIERS:
                for n in TOKENS:
                    out.append(["compare", "--model", m, "--gpu", g, "--tier", t,
                                "--tokens", str(n), "--json"])
    extra = [["--prefill", "ideal"], ["--engine", "ideal"], ["--tp", "8"], ["--batch", "4"],
             ["--kv-dtype", "fp8"], ["--compute-dtype", "fp8"], ["--bandwidth", "20"],
             ["--efficiency", "0.5"], ["--concurrent-reloads", "2"]]
    for e in extra:
        out.append(["compare", "--model", "llama-3.1-70b", "--gpu", "h200", "--tier", "nvme",
                    "--tokens", "8000", "--json", *e])
    for m, g, t in (("llama-3.1-70b", "h100-sxm", "host-dram"), ("deepseek-v3", "h200", "nvme"),
                    ("qwen3-8b", "a100-sxm", "rdma")):
        for p in ("chat-lognormal", "chat-exponential"):
            out.append(["reuse", "--model", m, "--gpu", g, "--tier", t, "--tokens", "16000",
                        "--pause", p, "--json"])
    for node, m in (("dgx-h100", "llama-3.1-70b"), ("dgx-h200", "deepseek-v3"),
                    ("dgx-h100", "llama-3.1-8b")):
        out.append(["tiers", "--node", node, "--model", m, "--tokens", "16000",
                    "--resume-rate", "5", "--json"])
    return out


def run(argv):
    """The parsed JSON a command prints, or {"error": message} for a refused scenario."""
    from kvmath.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if status:
        return {"error": err.getvalue().strip()}
    got = json.loads(out.getvalue())
    # a price's age depends on the day a command runs, not on the model: never snapshotted
    got.pop("price_warnings", None)
    return got


def main():
    snap = {" ".join(a): run(a) for a in cases()}
    OUT.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"{len(snap)} answers -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
