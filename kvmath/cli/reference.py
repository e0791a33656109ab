"""The command reference, generated: every command's arguments as the parser holds them, each
option's kind, bounds, unit, default and scenario key from its declaration
(:mod:`kvmath.scenario.options`), and a command's real output (:func:`output_of`).

The book's command chapter is written from these (``chapters/commands.md``), so the reference
cannot drift from the command line: a new option, a changed bound or help text appears there
when the book is built.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shlex

from kvmath.scenario.options import BY_NAME

#: the commands in the order the reference gives them
ORDER = ("compare", "reuse", "tiers", "trace", "route", "fleet", "review", "list")


def _subparsers():
    from kvmath.cli.main import build_parser
    p = build_parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in action._choices_actions}
    return action.choices, helps


def commands():
    """[(command, its one-line help)] in :data:`ORDER`, each a command the parser has."""
    parsers, helps = _subparsers()
    names = [c for c in ORDER if c in parsers] + sorted(set(parsers) - set(ORDER))
    return [(c, helps.get(c, "")) for c in names]


def _default(o, command):
    if o.default is None or o.default is False:
        return "-"
    return f"{o.default:g}" if isinstance(o.default, float) else str(o.default)


def argument_rows(command):
    """One row per argument of ``command``, as the parser holds it: [argument, what it takes
    (kind and bounds), unit, default, scenario key, help]. An option declared in
    kvmath.scenario.options takes its kind, unit, default, key and help (the command's own)
    from its declaration; the others (the trace, --scenario, --json) their parser's words."""
    parsers, _ = _subparsers()
    rows = []
    for a in parsers[command]._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        flag = a.option_strings[-1] if a.option_strings else (a.metavar or a.dest)
        o = BY_NAME.get(flag[2:]) if flag.startswith("--") else None
        if o is not None:
            kind = ("a switch" if o.kind.flag else
                    f"a bundled name or a {o.row} CSV row" if o.kind.text and o.row
                    and o.path is True else
                    f"a {o.row} CSV file" if o.row and o.path == "file" else o.kind.words)
            rows.append([f"`{flag}`" + (f" `{o.metavar}`" if o.metavar else ""), kind,
                         o.unit or "-", _default(o, command),
                         f"`{o.key}`" if o.toml else "-", o.help_of(command)])
            continue
        takes = ("a switch" if isinstance(a, (argparse._StoreTrueAction,
                                              argparse._StoreFalseAction))
                 else "one of " + ", ".join(a.choices) if a.choices else (a.metavar or "text"))
        default = "-" if a.default in (None, False, argparse.SUPPRESS) else str(a.default)
        rows.append([f"`{flag}`" if a.option_strings else f"`{flag}` (positional)", takes, "-",
                     default, "-", a.help or ""])
    return rows


def output_of(argv):
    """What ``python -m kvmath ARGV`` prints (standard output), run in this process; the exit
    status must be 0."""
    from kvmath.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(shlex.split(argv))
    if code != 0:
        raise RuntimeError(f"kvmath {argv} exited {code}")
    return out.getvalue()
