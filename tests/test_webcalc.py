"""The calculator's generator: every expression reaches the JavaScript, nothing is typed, and
the page's own evaluation (run under Node when it is installed) agrees with compare.

The browser test (tests/browser/test_calculator.py) checks the built page the same way.
"""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import sympy as sp

from kvmath.derive import kv as D
from kvmath.evaluate.compare import TP_CANDIDATES, default_concurrency
from kvmath.tables.rows import bundled, pools
from kvmath.present.calculator import generate, scenario_data, write_static
from kvmath.codegen.javascript import (ARCHITECTURE_EXPRESSIONS, COMPARE_EXPRESSIONS, PREFILL_PARTS,
                                     SCENARIO_EXPRESSIONS, js_function)

from calc_scenarios import mismatches, scenarios

UI = Path(__file__).resolve().parents[1] / "_ext" / "kvcalc.js"
NODE = shutil.which("node")


def test_every_expression_is_generated():
    js = generate()["kvcalc-formulas.js"]
    for key in [*COMPARE_EXPRESSIONS, *SCENARIO_EXPRESSIONS]:
        assert f'"{key}": {{args:' in js, key
    assert "crossing: {args:" not in js  # crossings are found on the TTFTs, numerically
    for kind, parts in PREFILL_PARTS.items():
        assert f'"{kind}": {{' in js
        for part in parts:
            assert f'"{part}": {{args:' in js, part
    for kind in ARCHITECTURE_EXPRESSIONS:
        assert f'"{kind}": {{' in js


def test_a_new_expression_reaches_the_page():
    """An expression added to the list reaches the page with no JavaScript edit."""
    extra = {**COMPARE_EXPRESSIONS, "engine_overhead_s": D.t_0 + sp.Symbol("t_engine")}
    js = generate(expressions=extra, data={"models": {}})["kvcalc-formulas.js"]
    assert '"engine_overhead_s": {args: ["t_0", "t_engine"]' in js


def test_max_min_piecewise_print():
    T, a = sp.symbols("T a", positive=True)
    _, src = js_function(sp.Max(T, a) + sp.Min(T, 1))
    assert "Math.max(" in src and "Math.min(" in src
    _, src = js_function(sp.Piecewise((T, T > a)))  # no catch-all: NaN, never a silent 0
    assert "NaN" in src and "?" in src


def test_default_concurrency_is_evaluate_s():
    f = SCENARIO_EXPRESSIONS["default_concurrency"]
    for g in bundled().gpus.values():
        for k in TP_CANDIDATES:
            assert float(f.subs({D.N_node: g.gpus_per_node, D.K: k})) == default_concurrency(g, k)


def test_data_come_from_the_tables():
    data = scenario_data()
    cat = bundled()
    # every GPU but the projections (announced parts), and every tier that every GPU has
    assert set(data["models"]) == set(cat.models)
    assert set(data["gpus"]) == {n for n, g in cat.gpus.items() if g.kind != "projection"}
    assert "rubin" not in data["gpus"] and {"gb300", "mi355x"} <= set(data["gpus"])
    assert set(data["tiers"]) == ({n for n, t in cat.tiers.items() if not t.gpus}
                                  | {f"pool:{p}" for p in pools()})
    m = data["models"]["llama-3.1-70b"]
    assert m["attention"] == "gqa" and 8 in m["tps"] and m["max_context_tokens"] > 0
    assert data["deployments"]["deepseek-v3"]["h200"]["tp"] == 8
    assert data["gpus"]["h100-sxm"]["calibrated"] is not None
    assert "vllm-cross-layer" in data["engines"] and data["default_engine"] == "vllm-lbhnc"


def test_no_formula_or_number_typed_in_the_ui():
    """The UI script holds no physics: its numeric literals are layout and algorithm constants
    only (listed here on purpose)."""
    text = re.sub(r"/\*.*?\*/", "", UI.read_text(), flags=re.S)  # block comments
    text = re.sub(r"(['\"`]).*?\1", "", text)  # strings, line by line
    text = re.sub(r"//[^\n]*", "", text)  # line comments
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?", text))
    layout = {"4", "6", "12", "16", "28", "44", "64", "70", "240", "280", "360", "640", "0.6",
              "1e6"}  # plot geometry in px, sample count, axis span in tokens
    # grid and bisection of the ideal crossings (1e-3 to 1e12 tokens, 3000 points, 200 halvings),
    # K/V split and one-layer copies (c_split 2 or 1, c_lay 1), ratios, percentages
    algorithm = {"0", "1", "2", "3", "10", "100", "200", "3000", "1e-3", "1e12"}
    allowed = layout | algorithm
    assert numbers <= allowed, numbers - allowed


RUNNER = """
global.window = {};
const [dir, ui] = process.argv.slice(1);
require(dir + "/kvcalc-formulas.js"); require(dir + "/kvcalc-data.js"); require(ui);
const states = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(states.map(s => {
  const r = window.kvcalc.compute(s);
  if (r.min_reload_bandwidth_Bps === Infinity) r.min_reload_bandwidth_Bps = "inf";
  return r;
})));
"""


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_page_evaluation_matches_compare(tmp_path):
    """60 random scenarios (engines, prefill models, layouts, concurrency, dtypes, overrides)
    and 15 that compare refuses: the page agrees to 1e-9 and refuses the same ones."""
    write_static(tmp_path)
    good, bad = scenarios(60, seed=11, errors=15)
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps([s for s, _ in good] + bad), check=True)
    got = json.loads(out.stdout)
    assert not mismatches(good, got[:len(good)])
    assert all("error" in r for r in got[len(good):]), [s for s, r in zip(bad, got[len(good):])
                                                      if "error" not in r]


def test_a_permalink_naming_a_javascript_built_in_is_an_unknown_name(tmp_path):
    """issue 20: ?model=constructor (or __proto__, toString, hasOwnProperty as a GPU, tier or
    dtype) threw an uncaught TypeError and left the page blank; each is refused as unknown."""
    write_static(tmp_path)
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 4096}
    hostile = [{**base, key: name} for key in ("model", "gpu", "tier", "engine", "compute-dtype",
                                                 "kv-dtype")
               for name in ("constructor", "__proto__", "toString", "hasOwnProperty")]
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps(hostile), check=True)
    got = json.loads(out.stdout)
    assert all("error" in r and "unknown" in r["error"] for r in got), got


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_own_values_and_options_have_the_command_lines_bounds(tmp_path):
    """issue 20: ?L_full=-80 showed a negative reload and a verdict, ?P=-1e15 'reload wins';
    the own-value fields take the bounds of the table fields they stand for, and the options
    those of kvmath.scenario.options, so each is refused with no verdict."""
    write_static(tmp_path)
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 4096}
    hostile = [{**base, **kv} for kv in (
        {"L_full": -80}, {"P": -1e15}, {"P": 0}, {"n_kv": 2.5}, {"tied": 2}, {"N_node": 0},
        {"tp": 1.5}, {"tp": 0}, {"ep": -1}, {"efficiency": 2}, {"bandwidth": 0},
        {"concurrent-reloads": -3}, {"tokens": 1e12}, {"compute-dtype": "fp16"},
        {"prefill": "magic"}, {"batch": 1e10})]
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps(hostile), check=True)
    got = json.loads(out.stdout)
    assert all(set(r) == {"error"} for r in got), [(h, r) for h, r in zip(hostile, got)
                                                   if set(r) != {"error"}]
    assert "your own L_full must be a whole number from 0" in got[0]["error"]
    assert got[6]["error"].startswith("TP (GPUs) must be a positive integer")


def test_the_calculators_fields_are_the_command_lines_options():
    """One declaration: each calculator field is a compare option of the same name, kind and
    bounds (kvmath.scenario.options), and each own-value symbol has bounds."""
    from kvmath.scenario.options import BY_NAME, COMPARE
    data = scenario_data()
    for name, f in data["options"].items():
        o = BY_NAME[name]
        assert COMPARE in o.commands and f["label"] == o.label
        assert (f["minimum"], f["maximum"], f["integer"]) == (o.kind.minimum, o.kind.maximum,
                                                             o.kind.integer)
    assert set(data["own"]) == {i["symbol"] for i in json.loads(
        re.search(r"inputs: (\[.*\])", generate()["kvcalc-formulas.js"]).group(1))}
