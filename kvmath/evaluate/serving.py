"""Numbers for overlap, split loading and the busy server (lambdified :mod:`kvmath.derive.serving`)."""
from __future__ import annotations

import math
from functools import lru_cache

from kvmath.evaluate.api import (Numeric, ScenarioError, fn, numeric_of, recompute_fn,
                                     scenario_values, time_step)
from kvmath.tables.rows import bundled


def sfn(name):
    """The lambdified version of ``kvmath.derive.serving.<name>``."""
    return numeric_of("kvmath.derive.serving", name)


def _prefill(model, gpu, v, prefill, batch=1):
    """(name of the prefill model, f(T) -> s) of ``batch`` prompts in one pass: compare's,
    calibrated by default."""
    return recompute_fn(model, gpu, v["layout"], v, prefill, batch=batch)


def _bisect_first(f, lo, hi, iterations=60):
    """Smallest x in [lo, hi] with f(x) >= 0 for an increasing f (f(hi) >= 0), to ~1e-12."""
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if f(mid) >= 0:
            hi = mid
        else:
            lo = mid
    return hi


def overlap(model, gpu, tier, tokens, new_tokens, tp=1, prefill="calibrated", **kw):
    """Reload serial, reload overlapped layer by layer, recompute: times to first token (s).

    Every compute time comes from ``prefill`` (compare's calibrated operator model by default,
    ``ideal`` for the flat roofline of :mod:`kvmath.derive.serving`). The new turn's forward is
    the engine step a reload pays (t_suffix: its tokens over the loaded prefix). The request's
    own costs are paid either way and left out of all three.
    """
    v, _ = scenario_values(model, gpu, tier, tp=tp, new_tokens=new_tokens, **kw)
    name, rec = _prefill(model, gpu, v, prefill)
    at = time_step(v, rec, float(tokens))
    t_load = float(sfn("t_load").take(at))
    forward = at["t_step"]
    out = {"prefill_model": name, "t_load": t_load,
           "t_new": max(at["t_rec_pn"] - at["t_rec_p"], 0.0), "t_forward_new": forward}
    pipe = {**at, "load_time": t_load, "forward_time": forward}
    out["ttft_serial"] = float(sfn("ttft_serial_pipe").take(pipe))
    out["ttft_overlap"] = float(sfn("ttft_pipeline").take(pipe))
    out["ttft_recompute"] = float(at["t_rec_pn"])
    out["hides"] = t_load <= forward
    out["n_hide_tokens"] = _new_tokens_to_hide(v, rec, float(tokens), t_load)
    best = min(("reload (overlapped)", out["ttft_overlap"]),
               ("recompute", out["ttft_recompute"]), key=lambda kv: kv[1])
    out["best"] = best[0]
    return out


#: the largest turn searched for one that hides a load, tokens (beyond any bundled window)
MAX_HIDE_TOKENS = 2.0 ** 24


def _new_tokens_to_hide(values, rec, tokens, t_load):
    """Fewest new tokens whose forward over the prefix takes as long as the load (0 when one
    token's already does; None when no turn up to MAX_HIDE_TOKENS does)."""
    def slack(n):
        return time_step({**values, "n": n}, rec, tokens)["t_step"] - t_load
    if slack(1.0) >= 0:
        return 0.0
    if slack(MAX_HIDE_TOKENS) < 0:
        return None
    return float(math.ceil(_bisect_first(slack, 1.0, MAX_HIDE_TOKENS) - 1e-9))  # whole tokens


def split(model, gpu, tier, tokens, tp=1, prefill="calibrated", **kw):
    """Cake-style split: recompute the first x tokens while the rest loads. Times in s.

    The recompute part is timed by ``prefill`` (calibrated by default, ``ideal`` for the flat
    roofline), as a pass of its own: at least one read of the weights.
    """
    v, _ = scenario_values(model, gpu, tier, tp=tp, **kw)
    name, rec = _prefill(model, gpu, v, prefill)
    T = float(tokens)
    at = {**v, "T": T}
    weights = float(fn("t_weights").take(at))

    def part(x):  # the recompute part of x tokens, a pass of its own
        return max(float(rec(x)), weights) if x > 0 else 0.0

    def load(x):
        return float(sfn("t_split_load").take({**at, "x": x}))

    def t_split(x):
        return float(sfn("t_split_of").take({**at, "x": x, "part_time": part(x)}))
    reload = t_split(0.0)
    recompute = float(rec(T))
    # the balance: the recompute part grows with x, the load shrinks
    x = (_bisect_first(lambda y: part(y) - load(y), 0.0, T) if part(T) >= load(T) else T)
    # x = T loads nothing and pays no reload latency: pure recompute
    best = recompute if x >= T else t_split(x)
    if reload < best:  # that pass costs more than loading everything: pure reload
        x, best = 0.0, reload
    if recompute < best:  # a fixed cost larger than the whole recompute: split never pays
        x, best = T, recompute
    return {"prefill_model": name, "x_tokens": x, "t_split_s": best, "t_reload_s": reload,
            "t_recompute_s": recompute, "split_fraction": x / T}


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


def decode_cost(model, gpu, tp, batch_seqs, context_tokens, engine=None, compute_dtype=None,
                prefill="calibrated", kv_dtype=None, ep=None):
    """One decode step of ``batch_seqs`` sequences (a positive integer) on a replica of ``tp``
    GPUs, each at ``context_tokens`` of context (kvmath.derive.serving.t_decode_step: the
    prefill model's forward of one token per sequence, then their attention reading each KV
    once, never under the roofline): {decode_step_s, decode_gpu_s_per_token (the replica's
    GPU-seconds per output token), decode_roofline_step_s, decode_batch_seqs,
    decode_context_tokens, prefill_model}. The context is held to the model's window.
    """
    if not (math.isfinite(batch_seqs) and batch_seqs >= 1 and int(batch_seqs) == batch_seqs):
        raise ScenarioError(f"a decode batch needs a positive whole number of sequences, "
                            f"got {batch_seqs}")
    v, _ = scenario_values(model, gpu, bundled().tiers["host-dram"], tp=tp, engine=engine,
                           compute_dtype=compute_dtype, kv_dtype=kv_dtype, ep=ep)
    if not model.is_moe:
        v.update(E=1, k_top=1)  # no routed experts (N_xs = 0); avoid 0/0
    name, rec = _prefill(model, gpu, v, prefill, batch=int(batch_seqs))
    at = {**v, "n_seq": float(batch_seqs), "forward_time": float(rec(1.0)),
          "T": float(min(context_tokens, model.max_context_tokens))}
    return {"decode_step_s": float(sfn("t_decode_step").take(at)),
            "decode_gpu_s_per_token": float(sfn("decode_gpu_s_per_token").take(at)),
            "decode_roofline_step_s": float(sfn("t_decode_batch").take(at)),
            "decode_batch_seqs": int(batch_seqs), "decode_context_tokens": at["T"],
            "prefill_model": name}
