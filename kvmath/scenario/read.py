"""Scenario files: a TOML table of command-line options, so a design can be written down once.

Keys are the long option names with ``_`` for ``-`` (``resume_rate = 2``), declared with
their checks once in :mod:`kvmath.scenario.options`; options given on the command line override the
file. A wrong key, type or value raises :class:`DataError` naming the file, the key and what
was expected. Relative file paths (``node = "my.csv"``)
are read relative to the scenario file.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from kvmath.scenario.options import (BY_KEY, apply_defaults, check_toml, excluded,
                                     excluded_message, keys, missing, needless, needs_message,
                                     required_message)
from kvmath.errors import UsageError
from kvmath.tables.schema import regular_file
from kvmath.tables.rows import DataError, allow_projections

#: every key a scenario may hold: the options of kvmath.scenario.options with a TOML key
KEYS = tuple(sorted(k for k, o in BY_KEY.items() if o.toml))
#: keys that name a file when they end in .csv (read relative to the scenario)
PATH_KEYS = tuple(k for k in KEYS if BY_KEY[k].path)


def load_scenario(path, allowed):
    """{key: checked value} from a TOML file, of the keys in allowed (a subset of KEYS) only:
    one scenario file serves every command, so a key of KEYS that this command does not use is
    checked and left out (:func:`unused_keys` names them); any other key is an error."""
    path = regular_file(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"not a readable TOML file ({exc})") from None
    except RecursionError:  # tables nested hundreds deep: no scenario is
        raise DataError(path, None, None, "not a scenario: its tables nest too deep") from None
    out = {}
    for key, value in data.items():
        if key not in KEYS:
            raise DataError(path, None, key, f"unknown key; expected one of "
                            f"{', '.join(sorted(KEYS))}")
        try:
            checked = check_toml(key, value)
        except ValueError as exc:
            shown = repr(value) if len(repr(value)) <= 60 else (
                f"{repr(value)[:57]}... ({len(repr(value)):,} characters)")
            raise DataError(path, None, key, f"{exc}, got {shown}") from None
        if key not in allowed:  # another command's key: checked, not used here
            continue
        out[key] = checked
        if key in PATH_KEYS and (out[key].endswith(".csv") or BY_KEY[key].path == "file"):
            if not Path(out[key]).is_absolute():
                out[key] = str(path.parent / out[key])
            if not os.path.exists(out[key]):  # the file's error, naming its key (never raises:
                # a name too long is no file)
                raise DataError(path, None, key, f"no file {value!r} (a path is read relative "
                                "to the scenario file)")
    return out


def _bundled_names(key, command=None):
    """The bundled names a scenario key may hold (a name, not a file), or None; hbm is a tier
    of compare's only (the prefix still in GPU memory)."""
    from kvmath.tables.rows import bundled, codecs, engines, nodes, pauses, pools
    from kvmath.tiers.build import pool_tiers
    cat = bundled()
    tables = {"model": lambda: cat.models, "gpu": lambda: cat.gpus,
              "tier": lambda: [*cat.tiers] + (["hbm", *pool_tiers()] if command in (None, "compare")
                                                else []),
              "node": nodes, "engine": engines, "pause": pauses, "pool": pools, "codec": codecs}
    return sorted(tables[key]()) if key in tables else None


def _check_name(path, key, value, command=None):
    """A name the file gives that no bundled row holds is the file's error, naming its key
    (it was only found later, with no word of the file it came from)."""
    names = _bundled_names(key, command)
    if names is None or value in names or value.endswith(".csv") or os.path.exists(value) \
            or os.path.exists(path.parent / value):
        return
    raise DataError(path, None, key, f"unknown {key} {value!r}; bundled: {', '.join(names)}")


def unused_keys(path, allowed):
    """The keys of a scenario file that this command (its keys: allowed) does not use, sorted."""
    if path is None:
        return []
    data = tomllib.loads(regular_file(path).read_text(encoding="utf-8"))  # checked already
    return sorted(k for k in data if k not in allowed)


def merge(args, path, allowed):
    """Fill each option of argparse namespace args left unset (None) from the scenario file,
    and record the file's keys this command does not use (``args.scenario_keys_not_used``)."""
    if path is None:
        return args
    given = {k for k in allowed if getattr(args, k, None) is not None}  # on the command line
    overridden = []
    args.scenario_keys_set = []  # the keys the file gave, for an error to name it
    for key, value in load_scenario(path, allowed).items():
        rival = _RIVALS.get(key)
        if rival in given and key not in given:  # the line's --engine replaces the file's
            overridden.append(key)               # engine_config, and the other way round
        elif getattr(args, key, None) is None:  # used: a name must be one of the bundled rows
            _check_name(Path(path), key, value, getattr(args, "command", None))
            setattr(args, key, value)
            args.scenario_keys_set.append(key)
    args.scenario_keys_not_used = sorted(unused_keys(path, allowed) + overridden)
    return args


#: keys that set the same thing: a flag given for one replaces the file's other
_RIVALS = {"engine": "engine_config", "engine_config": "engine"}


def read_scenario(args, command):
    """Fill args from its --scenario file (flags win), refuse a missing required option, then
    apply the declared defaults: every command reads its scenario the same way."""
    merge(args, args.scenario, keys(command))
    absent = missing(args, command)
    if absent is not None:
        raise UsageError(required_message(absent))
    alone = needless(args, command)
    if alone is not None:
        raise UsageError(needs_message(alone))
    pair = excluded(args, command)
    if pair is not None:
        raise UsageError(excluded_message(pair))
    args = apply_defaults(args, command)
    # projection rows: refused unless asked for, and then recorded for the output to name
    allow_projections(bool(getattr(args, "allow_projection", False)))
    return args


def model_of(args):
    """The scenario's model as served: its row (bundled name or CSV path), its context window
    under --rope-scaling where given (:func:`kvmath.logic.served_model`)."""
    from kvmath.logic.rules import served_model
    from kvmath.tables.rows import resolve_model
    return served_model(resolve_model(args.model), getattr(args, "rope_scaling", None))
