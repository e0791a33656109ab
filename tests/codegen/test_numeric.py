"""The generated numeric code (kvmath/_generated/numeric.py) is the SymPy derivations, and the answer
path never touches SymPy."""
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp

ROOT = pathlib.Path(__file__).resolve().parents[2]
from kvmath._generated import numeric as _numeric  # noqa: E402
from kvmath.codegen import numpy_printer as generate_numeric  # noqa: E402
from kvmath.evaluate.api import Numeric  # noqa: E402
from kvmath.codegen.catalogue import entries  # noqa: E402


def test_generated_formulas_js_is_current():
    """The calculator's committed formulas are the SymPy expressions printed today."""
    assert generate_numeric.render_formulas() == (ROOT / "kvmath" / "_generated" / "kvcalc_formulas.js").read_text()


def test_generated_logic_js_is_current():
    """The calculator's committed logic is kvmath/logic/ printed today
    (kvmath.codegen.pyjs)."""
    assert generate_numeric.render_logic()[0] == (ROOT / "kvmath" / "_generated" / "kvcalc_logic.js").read_text()


def test_generated_code_is_current():
    """Regenerating from kvmath/derive/*.py gives the committed file byte for byte
    (run scripts/generate_numeric.py after changing a derivation)."""
    assert generate_numeric.render() == (ROOT / "kvmath" / "_generated" / "numeric.py").read_text()


@pytest.mark.parametrize("key,expr", entries()[::7], ids=lambda x: x if isinstance(x, str) else "")
def test_generated_equals_lambdify(key, expr):
    """At a point of positive values, the generated function equals SymPy's own lambdify to
    1e-12 relative (cse reorders floating-point operations, nothing more), or, where the point is
    ill-conditioned, is no further from the exact value than lambdify."""
    rng = np.random.default_rng(len(key))
    # symbols in name order: a set's order moves with the hash seed, and so would the point
    values = {s.name: float(rng.uniform(0.2, 0.9))
              for s in sorted(expr.free_symbols, key=lambda s: s.name)}
    got = Numeric.generated(key).take(values)
    want = Numeric(expr).take(values)
    if got == pytest.approx(want, rel=1e-12, nan_ok=True):
        return
    # the point may be ill-conditioned (a difference of near-equal terms: p_breakeven_logn far
    # above 1, where no reuse answer reads it): against the expression evaluated to 40 digits,
    # lambdify is then off by more than 1e-9 itself, and the generated order may lose up to
    # a hundred times more, within 1e-4
    exact = float(sp.sympify(expr).evalf(40, subs={s: values[s.name] for s in expr.free_symbols}))
    lost = abs(want - exact) / abs(exact)
    assert lost > 1e-9, (key, got, want, exact)
    assert abs(got - exact) <= min(100 * abs(want - exact), 1e-4 * abs(exact)), (key, got, want)


def test_every_catalogued_key_generated():
    assert list(_numeric.FUNCS) == [k for k, _ in entries()]


def test_answer_path_imports_no_sympy():
    """`kvmath compare` (bands, calibrated prefill, engines) runs without importing SymPy or
    any derivation module."""
    code = ("import sys, io, contextlib; from kvmath.cli.main import main; "
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out): rc = main(['compare', '--model', 'deepseek-v3',"
            " '--gpu', 'h200', '--tier', 'nvme', '--tokens', '16000', '--json'])\n"
            "print(rc, sorted(m for m in sys.modules if m.startswith(('sympy', 'kvmath.derive.kv'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split(None, 1)
    assert out[0] == "0" and out[1].strip() == "[]"
