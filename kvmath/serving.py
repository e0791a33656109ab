"""Numbers for overlap, split loading and the busy server (lambdified :mod:`kvmath.derive_serving`)."""
from __future__ import annotations

import math
from functools import lru_cache

from .evaluate import Numeric, numeric_of, scenario_values


def sfn(name):
    """The lambdified version of ``kvmath.derive_serving.<name>``."""
    return numeric_of("kvmath.derive_serving", name)


def _first_positive(fns, values):
    roots = [f.take(values) for f in fns]
    roots = [float(r.real if isinstance(r, complex) else r) for r in roots
             if not (isinstance(r, complex) and abs(r.imag) > 1e-9 * max(1, abs(r.real)))]
    roots = [r for r in roots if math.isfinite(r) and r > 0]
    return min(roots) if roots else None


def overlap(model, gpu, tier, tokens, new_tokens, tp=1, **kw):
    """Reload serial, reload overlapped layer by layer, recompute: times to first token (s)."""
    v, _ = scenario_values(model, gpu, tier, tp=tp, **kw)
    at = {**v, "T": float(tokens), "n": float(new_tokens)}
    out = {name: float(sfn(name).take(at)) for name in
           ("t_load", "t_new", "t_forward_new", "ttft_serial", "ttft_overlap", "ttft_recompute")}
    out["hides"] = out["t_load"] <= out["t_forward_new"]
    from .evaluate import fn
    if out["t_load"] <= float(fn("t_weights").take(at)):  # the forward's floor already hides it
        out["n_hide_tokens"] = 0.0
    else:
        out["n_hide_tokens"] = (_first_positive(sfn("n_hide"), at) if model.window_layers == 0
                                else None)
    best = min(("reload (overlapped)", out["ttft_overlap"]),
               ("recompute", out["ttft_recompute"]), key=lambda kv: kv[1])
    out["best"] = best[0]
    return out


def split(model, gpu, tier, tokens, tp=1, **kw):
    """Cake-style split: recompute the first x tokens while the rest loads. Times in s."""
    v, _ = scenario_values(model, gpu, tier, tp=tp, **kw)
    at = {**v, "T": float(tokens)}
    x = _first_positive(sfn("x_balance"), at) if model.window_layers == 0 else None
    x = min(max(x or 0.0, 0.0), float(tokens))
    reload = float(sfn("t_split").take({**at, "x": 0.0}))
    from .evaluate import fn
    recompute = float(fn("t_compute").take(at))
    # x = T loads nothing and pays no reload latency: pure recompute
    t_split = recompute if x >= tokens else float(sfn("t_split").take({**at, "x": x}))
    if 0 < x < tokens:  # the recompute part is a pass of its own: at least one read of the weights
        t_split = max(t_split, float(fn("t_weights").take(at)))
    if reload < t_split:  # that pass costs more than loading everything: pure reload
        x, t_split = 0.0, reload
    if recompute < t_split:  # a fixed cost larger than the whole recompute: split never pays
        x, t_split = float(tokens), recompute
    return {"x_tokens": x, "t_split_s": t_split, "t_reload_s": reload, "t_recompute_s": recompute,
            "split_fraction": x / tokens}


def busy(model, gpu, tier, tokens, decode_batch=0, request_overhead_s=0.0, chunk_bytes=None,
         chunk_curve=None, tp=1, **kw):
    """Reload against the marginal cost of recompute inside a busy server (s, tokens).

    chunk_bytes with chunk_curve=(t_0, B) replaces the path bandwidth by the effective
    bandwidth of chunks of that size on the measured curve. request_overhead_s is a what-if
    charged to the reload alone; the engine's own request costs are paid by both sides and
    cancel.
    """
    v, _ = scenario_values(model, gpu, tier, tp=tp, **kw)
    if chunk_bytes is not None and chunk_curve is not None:
        t0c, bc = chunk_curve
        v["B"] = min(v["B"], float(sfn("B_chunked")(s=chunk_bytes, t_0=t0c, B=bc)))
    v.update(b_dec=float(decode_batch), t_req=float(request_overhead_s))
    at = {**v, "T": float(tokens)}
    p_free = float(sfn("p_free").take(v))
    marginal = float(sfn("t_recompute_marginal").take(at))
    reload = float(sfn("t_reload_busy").take(at))
    return {"free_tokens": p_free, "recompute_marginal_s": marginal, "reload_s": reload,
            "reload_fixed_s": v["t_req"] + v["t_0"],
            "reload_bandwidth_Bps": v["B"], "winner": "reload" if reload < marginal else "recompute",
            "short_prompt_crossing_tokens": short_crossing(v)}


@lru_cache(maxsize=None)
def _busy_coeffs():
    return tuple(Numeric.generated(f"derive_serving.busy_advantage.a{i}", "busy coefficient")
                 for i in (2, 1, 0))


def short_crossing(values):
    """Smallest prefix length above the free tokens where reload beats marginal recompute."""
    a2, a1, a0 = (float(c.take(values)) for c in _busy_coeffs())
    p_free = max(float(sfn("p_free").take(values)), 0.0)
    roots = []
    if a2:
        disc = a1 * a1 - 4 * a2 * a0
        if disc >= 0:
            roots = [(-a1 - math.sqrt(disc)) / (2 * a2), (-a1 + math.sqrt(disc)) / (2 * a2)]
    elif a1:
        roots = [-a0 / a1]
    roots = [r for r in roots if r > p_free]
    return min(roots) if roots else None
