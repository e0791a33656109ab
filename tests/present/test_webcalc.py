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

from kvmath.codegen.catalogue import entries, expression
from kvmath.codegen.javascript import calculator_keys, js_function
from kvmath.codegen.numpy_printer import logic_modules, render_logic
from kvmath.evaluate.api import TP_CANDIDATES, default_concurrency
from kvmath.tables.rows import bundled, pools
from kvmath.present.calculator import ERF_TOLERANCE, generate, scenario_data, write_static

from calc_scenarios import close, mismatches, python_reuse, scenarios

UI = Path(__file__).resolve().parents[2] / "_ext" / "kvcalc.js"
NODE = shutil.which("node")


def test_every_formula_the_logic_names_reaches_the_page():
    """Each catalogue key the printed logic names (literally, or by the model's attention family)
    has its function in kvcalc-formulas.js, and every literal key it names is catalogued (a
    misspelt key would fail in the page only)."""
    js = generate()["kvcalc-formulas.js"]
    _, keys = render_logic()
    catalogued = {k for k, _ in entries()}
    named = [k for k in keys if not k.endswith(".")]  # a prefix the logic extends by family
    assert named and set(named) <= catalogued, set(named) - catalogued
    for key in calculator_keys(keys):
        assert f'"{key}": {{args:' in js, key
    assert "derive.t_reload" in keys and "attention.mla.e_kv" in calculator_keys(keys)


def test_the_page_runs_the_command_lines_logic():
    """kvcalc-logic.js is kvmath/logic/ printed (no second copy): the page's files hold it as
    generated, and the hand-written UI calls its functions on the scenario record."""
    files = generate()
    assert files["kvcalc-logic.js"].split("\n", 1)[1] == render_logic()[0].split("\n", 1)[1]
    ui = UI.read_text()
    source = "".join(text for _, text in logic_modules())
    for name in ("band", "load_values", "ttft_curve", "prompt_limit", "reuse_answer"):
        assert f"def {name}(s, tokens" in source and f"LOGIC.{name}(record(state), state.tokens" in ui


def test_max_min_piecewise_print():
    T, a = sp.symbols("T a", positive=True)
    _, src = js_function(sp.Max(T, a) + sp.Min(T, 1))
    assert "Math.max(" in src and "Math.min(" in src
    _, src = js_function(sp.Piecewise((T, T > a)))  # no catch-all: NaN, never a silent 0
    assert "NaN" in src and "?" in src


def test_default_concurrency_is_evaluate_s():
    f = expression("derive.default_concurrent_reloads")
    for g in bundled().gpus.values():
        for k in TP_CANDIDATES:
            assert float(f.subs({sp.Symbol("N_node", positive=True, integer=True): g.gpus_per_node,
                                 sp.Symbol("K", positive=True, integer=True): k})) \
                == default_concurrency(g, k)


def test_data_come_from_the_tables():
    data = scenario_data()
    cat = bundled()
    rows = data["rows"]
    # every GPU but the projections (announced parts), and every tier but those over a projection
    assert set(rows["models"]) == set(cat.models)
    assert set(rows["gpus"]) == {n for n, g in cat.gpus.items() if g.kind != "projection"}
    assert "rubin" not in rows["gpus"] and {"gb300", "mi355x"} <= set(rows["gpus"])
    assert {"grace-c2c", "cxl", "host-dram"} <= set(rows["tiers"]) and "cxl-gen6" not in rows["tiers"]
    assert {f"pool:{p}" for p in pools()} <= set(rows["tiers"])
    m = rows["models"]["llama-3.1-70b"]
    assert m["attention"] == "gqa" and 8 in data["tps"]["llama-3.1-70b"] and m["max_context_tokens"] > 0
    assert data["logic"]["deployments"]["deepseek-v3"]["h200"]["tp"] == 8
    assert rows["gpus"]["h100-sxm"]["prefill_efficiency"] == cat.gpus["h100-sxm"].prefill_efficiency
    assert "vllm-cross-layer" in data["logic"]["engines"] and data["default_engine"] == "vllm-lbhnc"


def test_no_formula_or_number_typed_in_the_ui():
    """The UI script holds no physics and no logic: its numeric literals are layout constants
    only (listed here on purpose)."""
    text = re.sub(r"/\*.*?\*/", "", UI.read_text(), flags=re.S)  # block comments
    text = re.sub(r"(['\"`]).*?\1", "", text)  # strings, line by line
    text = re.sub(r"//[^\n]*", "", text)  # line comments
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?", text))
    layout = {"4", "5", "6", "7", "12", "16", "28", "44", "64", "70", "240", "280", "360", "640",
              "0.6", "1e6"}  # plot geometry in px, sample count, axis span in tokens
    # digits shown (toPrecision), ratios and percentages, the first and one more of a count
    algorithm = {"0", "1", "2", "3", "10", "100"}
    allowed = layout | algorithm
    assert numbers <= allowed, numbers - allowed


RUNNER = """
global.window = {};
const [dir, ui] = process.argv.slice(1);
for (const f of ["kvcalc-formulas.js", "kvcalc-data.js", "kvcalc-runtime.js", "kvcalc-logic.js"]) require(dir + "/" + f);
require(ui);
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
    assert got[6]["error"].startswith("TP (GPUs) must be a whole number of GPUs from 1 to 4,096")


def test_the_calculators_fields_are_the_command_lines_options():
    """One declaration: each calculator field is a compare or reuse option of the same name,
    kind and bounds (kvmath.scenario.options), and each own-value symbol has bounds."""
    from kvmath.scenario.options import BY_NAME, COMPARE, REUSE
    data = scenario_data()
    for name, f in data["options"].items():
        o = BY_NAME[name]
        assert (COMPARE in o.commands or REUSE in o.commands) and f["label"] == o.label
        assert (f["minimum"], f["maximum"], f["integer"]) == (o.kind.minimum, o.kind.maximum,
                                                             o.kind.integer)
    assert set(data["own"]) == {i["symbol"] for i in json.loads(
        re.search(r"inputs: (\[.*\])", generate()["kvcalc-formulas.js"]).group(1))}


# ------------------------------------------------------------------ reuse in the page
#: reuse scenarios by the page's field names: pauses of both kinds, price options, a reach, the
#: tokens a turn adds, a pool (priced at its medium, read by every node), a node's own drives
#: (worn at their rated writes), a GPU with no listed price (refused, as reuse refuses it)
REUSE_STATES = [
    {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 8192},
    {"model": "llama-3.1-70b", "gpu": "h200", "tier": "nvme", "tokens": 32768,
     "pause": "chat-exponential", "gpu-price": 2.5, "nvme-price": 0.2},
    {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "nvme", "tokens": 65536,
     "node": "dgx-h100", "pause": "synthetic-fitted", "turn-new-tokens": 900},
    {"model": "deepseek-v3", "gpu": "h200", "tier": "pool:3fs-nvme", "tokens": 32768,
     "pause": "chat-lognormal", "reach": 0.3},
    {"model": "qwen3-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 600,
     "dram-price": 100.0, "pause": "synthetic-fitted"},  # not even p = 1 pays
    {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 4096,
     "reach": 0.25, "tp": 2, "engine": "lmcache"},
    {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 16},
]
#: reuse --json keys the page shows or computes, held to 1e-9 (REL): the same expressions and
#: searches in IEEE doubles; only erf differs (Python's math.erf against the page's series and
#: continued fraction, both within about 1e-15)
REUSE_NUMERIC = ["ttl_s", "p_breakeven", "value_usd", "hit_probability", "saving_usd",
                 "saving_gpu_s", "gpu_usd_per_hour", "capacity_usd_per_byte_s",
                 "write_usd_per_byte", "kv_bytes", "new_fraction", "return_probability"]


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_the_pages_reuse_is_the_command_lines(tmp_path):
    """The page's reuse answer (logic.reuse_answer, printed) equals reuse's for the same
    scenario: the break-even, the best TTL and the value, at the same prices."""
    from kvmath.scenario.options import DEFAULT_PAUSE
    assert DEFAULT_PAUSE == "conversation-fitted"
    write_static(tmp_path)
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps(REUSE_STATES), check=True)
    got = json.loads(out.stdout)
    for s, g in zip(REUSE_STATES, got):
        assert "error" not in g and "reuse_error" not in g, (s, g)
        want = python_reuse(s)
        assert g["reuse_verdict"] == want["verdict"], s
        assert g["reuse_offload_can_pay"] == want["offload_can_pay"], s
        for k in REUSE_NUMERIC:
            a, b = g[f"reuse_{k}"], want[k]
            assert (a is None) == (b is None), (s, k, a, b)
            if b is not None:
                assert a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b)), (s, k, a, b)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_the_pages_erf_is_pythons(tmp_path):
    """The runtime's erf (the formulas' one special function) within ERF_TOLERANCE of math.erf,
    absolute, over the range the pause distributions reach, and exact at 0 and past 6."""
    import math
    write_static(tmp_path)
    xs = [i / 64 for i in range(-512, 513)] + [1e-12, -3e-9, 2.4999, 2.5, 2.5001, 5.99, 6.0, 40.0]
    runner = ("global.window = {}; const dir = process.argv[1];"
              "for (const f of ['kvcalc-formulas.js', 'kvcalc-data.js', 'kvcalc-runtime.js']) "
              "require(dir + '/' + f);"
              "const xs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(xs.map(x => window.KVCALC_RUNTIME.erf(x))));")
    out = subprocess.run([NODE, "-e", runner, str(tmp_path)], capture_output=True, text=True,
                         input=json.dumps(xs), check=True)
    got = json.loads(out.stdout)
    worst = max(abs(g - math.erf(x)) for x, g in zip(xs, got))
    assert worst <= ERF_TOLERANCE, worst
    assert got[xs.index(0.0)] == 0.0 and got[xs.index(40.0)] == 1.0


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_a_gpu_with_no_listed_price_is_refused_in_the_reuse_rows_only(tmp_path):
    from kvmath.tables.rows import gpu_prices
    unpriced = next(g for g in bundled().gpus if g not in gpu_prices()
                    and g in scenario_data()["rows"]["gpus"])
    write_static(tmp_path)
    state = {"model": "llama-3.1-8b", "gpu": unpriced, "tier": "host-dram", "tokens": 8192}
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps([state]), check=True)
    got = json.loads(out.stdout)[0]
    assert "error" not in got and "no GPU-hour price" in got["reuse_error"]
    assert "--gpu-price" in got["reuse_error"]


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_fields_reuse_does_not_take_are_named_beside_its_answer(tmp_path):
    """The review's case: a KV dtype or a load changes the comparison but not reuse's rows
    (reuse takes neither); the page says so in their last row rather than leaving it unsaid."""
    write_static(tmp_path)
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 8192}
    states = [base, {**base, "kv-dtype": "fp8", "resume-rate": 50}]
    out = subprocess.run([NODE, "-e", RUNNER, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps(states), check=True)
    plain, loaded = json.loads(out.stdout)
    assert plain["reuse_left_out"] == []
    # the load: reuse's --resume-rate prices holding from the node plan, which the page does
    # not run, and reuse's comparison is not loaded
    assert sorted(loaded["reuse_left_out"]) == sorted(["resumes per second (node)", "KV dtype"])
    assert loaded["reuse_saving_gpu_s"] == plain["reuse_saving_gpu_s"]  # reuse's own scenario
    assert loaded["reload_s"] != plain["reload_s"]


# ------------------------------------------------------------------ the chart and permalinks
PERMALINKS = """
global.window = {};
const [dir, ui] = process.argv.slice(1);
for (const f of ["kvcalc-formulas.js", "kvcalc-data.js", "kvcalc-runtime.js", "kvcalc-logic.js"]) require(dir + "/" + f);
require(ui);
const K = window.kvcalc;
const queries = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(queries.map(q => {
  const s = K.stateFrom(q), r = K.compute(s);
  if (r.error) return {error: r.error};
  // what the chart draws: each tier's curve at the scenario's length, its band and crossings
  const tiers = K.tierStates(s, r).map(t => {
    let at;
    try { at = K.curve(t, [t.tokens])[0]; } catch (e) { return {tier: t.tier, why: e.message}; }
    return Object.assign({tier: t.tier, tp: t.tp === undefined ? null : t.tp, at: at}, K.tierBand(t));
  });
  return {tp: r.tp, ttft_reload_s: r.ttft_reload_s, ttft_recompute_s: r.ttft_recompute_s,
          breakeven_tokens: r.breakeven_tokens, tiers: tiers};
})));
"""


def _page(tmp_path, queries):
    write_static(tmp_path)
    out = subprocess.run([NODE, "-e", PERMALINKS, str(tmp_path), str(UI)], capture_output=True,
                         text=True, input=json.dumps(queries), check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_a_permalink_that_is_not_a_finite_number_is_refused_in_words(tmp_path):
    """issue 37: ?tokens=1e309 showed Infinity (and a word NaN): every number of a permalink
    that is not finite is refused in words, naming what was given, and no verdict."""
    base = "?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram"
    queries = [base + "&tokens=1e309", base + "&tokens=-1e309", base + "&tokens=NaN",
               base + "&tokens=abc", base + "&tokens=4096&bandwidth=Infinity",
               base + "&tokens=4096&P=1e400"]
    got = _page(tmp_path, queries)
    for q, r in zip(queries, got):
        assert set(r) == {"error"}, (q, r)
        assert "got NaN" not in r["error"] and "got Infinity" not in r["error"], (q, r)
    assert "got '1e309', a number too large for a double" in got[0]["error"]
    assert "got 'abc', which is not a number" in got[3]["error"]
    assert got[4]["error"].startswith("reload bandwidth per GPU (GB/s) must be")
    assert got[5]["error"].startswith("your own P must be")


def _python_tier(state, tier, tp):
    from kvmath.evaluate.bands import band_of
    from kvmath.evaluate.api import scenario
    from kvmath.logic.rules import served_model
    from calc_scenarios import TIERS
    cat = bundled()
    s = scenario(served_model(cat.models[state["model"]], state.get("rope-scaling")),
                 cat.gpus[state["gpu"]], TIERS[tier], tp=tp)
    return band_of(s, state["tokens"])


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers it)")
def test_the_chart_draws_every_tier_as_the_command_line_answers_it(tmp_path):
    """The chart's tiers (the scenario's own, then the answer page's) at the scenario's
    length are compare's for each tier at the layout the scenario takes, and their crossings
    are compare's; the YaRN permalink of issue 37 (Qwen3-8B at its scaled window) draws them
    as the command line answers it."""
    from kvmath.present.calculator import PLOT_TIERS
    states = [{"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768},
              {"model": "qwen3-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 131072,
               "rope-scaling": "yarn"},
              {"model": "llama-3.1-8b", "gpu": "h200", "tier": "pool:3fs-nvme", "tokens": 8192}]
    got = _page(tmp_path, ["?" + "&".join(f"{k}={v}" for k, v in s.items()) for s in states])
    for state, page in zip(states, got):
        assert "error" not in page, (state, page)
        drawn = [t["tier"] for t in page["tiers"]]
        assert drawn[0] == state["tier"] and set(PLOT_TIERS) <= set(drawn)
        for t in page["tiers"]:
            assert "why" not in t, (state, t)
            want = _python_tier(state, t["tier"], page["tp"])
            n = want["nominal"]
            assert close(t["at"][2], n["ttft_reload_s"]), (state, t["tier"])
            assert close(t["at"][1], n["ttft_recompute_s"]), (state, t["tier"])
            assert close(t["ttft_reload_s"], n["ttft_reload_s"]), (state, t["tier"])
            assert all(close(a, b) for a, b in zip(t["ttft_reload_s_band"], want["ttft_reload_s"]))
            assert len(t["breakeven_tokens"]) == len(n["breakeven_tokens"]) and all(
                close(a, b) for a, b in zip(t["breakeven_tokens"], n["breakeven_tokens"]))
        own = page["tiers"][0]
        assert close(own["at"][2], page["ttft_reload_s"])
