"""``kvmath compare``: reload against recompute for one scenario, with its bands.

The scenario is the record of :func:`kvmath.scenario.build.scenario_of`; its band
(:func:`kvmath.evaluate.bands.band_of`) is printed as one JSON object or as the lines of
:func:`human`: each value with its range, the one division's winner, what overrides it
(:func:`override_note`) and the verdict.
"""
from __future__ import annotations

import math
from dataclasses import replace

from kvmath.cli.output import print_result
from kvmath.logic.comparison import compare as compare_scenario, prompt_limit
from kvmath.logic.constants import MIN_PREFIX_TOKENS
from kvmath.logic.layout import layout_lengths
from kvmath.present.format import TIE_SPEEDUP, fmt_bytes, fmt_time, join_and
from kvmath.scenario.options import COMPARE, add_options


def add_parser(subparsers):
    """Add the ``compare`` sub-command to an argparse subparsers object."""
    add_options(subparsers.add_parser(COMPARE, help="reload against recompute for one scenario"),
                COMPARE)


def answer(args):
    """The JSON-ready result of ``kvmath compare``: the nominal comparison and its bands."""
    from kvmath.evaluate.bands import band_of
    from kvmath.scenario.build import scenario_of
    s, cfg = scenario_of(args, COMPARE)
    b = band_of(s, args.tokens)
    result = {**b["nominal"], "recompute_s_band": list(b["recompute_s"]),
              "reload_s_band": list(b["reload_s"]),
              "ttft_recompute_s_band": list(b["ttft_recompute_s"]),
              "ttft_reload_s_band": list(b["ttft_reload_s"]),
              "reload_bandwidth_Bps_band": (list(b["reload_bandwidth_Bps"])
                                            if b["reload_bandwidth_Bps"][0] is not None else None),
              "verdict_flips_in_band": b["flips"], "prefill_fit_own": b["prefill_fit_own"],
              "known_limits": b["known_limits"]}
    result["winner_by_length"] = winner_by_length(s, result)
    if s.pool is not None:
        result.update(pool=s.pool.name, pool_nodes=s.pool_nodes)
    if cfg is not None:  # a host or disk cache its settings size below this prompt: refused
        from kvmath.scenario.engine_config import check_holds
        check_holds(cfg, s.tier, s.model, result["tp"], result["gpus_per_node"],
                    result["kv_bytes_stored"])
        result["engine_config"] = cfg.summary(s.model)
    return result


def winner_by_length(s, r):
    """Who wins at every length the break-even line speaks of (issue 37: it said "same winner at
    every length from 2 tokens" while recompute won at 2 tokens): {"spans": [[from, to,
    winner, TP, crossing], ...], "to_why": ...}, integer lengths from the shortest prefix (a
    hybrid model's first state checkpoint) to the context window (or the prompt, if longer),
    each length in the layout it takes: the given TP (or the sourced deployment) at every
    length, else the default's TP at each length (each span's crossings found at its own TP).
    A layout stops at the longest prompt its HBM holds (``to_why`` says so). ``crossing``: the
    break-even length where the span's winner took over inside one layout; None at the start
    or where the layout moves."""
    from kvmath.logic.runtime import ScenarioError
    lo = math.ceil(max(MIN_PREFIX_TOKENS, r.get("state_checkpoint_tokens", 0.0)))
    top = math.floor(max(r["context_window_tokens"], r["tokens"]))
    steps = layout_lengths(s, top) if r.get("layout_by_length") is not None else []
    out, start, why = [], lo, None
    for upto, tp in steps or [[top, r["tp"]]]:
        b = math.floor(upto)
        one = replace(s, tp=tp)
        try:
            limit = prompt_limit(one, max(start, 2))
            if limit is not None and limit["why"] == "HBM full" and limit["tokens"] < b:
                b, why = math.floor(limit["tokens"]), f"longer prompts do not fit TP {tp}'s HBM"
            if tp == r["tp"] and start <= r["tokens"] <= b and not r.get("state_tail_tokens"):
                crossings, known_at, known = r["breakeven_tokens"], r["tokens"], r["winner"]
            else:  # at the span's end; a hybrid model at a checkpoint (no tail computed, whose
                # tokens would move the crossings)
                known_at = b
                if "state_checkpoint_tokens" in r:
                    c = compare_scenario(one, b)["state_checkpoint_tokens"]
                    known_at = max(math.floor(b / c) * c, c)
                at = compare_scenario(one, known_at)
                crossings, known = at["breakeven_tokens"], at["winner"]
        except ScenarioError as exc:  # no length from here fits
            why = f"longer prompts: {exc}"
            break
        # a crossing x parts the lengths up to x from those above it (a hybrid model's crossings
        # below its first checkpoint are put at it: reload wins from there)
        flips = sum(1 for x in crossings if start <= x < known_at) - sum(
            1 for x in crossings if x == start == lo > MIN_PREFIX_TOKENS)
        winner = known if flips % 2 == 0 else _other(known)
        begin, crossing = start, None
        for x in sorted(x for x in crossings if start <= x < b and not x == start == lo):
            if math.floor(x) >= begin:
                out.append([begin, math.floor(x), winner, tp, crossing])
            begin, crossing, winner = math.floor(x) + 1, x, _other(winner)
        out.append([begin, b, winner, tp, crossing])
        start = b + 1
        if why:
            break
    return {"spans": out, "to_why": why}


def _other(winner):
    return "recompute" if winner == "reload" else "reload"


def breakeven_line(r):
    """The break-even line: the lengths where the winner changes and who wins between them, at
    every length from the shortest prefix to the window, in the layout each length takes
    (:func:`winner_by_length`); true at every length it speaks of (a test holds it)."""
    spans = r["winner_by_length"]["spans"]
    merged = []  # runs of one winner, with the length where each took over and why
    for a, b, winner, tp, crossing in spans:
        if merged and merged[-1][2] == winner:
            merged[-1][1] = b
        else:
            merged.append([a, b, winner, crossing, tp])
    switches = [f"{crossing:,.0f}" if crossing is not None else
                f"{a:,} (where the layout moves to TP {tp})" for a, _, _, crossing, tp in merged[1:]]
    who = ", ".join(f"{w} {'wins ' if i == 0 else ''}from {a:,} to {b:,}"
                    for i, (a, b, w, _, _) in enumerate(merged))
    text = (f"{join_and(switches)} tokens: {who} tokens" if switches else
            f"none: {merged[0][2]} wins at every length from {merged[0][0]:,} to "
            f"{merged[0][1]:,} tokens")
    tps = []
    for a, b, _, tp, _ in spans:
        if tps and tps[-1][2] == tp:
            tps[-1][1] = b
        else:
            tps.append([a, b, tp])
    text += (f" (TP {tps[0][2]}" if len(tps) == 1 else " (" + ", ".join(
        f"TP {tp} from {a:,} to {b:,}" for a, b, tp in tps) + " tokens, the layout each length "
        "takes")
    why = r["winner_by_length"]["to_why"]
    first = spans[0][0]
    if first > MIN_PREFIX_TOKENS:  # a hybrid model: its state is reloaded at its checkpoints
        text += (f"; at its state checkpoints, every {first:,} tokens: below the first nothing "
                 "is reloaded, and between them the tail past the last is computed either way")
    return text + (f"; {why})" if why else ")")


def run(args):
    """Run ``kvmath compare``; returns the exit status."""
    print_result(args, answer(args), human)
    return 0


def _layout(r):
    parts = [f"{r['gpus']}x {r['gpu']}"]
    if r["dp_attention"]:
        parts.append(f"attention data-parallel (TP {r['tp']}), experts EP {r['ep']}")
    else:
        parts.append(f"TP {r['tp']}" + (f", experts EP {r['ep']}" if r["ep"] > 1 else ""))
    parts.append(f"{r['weight_dtype']} weights, {r['compute_dtype']} compute")
    return ", ".join(parts)


def layout_note(r):
    """One line when the default layout moves with the prompt's length (compare's
    layout_by_length), or None: the TP each length up to this one takes."""
    steps = r.get("layout_by_length") or []
    if not steps:
        return None
    spans, lo = [], 2
    for upto, tp in steps:
        spans.append(f"TP {tp} from {lo:,.0f} to {upto:,.0f} tokens")
        lo = upto + 1
    return (f"note: the layout moves with the prompt ({'; '.join(spans)}): the smallest TP that "
            "holds the weights, the prompt's KV and each replica's share of the node's running "
            "batch, the default every command takes (tiers, trace, route and fleet move at the "
            "same lengths), so a longer prompt may reload faster on more GPUs; --tp holds one "
            "layout at every length")


def _band(pair):
    return f"[{fmt_time(pair[0])} to {fmt_time(pair[1])}]"


def _side(model_fpb, gpu_fpb):
    """The winner the division alone names: reload when the model needs more FLOP per KV byte."""
    return "reload" if model_fpb > gpu_fpb else "recompute"


def override_note(r):
    """One line when the one division's winner is not the scenario's, naming what overrides it.

    The division compares the linear term only, at a length every layer holds, with the flat
    prefill and no fixed cost. Adding, in turn, the attention term (and sliding windows) at this
    length, the prefill model in use (the weight-read floor of the flat roofline, or the
    calibrated operator model), and the reload's fixed cost, the factors that move the answer to
    the final winner are named. None when the division already agrees.
    """
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    if division == r["winner"]:
        return None
    transfer = r["reload_s"] - r["reload_fixed_s"]
    if r["prefill_model"] == "calibrated":
        prefill = (f"the calibrated prefill ({fmt_time(r['recompute_s'])}, against "
                   f"{fmt_time(r['compute_s'])} of compute at the flat efficiency)")
    else:
        prefill = (f"recompute's weight-read floor ({fmt_time(r['weights_read_s'])} to read the "
                   f"weights once, against {fmt_time(r['compute_s'])} of compute)")
    steps = [
        (_side(r["model_flops_per_kv_byte_at_tokens"], r["gpu_flops_per_link_byte"]),
         f"the attention term at {r['tokens']:,} tokens (model "
         f"{r['model_flops_per_kv_byte_at_tokens']:,.0f} FLOP/B at this length)"),
        ("reload" if transfer < r["recompute_s"] else "recompute", prefill),
        (r["winner"], f"the reload's fixed cost ({fmt_time(r['reload_fixed_s'])})"),
    ]
    why, prev = [], division
    for side, reason in steps:
        if side != prev and side == r["winner"]:
            why.append(reason)
        prev = side
    return (f"note: the one division says {division} wins, but {r['winner']} wins here because "
            f"of {' and '.join(why) or 'the fixed costs'}")


def _load_text(r):
    """Where the reloads in flight come from, as the output line says it."""
    if r["load_from"] == "resume rate":
        return (f"at {r['resume_rate_per_s']:g} resumes/s, {r['gpu_reloads']:.3g} reload(s) in "
                f"flight on each replica's own links, sharing adds {fmt_time(r['reload_queue_s'])}")
    if r["load_from"] == "given":
        return "as given"
    return "every replica at once, the worst case; --resume-rate sets a load"


def _per_token(s):
    """A cost per token in ns, or µs from 1 µs."""
    return f"{s * 1e6:.3g} µs/token" if s >= 1e-6 else f"{s * 1e9:.3g} ns/token"


def _costs(r):
    """What the engine charges a request, as the output line says it."""
    if r["engine"] == "ideal":
        return "the ideal engine charges none"
    text = (f"{fmt_time(r['request_fixed_s'])} fixed, {_per_token(r['hash_token_s'])} "
            f"hashing, {_per_token(r['tokenize_token_s'])} tokenising"
            + (" (token IDs)" if r["token_ids"] else ""))
    if r.get("engine_costs_caveat"):  # what the costs rest on, where too little
        text += f"; {r['engine_costs_caveat']}"
    return text


def human(r):
    """The human lines of a comparison (its JSON result)."""
    division = _side(r["model_flops_per_kv_byte"], r["gpu_flops_per_link_byte"])
    rows = [
        ("scenario", f"{r['model']}, tier {r['tier']}, {r['tokens']:,} tokens, KV {r['kv_dtype']}"
                     f" (window {r['context_window_tokens']:,})"),
        ("deployment", _layout(r)),
        ("engine", f"{r['engine']}, " + (
            f"at {r['resume_rate_per_s']:g} resumes/s on a node of {r['gpus_per_node']:g} GPUs: "
            f"{r['concurrent_reloads']:.3g} reload(s) in flight on its shared hops, "
            f"{r['gpu_reloads']:.3g} on each replica's own links; sharing adds "
            f"{fmt_time(r['reload_queue_s'])}" if r["load_from"] == "resume rate" else
            f"{r['concurrent_reloads']:.3g} replica(s) reloading at once per node of "
            f"{r['gpus_per_node']:g} GPUs ({_load_text(r)})")),
        ("KV per token", f"{r['kv_bytes_per_token']:,.0f} B"),
        ("KV moved", f"{fmt_bytes(r['kv_bytes'], 4)} ({fmt_bytes(r['kv_bytes_per_gpu'], 4)} per GPU)"),
        *([("codec", f"{r['codec']}: {r['codec_compression_ratio']:.3g}x fewer bytes on the path "
                     f"({fmt_bytes(r['kv_bytes_moved_per_gpu'], 4)} per GPU at "
                     f"{r['reload_wire_bandwidth_Bps'] / 1e9:.3g} GB/s), decoded at "
                     f"{r['codec_decode_Bps'] / 1e9:.3g} GB/s per GPU: "
                     f"{fmt_time(r['codec_decode_s'])}"
                     + (" overlapped with the transfer" if r["codec_pipelined"]
                        else " after the transfer")
                     + ("; a what-if on this tier (LMCache codes remote backends only)"
                        if r["codec_what_if"] else ""))] if r.get("codec") else []),
        ("recompute", f"{fmt_time(r['recompute_s'])} {_band(r['recompute_s_band'])}  "
                      f"({r['prefill_model']} prefill of {r['prefill_flops']:.3g} FLOP)"),
        ("reload", f"{fmt_time(r['reload_s'])} {_band(r['reload_s_band'])}  "
                   + (f"({r['reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU, "
                      if r["reload_bandwidth_Bps"] is not None else "(nothing moves, ")
                   + f"{fmt_time(r['reload_fixed_s'])} fixed cost, "
                     f"{fmt_time(r['hit_cost_s'])} connector"
                   + (f"; {fmt_time(r['overlap_hidden_s'])} of it hidden under the step, "
                      "loaded layer by layer" if r["overlap_hidden_s"] > 0 else "") + ")"),
        ("request", f"{fmt_time(r['request_s'])} on either side ({r['new_tokens']:,} new "
                    f"token(s); {_costs(r)})"),
        ("TTFT", f"recompute {fmt_time(r['ttft_recompute_s'])} "
                 f"{_band(r['ttft_recompute_s_band'])}, reload {fmt_time(r['ttft_reload_s'])} "
                 f"{_band(r['ttft_reload_s_band'])}"),
        ("one division", f"model {r['model_flops_per_kv_byte']:,.0f} FLOP/B vs GPU "
                         f"{r['gpu_flops_per_link_byte']:,.0f} FLOP/B: favours {division}"),
        ("break-even at", breakeven_line(r)),
        ("min bandwidth", f"{r['min_reload_bandwidth_Bps'] / 1e9:.3g} GB/s per GPU"
         + (" of path, before decoding" if r.get("codec") else "")
         if math.isfinite(r["min_reload_bandwidth_Bps"])
         else "none suffices (the fixed cost, engine step included"
         + (", and the codec's decode" if r.get("codec") else "") + ", alone loses)"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    loser = "recompute" if r["winner"] == "reload" else "reload"
    flips = " (the other wins somewhere inside the bands)" if r["verdict_flips_in_band"] else ""
    margin = (f"{r['speedup']:.3g}x faster than {loser}" if r["speedup"] >= TIE_SPEEDUP
              else f"by {100 * (r['speedup'] - 1):.2g} % (a tie in all but name)")
    lines.append(f"verdict: {r['winner']} wins, {margin}{flips}")
    note = override_note(r)
    if note:
        lines.append(note)
    if not r["prefill_fit_own"] and r["prefill_model"] == "calibrated":
        lines.append(f"note: {r['gpu']} has no operator profile of its own; its prefill is "
                     "H100's fit, and the recompute band is as wide as that fit's error on the "
                     "GPUs it was held against")
    if r["known_limits"]:
        lines.append(f"note: validation row(s) {', '.join(r['known_limits'])} show the model "
                     "missing this configuration; their error is in the bands")
    note = layout_note(r)
    if note:
        lines.append(note)
    note = copy_note(r)
    if note:
        lines.append(note)
    return "\n".join(lines)


#: how each copy path issues a load's copies, in words
COPY_PATHS = {"kernel": "by its copy kernel (no published rate: an assumption, with a band from "
                        "the evidence, copy_paths.csv)",
              "batched": "in one batched driver call (cuMemcpyBatchAsync: a measured cost per "
                         "copy, copy_paths.csv)",
              "driver": "by driver copies one by one (the link's measured cost per copy)"}


def copy_note(r):
    """The note on how the engine copies the load: its copy kernel, and where an engine with one
    falls back to driver copies, why ("" where the engine has no copy size)."""
    path = r.get("copy_path")
    if path not in COPY_PATHS:
        return ""
    fallback = r.get("copy_path_fallback") or ""
    if not fallback and path != "kernel":
        return ""
    text = f"note: {r['engine']} loads copies of {fmt_bytes(r['copy_bytes'], 3)} {COPY_PATHS[path]}"
    if fallback:
        text += f"; it falls back from its copy kernel: {fallback}"
    return text

