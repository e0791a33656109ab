"""Small rules of the scenario: a reader's own values, what a model is (MoE, a latent, its
architecture as text), a GPU's peak in a dtype, the model as served under a RoPE scaling, an
engine's rules (its copy kernel, what it reads and stores once, whether a copy spans layers, its
request costs), the KV element's bytes.

Portable (:mod:`kvmath.codegen.pyjs` prints it for the calculator): it calls only the primitives of
:mod:`kvmath.logic.runtime`.
"""
from __future__ import annotations

import math

from kvmath.logic.constants import DEFAULT_ENGINE, HBM_TIER_NAME, SHAPE_FIELDS
from kvmath.logic.runtime import DATA, ScenarioError, field, formula, with_fields


def engine_of(s):
    """The scenario's engine profile: its own row, else the default one (:data:`DEFAULT_ENGINE`)."""
    return s.engine if s.engine is not None else DATA.engines[DEFAULT_ENGINE]


def prefill_model(s):
    """The prefill model a scenario asks for: a flat efficiency is the flat model (ideal)."""
    return "ideal" if s.efficiency is not None else s.prefill


def own_value(own, name, value):
    """A reader's own value of a symbol where given, else the table's."""
    if own is not None and name in own:
        return own[name]
    return value


def is_moe(model):
    """Whether the model has routed experts."""
    return model.num_experts is not None and model.num_experts > 0


def latent(model):
    """Whether the model's KV is one latent every tensor-parallel rank holds whole (its
    attention family's rule: MLA and its kin)."""
    return DATA.families[model.attention]["replicated_latent"]


def shape_key(model):
    """The architecture of a model row as text (:data:`SHAPE_FIELDS`, in order)."""
    return "|".join([str(field(model, f)) for f in SHAPE_FIELDS])


def round_up(x):
    """x rounded up to four significant figures: "fewer than" it stays true."""
    if not x > 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 3)
    return math.ceil(x / scale) * scale


def sign(x):
    """1, -1 or 0 (0 also for NaN: no sign change there)."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def dense_flops(gpu, dtype):
    """The GPU's dense peak FLOP/s in the compute dtype (its gpus.csv field: DATA.peak_fields);
    ScenarioError naming the row and field when it cannot compute in it (an empty peak: no such
    tensor cores)."""
    if dtype not in DATA.peak_fields:
        raise ScenarioError(f"unknown compute dtype {dtype!r}; expected one of "
                            f"{', '.join(list(DATA.peak_fields))}")
    name = DATA.peak_fields[dtype]
    value = field(gpu, name)
    if value is None:
        where = DATA.gpu_rows.get(gpu.name, f"GPU row {gpu.name!r}")
        raise ScenarioError(f"{where}, field '{name}': empty, so GPU {gpu.name} cannot compute "
                            f"in {dtype} (it has no {dtype} tensor cores); expected a GPU with a "
                            f"{name} peak for --compute-dtype {dtype}")
    return value


def served_model(model, rope_scaling):
    """The model as served: under a RoPE scaling method (``"yarn"``) its context window is the
    one its card states for it, factor x native window (rope_scaling.csv,
    kvmath.derive.kv.context_scaled); None: its config's window. ScenarioError when the card
    states no such scaling for the model, or the row is not the bundled one the card's scaling
    applies to (a models CSV row of its own states the window it is served at)."""
    if rope_scaling is None:
        return model
    entry = DATA.rope_scaling.get(model.name)
    rows = {} if entry is None else entry["methods"]
    if rope_scaling not in rows:
        stated = ", ".join(list(rows)) if len(rows) > 0 else "none"
        with_any = ", ".join(sorted(list(DATA.rope_scaling)))
        raise ScenarioError(f"--rope-scaling {rope_scaling}: rope_scaling.csv states no "
                            f"{rope_scaling} scaling for {model.name} (its methods: {stated}; "
                            f"the models with one: {with_any})")
    if model.max_context_tokens != entry["config_context_tokens"]:
        raise ScenarioError(f"--rope-scaling {rope_scaling}: this {model.name} row's window "
                            f"({model.max_context_tokens:,} tokens) is not the bundled config's "
                            f"({entry['config_context_tokens']:,}) the card's scaling applies to; "
                            "a row of your own states the window it is served at in "
                            "max_context_tokens")
    row = rows[rope_scaling]
    window = float(formula("derive.context_scaled", {"f_rope": row.factor,
                                                      "T_native": row.native_context_tokens}))
    return with_fields(model, {"max_context_tokens": int(window)})


def rope_hint(model):
    """Words offering the RoPE scaling the model's card states, where it serves a longer window
    than the model has now ("" where none does, or the row is not the bundled one)."""
    out = ""
    entry = DATA.rope_scaling.get(model.name)
    if entry is None or model.max_context_tokens != entry["config_context_tokens"]:
        return out
    for method in entry["methods"]:
        window = served_model(model, method).max_context_tokens
        if window > model.max_context_tokens:
            out = out + (f"; its card's {method} scaling serves {window:,} "
                         f"(--rope-scaling {method})")
    return out



def compute_efficiency(gpu, compute_dtype, efficiency=None):
    """The prefill's fraction of peak: given, the GPU's BF16 one, or its measured one in another
    compute dtype (efficiencies.csv prefill-<dtype>)."""
    if efficiency is not None:
        return efficiency
    if compute_dtype == "bf16":
        return gpu.prefill_efficiency
    eff = DATA.compute_efficiency.get(gpu.name, {}).get(compute_dtype)
    if eff is None:
        raise ScenarioError(f"no {compute_dtype} prefill efficiency for GPU {gpu.name}; "
                            "pass --efficiency")
    return eff


def hbm_fit_fraction(eng):
    """Share of each GPU's HBM that weights and KV may fill: the engine's utilised fraction less
    the activation reserve of plan_defaults.csv (activations, CUDA graphs, workspace), as the
    tier plan reserves it."""
    return eng.hbm_usable_fraction * (1 - DATA.activation_reserve_fraction)


def copy_path(eng, copy_bytes, platform="cuda"):
    """[path, why]: how the engine issues a load's copies of copy_bytes over the GPU's host link,
    as its code gates them (vLLM: cpu/gpu_worker.py _select_swap_blocks_fn): "kernel", its copy
    kernel, for copies under kernel_below_bytes on CUDA; "batched", one driver call for the
    transfer's copies (cuMemcpyBatchAsync, CUDA); "driver", one driver call per copy; "asymptote",
    an engine row with no copy size (a kernel at the link's rate, the row's assumption). why: where
    the platform makes the engine fall back from its copy kernel or its batched call to driver
    copies, the reason in words, else "" (copies at or above the kernel's size take the batched
    call by the engine's own gate: no fallback)."""
    if eng.copy_tokens is None or copy_bytes is None:
        return ["asymptote", ""]
    why = ""
    if eng.kernel_below_bytes is not None and copy_bytes < eng.kernel_below_bytes:
        if platform == "cuda":
            return ["kernel", ""]
        why = f"its copy kernel runs on CUDA only, not {platform}"
    if eng.copy_batched and platform == "cuda":
        return ["batched", why]
    if eng.copy_batched:
        why = (why + "; " if why else "") + f"its batched driver call is CUDA's: one call per copy on {platform}"
    return ["driver", why]


def per_model(rule, model):
    """An engine rule of engines.csv: always, never, or "mla": for a family whose KV is one
    latent every rank holds whole (MLA and its kin)."""
    return rule == "always" or (rule == "mla" and latent(model))


def reads_once(eng, model):
    """Whether the engine reads a replicated KV head or MLA latent across node hops once (rank 0
    reads, then broadcasts) rather than once per rank: engines.csv says always, for MLA only
    (LMCache's save_only_first_rank defaults to use_mla), or never."""
    return per_model(eng.replicated_read_once, model)


def stores_once(eng, model, tp=1, node_gpus=1, platform="cuda"):
    """Whether the engine's offloaded cache holds one copy of a replicated KV head or MLA latent
    per node (engines.csv stored_once: vLLM from v0.27.0 for MLA on one node, LMCache for MLA),
    rather than one per rank: it sets the bytes a cache occupies and writes, and what a drive
    behind host memory is read for."""
    if eng.stored_once == "mla-single-node" or eng.stored_once == "mla-single-node-cuda":
        return (latent(model) and tp <= node_gpus
                and (eng.stored_once == "mla-single-node" or platform == "cuda"))
    return per_model(eng.stored_once, model)


def copies_span_layers(eng, v):
    """Whether one copy carries every layer: engines.csv says always, never, or for uniform
    models only (no sliding-window or chunked-local hybrid: vLLM allocates cross-layer blocks
    only when every layer has the same KV layout)."""
    hybrid = (v["L_win"] > 0 or v["L_chunk"] > 0) and v["L_full"] > 0
    return eng.copy_spans_layers == "always" or (eng.copy_spans_layers == "uniform" and not hybrid)


def kv_element_bytes(kv_dtype, head_elements):
    """Bytes per KV element in kv_dtype: its listed size, or, for a format whose block is one
    KV head of one token (dtypes.csv block_is_head), its scale shared by the head's elements
    (an MLA latent is one head of its whole width), B."""
    row = DATA.dtypes.get(kv_dtype)
    if row is None or not row.block_is_head:
        return DATA.dtype_bytes[kv_dtype]
    return float(formula("derive.dtype_bytes", {"n_bits": row.element_bits,
                                                "s_bits": row.scale_bits, "g_s": head_elements}))


def check_kv_dtype(gpu, kv_dtype):
    """ScenarioError when the GPU cannot read KV in kv_dtype (NVFP4 KV needs FP4 tensor cores:
    dtypes.csv needs_fp4_tensor_cores, gpus.csv fp4_dense_flops)."""
    row = DATA.dtypes.get(kv_dtype)
    if row is not None and row.needs_fp4_tensor_cores and gpu.fp4_dense_flops is None:
        raise ScenarioError(f"KV dtype {kv_dtype} (--kv-dtype, or the model row's kv_dtype) "
                            f"needs FP4 tensor cores (Blackwell): GPU {gpu.name} has none "
                            "(gpus.csv fp4_dense_flops is empty)")


def engine_costs_calibrated(eng):
    """Whether the engine's request costs are fitted on published times to first token
    (engine_costs.csv kind fit, every cost given); the ideal profile charges none by
    definition. An engine row of the reader's own is not."""
    costs = DATA.engine_costs.get(eng.name, {})
    ev = DATA.engine_cost_evidence.get(eng.name)
    return eng.name == "ideal" or (ev is not None and ev["kind"] == "fit" and all(
        [p in costs for p in DATA.engine_cost_parameters]))


def engine_cost_caveat(eng):
    """Words on what the engine's request costs rest on, where they rest on fewer than three
    independent sources or on none of the engine's own ("" otherwise)."""
    ev = DATA.engine_cost_evidence.get(eng.name)
    if ev is None:
        return (f"{eng.name}'s request costs: none given for this engine row "
                "(engine_costs.csv names the bundled profiles)")
    return ev["caveat"]


def request_cost_values(eng, tier, token_ids=False):
    """The engine's request costs as substitution values (engine_costs.csv; 0 where the engine
    gives none): t_req and c_hash, c_tokz on every request, c_hit on tokens loaded from a tier
    (none from HBM, where no connector runs; no tokenising for a prompt sent as token IDs)."""
    costs = DATA.engine_costs.get(eng.name, {})
    return {"t_req": costs.get("request_fixed_s", 0.0), "c_hash": costs.get("hash_token_s", 0.0),
            "c_tokz": 0.0 if token_ids else costs.get("tokenize_token_s", 0.0),
            "c_hit": 0.0 if tier.name == HBM_TIER_NAME else costs.get("hit_token_s", 0.0)}

