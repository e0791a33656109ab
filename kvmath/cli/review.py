"""``kvmath review FILE.toml``: the design-review section of the scenario in a file.

The review runs the commands it summarises on the file, each as the command line runs it: the
file is each command's ``--scenario`` and :func:`kvmath.scenario.build.scenario_of` builds each
one's record from it (:func:`command_args`, then the command's own ``answer``), so every number
in the section is a number one of these commands prints for the file:

* ``compare --tier T`` for the scenario's tier and the answer page's (host DRAM, one drive, the
  node's drives, RDMA; ``--tiers`` names others): the per-tier verdicts, bands and crossings;
* ``reuse --tier T`` for each tier reuse prices: the reuse economics;
* ``tiers`` (with ``resume_rate`` in the file): the tier plan;
* ``fleet TRACE`` (with ``nodes``; ``max_nodes`` and the SLOs the fleet takes from the file):
  the fleet size at the stated SLOs, through :func:`fleet_answer`.

What the file does not state is said in the section, never filled in silently. The section is
written by :mod:`kvmath.present.review` (Markdown, HTML with the figures inline, the figures as
SVG files); ``--json`` prints the answers it summarises instead.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kvmath.cli import compare, reuse, route, tiers
from kvmath.cli.output import dump
from kvmath.errors import InputError, UsageError
from kvmath.logic.runtime import ScenarioError
from kvmath.scenario.options import COMPARE, FLEET, REUSE, TIERS

REVIEW = "review"
#: the trace the fleet is sized on unless --trace names one (bundled: Mooncake's conversations)
DEFAULT_TRACE = "conversation"


def add_parser(subparsers):
    """Add the ``review`` sub-command to an argparse subparsers object."""
    p = subparsers.add_parser(REVIEW, help="write a design-review section (Markdown and HTML, "
                              "with figures) for the scenario in a TOML file")
    p.add_argument("file", metavar="FILE.toml", help="the scenario file, as every command's "
                   "--scenario takes it")
    p.add_argument("--trace", default=DEFAULT_TRACE, metavar="TRACE",
                   help=f"the trace the fleet is sized on (default {DEFAULT_TRACE}, bundled)")
    p.add_argument("--tiers", metavar="T1,T2", help="the tiers compared (default: the file's "
                   "tier, then host-dram, nvme-1drive, nvme and rdma)")
    p.add_argument("--out", metavar="DIR", help="the folder written: review.md, review.html and "
                   "the figures (default: kvmath-review, here)")
    p.add_argument("--json", action="store_true", help="print the answers the section "
                   "summarises as one JSON object, and write nothing")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


#: each command the review runs: its parser's adder and its answer
COMMANDS = {COMPARE: (compare.add_parser, compare.answer), REUSE: (reuse.add_parser, reuse.answer),
            TIERS: (tiers.add_parser, tiers.answer),
            FLEET: (route.add_fleet_parser, route.analyse_fleet)}


def command_args(command, argv):
    """``command``'s parsed options for ``argv`` (its words after the command's name), as the
    command line parses them."""
    p = _Parser(prog="kvmath")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    COMMANDS[command][0](sub)
    return p.parse_args([command, *argv])


def run_command(command, argv):
    """``command``'s JSON answer for ``argv`` (what ``--json`` prints, less the version stamp):
    with the scenario keys it does not use, the projections it used and its prices' warnings,
    as the command's printing adds them."""
    from kvmath.evaluate.reuse import price_warnings
    from kvmath.tables.rows import allow_projections, projections_used
    args = command_args(command, argv)
    allow_projections(False)
    try:
        out = COMMANDS[command][1](args)
        used = projections_used()
    finally:
        allow_projections(False)
    if "prices_observed" in out and command in (REUSE, TIERS):
        out["price_warnings"] = price_warnings(out["prices_observed"])
    out["scenario_keys_not_used"] = list(getattr(args, "scenario_keys_not_used", None) or [])
    if used:
        out["projections"] = used
    return out


def fleet_answer(path, trace):
    """``fleet TRACE --scenario FILE``'s answer: the one place the review calls the fleet. The
    file states the fleet (``nodes``) and the search for the fewest nodes (``max_nodes`` and the
    SLOs the fleet command takes: ``slo_ttft_p99`` today; a fleet with more SLO keys reads them
    from the file the same way, and :mod:`kvmath.present.review` shows each ``nodes_needed``
    answer it finds). Run in this process (``--dask none``: the same answer as a cluster's)."""
    return run_command(FLEET, [trace, "--scenario", str(path), "--dask", "none"])


def scenario_keys(path):
    """The file's keys and values, as read (kvmath.scenario.read); InputError naming the file
    when it cannot be read."""
    from kvmath.scenario.read import KEYS, load_scenario
    return load_scenario(path, KEYS)


def _tier_names(keys, given):
    from kvmath.present.calculator import PLOT_TIERS
    if given:
        names = [t.strip() for t in given.split(",") if t.strip()]
        if not names:
            raise UsageError("--tiers names no tier")
        return names
    own = [keys["tier"]] if isinstance(keys.get("tier"), str) else []
    return own + [t for t in PLOT_TIERS if t not in own]


def _tried(command, argv):
    """(answer, None), or (None, the one-line refusal) for a scenario the command refuses."""
    try:
        return run_command(command, argv), None
    except (ScenarioError, InputError) as exc:
        if isinstance(exc, UsageError) and "required" not in str(exc):
            raise
        return None, str(exc)


def gather(path, trace=DEFAULT_TRACE, tier_names=None):
    """Every answer the section summarises, for scenario file ``path``: {"file", "keys",
    "tiers": [names], "compare": {tier: answer or {"refused": why}}, "reuse": {...}, "plan":
    answer or {"not_run": why}, "fleet": answer or {"not_run": why}, "trace"}, and the
    compare record of the first tier that answers ("record", for the figures)."""
    from kvmath.scenario.build import scenario_of
    keys = scenario_keys(path)
    names = _tier_names(keys, tier_names)
    out = {"file": str(path), "keys": keys, "tiers": names, "trace": trace, "compare": {},
           "reuse": {}, "records": {}}
    for t in names:
        argv = ["--scenario", str(path), "--tier", t]
        ans, why = _tried(COMPARE, argv)
        out["compare"][t] = ans if ans is not None else {"refused": why}
        if ans is not None:
            # compare's own notes on this tier (what overrides the division, the layout moving
            # with the length, the copy kernel), less those the caveats say for every tier
            out.setdefault("notes", {})[t] = [
                line for line in compare.human(ans).splitlines() if line.startswith("note: ")
                and "has no operator profile" not in line and "validation row" not in line]
            out["records"][t] = scenario_of(command_args(COMPARE, argv), COMPARE).scenario
            r, why = _tried(REUSE, argv)
            out["reuse"][t] = r if r is not None else {"refused": why}
    if not out["records"]:
        raise ScenarioError(f"{path}: compare answers for none of the tiers "
                            f"{', '.join(names)}: " + "; ".join(
                                f"{t}: {a['refused']}" for t, a in out["compare"].items()))
    if keys.get("resume_rate") is None:
        out["plan"] = {"not_run": "the file states no resume_rate (conversations resuming per "
                       "second on a node), which the tier plan sizes for"}
    else:
        ans, why = _tried(TIERS, ["--scenario", str(path)])
        out["plan"] = ans if ans is not None else {"not_run": why}
    if keys.get("nodes") is None:
        out["fleet"] = {"not_run": "the file states no nodes (the fleet the trace is routed "
                        "over); with max_nodes and slo_ttft_p99 it also sizes the fewest"}
    else:
        try:
            out["fleet"] = fleet_answer(path, trace)
        except (ScenarioError, InputError) as exc:
            if isinstance(exc, UsageError):
                raise
            out["fleet"] = {"not_run": str(exc)}
    return out


#: the folder a review is written to unless --out names one
DEFAULT_OUT = "kvmath-review"


def run(args):
    """Run ``kvmath review``; returns the exit status."""
    from kvmath.present.review import write_review
    facts = gather(args.file, args.trace, args.tiers)
    if args.json:
        print(dump({k: v for k, v in facts.items() if k != "records"}))
        return 0
    out = Path(args.out or DEFAULT_OUT)
    try:
        written = write_review(facts, out)
    except OSError as exc:
        if exc.filename is None:
            raise
        raise InputError(f"{exc.filename}: cannot write the review ({exc.strerror})") from None
    for p in written:
        print(f"wrote {os.path.relpath(p)}")
    sys.stdout.flush()
    return 0
