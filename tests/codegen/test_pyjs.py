"""The portable subset's printer (kvmath.codegen.pyjs): what it prints computes in Node what
the Python computes, Python's meanings kept where JavaScript's differ, and what it cannot print
it refuses, naming the line."""
import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from kvmath.codegen.pyjs import Unsupported, transpile

NODE = shutil.which("node")
RUNTIME = Path(__file__).resolve().parents[2] / "kvmath" / "present" / "kvcalc_runtime.js"

#: a module in the subset, each function exercising what JavaScript means otherwise
SOURCE = '''
from __future__ import annotations

import math

from kvmath.logic.runtime import ScenarioError

LIMIT = [1, 2, 4]


def truthiness(x):
    return [bool(x), "yes" if x else "no", x or "fallback", x and "both"]


def arithmetic(a, b):
    return [a % b, a // b, -a % b, (-a) // b, a ** 2, a / b]


def lists(xs):
    ys = [x * 2 for x in xs if x > 1]
    pairs = [[i, x] for i, x in enumerate(xs)]
    return [ys, pairs, [a + b for a, b in zip(xs, ys)], xs + [9], len(xs), sum(xs),
            sorted(set(xs)), min(xs, default=0), max(xs, key=lambda x: -x), min(3, 1, 2),
            any([x > 3 for x in xs]), all([x > 0 for x in xs]), xs[-1], xs[1:]]


def dicts(d):
    e = {**d, "b": 2}
    e.update({"c": 3})
    keys = [k for k in e]
    return [e, keys, "a" in e, "z" not in e, e.get("z"), e.get("z", 7),
            {k: e[k] * 10 for k in e if k != "a"}]


def strings(x, name):
    return [f"{x:,}", f"{x:.3g}", f"{x / 7:.2f}", f"{x / 1e6:.0%}", f"{name!r}", f"{None}",
            f"{True}", f"{x:g}", "|".join([str(v) for v in [1, None, "s"]]),
            name.startswith("ll"), f"{1e-05}", f"{2.5e20}"]


def compare(a, b, c):
    return [a < b <= c, a is None, b is not None, not a, not (a and b)]


def keywords(a, b=2, *, c=3):
    return [a, b, c]


def calls():
    return [keywords(1), keywords(1, c=5), keywords(a=4, b=6)]


def closures(n):
    out = []

    def add(k):
        return k + n
    for i in range(n):
        if i % 2:
            out.append(add(i))
        else:
            continue
    total = 0
    while total < 10:
        total = total + 4
    return [out, total, math.floor(2.7), math.isfinite(math.inf), math.sqrt(16.0)]


def fails(x):
    if x < 0:
        raise ScenarioError(f"--x must be at least 0, got {x:g}")
    return x
'''

RUNNER = """
global.window = {KVCALC_FORMULAS: {formulas: {}}, KVCALC_DATA: {logic: {}}};
const [runtime, logic, calls] = process.argv.slice(1);
require(runtime); require(logic);
const L = window.T;
const out = JSON.parse(calls).map(([name, args]) => {
  try { return L[name](...args); } catch (e) { return {error: e.message, type: e.constructor.name}; }
});
console.log(JSON.stringify(out));
"""

CALLS = [("truthiness", [[]]), ("truthiness", [{}]), ("truthiness", [0]), ("truthiness", [[0]]),
         ("truthiness", [""]), ("truthiness", ["x"]), ("truthiness", [None]),
         ("arithmetic", [7, 3]), ("arithmetic", [7.5, 2]),
         ("lists", [[3, 1, 2, 3]]), ("dicts", [{"a": 1}]),
         ("strings", [32768, "llama"]), ("strings", [0.000123456, "x'y"]),
         ("compare", [1, 2, 2]), ("compare", [0, 0, 3]), ("compare", [3, 2, 5]), ("calls", []), ("closures", [5]),
         ("fails", [2]), ("fails", [-1.5])]


def _python(module, name, args):
    try:
        return getattr(module, name)(*args)
    except Exception as e:  # noqa: BLE001 (the error is the answer compared)
        return {"error": str(e), "type": type(e).__name__}


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_printed_module_computes_what_python_does(tmp_path):
    import types
    module = types.ModuleType("portable_sample")
    exec(compile(SOURCE, "portable_sample", "exec"), module.__dict__)
    js, _ = transpile(SOURCE, "T")
    (tmp_path / "logic.js").write_text(js)
    out = subprocess.run([NODE, "-e", RUNNER, str(RUNTIME), str(tmp_path / "logic.js"),
                          json.dumps(CALLS)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    for (name, args), have in zip(CALLS, got):
        want = json.loads(json.dumps(_python(module, name, args)))
        assert have == want, (name, args, have, want)


@pytest.mark.parametrize("snippet,what", [
    ("def f(x):\n    try:\n        return 1\n    except ValueError:\n        return 2", "Try"),
    ("def f(x):\n    del x['a']", "Delete"),
    ("class A:\n    pass", "ClassDef"),
    ("import os", "import"),
    ("from kvmath.tables import rows", "import from kvmath.tables"),
    ("def f(x):\n    return x.frobnicate()", "the method .frobnicate"),
    ("def f(*args):\n    return args", "*args"),
    ("def f(x):\n    return '%d' % x", "%-formatting"),
    ("def f(x):\n    return x is 3", "'is' with anything but None"),
    ("def f(x):\n    raise ValueError('no')", "raise of anything but a runtime error type"),
    ("def f(x):\n    return {1, 2}", "Set"),
])
def test_what_is_not_portable_is_refused_with_its_line(snippet, what):
    with pytest.raises(Unsupported, match=f"line \\d+: .*{re.escape(what.split()[0])}"):
        transpile(textwrap.dedent(snippet), "T")


def test_the_logic_module_is_portable():
    """kvmath/logic/'s modules print as one bundle (the generated file's test holds the print
    current)."""
    from kvmath.codegen.numpy_printer import logic_modules
    from kvmath.codegen.pyjs import transpile_modules
    js, keys = transpile_modules(logic_modules(), "KVCALC_LOGIC")
    assert "function compare_at(" in js and "derive.t_reload" in keys
