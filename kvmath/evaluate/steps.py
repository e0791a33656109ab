"""The time of one engine step, tabulated for the fleet's scheduler (:mod:`kvmath.traces.simulate.
engine`): the calibrated operator model (:mod:`kvmath.derive.prefill`, through
:func:`kvmath.evaluate.prefill.prefill_time`) and the decode step of :mod:`kvmath.derive.serving`
(``t_decode_step``, as :func:`kvmath.evaluate.serving.decode_cost` times it), composed for a step
that mixes prefill chunks and decodes, as vLLM's and SGLang's schedulers build them.

A step feeds ``n`` tokens (every prefill chunk's and one per decoding sequence): its forward
through the layers is the calibrated prefill of ``n`` tokens without its attention (``lin[n]``);
each prefill chunk of ``c`` tokens at offset ``s`` of its prompt adds its causal attention,
``attn(s + c) - attn(s)`` (the calibrated attention part at those lengths); each decoding
sequence at context ``s`` reads its KV once from HBM (``kvread(s)``: kv_bytes_per_gpu / B_hbm, as
``t_decode_step`` charges it); the step is never under the roofline of reading the weights it
touches and of its compute (``floor[n]``: ``t_decode_batch`` at ``n`` one-token sequences with no
context). So a pure decode step of B sequences at context T is ``t_decode_step`` (a test holds
them within a few per cent: the batch's one-token forward is timed here as n tokens of one
sequence), and a lone prefill is the calibrated prefill.

The tables are numpy arrays handed to the compiled kernel (:class:`kvmath.traces.simulate.engine.
Steps`); the lengths are tabulated on a grid of ``grid`` tokens and interpolated linearly.
"""
from __future__ import annotations

import math

import numpy as np

from kvmath.evaluate.api import fn, scenario_values
from kvmath.evaluate.prefill import prefill_time
from kvmath.evaluate.serving import sfn
from kvmath.tables.rows import bundled

#: most points of the attention and KV-read tables over the context (their grid grows with it)
GRID_POINTS = 4096


def step_tables(model, gpu, layout, tokens, max_context, engine=None):
    """(lin, floor, attn, kvread, grid, prefill_model) of one replica of ``layout`` on ``gpu``
    (its row, with the node's GPU count): ``lin`` and ``floor`` per step size 0..``tokens``
    (the scheduler's largest step), ``attn`` and ``kvread`` at contexts 0, grid, 2 grid, ...
    up to ``max_context``. A GPU without an operator calibration takes the flat roofline
    (``prefill_model`` says so), as compare does."""
    from kvmath.tables.rows import allreduce_figures  # noqa: F401 (the calibration's inputs)
    from kvmath.logic.runtime import DATA
    n = np.arange(1, int(tokens) + 1, dtype=float)
    calibrated = gpu.name in DATA.prefill_fit and gpu.name in DATA.allreduce
    spread = dict(tp=layout.gpus if layout.dp_attention else layout.tp,
                  ep=layout.gpus if layout.dp_attention else (layout.ep if layout.ep > 1 else None),
                  dp_attention=layout.dp_attention, tp_attn=layout.tp,
                  compute_dtype=layout.compute_dtype)
    kind = "calibrated" if calibrated else "ideal"
    grid = max(16, int(math.ceil(max(float(max_context), 1.0) / GRID_POINTS)))
    ctx = np.arange(0, int(math.ceil(max_context / grid)) + 2, dtype=float) * grid
    if calibrated:
        p = prefill_time(model, gpu, n, kind="calibrated", **spread)
        lin = p["total_s"] - p["attention_s"]
        a = prefill_time(model, gpu, np.maximum(ctx, 1.0), kind="calibrated", **spread)
        attn = np.where(ctx > 0, a["attention_s"], 0.0)
    else:  # the flat roofline: the compute of n tokens, its attention the part beyond linear
        p = prefill_time(model, gpu, n, tp=layout.tp, compute_dtype=layout.compute_dtype,
                         kind="ideal")
        lin = p["total_s"]
        a = prefill_time(model, gpu, np.maximum(ctx, 1.0), tp=layout.tp,
                         compute_dtype=layout.compute_dtype, kind="ideal")["compute_s"]
        attn = np.where(ctx > 0, np.maximum(a - ctx * float(p["compute_s"][0]), 0.0), 0.0)
    v, _ = scenario_values(model, gpu, bundled().tiers["host-dram"], tp=layout.tp,
                           ep=layout.ep if layout.ep > 1 else None, engine=engine,
                           compute_dtype=layout.compute_dtype, kv_dtype=layout.kv_dtype)
    if not model.is_moe:
        v.update(E=1, k_top=1)  # no routed experts (N_xs = 0); avoid 0/0
    floor = sfn("t_decode_batch").take({**v, "n_seq": n, "T": 0.0, "forward_time": 0.0})
    kvread = fn("kv_bytes_per_gpu").take({**v, "T": ctx}) / v["B_hbm"]
    kvread = kvread - kvread[0]  # a hybrid's state is read once whatever the context
    return (np.r_[0.0, lin], np.r_[0.0, np.broadcast_to(floor, n.shape)], attn,
            np.asarray(kvread, float), grid, "calibrated" if calibrated else
            "ideal (no calibration for this GPU)")


def step_time(tables, chunks, decodes):
    """One step's time, s, from :func:`step_tables`: ``chunks`` [(offset, tokens)] of prefill
    and ``decodes`` [context] of decoding sequences (the kernel's composition, in Python: the
    tests' oracle)."""
    lin, floor, attn, kvread, grid, _ = tables
    n = sum(c for _, c in chunks) + len(decodes)
    if n == 0:
        return 0.0
    x = np.arange(len(attn)) * grid
    a = sum(np.interp(s + c, x, attn) - np.interp(s, x, attn) for s, c in chunks)
    kv = sum(np.interp(s, x, kvread) for s in decodes)
    return float(max(floor[n], lin[n] + a) + kv)
