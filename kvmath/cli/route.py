"""``kvmath route FILE --model M --nodes N``: a trace served by a fleet of N nodes under each
router (:mod:`kvmath.fleet.routers`), step by step as their engines schedule: the hits each router
keeps, its reach, its load imbalance and the times to first token it gives.

The measured ``reach_continuation`` (the share of turns routed to their previous turn's node) is
the h_route that ``reuse`` and ``tiers`` take as ``--reach``.

``kvmath fleet FILE --model M --nodes N`` (here too: the same group) serves the trace under one
router: its latencies (time to first token, time per output token, end to end: mean and
percentiles), throughput, goodput, per node and per window, each node's tier traffic, cost, and
with ``--max-nodes`` the fewest nodes that keep up and meet the objectives (``--slo``). Both read
their scenario as every command does (:func:`kvmath.scenario.build.scenario_of`: the node, its
TP, the engine and its scheduler, a pool).
"""
from __future__ import annotations


from kvmath.cli.output import print_result
from kvmath.cli.trace import add_trace_command, window_keys, window_line
from kvmath.errors import UsageError
from kvmath.scenario.build import scenario_of
from kvmath.scenario.options import FLEET, ROUTE


def add_parser(subparsers):
    """Add the ``route`` sub-command to an argparse subparsers object."""
    return add_trace_command(subparsers, "route", "a request trace routed over N nodes by each "
                             "routing policy: hits, reach and load imbalance")


def analyse(args):
    """The JSON-ready result of ``kvmath route``."""
    from kvmath.traces import readers as T
    s, cfg = scenario_of(args, ROUTE)
    with T.WorkDirectory("kvmath-route-") as work:  # a full disk there: one line, exit 2
        trace = T.stream(args.file, work)  # its blocks on disk, read in order
        return _analyse_route(args, trace, s, cfg)


def _analyse_route(args, trace, s, cfg):
    from dataclasses import replace

    from kvmath.fleet.routers import ROUTERS, reach
    from kvmath.fleet.run import fleet_of, _tp_of
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.traces import readers as T
    from kvmath.traces import replay as C
    from kvmath.fleet.nodes import check_fleet, node_setup
    check_fleet(trace, s.nodes)
    s = _tp_of(s, trace)
    node, model, tp, nodes = s.node, s.model, s.tp, s.nodes
    kw = cache_sizes(s, cfg, node, tp, model)
    _, block_bytes, _, blocks, _ = node_setup(trace, model, node, tp, s.engine, 0,
                                              s.batch_context, kv_dtype=s.kv_dtype, **kw)
    parent = T.continuations(trace)
    routers = []
    for name in ROUTERS:
        a = fleet_of(trace, replace(s, router=name, router_param=None), tier_replay=False,
                     cache_kw=kw, parent=parent)
        routers.append({"router": name, "token_hit_rate": a["token_hit_rate"],
                        "token_hit_rate_hbm": a["token_hit_rate_hbm"],
                        "reach_continuation": a["reach_continuation"],
                        "reach_analytic": reach(name, nodes),
                        "load_imbalance": a["load_imbalance"], "ttft_s": a["ttft_s"],
                        "keeps_up": a["keeps_up"], "layout": a["layout"]})
    hits, _ = C.shared_prefix_hits(trace, blocks * nodes)  # the fleet's caches as one
    one = float((hits * trace.block_tokens).clip(max=trace.prompt_tokens).sum()
                / max(float(trace.prompt_tokens.sum()), 1.0))
    return {"trace": args.file, "model": model.name, "node": node.name, "tp": tp,
            "nodes": nodes, "requests": trace.n_requests,
            "block_tokens": trace.block_tokens, "block_bytes": block_bytes,
            "capacity_blocks_per_node": blocks, "shared_cache_token_hit_rate": one,
            "routers": routers, **window_keys(trace, model),
            **({"engine": s.engine.name} if s.engine is not None else {}),
            **({"engine_config": cfg.summary(model)} if cfg is not None else {})}


def _human(r):
    lines = [f"{r['trace']}: {r['requests']:,} requests served by {r['nodes']} x {r['node']} "
             f"({r['model']}, TP {r['tp']}), each node caching {r['capacity_blocks_per_node']:,} "
             f"blocks of {r['block_tokens']} tokens in all its tiers",
             f"one cache of the fleet's size that every node reads: "
             f"{r['shared_cache_token_hit_rate']:.1%} of prompt tokens hit",
             f"{'router':<12} {'tokens hit':>10} {'in HBM':>7} {'reach':>7} {'analytic':>9} "
             f"{'imbalance':>10} {'TTFT p90':>9}"]
    for x in r["routers"]:
        def pct(v):
            return "-" if v is None else f"{v:.1%}"
        imb = "-" if x["load_imbalance"] is None else f"{x['load_imbalance']:.2f}"
        lines.append(f"{x['router']:<12} {x['token_hit_rate']:>10.1%} "
                     f"{x['token_hit_rate_hbm']:>7.1%} "
                     f"{pct(x['reach_continuation']):>7} {x['reach_analytic']:>9.1%} "
                     f"{imb:>10} {_t(x['ttft_s']['p90']):>9}"
                     + ("" if x["keeps_up"] else " (does not keep up)"))
    lines.append("reach: the turns routed to their previous turn's node (tiers and reuse take it "
                 "as --reach); tokens hit: found in the replica's HBM or loaded from the tiers "
                 "below; imbalance: the busiest node's prompt tokens over the mean; each router "
                 "at its deployed defaults (" + r["routers"][0]["layout"] + ")")
    if window_line(r):
        lines.append(window_line(r))
    return "\n".join(lines)


def run(args):
    """Run ``kvmath route``; returns the exit status."""
    print_result(args, analyse(args), _human)
    return 0


def add_fleet_parser(subparsers):
    """Add the ``fleet`` sub-command to an argparse subparsers object."""
    return add_trace_command(subparsers, "fleet", "a request trace on N nodes: routed, then each "
                             "node's tiers replayed; hits, traffic, wear, prefill demand and "
                             "times to first token per node")


def analyse_fleet(args):
    """The JSON-ready result of ``kvmath fleet``."""
    from kvmath.traces import readers as T
    s, cfg = scenario_of(args, FLEET)
    if s.pool is not None:  # a pool the nodes cannot reach, before the trace's read
        check_pool_reach(s.pool, s.node)
    with T.WorkDirectory("kvmath-fleet-") as work:  # a full disk there: one line, exit 2
        # the trace's blocks stay on disk, read in order; each node's go to a file beside them
        trace = T.stream(args.file, work)
        return _analyse_fleet(args, trace, s, cfg)


def check_pool_reach(pool, node):
    """Refuse a pool the node's engines cannot reach as its row deploys it: every pool is read
    over the network, through ``client_nics`` NICs of each GPU node (nodes.csv ``nics``;
    :func:`kvmath.logic.node_tier`)."""
    from kvmath.logic.path import node_tier
    from kvmath.tiers.build import pool_tier
    node_tier(node, pool_tier(pool, pool.gpu_nodes))


def slos_of(s):
    """The objectives of scenario ``s``: its --slo texts parsed, and --slo-ttft-p99 (kept as an
    alias of --slo ttft:p99:S)."""
    from kvmath.fleet.metrics import parse_slo
    out = [parse_slo(t) for t in (s.slo or ())]
    if s.slo_ttft_p99 is not None:
        out.append(("ttft", 99.0, float(s.slo_ttft_p99)))
    return tuple(out)


def percentiles_of(args):
    from kvmath.fleet.metrics import PERCENTILES
    text = getattr(args, "percentiles", None)
    if not text:
        return PERCENTILES
    try:
        out = tuple(float(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or not all(0 < q < 100 for q in out):
        raise UsageError(f"--percentiles {text!r}: expected numbers between 0 and 100, "
                         "comma-separated (50,90,99)")
    return out


def _analyse_fleet(args, trace, s, cfg):
    from dataclasses import replace

    from kvmath.fleet.run import fleet_cost, fleet_of, nodes_needed_of
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.fleet.run import _tp_of
    s = _tp_of(s, trace)
    node, model, pool = s.node, s.model, s.pool
    slos = slos_of(s)
    kw = cache_sizes(s, cfg, node, s.tp, model)
    dask = None if args.dask == "none" else args.dask
    if slos and not s.max_nodes and s.slo_ttft_p99 is not None and not s.slo:
        raise UsageError("--slo-ttft-p99 needs --max-nodes (the largest fleet to search)")
    out = fleet_of(trace, s, dask=dask, slos=slos, percentiles=percentiles_of(args),
                   window_s=getattr(args, "window_s", None), cache_kw=kw)
    out["trace"] = args.file
    out.update(window_keys(trace, model), requests=trace.n_requests, model=model.name)
    # what the fleet's nodes cost per million tokens served, at the GPU-hour price (a cloud
    # node's, its host included); the network between nodes is not priced
    out.update(fleet_cost(trace, node, s.nodes, s.gpu_price, out["span_s"]))
    if s.max_nodes:
        def cost(n, tried):  # priced over the span that fleet served, as the fleet above is
            return (fleet_cost(trace, node, n, s.gpu_price, tried[n]["span_s"])
                    ["cost_per_million_tokens_usd"] if n else None)
        need, tried = nodes_needed_of(trace, s, s.max_nodes, slos, cache_kw=kw)
        out["nodes_needed"] = need
        out["cost_per_million_tokens_usd_nodes_needed"] = cost(need, tried)
        if pool is not None:  # the same search without the pool, to set against it
            alone, tried = nodes_needed_of(trace, replace(s, pool=None), s.max_nodes, slos,
                                           cache_kw=kw)
            out["nodes_needed_without_pool"] = alone
            out["cost_per_million_tokens_usd_nodes_needed_without_pool"] = cost(alone, tried)
        from kvmath.fleet.metrics import slo_label
        out["nodes_needed_for"] = "keep up with the load" + (
            "" if not slos else ", and " + ", ".join(slo_label(x) for x in slos))
    if cfg is not None:
        out["engine_config"] = cfg.summary(model)
    return out


def _t(v):
    """A time, or - where there is none (no request served)."""
    from kvmath.present.format import fmt_time
    return "-" if v is None else fmt_time(v)


def _stat_line(name, x):
    parts = [f"mean {_t(x['mean'])}"] + [f"{k} {_t(v)}" for k, v in x.items() if k != "mean"]
    return f"{name}: " + ", ".join(parts) if x["mean"] is not None else f"{name}: -"


def _fleet_human(r):
    from kvmath.present.format import fmt_bytes
    lines = [f"{r['trace']}: {r['requests']:,} requests on {r['nodes']} x {r['node']} "
             f"({r['model']}), routed {r['router']}; {r['layout']}",
             f"served {r['requests_served']:,} in {r['span_s']:,.0f} s: "
             f"{r['requests_per_s']:.3g} requests/s, {r['output_tokens_per_s']:,.0f} output "
             f"tokens/s" if r["requests_per_s"] else f"served {r['requests_served']:,}",
             _stat_line("time to first token", r["ttft_s"]),
             _stat_line("time per output token", r["tpot_s"]),
             _stat_line("end to end", r["e2e_s"]),
             f"tokens hit: {r['token_hit_rate']:.1%} ({r['token_hit_rate_hbm']:.1%} in HBM, the "
             f"rest loaded from the tiers below); " + (
                 f"{r['reach_continuation']:.1%} of turns reach their previous turn's node"
                 if r["reach_continuation"] is not None else "no turn continues an earlier one")
             + "; load imbalance " + (f"{r['load_imbalance']:.2f}"
                                      if r["load_imbalance"] is not None else "-")
             + f"; {r['preemptions']:,} preemption(s)",
             ("keeps up with the load" if r["keeps_up"] else "DOES NOT KEEP UP with the load")
             + f": {r['keeps_up_why']}"]
    if r["requests_refused"]:
        lines.append(f"{r['requests_refused']:,} request(s) refused: prompt and output beyond a "
                     "replica's KV capacity or the model's window")
    for x in r["slos"]:
        lines.append(f"objective {x['slo']}: " + _t(x["value_s"])
                     + (" met" if x["met"] else " NOT met"))
    if r.get("goodput_requests_per_s") is not None:
        lines.append(f"goodput: {r['goodput_requests_per_s']:.3g} requests/s meet every "
                     "objective")
    lines.append(f"{'node':>4} {'requests':>9} {'tokens hit':>10} {'TTFT p90':>9} {'busy':>6} "
                 f"{'preempted':>9}  tier reads / writes")
    for x in r["per_node"]:
        traffic = ", ".join(f"{t['tier']} {fmt_bytes(t['read_Bps'], 3)}/s / " + (
                            "(the fleet's)" if t.get("shared") else
                            f"{fmt_bytes(t['write_Bps'], 3)}/s") for t in x.get("tiers", ())
                            if t["tier"] != "hbm")
        p90 = x["ttft_s"].get("p90")
        lines.append(f"{x['node']:>4} {x['requests']:>9,} {x['token_hit_rate']:>10.1%} "
                     f"{_t(p90):>9} {x['busy']:>6.0%} "
                     f"{x['preemptions']:>9,}  {traffic}")
    for w in r.get("windows", ()):
        lines.append(f"  {w['start_s']:>8,.0f}-{w['end_s']:<8,.0f} s: {w['requests']:>7,} "
                     f"requests, TTFT mean {_t(w['ttft_s']['mean'])} p90 "
                     f"{_t(w['ttft_s'].get('p90'))}, "
                     f"{w['output_tokens_per_s']:,.0f} output tokens/s")
    price = (f"${r['gpu_hour_usd']:.3g} per GPU-hour"
             + (f", listed {r['gpu_price_observed']}" if r["gpu_price_observed"] else ", given"))
    lines.append(f"cost: ${r['cost_per_million_tokens_usd']:.3g} per million tokens served "
                 f"(prompt and output) at {price}, every hour of the fleet's nodes; the network "
                 "between them is not priced")
    if "nodes_needed" in r:
        lines.append(f"fewest nodes that {r['nodes_needed_for']}: " + (
            f"{r['nodes_needed']}, ${r['cost_per_million_tokens_usd_nodes_needed']:.3g} per "
            "million tokens" if r["nodes_needed"] else "more than --max-nodes"))
    if "pool" in r:
        p = r["pool"]
        lines.append(f"pool {p['pool']} ({fmt_bytes(p['capacity_bytes'], 4)}), written "
                     + ("through by the" if p["writes"] == "through" else "back (evictions) by the")
                     + f" {r['nodes']} nodes: {p['hit_rate']:.1%} of blocks served from it, read "
                     f"{fmt_bytes(p['read_Bps'], 3)}/s, written {fmt_bytes(p['write_Bps'], 3)}/s "
                     f"over {p['replicas']} replica(s); its media "
                     f"${p['pool_cost_per_million_tokens_usd']:.3g} per million tokens at "
                     f"{p['pool_priced_as']} prices (its servers not priced)"
                     + ("" if p["writes_within_bandwidth"] else
                        f": INFEASIBLE, beyond its {fmt_bytes(p['write_bandwidth_Bps'], 3)}/s"))
    if "nodes_needed_without_pool" in r:
        n = r["nodes_needed_without_pool"]
        lines.append("without the pool: " + (
            f"{n}, ${r['cost_per_million_tokens_usd_nodes_needed_without_pool']:.3g} per million "
            "tokens (the pool itself not priced)" if n else "more than --max-nodes"))
    lines.append("not counted: " + "; ".join(r["not_counted"]))
    if window_line(r):
        lines.append(window_line(r))
    return "\n".join(lines)


def run_fleet(args):
    """Run ``kvmath fleet``; returns the exit status."""
    print_result(args, analyse_fleet(args), _fleet_human)
    return 0
