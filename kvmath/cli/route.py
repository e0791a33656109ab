"""``kvmath route FILE --model M --nodes N``: a trace routed over a fleet of N nodes under each
routing policy: the hits each router keeps, its reach and its load imbalance.

Each node caches the trace's KV blocks in an LRU of what all its tiers hold together (HBM after
the weights and running batch, host DRAM, drives: the node plan's capacities); the measured
``reach_continuation`` (the share of turns routed to their previous turn's node) is the h_route
that ``reuse`` and ``tiers`` take as ``--reach``.

``kvmath fleet FILE --model M --nodes N`` (here too: the same group) replays each node's tiers
after routing: hits, traffic, wear, prefill and decode demand, times to first token, cost, and
with ``--max-nodes`` the fewest nodes that serve the trace. Both read their scenario as every
command does (:func:`kvmath.scenario.build.scenario_of`: the node, its TP, the engine, a pool).
"""
from __future__ import annotations

from dataclasses import replace

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
    from kvmath.fleet.routers import ROUTERS, reach
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.traces import readers as T
    from kvmath.fleet.nodes import check_fleet, node_setup
    from kvmath.fleet.routing import route
    from kvmath.scenario.build import with_node_tp
    check_fleet(trace, s.nodes)
    batch_context = s.batch_context or T.batch_context_of(trace, s.model)
    s = with_node_tp(s, batch_context)
    node, model, tp, engine, nodes = s.node, s.model, s.tp, s.engine, s.nodes
    _, block_bytes, _, blocks, _ = node_setup(trace, model, node, tp, engine, s.batch_seqs,
                                              batch_context,
                                              **cache_sizes(s, cfg, node, tp, model))
    routers = []
    parent = T.continuations(trace)
    for name in ROUTERS:
        r = route(trace, nodes, name, blocks, parent=parent)
        r.pop("routed_prompt_tokens")
        r["reach_analytic"] = reach(name, nodes)
        routers.append(r)
    one = route(trace, 1, "round-robin", blocks * nodes, parent=parent)  # the caches as one
    fit = hbm_fit(replace(s, batch_context=batch_context), trace)
    return {"trace": args.file, "model": model.name, "node": node.name, "tp": tp,
            "nodes": nodes, "requests": trace.n_requests,
            "block_tokens": trace.block_tokens, "block_bytes": block_bytes,
            "capacity_blocks_per_node": blocks,
            "shared_cache_token_hit_rate": one["token_hit_rate"],
            "routers": routers, **fit, **window_keys(trace, model),
            **({"engine": engine.name} if engine is not None else {}),
            **({"engine_config": cfg.summary(model)} if cfg is not None else {})}


def _human(r):
    lines = [f"{r['trace']}: {r['requests']:,} requests routed over {r['nodes']} x {r['node']} "
             f"({r['model']}, TP {r['tp']}), each caching {r['capacity_blocks_per_node']:,} "
             f"blocks of {r['block_tokens']} tokens",
             f"one cache of the fleet's size that every node reads: "
             f"{r['shared_cache_token_hit_rate']:.1%} of prompt tokens hit",
             f"{'router':<12} {'tokens hit':>10} {'reach':>7} {'analytic':>9} {'of cached':>10} "
             f"{'imbalance':>10}"]
    for x in r["routers"]:
        def pct(v):
            return "-" if v is None else f"{v:.1%}"
        imb = "-" if x["load_imbalance"] is None else f"{x['load_imbalance']:.2f}"
        lines.append(f"{x['router']:<12} {x['token_hit_rate']:>10.1%} "
                     f"{pct(x['reach_continuation']):>7} {x['reach_analytic']:>9.1%} "
                     f"{pct(x['token_reach']):>10} {imb:>10}")
    lines.append("reach: the turns routed to their previous turn's node (tiers and reuse take it "
                 "as --reach); of cached: the tokens hit over those cached anywhere in the fleet, "
                 "shared prefixes included; imbalance: the busiest node's prompt tokens over the "
                 "mean")
    if hbm_line(r):
        lines.append(hbm_line(r))
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


def hbm_fit(s, trace):
    """{hbm_free_bytes, hbm_feasible}: the HBM a node of scenario ``s`` has left beside the
    weights and its running batch (batch_seqs sequences of batch_context tokens, the trace's
    running context by default), negative when the batch overfills it
    (:func:`kvmath.node.capacities.node_capacities`)."""
    from kvmath.node.capacities import node_capacities
    from kvmath.traces import readers as T
    free = node_capacities(s.node, s.model, tp=s.tp, batch_seqs=s.batch_seqs,
                           batch_context=s.batch_context or T.batch_context_of(trace, s.model)
                           )["hbm_free_bytes"]
    return {"hbm_free_bytes": free, "hbm_feasible": free >= 0}


def hbm_line(r):
    """The line saying a node's running batch overfills its HBM, or None."""
    from kvmath.present.format import fmt_bytes
    if r.get("hbm_feasible", True):
        return None
    return (f"HBM: INFEASIBLE, each node's running batch overfills its HBM by "
            f"{fmt_bytes(-r['hbm_free_bytes'], 4)} (--batch-seqs sequences of --batch-context "
            "tokens beside the weights)")


def check_pool_reach(pool, node):
    """Refuse a pool the node's engines cannot reach as its row deploys it: every pool is read
    over the network, through ``client_nics`` NICs of each GPU node (nodes.csv ``nics``;
    :func:`kvmath.logic.node_tier`)."""
    from kvmath.logic.path import node_tier
    from kvmath.tiers.build import pool_tier
    node_tier(node, pool_tier(pool, pool.gpu_nodes))


def _analyse_fleet(args, trace, s, cfg):
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.fleet.run import fleet, fleet_cost, nodes_needed
    from kvmath.scenario.build import with_node_tp
    from kvmath.traces import readers as T
    s = with_node_tp(s, s.batch_context or T.batch_context_of(trace, s.model))
    node, model, pool = s.node, s.model, s.pool
    kw = dict(tp=s.tp, engine=s.engine, batch_seqs=s.batch_seqs, batch_context=s.batch_context,
              dask=None if args.dask == "none" else args.dask, writes=s.writes,
              **cache_sizes(s, cfg, node, s.tp, model))
    out = fleet(trace, model, node, s.nodes, s.router, pool=pool, pool_writes=s.pool_writes,
                **kw)
    out["trace"] = args.file
    out.update(window_keys(trace, model), requests=trace.n_requests, model=model.name)
    # the running batch must fit each node's HBM too, as trace and tiers say (issue 37: a batch
    # of 1e9 sequences was answered feasible)
    out.update(hbm_fit(s, trace), compute_feasible=out["feasible"])
    out["feasible"] = out["feasible"] and out["hbm_feasible"]
    # what the fleet's nodes cost per million tokens served, at the GPU-hour price (a cloud
    # node's, its host included); the network between nodes is not priced
    out.update(fleet_cost(trace, node, s.nodes, s.gpu_price))
    if s.slo_ttft_p99 is not None and not s.max_nodes:
        raise UsageError("--slo-ttft-p99 needs --max-nodes (the largest fleet to search)")
    if s.max_nodes:
        def cost(n):
            return (fleet_cost(trace, node, n, s.gpu_price)["cost_per_million_tokens_usd"]
                    if n else None)
        need, _ = nodes_needed(trace, model, node, s.router, max_nodes=s.max_nodes,
                               slo_ttft_p99_s=s.slo_ttft_p99, pool=pool,
                               pool_writes=s.pool_writes, **kw)
        out["nodes_needed"] = need if out["hbm_feasible"] else None  # no node holds the batch
        out["cost_per_million_tokens_usd_nodes_needed"] = cost(need)
        if pool is not None:  # the same search without the pool, to set against it
            alone, _ = nodes_needed(trace, model, node, s.router, max_nodes=s.max_nodes,
                                    slo_ttft_p99_s=s.slo_ttft_p99, **kw)
            out["nodes_needed_without_pool"] = alone
            out["cost_per_million_tokens_usd_nodes_needed_without_pool"] = cost(alone)
        out["nodes_needed_for"] = "every node's prefill and decode demand within its GPUs" + (
            f" and the fleet's p99 time to first token within {s.slo_ttft_p99:g} s"
            if s.slo_ttft_p99 is not None else "")
    if cfg is not None:
        out["engine_config"] = cfg.summary(model)
    return out


def _fleet_human(r):
    from kvmath.present.format import fmt_bytes, fmt_time
    dec = r["decode"]
    lines = [f"{r['trace']}: {r['requests']:,} requests on {r['nodes']} x {r['node']} "
             f"({r['model']}, TP {r['tp']}), routed {r['router']}",
             f"tokens hit: {r['token_hit_rate']:.1%}; " + (
                 f"{r['reach_continuation']:.1%} of turns reach their previous turn's node"
                 if r["reach_continuation"] is not None else  # issue 20: None was formatted
                 "no turn continues an earlier one (no prompt repeats an earlier one's full "
                 "blocks), so no reach") + "; load imbalance " + (
                 f"{r['load_imbalance']:.2f}" if r["load_imbalance"] is not None else "-"),
             f"prefill: {r['prefill_gpu_s_per_s']:.3g} GPU-s/s in all; decode: "
             f"{r['decode_gpu_s_per_s']:.3g} GPU-s/s ({dec['decode_batch_seqs']} sequence(s) "
             f"per replica at {dec['decode_context_tokens']:,.0f} tokens of context, "
             f"{fmt_time(dec['decode_step_s'])} a step); the busiest node "
             f"{r['gpu_s_per_s_max_node']:.3g} of its {r['gpus_per_node']}: "
             f"{'feasible' if r['compute_feasible'] else 'INFEASIBLE'}",
             *([hbm_line(r)] if hbm_line(r) else []),
             "time to first token: " + (
                 f"p50 {fmt_time(r['ttft_s_p50'])}, p99 {fmt_time(r['ttft_s_p99'])} "
                 f"({r['replicas_per_node']} replica(s) per node, first come first served, in "
                 "the GPU time decode leaves)" if r["ttft_s_p99"] is not None else
                 "unbounded (decode alone fills a node's GPUs)")]
    lines.append(f"{'node':>4} {'requests':>9} {'tokens hit':>10} {'prefill GPU-s/s':>16} "
                 f"{'decode GPU-s/s':>15}  tier reads / writes")
    for x in r["per_node"]:
        hit = "-" if x["token_hit_rate"] is None else f"{x['token_hit_rate']:.1%}"
        traffic = ", ".join(f"{t['tier']} {fmt_bytes(t['read_Bps'], 3)}/s / " + (
                            "(the fleet's)" if t.get("shared") else
                            f"{fmt_bytes(t['write_Bps'], 3)}/s") for t in x["tiers"] if
                            t["tier"] != "hbm")
        lines.append(f"{x['node']:>4} {x['requests']:>9,} {hit:>10} "
                     f"{x['prefill_gpu_s_per_s']:>16.3g} {x['decode_gpu_s_per_s']:>15.3g}  "
                     f"{traffic}")
    price = (f"${r['gpu_hour_usd']:.3g} per GPU-hour"
             + (f", listed {r['gpu_price_observed']}" if r["gpu_price_observed"] else ", given"))
    lines.append(f"cost: ${r['cost_per_million_tokens_usd']:.3g} per million tokens served "
                 f"(prompt and output) at {price}, every hour of the fleet's nodes; the network "
                 "between them is not priced")
    if "nodes_needed" in r:
        lines.append(f"fewest nodes with {r['nodes_needed_for']}: " + (
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
    lines.append("not counted: " + (", ".join(r["not_counted"]) or "-"))
    if window_line(r):
        lines.append(window_line(r))
    return "\n".join(lines)


def run_fleet(args):
    """Run ``kvmath fleet``; returns the exit status."""
    print_result(args, analyse_fleet(args), _fleet_human)
    return 0
