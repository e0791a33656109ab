"""Fit vLLM's request costs on the TTFT rows of validation.csv and write them to
kvmath/data/engine_costs.csv (kvmath.evaluate.engine_fit.fit; the hashing row, a sourced measurement,
is kept). tests/evaluate/test_engine_fit.py checks that the committed values are the fit's.

Run after changing a TTFT validation row, the prefill model or a path: the fit's base is
compare()'s TTFT with these costs taken out. ``python scripts/fit_engine_costs.py``
"""
import csv
import datetime
import pathlib

from kvmath.evaluate.engine_fit import FITTED, REQUEST_SOURCES, VLLM_ENGINES, fit, held_out_reload_factor

PATH = pathlib.Path(__file__).resolve().parents[1] / "kvmath" / "data" / "engine_costs.csv"
SOURCES = ("https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html; "
           "https://gitea.gahow.org/gahow/agentic-kvc/src/commit/837df6bc9e05f5a5b4af27a36356efdd4cff2ecd/v2/exp_a_tier_latency/results")
WHAT = {
    "request_fixed_s": ("s", "the intercept of the rows of " + ", ".join(REQUEST_SOURCES) +
                        " (CUDA graphs; another rig's intercept is its own nuisance term)",
                        "admission, scheduling and sampling the first token; what-if: x2 moves a reload's TTFT by the same few ms"),
    "tokenize_token_s": ("s/token", "the slope of TTFT with prompt length on prompts sent as text with nothing loaded (HBM hits)",
                         "tokenising the prompt in the API server (the blog sent token IDs, so only agentic-kvc's HBM hits see it); what-if: --token-ids drops it"),
    "hit_token_s": ("s/token", "the slope of TTFT with loaded tokens beyond the modelled copy (host-DRAM hits sent as token IDs)",
                    "the offloading connector's lookups and per-block bookkeeping beyond the copy; one rig (H100, PCIe Gen5): the copy-rate error of that rig is folded in"),
}


def main():
    f = fit()
    with PATH.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header, kept = reader.fieldnames, [r for r in reader if r["kind"] != "fit"]
    today = datetime.date.today().isoformat()
    rows = list(kept)
    for p in FITTED:
        unit, method, notes = WHAT[p]
        rows.append({"parameter": p, "engines": "; ".join(VLLM_ENGINES),
                     "value": f"{f['values'][p]:.6g}", "unit": unit, "kind": "fit",
                     "method": "non-negative least squares on relative residuals "
                               "(kvmath.evaluate.engine_fit.fit): " + method,
                     "calibration_rows": "; ".join(f["calibration_rows"]),
                     "source": SOURCES, "source_location": "validation.csv rows named in calibration_rows",
                     "retrieved": today,
                     "notes": notes + "; describes vLLM from commit 2a1776b7 (the blog) to 0.18.1 "
                              "(agentic-kvc), applied to later versions as an assumption"})
    factor = held_out_reload_factor()
    rows.append({"parameter": "held_out_reload_factor", "engines": "; ".join(VLLM_ENGINES),
                 "value": f"{factor:.6g}", "unit": "1", "kind": "fit",
                 "method": "kvmath.evaluate.engine_fit.held_out_reload_factor: the widest predicted/"
                           "measured, either way, of the held-apart reload rows expected to hold",
                 "calibration_rows": "; ".join(f["calibration_rows"]),
                 "source": SOURCES, "source_location": "validation.csv rows held apart from the fit",
                 "retrieved": today,
                 "notes": "widens vLLM's reload band (kvmath.evaluate.bands.band); computed under "
                          "the committed costs, so run the script twice after a change"})
    with PATH.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print({**f["values"], "intercepts": f["intercepts"]})


if __name__ == "__main__":
    main()
