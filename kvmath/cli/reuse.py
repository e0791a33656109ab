"""``kvmath reuse``: is offloading one conversation's cache worth it. The break-even return
probability and the best TTL at the tier's purchase price, and with ``--resume-rate`` at the
opportunity cost of holding it on a node already bought (the node plan's price of a byte-second
on that tier).

The scenario is the record of :func:`kvmath.scenario.build.scenario_of`, its ``reach`` set here
(:func:`reach_of`: the routers' rule, above the scenario layer). :func:`print_priced` prints an
answer with the warnings of the prices it used, for reuse and tiers alike.
"""
from __future__ import annotations

import math
from dataclasses import replace

from kvmath.cli.output import print_result
from kvmath.present.format import fmt_bytes, fmt_time
from kvmath.scenario.options import REUSE, add_options


def add_parser(subparsers):
    """Add the ``reuse`` sub-command to an argparse subparsers object."""
    add_options(subparsers.add_parser(REUSE, help="break-even return probability and best TTL "
                                      "for offloading"), REUSE)


def reach_of(s):
    """(h_route, where it came from) of scenario ``s``: its stated reach (--reach), else its
    router's over its nodes (:func:`kvmath.fleet.routers.reach`)."""
    from kvmath.fleet.routers import reach
    if s.reach is not None:
        return s.reach, "--reach (stated)"
    h = reach(s.router, s.nodes)
    return h, (f"{s.router} over {s.nodes} node(s)" if s.nodes > 1 else "one node")


def answer(args):
    """The JSON-ready result of ``kvmath reuse``."""
    from kvmath.evaluate.api import ScenarioError
    from kvmath.evaluate.reuse import reuse
    from kvmath.node.capacities import planned_kinds
    from kvmath.node.plan import tier_plan
    from kvmath.scenario.build import node_tp, price_overrides, scenario_of
    from kvmath.tiers.kinds import KINDS
    from kvmath.scenario.engine_config import cache_sizes
    from kvmath.tables.rows import node_drive
    s, cfg = scenario_of(args, REUSE)
    node, tier = s.node, s.tier
    # a node's own drives wear at their rated lifetime writes
    drive = (node_drive(node) if node is not None and tier.name == KINDS[tier.kind].node_tier
             and KINDS[tier.kind].wear == "drive" else None)
    # every node reaches a pool; the node's own tier only the returns routed to it
    h, h_from = (1.0, "a pool every node reads") if s.pool else reach_of(s)
    s = replace(s, reach=h)
    if s.codec is not None and s.resume_rate is not None:
        raise ScenarioError("--codec with --resume-rate: the node plan that prices holding at "
                            "opportunity cost stores caches uncoded; give one or the other")
    kw = dict(tp=s.tp, gpu_price=s.gpu_price, compute_dtype=s.compute_dtype, engine=s.engine,
              price_overrides=price_overrides(s), reach=s.reach,
              turn_new_tokens=s.turn_new_tokens, codec=s.codec)
    result = reuse(s.model, s.gpu, tier, args.tokens, s.pause, drive=drive, **kw)
    if cfg is not None:  # a host or disk cache its settings size below this prompt: refused
        from kvmath.scenario.engine_config import check_holds
        check_holds(cfg, tier, s.model, result["tp"],
                    node.gpus if node is not None else s.gpu.gpus_per_node, result["kv_bytes"])
    result.update(reach=h, reach_from=h_from, pool=s.pool.name if s.pool else None,
                  pool_nodes=s.pool_nodes)
    result["holding_priced_at"] = "purchase"
    opp = dict(capacity_usd_per_byte_s_opportunity=None, value_usd_opportunity=None,
               p_breakeven_opportunity=None, ttl_s_opportunity=None, verdict_opportunity=None)
    opp["opportunity_not_priced"] = None
    own = [k.plan_tier for k in planned_kinds() if k.holds is not None]  # the node's own tiers
    if s.resume_rate is not None and (s.pool or tier.name not in own):
        # said, not dropped (issue 20): the node plan holds HBM, host DRAM and the node's drives
        opp["opportunity_not_priced"] = (f"--resume-rate prices holding at opportunity cost on "
                                         f"the node's own tiers ({', '.join(own)}), not "
                                         f"{tier.name}")
    elif s.resume_rate is not None:
        plan = tier_plan(node, s.model, args.tokens, s.resume_rate, s.pause, tp=s.tp, gpu=s.gpu,
                         compute_dtype=s.compute_dtype, gpu_price=s.gpu_price, find_limit=False,
                         engine=s.engine, price_overrides=kw["price_overrides"], reach=h,
                         turn_new_tokens=s.turn_new_tokens,
                         **cache_sizes(s, cfg, node, s.tp or node_tp(s, args.tokens),
                                       s.model))
        row = next((t for t in plan["tiers"] if t["tier"] == tier.name), None)
        if row is None:
            opp["opportunity_not_priced"] = (f"the node plan holds no {tier.name} tier (the "
                                             "engine's settings or the node leave it out)")
        else:
            c = row["capacity_usd_per_byte_s_opportunity"]
            o = reuse(s.model, s.gpu, tier, args.tokens, s.pause, drive=drive, c_cap=c, **kw)
            opp.update(capacity_usd_per_byte_s_opportunity=c, value_usd_opportunity=o["value_usd"],
                       p_breakeven_opportunity=o["p_breakeven"], ttl_s_opportunity=o["ttl_s"],
                       verdict_opportunity=o["verdict"])
    result.update(opp, node=node.name if node is not None else None)
    if cfg is not None:
        result["engine_config"] = cfg.summary(s.model)
    return result


def print_priced(args, result, human):
    """Print ``result`` (a dict with ``prices_observed``) as :func:`print_result` does, with a
    warning for each price observed longer ago than plan_defaults.csv's price_stale_after_days
    (:func:`kvmath.evaluate.reuse.price_warnings`)."""
    from kvmath.evaluate.reuse import price_warnings
    result = dict(result)
    result["price_warnings"] = price_warnings(result["prices_observed"])
    print_result(args, result, lambda r: "\n".join([human(r)] + [f"warning: {w}"
                                                         for w in r["price_warnings"]]))


def run(args):
    """Run ``kvmath reuse``; returns the exit status."""
    print_priced(args, answer(args), human)
    return 0


def _ttl_text(ttl):
    return "none pays (do not offload)" if ttl == 0 else fmt_time(ttl) if math.isfinite(ttl) \
        else "keep until return"


def _p_text(p, r):
    return f"{p:.3g}" if p is not None else "n/a" if r["saving_gpu_s"] <= 0 else "none: not even p = 1 pays"


def human(r):
    """The human lines of a reuse answer (its JSON result)."""
    rows = [("scenario", f"{r['model']} on {r['tp']}x {r['gpu']}, tier {r['tier']}, "
                         f"{r['tokens']:,} tokens, pause {r['pause']}, engine {r['engine']}"),
            ("saving per reuse", f"{r['saving_gpu_s']:.3g} GPU-s (${r['saving_usd']:.3g} at "
                                 f"${r['gpu_usd_per_hour']:.3g} per GPU-hour)"),
            ("best TTL", _ttl_text(r["ttl_s"])),
            ("hit probability", f"{r['hit_probability']:.3f} of returning conversations"),
            ("break-even p", _p_text(r["p_breakeven"], r)),
            ("value per offload", f"${r['value_usd']:.3g}")]
    if r.get("codec"):  # what the tier holds and writes, and what a reload decodes
        rows.insert(1, ("codec", f"{r['codec']}: the tier holds {fmt_bytes(r['kv_bytes'])} per "
                                 f"cache; a reload decodes it ({fmt_time(r['reload_s'])} "
                                 "reload; encoding not charged)"
                                 + ("; a what-if on this tier (LMCache codes remote backends "
                                    "only)" if r.get("codec_what_if") else "")))
    if r["reach"] < 1 or r.get("pool"):  # several nodes: the share of returns that find it
        rows.insert(4, ("reach", f"{r['reach']:.3g} of returns reach the cache's node "
                                 f"({r['reach_from']})"))
    verdicts = [f"verdict: {r['verdict']} (holding priced at purchase cost)"]
    if r.get("value_usd_opportunity") is not None:
        ttl = r["ttl_s_opportunity"]
        p = r["p_breakeven_opportunity"]
        rows += [("fixed node: hold", f"${r['capacity_usd_per_byte_s_opportunity']:.3g} per "
                  f"byte-second (the hits a held cache displaces on {r['node']})"),
                 ("  best TTL", _ttl_text(ttl)),
                 ("  break-even p", _p_text(p, r)),
                 ("  value", f"${r['value_usd_opportunity']:.3g}")]
        verdicts.append(f"verdict on a fixed node: {r['verdict_opportunity']} "
                        "(holding priced at opportunity cost)")
    if r.get("opportunity_not_priced"):
        verdicts.append(f"note: {r['opportunity_not_priced']}")
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"{k:<{width}}  {v}" for k, v in rows] + verdicts)

