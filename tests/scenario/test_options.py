"""Each option declared once (issue 19): the parsers, the scenario file and the calculator are
built from kvmath.scenario.options, so the same value is accepted or refused by all of them."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from kvmath.scenario import options as O
from kvmath.cli.main import build_parser
from kvmath.errors import UsageError
from kvmath.scenario.read import KEYS, PATH_KEYS


def _subparser(command):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices[command]


@pytest.mark.parametrize("command", O.COMMANDS)
def test_each_command_takes_exactly_its_declared_options(command):
    flags = {s for a in _subparser(command)._actions for s in a.option_strings}
    declared = {"--" + o.name for o in O.of(command)} | {"--scenario", "--json", "-h", "--help"}
    assert flags == declared


def test_the_scenario_file_holds_every_declared_option():
    assert set(KEYS) == {o.key for o in O.OPTIONS if o.toml}
    assert set(PATH_KEYS) == {"model", "gpu", "node", "engine", "pause", "prices", "engine_config",
                              "pool", "codec"}


def test_names_are_unique_and_defaults_are_valid():
    assert len(O.BY_NAME) == len(O.OPTIONS)
    for o in O.OPTIONS:
        if o.default is not None:
            assert o.kind.ok(o.default), o.name
        assert set(o.required) <= set(o.commands), o.name


numbers = st.one_of(st.integers(-10, 10 ** 10), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, 1, 1e-16, 1e-15, 1e15, 1e16, 0.5, 1.0, 2 ** 31]))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from([o.name for o in O.OPTIONS
                             if not (o.kind.text or o.kind.flag or o.kind.choices)]),
       value=numbers)
def test_the_command_line_and_the_file_agree_on_every_number(name, value):
    """A number is accepted on the command line exactly when the scenario file accepts it
    (an integer option takes only whole numbers written as integers in both)."""
    kind = O.BY_NAME[name].kind
    if kind.integer and isinstance(value, float):
        return  # TOML 3.0 is a float, refused by an integer option; "3.0" is refused too
    try:
        from_file = kind.from_toml(value)
    except ValueError:
        from_file = None
    try:
        from_line = kind.from_text(repr(value) if isinstance(value, float) else str(value))
    except ValueError:
        from_line = None
    assert (from_file is None) == (from_line is None), (name, value)
    if from_file is not None:
        assert from_file == from_line and math.isfinite(from_file)


def test_a_bad_value_names_the_option_and_the_expectation(capsys):
    assert run_main(["trace", "conversation", "--model", "llama-3.1-8b", "--sample-rate", "1"]) == 2
    err = capsys.readouterr().err
    assert "--sample-rate" in err and "below 1" in err and "Traceback" not in err


def test_trace_reads_its_options_from_the_scenario(tmp_path):
    """trace read five keys; it reads every trace option now, and the declared defaults apply
    after the file."""
    from kvmath.scenario.read import read_scenario
    f = tmp_path / "s.toml"
    f.write_text('model = "llama-3.1-8b"\npolicy = "ttl"\nttl = 30\n')
    args = build_parser().parse_args(["trace", "conversation", "--scenario", str(f)])
    read_scenario(args, O.TRACE)
    assert (args.policy, args.ttl, args.min_uses) == ("ttl", 30.0, 2)
    f.write_text('model = "llama-3.1-8b"\npolicy = "selective"\nmin_uses = 3\n')
    args = build_parser().parse_args(["trace", "conversation", "--scenario", str(f)])
    read_scenario(args, O.TRACE)
    assert (args.policy, args.ttl, args.min_uses) == ("selective", 600.0, 3)
    # an option the file's policy does not use is refused, naming the file (issue 20, F18)
    f.write_text('model = "llama-3.1-8b"\npolicy = "ttl"\nmin_uses = 3\n')
    args = build_parser().parse_args(["trace", "conversation", "--scenario", str(f)])
    with pytest.raises(UsageError, match="--min-uses needs --policy selective"):
        read_scenario(args, O.TRACE)
    args = build_parser().parse_args(["trace", "conversation", "--model", "llama-3.1-8b"])
    read_scenario(args, O.TRACE)
    assert (args.policy, args.ttl, args.min_uses) == ("lru", 600.0, 2)


def test_a_missing_required_option_says_where_it_may_come_from():
    args = build_parser().parse_args(["tiers", "--model", "llama-3.1-8b", "--tokens", "8"])
    from kvmath.scenario.read import read_scenario
    with pytest.raises(UsageError, match="--resume-rate is required .* key 'resume_rate'"):
        read_scenario(args, O.TIERS)


def run_main(argv):
    from kvmath.cli.main import main
    return main(argv)


def test_a_files_name_is_checked_only_where_it_is_used(capsys, tmp_path):
    """After review: a bad name in the file failed even when a flag overrode it, and hbm was
    offered as a tier to reuse, which refuses it."""
    f = tmp_path / "s.toml"
    f.write_text('model = "nosuch"\ngpu = "h100-sxm"\ntier = "hbm"\ntokens = 4096\n')
    assert run_main(["compare", "--scenario", str(f), "--model", "llama-3.1-8b"]) == 0
    capsys.readouterr()
    assert run_main(["reuse", "--scenario", str(f), "--model", "llama-3.1-8b"]) == 2
    err = capsys.readouterr().err
    assert f"{f}, field 'tier': unknown tier 'hbm'" in err


@pytest.mark.parametrize("argv, words", [
    (["tiers", "--model", "llama-3.1-8b", "--tokens", "4096", "--resume-rate", "1",
      "--pool-writes", "back"], "--pool-writes needs --pool"),
    (["reuse", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tier", "nvme", "--tokens",
      "4096", "--router", "affinity"], "--router needs --nodes"),
    # a value the option acts on (issue 20, F18): --ttl only under --policy ttl
    (["trace", "synthetic", "--model", "llama-3.1-8b", "--ttl", "5"],
     "--ttl needs --policy ttl"),
    (["trace", "synthetic", "--model", "llama-3.1-8b", "--policy", "lru", "--min-uses", "7"],
     "--min-uses needs --policy selective"),
])
def test_an_option_given_without_the_one_it_needs_is_refused(capsys, argv, words):
    # it had been ignored without a word (issue 21's review): one line, exit 2
    from kvmath.cli.main import main
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
