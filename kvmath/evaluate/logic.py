"""The scenario's logic, written once: which layout serves a model, which hops a tier's bytes
cross and at what rate under an engine profile, every value a comparison substitutes, the
prefill model in use, the crossings, the comparison itself and its bands.

Written in the portable subset of Python that :mod:`kvmath.codegen.pyjs` prints as JavaScript:
the command line runs this module and the book's calculator runs its printed copy
(``kvmath/_generated/kvcalc_logic.js``), so the two cannot drift. It calls only the primitives
of :mod:`kvmath.evaluate.runtime` (catalogued formulas, records, the tables as :data:`DATA`),
takes rows (model, GPU, tier, engine, codec) as arguments and answers in plain numbers, lists
and dicts. ``own``: a reader's own symbol values (the calculator's fields) replacing a model's
or a GPU's; the command line passes none. :mod:`kvmath.evaluate.values`,
:mod:`kvmath.evaluate.compare` and :mod:`kvmath.evaluate.bands` wrap it for Python callers
(names resolved, arrays, results remembered).
"""
from __future__ import annotations

import math

from kvmath.evaluate.runtime import (DATA, Layout, PathHop, ScenarioError, field, formula,
                                     formula_quiet, is_float, memo, vmap, with_fields)

#: the engine profile a comparison uses unless told otherwise (kvmath/data/engines.csv)
DEFAULT_ENGINE = "vllm-lbhnc"
#: tensor-parallel degrees tried when none is given (powers of two, up to eight 8-GPU nodes)
TP_CANDIDATES = [1, 2, 4, 8, 16, 32, 64]
#: the shortest prefix whose reload means anything, tokens: at one token the reload's own
#: forward pass is the whole prefill, and recompute wins by the load's first byte
MIN_PREFIX_TOKENS = 2.0
#: the crossings' search: sign changes on a log grid of this many lengths, each bracket then
#: halved this many times (in log space: to machine precision)
CROSSING_POINTS = 1024
CROSSING_ITERATIONS = 48
#: the prefill models: the operator model fitted to measured times, or the flat roofline
PREFILL_MODELS = ["calibrated", "ideal"]
#: the calibrated prefill's parts (kvmath.derive.prefill): they sum to its time
PARTS = ["gemm_s", "nongemm_s", "attention_s", "allreduce_s", "moe_s", "lm_head_s", "recurrent_s"]
#: load imbalance across expert-parallel ranks: busiest rank's tokens over the mean (assumption)
DEFAULT_IMBALANCE = 1.0
#: bytes per activation element (BF16 activations)
BYTES_ACT = 2.0
#: the keys a dense layer's query may attend (more than any prompt: every earlier one)
DENSE_KEYS = 1e18
#: symbols an attention family does not set, at values that make its terms vanish or harmless
#: (each family's own fields replace them: kvmath.derive.attention)
FAMILY_SYMBOL_DEFAULTS = {"n_kv": 1, "d_h": 1, "r_kv": 1, "d_rope": 1, "d_nope": 1, "r_q": 0,
                          "d_v": 1, "H_I": 0, "d_I": 0, "k_sel": DENSE_KEYS}
#: KV element types a codec's measured ratio is against (CacheGen encodes 16-bit KV)
CODEC_KV_DTYPES = ["bf16", "fp16"]
#: the tier a prefix still in GPU memory is "loaded" from: no hop, no connector
HBM_TIER_NAME = "hbm"
#: how compare tells the user a length beyond the context window is allowed
BEYOND_CONTEXT_HINT = "(pass --allow-beyond-context to evaluate it anyway)"
#: compare's results that may be infinite (no bandwidth suffices)
MAY_BE_INF = ["min_reload_bandwidth_Bps"]
#: the fields of a model row that set its FLOPs and bytes: two models equal in these are one
#: architecture to the arithmetic (a validation-only model, as Llama-3-8B-1M is Llama-3.1-8B's)
SHAPE_FIELDS = ["attention", "layers", "window_layers", "window", "hidden_size",
                "num_attention_heads", "num_key_value_heads", "head_dim", "kv_lora_rank",
                "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
                "intermediate_size", "moe_intermediate_size", "num_experts", "experts_per_token",
                "shared_experts", "dense_layers", "vocab_size", "tie_word_embeddings",
                "weight_dtype", "kv_dtype", "chunk_layers", "chunk_tokens", "index_n_heads",
                "index_head_dim", "index_topk", "aux_kv_dtype"]


# ------------------------------------------------------------------ small rules
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
    return "|".join([str(x) for x in [
        model.attention, model.layers, model.window_layers, model.window, model.hidden_size,
        model.num_attention_heads, model.num_key_value_heads, model.head_dim,
        model.kv_lora_rank, model.qk_rope_head_dim, model.qk_nope_head_dim, model.v_head_dim,
        model.q_lora_rank, model.intermediate_size, model.moe_intermediate_size,
        model.num_experts, model.experts_per_token, model.shared_experts, model.dense_layers,
        model.vocab_size, model.tie_word_embeddings, model.weight_dtype, model.kv_dtype,
        model.chunk_layers, model.chunk_tokens, model.index_n_heads, model.index_head_dim,
        model.index_topk, model.aux_kv_dtype]])


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


def node_gpu(node, node_gpu_row, gpu):
    """The GPU of a scenario on a node (a nodes.csv row): its own GPU (node_gpu_row, the gpus.csv
    row it names) with the node's GPU count; ScenarioError when ``gpu`` (given, or None) is
    another GPU."""
    if gpu is not None and gpu.name != node.gpu:
        raise ScenarioError(f"--gpu {gpu.name} is not the GPU of node {node.name} ({node.gpus}x "
                            f"{node.gpu}): drop --gpu, or give a node with that GPU")
    return with_fields(node_gpu_row, {"gpus_per_node": node.gpus})


def node_tier(node, tier):
    """A tier on a node: the nvme tier striped over the node's own drives (nodes.csv: their link
    and count) before the bundled path's later hops (host memory, the GPU's host link); any
    other tier as it is. ScenarioError for a drive tier on a node without drives, or one that
    names drives of its own (nvme-gen5, nvme-1drive): each would be priced on drives the node
    does not have; for a pool read over more NICs per GPU node than the node has; and for a
    pool of the GPU nodes' own DRAM that takes all of a node's DRAM or more."""
    pool = tier.name[len("pool:"):] if tier.name.startswith("pool:") else tier.name
    for h in tier.hops:  # a pool's client hop: the NICs each GPU node reads it over
        if h.requests is not None and h.scope == "per-node" and not h.count <= node.nics:
            if not node.nics > 0:
                raise ScenarioError(f"--pool {pool}: node {node.name} has no NICs (nics 0), so "
                                    "no engine on it can reach a pool over the network")
            raise ScenarioError(f"--pool {pool}: its engines read it over {h.count} NICs per "
                                f"GPU node (pools.csv client_nics), and node {node.name} has "
                                f"{node.nics} (nics {node.nics})")
    taken = tier.gpu_node_dram_bytes or 0.0  # a row from a page's data may lack the field
    if taken > 0 and not taken < node.host_dram_bytes:
        raise ScenarioError(f"--pool {pool} takes {taken / 1e9:.4g} GB of each GPU node's DRAM "
                            f"(pools.csv storage_node_bytes), and node {node.name} has "
                            f"{node.host_dram_bytes / 1e9:.4g} GB (host_dram_bytes): nothing "
                            "would be left for its own host tier")
    if tier.name.startswith("nvme") and not node.nvme_drives > 0:
        raise ScenarioError(f"node {node.name} has no NVMe drives (nvme_drives "
                            f"{node.nvme_drives}): --tier {tier.name} has nothing to read")
    if tier.name.startswith("nvme") and tier.name != "nvme":
        raise ScenarioError(f"--tier {tier.name} names drives of its own ({tier.description}); "
                            f"node {node.name} has {node.nvme_drives} {node.nvme_drive_link} "
                            "drives: use --tier nvme on the node, or a nodes CSV row with the "
                            "drives you mean")
    if tier.name != "nvme":
        return tier
    drives = with_fields(tier.hops[0], {"link": node.nvme_drive_link, "count": node.nvme_drives})
    return with_fields(tier, {
        "hops": tuple([drives] + list(tier.hops[1:])),
        "description": f"{node.name}'s {node.nvme_drives} {node.nvme_drive_link} drives "
                       "striped, bounced through host DRAM, then the GPU's host link"})


def tier_exists_on(tier, gpu_name):
    """Whether a tier exists on a GPU: every tier but those of one GPU family (tiers.csv gpus: a
    Grace tray's memory, a peer over NVLink, CXL behind an x86 host)."""
    return len(tier.gpus) == 0 or gpu_name in tier.gpus


def check_tier_gpu(tier, gpu):
    """ScenarioError when a tier that exists on some GPUs only is asked of another."""
    if not tier_exists_on(tier, gpu.name):
        raise ScenarioError(f"tier {tier.name} exists only on GPU(s) {', '.join(tier.gpus)} "
                            f"(tiers.csv, field 'gpus'), not on {gpu.name}: its hops are those "
                            "GPUs' own links")


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


def load_kernel(eng, copy_bytes, platform="cuda"):
    """Whether a load of copies of copy_bytes runs the engine's copy kernel (no per-copy cost)
    rather than driver copies (kernel_below_bytes; CUDA only: vLLM falls back to driver copies
    on ROCm, cpu/gpu_worker.py _select_swap_blocks_fn)."""
    return (eng.kernel_below_bytes is not None and not eng.driver_copies
            and platform == "cuda" and copy_bytes is not None
            and copy_bytes < eng.kernel_below_bytes)


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
    """Whether every request cost of the engine is given (engine_costs.csv); the ideal profile
    charges none by definition."""
    costs = DATA.engine_costs.get(eng.name, {})
    return eng.name == "ideal" or all([p in costs for p in DATA.engine_cost_parameters])


def request_cost_values(eng, tier, token_ids=False):
    """The engine's request costs as substitution values (engine_costs.csv; 0 where the engine
    gives none): t_req and c_hash, c_tokz on every request, c_hit on tokens loaded from a tier
    (none from HBM, where no connector runs; no tokenising for a prompt sent as token IDs)."""
    costs = DATA.engine_costs.get(eng.name, {})
    return {"t_req": costs.get("request_fixed_s", 0.0), "c_hash": costs.get("hash_token_s", 0.0),
            "c_tokz": 0.0 if token_ids else costs.get("tokenize_token_s", 0.0),
            "c_hit": 0.0 if tier.name == HBM_TIER_NAME else costs.get("hit_token_s", 0.0)}


# ------------------------------------------------------------------ the model and its layout
def model_values(model, kv_dtype=None, weight_dtype=None, own=None):
    """Substitution values (by symbol name) for everything a model fixes: the fields every model
    has, then its attention family's (kvmath.derive.attention) and what the family derives from
    them, a reader's own values, then e_kv, the KV element's bytes and the parameter counts."""
    fam = DATA.families[model.attention]
    v = {
        "d": model.hidden_size, "n_q": model.num_attention_heads,
        "L_full": (model.layers - model.window_layers - model.chunk_layers
                   - model.recurrent_layers),
        "L_win": model.window_layers, "L_rec": model.recurrent_layers,
        "L_chunk": model.chunk_layers, "C_ch": model.chunk_tokens or 1,  # irrelevant at L_chunk 0
        "n_rk": model.recurrent_key_heads or 0, "n_rv": model.recurrent_value_heads or 0,
        "d_rk": model.recurrent_key_head_dim or 0, "d_rv": model.recurrent_value_head_dim or 0,
        "k_conv": model.recurrent_conv_kernel or 0,
        "b_st": DATA.dtype_bytes[model.state_dtype or model.weight_dtype],
        "W": model.window or 1,  # irrelevant when L_win = 0
        "I_ffn": model.intermediate_size or 0, "I_exp": model.moe_intermediate_size or 0,
        "E": model.num_experts or 0, "k_top": model.experts_per_token or 0,
        "E_sh": model.shared_experts or 0, "L_dense": model.dense_layers,
        "L_moe": model.layers - model.dense_layers, "V": model.vocab_size,
        "tied": 1 if model.tie_word_embeddings else 0,
        "b_w": DATA.dtype_bytes[weight_dtype or model.weight_dtype],
        # what a layer caches beside its KV (a sparse model's indexer keys): its format's bytes
        "b_aux": DATA.dtype_bytes[model.aux_kv_dtype] if model.aux_kv_dtype else 1,
    }
    v.update(FAMILY_SYMBOL_DEFAULTS)
    fields = fam["fields"]
    for sym in fields:
        v[sym] = field(model, fields[sym]) or 0
    for sym in fam["derived"]:
        v[sym] = formula("attention." + model.attention + ".derived." + sym, v)
    if own is not None:
        for sym in own:
            if sym in v:
                v[sym] = own[sym]
    v["e_kv"] = formula("attention." + model.attention + ".e_kv", v)
    v["e_aux"] = formula("attention." + model.attention + ".aux_elements", v)
    v["b_kv"] = kv_element_bytes(kv_dtype or model.kv_dtype,
                                 formula("attention." + model.attention + ".head_elements", v))
    v["N_lin"] = float(formula("attention." + model.attention + ".params_active_matmul", v))
    v["N_tot"] = float(formula("attention." + model.attention + ".params_total", v))
    v["N_xa"] = float(formula("derive.params_routed_active", v))
    v["N_xs"] = float(formula("derive.params_routed_stored", v))
    return v


def heads_fit(model, tp, own=None):
    """Whether tp GPUs can split the model's heads: the query heads evenly (vLLM and SGLang
    refuse a TP that does not divide them), a hybrid model's recurrent heads too, and the KV
    heads one way or the other (one divides the other; a latent always)."""
    if own_value(own, "n_q", model.num_attention_heads) % tp:
        return False
    # a hybrid model's recurrent heads split by TP too (vLLM divides their keys, values and
    # convolution channels by it)
    if model.recurrent_layers and (model.recurrent_key_heads % tp
                                   or model.recurrent_value_heads % tp):
        return False
    if latent(model):
        return True
    n_kv = own_value(own, "n_kv", model.num_key_value_heads)
    return not (n_kv % tp and tp % n_kv)


def replication(model, tp, own=None):
    """rho, the copies of the KV across tp GPUs; ScenarioError if tp does not fit the heads."""
    n_q = own_value(own, "n_q", model.num_attention_heads)
    if n_q % tp:
        raise ScenarioError(f"--tp {tp} does not fit {model.name}'s {n_q} attention heads: TP "
                            "must divide them (vLLM and SGLang refuse it)")
    n_kv = own_value(own, "n_kv", model.num_key_value_heads)
    if not heads_fit(model, tp, own):
        raise ScenarioError(f"--tp {tp} does not fit {model.name}'s {n_kv} KV heads: one must "
                            "divide the other")
    return float(formula("attention." + model.attention + ".rho", {"K": tp, "n_kv": n_kv or 1}))


def default_concurrency(gpu, tp, own=None):
    """Replicas reloading at once through one node's shared hops: every replica busy."""
    return float(formula("derive.default_concurrent_reloads",
                         {"N_node": own_value(own, "N_node", gpu.gpus_per_node), "K": tp}))


def hbm_slack(model, gpu, layout, tokens, batch, usable, own=None):
    """[HBM left per GPU, weights per GPU, the batch's KV per GPU], B, of a layout holding
    ``batch`` sequences of ``tokens`` tokens within the usable fraction."""
    v = model_values(model, layout.kv_dtype, layout.weight_dtype, own)
    v.update({"K": layout.tp, "K_e": layout.expert_gpus, "rho": replication(model, layout.tp, own),
              "n_seq": batch, "u_hbm": usable,
              "C_hbm": own_value(own, "C_hbm", gpu.hbm_capacity_bytes), "T": float(tokens)})
    return [float(formula("derive.hbm_slack", v)), float(formula("derive.weights_per_gpu", v)),
            batch * float(formula("derive.kv_bytes_per_gpu", v))]


def choose_layout(model, gpu, tokens=1, tp=None, ep=None, batch=1, compute_dtype=None,
                  kv_dtype=None, usable=None, check_fit=True, own=None):
    """How the model is served: a sourced deployment for (model, gpu) when no TP is given,
    else the given TP, else the smallest TP whose HBM holds the weights plus the KV of
    ``batch`` sequences of ``tokens`` tokens within the usable fraction (default: the default
    engine's :func:`hbm_fit_fraction`). A deployment also sets the dtypes under a given TP
    (a TP changes the degree, not the precision it is served in). ScenarioError when
    the given TP cannot hold them (naming a TP that would)."""
    if usable is None:
        usable = hbm_fit_fraction(DATA.engines[DEFAULT_ENGINE])
    if ep is not None and (int(ep) != ep or ep < 1):
        raise ScenarioError(f"--ep must be a positive integer, got {ep}")
    if ep is not None and ep > 1 and not is_moe(model):
        raise ScenarioError(f"--ep {ep}: {model.name} has no routed experts to spread "
                            "(expert parallelism applies to MoE models only)")
    experts = own_value(own, "E", model.num_experts)
    if ep is not None and is_moe(model) and ep > experts:
        raise ScenarioError(f"--ep {ep}: {model.name} has {experts} routed experts, "
                            "so at most that many ranks hold one each")
    served = DATA.deployments.get(model.name, {}).get(gpu.name)
    dep = served if tp is None else None
    weight_dtype = served.weight_dtype if served is not None else model.weight_dtype
    if dep is not None:
        layout = Layout(tp=dep.tp, ep=ep or dep.ep, dp_attention=dep.dp_attention,
                        weight_dtype=dep.weight_dtype,
                        compute_dtype=compute_dtype or dep.compute_dtype,
                        kv_dtype=kv_dtype or dep.kv_dtype, reason=f"deployment: {dep.source}")
    else:
        if compute_dtype is None:  # fp8 weights compute in fp8 where the GPU has fp8 tensor cores
            if served is not None:
                compute_dtype = served.compute_dtype
            elif weight_dtype == "fp8" and gpu.fp8_dense_flops is not None:
                compute_dtype = "fp8"
            else:
                compute_dtype = "bf16"
        if (compute_dtype == "fp8" or compute_dtype == "nvfp4") \
                and DATA.dtype_bytes[weight_dtype] > DATA.dtype_bytes[compute_dtype]:
            weight_dtype = compute_dtype  # fp8 compute reads fp8 weights, nvfp4 NVFP4 ones
        kv = kv_dtype or (served.kv_dtype if served is not None else model.kv_dtype)

        # experts spread wider than attention: each attention group serves its own requests
        # (data-parallel attention), as SGLang's --enable-dp-attention and vLLM's DP+EP do
        def make(k, why):
            return Layout(tp=k, ep=ep or 1, dp_attention=ep is not None and ep > k,
                          weight_dtype=weight_dtype, compute_dtype=compute_dtype, kv_dtype=kv,
                          reason=why)
        if tp is not None:
            replication(model, tp, own)  # raises if tp does not fit the heads
            layout = make(tp, "given")
        else:
            layout = None
            for k in TP_CANDIDATES:
                if heads_fit(model, k, own) and \
                        hbm_slack(model, gpu, make(k, ""), tokens, batch, usable, own)[0] >= 0:
                    layout = make(k, "smallest TP that holds the weights and the batch's KV")
                    break
            if layout is None:
                raise ScenarioError(f"{model.name} does not fit {TP_CANDIDATES[-1]} {gpu.name} "
                                    f"GPUs (the largest TP tried) with --batch {batch} x "
                                    f"--tokens {tokens:,} tokens of KV")
    if layout.ep > 1 and ((layout.tp % layout.ep) if layout.ep <= layout.tp
                          else (layout.ep % layout.tp)):
        raise ScenarioError(f"--ep {layout.ep} and --tp {layout.tp}: one must divide the other "
                            "(experts split tp / ep ways, or ep / tp attention groups)")
    if check_fit:
        fit = hbm_slack(model, gpu, layout, tokens, batch, usable, own)
        if fit[0] < 0:
            fits = [k for k in TP_CANDIDATES if heads_fit(model, k, own) and hbm_slack(
                model, gpu, Layout(tp=k, ep=layout.ep if ep is not None else 1,
                                   dp_attention=layout.dp_attention,
                                   weight_dtype=layout.weight_dtype,
                                   compute_dtype=layout.compute_dtype, kv_dtype=layout.kv_dtype,
                                   reason=""), tokens, batch, usable, own)[0] >= 0]
            hint = f"; --tp {fits[0]} fits" if len(fits) > 0 else ""
            raise ScenarioError(
                f"--tp {layout.tp} cannot hold {model.name} on {gpu.name}: "
                f"{layout.weight_dtype} weights {fit[1] / 1e9:.3g} GB + KV {fit[2] / 1e9:.3g} GB "
                f"({batch} x {tokens:,} tokens) per GPU exceed {usable:.0%} of "
                f"{own_value(own, 'C_hbm', gpu.hbm_capacity_bytes) / 1e9:.3g} GB{hint}")
    return layout


def deployment_values(model, gpu, layout, efficiency=None, own=None):
    """The values a layout fixes, no tier needed: the model's, the KV's copies across its TP
    group, and the GPU's peak in its compute dtype, prefill efficiency, HBM bandwidth and
    GPUs per node."""
    v = model_values(model, layout.kv_dtype, layout.weight_dtype, own)
    v["K"] = layout.tp
    v["K_e"] = layout.expert_gpus
    v["rho"] = replication(model, layout.tp, own)
    v["P"] = own_value(own, "P", dense_flops(gpu, layout.compute_dtype))
    v["eta"] = compute_efficiency(gpu, layout.compute_dtype, efficiency)
    v["B_hbm"] = own_value(own, "B_hbm", gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency)
    v["N_node"] = own_value(own, "N_node", gpu.gpus_per_node)
    return v


# ------------------------------------------------------------------ the path
def tier_path(tier, gpu, eng, copy_bytes=None):
    """The hops of a tier for a GPU, with their effective bandwidths under an engine profile.

    The GPU's host link runs at the bandwidth of copies of ``copy_bytes`` (the engine's
    layout; copies the engine's load kernel takes, below its kernel_below_bytes, at the link's
    asymptote) and keeps the link's measured duplex fraction while offload writes overlap;
    node-shared hops with a first-byte latency (drives) run at the bandwidth of the engine's
    storage reads with its queue depth, per drive. The ideal profile changes nothing.
    """
    hops = []
    for hop in tier.hops:
        host = hop.link == DATA.gpu_host_link
        name = hop.link
        if host:
            name = gpu.host_link
        elif hop.link == DATA.gpu_host_memory:
            name = gpu.host_memory_link
        link = DATA.links[name]
        one = link.bandwidth_Bps * link.efficiency
        if host and eng.copy_tokens is not None and copy_bytes is not None \
                and not load_kernel(eng, copy_bytes, gpu.platform):  # a kernel reading host
            # memory has no per-copy cost; a batched call's copies cost the driver's
            # per-descriptor time, where measured
            fast = eng.fast_copies and eng.copy_batched and link.batched_copy_s is not None
            t_copy = link.batched_copy_s if fast else link.latency_s
            one = float(formula("derive.bandwidth_at_size", {"s": copy_bytes, "B": one,
                                                             "t_0": t_copy}))
        if host and eng.writes_overlap:
            one = one * link.duplex_retained
        scope = hop.scope or link.scope
        if hop.requests is not None:  # a pool's read path: its own requests' size and cost
            one = float(formula("derive.bandwidth_at_size_qd", {
                "s": hop.requests[0], "q_io": hop.requests[2], "B": one, "t_0": hop.requests[1]}))
        elif (scope == "per-node" and eng.storage_io_bytes is not None
                and link.latency_s > 0 and hop.engine_io):
            one = float(formula("derive.bandwidth_at_size_qd", {
                "s": eng.storage_io_bytes, "q_io": eng.queue_depth, "B": one,
                "t_0": link.latency_s}))
        hops.append(PathHop(link=link.name, count=hop.count, scope=scope,
                            effective_Bps=one * hop.count * hop.share,
                            latency_s=link.latency_s + (hop.requests[1] if hop.requests is not None
                                                        else 0.0),
                            host_memory=hop.link == DATA.gpu_host_memory))
    return hops


def hop_copies(hop, rho, read_once, stored_once):
    """Copies of each unique byte a node-shared hop carries (rho_n): 1 when the engine reads
    replicated KV once (rank 0 reads and broadcasts); from a store holding one copy (a drive, a
    remote pool) 1 as well; host memory that every rank loads the shared slot from: rho."""
    if read_once or (stored_once and not hop.host_memory):
        return 1.0
    return rho


def path_values(tier, gpu, tp, rho=1.0, concurrent=None, engine=None, copy_bytes=None,
                read_once=None, stored_once=None, own=None, gpu_reloads=1.0):
    """[B per GPU in B/s, first-byte latency in s, hops] of a tier's path.

    read_once / stored_once: whether the engine reads replicated KV once across node hops and
    whether its store holds one copy (default: the engine's 'always' rows; :func:`reads_once`
    and :func:`stores_once` decide them per model). Each node-shared hop carries each
    replica's unique bytes (:func:`hop_copies` copies) for the ``concurrent`` replicas
    reloading at once (default: the node's GPUs / tp); the path's B is the narrowest of them, and
    never above the narrowest per-GPU hop shared by the ``gpu_reloads`` reloads one replica has
    in flight (1 but at a stated load).
    """
    eng = engine if engine is not None else DATA.engines[DEFAULT_ENGINE]
    hops = tier_path(tier, gpu, eng, copy_bytes)
    if read_once is None:
        read_once = eng.replicated_read_once == "always"
    if stored_once is None:
        stored_once = eng.stored_once == "always"
    b_gpu = min([h.effective_Bps for h in hops if h.scope == "per-gpu"], default=math.inf)
    n_node = own_value(own, "N_node", gpu.gpus_per_node)
    conc = concurrent if concurrent is not None else default_concurrency(gpu, tp, own)
    widths = [float(formula("derive.B_path", {
        "B_gpu": b_gpu, "B_node": h.effective_Bps, "K": tp, "n_c": conc, "rho": rho,
        "rho_n": hop_copies(h, rho, read_once, stored_once), "N_node": n_node,
        "n_g": gpu_reloads})) for h in hops if h.scope == "per-node"]
    if len(widths) == 0:
        widths = [float(formula("derive.B_path", {
            "B_gpu": b_gpu, "B_node": math.inf, "K": tp, "n_c": conc, "rho": rho, "rho_n": rho,
            "N_node": n_node, "n_g": gpu_reloads}))]
    return [min(widths), sum([h.latency_s for h in hops]), hops]


def state_path_rate(hops, n_node, tp, concurrent, gpu_reloads=1.0):
    """B_state, B/s: a hybrid model's recurrent state's per-GPU rate over a path's hops (split by
    head, never replicated: kvmath.derive.kv.B_path_state), the narrowest node hop's, or the
    GPU's own hop where the path has no node hop."""
    b_gpu = min([h.effective_Bps for h in hops if h.scope == "per-gpu"], default=math.inf)
    rates = [float(formula("derive.B_path_state", {
        "B_gpu": b_gpu, "B_node": h.effective_Bps, "K": tp, "n_c": concurrent, "N_node": n_node,
        "n_g": gpu_reloads})) for h in hops if h.scope == "per-node"]
    if len(rates) == 0:
        rates = [float(formula("derive.B_path_state", {
            "B_gpu": b_gpu, "B_node": math.inf, "K": tp, "n_c": concurrent, "N_node": n_node,
            "n_g": gpu_reloads}))]
    return min(rates)


def coded_values(codec, tier, kv_dtype, wire_Bps, pipelined=None, sharers=1.0):
    """{B, B_wire, r_c, B_dec, codec_pipelined}: the path's bandwidth in decoded bytes when the
    KV moves encoded by codec (decode after transfer, or overlapped when pipelined: the codec
    row's default), the GPU's decoder shared by the ``sharers`` reloads its replica has in
    flight (kvmath.derive.kv.B_dec_at_load)."""
    if len(tier.hops) == 0:
        raise ScenarioError(f"--codec {codec.name}: a prefix in HBM moves nothing to decode")
    if kv_dtype not in CODEC_KV_DTYPES:
        raise ScenarioError(f"--codec {codec.name} encodes 16-bit KV (its ratio is measured "
                            f"against FP16), not {kv_dtype}; drop --codec or --kv-dtype")
    at = {"B_wire": wire_Bps, "r_c": codec.compression_ratio,
          "B_dec": float(formula("derive.B_dec_at_load", {"B_dec": codec.decode_Bps,
                                                          "n_g": sharers}))}
    over = codec.pipelined if pipelined is None else pipelined
    at["codec_pipelined"] = 1.0 if over else 0.0
    at["B"] = float(formula("derive.B_coded_pipelined" if over else "derive.B_coded", at))
    return at


# ------------------------------------------------------------------ a scenario's values
def scenario_values(model, gpu, tier, tp=None, bandwidth_Bps=None, efficiency=None,
                    kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None,
                    ep=None, batch=1, tokens=1, check_fit=False, layout=None, new_tokens=1,
                    token_ids=False, codec=None, own=None, gpu_reloads=None):
    """[values, hops]: every substitution value except T (the layout, the engine row and the
    host-link copy's bytes under "layout", "engine", "copy_bytes"), and the path's hops.

    tp None: the sourced deployment or the smallest TP that fits ``tokens``. new_tokens: the
    new turn's own tokens (n); token_ids: the prompt arrives as token IDs (no tokenising).
    codec: a codec row the KV travels encoded in: B becomes the rate in decoded bytes
    (kvmath.derive.kv.B_coded), B_wire the path's own. gpu_reloads: reloads one replica has in
    flight on its own per-GPU hops (1; more at a stated load: :func:`concurrent_at_load`).
    """
    if tp is not None and tp < 1:
        raise ScenarioError(f"--tp must be a positive integer, got {tp}")
    check_tier_gpu(tier, gpu)
    eng = engine if engine is not None else DATA.engines[DEFAULT_ENGINE]
    if layout is None:
        layout = choose_layout(model, gpu, tokens, tp, ep, batch, compute_dtype, kv_dtype,
                               hbm_fit_fraction(eng), check_fit, own)
    check_kv_dtype(gpu, layout.kv_dtype)
    v = deployment_values(model, gpu, layout, efficiency, own)
    v["n_c"] = (float(concurrent_reloads) if concurrent_reloads is not None
                else default_concurrency(gpu, layout.tp, own))
    v["n_g"] = float(gpu_reloads) if gpu_reloads is not None else 1.0
    once = reads_once(eng, model)
    stored = stores_once(eng, model, layout.tp, v["N_node"], gpu.platform)
    v["rho_n"] = 1.0 if once else v["rho"]  # host memory's copies (hop_copies per hop)
    v["rho_s"] = 1.0 if stored or once else v["rho"]  # copies a stored cache holds
    copy = None
    if eng.copy_tokens is not None:
        spans = copies_span_layers(eng, v)
        # a copy of one layer in vLLM's per-layer layout carries K and V apart (an engine that
        # packs layers falls back to it for a hybrid); a latent is one tensor per layer
        split = (eng.kv_split or (eng.copy_spans_layers == "uniform" and not spans)) \
            and not latent(model)
        v["c_tok"] = eng.copy_tokens
        v["c_split"] = 2.0 if split else 1.0
        v["c_lay"] = float(v["L_full"] + v["L_win"] + v["L_chunk"]) if spans else 1.0
        copy = float(formula("derive.copy_bytes", v))
    path = path_values(tier, gpu, layout.tp, v["rho"], v["n_c"], eng, copy, once, stored, own,
                       v["n_g"])
    hops = path[2]
    v["B"] = path[0]
    v["t_lat"] = path[1]
    v["B_state"] = state_path_rate(hops, v["N_node"], layout.tp, v["n_c"], v["n_g"])
    v["hop_copies"] = [hop_copies(h, v["rho"], once, stored) if h.scope == "per-node" else None
                       for h in hops]
    v.update(request_cost_values(eng, tier, token_ids))
    v["n"] = float(new_tokens)
    v["n_step"] = eng.request_steps
    # an engine loading layer by layer under its step does so from host memory (its L2): a
    # drive's or a NIC's read is prefetched into host memory first, so it hides nothing
    host_only = len(tier.hops) > 0 and all([
        h.link == DATA.gpu_host_link or h.link == DATA.gpu_host_memory for h in tier.hops])
    v["o_lay"] = 1.0 if eng.layer_overlap and host_only else 0.0
    v["t_step"] = float(formula("derive.t_step_ideal", v))  # compare re-times it with its prefill
    v["t_0"] = float(formula("derive.fixed_cost", v))
    if bandwidth_Bps is not None:
        v["B"] = bandwidth_Bps
        v["B_state"] = bandwidth_Bps
    if codec is not None:
        v.update(coded_values(codec, tier, layout.kv_dtype, v["B"], None, v["n_g"]))
    v["copy_bytes"] = copy
    v["layout"] = layout
    v["engine"] = eng
    return [v, hops]


def plain_values(v):
    """A scenario's values without its layout, engine and copy size (numbers and lists only)."""
    return {k: v[k] for k in v if k != "layout" and k != "engine" and k != "copy_bytes"}


def load_shares(values, hops, tokens, resume_rate, gpu_rate=None):
    """{saturated, utilisation, hop, hold_s, loads}: the busiest hop at the load and
    loads = [reloads sharing the node's busiest shared hop, reloads sharing one replica's own per-GPU
    hops] as one arrives, when resume_rate reloads per second arrive at the node (spread over its
    replicas): concurrent_reloads_at_load on the node hop whose one-reload time is longest (1
    when the path has none), gpu_reloads_at_load on the replica's narrowest per-GPU hop (1 when
    none). gpu_rate: the reloads per second that cross the replicas' own links, where they
    differ from those through the node's hops (the tier plan: a tier's offload writes load its
    node hops, and every tier's reads the GPUs' links; None: resume_rate). A codec's decoding
    is the GPU's own work: it joins the per-GPU hops (the coded rate of the narrowest link and
    the decoder). The queue is processor sharing (an assumption: in-flight reloads share each
    hop evenly, M/G/1-PS, the time of 1 / (1 - u) equal sharers). saturated: a hop's
    utilisation is at or above 1 (no loads then)."""
    if not (resume_rate > 0 and math.isfinite(resume_rate)):
        raise ScenarioError(f"--resume-rate must be a positive number, got {resume_rate}")
    at = {**values, "T": float(tokens), "r": float(resume_rate)}
    worst = 0.0
    name = None
    hold = 0.0
    busiest = None
    for i, h in enumerate(hops):
        c = values["hop_copies"][i]
        if c is None:
            continue
        # a codec's hop carries 1/r_c of the bytes: its rate in decoded bytes is r_c times
        hop_at = {**at, "rho_n": c, "B_node": h.effective_Bps * values.get("r_c", 1.0)}
        u = float(formula("derive.hop_utilisation", hop_at))
        if u > worst:
            worst = u
            name = h.link
            hold = float(formula("derive.t_node_hop_alone", hop_at))
            busiest = hop_at
    gpu_hops = [h for h in hops if h.scope == "per-gpu"]
    narrow = min(gpu_hops, key=lambda h: h.effective_Bps, default=None)
    gpu_at = None
    if narrow is not None:
        rate = resume_rate if gpu_rate is None else gpu_rate
        b_gpu = narrow.effective_Bps
        if "B_dec" in values:  # the wire's encoded bytes, then the GPU decoding them
            b_gpu = float(formula("derive.B_coded_pipelined" if values["codec_pipelined"]
                                  else "derive.B_coded",
                                  {"B_wire": b_gpu, "r_c": values["r_c"],
                                   "B_dec": values["B_dec"]}))
        gpu_at = {**at, "r": float(rate), "B_gpu": b_gpu}
        u = float(formula("derive.gpu_hop_utilisation", gpu_at))
        if u > worst:
            worst = u
            name = narrow.link + (" and the GPU's decoder" if "B_dec" in values else "") + \
                " (each replica's own)"
            hold = float(formula("derive.t_gpu_hop_alone", gpu_at))
    if worst >= 1:
        return {"saturated": True, "utilisation": worst, "hop": name, "hold_s": hold}
    node = 1.0 if busiest is None else float(formula("derive.concurrent_reloads_at_load", busiest))
    own_links = 1.0 if gpu_at is None else float(formula("derive.gpu_reloads_at_load", gpu_at))
    return {"saturated": False, "utilisation": worst, "hop": name, "hold_s": hold,
            "loads": [node, own_links]}


def concurrent_at_load(values, hops, tokens, resume_rate, gpu_rate=None):
    """[node, per-GPU] reloads in flight at the load (:func:`load_shares`); ScenarioError when
    the load saturates a hop, naming it, the time one reload holds it and the most that fit."""
    shares = load_shares(values, hops, tokens, resume_rate, gpu_rate)
    if shares["saturated"]:
        raise ScenarioError(f"--resume-rate {resume_rate:g}/s saturates {shares['hop']}: each "
                            f"reload holds it for {shares['hold_s']:.3g} s, so fewer than "
                            f"{round_up(resume_rate / shares['utilisation']):.4g} reloads per "
                            "second fit at the node")
    return shares["loads"]


# ------------------------------------------------------------------ the prefill model
def calibrated_values(model, gpu, tp=1, ep=None, dp_attention=False, compute_dtype="bf16",
                      batch=1, tp_attn=1, imbalance=DEFAULT_IMBALANCE, own=None):
    """Every substitution value of the calibrated prefill model (kvmath.derive.prefill) but T:
    the model's, the GPU's and its fit's, for ``tp`` GPUs of one replica (attention on all of
    them, or on ``tp_attn`` with data-parallel attention) and experts over ``ep`` ranks."""
    if int(batch) != batch or batch < 1:
        raise ScenarioError(f"batch must be a positive integer, got {batch}")
    # the KV heads must fit the GPUs attention runs on: with data-parallel attention tp_attn
    k_attn = tp_attn if dp_attention else tp
    layout = choose_layout(model, gpu, 1, k_attn, None, 1, compute_dtype, None, None, False, own)
    v = deployment_values(model, gpu, layout, None, own)
    fits = DATA.prefill_fit.get(gpu.name)
    if fits is None:
        raise ScenarioError(f"no prefill fit for GPU {gpu.name!r} in prefill_fit.csv")
    allreduce = DATA.allreduce.get(gpu.name)
    if allreduce is None:
        raise ScenarioError(f"no all-reduce figures for GPU {gpu.name!r} in allreduce.csv")
    v.update(fits)
    v["busbw"] = allreduce[0]
    v["t_ar"] = allreduce[1]
    # FP8: the fitted BF16 curve scaled by the measured FP8/BF16 matmul-ceiling ratio
    v["r_dt"] = v["eta"] / gpu.prefill_efficiency
    v["P_a"] = gpu.bf16_dense_flops  # attention kernels run on BF16 tensor cores (assumption)
    v["B_peak"] = gpu.hbm_bandwidth_Bps
    v["b_act"] = BYTES_ACT
    v["n_seq"] = batch
    if ep is not None and (ep < 1 or tp % ep):
        raise ScenarioError(f"ep {ep} must be a positive divisor of tp {tp}")
    if dp_attention:
        if tp_attn < 1 or tp % tp_attn:
            raise ScenarioError(f"tp_attn {tp_attn} must be a positive divisor of tp {tp}")
        v["K_d"] = tp_attn
        ep = tp if ep is None else ep
    else:
        v["K_d"] = tp
        ep = 1 if ep is None else ep
    v["ep"] = ep
    v["K_x"] = tp // ep if ep > 1 else tp
    if not is_moe(model):  # MoE terms vanish with L_moe = 0; avoid 0/0
        v["E"] = 1
        v["k_top"] = 1
    if imbalance < 1:
        raise ScenarioError(f"imbalance must be >= 1, got {imbalance}")
    v["f_imb"] = imbalance if ep > 1 else 1.0
    return v


def prefill_parts(model, cv, tokens):
    """The calibrated prefill's parts at ``tokens`` (s), by name, and their sum as total_s."""
    at = {**cv, "T": tokens}
    out = {p: formula("derive_prefill.parts." + model.attention + "." + p, at) for p in PARTS}
    total = 0.0
    for p in PARTS:
        total = total + out[p]
    out["total_s"] = total
    return out


def recompute_fn(model, gpu, layout, values, prefill="calibrated", batch=1, own=None):
    """[name of the prefill model used, f(T) -> recompute seconds], of ``batch`` equal prompts
    in one forward pass.

    ``ideal``: the flat roofline of :mod:`kvmath.derive.kv`; ``calibrated``: the operator model
    of :mod:`kvmath.derive.prefill`, fitted to measured operator times. A GPU with no
    calibration falls back to ideal, and the name says so.
    """
    if prefill not in PREFILL_MODELS:
        raise ScenarioError(f"--prefill must be one of {', '.join(PREFILL_MODELS)}, "
                            f"got {prefill!r}")
    key = "derive.t_recompute"
    base = values
    if batch != 1:  # the flat roofline of a batch: the compute adds up, the weights read once
        key = "derive.t_recompute_batch"
        base = {**values, "n_seq": float(batch)}

    def ideal(t):
        return formula(key, {**base, "T": t})
    if prefill == "ideal":
        return ["ideal", ideal]
    if gpu.name not in DATA.prefill_fit or gpu.name not in DATA.allreduce:
        return ["ideal (no calibration for this GPU)", ideal]
    if layout.dp_attention:
        cv = calibrated_values(model, gpu, layout.gpus, layout.gpus, True, layout.compute_dtype,
                               batch, layout.tp, DEFAULT_IMBALANCE, own)
    else:  # experts expert-parallel over ep ranks, or sharded by TP (ep 1)
        cv = calibrated_values(model, gpu, layout.gpus, layout.ep if layout.ep > 1 else None,
                               False, layout.compute_dtype, batch, 1, DEFAULT_IMBALANCE, own)

    def calibrated(t):
        return prefill_parts(model, cv, t)["total_s"]
    return ["calibrated", calibrated]


def suffix_values(values, rec, tokens):
    """The prefill model's times for the prefix, the prefix with the new tokens and the new
    tokens alone at prefix length ``tokens`` (a number, or a numpy array in Python)."""
    n = values["n"]
    return {"T": tokens, "t_rec_p": rec(tokens), "t_rec_pn": rec(tokens + n), "t_rec_n": rec(n)}


def time_step(values, rec, tokens):
    """Time the engine step of ``values`` (in place) at prefix length ``tokens`` with the
    recompute's prefill model ``rec``: the reloaded request's own forward pass of its n new
    tokens over the loaded prefix (t_suffix) costs what that model says they cost, so a reload
    can never beat the prefill it would run anyway. Returns the values at ``tokens``."""
    at = {**values, **suffix_values(values, rec, tokens)}
    values["t_step"] = formula("derive.t_suffix", at)
    values["t_0"] = formula("derive.fixed_cost", values)
    at["t_step"] = values["t_step"]
    at["t_0"] = values["t_0"]
    return at


# ------------------------------------------------------------------ crossings
def numeric_crossings(advantage, t_max, t_min=MIN_PREFIX_TOKENS, points=CROSSING_POINTS,
                      iterations=CROSSING_ITERATIONS):
    """Roots of a smooth advantage(T) (s) in [t_min, t_max], by sign changes on a log grid
    refined by geometric bisection (advantage is evaluated over lists of lengths: vmap)."""
    ratio = t_max / t_min
    grid = [t_min * ratio ** (i / (points - 1)) for i in range(points)]
    grid[0] = t_min
    grid[points - 1] = t_max
    vals = vmap(advantage, grid)
    lo = []
    hi = []
    f_lo = []
    for i in range(points - 1):
        if sign(vals[i]) * sign(vals[i + 1]) < 0:
            lo.append(grid[i])
            hi.append(grid[i + 1])
            f_lo.append(vals[i])
    if len(lo) == 0:
        return []
    for _ in range(iterations):
        mid = [math.sqrt(a * b) for a, b in zip(lo, hi)]
        f_mid = vmap(advantage, mid)
        for j in range(len(lo)):
            if sign(f_mid[j]) == sign(f_lo[j]):
                lo[j] = mid[j]
                f_lo[j] = f_mid[j]
            else:
                hi[j] = mid[j]
    return [math.sqrt(a * b) for a, b in zip(lo, hi)]


def ttft_crossings(model, gpu, layout, values, rec, t_max):
    """The prefix lengths where the TTFT with the prefix loaded equals the TTFT cold (a list,
    tokens), each length timing its own engine step; remembered by its inputs (they depend on
    the scenario's values, not on its prompt length)."""
    def advantage(t):
        at = time_step(dict(values), rec, t)
        return formula("derive.ttft_hit", at) - formula("derive.ttft_cold", at)

    def solve():
        return numeric_crossings(advantage, t_max)
    return memo([model, gpu, layout, t_max, values], solve)


# ------------------------------------------------------------------ the comparison
def state_keys(model, v, at, layout):
    """A hybrid model's recurrent state in compare's answer (names contain state); {} for a
    model without one."""
    if not model.recurrent_layers:
        return {}
    state = float(formula("derive.state_bytes", at))
    total = float(formula("derive.kv_bytes_total", at))
    return {"state_bytes": state, "state_bytes_per_gpu": state / layout.tp,
            "state_share_of_reload_bytes": state / total,
            "state_load_s": state / layout.tp / v["B"],
            "state_dtype": model.state_dtype or model.weight_dtype,
            "state_layers": model.recurrent_layers,
            "state_checkpoint_tokens": float(formula("derive.state_checkpoint_tokens", at))}


def codec_keys(codec, tier, v, at):
    """compare's keys for a KV codec: what the KV is encoded in and what decoding costs, and
    whether the tier is one an engine codes (LMCache codes its remote backends only: a remote
    DRAM pool or a shared pool; elsewhere the codec is a what-if)."""
    at = {**at, "B_dec": v["B_dec"], "r_c": v["r_c"], "n_g": 1.0}
    return {"codec": codec.name, "codec_compression_ratio": v["r_c"],
            "codec_decode_Bps": v["B_dec"], "codec_pipelined": codec.pipelined,
            "codec_decode_s": float(formula("derive.t_decode", at)),
            "kv_bytes_moved_per_gpu": float(formula("derive.gpu_hop_bytes", at)),
            "reload_wire_bandwidth_Bps": v["B_wire"],
            "codec_what_if": not (tier.name == "rdma" or tier.name.startswith("pool:"))}


def finite(result, what):
    """The result, or ScenarioError naming the first number in it that is not finite."""
    for key in result:
        x = result[key]
        if is_float(x) and not math.isfinite(x) and key not in MAY_BE_INF:
            raise ScenarioError(f"{what}: {key} is not a finite number; an input is out of "
                                "range (check the magnitudes in the model and GPU rows)")
    return result


def load_values(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
                kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
                batch=1, new_tokens=1, token_ids=False, resume_rate=None, codec=None, own=None,
                gpu_resume_rate=None):
    """[[values, hops] at the stated load, [values, hops] of one reload alone or None]: the
    scenario as compare evaluates it, its layout holding the prefix and the new turn. At a
    resume rate the reloads in flight on the shared hops follow from the load
    (:func:`concurrent_at_load`, from the reload alone); else as given, or every replica."""
    alone = None
    gpu_reloads = None
    fit_tokens = tokens + new_tokens - 1
    if resume_rate is not None:
        alone = scenario_values(model, gpu, tier, tp, bandwidth_Bps, efficiency, kv_dtype,
                                compute_dtype, engine, 1.0, ep, batch, fit_tokens, True, None,
                                new_tokens, token_ids, codec, own)
        loads = concurrent_at_load(alone[0], alone[1], tokens, resume_rate, gpu_resume_rate)
        concurrent_reloads = loads[0]
        gpu_reloads = loads[1]
    sv = scenario_values(model, gpu, tier, tp, bandwidth_Bps, efficiency, kv_dtype, compute_dtype,
                         engine, concurrent_reloads, ep, batch, fit_tokens, True, None,
                         new_tokens, token_ids, codec, own, gpu_reloads)
    return [sv, alone]


def compare_at(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
               kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
               batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
               token_ids=False, resume_rate=None, codec=None, own=None, gpu_resume_rate=None):
    """Reload against recompute for one scenario at exactly ``tokens`` reloaded (a hybrid
    model's state there, wherever its checkpoints lie); a dict of plain numbers.

    The verdict compares times to first token: ttft_cold_s (the request's costs and the prefill
    of all tokens + new_tokens) against ttft_hit_s (the request's costs, the tokens loaded from
    the tier, then the new tokens' forward pass). recompute_s and reload_s are the parts that
    differ: the prefix's prefill and its reload (the load, the connector's per-token cost and the
    engine step over the new tokens).

    resume_rate: reloads per second arriving at the node (each resume reloads from the tier):
    the reloads in flight on its shared hops follow from it (:func:`concurrent_at_load`), and
    reload_queue_s is the time sharing adds to one reload. Without it (and without
    concurrent_reloads) every replica of the node reloads at once, the worst case.

    codec: a codec row (codecs.csv) the KV moves encoded in: each hop carries 1/ratio of the
    bytes and the GPU decodes them (kvmath.derive.kv.B_coded)."""
    if not tokens >= MIN_PREFIX_TOKENS:
        raise ScenarioError(f"--tokens must be at least {MIN_PREFIX_TOKENS:g}, got {tokens}: a "
                            "one-token prefix leaves nothing to reload beyond the request's own "
                            "forward pass")
    if tokens > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} exceeds {model.name}'s context window of "
                            f"{model.max_context_tokens:,} tokens{rope_hint(model)} "
                            f"{BEYOND_CONTEXT_HINT}")
    if not (new_tokens >= 1 and math.isfinite(new_tokens)):
        raise ScenarioError(f"--new-tokens must be at least 1, got {new_tokens}: the new turn "
                            "computes at least the token it samples from")
    # the prefix and the new turn share the window; the default single new token is the last
    # prefix position's own (its logits give the first token), so a full-window prefix fits
    if tokens + new_tokens - 1 > model.max_context_tokens and not allow_beyond_context:
        raise ScenarioError(f"--tokens {tokens:,} with --new-tokens {new_tokens:,} exceeds "
                            f"{model.name}'s context window of {model.max_context_tokens:,} "
                            f"tokens{rope_hint(model)} {BEYOND_CONTEXT_HINT}")
    if codec is not None and model.recurrent_layers:
        raise ScenarioError(f"--codec {codec.name} codes attention KV (its ratio and decode rate "
                            f"are measured on it); {model.name}'s recurrent state has no "
                            "measured coding: drop --codec for a hybrid model")
    if bandwidth_Bps is not None and resume_rate is not None:
        raise ScenarioError("--bandwidth replaces the whole path with one rate, and --resume-rate "
                            "shares the path's hops: give one or the other")
    if resume_rate is not None and concurrent_reloads is not None:
        raise ScenarioError("give --resume-rate or --concurrent-reloads, not both (the load "
                            "sets the reloads in flight; --concurrent-reloads overrides it)")
    given = concurrent_reloads
    loaded = load_values(model, gpu, tier, tokens, tp, bandwidth_Bps, efficiency, kv_dtype,
                         compute_dtype, engine, concurrent_reloads, ep, batch, new_tokens,
                         token_ids, resume_rate, codec, own, gpu_resume_rate)
    sv = loaded[0]
    alone = loaded[1]
    layout = sv[0]["layout"]
    eng = sv[0]["engine"]
    copy = sv[0]["copy_bytes"]
    v = plain_values(sv[0])
    hops = sv[1]
    replicas = default_concurrency(gpu, layout.tp, own)
    if given is not None and given > replicas:
        raise ScenarioError(
            f"--concurrent-reloads {given:g} exceeds the {replicas:g} replica(s) of TP "
            f"{layout.tp} that a node of {v['N_node']} {gpu.name} GPUs holds (each "
            "replica reloads one cache at a time here; give at most that many, or --resume-rate)")
    if efficiency is not None:
        prefill = "ideal"  # a flat efficiency is the flat model
    rec_fn = recompute_fn(model, gpu, layout, v, prefill, 1, own)
    rec = rec_fn[1]
    at = time_step(v, rec, float(tokens))
    recompute = float(at["t_rec_p"])
    reload = float(formula("derive.t_reload", at))
    ttft_cold = float(formula("derive.ttft_cold", at))
    ttft_hit = float(formula("derive.ttft_hit", at))
    # reload wins while its load beats the prefill it saves: rec(T + n) against the step and load
    saved = float(at["t_rec_pn"])
    min_bw = math.inf
    if saved > v["t_0"] + v["c_hit"] * tokens:
        min_bw = float(formula("derive.breakeven_bandwidth_at", {**at, "t_rec": saved}))
    if codec is not None and math.isfinite(min_bw):  # the path rate that gives it, once
        # decoded; none at or above the decode rate
        if min_bw >= v["B_dec"]:
            min_bw = math.inf
        else:
            min_bw = float(formula("derive.codec_wire_for_pipelined" if codec.pipelined
                                   else "derive.codec_wire_for", {**v, "B": min_bw}))
    cross = ttft_crossings(model, gpu, layout, v, rec,
                           max(float(model.max_context_tokens), float(tokens)))
    queue = 0.0
    if alone is not None:  # what sharing the node's hops adds to one reload
        v1 = plain_values(alone[0])
        queue = reload - float(formula("derive.t_reload", time_step(v1, rec, float(tokens))))
    fit = hbm_slack(model, gpu, layout, tokens, batch, hbm_fit_fraction(eng), own)
    inflight = float(formula("derive.hbm_inflight_bytes", at))
    if v["n_g"] > 1 and inflight > fit[0]:  # each reload in flight lands in HBM held for it
        one = float(formula("derive.kv_bytes_per_gpu", at))
        raise ScenarioError(f"--resume-rate {resume_rate:g}/s: {v['n_g']:.3g} reloads in flight "
                            f"on each replica would hold {(inflight + one) / 1e9:.3g} GB of KV "
                            f"per GPU, more than the {(max(fit[0], 0.0) + one) / 1e9:.3g} GB its "
                            "HBM holds beside the weights: the load overflows HBM")
    coded = {**at, "r_c": v.get("r_c", 1.0)}  # a codec's hops carry 1/ratio of the bytes
    path = []
    for i, h in enumerate(hops):
        c = v["hop_copies"][i]
        carried = float(formula("derive.gpu_hop_bytes", coded))
        if c is not None:
            carried = float(formula("derive.node_hop_bytes", {**coded, "rho_n": c}))
        path.append({"link": h.link, "count": h.count, "scope": h.scope,
                     "effective_Bps": h.effective_Bps, "latency_s": h.latency_s,
                     "bytes": carried, "time_s": carried / h.effective_Bps})
    load_from = "every replica at once"
    if resume_rate is not None:
        load_from = "resume rate"
    elif concurrent_reloads is not None:
        load_from = "given"
    result = {
        "model": model.name, "gpu": gpu.name, "tier": tier.name, "tokens": tokens,
        "context_window_tokens": model.max_context_tokens, "tp": layout.tp, "ep": layout.ep, "dp_attention": layout.dp_attention,
        "gpus": layout.gpus, "layout_from": layout.reason,
        "weight_dtype": layout.weight_dtype, "compute_dtype": layout.compute_dtype,
        "kv_dtype": layout.kv_dtype, "engine": eng.name, "prefill_model": rec_fn[0],
        "batch": batch, "concurrent_reloads": v["n_c"], "gpu_reloads": v["n_g"],
        "gpus_per_node": v["N_node"],
        "resume_rate_per_s": resume_rate, "reload_queue_s": queue, "load_from": load_from,
        "kv_bytes_per_token": float(formula("derive.kv_bytes_per_token", v)),
        "kv_bytes": float(formula("derive.kv_bytes_total", at)),
        "kv_bytes_unique": float(formula("derive.kv_bytes_unique", at)),
        "kv_bytes_per_gpu": float(formula("derive.kv_bytes_per_gpu", at)),
        "kv_replication": v["rho"], "node_hop_copies": float(formula("derive.node_copies", at)),
        **state_keys(model, v, at, layout),
        # a stored cache holds rho_s copies of the KV and one state (never replicated)
        "kv_bytes_stored": float(formula("derive.kv_bytes_stored",
                                         {**at, "rho_s": v["rho_s"], "r_c": v.get("r_c", 1.0)})),
        "kv_stored_copies": v["rho_s"],
        "weights_bytes_per_gpu": fit[1],
        "hbm_fit_bytes_per_gpu": hbm_fit_fraction(eng) * own_value(own, "C_hbm",
                                                                  gpu.hbm_capacity_bytes),
        "hbm_free_bytes_per_gpu": fit[0],
        "prefill_flops": float(formula("derive.flops_prefill", at)),
        "prefill_efficiency": v["eta"],
        "compute_s": float(formula("derive.t_compute", at)),
        "weights_read_s": float(formula("derive.t_weights", at)),
        "recompute_s": recompute, "reload_s": reload,
        "new_tokens": new_tokens, "token_ids": bool(token_ids),
        "ttft_recompute_s": ttft_cold, "ttft_reload_s": ttft_hit,
        "request_s": float(formula("derive.t_request", at)), "request_fixed_s": v["t_req"],
        "hash_token_s": v["c_hash"], "tokenize_token_s": v["c_tokz"], "hit_token_s": v["c_hit"],
        "hit_cost_s": v["c_hit"] * tokens,
        "engine_costs_calibrated": engine_costs_calibrated(eng),
        "reload_bandwidth_Bps": v["B"] if math.isfinite(v["B"]) else None,
        "reload_latency_s": v["t_lat"],
        "reload_step_s": v["t_step"], "reload_fixed_s": v["t_0"],
        "overlap_hidden_s": float(formula("derive.t_overlap_hidden", at)),
        "copy_bytes": copy,
        **(codec_keys(codec, tier, v, at) if codec is not None else {}),
        # the engine's copy kernel loads these copies (no per-copy cost: an assumption)
        "load_kernel": len(tier.hops) > 0 and load_kernel(eng, copy, gpu.platform),
        "path": path,
        "winner": "reload" if ttft_hit < ttft_cold else "recompute",
        "speedup": max(ttft_hit, ttft_cold) / min(ttft_hit, ttft_cold),
        "breakeven_tokens": cross,
        "min_reload_bandwidth_Bps": min_bw,
        "model_flops_per_kv_byte": float(formula("derive.model_flops_per_kv_byte", v)),
        "model_flops_per_kv_byte_at_tokens": float(formula("derive.model_flops_per_kv_byte_at_T",
                                                           at)),
        "gpu_flops_per_link_byte": (float(formula("derive.gpu_flops_per_link_byte", v))
                                    if math.isfinite(v["B"]) else 0.0),
    }
    return finite(result, f"{model.name} on {gpu.name}")


def compare(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None,
            kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None, ep=None,
            batch=1, allow_beyond_context=False, prefill="calibrated", new_tokens=1,
            token_ids=False, resume_rate=None, codec=None, own=None, gpu_resume_rate=None):
    """Reload against recompute for one scenario; a dict of plain numbers (units in keys)
    (:func:`compare_at`).

    A hybrid model's state is kept only every state_checkpoint_tokens (vLLM's block grid), so a
    prefix of T tokens reloads the KV and the state of its last checkpoint, at
    state_checkpoint_at_tokens, and computes the tail beyond it with the new turn's tokens
    (state_tail_tokens); below the first checkpoint nothing can be reloaded."""
    r = compare_at(model, gpu, tier, tokens, tp, bandwidth_Bps, efficiency, kv_dtype,
                   compute_dtype, engine, concurrent_reloads, ep, batch, allow_beyond_context,
                   prefill, new_tokens, token_ids, resume_rate, codec, own, gpu_resume_rate)
    if not model.recurrent_layers:
        return r
    c = r["state_checkpoint_tokens"]
    at = math.floor(tokens / c) * c
    if at < MIN_PREFIX_TOKENS:
        raise ScenarioError(f"{model.name} keeps its recurrent state only every {c:,.0f} tokens "
                            f"(vLLM's block grid at TP {r['tp']}): a prefix of {tokens:,} tokens "
                            "has no checkpoint to reload, so it is recomputed")
    if at < tokens:  # the tail past the checkpoint is computed with the new turn
        first = r
        r = compare_at(model, gpu, tier, at, first["tp"], bandwidth_Bps, efficiency, kv_dtype,
                       compute_dtype, engine, concurrent_reloads,
                       first["ep"] if first["ep"] > 1 else None, batch, allow_beyond_context,
                       prefill, new_tokens + tokens - at, token_ids, resume_rate, codec, own,
                       gpu_resume_rate)
        r["tokens"] = tokens
        r["new_tokens"] = new_tokens
        r["layout_from"] = first["layout_from"]
    r["state_checkpoint_at_tokens"] = at
    r["state_tail_tokens"] = tokens - at
    # no reload below the first checkpoint: a crossing the continuous model puts there is at it
    r["breakeven_tokens"] = sorted(set([max(x, c) for x in r["breakeven_tokens"]]))
    return r


# ------------------------------------------------------------------ bands
def binding_hop(v, hops, limits):
    """The hop that sets the path's bandwidth: the narrowest per-GPU hop when it binds, else
    the narrowest node-shared hop."""
    gpu_hops = [h for h in hops if h.scope == "per-gpu"]
    node_hops = [h for h in hops if h.scope == "per-node"]
    narrow_gpu = min(gpu_hops, key=lambda h: h.effective_Bps, default=None)
    wire = v.get("B_wire", v["B"])  # the path's own rate, before a codec's decoding
    if narrow_gpu is not None and math.isclose(wire, narrow_gpu.effective_Bps,
                                               rel_tol=limits["binding_rel_tol"]):
        return narrow_gpu
    return min(node_hops if len(node_hops) > 0 else gpu_hops, key=lambda h: h.effective_Bps)


def reload_bandwidth_range(v, hops, limits):
    """[low, high] effective per-GPU reload bandwidth, B/s: the binding hop's measured spread,
    the high end clamped so that the hop's efficiency never exceeds 1."""
    link = DATA.links[binding_hop(v, hops, limits).link]
    spread = limits["bandwidth_range"][link.name]
    hi = min(spread[1], 1.0 / link.efficiency)  # efficiency x factor <= 1: at most the spec rate
    wire = v.get("B_wire", v["B"])
    return [wire * spread[0], wire * hi]


def reload_floor(r, step_s):
    """The fastest a compare() result's reload can be with an engine step of step_s, s: the
    path's latency, the step and each hop's bytes at the link's datasheet or spec rate (the
    slowest hop binds)."""
    slowest = max([h["bytes"] / (DATA.links[h["link"]].bandwidth_Bps * h["count"])
                   for h in r["path"]] + [0.0])
    return r["reload_latency_s"] + step_s + slowest


def known_limits(model, gpu_name, r, limits, own=None):
    """The validation rows outside their tolerance whose model architecture (its shapes,
    whatever its name), GPU, tensor-parallel degree and expert layout are those of compare()
    result r (limits["known_limits"]: id, quantity, measured/predicted ratio). A reader's own
    model values are another architecture: none."""
    if own is not None and any([k in own for k in limits["model_symbols"]]):
        return []
    ep = r["ep"] if r["ep"] > 1 else None
    arch = shape_key(model)
    return [k for k in limits["known_limits"]
            if k["shape"] == arch and k["gpu"] == gpu_name and k["gpus"] == r["gpus"]
            and k["ep"] == ep and k["dp_attention"] == bool(r["dp_attention"])]


def variant_loads(model, gpu, tier, tokens, layout, bandwidth_Bps, eng, codec, own, resume_rate,
                  gpu_resume_rate, fallback):
    """[node, per-GPU] reloads in flight at the stated load for one of the band's engine
    variants, each holding the hops for its own time (:func:`concurrent_at_load`); ``fallback``
    (the nominal's) without a load, or where this variant's own hold saturates a hop (the band
    then takes the nominal's sharing: its slow end is a floor, not a bound)."""
    if resume_rate is None:
        return fallback
    alone = scenario_values(model, gpu, tier, None, bandwidth_Bps, None, None, None, eng, 1.0,
                            None, 1, 1, False, layout, 1, False, codec, own, None)
    shares = load_shares(alone[0], alone[1], tokens, resume_rate, gpu_resume_rate)
    return fallback if shares["saturated"] else shares["loads"]


def variant_bandwidth(model, gpu, tier, tokens, layout, bandwidth_Bps, eng, codec, own,
                      resume_rate, gpu_resume_rate, fallback):
    """The per-GPU reload bandwidth (B/s) of one of the band's engine variants, at its own
    sharing of the stated load (:func:`variant_loads`)."""
    loads = variant_loads(model, gpu, tier, tokens, layout, bandwidth_Bps, eng, codec, own,
                          resume_rate, gpu_resume_rate, fallback)
    return scenario_values(model, gpu, tier, None, bandwidth_Bps, None, None, None, eng,
                           loads[0], None, 1, 1, False, layout, 1, False, codec, own,
                           loads[1])[0]["B"]


def band(model, gpu, tier, tokens, tp=None, bandwidth_Bps=None, efficiency=None, kv_dtype=None,
         compute_dtype=None, engine=None, concurrent_reloads=None, ep=None, batch=1,
         allow_beyond_context=False, prefill="calibrated", new_tokens=1, token_ids=False,
         resume_rate=None, codec=None, own=None, limits=None, gpu_resume_rate=None):
    """Nominal comparison plus its range: recompute and reload times at the ends of their bands,
    whether the verdict flips inside them. ``limits``: the measured factors (by link, GPU and
    engine) and the known limits, kvmath.evaluate.bands.band_data.

    * Recompute, calibrated model: its held-out error either way, never faster than the ideal
      roofline; ideal model: down to the lowest measured/predicted speed of dense prefill rows.
    * Reload: the binding hop's measured spread, never above its spec rate; the fast end with
      nothing else offloading and a batched call's copies; the slow end the driver copies a copy
      kernel replaced; an engine with fitted request costs widens it by their held-out error.
    * A borrowed prefill fit and a configuration validation rows show the model missing carry
      their misses; the reload's own step moves with the recompute's band; no end beats physics.
    """
    nominal = compare(model, gpu, tier, tokens, tp, bandwidth_Bps, efficiency, kv_dtype,
                      compute_dtype, engine, concurrent_reloads, ep, batch, allow_beyond_context,
                      prefill, new_tokens, token_ids, resume_rate, codec, own, gpu_resume_rate)
    layout = Layout(tp=nominal["tp"], ep=nominal["ep"], dp_attention=nominal["dp_attention"],
                    weight_dtype=nominal["weight_dtype"], compute_dtype=nominal["compute_dtype"],
                    kv_dtype=nominal["kv_dtype"], reason=nominal["layout_from"])
    conc = nominal["concurrent_reloads"]  # at the load
    gpu_reloads = nominal["gpu_reloads"]
    sv = scenario_values(model, gpu, tier, None, bandwidth_Bps, None, None, None, engine, conc,
                         None, 1, 1, False, layout, 1, False, codec, own, gpu_reloads)
    v = sv[0]
    hops = sv[1]
    eng = v["engine"]
    at = plain_values(v)
    # the tokens reloaded: a hybrid model's last state checkpoint (compare's tail aside)
    at["T"] = float(nominal.get("state_checkpoint_at_tokens", tokens))
    at["t_0"] = nominal["reload_fixed_s"]  # its step timed by the nominal prefill model
    fastest = nominal["reload_s"]  # the reload the engine-cost widening is taken around
    b_lo = None
    b_hi = None
    if len(hops) > 0:
        spread = reload_bandwidth_range(v, hops, limits)
        b_lo = spread[0]
        b_hi = spread[1]
        if codec is not None:  # in decoded bytes: decode after the slow end's transfer, and
            # overlapped with the fast end's (chunk by chunk, as a pipelined engine does)
            b_lo = coded_values(codec, tier, nominal["kv_dtype"], b_lo, False, gpu_reloads)["B"]
            b_hi = coded_values(codec, tier, nominal["kv_dtype"], b_hi, True, gpu_reloads)["B"]
        if eng.writes_overlap or eng.copy_batched:  # the fast end: nothing else offloading
            # meanwhile (the host link without the duplex share other requests' writes leave),
            # and a batched call's copies at the driver's per-descriptor cost
            quiet = with_fields(eng, {"writes_overlap": False, "fast_copies": True})
            alone = variant_bandwidth(model, gpu, tier, tokens, layout, bandwidth_Bps, quiet,
                                      codec, own, resume_rate, gpu_resume_rate,
                                      [conc, gpu_reloads])
            b_hi = max(b_hi, alone)
            fastest = min(fastest, float(formula("derive.t_reload", {**at, "B": alone})))
        if load_kernel(eng, v["copy_bytes"], gpu.platform):  # the slow end: the driver
            # copies the kernel replaced
            driver = with_fields(eng, {"driver_copies": True})
            b_lo = min(b_lo, variant_bandwidth(model, gpu, tier, tokens, layout, bandwidth_Bps,
                                               driver, codec, own, resume_rate,
                                               gpu_resume_rate, [conc, gpu_reloads]))
        reload = [float(formula("derive.t_reload", {**at, "B": b_hi})),
                  float(formula("derive.t_reload", {**at, "B": b_lo}))]
    else:  # a prefix still in HBM moves nothing: its reload is the engine step alone
        reload = [nominal["reload_s"], nominal["reload_s"]]
    own_fit = gpu.name not in limits["borrowed_fit_gpus"]
    if nominal["prefill_model"] == "calibrated":
        e = limits["calibrated_error"].get(gpu.name, limits["calibrated_error_default"])
        ideal = float(formula("derive.t_recompute", at))
        # never faster than the ideal roofline, except where the calibrated model is already
        # below it (an MoE prompt too short to touch every expert the roofline reads)
        floor = min(ideal, nominal["recompute_s"])
        lo = 1 - e
        hi = 1 + e
        if not own_fit:  # a borrowed fit: as wrong as it was on the GPUs it was held against
            f = limits["borrowed_fit_factor"]
            lo = min(lo, 1 / f)
            hi = max(hi, f)
        recompute = [max(nominal["recompute_s"] * lo, floor), nominal["recompute_s"] * hi]
    else:
        recompute = [nominal["recompute_s"], nominal["recompute_s"] / limits["efficiency_low"]]
    # a configuration the model is known to miss carries that miss: the failing row's
    # measured/predicted widens its side's band
    missed = known_limits(model, gpu.name, nominal, limits, own)
    # a batch-1 decode row is a one-token forward: it speaks for a one-token turn's step only
    step_ratios = [k["ratio"] for k in missed if k["quantity"] == "decode_step_s"
                   and nominal["new_tokens"] == 1]
    for k in missed:  # ratio: measured / predicted
        if k["quantity"] == "decode_step_s":  # the reload's own step, below
            continue
        if k["quantity"] == "ttft_reload_s":
            reload = [min(reload[0], nominal["reload_s"] * k["ratio"]),
                      max(reload[1], nominal["reload_s"] * k["ratio"])]
        else:
            recompute = [min(recompute[0], nominal["recompute_s"] * k["ratio"]),
                         max(recompute[1], nominal["recompute_s"] * k["ratio"])]
    f = limits["engine_cost_factor"].get(nominal["engine"], 1.0)  # the fitted request costs'
    # held-out error
    reload = [min(reload[0], fastest / f), max(reload[1], nominal["reload_s"] * f)]
    # the reload's own step is a forward pass priced by the same prefill model: it moves with
    # the recompute's band
    step = nominal["reload_fixed_s"] - nominal["reload_latency_s"]
    step_lo = step * recompute[0] / nominal["recompute_s"]
    step_hi = step * recompute[1] / nominal["recompute_s"]
    # a one-token forward the model is known to miss (a failing batch-1 decode row) carries it
    step_lo = min([step_lo] + [step * x for x in step_ratios])
    step_hi = max([step_hi] + [step * x for x in step_ratios])
    reload = [reload[0] - (step - step_lo), reload[1] + (step_hi - step)]
    # no widening beats physics: the latency, the step at its band's low end and every hop at
    # its spec rate
    reload[0] = max(reload[0], min(reload_floor(nominal, step_lo), nominal["reload_s"]))
    # the verdict compares times to first token: each band shifted by what the TTFT adds to
    # its part (the request's costs; the recompute of the new tokens on the cold side)
    cold_add = nominal["ttft_recompute_s"] - nominal["recompute_s"]
    hit_add = nominal["ttft_reload_s"] - nominal["reload_s"]
    ttft_recompute = [x + cold_add for x in recompute]
    # what a layer-by-layer load hides under the step, at each end's own load and step (the
    # nominal's hidden part is in hit_add): min(load, step)(1 - 1/L)
    hidden = nominal["overlap_hidden_s"]
    ends = [hidden, hidden]
    if len(hops) > 0 and v["o_lay"]:
        kv = nominal["kv_bytes_per_gpu"]
        layers = v["L_full"] + v["L_win"] + v["L_chunk"]
        ends = [v["o_lay"] * min(kv / b_hi, step_lo) * (1 - 1 / layers),
                v["o_lay"] * min(kv / b_lo, step_hi) * (1 - 1 / layers)]
    ttft_reload = [reload[0] + hit_add + hidden - ends[0], reload[1] + hit_add + hidden - ends[1]]
    winners = [nominal["winner"]]
    for rc in ttft_recompute:
        for rl in ttft_reload:
            w = "reload" if rl < rc else "recompute"
            if w not in winners:
                winners.append(w)
    return {"nominal": nominal, "recompute_s": recompute, "reload_s": reload,
            "ttft_recompute_s": ttft_recompute, "ttft_reload_s": ttft_reload,
            "reload_bandwidth_Bps": [b_lo, b_hi], "flips": len(winners) > 1,
            "binding_hop": binding_hop(v, hops, limits).link if len(hops) > 0 else None,
            "prefill_fit_own": own_fit, "known_limits": [k["id"] for k in missed]}


# ------------------------------------------------------------------ options as a dict
# The calculator's form gives compare's options as one dict, by their Python names (the
# command line's --tp is "tp", --bandwidth "bandwidth_Bps" in B/s, ...); these pass them on.
def band_of(model, gpu, tier, tokens, opts, own, limits):
    """:func:`band` for options given as a dict."""
    model = served_model(model, opts.get("rope_scaling"))
    return band(model, gpu, tier, tokens, opts.get("tp"), opts.get("bandwidth_Bps"),
                opts.get("efficiency"), opts.get("kv_dtype"), opts.get("compute_dtype"),
                opts.get("engine"), opts.get("concurrent_reloads"), opts.get("ep"),
                opts.get("batch", 1), opts.get("allow_beyond_context", False),
                opts.get("prefill", "calibrated"), opts.get("new_tokens", 1),
                opts.get("token_ids", False), opts.get("resume_rate"), opts.get("codec"), own,
                limits)


def values_of(model, gpu, tier, tokens, opts, own):
    """[values, hops] of the scenario at its load (:func:`load_values`) for options as a dict."""
    model = served_model(model, opts.get("rope_scaling"))
    return load_values(model, gpu, tier, tokens, opts.get("tp"), opts.get("bandwidth_Bps"),
                       opts.get("efficiency"), opts.get("kv_dtype"), opts.get("compute_dtype"),
                       opts.get("engine"), opts.get("concurrent_reloads"), opts.get("ep"),
                       opts.get("batch", 1), opts.get("new_tokens", 1),
                       opts.get("token_ids", False), opts.get("resume_rate"),
                       opts.get("codec"), own)[0]


def curve_of(model, gpu, tier, tokens, opts, own, lengths):
    """[length, TTFT cold, TTFT with the prefix loaded] at each of ``lengths`` (s): the
    scenario as compare evaluates it at ``tokens``, each length timing its own engine step."""
    sv = values_of(model, gpu, tier, tokens, opts, own)
    v = plain_values(sv[0])
    prefill = "ideal" if opts.get("efficiency") is not None else opts.get("prefill", "calibrated")
    rec = recompute_fn(model, gpu, sv[0]["layout"], v, prefill, 1, own)[1]
    out = []
    for t in lengths:
        at = time_step(dict(v), rec, t)
        out.append([t, formula("derive.ttft_cold", at), formula("derive.ttft_hit", at)])
    return out


def longest_prompt(model, gpu, layout, usable, batch, allow_beyond_context, own=None):
    """{tokens, why} of the longest prompt a layout serves: the model's context window (unless
    allowed beyond it) or, where shorter, the length whose KV no longer fits HBM beside the
    weights (the largest T with HBM left, bisected in log space to 0.1 %); None when neither
    binds."""
    lo = MIN_PREFIX_TOKENS
    hi = 1e12
    hbm = None
    if hbm_slack(model, gpu, layout, hi, batch, usable, own)[0] < 0:
        for _ in range(200):
            if hi / lo <= 1 + 1e-3:
                break
            mid = math.sqrt(lo * hi)
            if hbm_slack(model, gpu, layout, mid, batch, usable, own)[0] >= 0:
                lo = mid
            else:
                hi = mid
        hbm = lo
    ctx = None if allow_beyond_context else model.max_context_tokens
    if hbm is not None and (ctx is None or hbm < ctx):
        return {"tokens": hbm, "why": "HBM full"}
    if ctx is None:
        return None
    return {"tokens": ctx, "why": "context window"}


def limit_of(model, gpu, tier, tokens, opts, own):
    """:func:`longest_prompt` of the scenario's own layout and engine, options as a dict."""
    model = served_model(model, opts.get("rope_scaling"))
    v = values_of(model, gpu, tier, tokens, opts, own)[0]
    return longest_prompt(model, gpu, v["layout"], hbm_fit_fraction(v["engine"]),
                          opts.get("batch", 1), opts.get("allow_beyond_context", False), own)


# ------------------------------------------------------------------ reuse: is an offload worth it
#: the TTLs searched for the best TTL and the break-even: this many, log-spaced from TTL_MIN_S to
#: TTL_MAX_S (10 ms to about three years), then refined between the best one's neighbours
TTL_MIN_S = 1e-2
TTL_MAX_S = 1e8
TTL_POINTS = 4001
#: the TTL at which "keep until return" (an infinite TTL) is evaluated: every pause is over, s
KEEP_HORIZON_S = 1e12
#: each pause distribution's expressions (kvmath.derive.reuse), by kind
REUSE_KEYS = {
    "exp": {"value": "derive_reuse.value_exp", "F": "derive_reuse.F_exp",
            "p_breakeven": "derive_reuse.p_breakeven_exp", "dvalue": "derive_reuse.dvalue_exp",
            "tau_opt": "derive_reuse.tau_opt_exp[0]"},
    "logn": {"value": "derive_reuse.value_logn", "F": "derive_reuse.F_logn",
             "p_breakeven": "derive_reuse.p_breakeven_logn",
             "dvalue": "derive_reuse.dvalue_logn"},
}


#: the per-item price options and the prices.csv row each replaces
PRICE_OPTIONS = {"dram_price": "ddr5_usd_per_GB", "nvme_price": "nvme_usd_per_GB"}


def pause_kind(pause):
    """A pauses.csv row's kind of distribution: exp or logn."""
    return "exp" if pause.distribution == "exponential" else "logn"


def pause_values(pause, reach=1.0):
    """Substitution values of a pause distribution (exp: lambda; lognormal: mu, sigma), p, and
    h_route: the probability a returning conversation reaches the node holding its cache (1 on
    one node)."""
    if pause.distribution == "exponential":
        return {"lambda": math.log(2) / pause.median_s, "p": pause.return_probability,
                "h_route": reach}
    return {"mu": math.log(pause.median_s), "sigma": pause.sigma,
            "p": pause.return_probability, "h_route": reach}


def tier_prices(tier_name, price, lifetime_drive_writes=None):
    """[c_cap in $ per byte-second, c_wear in $ per byte written] of a tier, from ``price``
    (prices.csv's values by name, or a user's in their place): capacity at its purchase price
    amortised over price['amortisation_months']; NVMe wear spreads a drive byte's price over
    the drive's rated lifetime writes (DWPD x warranty days) when the drive is known, else
    over prices.csv's assumed lifetime writes. A tier other than NVMe is priced as DDR5."""
    months = price["amortisation_months"]
    if tier_name.startswith("nvme"):
        lifetime = (lifetime_drive_writes if lifetime_drive_writes
                    else price["nvme_drive_writes_lifetime"])
        at = {"p_GB": price["nvme_usd_per_GB"], "m_amort": months, "W_life": lifetime}
        return [float(formula("derive_reuse.capacity_price", at)),
                float(formula("derive_reuse.wear_price", at))]
    return [float(formula("derive_reuse.capacity_price",
                          {"p_GB": price["ddr5_usd_per_GB"], "m_amort": months})), 0.0]


def gpu_hour_price(gpu_name, usd_per_gpu_hour=None):
    """$ per GPU-hour: the given price, else the GPU's listed one (gpu_prices.csv)."""
    if usd_per_gpu_hour is not None:
        return usd_per_gpu_hour
    if gpu_name not in DATA.gpu_prices:
        raise ScenarioError(f"no GPU-hour price for {gpu_name} in gpu_prices.csv; pass "
                            "--gpu-price (USD per GPU-hour)")
    return DATA.gpu_prices[gpu_name]


def ttl_grid():
    """The TTLs searched, s (log-spaced)."""
    lo = math.log(TTL_MIN_S)
    step = (math.log(TTL_MAX_S) - lo) / (TTL_POINTS - 1)
    return [math.exp(lo + i * step) for i in range(TTL_POINTS)]


def breakeven_p(kind, v):
    """The least return probability at which some TTL makes offloading pay (infinity: none).

    The value is linear in p, so at each TTL one p sets it to zero (``p_breakeven_<kind>``);
    the break-even is that p minimised over the TTL (above 1: no p pays), found on the TTL grid
    and refined by golden section on log TTL. Where the expression is not defined (at the
    shortest TTLs holding and writing cancel to 0 or below in floating point; at the longest it
    overflows) no p pays there."""
    key = REUSE_KEYS[kind]["p_breakeven"]

    def usable(p):
        return p if math.isfinite(p) and p >= 0 else math.inf

    def at(log_tau):
        return usable(float(formula_quiet(key, {**v, "tau": math.exp(log_tau)})))
    taus = ttl_grid()
    ps = [usable(p) for p in vmap(lambda t: formula_quiet(key, {**v, "tau": t}), taus)]
    i = 0
    for j in range(len(ps)):
        if ps[j] < ps[i]:
            i = j
    lo = math.log(taus[max(i - 1, 0)])
    hi = math.log(taus[min(i + 1, len(taus) - 1)])
    g = (math.sqrt(5) - 1) / 2
    a = hi - g * (hi - lo)
    b = lo + g * (hi - lo)
    fa = at(a)
    fb = at(b)
    for _ in range(60):  # golden section: the bracket shrinks by 0.618 a step
        if fa <= fb:
            hi = b
            b = a
            fb = fa
            a = hi - g * (hi - lo)
            fa = at(a)
        else:
            lo = a
            a = b
            fa = fb
            b = lo + g * (hi - lo)
            fb = at(b)
    return min(fa, fb, ps[i])


def best_ttl(kind, v):
    """The TTL (s) maximising the expected net value of an offload: for an exponential pause
    the stationary point in closed form (``tau_opt_exp``; keep for ever or not at all when
    every conversation returns, or holding is free, by the value's slope); for a lognormal
    one, the best of the TTL grid refined by bisection on the first-order condition."""
    keys = REUSE_KEYS[kind]
    if kind == "exp":
        if v["p"] < 1 and v["c_cap"] > 0:
            t = float(formula_quiet(keys["tau_opt"], v))
            if math.isfinite(t):
                return t if t > 0 else 0.0
        return math.inf if float(formula(keys["dvalue"], {**v, "tau": 1.0})) > 0 else 0.0
    taus = ttl_grid()
    vals = vmap(lambda t: formula(keys["value"], {**v, "tau": t}), taus)
    i = 0
    for j in range(len(vals)):
        if vals[j] > vals[i]:
            i = j
    if vals[i] <= 0 and i == 0:
        return 0.0
    lo = taus[max(i - 1, 0)]
    hi = taus[min(i + 1, len(taus) - 1)]
    for _ in range(100):  # bisection on the first-order condition
        mid = math.sqrt(lo * hi)
        if float(formula(keys["dvalue"], {**v, "tau": mid})) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def saved_s(r, reload_s=None):
    """Seconds one reuse saves on each GPU: the difference of the times to first token of a
    comparison (the request's own costs, paid either way, cancel), with the reload of another
    tier of the same scenario (reload_s) if given."""
    if reload_s is None:
        reload_s = r["reload_s"]
    return r["ttft_recompute_s"] - r["request_s"] - reload_s


def new_fraction(turn_new_tokens, tokens):
    """f_new: the share of a cache of ``tokens`` a returning turn adds (1: the whole cache)."""
    return 1.0 if turn_new_tokens is None else min(1.0, turn_new_tokens / tokens)


def reuse_of(r, pause, price, usd_per_gpu_hour=None, reach=1.0, price_tier=None,
             lifetime_drive_writes=None, turn_new_tokens=None, c_cap=None):
    """Whether offloading one conversation pays, from its comparison ``r`` (``compare``'s
    answer): the GPU-seconds a reuse saves against holding the cache for the best TTL and
    writing it, at ``price`` (prices.csv's values by name) and the GPU-hour's price, with the
    return probability the pause row states times ``reach`` (the share of returns that reach
    the cache's node). price_tier: the tier whose price holds the capacity (a pool: its
    medium's); c_cap: a holding price of your own, $ per byte-second (opportunity cost)."""
    saving = r["gpus"] * saved_s(r)
    prices = tier_prices(price_tier or r["tier"], price, lifetime_drive_writes)
    c_gpu = gpu_hour_price(r["gpu"], usd_per_gpu_hour) / 3600
    turn_new = DATA.turn_new_tokens if turn_new_tokens is None else turn_new_tokens
    v = {**pause_values(pause, reach), "S_gpu": max(saving, 1e-300), "c_gpu": c_gpu,
         "c_cap": prices[0] if c_cap is None else c_cap, "c_wear": prices[1],
         "Q": r["kv_bytes_stored"], "f_new": new_fraction(turn_new, r["tokens"])}
    out = {"pause": pause.name, "kv_bytes": r["kv_bytes_stored"], "saving_gpu_s": saving,
           "saving_usd": saving * c_gpu, "gpu_usd_per_hour": c_gpu * 3600,
           "capacity_usd_per_byte_s": v["c_cap"], "write_usd_per_byte": v["c_wear"],
           "return_probability": pause.return_probability, "new_fraction": v["f_new"]}
    if saving <= 0:
        out.update({"ttl_s": 0.0, "p_breakeven": None, "offload_can_pay": False,
                    "value_usd": 0.0, "hit_probability": 0.0,
                    "verdict": "do not offload: reload is not faster than recompute"})
        return out
    kind = pause_kind(pause)
    keys = REUSE_KEYS[kind]
    tau = best_ttl(kind, v)
    at = {**v, "tau": tau if math.isfinite(tau) else KEEP_HORIZON_S}
    value = float(formula(keys["value"], at)) if tau > 0 else 0.0  # TTL 0: nothing held
    pays = tau > 0 and value > 0
    # no TTL pays: the best choice is not to write the cache at all (TTL 0, value 0)
    p_star = breakeven_p(kind, v)
    out.update({"ttl_s": tau if pays else 0.0,
                "hit_probability": reach * float(formula(keys["F"], at)) if pays else 0.0,
                "value_usd": value if pays else 0.0,
                "p_breakeven": p_star if p_star <= 1 else None,
                "offload_can_pay": p_star <= 1,  # False: not even p = 1 repays holding, writing
                "verdict": "offload" if pays else ("do not offload" if p_star <= 1 else
                           "do not offload: holding and writing the cache cost more than the "
                           "saving even if every conversation returns")})
    return out


def reuse_answer_of(model, gpu, tier, tokens, opts, own, pause, pool_medium=None,
                    lifetime_drive_writes=None):
    """``reuse``'s answer for options as a dict (the calculator's): the comparison reuse makes
    (its own options only: TP, compute dtype, engine, codec, RoPE scaling; no load), then
    :func:`reuse_of` at prices.csv's values with the per-item price options
    (:data:`PRICE_OPTIONS`) in place of theirs, the GPU-hour price (gpu_price), the reach and
    the tokens a returning turn adds (turn_new_tokens). pool_medium: the tier is a pool whose
    capacity is priced as this tier's (host-dram or nvme), which every node reads (reach 1);
    lifetime_drive_writes: the node's drive's, for its NVMe's wear."""
    served = served_model(model, opts.get("rope_scaling"))
    r = compare(served, gpu, tier, tokens, opts.get("tp"), None, None, None,
                opts.get("compute_dtype"), opts.get("engine"), codec=opts.get("codec"), own=own)
    price = dict(DATA.prices)
    for option, row in PRICE_OPTIONS.items():
        if opts.get(option) is not None:
            price[row] = opts.get(option)
    reach = opts.get("reach")
    if pool_medium is not None or reach is None:  # a pool: every node reads it
        reach = 1.0
    return reuse_of(r, pause, price, opts.get("gpu_price"), reach, pool_medium,
                    lifetime_drive_writes, opts.get("turn_new_tokens"))
