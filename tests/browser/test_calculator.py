"""The calculator page against `kvmath compare`, and its permalinks.

Random scenarios (seeded) are evaluated by the page's own JavaScript (generated from the SymPy
expressions) and held to Python's compare within a relative difference of 1e-9: both evaluate
the same expressions in IEEE doubles, so only the order of operations (about 1e-15) and the
crossing root-finder (bisection to 1e-15 against the closed-form roots) separate them.
"""
import json
import math
import random

import pytest

from kvmath import bundled, compare
from kvmath.evaluate import ScenarioError
from kvmath.tables import DTYPE_BYTES

from test_pages import HTML, browser, server  # noqa: F401  (fixtures)

PAGE = "book/calculator.html"
REL = 1e-9
NUMERIC = ["recompute_s", "reload_s", "compute_s", "weights_read_s", "kv_bytes",
           "kv_bytes_per_gpu", "kv_bytes_per_token", "prefill_flops", "speedup",
           "min_reload_bandwidth_Bps", "model_flops_per_kv_byte",
           "model_flops_per_kv_byte_at_tokens", "gpu_flops_per_link_byte",
           "reload_bandwidth_Bps", "reload_latency_s", "kv_replication", "prefill_efficiency"]

pytestmark = pytest.mark.skipif(not (HTML / PAGE).exists(), reason="book not built")


def close(a, b):
    if b is None or (isinstance(b, float) and not math.isfinite(b)):
        return a is None or (isinstance(a, float) and math.isinf(a))
    return abs(a - b) <= REL * max(abs(a), abs(b)) or a == b


def scenarios(n, seed=20261130):
    cat, rng = bundled(), random.Random(seed)
    out = []
    while len(out) < n:
        s = {"model": rng.choice(list(cat.models)), "gpu": rng.choice(list(cat.gpus)),
             "tier": rng.choice(list(cat.tiers)), "tokens": int(10 ** rng.uniform(0, 6.5)),
             "tp": rng.choice([1, 1, 2, 4, 8, 16])}
        if rng.random() < 0.2:
            s["kv-dtype"] = rng.choice(sorted(DTYPE_BYTES))
        if rng.random() < 0.2:
            s["efficiency"] = round(rng.uniform(0.05, 1), 3)
        if rng.random() < 0.2:
            s["bandwidth"] = round(10 ** rng.uniform(0, 3), 3)
        try:
            want = compare(cat.models[s["model"]], cat.gpus[s["gpu"]], cat.tiers[s["tier"]],
                           s["tokens"], tp=s["tp"], kv_dtype=s.get("kv-dtype"),
                           efficiency=s.get("efficiency"),
                           bandwidth_Bps=s["bandwidth"] * 1e9 if "bandwidth" in s else None)
        except ScenarioError:
            continue
        out.append((s, want))
    return out


@pytest.fixture(scope="module")
def tab(server, browser):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)) if "THEBE_JS_URL" not in str(e) else None)
    t.goto(server + PAGE, wait_until="load")
    t.wait_for_function("window.kvcalc !== undefined")
    yield t
    assert errors == []
    ctx.close()


def test_random_scenarios_match_compare(tab):
    cases = scenarios(240)
    got = tab.evaluate("states => states.map(s => window.kvcalc.compute(s))",
                       [dict(tokens=s["tokens"], tp=s["tp"], **{k: v for k, v in s.items()
                                                                if k not in ("tokens", "tp")})
                        for s, _ in cases])
    bad = []
    for (s, want), have in zip(cases, got):
        assert "error" not in have, (s, have)
        for key in NUMERIC:
            if not close(have[key], want[key]):
                bad.append((s, key, have[key], want[key]))
        if have["winner"] != want["winner"]:
            bad.append((s, "winner", have["winner"], want["winner"]))
        hb, wb = have["breakeven_tokens"], want["breakeven_tokens"]
        if len(hb) != len(wb) or not all(close(a, b) for a, b in zip(hb, wb)):
            bad.append((s, "breakeven_tokens", hb, wb))
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def test_invalid_tp_is_an_error_not_a_number(tab):
    r = tab.evaluate("window.kvcalc.compute({model: 'llama-3.1-8b', gpu: 'h100-sxm', "
                     "tier: 'host-dram', tokens: 100, tp: 3})")
    assert "error" in r and "TP" in r["error"]


def _shown(t):
    return t.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '#kvcalc [data-value]')].map(e => [e.id, e.dataset.value]))""")


def test_permalink_restores_state_and_ids_are_json_keys(server, browser):  # noqa: F811
    cat = bundled()
    s, want = scenarios(1, seed=7)[0]
    query = "&".join(f"{k}={v}" for k, v in s.items())
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    t.goto(f"{server}{PAGE}?{query}", wait_until="load")
    t.wait_for_selector("#recompute_s[data-value]")
    shown = _shown(t)
    for key in ("recompute_s", "reload_s", "min_reload_bandwidth_Bps", "speedup"):
        assert close(float(shown[key]), want[key]), key
    assert shown["winner"] == want["winner"]
    assert len(json.loads(shown["breakeven_tokens"])) == len(want["breakeven_tokens"])
    form = t.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '#kvcalc-form select, #kvcalc-form input')].map(e => [e.name, e.value]))""")
    for k, v in s.items():
        assert form[k] == str(v), (k, form[k], v)
    # change the form; the permalink follows, and opening it restores the new state
    other = next(m for m in cat.models if m != s["model"])
    t.select_option("#kvcalc-model", other)
    t.fill("#kvcalc-tokens", "4096")
    t.dispatch_event("#kvcalc-tokens", "input")
    link = t.get_attribute("#kvcalc-permalink", "href")
    assert f"model={other}" in link and "tokens=4096" in link
    before = _shown(t)
    t2 = ctx.new_page()
    t2.goto(f"{server}{PAGE}{link}", wait_until="load")
    t2.wait_for_selector("#recompute_s[data-value]")
    assert _shown(t2) == before
    ctx.close()


def test_own_values_change_the_answer(server, browser):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    t.goto(f"{server}{PAGE}?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=1000&tp=1",
           wait_until="load")
    t.wait_for_selector("#kv_bytes_per_token[data-value]")
    base = float(_shown(t)["kv_bytes_per_token"])
    t.goto(f"{server}{PAGE}?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=1000&tp=1"
           "&n_kv=16", wait_until="load")
    t.wait_for_selector("#kv_bytes_per_token[data-value]")
    assert float(_shown(t)["kv_bytes_per_token"]) == 2 * base  # twice the KV heads
    ctx.close()
