"""A design-review section, written from the answers of the commands it summarises.

:func:`review_blocks` turns the answers ``kvmath review`` gathers (kvmath.cli.review.gather:
compare per tier, reuse per tier, the tier plan, the fleet) into the section's blocks: the
verdict in words, the per-tier verdicts with bands and crossings, the figures
(:mod:`kvmath.present.figures`, drawn from the same compare record), the reuse economics, the
tier plan, the fleet size at the stated SLOs, the caveats that apply to this scenario, and the
source of every input row. Each number names the command that prints it for the file.
:func:`markdown` and :func:`html` render the blocks; :func:`write_review` writes the section as
Markdown (the figures beside it as SVG files) and as one self-contained HTML file (the figures
inline). Nothing here computes a new quantity.
"""
from __future__ import annotations

import datetime
import re
from html import escape
from pathlib import Path

from kvmath.present.format import fmt_bw, fmt_bytes, fmt_time, fmt_token_list, join_and
from kvmath.present.svg import Figure
from kvmath.version import version_info


# ------------------------------------------------------------------ blocks and their rendering
def _inline_html(text):
    """A line of the section's Markdown (code spans, bold, italics) as HTML."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) > 1:
            out.append(f"<code>{escape(p[1:-1])}</code>")
            continue
        p = escape(p, quote=False)
        p = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", p)
        p = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", p)
        out.append(p)
    return "".join(out)


def _cell(x):
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(blocks):
    """The blocks as Markdown (GitHub's tables; a figure as an image of its SVG file)."""
    out, n = [], 0
    for b in blocks:
        kind = b[0]
        if kind in ("h2", "h3"):
            out.append(("## " if kind == "h2" else "### ") + b[1])
        elif kind == "p":
            out.append(b[1])
        elif kind == "ul":
            out.append("\n".join(f"- {item}" for item in b[1]))
        elif kind == "table":
            header, rows = b[1], b[2]
            out.append("\n".join(["| " + " | ".join(_cell(h) for h in header) + " |",
                                  "|" + "|".join("---" for _ in header) + "|"]
                                 + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]))
        elif kind == "figure":
            fig, name = b[1], b[2]
            n += 1
            out.append(f"![{fig.alt}]({name})\n\n*Figure {n}. {fig.caption}*")
    return "\n\n".join(out) + "\n"


STYLE = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;line-height:1.45;color:#222}
table{border-collapse:collapse;margin:0.8rem 0;font-size:0.9rem;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:0.25rem 0.5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}code{background:#f3f3f3;padding:0 0.2em}
figure{margin:1rem 0}figcaption{font-size:0.9rem;color:#444}"""


def html(blocks, title):
    """The blocks as one HTML page, the figures' SVG inline (no file beside it is needed)."""
    body, n = [], 0
    for b in blocks:
        kind = b[0]
        if kind in ("h2", "h3"):
            body.append(f"<{kind}>{_inline_html(b[1])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline_html(b[1])}</p>")
        elif kind == "ul":
            body.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline_html(str(h))}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline_html(str(c))}</td>" for c in r)
                           + "</tr>" for r in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "figure":
            n += 1
            fig = b[1]
            body.append(f'<figure id="{escape(fig.ident)}">{fig.svg}<figcaption>Figure {n}. '
                        f"{escape(fig.caption)}</figcaption></figure>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>'
            f"{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


# ------------------------------------------------------------------ the section
def _band(pair):
    return f"{fmt_time(pair[0])} to {fmt_time(pair[1])}"


def _cmd(file, command, *words):
    return f"`kvmath {command} " + " ".join([*words, "--scenario", file]).strip() + "`"


def _answered(d):
    return {k: v for k, v in d.items() if "refused" not in v}


def verdict_words(compare):
    """The verdict over the tiers in one sentence, from compare's answers."""
    ok = _answered(compare)
    wins = [t for t, r in ok.items() if r["winner"] == "reload"]
    loses = [t for t, r in ok.items() if r["winner"] == "recompute"]
    ties = [t for t, r in ok.items() if r["verdict_flips_in_band"]]
    parts = []
    if wins:
        parts.append("reload beats recompute from " + join_and(
            f"{t} ({ok[t]['speedup']:.3g}x)" for t in wins))
    if loses:
        parts.append("recompute wins from " + join_and(
            f"{t} ({ok[t]['speedup']:.3g}x)" for t in loses))
    refused = [t for t, r in compare.items() if "refused" in r]
    if refused:
        parts.append(f"{join_and(refused)} not evaluated (the table says why)")
    text = "; ".join(parts)
    text = text[0].upper() + text[1:] + "."
    if ties:
        text += (f" Inside the bands the verdict flips for {join_and(ties)}: treat "
                 f"{'it' if len(ties) == 1 else 'them'} as a tie.")
    return text


def _slowest(r):
    from kvmath.present.figures import slowest_hop
    return slowest_hop(r) or "none (HBM)"


def _tier_table(facts):
    f = facts["file"]
    rows = []
    for t, r in facts["compare"].items():
        if "refused" in r:
            rows.append([t, f"not evaluated: {r['refused']}", "", "", "", "", "", ""])
            continue
        rows.append([t, f"{fmt_time(r['ttft_reload_s'])} ({_band(r['ttft_reload_s_band'])})",
                     f"{fmt_time(r['ttft_recompute_s'])} ({_band(r['ttft_recompute_s_band'])})",
                     f"{r['winner']}, {r['speedup']:.3g}x" + (
                         " (flips inside the bands)" if r["verdict_flips_in_band"] else ""),
                     fmt_token_list(r["breakeven_tokens"]), _slowest(r),
                     fmt_bw(r["reload_bandwidth_Bps"]) if r["reload_bandwidth_Bps"] else "-",
                     _cmd(f, "compare", "--tier", t)])
    return ("table", ["tier", "time to first token, reload (band)", "recompute (band)",
                      "winner", "crossings (tokens)", "slowest hop", "reload per GPU", "from"],
            rows)


def _reuse_blocks(facts):
    f, rows, dates = facts["file"], [], {}
    for t, r in facts["reuse"].items():
        if "refused" in r:
            rows.append([t, f"not priced: {r['refused']}", "", "", "", "", "", ""])
            continue
        dates.update(r["prices_observed"])
        ttl = r["ttl_s"]
        rows.append([t, f"{r['saving_gpu_s']:.3g} GPU-s (${r['saving_usd']:.2g})",
                     "none pays" if ttl == 0 else ("keep until return" if ttl is None
                                                   else fmt_time(ttl)),
                     "-" if r["p_breakeven"] is None else f"{r['p_breakeven']:.3g}",
                     f"${r['value_usd']:.3g}", r["verdict"],
                     r.get("verdict_opportunity") or "-", _cmd(f, "reuse", "--tier", t)])
    out = [("h3", "Is offloading worth it?"),
           ("p", "What a reuse saves in GPU time against holding and writing the cache, for the "
                 "file's pause distribution (the return probability it states), at purchase "
                 "prices and, where the file states a resume rate, at the opportunity cost of "
                 "the hits a held cache displaces on a node already bought.")]
    out.append(("table", ["tier", "saving per reuse", "best TTL", "break-even return p",
                          "value per offload", "verdict", "on a node already bought", "from"],
                rows))
    if dates:
        out.append(("p", "Prices as observed: " + ", ".join(f"{k} {v}" for k, v in
                                                           sorted(dates.items())) + "."))
    return out


def _plan_blocks(facts):
    p, f = facts["plan"], facts["file"]
    out = [("h3", "The tier plan")]
    if "not_run" in p:
        return out + [("p", f"Not planned: {p['not_run']}.")]
    out.append(("p", f"{p['model']} on {p['node']} ({p['gpus']} x {p['gpu']}, TP {p['tp']}) "
                     f"at {p['resume_rate_per_s']:g} resumes per second, pause {p['pause']}: "
                     f"which ages of paused caches each tier holds, the resumes it serves and "
                     f"its traffic ({_cmd(f, 'tiers')})."))
    rows = []
    for t in p["tiers"]:
        rows.append([t["tier"], fmt_bytes(t["capacity_bytes"], 4), f"{t['caches_held']:,.0f}",
                     f"{fmt_time(t['ttl_from_s'])} to {fmt_time(t['ttl_to_s'])}",
                     f"{t['resume_fraction']:.1%}", f"{fmt_bytes(t['read_Bps'])}/s",
                     f"{fmt_bytes(t['write_Bps'])}/s", f"{fmt_bytes(t['dropped_write_Bps'])}/s",
                     "-" if t["drive_writes_per_day"] is None
                     else f"{t['drive_writes_per_day']:.3g}"])
    out.append(("table", ["tier", "capacity", "caches held", "ages held", "resumes served",
                          "read", "write", "writes dropped", "drive writes/day"], rows))
    limit = p.get("compute_limit_resume_rate_per_s")
    out.append(("ul", [
        f"Recomputed: {p['recomputed_fraction']:.1%} of resumes, "
        f"{p['prefill_demand_gpu_s_per_s']:.3g} GPU-s of prefill per second on "
        f"{p['gpus']} GPUs: {'feasible' if p['compute_feasible'] else 'INFEASIBLE'}"
        + (f" (recomputes outgrow the GPUs above {limit:.3g} resumes per second)"
           if limit else "") + ".",
        "HBM holds the running batch: " + ("yes" if p["hbm_feasible"] else "NO") + ".",
        "Drive endurance: " + ("within the rating" if p["endurance_ok"] in (True, None)
                               else "the writes wear the drives out before their rating") + ".",
        "The plan as a whole: " + ("feasible" if p["feasible"] else "INFEASIBLE") + "."]))
    return out


#: the fleet's answer keys that size it (today's search: nodes_needed; a fleet with more SLOs
#: may add nodes_needed_* keys, each shown as it comes)
def _fleet_blocks(facts):
    fl, f = facts["fleet"], facts["file"]
    out = [("h3", "The fleet at the stated SLOs")]
    if "not_run" in fl:
        return out + [("p", f"Not sized: {fl['not_run']}.")]
    cmd = f"`kvmath fleet {facts['trace']} --scenario {f}`"
    pct = [(k, v) for k, v in fl["ttft_s"].items() if v is not None]
    out.append(("p", f"Trace {facts['trace']} ({fl['requests']:,} requests) routed {fl['router']} "
                     f"over {fl['nodes']} x {fl['node']} ({fl['model']}; {fl['layout']}), each "
                     f"replica scheduled step by step: {fl['token_hit_rate']:.1%} of tokens hit; "
                     "times to first token " + ", ".join(f"{k} {fmt_time(v)}" for k, v in pct)
                     + "; " + ("keeps up with the load" if fl["keeps_up"] else
                               "DOES NOT KEEP UP with the load")
                     + f"; ${fl['cost_per_million_tokens_usd']:.3g} per million tokens served "
                     f"({cmd})."))
    sized = [k for k in fl if k.startswith("nodes_needed") and not k.endswith("_for")]
    items = []
    for k in sized:
        n = fl[k]
        what = fl.get(f"{k}_for") or fl.get("nodes_needed_for", "")
        name = k.replace("nodes_needed", "fewest nodes").replace("_", " ")
        cost = fl.get(f"cost_per_million_tokens_usd_{k}")
        items.append(f"{name} that {what}: " + (
            f"{n}" + (f", ${cost:.3g} per million tokens" if cost else "") if n else
            "more than the largest fleet searched (max_nodes)"))
    out.append(("ul", items) if items else
               ("p", "The file states no max_nodes: the fewest nodes are not searched."))
    return out


def caveats(facts):
    """The caveats that apply to this scenario, in words, each from an answer or a row."""
    from kvmath.tables.rows import engines
    ok = _answered(facts["compare"])
    first = next(iter(ok.values()))
    out = []
    eng = engines().get(first["engine"])
    if eng is not None:
        out.append(f"**Engine version.** The engine profile `{eng.name}` describes {eng.engine}, "
                   f"{eng.version.split(' (')[0]}; another release is another profile "
                   "(`kvmath list`), and its costs differ.")
    if first.get("engine_costs_caveat"):  # what the request costs rest on, where too little
        out.append(f"**Engine costs.** {first['engine_costs_caveat']}")
    if not first["prefill_fit_own"]:
        out.append(f"**GPU without its own measurements.** {first['gpu']} has no operator "
                   "profile of its own: its prefill is another GPU's fit, and the recompute band "
                   "is as wide as that fit's error on the GPUs it was held against.")
    keys = facts["keys"]
    if keys.get("resume_rate") is not None:
        load = (f"the file's {keys['resume_rate']:g} resumes per second at the node, each "
                "reloading from the tier compared")
    elif keys.get("concurrent_reloads") is not None:
        load = f"the file's {keys['concurrent_reloads']:g} replica(s) reloading at once"
    else:
        load = "every replica of the node reloading at once, the worst case"
    out.append(f"**The assumed load.** Shared hops are split as {load}; a different load moves "
               "every reload through host DRAM or a drive.")
    limits = sorted({x for r in ok.values() for x in r["known_limits"]})
    if limits:
        out.append(f"**Known limits.** Validation row(s) {', '.join(limits)} show the model "
                   "missing this configuration; their error is in the bands.")
    projections = sorted({x for r in ok.values() for x in r.get("projections", [])})
    if projections:
        out.append(f"**Announced parts.** The answer uses {', '.join(projections)}: "
                   "projections, not measurements.")
    said = {}
    for t, lines in facts.get("notes", {}).items():
        for line in lines:
            said.setdefault(line[len("note: "):], []).append(t)
    for text, tiers in said.items():
        out.append(f"*compare, {join_and(tiers)}:* {text}")
    plan = facts["plan"]
    if "not_run" not in plan and not any(k in keys for k in ("batch_seqs", "batch_context")):
        out.append(f"**The running batch.** The plan keeps {plan['batch_seqs']:g} sequences of "
                   f"{plan['batch_context_tokens']:,} tokens in HBM (plan_defaults.csv, an "
                   "assumption): state batch_seqs and batch_context for yours.")
    if "not_run" not in facts["fleet"]:
        out.append(f"**The trace.** The fleet is sized on trace {facts['trace']}; its prompts, "
                   "pauses and reuse are that trace's, not necessarily yours.")
    warnings = sorted({w for r in _answered(facts["reuse"]).values()
                       for w in r.get("price_warnings", [])})
    out += [f"**Price.** {w}" for w in warnings]
    unused = {}
    for name, answers in (("compare", ok), ("reuse", _answered(facts["reuse"]))):
        for r in answers.values():
            unused.setdefault(name, set()).update(r.get("scenario_keys_not_used", []))
    for name in ("plan", "fleet"):
        if "not_run" not in facts[name]:
            unused.setdefault("tiers" if name == "plan" else "fleet", set()).update(
                facts[name].get("scenario_keys_not_used", []))
    said = [f"{c} does not read {', '.join(sorted(k))}" for c, k in unused.items() if k]
    if said:
        out.append("**Keys by command.** Each command reads the keys it takes: " + "; ".join(said)
                   + ".")
    return out


def sources(facts):
    """(header, rows) of every data row the answers rest on: its table, name, source, where in
    the source, retrieval date and kind."""
    from kvmath.tables.rows import (bundled, deployments, drives, engines, gpu_prices, nodes,
                                    pauses, prices)
    cat = bundled()
    ok = _answered(facts["compare"])
    first = next(iter(ok.values()))
    rows, seen = [], set()

    def add(table, name, row):
        if row is None or (table, name) in seen:
            return
        seen.add((table, name))
        rows.append([f"{table}.csv", name, getattr(row, "source", "") or "",
                     (getattr(row, "source_location", "") or "")[:160],
                     getattr(row, "retrieved", "") or "", getattr(row, "kind", "") or ""])

    add("models", first["model"], cat.models.get(first["model"]))
    add("gpus", first["gpu"], cat.gpus.get(first["gpu"]))
    if str(first.get("layout_from", "")).startswith("deployment"):
        add("deployments", f"{first['model']} on {first['gpu']}",
            deployments().get((first["model"], first["gpu"])))
    add("engines", first["engine"], engines().get(first["engine"]))
    node = facts["keys"].get("node")
    if node in nodes():
        add("nodes", node, nodes()[node])
        add("drives", nodes()[node].drive, drives().get(nodes()[node].drive))
    for r in ok.values():
        for h in r["path"]:
            add("links", h["link"], cat.links.get(h["link"]))
    for r in _answered(facts["reuse"]).values():
        add("gpu_prices", r["gpu"], gpu_prices().get(r["gpu"]))
        add("pauses", r["pause"], pauses().get(r["pause"]))
        for name in r["prices_observed"]:
            add("prices", name, prices().get(name))
    return (["table", "row", "source", "where in the source", "retrieved", "kind"], rows)


def review_blocks(facts, figures):
    """The section's blocks for the gathered answers ``facts`` and ``figures`` ([(Figure,
    file name)]: the time to first token, then the tiers)."""
    ok = _answered(facts["compare"])
    first = next(iter(ok.values()))
    v = version_info()
    where = facts["keys"].get("node") or first["gpu"]
    title = (f"Design review: {first['model']} on {where}, {first['tokens']:,} tokens "
             "of conversation")
    keys = ", ".join(f"{k} = {facts['keys'][k]!r}" for k in facts["keys"])
    blocks = [
        ("h2", title),
        ("p", f"*Written by `kvmath review {facts['file']}` (kvmath {v['version']}, commit "
              f"{v['commit']} of {v['date']}) on {datetime.date.today().isoformat()}. Every "
              "number is the answer of the command named beside it, run on this file; every "
              "data row the answers rest on is listed under Sources.*"),
        ("p", f"The file states: {keys}."),
        ("p", f"**Verdict.** On {first['gpus']} x {first['gpu']} per replica (TP {first['tp']}), "
              f"at {first['tokens']:,} tokens: " + verdict_words(facts["compare"])),
        ("figure", *figures[0]),
        ("h3", "Reload or recompute, per tier"),
        ("p", "Each tier's time to first token for the reload, against recompute by calibrated "
              "prefill, each with its band (the binding hop's measured spread and the prefill "
              "model's held-out error); the crossings are the prompt lengths where the winner "
              "changes."),
        _tier_table(facts),
        ("figure", *figures[1]),
        *_reuse_blocks(facts),
        *_plan_blocks(facts),
        *_fleet_blocks(facts),
        ("h3", "Caveats that apply"),
        ("ul", caveats(facts)),
        ("h3", "Sources"),
        ("table", *sources(facts)),
    ]
    return title, blocks


def review_figures(facts):
    """[(Figure, file name)] of the section: time to first token against prompt length over
    the tiers compared, and the tiers as a diagram, both from compare's record of the file."""
    from kvmath.present.figures import tier_diagram, ttft_curves, ttft_figure
    records = facts["records"]
    names = [t for t in facts["tiers"] if t in records]
    s = records[names[0]]
    tiers = [records[t].tier for t in names]
    tokens = facts["compare"][names[0]]["tokens"]
    ttft = ttft_figure(ttft_curves(s, tiers, tokens), ident="review-ttft", s=s)
    diagram = tier_diagram(s, tiers, tokens, ident="review-tiers")
    return [(ttft, "ttft.svg"), (diagram, "tiers.svg")]


def write_review(facts, out):
    """Write the section into folder ``out``: review.md (the figures beside it as SVG files)
    and review.html (self-contained); returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = review_figures(facts)
    title, blocks = review_blocks(facts, figures)
    written = [fig.save(out / name) for fig, name in figures]
    md = out / "review.md"
    md.write_text(markdown(blocks), encoding="utf-8")
    page = out / "review.html"
    page.write_text(html(blocks, title), encoding="utf-8")
    return [md, page, *written]


__all__ = ["Figure", "caveats", "html", "markdown", "review_blocks", "review_figures",
           "sources", "verdict_words", "write_review"]
