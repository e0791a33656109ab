"""The What-changed page: flips are found from a stored snapshot, not typed."""
import kvmath.evaluate.changes as C
from kvmath.evaluate.changes import cause, current_cell, diff, snapshot


def test_previous_snapshot_is_bundled_and_complete():
    snap = snapshot()
    assert snap["release"] == C.PREVIOUS_RELEASE and len(snap["commit"]) == 40
    cells = {(r["model"], r["gpu"], r["tier"], r["tokens"]) for r in snap["rows"]}
    assert len(cells) == len(snap["rows"])
    assert all(r["winner"] in ("reload", "recompute") for r in snap["rows"])


def test_diff_finds_a_flip_and_its_cause(monkeypatch):
    now = current_cell("llama-3.1-8b", "h100-sxm", "host-dram", 8192)
    other = "recompute" if now["winner"] == "reload" else "reload"
    rows = [{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 8192,
             "tp": now["tp"], "winner": other, "speedup": 2.0},
            {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 4096,
             "tp": 1, "winner": now["winner"], "speedup": 2.0},
            {"model": "llama-2-7b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768,
             "tp": 1, "winner": "reload", "speedup": 2.0}]
    monkeypatch.setattr(C, "snapshot", lambda release=None: {"rows": rows})
    out = diff()
    assert [r["flipped"] for r in out] == [True, False, False]
    assert out[2]["new_winner"] == "beyond context"
    assert isinstance(cause(out[0]), str) and out[0]["winner_ideal_engine"] in ("reload", "recompute")


def test_tp_moves_match_the_full_diff():
    """Choosing only the layout finds the same TP moves as comparing every cell."""
    from kvmath.evaluate.changes import diff, tp_moves
    full = {(r["model"], r["gpu"], r["tokens"]): (r["old_tp"], r["new_tp"]) for r in diff(attribute=False)
            if r["new_tp"] is not None and r["old_tp"] is not None and r["new_tp"] != r["old_tp"]}
    assert tp_moves() == full and full


def test_breakeven_then_now_without_saving():
    """Where reload saves nothing neither definition gives a probability (no division by zero)."""
    from kvmath.evaluate.changes import breakeven_then_now
    from kvmath.evaluate.reuse import reuse
    from kvmath.tables.rows import pauses
    from kvmath import bundled
    cat = bundled()
    r = reuse(cat.models["llama-2-7b"], cat.gpus["h100-sxm"], cat.tiers["nvme-1drive"], 4096,
              pauses()["chat-lognormal"], tp=1)
    assert r["saving_gpu_s"] < 0 and breakeven_then_now(r, pauses()["chat-lognormal"]) == (None, None)
