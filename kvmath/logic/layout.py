"""The model and its layout: every value a model row fixes (its family's fields and derived
symbols, the KV element's bytes, parameter counts), whether a TP splits its heads, the KV's
copies across TP, how a scenario's model is laid out on its GPUs (a sourced deployment, the TP
given, or the smallest TP whose HBM holds the weights and the batch's KV), the values a layout
fixes, and the longest prompt a layout serves.

The layout default is stated once, in :func:`choose_layout`; :func:`layout_lengths` says at which
prompt lengths it changes, so an answer can say so.
"""
from __future__ import annotations

import math

from kvmath.logic.constants import DEFAULT_ENGINE, FAMILY_SYMBOL_DEFAULTS, MIN_PREFIX_TOKENS, \
    TP_CANDIDATES
from kvmath.logic.rules import (compute_efficiency, dense_flops, hbm_fit_fraction, is_moe,
                                kv_element_bytes, latent, own_value)
from kvmath.logic.runtime import DATA, Layout, ScenarioError, field, formula, with_fields


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


def hbm_slack(s, layout, tokens, usable):
    """[HBM left per GPU, weights per GPU, the batch's KV per GPU], B, of a layout holding
    ``s.batch`` sequences of ``tokens`` tokens within the usable fraction."""
    model = s.model
    v = model_values(model, layout.kv_dtype, layout.weight_dtype, s.own)
    v.update({"K": layout.tp, "K_e": layout.expert_gpus,
              "rho": replication(model, layout.tp, s.own), "n_seq": s.batch, "u_hbm": usable,
              "C_hbm": own_value(s.own, "C_hbm", s.gpu.hbm_capacity_bytes), "T": float(tokens)})
    return [float(formula("derive.hbm_slack", v)), float(formula("derive.weights_per_gpu", v)),
            s.batch * float(formula("derive.kv_bytes_per_gpu", v))]


def running_batch_fits(s, layout, tokens, usable):
    """Whether each replica of ``layout`` also holds its share of the node's running batch
    beside its weights: ``s.batch_seqs`` sequences (plan_defaults.csv's batch_seqs when the
    scenario states none; 0: no running batch) of ``s.batch_context`` tokens (default the
    prompt's), spread over the node's GPUs / TP replicas."""
    running = s.batch_seqs if s.batch_seqs is not None else DATA.running_batch_seqs
    if not running > 0:
        return True
    n_node = own_value(s.own, "N_node", s.gpu.gpus_per_node)
    share = with_fields(s, {"batch": running * layout.tp / n_node})
    context = s.batch_context if s.batch_context is not None else tokens
    return hbm_slack(share, layout, context, usable)[0] >= 0


def usable_fraction(s):
    """The share of HBM a scenario's engine lets weights and KV fill (:func:`hbm_fit_fraction`
    of its engine, the default one's when it names none)."""
    return hbm_fit_fraction(s.engine if s.engine is not None else DATA.engines[DEFAULT_ENGINE])


def choose_layout(s, tokens=1, usable=None, check_fit=True):
    """How the scenario's model is served, the layout default every command takes, stated once:
    a sourced deployment for (model, gpu) when no TP is given, else the given TP, else the
    smallest TP whose HBM holds, within the usable fraction (default: the scenario engine's
    :func:`usable_fraction`), the weights plus the KV of ``s.batch`` prompts of ``tokens``
    tokens and each replica's share of the node's running batch (:func:`running_batch_fits`);
    where no TP holds the running batch too, the smallest that holds the prompts (the node's
    plan then says its batch does not fit). A deployment also sets the dtypes under a given TP
    (a TP changes the degree, not the precision it is served in). ScenarioError when the given
    TP cannot hold them (naming a TP that would)."""
    model = s.model
    gpu = s.gpu
    own = s.own
    ep = s.ep
    tp = s.tp
    compute_dtype = s.compute_dtype
    if usable is None:
        usable = usable_fraction(s)
    if tp is not None and (int(tp) != tp or tp < 1):
        raise ScenarioError(f"--tp must be a positive integer, got {tp}")
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
                        kv_dtype=s.kv_dtype or dep.kv_dtype, reason=f"deployment: {dep.source}")
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
        kv = s.kv_dtype or (served.kv_dtype if served is not None else model.kv_dtype)

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
            alone = None  # the smallest that holds the prompts but not the running batch
            for k in TP_CANDIDATES:
                if heads_fit(model, k, own) and \
                        hbm_slack(s, make(k, ""), tokens, usable)[0] >= 0:
                    if running_batch_fits(s, make(k, ""), tokens, usable):
                        layout = make(k, "smallest TP that holds the weights, the prompt's KV "
                                         "and its share of the node's running batch")
                        break
                    if alone is None:
                        alone = make(k, "smallest TP that holds the weights and the prompt's "
                                        "KV (no TP holds the node's running batch too)")
            if layout is None:
                layout = alone
            if layout is None:
                raise ScenarioError(f"{model.name} does not fit {TP_CANDIDATES[-1]} {gpu.name} "
                                    f"GPUs (the largest TP tried) with --batch {s.batch} x "
                                    f"--tokens {tokens:,} tokens of KV")
    if layout.ep > 1 and ((layout.tp % layout.ep) if layout.ep <= layout.tp
                          else (layout.ep % layout.tp)):
        raise ScenarioError(f"--ep {layout.ep} and --tp {layout.tp}: one must divide the other "
                            "(experts split tp / ep ways, or ep / tp attention groups)")
    if check_fit:
        fit = hbm_slack(s, layout, tokens, usable)
        if fit[0] < 0:
            fits = [k for k in TP_CANDIDATES if heads_fit(model, k, own) and hbm_slack(
                s, Layout(tp=k, ep=layout.ep if ep is not None else 1,
                          dp_attention=layout.dp_attention, weight_dtype=layout.weight_dtype,
                          compute_dtype=layout.compute_dtype, kv_dtype=layout.kv_dtype,
                          reason=""), tokens, usable)[0] >= 0]
            hint = f"; --tp {fits[0]} fits" if len(fits) > 0 else ""
            raise ScenarioError(
                f"--tp {layout.tp} cannot hold {model.name} on {gpu.name}: "
                f"{layout.weight_dtype} weights {fit[1] / 1e9:.3g} GB + KV {fit[2] / 1e9:.3g} GB "
                f"({s.batch} x {tokens:,} tokens) per GPU exceed {usable:.0%} of "
                f"{own_value(own, 'C_hbm', gpu.hbm_capacity_bytes) / 1e9:.3g} GB{hint}")
    return layout


def deployment_values(s, layout):
    """The values a layout fixes, no tier needed: the model's, the KV's copies across its TP
    group, and the GPU's peak in its compute dtype, prefill efficiency (the scenario's flat one
    where given), HBM bandwidth and GPUs per node."""
    gpu = s.gpu
    own = s.own
    v = model_values(s.model, layout.kv_dtype, layout.weight_dtype, own)
    v["K"] = layout.tp
    v["K_e"] = layout.expert_gpus
    v["rho"] = replication(s.model, layout.tp, own)
    v["P"] = own_value(own, "P", dense_flops(gpu, layout.compute_dtype))
    v["eta"] = compute_efficiency(gpu, layout.compute_dtype, s.efficiency)
    v["B_hbm"] = own_value(own, "B_hbm", gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency)
    v["N_node"] = own_value(own, "N_node", gpu.gpus_per_node)
    return v


def longest_prompt(s, layout, usable):
    """{tokens, why} of the longest prompt a layout serves: the model's context window (unless
    the scenario allows beyond it) or, where shorter, the length whose KV no longer fits HBM
    beside the weights (the largest T with HBM left, bisected in log space to 0.1 %); None when
    neither binds."""
    lo = MIN_PREFIX_TOKENS
    hi = 1e12
    hbm = None
    if hbm_slack(s, layout, hi, usable)[0] < 0:
        for _ in range(200):
            if hi / lo <= 1 + 1e-3:
                break
            mid = math.sqrt(lo * hi)
            if hbm_slack(s, layout, mid, usable)[0] >= 0:
                lo = mid
            else:
                hi = mid
        hbm = lo
    ctx = None if s.allow_beyond_context else s.model.max_context_tokens
    if hbm is not None and (ctx is None or hbm < ctx):
        return {"tokens": hbm, "why": "HBM full"}
    if ctx is None:
        return None
    return {"tokens": ctx, "why": "context window"}


def layout_lengths(s, tokens, usable=None):
    """Where the default layout moves with the prompt: [[up to tokens, TP], ...] of the
    smallest TPs that hold ``s.batch`` prompts, from the shortest prefix to ``tokens``, when no
    TP is given, no deployment is sourced and the TP changes on the way (else []).
    The TP each length gets is the first of :data:`TP_CANDIDATES` that holds it, so the list
    steps up: each entry's TP serves every length up to its tokens (the last up to ``tokens``).
    Bisected in log space to one token."""
    if s.tp is not None or DATA.deployments.get(s.model.name, {}).get(s.gpu.name) is not None:
        return []
    if usable is None:
        usable = usable_fraction(s)
    out = []
    lo = MIN_PREFIX_TOKENS
    tp = choose_layout(s, lo, usable, False).tp
    top = choose_layout(s, tokens, usable, False).tp
    while tp < top:
        a = lo
        b = float(tokens)
        while b - a > 1:  # the longest length that still fits tp
            mid = math.floor(math.sqrt(a * b))
            if mid <= a:
                mid = a + 1
            if choose_layout(s, mid, usable, False).tp <= tp:
                a = mid
            else:
                b = mid
        out.append([a, tp])
        lo = b
        tp = choose_layout(s, lo, usable, False).tp
    if len(out) == 0:  # one TP serves every length
        return []
    out.append([float(tokens), top])
    return out
