"""Benchmark: the reload-minus-recompute advantage over a grid of >= 1,000,000 points.

Three ways in one run, on the same inputs:
  1. the function generated from the SymPy expression (kvmath/_generated/numeric.py, what kvmath uses),
  2. a hand-written numpy copy of the same formula (exists only here, as the yardstick),
  3. ``subs().evalf()`` on a sample (the slow path lambdify replaces).
The three must agree; the last line printed is one JSON object with the timings
and the ratio generated / hand-written (target: at most 1.2), best of ``--repeats`` runs each,
taken in turn.

Run: ``make bench`` or ``python benchmarks/evaluate_grid.py [--lengths N]``.
"""
import argparse
import json
import time

import numpy as np

from kvmath import bundled
from kvmath.derive import kv as D
from kvmath.evaluate.api import fn, scenario_values
from kvmath.logic.path import tier_exists_on


def grid(n_lengths):
    """Per-scenario parameter columns (shape (S, 1)) and lengths (shape (1, N))."""
    cat = bundled()
    rows = []
    # tiers of one GPU family are taken on that family only, projections not at all
    models = list(cat.models.values())
    gpus = [g for g in cat.gpus.values() if g.kind != "projection"]
    for model in models:
        for gpu in gpus:
            for tier in cat.tiers.values():
                if not tier_exists_on(tier, gpu.name) or any(
                        cat.links[h.link].kind == "projection" for h in tier.hops
                        if h.link in cat.links):
                    continue
                v = scenario_values(model, gpu, tier)[0]
                rows.append({k: x for k, x in v.items() if isinstance(x, (int, float))})
    names = sorted({k for r in rows for k in r})
    cols = {k: np.array([float(r[k]) for r in rows])[:, None] for k in names}
    lengths = np.geomspace(1, 1e6, n_lengths)[None, :]
    return cols, lengths, rows


def handwritten(c, T):
    """t_reload - t_recompute, written out by hand in numpy: full, windowed, chunked-local,
    sparse (an indexer and top-k attention) and recurrent layers."""
    held = c["L_full"] * T + c["L_win"] * np.minimum(T, c["W"]) + c["L_chunk"] * np.minimum(T, c["C_ch"])
    # a hybrid model's recurrent state: the same at any length, split by head
    state = c["L_rec"] * (c["n_rv"] * c["d_rk"] * c["d_rv"] + (c["k_conv"] - 1) * (
        2 * c["n_rk"] * c["d_rk"] + c["n_rv"] * c["d_rv"])) * c["b_st"]
    per_token = c["e_kv"] * c["b_kv"] + c["e_aux"] * c["b_aux"]  # the indexer's keys beside the KV
    reload = (c["t_0"] + c["c_hit"] * T + per_token * c["rho"] * held / c["K"] / c["B"]
              + state / (c["K"] * c["B_state"]))
    mw, mk = np.minimum(T, c["W"]), np.minimum(T, c["k_sel"])
    # a full layer's pairs: dense up to the top-k, then each query attends k_sel keys
    full = np.where(T <= c["k_sel"], T * (T + 1) / 2 * (c["d_qk"] + c["d_v"]),
                    (c["d_qs"] + c["d_vs"]) * (c["k_sel"] * (T - mk) + (mk + 1) * mk / 2))
    chunks = np.floor(T / c["C_ch"])
    rest = T - c["C_ch"] * chunks
    local = (c["L_chunk"] * (c["C_ch"] * (c["C_ch"] + 1) * chunks / 2 + rest * (rest + 1) / 2)
             + c["L_win"] * (mw * (mw + 1) / 2 + (T - mw) * c["W"]))
    pairs = c["L_full"] * full + (c["d_qk"] + c["d_v"]) * local
    flops = (2 * c["N_lin"] * T + 2 * c["n_q"] * pairs + c["H_I"] * c["L_full"] * c["d_I"] * T * (T + 1)
             + 4 * c["L_rec"] * c["n_rv"] * c["d_rk"] * c["d_rv"] * T)
    routed = 2 * c["N_xa"] * T
    compute = ((flops - routed) / c["K"] + routed / c["K_e"]) / (c["eta"] * c["P"])
    weights = ((c["N_tot"] - c["N_xs"]) * c["b_w"] / c["K"] + c["N_xs"] * c["b_w"] / c["K_e"]) / c["B_hbm"]
    return reload - np.maximum(compute, weights), reload


def best_of_interleaved(fs, repeats):
    """Best time and result of each function, their runs taken in turn (a, b, a, b, ...) so
    that neither meets a warmer allocator or cache than the other."""
    times, outs = [[] for _ in fs], [None] * len(fs)
    for _ in range(repeats):
        for i, f in enumerate(fs):
            t0 = time.perf_counter()
            outs[i] = f()
            times[i].append(time.perf_counter() - t0)
    return [(min(t), o) for t, o in zip(times, outs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, default=1800, help="prefix lengths per scenario")
    ap.add_argument("--sample", type=int, default=5, help="points for subs().evalf()")
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()

    cols, T, rows = grid(args.lengths)
    points = cols["K"].shape[0] * T.shape[1]
    lam = fn("t_advantage")
    at = {**cols, "T": T}
    (lam_s, lam_out), (hand_s, (hand_out, hand_reload)) = best_of_interleaved(
        [lambda: lam.take(at), lambda: handwritten(cols, T)], args.repeats)
    assert lam_out.shape == hand_out.shape == (len(rows), T.shape[1])
    # relative to the reload time: the advantage itself crosses zero
    max_rel = float(np.max(np.abs(lam_out - hand_out) / np.abs(hand_reload)))
    # the two order their operations differently; where the recompute is a million times the
    # reload (a million tokens on the slowest tiers) a rounding of the recompute is that much
    # larger against the reload: 1e-10 leaves room for it and still catches a wrong term
    assert max_rel < 1e-10, max_rel

    rng = np.random.default_rng(0)
    picks = [(int(rng.integers(len(rows))), int(rng.integers(T.shape[1])))
             for _ in range(args.sample)]
    expr = D.t_advantage
    t0 = time.perf_counter()
    sub_vals = []
    for i, j in picks:
        values = {**rows[i], "T": float(T[0, j])}
        sub_vals.append(float(expr.subs({s: values[s.name] for s in expr.free_symbols}).evalf()))
    sub_s = (time.perf_counter() - t0) / len(picks)
    sub_rel = max(abs(v - lam_out[i, j]) / abs(lam_out[i, j]) for v, (i, j) in zip(sub_vals, picks))
    assert sub_rel < 1e-9, sub_rel

    print(f"{points:,} points ({len(rows)} model x GPU x tier scenarios x {T.shape[1]} lengths)")
    print(f"lambdified      {lam_s * 1e3:9.1f} ms  ({lam_s / points * 1e9:.1f} ns/point)")
    print(f"hand numpy      {hand_s * 1e3:9.1f} ms  ({hand_s / points * 1e9:.1f} ns/point)")
    print(f"subs().evalf()  {sub_s * 1e3:9.2f} ms/point on {len(picks)} sampled points")
    print(f"generated / hand-written = {lam_s / hand_s:.2f} (target <= 1.2); "
          f"subs / lambdified per point = {sub_s / (lam_s / points):.3g}")
    print(json.dumps({"points": points, "lambdified_s": lam_s, "handwritten_numpy_s": hand_s,
                      "sympy_subs_s_per_point": sub_s,
                      "lambdified_over_handwritten": lam_s / hand_s,
                      "max_rel_diff_lambdified_vs_handwritten": max_rel,
                      "max_rel_diff_subs_vs_lambdified": sub_rel}))


if __name__ == "__main__":
    main()
