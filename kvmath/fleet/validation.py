"""Published fleet measurements reproduced (:func:`table`): each case a scenario file of
``kvmath/data/fleet_scenarios/`` (the fleet as ``kvmath fleet`` takes it, the workload as
``kvmath trace generate`` writes it, the arms compared, every assumption where the publication
leaves a parameter unstated), served by the fleet's scheduler (:func:`kvmath.fleet.run.fleet_of`),
against the measurements of ``kvmath/data/fleet_validation.csv`` (each row's source, location and
retrieval date; ``set_from`` true where a parameter of the case was set from that row, so its
error is not a test).

A load ladder (inference-perf's stages) is served as its load generator sends it: each stage's
``int(rate x seconds)`` requests at Poisson times, the next stage once they are all answered and
the stage's time is up, after ``interval_s`` (:func:`ladder`). A closed loop serves each user
count of the case. The predictions are computed here, never stored.
"""
from __future__ import annotations

import math
import tomllib
from functools import lru_cache

import numpy as np

from kvmath.tables.schema import data_path

#: the metrics a measurement row may give
METRICS = ("ttft_mean_s", "ttft_p90_s", "ttft_p99_s", "e2e_mean_s", "e2e_p90_s",
           "tokens_per_s", "output_tokens_per_s", "token_hit_rate", "capacity_qps")


def case_names():
    return sorted(p.stem for p in data_path("fleet_scenarios").glob("*.toml"))


@lru_cache(maxsize=None)
def case(name):
    """A case's scenario file, parsed."""
    with open(data_path("fleet_scenarios") / f"{name}.toml", "rb") as fh:
        return tomllib.load(fh)


def _node(value):
    p = data_path("fleet_scenarios") / f"{value}.csv"
    return str(p) if p.exists() else value


def case_node(c):
    """The node row of case ``c`` (bundled, or a CSV beside the case files)."""
    from kvmath.tables.rows import resolve_node
    return resolve_node(_node(c["fleet"]["node"]))


def scenario_of_case(c, arm, users=None):
    """The scenario record of an arm of case ``c``."""
    from kvmath.fleet.run import scenario_for
    from kvmath.tables.rows import bundled, resolve_node
    f = {**c["fleet"], **{k: v for k, v in arm.items() if k != "name"}}
    model = bundled().models[f.pop("model")]
    node = resolve_node(_node(f.pop("node")))
    nodes = f.pop("nodes")
    router = f.pop("router")
    if "router_param" in f:
        f["router_param"] = tuple(f["router_param"])
    if users:
        f["users"] = users
        f["think_time"] = c.get("closed_loop", {}).get("think_time", 0.0)
    return scenario_for(model, node, nodes, router, **f)


def _stages(w):
    out = []
    for part in w["stages"].split(","):
        rate, _, secs = part.partition(":")
        out.append((float(rate), float(secs)))
    return out


def workload_trace(c, arrivals):
    """The case's workload at the times ``arrivals`` (a Trace)."""
    from kvmath.traces import generate as G
    w = c["workload"]
    bt = int(w.get("block_tokens", 64))
    if w["workload"] == "shared-prefix":
        return G.shared_prefix_trace(w["groups"], w["prompts_per_group"], w["system_tokens"],
                                     w["question_tokens"], w["output_tokens"], arrivals,
                                     block_tokens=bt, cycle=not w.get("once", False),
                                     seed=int(w.get("seed", 0)))
    raise ValueError(f"workload {w['workload']!r} has no arrivals of its own")


def sessions_of(c):
    """A closed-loop case's sessions: each thread's user text uniform over the filter's
    character range, split over its turns, scaled so the prompts average the published mean
    (``prompt_tokens_mean``)."""
    from kvmath.traces import generate as G
    w = c["workload"]

    def build(scale):
        return G.sessions_trace(int(w["sessions"]), w["turns_mean"], 1.0, w["output_tokens"],
                                turns_min=w["turns_min"], turns_max=w["turns_max"],
                                block_tokens=int(w.get("block_tokens", 16)), seed=0,
                                split_tokens=lambda rng: scale * rng.uniform(500, 3000))
    lo, hi = 0.01, 2.0  # tokens a character: bisected to the published mean prompt
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if build(mid).prompt_tokens.mean() < w["prompt_tokens_mean"]:
            lo = mid
        else:
            hi = mid
    return build(0.5 * (lo + hi))


def _arrivals(stages, counts, starts, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for (rate, _), n, t0 in zip(stages, counts, starts):
        out.append(t0 + np.cumsum(rng.exponential(1.0 / rate, size=n)) if n else np.zeros(0))
    return out


def ladder(c, s):
    """(answer of the fleet, per-request output, stage of each request, the stages, their
    starts) of a load ladder served as inference-perf sends it (the module's docstring)."""
    from kvmath.fleet.run import fleet_of
    from kvmath.traces.generate import stage_counts
    w = c["workload"]
    stages = _stages(w)
    counts = stage_counts(stages)
    rel = np.concatenate(_arrivals(stages, counts, [0.0] * len(stages)))
    stage = np.repeat(np.arange(len(stages)), counts)
    captured = {}
    ans = fleet_of(workload_trace(c, rel), s, tier_replay=False, capture=captured,
                   stages=(tuple(stage), tuple(d for _, d in stages),
                           float(w.get("interval_s", 1.0))))
    return ans, captured["out"], stage, stages


def _stats(out, sel):
    ok = sel & (out["status"] == 4)
    ttft = (out["first"] - out["sent"])[ok]
    e2e = (out["done"] - out["sent"])[ok]
    span = float(out["done"][ok].max() - out["sent"][sel].min()) if ok.any() else 0.0
    toks = float((out["prompt"][ok] + out["output"][ok]).sum())
    if not len(ttft):
        return {}
    return {"ttft_mean_s": float(ttft.mean()), "ttft_p90_s": float(np.percentile(ttft, 90)),
            "ttft_p99_s": float(np.percentile(ttft, 99)), "e2e_mean_s": float(e2e.mean()),
            "e2e_p90_s": float(np.percentile(e2e, 90)),
            "tokens_per_s": toks / span if span > 0 else None,
            "output_tokens_per_s": float(out["output"][ok].sum()) / span if span > 0 else None}


@lru_cache(maxsize=None)
def predictions(name):
    """{(arm, stage, metric): predicted} of case ``name`` (stage: a ladder's rate, a closed
    loop's users, or "all")."""
    from kvmath.fleet.run import fleet_of
    c = case(name)
    out = {}
    if c.get("not_reproduced"):  # the chapter says why, in words
        return out
    for arm in c["arm"]:
        if "stages" in c["workload"]:
            s = scenario_of_case(c, arm)
            _, res, stage, stages = ladder(c, s)
            warm = int(c["workload"].get("warmup_stages", 0))
            for k, (rate, _) in enumerate(stages):
                for metric, v in _stats(res, stage == k).items():
                    out[arm["name"], f"{rate:g}", metric] = v
            limit = c.get("objective", {}).get("ttft_p90_s")
            if limit is not None:  # the highest stage up to which every stage's p90 is within it
                cap = None
                for k in range(warm, len(stages)):
                    if out[arm["name"], f"{stages[k][0]:g}", "ttft_p90_s"] > limit:
                        break
                    cap = stages[k][0]
                out[arm["name"], "all", "capacity_qps"] = cap
        elif "closed_loop" in c:
            trace = sessions_of(c)
            for users in c["closed_loop"]["users"]:
                s = scenario_of_case(c, arm, users=users)
                cap = {}
                fleet_of(trace, s, tier_replay=False, capture=cap)
                for metric, v in _stats(cap["out"], cap["out"]["sent"] >= 0).items():
                    out[arm["name"], str(users), metric] = v
        else:
            w = c["workload"]
            trace = workload_trace(c, np.zeros(int(w["requests"])))
            s = scenario_of_case(c, arm)
            cap = {}
            a = fleet_of(trace, s, tier_replay=False, capture=cap)
            for metric, v in _stats(cap["out"], cap["out"]["sent"] >= 0).items():
                out[arm["name"], "all", metric] = v
            out[arm["name"], "all", "token_hit_rate"] = a["token_hit_rate"]
    return out


def why_not(name):
    """Why a case is not reproduced here (None: it is)."""
    text = case(name).get("not_reproduced")
    return " ".join(text.split()) if text else None


def measurements():
    """The rows of kvmath/data/fleet_validation.csv."""
    from kvmath.tables.rows import table as rows_of
    return rows_of("fleet_validation")


def table(cases=None):
    """Rows {measurement, predicted, ratio, within} of every measurement (of ``cases``)."""
    rows = []
    for m in measurements().values():
        if cases is not None and m.case not in cases:
            continue
        p = predictions(m.case).get((m.arm, m.stage, m.metric))
        ratio = (p / m.measured_value if p is not None and m.measured_value else None)
        within = (ratio is not None and ratio > 0
                  and max(ratio, 1 / ratio) <= m.tolerance_factor)
        rows.append({"measurement": m, "predicted": p, "ratio": ratio, "within": within})
    return rows


def error_summary(rows):
    """{rows, within, median_abs_log_error} over the rows no parameter was set from, with a
    prediction."""
    test = [r for r in rows if not r["measurement"].set_from and r["ratio"]]
    logs = [abs(math.log(r["ratio"])) for r in test if r["ratio"] > 0]
    return {"rows": len(test), "within": sum(r["within"] for r in test),
            "median_ratio_error": (math.exp(float(np.median(logs))) if logs else None)}

