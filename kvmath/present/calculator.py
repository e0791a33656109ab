"""The book's calculator: the command line's own logic and formulas, printed as JavaScript.

Nothing the calculator computes is typed into JavaScript by hand. :func:`write_static` writes

* ``kvcalc-formulas.js``: every catalogued SymPy expression the logic evaluates, as JavaScript
  (:mod:`kvmath.codegen.javascript`), generated with the numeric code by
  ``scripts/generate_numeric.py`` into ``kvmath/_generated/kvcalc_formulas.js``;
* ``kvcalc-logic.js``: the scenario logic of :mod:`kvmath.logic` (the layout, the path,
  every value, the prefill model, the crossings, the comparison and its bands), printed from
  its Python by :mod:`kvmath.codegen.pyjs` into ``kvmath/_generated/kvcalc_logic.js`` (a test
  checks both are current);
* ``kvcalc-runtime.js``: the primitives that logic calls (kvmath/present/kvcalc_runtime.js, one
  for one those of :mod:`kvmath.evaluate.runtime`, and Python's meanings where JavaScript's
  differ);
* ``kvcalc-data.js``: the bundled tables as the logic reads them
  (:func:`kvmath.evaluate.runtime.portable_data`), the rows a reader picks, the bands' measured
  factors, and the form's fields (:mod:`kvmath.scenario.options`), at build time.

``_ext/kvcalc.js`` (hand-written) is the user interface only: it reads the form or a permalink,
calls the printed logic and shows its answer. ``tests/present/test_webcalc.py`` runs the page's
evaluation under Node against ``compare``.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from kvmath.codegen.own_values import GPU_SYMBOLS, MODEL_SYMBOLS
from kvmath.evaluate.bands import band_data
from kvmath.logic.constants import DEFAULT_ENGINE, MIN_PREFIX_TOKENS, PREFILL_MODELS, TP_CANDIDATES
from kvmath.logic.layout import heads_fit
from kvmath.logic.runtime import portable_data
from kvmath.scenario.options import DEFAULT_PAUSE, calculator_options
from kvmath.scenario.record import defaults as record_defaults
from kvmath.tables.schema import data_path
from kvmath.tables.rows import PROJECTION, bundled, codecs, node_drive, nodes, pauses, pools
from kvmath.tiers.build import pool_tiers
from kvmath.present.format import TIE_SPEEDUP, _TIME_UNITS
from kvmath.version import version_info

#: the generated files (scripts/generate_numeric.py) and the runtime, copied to the page
GENERATED = data_path("").parent / "_generated"
FORMULAS = GENERATED / "kvcalc_formulas.js"
LOGIC = GENERATED / "kvcalc_logic.js"
RUNTIME = Path(__file__).with_name("kvcalc_runtime.js")

#: the scenario the page opens with (the book's headline scenario)
DEFAULTS = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tier": "host-dram", "tokens": 32768}
#: the tiers the answer page compares and the calculator's chart draws beside the scenario's own
#: (one drive shared by the node, the node's drives striped, a remote pool over RDMA)
PLOT_TIERS = ("host-dram", "nvme-1drive", "nvme", "rdma")
#: the page's erf (kvcalc_runtime.js) against Python's math.erf, absolute, over the range the
#: pause distributions reach (tests/present/test_webcalc.py holds it)
ERF_TOLERANCE = 2e-15


def _finite(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


#: the table field each own-value symbol stands for, whose schema constraints bound it
OWN_FIELDS = {"d": ("models", "hidden_size"), "n_q": ("models", "num_attention_heads"),
              "L_win": ("models", "window_layers"), "W": ("models", "window"),
              "n_kv": ("models", "num_key_value_heads"), "d_h": ("models", "head_dim"),
              "r_kv": ("models", "kv_lora_rank"), "d_rope": ("models", "qk_rope_head_dim"),
              "d_nope": ("models", "qk_nope_head_dim"), "r_q": ("models", "q_lora_rank"),
              "E_sh": ("models", "shared_experts"), "L_dense": ("models", "dense_layers"),
              "V": ("models", "vocab_size"), "d_v": ("models", "v_head_dim"),
              "P": ("gpus", "bf16_dense_flops"), "B_hbm": ("gpus", "hbm_bandwidth_Bps"),
              "C_hbm": ("gpus", "hbm_capacity_bytes"), "N_node": ("gpus", "gpus_per_node")}
#: symbols that are counts of a model's parts with no field of their own (0 where the model
#: has none: no dense FFN, no experts, no full-attention layers, no recurrent layers or their
#: heads), and d_qk (a head width)
OWN_COUNTS = {"L_full": 0, "I_ffn": 0, "I_exp": 0, "E": 0, "k_top": 0, "L_moe": 0, "d_qk": 1,
              "L_rec": 0, "n_rk": 0, "n_rv": 0, "d_rk": 0, "d_rv": 0, "k_conv": 0}


def own_bounds():
    """{symbol: {integer, minimum, exclusive_min, maximum, below_max, words}}: what a reader's
    own value may be, the constraints of the table field it stands for (tied: 0 or 1)."""
    from kvmath.scenario.options import MAX_INT
    from kvmath.tables.schema import resource
    fields = {(t, f["name"]): f for t in ("models", "gpus")
              for f in resource(t)["schema"]["fields"]}
    out = {}
    for name in (*MODEL_SYMBOLS, *GPU_SYMBOLS):
        if name == "tied":
            out[name] = dict(integer=True, minimum=0, exclusive_min=False, maximum=1,
                             below_max=False, words="0 or 1")
            continue
        if name == "b_st":  # a recurrent-state element's bytes (its format's, dtypes.csv)
            out[name] = dict(integer=False, minimum=0, exclusive_min=True, maximum=None,
                             below_max=False, words="a number above 0")
            continue
        if name in OWN_COUNTS:
            f = {"type": "integer", "constraints": {"minimum": OWN_COUNTS[name]}}
        else:
            f = fields[OWN_FIELDS[name]]
        c, integer = f.get("constraints", {}), f["type"] == "integer"
        exclusive = "exclusiveMinimum" in c
        low = c.get("exclusiveMinimum", c.get("minimum"))
        high = c.get("maximum", MAX_INT if integer else None)
        words = ((f"a whole number from {low:g} to {high:,}" if integer else
                  (f"a number above {low:g}" if exclusive else f"a number of at least {low:g}"))
                 + ("" if integer or high is None else f" and at most {high:g}"))
        out[name] = dict(integer=integer, minimum=low, exclusive_min=exclusive, maximum=high,
                         below_max=False, words=words)
    return out


def plain(x):
    """x as JSON holds it: records and rows as objects of their fields, tuples as lists (a
    number that is not finite is an error: no table holds one)."""
    if dataclasses.is_dataclass(x):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"a table holds {x}: JSON cannot")
    return x


def calculator_gpus(cat=None):
    """The GPUs the page offers: every bundled one but the projections (announced parts, which
    the command line evaluates only with --allow-projection)."""
    cat = cat or bundled()
    return {n: g for n, g in cat.gpus.items() if g.kind != PROJECTION}


def calculator_tiers(cat=None):
    """The tiers the page offers: the node's (a tier of one GPU family, such as a Grace tray's
    memory, is refused on another GPU by the logic, as on the command line) and the bundled
    pools (pool:NAME), none over a projection link."""
    cat = cat or bundled()
    return {n: t for n, t in {**cat.tiers, **pool_tiers()}.items()
            if all(cat.links[h.link].kind != PROJECTION for h in t.hops if h.link in cat.links)}


def calculator_nodes(cat=None):
    """The nodes the page offers: every bundled one whose GPU it offers."""
    gpus = calculator_gpus(cat)
    return {n: node for n, node in nodes().items() if node.gpu in gpus}


def scenario_data(cat=None):
    """What the page reads: the tables as the logic reads them ("logic"), the rows a reader
    picks ("rows": models, GPUs, tiers with the bundled pools as pool:NAME, codecs), the bands'
    measured factors, and the form's fields, choices and words."""
    cat = cat or bundled()
    return {
        "logic": plain(portable_data()),
        "rows": {"models": plain(cat.models), "gpus": plain(calculator_gpus(cat)),
                 "tiers": plain(calculator_tiers(cat)), "nodes": plain(calculator_nodes(cat)),
                 "codecs": plain(codecs()), "pauses": plain(pauses())},
        # reuse's prices: a node's NVMe worn at its drive's rated lifetime writes (a pool's
        # capacity is priced by its medium, which its tier row holds); the pause reuse takes
        "node_drive_lifetime": {n: (node_drive(node).lifetime_drive_writes
                                    if node_drive(node) is not None else None)
                                for n, node in calculator_nodes(cat).items()},
        "default_pause": DEFAULT_PAUSE,
        # reuse options whose part of the answer the page does not run (said beside it):
        # --resume-rate prices holding at its opportunity cost from the node plan
        "reuse_not_run": ["resume-rate"],
        "bands": plain(band_data()),
        # the form's TP choices: the degrees each model's heads allow
        "tps": {m.name: [k for k in TP_CANDIDATES if heads_fit(m, k)] for m in cat.models.values()},
        "kinds": {m.name: m.attention_kind for m in cat.models.values()},
        "default_engine": DEFAULT_ENGINE, "prefill_models": list(PREFILL_MODELS),
        "t_min": MIN_PREFIX_TOKENS, "model_symbols": list(MODEL_SYMBOLS),
        "time_units": [[u, s, _finite(up)] for u, s, up in _TIME_UNITS],
        "byte_units": [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]],
        # --bandwidth is in GB/s; compare takes B/s
        "bandwidth_scale": 1e9, "tie_speedup": TIE_SPEEDUP,
        "options": calculator_options(), "own": own_bounds(),
        # the scenario record's defaults (kvmath.scenario.record): the page's record starts here
        "scenario_defaults": plain(record_defaults()),
        "defaults": dict(DEFAULTS), "plot_tiers": list(PLOT_TIERS), "version": version_info()}


def data_js(data):
    return ("// Generated by kvmath.present.calculator from the bundled tables; do not edit.\n"
            f"window.KVCALC_DATA = {json.dumps(data, indent=1)};\n")


def generate(data=None):
    """{file name: text} of the page's files, in the order they load: formulas and data, the
    runtime over them, the logic over the runtime. data: the tables (default:
    :func:`scenario_data` of the bundled ones)."""
    data = scenario_data() if data is None else data
    return {"kvcalc-formulas.js": FORMULAS.read_text(encoding="utf-8"),
            "kvcalc-data.js": data_js(data),
            "kvcalc-runtime.js": RUNTIME.read_text(encoding="utf-8"),
            "kvcalc-logic.js": LOGIC.read_text(encoding="utf-8")}


def write_static(folder):
    """Write the generated files into folder; returns their names, in load order."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = generate()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return list(files)
