"""The calculator's generator: every compare expression reaches the JavaScript, nothing is typed.

The numbers themselves are checked in a browser against compare (tests/browser/test_calculator.py).
"""
import json
import re
from pathlib import Path

import sympy as sp

from kvmath import derive as D
from kvmath.evaluate import COMPARE_EXPRESSIONS, _compare_fns
from kvmath.webcalc import ARCHITECTURE_EXPRESSIONS, generate, js_function, scenario_data

UI = Path(__file__).resolve().parents[1] / "_ext" / "kvcalc.js"


def test_every_compare_expression_is_generated():
    js = generate()["kvcalc-formulas.js"]
    for key in COMPARE_EXPRESSIONS:
        assert f'"{key}": {{args:' in js, key
    assert "crossing: {args:" in js
    for kind in ARCHITECTURE_EXPRESSIONS:
        assert f'"{kind}": {{' in js


def test_compare_evaluates_the_same_list():
    assert set(_compare_fns()) == set(COMPARE_EXPRESSIONS)


def test_a_new_expression_reaches_the_page():
    """The lead adds an expression to the list; regenerating picks it up with no JavaScript edit."""
    extra = {**COMPARE_EXPRESSIONS, "engine_overhead_s": D.t_0 + sp.Symbol("t_engine")}
    js = generate(expressions=extra, data={"models": {}})["kvcalc-formulas.js"]
    assert '"engine_overhead_s": {args: ["t_0", "t_engine"]' in js
    data = json.loads(generate(expressions=extra, data={})["kvcalc-data.js"]
                      .split("=", 1)[1].rstrip().rstrip(";"))
    assert "t_engine" in {i["symbol"] for i in data["inputs"]}  # a reader can set it


def test_max_min_piecewise_print():
    T, a = sp.symbols("T a", positive=True)
    _, src = js_function(sp.Max(T, a) + sp.Min(T, 1))
    assert "Math.max(" in src and "Math.min(" in src
    _, src = js_function(sp.Piecewise((T, T > a)))  # no catch-all: NaN, never a silent 0
    assert "NaN" in src and "?" in src
    _, src = js_function(D.min_reload_bandwidth)
    assert "Number.POSITIVE_INFINITY" in src


def test_data_come_from_the_tables():
    data = scenario_data()
    assert set(data["models"]) and set(data["gpus"]) and data["tiers"]
    m = data["models"]["llama-3.1-70b"]
    assert m["attention"] == "gqa" and 3 not in m["tps"] and 8 in m["tps"]
    for gpu in data["paths"].values():
        assert set(gpu) == set(data["tiers"])


def test_no_formula_or_number_typed_in_the_ui():
    """The UI script holds no physics: no SymPy symbol appears in an arithmetic expression and
    its numeric literals are layout and algorithm constants only (listed here on purpose)."""
    text = re.sub(r"/\*.*?\*/", "", UI.read_text(), flags=re.S)  # block comments
    text = re.sub(r"(['\"`]).*?\1", "", text)  # strings, line by line
    text = re.sub(r"//[^\n]*", "", text)  # line comments
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?", text))
    layout = {"4", "6", "12", "16", "28", "44", "64", "70", "240", "280", "360", "640", "0.6",
              "1e6"}  # plot geometry in px, sample count, axis span in tokens
    algorithm = {"0", "1", "2", "3", "10", "100", "200", "0.5", "1e-15"}  # grid, bisection, %
    allowed = layout | algorithm
    assert numbers <= allowed, numbers - allowed
