"""The figures a reader would rather look at than read, drawn from the data at build time.

* :func:`ttft_curves` and :func:`ttft_figure`: time to first token against prompt length for
  one scenario, reload from each tier and recompute, each with its band
  (:func:`kvmath.evaluate.bands.band_of` at every length drawn), the crossings marked, the
  scenario's own length marked and the load stated;
* :func:`tier_diagram`: the tiers of the node (HBM, host DRAM, NVMe, a pool), each hop of each
  tier's path with its rate and its time for the scenario's reload, the hop that binds it
  marked (the slowest: the hops run at once), drawn from the tier and link rows and the path
  the logic takes, never typed;
* :func:`hop_figure`: each hop's time against the reload and the recompute of one scenario per
  tier (the worked example's step four and five).

Each returns a :class:`kvmath.present.svg.Figure`: SVG whose words are text, with an alt text
that says what it shows and its numbers. The answer page, the worked example, the README
(``scripts/refresh_readme.py``) and ``kvmath review`` draw the same figures.
"""
from __future__ import annotations

import math
from dataclasses import replace

from kvmath.evaluate.bands import band_of
from kvmath.logic.comparison import prompt_limit
from kvmath.logic.constants import MIN_PREFIX_TOKENS
from kvmath.logic.runtime import ScenarioError
from kvmath.present.format import fmt_bw, fmt_bytes, fmt_time, fmt_token_list, join_and
from kvmath.present.svg import (GRID, INK, MUTED, PALETTE, Canvas, Figure, LogScale, decades,
                                fmt_count, log_bounds, log_ticks)

#: lengths drawn per curve (log-spaced), besides the scenario's own and the crossings
POINTS = 28


def slowest_hop(r):
    """The hop of compare's answer ``r`` that takes longest to carry the reload (the hops run
    at once, so it binds); None when nothing moves."""
    return max(r["path"], key=lambda h: h["time_s"])["link"] if r["path"] else None


def _layout_fields(r):
    """The record fields that hold the layout compare chose at the scenario's length, so every
    length drawn runs that layout (as the calculator's curve does)."""
    return {"tp": r["tp"], "ep": r["ep"] if r["ep"] > 1 else None}


def load_words(s, r):
    """The load a scenario states, in words: its resume rate, its reloads at once, or the
    default (every replica of the node at once, the worst case)."""
    if s.resume_rate is not None:
        return (f"{s.resume_rate:g} resumes per second at the node "
                f"({r['concurrent_reloads']:.3g} reloads in flight on average)")
    if s.concurrent_reloads is not None:
        return f"{r['concurrent_reloads']:.3g} replica(s) reloading at once"
    return (f"every replica of the node reloading at once ({r['concurrent_reloads']:.3g} "
            "replicas, the worst case)")


def _band_at(s, tokens):
    try:
        return band_of(s, tokens)
    except ScenarioError:  # a length the scenario cannot take (below a hybrid's checkpoint)
        return None


def ttft_curves(s, tiers, tokens, points=POINTS):
    """The data of :func:`ttft_figure` for scenario ``s`` (a record; its tier is replaced by
    each of ``tiers``, rows) at ``tokens``: {"scenario": compare's answer at ``tokens`` on the
    first tier, "limit": the longest prompt drawn and why, "lengths", "recompute": {"t",
    "lo", "hi"} per length, "tiers": [{"tier", "t", "lo", "hi", "crossings": [(tokens, TTFT)],
    "at": compare's answer at ``tokens``}]}. Every length runs the layout compare takes at
    ``tokens`` (held, as the calculator's curve holds it)."""
    first = band_of(replace(s, tier=tiers[0]), tokens)["nominal"]
    held = replace(s, **_layout_fields(first))
    limit = prompt_limit(replace(held, tier=tiers[0]), tokens)
    top = limit["tokens"] if limit else max(10.0 * tokens, 1e6)
    answers = {t.name: band_of(replace(held, tier=t), tokens) for t in tiers}
    crossings = sorted(x for b in answers.values() for x in b["nominal"]["breakeven_tokens"]
                       if x <= top)
    low = max(float(MIN_PREFIX_TOKENS), min([tokens / 100.0] + [x / 3.0 for x in crossings]))
    low = max(float(MIN_PREFIX_TOKENS), 10.0 ** math.floor(math.log10(low)))
    grid = [low * (top / low) ** (i / (points - 1)) for i in range(points)]
    lengths = sorted(set(grid + [float(tokens)] + crossings))
    out = {"scenario": first, "limit": limit, "tokens": tokens, "lengths": [], "layout": held,
           "recompute": {"t": [], "lo": [], "hi": []}, "tiers": []}
    for t in tiers:
        curve = {"tier": t.name, "t": [], "lo": [], "hi": [], "lengths": [],
                 "at": answers[t.name]["nominal"], "band_at": answers[t.name],
                 "crossings": []}
        for x in lengths:
            b = answers[t.name] if x == tokens else _band_at(replace(held, tier=t), x)
            if b is None:
                continue
            curve["lengths"].append(x)
            curve["t"].append(b["nominal"]["ttft_reload_s"])
            curve["lo"].append(b["ttft_reload_s"][0])
            curve["hi"].append(b["ttft_reload_s"][1])
            if t is tiers[0]:
                out["lengths"].append(x)
                rec = out["recompute"]
                rec["t"].append(b["nominal"]["ttft_recompute_s"])
                rec["lo"].append(b["ttft_recompute_s"][0])
                rec["hi"].append(b["ttft_recompute_s"][1])
            if x in answers[t.name]["nominal"]["breakeven_tokens"]:
                curve["crossings"].append((x, b["nominal"]["ttft_reload_s"]))
        out["tiers"].append(curve)
    return out


def _who(r):
    return f"{r['model']} on {r['gpus']} x {r['gpu']} (TP {r['tp']})"


def ttft_figure(data, ident="fig-ttft", s=None):
    """Time to first token against prompt length (:func:`ttft_curves`' ``data``), log-log:
    recompute (black) and reload from each tier (coloured), each with its band shaded, the
    crossings as dots with their lengths, the scenario's own length a dashed line, the longest
    prompt drawn (the context window or HBM) named. ``s``: the scenario record, for the load's
    words (default: every replica at once)."""
    r = data["scenario"]
    s = s if s is not None else data["layout"]
    W, H = 760, 470
    pad = {"l": 62, "r": 150, "t": 46, "b": 46}
    xs = data["lengths"]
    ys = [y for c in data["tiers"] for y in c["lo"] + c["hi"]]
    ys += data["recompute"]["lo"] + data["recompute"]["hi"]
    x0, x1 = xs[0], xs[-1]
    y0, y1 = log_bounds(ys)
    X = LogScale(x0, x1, pad["l"], W - pad["r"])
    Y = LogScale(y0, y1, H - pad["b"], pad["t"])
    load = load_words(s, r)
    title = (f"Time to first token against prompt length: {_who(r)}, reload from "
             f"{join_and(c['tier'] for c in data['tiers'])} against recompute")
    c = Canvas(W, H, ident, title, "")
    c.text(pad["l"], 18, f"{_who(r)}, engine {r['engine']}", size=13, weight="bold")
    c.text(pad["l"], 34, f"load: {load}", size=11.5, fill=MUTED)
    for d in decades(x0, x1):
        c.line(X(d), pad["t"], X(d), H - pad["b"], stroke=GRID)
        c.text(X(d), H - pad["b"] + 16, fmt_count(d), anchor="middle", size=11.5)
    for d in log_ticks(y0, y1):
        c.line(pad["l"], Y(d), W - pad["r"], Y(d), stroke=GRID)
        c.text(pad["l"] - 6, Y(d) + 4, fmt_time(d), anchor="end", size=11.5)
    c.line(pad["l"], H - pad["b"], W - pad["r"], H - pad["b"])
    c.line(pad["l"], pad["t"], pad["l"], H - pad["b"])
    c.text((pad["l"] + W - pad["r"]) / 2, H - 8, "prompt length (tokens, log scale)",
           anchor="middle", size=12)
    c.add("text", "time to first token (log scale)", x=14.0, y=float((H - pad["b"] +
          pad["t"]) / 2), text_anchor="middle", font_size=12, fill=INK,
          transform=f"rotate(-90 14 {(H - pad['b'] + pad['t']) / 2:.0f})")
    series = [("recompute", INK, xs, data["recompute"], 3.0)]
    series += [(cv["tier"], PALETTE[i % len(PALETTE)], cv["lengths"], cv, 2.2)
               for i, cv in enumerate(data["tiers"])]
    for _, color, lx, cv, _ in series:  # the bands first, under every line
        c.polygon([(X(a), Y(b)) for a, b in zip(lx, cv["hi"])]
                  + [(X(a), Y(b)) for a, b in reversed(list(zip(lx, cv["lo"])))], color,
                  opacity=0.13 if color == INK else 0.16)
    tokens = data["tokens"]
    c.line(X(tokens), pad["t"], X(tokens), H - pad["b"], stroke=MUTED, dash="5 4")
    c.text(X(tokens) + 4, H - pad["b"] - 6, f"{tokens:,.0f} tokens", size=11, fill=MUTED)
    limit = data["limit"]
    if limit:
        c.text(X(x1) - 4, pad["t"] + 12, f"{limit['why']} ({x1:,.0f})", anchor="end",
               size=11, fill=MUTED)
    ends = []
    for name, color, lx, cv, width in series:
        c.polyline([(X(a), Y(b)) for a, b in zip(lx, cv["t"])], stroke=color, width=width)
        ends.append([Y(cv["t"][-1]), name, color])
    for cv, (_, color, *_) in zip(data["tiers"], series[1:]):
        for x, y in cv["crossings"]:
            c.circle(X(x), Y(y), 5, fill=color)
            c.text(X(x), Y(y) - 9, f"{x:,.0f}", anchor="middle", size=11, fill=color,
                   weight="bold")
    ends.sort()
    for i in range(1, len(ends)):  # keep the curves' names apart
        ends[i][0] = max(ends[i][0], ends[i - 1][0] + 15)
    for y, name, color in ends:
        c.text(W - pad["r"] + 8, y + 4, name, size=12, fill=color, weight="bold")
    desc = ttft_alt(data, load)
    c.desc = desc
    caption = (f"Time to first token against prompt length for {r['model']} on "
               f"{r['gpus']} x {r['gpu']} (TP {r['tp']}, held at every length), {load}: "
               "recompute by calibrated prefill (black) and reload from each tier (coloured), "
               "each with its band shaded; dots mark where reload and recompute cross, the "
               f"dashed line the {tokens:,.0f}-token prompt.")
    return Figure(ident, c.render(), desc, caption)


def ttft_alt(data, load):
    """What :func:`ttft_figure` shows, in words, with its numbers at the scenario's length."""
    r, tokens = data["scenario"], data["tokens"]
    rec = data["recompute"]
    i = data["lengths"].index(float(tokens)) if float(tokens) in data["lengths"] else -1
    parts = [f"Log-log chart of time to first token against prompt length for {_who(r)}, "
             f"{load}. At {tokens:,.0f} tokens recompute takes {fmt_time(rec['t'][i])} "
             f"(band {fmt_time(rec['lo'][i])} to {fmt_time(rec['hi'][i])})"]
    for cv in data["tiers"]:
        a = cv["at"]
        b = cv["band_at"]["ttft_reload_s"]
        cross = [x for x, _ in cv["crossings"]]
        parts.append(f"reload from {cv['tier']} {fmt_time(a['ttft_reload_s'])} (band "
                     f"{fmt_time(b[0])} to {fmt_time(b[1])}), {a['winner']} wins; "
                     + (f"the curves cross at {fmt_token_list(cross)}" if cross
                        else "no crossing on the chart"))
    return "; ".join(parts) + "."


# ------------------------------------------------------------------ the tiers of a node
def _hop_words(hop):
    """(name, rate line) of a path hop: its link (and how many of it in parallel), and its
    rate for the hop and whom it serves."""
    count = f" x {hop['count']:g}" if hop["count"] != 1 else ""
    scope = "per node" if hop["scope"] == "per-node" else "per GPU"
    return hop["link"] + count, f"{fmt_bw(hop['effective_Bps'])} {scope}"


def tier_diagram(s, tiers, tokens, ident="fig-tiers", headline=None):
    """The node's tiers as lanes into HBM: each hop of each tier's path (the links of tiers.csv
    and links.csv as the logic resolves them for scenario ``s``) with its rate and the time it
    takes to carry the reload at ``tokens``, the hop that binds each reload outlined (the
    slowest) and the reload's time and bandwidth per GPU at the lane's end. ``headline``:
    the tier whose binding hop the caption names (default the first)."""
    bands = [band_of(replace(s, tier=t), tokens) for t in tiers]
    r0 = bands[0]["nominal"]
    gpu = s.gpu
    depth = max(len(b["nominal"]["path"]) for b in bands)
    W = 800
    lane, top = 74, 58
    H = top + lane * len(tiers) + 16
    col_w, gap, left = 160, 22, 118
    hbm_x = left + depth * (col_w + gap) + 128
    W = max(W, hbm_x + 110)
    title = (f"The tiers of a node of {r0['gpus'] * r0['concurrent_reloads']:.0f} x "
             f"{gpu.name} as lanes into HBM: each hop's rate and its time for "
             f"{r0['model']}'s {tokens:,.0f}-token reload")
    c = Canvas(W, H, ident, title, "")
    c.text(10, 20, f"{r0['model']}, {tokens:,.0f} tokens, TP {r0['tp']}, engine "
           f"{r0['engine']}: each hop's rate and the time it takes to carry the reload",
           size=13, weight="bold")
    c.text(10, 38, f"load: {load_words(s, r0)}; outlined: the slowest hop, which binds",
           size=11.5, fill=MUTED)
    c.rect(hbm_x, top, 100, lane * len(tiers) - 14, fill="#f3f3f3", stroke=INK, width=1.5,
           rx=6)
    mid = top + (lane * len(tiers) - 14) / 2
    c.text(hbm_x + 50, mid - 16, "HBM", anchor="middle", size=14, weight="bold")
    c.text(hbm_x + 50, mid + 2, f"{fmt_bytes(gpu.hbm_capacity_bytes)}", anchor="middle",
           size=11)
    c.text(hbm_x + 50, mid + 17, f"{fmt_bw(gpu.hbm_bandwidth_Bps)}", anchor="middle", size=11)
    c.text(hbm_x + 50, mid + 32, "per GPU", anchor="middle", size=11)
    lines = []
    for i, (t, b) in enumerate(zip(tiers, bands)):
        r = b["nominal"]
        y = top + i * lane
        cy = y + 26
        c.text(10, cy - 2, t.name, size=13, weight="bold", fill=PALETTE[i % len(PALETTE)])
        c.text(10, cy + 14, t.kind, size=10.5, fill=MUTED)
        hops = r["path"]
        x = left + (depth - len(hops)) * (col_w + gap)
        slowest = slowest_hop(r)
        for h in hops:
            name, rate = _hop_words(h)
            binds = h["link"] == slowest
            c.rect(x, y, col_w, 52, fill="#fff4e5" if binds else "#ffffff",
                   stroke=PALETTE[1] if binds else INK, width=2.6 if binds else 1.0, rx=4)
            c.text(x + 6, y + 15, name, size=10.5, weight="bold")
            c.text(x + 6, y + 30, rate, size=10.5)
            c.text(x + 6, y + 45, f"{fmt_time(h['time_s'])} to carry it", size=10.5,
                   fill=PALETTE[1] if binds else MUTED, weight="bold" if binds else None)
            if binds:
                c.text(x + col_w - 6, y + 45, "binds", anchor="end", size=10.5,
                       fill=PALETTE[1], weight="bold")
            c.arrow(x + col_w + 2, cy, x + col_w + gap - 2)
            x += col_w + gap
        c.arrow(x - gap + 2, cy, hbm_x - 2) if hops else None
        bw = r["reload_bandwidth_Bps"]
        c.text(x + 4, cy - 8, f"reload {fmt_time(r['reload_s'])}", size=11, weight="bold")
        c.text(x + 4, cy + 16, f"{fmt_bw(bw)} per GPU" if bw else "nothing moves", size=10.5,
               fill=MUTED)
        lines.append(f"{t.name}: " + ", then ".join(
            f"{h['link']} at {fmt_bw(h['effective_Bps'])} ({fmt_time(h['time_s'])})"
            for h in hops) + (f"; {slowest} binds" if hops else "; nothing moves")
            + f"; reload {fmt_time(r['reload_s'])}")
    headline = headline or tiers[0].name
    hb = bands[[t.name for t in tiers].index(headline)]["nominal"]
    c.desc = (f"Diagram of a node's tiers as lanes into each GPU's HBM "
              f"({fmt_bytes(gpu.hbm_capacity_bytes)} at {fmt_bw(gpu.hbm_bandwidth_Bps)}), "
              f"for {r0['model']}'s {tokens:,.0f}-token reload at TP {r0['tp']}, "
              f"{load_words(s, r0)}. " + ". ".join(lines) + ".")
    caption = (f"The node's tiers and the hops of each path into HBM, from the tier and link "
               f"rows: each hop's rate and the time it takes to carry {r0['model']}'s "
               f"{tokens:,.0f}-token reload; outlined, the slowest hop, which binds it (for "
               f"{headline}, {slowest_hop(hb)}).")
    return Figure(ident, c.render(), c.desc, caption)


# ------------------------------------------------------------------ hop by hop
def hop_figure(bands, ident="fig-hops"):
    """Each hop's time, the reload and the recompute of one scenario per tier (``bands``:
    {tier name: band_of's answer}), on a log time axis: a bar per hop, the reload's time and
    band, the recompute's time and band; the bar of the hop that binds (the slowest) is
    outlined."""
    names = list(bands)
    rows = []
    for n in names:
        b = bands[n]
        r = b["nominal"]
        rows += [(n, h["link"], h["time_s"], h["link"] == slowest_hop(r)) for h in r["path"]]
        rows.append((n, "fixed cost", r["reload_fixed_s"],
                     False))
        rows.append((n, "reload", r["reload_s"], None))
    r0 = bands[names[0]]["nominal"]
    rec = bands[names[0]]["recompute_s"]
    times = [t for _, _, t, _ in rows if t > 0] + [rec[0], rec[1], r0["recompute_s"]]
    times += [x for n in names for x in bands[n]["reload_s"]]
    lo, hi = log_bounds(times)
    W, bar = 760, 19
    left, right, top = 250, 40, 50
    H = top + bar * len(rows) + 12 * len(names) + 44
    T = LogScale(lo, hi, left, W - right)
    title = (f"Each hop's time, the reload and the recompute of {r0['model']} at "
             f"{r0['tokens']:,.0f} tokens, per tier")
    c = Canvas(W, H, ident, title, "")
    c.text(10, 18, f"{_who(r0)}, {r0['tokens']:,.0f} tokens: where the reload's time goes",
           size=13, weight="bold")
    base = top + bar * len(rows) + 12 * len(names)
    c.rect(T(rec[0]), top - 6, T(rec[1]) - T(rec[0]), base - top + 6, fill=INK, stroke="none",
           opacity=0.08)
    c.line(T(r0["recompute_s"]), top - 6, T(r0["recompute_s"]), base, stroke=INK, width=2)
    c.text(T(r0["recompute_s"]), top - 12, f"recompute {fmt_time(r0['recompute_s'])}",
           anchor="middle", size=11, weight="bold")
    for d in log_ticks(lo, hi):
        c.line(T(d), top - 6, T(d), base, stroke=GRID)
        c.text(T(d), base + 16, fmt_time(d), anchor="middle", size=11)
    c.text((left + W - right) / 2, H - 6, "time (log scale)", anchor="middle", size=12)
    y, last, lines = top, None, []
    for n, what, t, binds in rows:
        if n != last:
            color = PALETTE[names.index(n) % len(PALETTE)]
            if last is not None:
                y += 12
            c.text(10, y + 13, n, size=12.5, weight="bold", fill=color)
            last = n
        total = binds is None
        c.text(left - 6, y + 13, what, anchor="end",
               size=10.5, weight="bold" if total else None)
        if t > 0:
            c.rect(T(lo), y + 2, T(t) - T(lo), bar - 5, fill=color if total else "#bbbbbb",
                   stroke=PALETTE[1] if binds else "none", width=2.4 if binds else 0,
                   opacity=0.85 if total else 0.9)
        end = t
        if total:
            band = bands[n]["reload_s"]
            c.line(T(band[0]), y + bar / 2, T(band[1]), y + bar / 2, stroke=INK, width=1.2)
            end = max(t, band[1])
        c.text(T(max(end, lo)) + 4, y + 13, fmt_time(t) + ("  binds" if binds else ""),
               size=10.5, weight="bold" if total or binds else None)
        y += bar
    for n in names:
        r = bands[n]["nominal"]
        lines.append(f"{n}: reload {fmt_time(r['reload_s'])} (band "
                     f"{fmt_time(bands[n]['reload_s'][0])} to "
                     f"{fmt_time(bands[n]['reload_s'][1])}), slowest hop "
                     f"{slowest_hop(r)}, {r['winner']} wins")
    c.desc = (f"Horizontal bar chart on a log time axis for {_who(r0)} at "
              f"{r0['tokens']:,.0f} tokens: recompute takes {fmt_time(r0['recompute_s'])} "
              f"(band {fmt_time(rec[0])} to {fmt_time(rec[1])}); " + "; ".join(lines) + ".")
    caption = (f"Where each reload's time goes for {r0['model']} at {r0['tokens']:,.0f} "
               "tokens: each hop's time (grey; the binding hop outlined), the fixed cost and the "
               "reload (coloured, its band a whisker), against the recompute (black line, its "
               "band shaded).")
    return Figure(ident, c.render(), c.desc, caption)
