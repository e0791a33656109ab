"""The calculator page against `kvmath compare`, and its permalinks.

Random scenarios (seeded; tests/calc_scenarios.py) are evaluated by the page's own JavaScript
(generated from the SymPy expressions) and held to Python's compare within a relative
difference of 1e-9: both evaluate the same expressions in IEEE doubles, so only the order of
operations (about 1e-15) and bisection to machine precision separate them.
"""
import json
import sys
from pathlib import Path

import pytest

from kvmath import bundled

from test_pages import HTML, browser, server  # noqa: F401  (fixtures)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from calc_scenarios import close, mismatches, python, scenarios  # noqa: E402

PAGE = "book/calculator.html"

pytestmark = pytest.mark.skipif(not (HTML / PAGE).exists(), reason="book not built")


@pytest.fixture(scope="module")
def tab(server, browser):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)))
    t.goto(server + PAGE, wait_until="load")
    t.wait_for_function("window.kvcalc !== undefined")
    yield t
    assert errors == []
    ctx.close()


def test_random_scenarios_match_compare(tab):
    cases, refused = scenarios(240, errors=20)
    got = tab.evaluate("states => states.map(s => window.kvcalc.compute(s))",
                       [s for s, _ in cases] + refused)
    for r in got:  # JSON from the page has no Infinity
        if r.get("min_reload_bandwidth_Bps") is None and "error" not in r:
            r["min_reload_bandwidth_Bps"] = "inf"
    bad = mismatches(cases, got[:len(cases)])
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"
    assert all("error" in r for r in got[len(cases):])


def test_the_chart_draws_the_times_the_table_shows(tab):
    """The plotted curves at the scenario's own length are compare's times to first token, the
    times the verdict compares (the chart once drew a reload whose engine step was not timed
    like the table's)."""
    for state in ({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768},
                  {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 16}):
        r = tab.evaluate("s => window.kvcalc.compute(s)", state)
        [[_, rec, rel]] = tab.evaluate("s => window.kvcalc.curve(s, [s.tokens])", state)
        assert close(rec, r["ttft_recompute_s"]) and close(rel, r["ttft_reload_s"]), (state, rec, rel, r)


def test_the_page_shows_the_bands_it_computes(server, browser):  # noqa: F811
    """The table shows each time to first token's range (compare's bands), the verdict's fate
    inside them and the known limits; the chart draws each range as a whisker at the scenario's
    length. H100 with Llama-3.1-70B at TP 8 from host DRAM: the band the CLI prints."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    t.goto(server + PAGE + "?model=llama-3.1-70b&gpu=h100-sxm&tier=host-dram&tokens=32768",
           wait_until="load")
    t.wait_for_function("document.querySelector('#kvcalc-plot svg') !== null")
    shown = _shown(t)
    want = python({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram",
                   "tokens": 32768})
    for key in ("ttft_recompute_s_band", "ttft_reload_s_band"):
        lo, hi = json.loads(shown[key])
        assert close(lo, want[key][0]) and close(hi, want[key][1]), key
        assert lo < hi
    assert shown["verdict_flips_in_band"] == str(want["verdict_flips_in_band"]).lower()
    assert t.locator("#kvcalc-plot svg line.reload-band").count() == 1
    assert t.locator("#kvcalc-plot svg line.recompute-band").count() == 1
    ctx.close()


def test_a_one_token_prefix_is_refused_as_in_python(tab):
    r = tab.evaluate("window.kvcalc.compute({model: 'llama-3.1-8b', gpu: 'h100-sxm', "
                     "tier: 'host-dram', tokens: 1})")
    assert r["error"].startswith("--tokens must be at least 2, got 1")


def test_invalid_tp_is_an_error_not_a_number(tab):
    r = tab.evaluate("window.kvcalc.compute({model: 'llama-3.1-8b', gpu: 'h100-sxm', "
                     "tier: 'host-dram', tokens: 100, tp: 3})")
    assert "error" in r and "--tp 3 does not fit" in r["error"]


def _shown(t):
    return t.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '#kvcalc [data-value]')].map(e => [e.id, e.dataset.value]))""")


def test_permalink_restores_state_and_ids_are_json_keys(server, browser):  # noqa: F811
    cat = bundled()
    (s, want), = scenarios(1, seed=7)[0]
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
    # another model the scenario still holds (expert parallelism is refused on dense models)
    other = next(m for m in cat.models if m != s["model"]
                 and (cat.models[m].is_moe or int(s.get("ep", 1)) <= 1))
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
    t.goto(f"{server}{PAGE}?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=1000",
           wait_until="load")
    t.wait_for_selector("#kv_bytes_per_token[data-value]")
    base = float(_shown(t)["kv_bytes_per_token"])
    t.goto(f"{server}{PAGE}?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=1000"
           "&n_kv=16", wait_until="load")
    t.wait_for_selector("#kv_bytes_per_token[data-value]")
    assert float(_shown(t)["kv_bytes_per_token"]) == 2 * base  # twice the KV heads
    ctx.close()


@pytest.mark.parametrize("query, words", [
    ("tp=3", "“TP (GPUs)” 3 does not fit"),
    ("L_full=-80", "your own L_full must be a whole number from 0"),
    ("efficiency=2", "flat prefill efficiency (0–1) must be a fraction"),
    ("tokens=200000", "tick “beyond the context window”"),
])
def test_a_bad_permalink_shows_one_message_in_the_forms_words_and_no_verdict(
        server, browser, query, words):  # noqa: F811
    """issues 19 and 20: the page's messages quoted command-line flags, and own values such as
    L_full=-80 showed a negative reload with a verdict."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)))
    t.goto(f"{server}{PAGE}?{query}&model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=4096",
           wait_until="load")
    t.wait_for_function("document.querySelector('#kvcalc-status').textContent.length > 0")
    status = t.text_content("#kvcalc-status")
    assert words in status and "--" not in status and "wins" not in status, status
    assert not _shown(t) and errors == []
    ctx.close()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PARAMS = ["model", "gpu", "tier", "engine", "prefill", "kv-dtype", "compute-dtype", "tokens",
          "tp", "ep", "batch", "concurrent-reloads", "efficiency", "bandwidth",
          "allow-beyond-context", "L_full", "n_kv", "P", "B_hbm", "E", "tied", "__proto__",
          "constructor"]
VALUES = st.one_of(st.sampled_from(["", "0", "-1", "1e308", "NaN", "Infinity", "1.5", "2",
                                    "8", "constructor", "__proto__", "toString", "llama-3.1-8b",
                                    "deepseek-v3", "h100-sxm", "mi300x", "nvme", "hbm", "fp8",
                                    "<script>alert(1)</script>", "%00", "true"]),
                   st.text(max_size=8))


@given(query=st.lists(st.tuples(st.sampled_from(PARAMS), VALUES), max_size=6))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_permalink_fuzz(tab, query):
    """issue 20, item 8: any permalink gives a finite answer or one message and no verdict,
    never an uncaught exception (the tab fixture fails on any page error)."""
    from urllib.parse import urlencode
    search = "?" + urlencode(query)
    r = tab.evaluate("q => window.kvcalc.compute(window.kvcalc.stateFrom(q))", search)
    if "error" in r:
        assert set(r) == {"error"} and isinstance(r["error"], str) and r["error"]
    else:
        for key in ("reload_s", "recompute_s", "ttft_reload_s", "ttft_recompute_s"):
            assert isinstance(r[key], (int, float)) and r[key] > 0, (search, key, r[key])
        assert r["winner"] in ("reload", "recompute")


@pytest.mark.parametrize("query, why", [
    ("model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=4096", "context window"),
    ("model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens=4096&allow-beyond-context=true",
     "HBM full"),
])
def test_the_chart_stops_at_the_window_and_at_hbm(server, browser, query, why):  # noqa: F811
    """issue 19, item 6: the chart was drawn past the context window and past what HBM holds."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    t.goto(f"{server}{PAGE}?{query}", wait_until="load")
    t.wait_for_selector("#kvcalc-plot svg")
    limit = float(t.get_attribute("#kvcalc-plot svg", "data-limit-tokens"))
    label = t.text_content("#kvcalc-plot svg .limit-label")
    assert why in label
    if why == "context window":
        assert limit == bundled().models["llama-3.1-8b"].max_context_tokens
    else:
        assert limit > bundled().models["llama-3.1-8b"].max_context_tokens
    ctx.close()


def test_the_page_shows_reuse_at_the_prices_given(server, browser):  # noqa: F811
    """The reuse rows (reuse --json's answer, prefixed reuse_) for a permalink with a pause and
    prices: the page shows what Python's reuse answers, to 1e-9."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from calc_scenarios import python_reuse
    state = {"model": "llama-3.1-70b", "gpu": "h200", "tier": "nvme", "tokens": 32768,
             "pause": "chat-exponential", "gpu-price": 2.5, "nvme-price": 0.2}
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)))
    t.goto(f"{server}{PAGE}?" + "&".join(f"{k}={v}" for k, v in state.items()),
           wait_until="load")
    t.wait_for_selector("#reuse_verdict[data-value]")
    shown, want = _shown(t), python_reuse(state)
    assert shown["reuse_verdict"] == want["verdict"]
    for k in ("p_breakeven", "ttl_s", "value_usd"):
        assert close(float(shown[f"reuse_{k}"]), want[k]), k
    assert t.input_value("#kvcalc-pause") == "chat-exponential" and errors == []
    ctx.close()


@pytest.mark.parametrize("query", [
    "model=llama-3.1-70b&gpu=h100-sxm&tier=host-dram&tokens=32768",
    # issue 37: a YaRN permalink the command line answers threw in the page
    "model=qwen3-8b&gpu=h100-sxm&tier=host-dram&tokens=131072&rope-scaling=yarn",
    "model=deepseek-v3&gpu=h200&tier=nvme-1drive&tokens=32768&engine=vllm-cross-layer-v0.26",
])
def test_the_chart_draws_each_tier_above_the_table(server, browser, query):  # noqa: F811
    """issue 36: the page draws its scenario, reload from each tier and recompute against the
    prompt's length, the chosen length and the crossings marked, above the table, for any
    permalink (the other tiers' crossings arrive once their bands are computed)."""
    from kvmath.present.calculator import PLOT_TIERS
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)))
    t.goto(f"{server}{PAGE}?{query}", wait_until="load")
    t.wait_for_selector("#kvcalc-plot svg")
    t.wait_for_timeout(4000)  # the other tiers' bands, a tier at a time
    info = t.evaluate("""() => {
      const svg = document.querySelector('#kvcalc-plot svg');
      const tiers = [...svg.querySelectorAll('path[data-tier]')].map(p => p.dataset.tier);
      return {tiers, chosen: svg.querySelectorAll('line.chosen').length,
              recompute: svg.querySelectorAll('path.recompute').length,
              dots: [...svg.querySelectorAll('circle.crossing-dot')].map(c => c.dataset.tier),
              label: svg.getAttribute('aria-label'),
              above: document.querySelector('#kvcalc-plot').getBoundingClientRect().bottom <=
                     document.querySelector('.kvcalc-results').getBoundingClientRect().top + 1};
    }""")
    assert errors == [], errors
    assert info["recompute"] == 1 and info["chosen"] == 1 and info["above"], info
    assert set(PLOT_TIERS) <= set(info["tiers"]), info
    assert "at " in info["label"] and "reload from" in info["label"]
    ctx.close()


@pytest.mark.parametrize("value", ["1e309", "NaN", "-Infinity"])
def test_a_number_that_is_not_finite_is_refused_in_words(server, browser, value):  # noqa: F811
    """issue 37: ?tokens=1e309 showed Infinity; it is refused in words, with no verdict."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    t = ctx.new_page()
    errors = []
    t.on("pageerror", lambda e: errors.append(str(e)))
    t.goto(f"{server}{PAGE}?model=llama-3.1-8b&gpu=h100-sxm&tier=host-dram&tokens={value}",
           wait_until="load")
    t.wait_for_function("document.querySelector('#kvcalc-status').textContent.length > 0")
    status = t.text_content("#kvcalc-status")
    assert f"got '{value}'" in status and "wins" not in status, status
    assert not _shown(t) and errors == []
    ctx.close()
