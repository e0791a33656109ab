"""Command line: ``python -m kvmath compare|list|reuse|tiers|trace|route|fleet|review``.

Each command group is a module of this package, holding its parser (``add_parser``), its run
and what it prints: :mod:`~kvmath.cli.compare`, :mod:`~kvmath.cli.listing` (``list``),
:mod:`~kvmath.cli.reuse`, :mod:`~kvmath.cli.tiers`, :mod:`~kvmath.cli.trace` and
:mod:`~kvmath.cli.route` (``route`` and ``fleet``) and :mod:`~kvmath.cli.review` (``review``:
the design-review section of a scenario file, from the others' answers). This module holds the parser built from
theirs (:func:`build_parser`), the dispatch to their runs (:data:`RUNS`) and the mapping of
errors to what a user sees: a user's mistake (unknown name, malformed file, bad number: an
:class:`~kvmath.errors.InputError`) prints one line on stderr and exits with status 2, never a
traceback; an interrupt is one line and status 130, a reader gone away (``| head``) status 0,
an output that cannot be written (a full disk, /dev/full) or a work directory that cannot hold
a trace's blocks one line and status 2, as every error the command cannot answer through
(issue 37: status 1 had been given, against the contract). Any other exception is a bug, and
shows as one.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from kvmath.cli import compare, listing, reuse, review, route, tiers, trace
from kvmath.cli.output import error_line
from kvmath.errors import InputError, UsageError
from kvmath.logic.constants import BEYOND_CONTEXT_ELSEWHERE, BEYOND_CONTEXT_HINT
from kvmath.logic.runtime import ScenarioError
from kvmath.scenario.options import COMPARE
from kvmath.tables.rows import allow_projections
from kvmath.version import version_line

USAGE_ERROR = 2

#: each command's run(args) -> exit status, by the command's name
RUNS = {"compare": compare.run, "list": listing.run, "reuse": reuse.run, "tiers": tiers.run,
        "trace": trace.run, "route": route.run, "fleet": route.run_fleet, "review": review.run}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)

    def _print_message(self, message, file=None):
        """As argparse's, but an output that cannot be written (a full disk) is an error, not
        silently dropped (main reports it and exits nonzero)."""
        if message:
            file = file or sys.stdout
            file.write(message)
            file.flush()


def build_parser():
    """The argument parser: each command's from its group's module, whose options come from
    the option table of :mod:`kvmath.scenario.options`."""
    p = _Parser(prog="python -m kvmath", description="Reload a paused conversation's KV cache, "
                "or recompute it by prefill? Bandwidths are SI (1 GB/s = 1e9 B/s).")
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    compare.add_parser(sub)
    listing.add_parser(sub)
    reuse.add_parser(sub)
    tiers.add_parser(sub)
    trace.add_parser(sub)
    route.add_parser(sub)
    route.add_fleet_parser(sub)
    review.add_parser(sub)
    return p


def run(argv=None):
    """Run the CLI; returns the exit status. Projection rows are refused unless the command's
    scenario allows them (kvmath.scenario.read), and the policy ends with the command."""
    allow_projections(False)
    try:
        return _run(argv)
    finally:
        allow_projections(False)


def _run(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["trace", "generate"]:  # a command of its own beside trace FILE
        from kvmath.cli import generate
        return generate.run(argv[2:], _Parser)
    args = build_parser().parse_args(argv)
    try:
        return _command(args)
    except InputError as exc:
        raise _from_node_file(args, _from_scenario_file(args, exc)) from None


def _command(args):
    """Run the command; only compare takes --allow-beyond-context, so the others' refusal of
    a prompt beyond the window does not offer it."""
    if args.command == COMPARE:
        return RUNS[COMPARE](args)
    try:
        return RUNS[args.command](args)
    except ScenarioError as exc:
        raise ScenarioError(str(exc).replace(BEYOND_CONTEXT_HINT, BEYOND_CONTEXT_ELSEWHERE)) \
            from None


def _interrupted(exc):
    """Whether an interrupt caused ``exc`` (anywhere in its chain of causes)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _from_node_file(args, exc):
    """The error, naming the nodes CSV (and its one row) when it is about the node that file
    gave (the shared logic names the node and the field, not the file it came from)."""
    path = getattr(args, "node", None)
    if not path or not os.path.isfile(str(path)) or str(path) in str(exc):
        return exc
    try:
        from kvmath.tables.rows import resolve_node
        name = resolve_node(path).name
    except InputError:
        return exc
    if f"node {name} " not in str(exc):
        return exc
    return ScenarioError(f"{exc} ({path}, row 1)")


def _from_scenario_file(args, exc):
    """The error, naming the scenario file and key of each option it names (``--tp``) that the
    file gave, not the command line (a check across options finds it long after the file)."""
    text = str(exc)
    path = getattr(args, "scenario", None)
    if not path or str(path) in text:
        return exc
    named = [k for k in getattr(args, "scenario_keys_set", ())
             if re.search(rf"--{re.escape(k.replace('_', '-'))}\b", text)]
    if not named:
        return exc
    keys = ", ".join(f"'{k}'" for k in named)
    return ScenarioError(f"{text} ({path}, key{'s' if len(named) > 1 else ''} {keys}: given by "
                         "the scenario file)")


def _stdout_failed(exc):
    """The output could not be written (a full disk, /dev/full): say so once, status 2; the
    interpreter's own flush at exit would otherwise print a second error."""
    print(f"kvmath: error: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return USAGE_ERROR


def main(argv=None):
    """The command line (``kvmath``, ``python -m kvmath``): runs it and maps what it raises to
    one line on stderr and an exit status; returns the status."""
    import numpy as np
    if sys.stdout is None:  # started with its output closed (>&-): nothing can be answered
        if sys.stderr is not None:
            print("kvmath: error: standard output is closed; nothing can be written",
                  file=sys.stderr)
        return USAGE_ERROR
    try:
        # a numpy warning is an error inside kvmath (issue 20): it never reaches the terminal,
        # and an answer it would have made (inf, nan) is not printed
        with np.errstate(divide="raise", over="raise", invalid="raise"):
            try:
                code = run(argv)
            except Exception as exc:  # a library that turned Ctrl-C into its own error
                if _interrupted(exc):  # (pydantic's SchemaError while a schema builds)
                    raise KeyboardInterrupt from None
                raise
        sys.stdout.flush()
        return code
    except SystemExit as exc:  # --help, --version, a usage error: argparse printed and left
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            sys.stderr.close()
            return 0
        except OSError as err:  # a full disk: the help was not written
            return _stdout_failed(err)
        raise exc
    except BrokenPipeError:  # the reader went away (| head): nothing left to say
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("kvmath: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.filename is None:  # writing stdout, not a file the user named
            return _stdout_failed(exc)
        raise
    except InputError as exc:  # bad input, of every kind; any other exception is a bug
        print(f"kvmath: error: {error_line(exc)}", file=sys.stderr)
    except (OverflowError, ZeroDivisionError, FloatingPointError):  # a last guard: magnitudes
        # the checks let through
        print("kvmath: error: an input is out of range (a number overflowed or underflowed); check the "
              "magnitudes of the options and of the model and GPU rows", file=sys.stderr)
    return USAGE_ERROR
