"""What a served fleet's requests saw, as people set objectives on it: time to first token (TTFT),
time per output token after the first (TPOT, the mean inter-token latency of a request), end-to-end
latency (E2E), each as a mean and any percentile; requests and tokens served per second; goodput
(the requests a second that meet every objective); per node and per time window; and whether the
fleet keeps up with its load (:func:`summarise`). Objectives are stated as
``METRIC:STAT:SECONDS`` (:func:`parse_slo`: ``ttft:p90:2``, ``tpot:p99:0.05``, ``e2e:mean:30``).

Percentiles are numpy's (linear interpolation) over the requests served; a request refused (its
prompt and output beyond a replica's KV or the model's window) is counted apart, never as a time.
"""
from __future__ import annotations

import math

import numpy as np

from kvmath.errors import UsageError

#: the per-request metrics objectives take
METRICS = ("ttft", "tpot", "e2e")
#: the percentiles every answer gives
PERCENTILES = (50, 90, 99)
DONE = 4


def parse_slo(text):
    """(metric, percentile or None for the mean, seconds) of ``METRIC:STAT:SECONDS``; a UsageError
    saying what was expected."""
    parts = str(text).strip().lower().split(":")
    want = (f"--slo {text!r}: expected METRIC:STAT:SECONDS, METRIC one of {', '.join(METRICS)}, "
            "STAT mean or pN (0 < N < 100), SECONDS positive (ttft:p90:2)")
    if len(parts) != 3 or parts[0] not in METRICS:
        raise UsageError(want)
    metric, stat, value = parts
    try:
        seconds = float(value)
        q = None if stat == "mean" else float(stat[1:]) if stat.startswith("p") else math.nan
    except ValueError:
        raise UsageError(want) from None
    if not (math.isfinite(seconds) and seconds > 0) or (q is not None and not 0 < q < 100):
        raise UsageError(want)
    return metric, q, seconds


def slo_label(slo):
    metric, q, seconds = slo
    return f"{metric} {'mean' if q is None else f'p{q:g}'} <= {seconds:g} s"


def per_request(out):
    """{metric: array over the requests served} and the served mask."""
    ok = out["status"] == DONE
    sent, first, done = out["sent"], out["first"], out["done"]
    outp = out["output"]
    tpot = np.where(outp > 1, (done - first) / np.maximum(outp - 1, 1), 0.0)
    return {"ttft": (first - sent)[ok], "tpot": tpot[ok & (outp > 1)],
            "e2e": (done - sent)[ok]}, ok


def stats(x, percentiles=PERCENTILES):
    """{mean, pN...} of an array (None each when empty)."""
    x = np.asarray(x, float)
    if not len(x):
        return {"mean": None, **{f"p{q:g}": None for q in percentiles}}
    vals = np.percentile(x, list(percentiles))
    return {"mean": float(x.mean()), **{f"p{q:g}": float(v) for q, v in zip(percentiles, vals)}}


def value_of(x, q):
    x = np.asarray(x, float)
    if not len(x):
        return None
    return float(x.mean()) if q is None else float(np.percentile(x, q))


def _waiting(sent, admitted, a, b):
    """Time-average requests waiting (arrived, not yet scheduled) over [a, b)."""
    if b <= a:
        return 0.0
    lo = np.maximum(sent, a)
    hi = np.minimum(np.where(admitted < 0, b, admitted), b)
    return float(np.clip(hi - lo, 0, None).sum() / (b - a))


def keeps_up(out, replicas):
    """(True or False, words): the fleet keeps up unless its queue grows over the arrivals: the
    requests waiting for their first step, on average over the last quarter of the span the
    requests arrive over, more than 1.5 times the second quarter's plus one a replica."""
    sent, adm = out["sent"], out["admitted"]
    ok = sent >= 0
    if not ok.any():
        return True, "no request"
    t0, t1 = float(sent[ok].min()), float(sent[ok].max())
    if t1 <= t0:
        return True, "every request at once"
    q = (t1 - t0) / 4
    w2 = _waiting(sent[ok], adm[ok], t0 + q, t0 + 2 * q)
    w4 = _waiting(sent[ok], adm[ok], t0 + 3 * q, t1)
    if w4 > 1.5 * w2 + replicas:
        return False, (f"the queue grows: {w2:,.1f} requests wait on average in the second "
                       f"quarter of the arrivals, {w4:,.1f} in the last (the fleet serves less "
                       "than arrives)")
    return True, f"{w4:,.1f} requests wait on average in the last quarter of the arrivals"


def goodput(out, slos, span):
    """Requests a second that meet every per-request objective (a percentile objective holds a
    request to its threshold: DistServe's definition of goodput)."""
    m, ok = per_request(out)
    good = ok.copy()
    sent, first, done, outp = out["sent"], out["first"], out["done"], out["output"]
    for metric, _, seconds in slos:
        if metric == "ttft":
            good &= (first - sent) <= seconds
        elif metric == "e2e":
            good &= (done - sent) <= seconds
        else:
            tp = np.where(outp > 1, (done - first) / np.maximum(outp - 1, 1), 0.0)
            good &= tp <= seconds
    return float(good.sum() / span) if span > 0 else None


def windows(out, window_s, percentiles=PERCENTILES):
    """Rows per window of ``window_s`` seconds of arrivals: requests, TTFT and E2E stats, and
    the output tokens served in the window (each request's spread evenly from its first token
    to its last)."""
    m, ok = per_request(out)
    sent = out["sent"][ok]
    if not len(sent):
        return []
    first, done, outp = out["first"][ok], out["done"][ok], out["output"][ok]
    t0 = float(sent.min())
    end = float(done.max())
    n = max(int(math.ceil((float(sent.max()) - t0) / window_s + 1e-9)), 1)
    which = np.minimum(((sent - t0) // window_s).astype(np.int64), n - 1)
    edges = t0 + window_s * np.arange(n + 1)
    rows = []
    rate = (outp - 1) / np.maximum(done - first, 1e-12)  # tokens a second after the first
    for k in range(n):
        a, b = edges[k], min(edges[k + 1], end) if k == n - 1 else edges[k + 1]
        sel = which == k
        overlap = np.clip(np.minimum(done, b) - np.maximum(first, a), 0, None)
        toks = float((overlap * rate).sum() + ((first >= a) & (first < b)).sum())
        rows.append({"start_s": float(a - t0), "end_s": float(edges[k + 1] - t0),
                     "requests": int(sel.sum()),
                     "ttft_s": stats(m["ttft"][sel], percentiles),
                     "e2e_s": stats(m["e2e"][sel], percentiles),
                     "output_tokens_per_s": toks / max(b - a, 1e-12)})
    return rows


def summarise(out, info, slos=(), percentiles=PERCENTILES, window_s=None):
    """The fleet's answer from the loop's (:func:`kvmath.fleet.serving.serve`): latencies
    (mean and ``percentiles``), throughput, goodput, hits, per node, per window, the objectives
    met, and whether it keeps up."""
    m, ok = per_request(out)
    per_node = info["replicas_per_node"]
    bt = info["block_tokens"]
    prompt = out["prompt"]
    sent = out["sent"][out["sent"] >= 0]
    served = int(ok.sum())
    t0 = float(sent.min()) if len(sent) else 0.0
    t1 = float(out["done"][ok].max()) if served else t0
    span = t1 - t0
    hit = np.minimum(out["hit_blocks"] * bt, prompt)
    loaded = np.minimum(out["loaded_blocks"] * bt, prompt - hit)
    gen = out["output"][ok]
    up, why = keeps_up(out, len(out["sums"]))
    met = []
    for slo in slos:
        metric, q, seconds = slo
        v = value_of(m[metric], q)
        met.append({"slo": slo_label(slo), "value_s": v,
                    "met": v is not None and v <= seconds})
    nodes = []
    replica = out["replica"]
    node_of = np.where(replica >= 0, replica // per_node, -1)
    sums = out["sums"]
    for n in range(len(sums) // per_node):
        mine = ok & (node_of == n)
        rows = slice(n * per_node, (n + 1) * per_node)
        nodes.append({"node": n, "requests": int((node_of == n).sum()),
                      "ttft_s": stats((out["first"] - out["sent"])[mine], percentiles),
                      "token_hit_rate": float((hit + loaded)[node_of == n].sum()
                                              / max(prompt[node_of == n].sum(), 1)),
                      "busy": float(sums[rows, 0].sum() / max(span * per_node, 1e-12)),
                      "preemptions": int(sums[rows, 3].sum())})
    return {"requests_served": served, "requests_refused": int(out["refused"].sum()),
            "requests_unserved": int(((~ok) & (~out["refused"])).sum()),
            "span_s": span,
            "ttft_s": stats(m["ttft"], percentiles), "tpot_s": stats(m["tpot"], percentiles),
            "e2e_s": stats(m["e2e"], percentiles),
            "requests_per_s": served / span if span > 0 else None,
            "output_tokens_per_s": float(gen.sum() / span) if span > 0 else None,
            "tokens_per_s": float((gen.sum() + prompt[ok].sum()) / span) if span > 0 else None,
            "goodput_requests_per_s": goodput(out, slos, span) if slos else None,
            "token_hit_rate": float((hit + loaded).sum() / max(prompt.sum(), 1)),
            "token_hit_rate_hbm": float(hit.sum() / max(prompt.sum(), 1)),
            "token_load_rate": float(loaded.sum() / max(prompt.sum(), 1)),
            "preemptions": int(out["preempted"].sum()),
            "slos": met, "slos_met": all(x["met"] for x in met),
            "keeps_up": up, "keeps_up_why": why,
            "per_node": nodes,
            **({"windows": windows(out, window_s, percentiles)} if window_s else {})}
