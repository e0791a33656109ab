"""The CLI's answers equal the stored snapshot (scripts/snapshot_numbers.py) to 1e-9 relative.

Written before the generated numeric code and the pydantic data layer: a refactor may move a
number only by floating-point rounding (operations reordered by common-subexpression
elimination: ~1e-15 relative). Keys added or removed since the snapshot are not compared;
every number under a key both have is, and so is every verdict (bools, winner).
"""
import json
import math
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import snapshot_numbers as S  # noqa: E402

SNAP = json.loads((ROOT / "tests" / "snapshots" / "numbers.json").read_text())
REL = 1e-9


def _scales(d):
    """Largest magnitude per unit suffix (``_s``, ``_Bps``, ...) among a dict's numbers."""
    out = {}
    for k, v in d.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            unit = k.rsplit("_", 1)[-1]
            out[unit] = max(out.get(unit, 0.0), abs(v))
    return out


def _same(old, new, where, diffs, scale=0.0):
    """Append to diffs where new differs from old beyond 1e-9 relative. A difference of two
    near-equal terms (a quantity that is zero) is held to 1e-9 of the largest number with the
    same unit in its record, the size of the terms it was computed from."""
    if isinstance(old, dict) and isinstance(new, dict):
        scales = _scales(old)
        for k in old.keys() & new.keys():
            _same(old[k], new[k], f"{where}.{k}", diffs, scales.get(k.rsplit("_", 1)[-1], 0.0))
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            diffs.append(f"{where}: length {len(old)} -> {len(new)}")
        for i, (a, b) in enumerate(zip(old, new)):
            _same(a, b, f"{where}[{i}]", diffs, scale)
    elif isinstance(old, bool) or isinstance(new, bool):
        if old != new:
            diffs.append(f"{where}: {old} -> {new}")
    elif isinstance(old, (int, float)) and isinstance(new, (int, float)):
        if not math.isclose(old, new, rel_tol=REL, abs_tol=REL * scale):
            diffs.append(f"{where}: {old!r} -> {new!r}")
    elif where.endswith((".winner", ".error", ".prefill_model")) and old != new:
        diffs.append(f"{where}: {old!r} -> {new!r}")


def test_snapshot_covers_every_case():
    assert sorted(SNAP) == sorted(" ".join(a) for a in S.cases())


@pytest.mark.parametrize("argv", S.cases(), ids=lambda a: " ".join(a[:8]) + " " + " ".join(a[9:]))
def test_answer_unchanged(argv):
    diffs = []
    _same(SNAP[" ".join(argv)], S.run(argv), "", diffs)
    assert not diffs, "; ".join(diffs[:5])
