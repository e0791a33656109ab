"""What changed: the decision tables now against a stored snapshot of a previous release.

A snapshot (``kvmath/data/snapshots/decisions-<release>.json``) holds, per (model, GPU, tier,
prompt length), the winner, speed-up and TP that release published. :func:`diff` recomputes
each cell on the current model and lists the verdicts that flipped, with which of this
release's changes flips it back (the ideal prefill model, the ideal engine).
``scripts/snapshot_decisions.py`` writes the snapshot of the current release.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import lru_cache

from kvmath.evaluate.api import DEFAULT_ENGINE, ScenarioError, compare
from kvmath.evaluate.reuse import _kind, best_ttl, pause_values, rfn
from kvmath.tables.rows import bundled, data_path, engines

#: the release whose published tables the What-changed page compares against
PREVIOUS_RELEASE = "0.1.0"


@lru_cache(maxsize=None)
def snapshot(release=PREVIOUS_RELEASE):
    """The stored decision table of a release (a dict with 'rows')."""
    with open(data_path("snapshots") / f"decisions-{release}.json") as fh:
        return json.load(fh)


@lru_cache(maxsize=None)
def current_cell(model, gpu, tier, tokens, **kw):
    """The current verdict of one cell: compare() on the default layout, engine and prefill
    model, or a one-word reason when the cell no longer exists ('beyond context', 'no fit').
    Remembered per process (read it, do not change it): the page asks for cells twice."""
    cat = bundled()
    m = cat.models[model]
    if tokens > m.max_context_tokens:
        return {"winner": "beyond context", "speedup": None, "tp": None}
    try:
        r = compare(m, cat.gpus[gpu], cat.tiers[tier], tokens, **kw)
    except ScenarioError:
        return {"winner": "no fit", "speedup": None, "tp": None}
    return r


def diff(release=PREVIOUS_RELEASE, gpus=None, tokens=None, attribute=True):
    """Rows of the snapshot with their current verdict; 'flipped' when the winner changed.

    attribute: for each flipped cell, the verdict with the flat (ideal) prefill model and with
    the ideal engine, which tell whether the calibrated prefill or the engine's costs flipped it
    (neither: the per-hop counting, concurrency or the deployment did)."""
    out = []
    for row in snapshot(release)["rows"]:
        if (gpus and row["gpu"] not in gpus) or (tokens and row["tokens"] not in tokens):
            continue
        now = current_cell(row["model"], row["gpu"], row["tier"], row["tokens"])
        entry = {**{k: row[k] for k in ("model", "gpu", "tier", "tokens")},
                 "old_winner": row["winner"], "old_speedup": row["speedup"], "old_tp": row["tp"],
                 "new_winner": now["winner"], "new_speedup": now["speedup"],
                 "new_tp": now["tp"],
                 "flipped": now["winner"] in ("reload", "recompute")
                 and now["winner"] != row["winner"]}
        if entry["flipped"] and attribute:
            for key, kw in (("winner_ideal_prefill", {"prefill": "ideal"}),
                            ("winner_ideal_engine", {"engine": "ideal"})):
                entry[key] = current_cell(row["model"], row["gpu"], row["tier"], row["tokens"],
                                          **kw)["winner"]
        out.append(entry)
    return out


def tp_moves(release=PREVIOUS_RELEASE):
    """{(model, gpu, tokens): (then, now)} for every snapshot cell whose tensor-parallel degree
    changed (the degree does not depend on the tier); cells beyond the context or fitting no
    layout are left out. Only the layout is chosen, not the whole comparison."""
    from kvmath.evaluate.api import choose_layout
    cat, out = bundled(), {}
    for row in snapshot(release)["rows"]:
        key = (row["model"], row["gpu"], row["tokens"])
        m = cat.models[row["model"]]
        if key in out or row["tp"] is None or row["tokens"] > m.max_context_tokens:
            continue
        try:
            now = choose_layout(m, cat.gpus[row["gpu"]], row["tokens"]).tp
        except ScenarioError:
            continue
        if now != row["tp"]:
            out[key] = (row["tp"], now)
    return out


#: the release just before this one: its tables were stored before the engine-version and MoE
#: corrections, so the What-changed page lists what those corrections flip
EARLIER_RELEASE = "0.2.0"
#: the vLLM profile as it was before v0.27.0 (one host slot per rank)
OLD_VLLM = "vllm-cross-layer-v0.26"
#: the vLLM profile as it was from v0.27.0 through v0.28.0 (cross-layer blocks by default)
CROSS_LAYER_VLLM = "vllm-cross-layer"
#: the causes diff_since_earlier names, in the order it tries them
WHY_KERNEL = "vLLM loads small pages by a copy kernel (v0.29.0; its rate assumed)"
WHY_LAYOUT = "vLLM copies one page per layer per block (v0.29.0)"
WHY_MLA = "vLLM stores an MLA latent once per node (v0.27.0)"
WHY_MOE = "MoE forward charges only the experts its tokens touch"


#: the cause of a flip neither the MLA store nor the MoE forward explains: this release's
#: times to first token (the engine's costs per loaded token, the step's read of the KV)
OTHER_CAUSE = ("times to first token: the connector's cost per loaded token and the new token's "
               "read of the prefix's KV")


def diff_since_earlier(gpus=None):
    """:func:`diff` against :data:`EARLIER_RELEASE`, each flipped cell with its cause in words
    (``why``): recomputed with the default profile's small loads by driver copies, a cell that
    returns to its old winner flipped because of the copy kernel's assumed rate
    (:data:`WHY_KERNEL`); else with vLLM's cross-layer profile (v0.27.0 to v0.28.0), a cell that
    returns to its old winner flipped because vLLM v0.29.0 copies pages of one layer
    (:data:`WHY_LAYOUT`); else with the pre-0.27 profile, because vLLM now stores an MLA latent
    once per node (:data:`WHY_MLA`); an MoE cell otherwise because only the experts its tokens
    touch are charged (:data:`WHY_MOE`); any other flip: :data:`OTHER_CAUSE`."""
    rows = diff(EARLIER_RELEASE, gpus=gpus, attribute=False)
    cat = bundled()
    for r in rows:
        if not r["flipped"]:
            continue
        cell = (r["model"], r["gpu"], r["tier"], r["tokens"])
        by_driver = replace(engines()[DEFAULT_ENGINE], kernel_below_bytes=None)
        if current_cell(*cell, engine=by_driver)["winner"] == r["old_winner"]:
            r["why"] = WHY_KERNEL
        elif current_cell(*cell, engine=CROSS_LAYER_VLLM)["winner"] == r["old_winner"]:
            r["why"] = WHY_LAYOUT
        elif current_cell(*cell, engine=OLD_VLLM)["winner"] == r["old_winner"]:
            r["why"] = WHY_MLA
        elif cat.models[r["model"]].is_moe:
            r["why"] = WHY_MOE
        else:
            r["why"] = OTHER_CAUSE
    return rows


#: the release just before this one (its tables stored at its last commit, before the package
#: split, the engines' copies, the per-GPU operator fits and the fleet's scheduler)
LAST_RELEASE = "0.3.0"
#: the causes diff_since_last names: the side of the comparison that moved, or the layout
WHY_NOW_LAYOUT = ("layout: one rule in every command (the weights, this prompt's KV and the "
                  "node's running batch fit)")
WHY_NOW_RECOMPUTE = ("recompute: the GPU's own measured operators (AIConfigurator), MoE on its "
                     "engine's fused operator, experts run as the layout runs them")
WHY_NOW_RELOAD = ("reload: copies as the engine issues them (batched driver copies, its kernel) "
                  "and request costs refitted on independent sources")
#: a time that moved by more than this fraction is listed as moved: twice the 5 % the validation
#: chapter calls marginal (MARGIN_FACTOR), so a listed move is not rounding or fit noise
MOVED_FRACTION = 0.10


def _cause_now(old, new):
    if old["tp"] != new["tp"]:
        return WHY_NOW_LAYOUT
    rec = abs(math.log(new["recompute_s"] / old["recompute_s"]))
    rel = abs(math.log(new["reload_s"] / old["reload_s"]))
    return WHY_NOW_RECOMPUTE if rec >= rel else WHY_NOW_RELOAD


def diff_since_last(gpus=None):
    """Every cell of :data:`LAST_RELEASE`'s snapshot that has a verdict then and now, with both
    sides' times then and now (``recompute_then``/``_now``, ``reload_then``/``_now``, s), the
    speed-ups, ``flipped``, ``moved`` (either time moved by more than :data:`MOVED_FRACTION`)
    and ``why``: the layout when the tensor-parallel degree changed, else the side whose time
    moved more (on a log scale). Cells with no verdict then or now are left out (they are in
    :func:`diff`)."""
    out = []
    for row in snapshot(LAST_RELEASE)["rows"]:
        if (gpus and row["gpu"] not in gpus) or row["winner"] not in ("reload", "recompute"):
            continue
        now = current_cell(row["model"], row["gpu"], row["tier"], row["tokens"])
        if now["winner"] not in ("reload", "recompute"):
            continue
        rec, rel = now["recompute_s"] / row["recompute_s"], now["reload_s"] / row["reload_s"]
        out.append({**{k: row[k] for k in ("model", "gpu", "tier", "tokens")},
                    "tp_then": row["tp"], "tp_now": now["tp"],
                    "winner_then": row["winner"], "winner_now": now["winner"],
                    "speedup_then": row["speedup"], "speedup_now": now["speedup"],
                    "recompute_then": row["recompute_s"], "recompute_now": now["recompute_s"],
                    "reload_then": row["reload_s"], "reload_now": now["reload_s"],
                    "flipped": now["winner"] != row["winner"],
                    "moved": max(abs(rec - 1), abs(rel - 1)) > MOVED_FRACTION,
                    "why": _cause_now(row, now)})
    return out


def cause(entry):
    """Which change of this release flips a cell, in words."""
    if entry.get("winner_ideal_engine") == entry["old_winner"]:
        return "engine costs (copy size, fixed cost, overlapping writes)"
    if entry.get("winner_ideal_prefill") == entry["old_winner"]:
        return "calibrated prefill"
    if entry["old_tp"] != entry["new_tp"]:
        return "deployment that fits (TP), bytes per hop and concurrency"
    return "bytes per hop and concurrent reloads"


def breakeven_then_now(r, pause):
    """(previous release's, this release's) break-even return probability of a
    :func:`kvmath.evaluate.reuse.reuse` answer ``r``: then p*(tau) at the TTL best for the pause's own
    return probability (an upper bound), now the least p*(tau) over tau (None: above 1).
    (None, None) when reload saves nothing: no probability is defined then."""
    if r["saving_gpu_s"] <= 0:
        return None, None
    kind = _kind(pause)
    v = {**pause_values(pause), "S_gpu": r["saving_gpu_s"], "c_gpu": r["saving_usd"] / r["saving_gpu_s"],
         "c_cap": r["capacity_usd_per_byte_s"], "c_wear": r["write_usd_per_byte"], "Q": r["kv_bytes"],
         "f_new": r["new_fraction"]}
    tau = best_ttl(kind, v)
    then = float(rfn(f"p_breakeven_{kind}").take({**v, "tau": tau if tau > 0 else pause.median_s}))
    return then, r["p_breakeven"]
