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


def test_since_last_release_puts_each_moved_cell_down_to_one_cause(monkeypatch):
    """A cell whose TP changed is the layout's; otherwise the side whose time moved more on a
    log scale (a reload twice as fast outweighs a recompute 1.5x slower: log 2 > log 1.5); a
    cell within MOVED_FRACTION is not listed as moved; a cell with no verdict then is left out."""
    now = current_cell("llama-3.1-8b", "h100-sxm", "host-dram", 8192)
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 8192,
            "winner": now["winner"], "speedup": now["speedup"]}
    rows = [{**base, "tp": now["tp"] + 1, "recompute_s": now["recompute_s"],
             "reload_s": now["reload_s"]},
            {**base, "tp": now["tp"], "recompute_s": now["recompute_s"] / 1.5,
             "reload_s": now["reload_s"] * 2},
            {**base, "tp": now["tp"], "recompute_s": now["recompute_s"] * 2,
             "reload_s": now["reload_s"] * 1.5},
            {**base, "tp": now["tp"], "recompute_s": now["recompute_s"] * 1.05,
             "reload_s": now["reload_s"]},
            {**base, "tp": None, "winner": "beyond context", "speedup": None,
             "recompute_s": None, "reload_s": None}]
    monkeypatch.setattr(C, "snapshot", lambda release=None: {"rows": rows})
    out = C.diff_since_last()
    assert [r["why"] for r in out[:3]] == [C.WHY_NOW_LAYOUT, C.WHY_NOW_RELOAD, C.WHY_NOW_RECOMPUTE]
    assert [r["moved"] for r in out] == [False, True, True, False] and len(out) == 4
    assert not any(r["flipped"] for r in out)


def test_last_release_snapshot_is_the_commit_before_this_release():
    snap = snapshot(C.LAST_RELEASE)
    assert snap["release"] == C.LAST_RELEASE == "0.3.0"
    assert snap["commit"].startswith("78a06f4")
