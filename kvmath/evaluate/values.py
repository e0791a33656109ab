"""Scenario values: what the generated code is given for one scenario.

The derivations' expressions, printed into :mod:`kvmath._generated.numeric`, are called through
:class:`Numeric` and :func:`fn`; this module turns the data tables into their inputs: a model's
architecture values, the layout it is served in (:func:`choose_layout`), the tier's path under an
engine profile (:func:`tier_path`, :func:`path_values`) and every substitution value of a
comparison (:func:`scenario_values`). :mod:`kvmath.evaluate.compare` (compare, crossings, sweeps) and
:mod:`kvmath.evaluate.prefill` build on it; it imports neither.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kvmath._generated import numeric as _numeric
from kvmath.errors import InputError
from kvmath.tables.rows import DTYPE_BYTES, GPU_HOST_LINK, GPU_HOST_MEMORY, Gpu, Model, Tier, bundled


class Numeric:
    """A numeric expression, called by keyword with one value or numpy array per symbol.

    ``Numeric.generated(key)``: the generated function of a catalogued expression
    (:mod:`kvmath.codegen.catalogue`); ``Numeric(expr)``: any other SymPy expression,
    lambdified on the spot (the book's ad-hoc expressions). ``f(T=..., B=...)``; missing
    keywords raise TypeError; ``f.take(values)`` picks its arguments from a larger dict.
    """

    def __init__(self, expr=None, name="", *, func=None, arg_names=None, key=None):
        self.name = name
        self._key = key
        if func is None:
            import sympy as sp
            self._expr = expr
            symbols = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
            func = sp.lambdify(symbols, expr, modules=[{"erf": _numeric._erf}, "numpy"])
            arg_names = tuple(s.name for s in symbols)
        self._f = func
        self.arg_names = tuple(arg_names)

    @classmethod
    def generated(cls, key, name=""):
        """The generated function for a key of :mod:`kvmath.codegen.catalogue`."""
        func, args = _numeric.FUNCS[key]
        return cls(name=name or key, func=func, arg_names=args, key=key)

    @property
    def expr(self):
        """The SymPy expression (imports the derivations)."""
        if self._key is not None:
            from kvmath.codegen.catalogue import expression
            return expression(self._key)
        return self._expr

    @property
    def symbols(self):
        return tuple(sorted(self.expr.free_symbols, key=lambda s: s.name))

    def __call__(self, **values):
        missing = [n for n in self.arg_names if n not in values]
        if missing:
            raise TypeError(f"{self.name or self.expr}: missing values for {', '.join(missing)}")
        return self.take(values)

    def take(self, values):
        """Call with the subset of a larger dict that this expression needs."""
        out = self._f(*[values[n] for n in self.arg_names])
        # scalars come back as plain Python numbers (numpy scalars print as np.float64(...))
        return out.item() if isinstance(out, np.generic) else out


@lru_cache(maxsize=None)
def numeric_of(module, name):
    """The numeric version of ``<module>.<name>`` (a list of them for a list of roots).

    module: a derivation module or its name (``"kvmath.derive.reuse"``); catalogued
    expressions come from the generated code without importing the module.
    """
    modname = module if isinstance(module, str) else module.__name__
    key = f"{_numeric.PREFIXES[modname]}.{name}"
    if key in _numeric.FUNCS:
        return Numeric.generated(key, name)
    if f"{key}[0]" in _numeric.FUNCS:
        out, i = [], 0
        while f"{key}[{i}]" in _numeric.FUNCS:
            out.append(Numeric.generated(f"{key}[{i}]", f"{name}[{i}]"))
            i += 1
        return out
    if isinstance(module, str):
        import importlib
        module = importlib.import_module(module)
    expr = getattr(module, name)
    if isinstance(expr, list):
        return [Numeric(e, f"{name}[{i}]") for i, e in enumerate(expr)]
    return Numeric(expr, name)


def fn(name):
    """The numeric version of ``kvmath.derive.kv.<name>``."""
    return numeric_of("kvmath.derive.kv", name)


@lru_cache(maxsize=None)
def _param_fns(attention):
    attn = "mla" if attention == "mla" else "gqa"
    return (Numeric.generated(f"derive.params_active_matmul({attn})", "N_lin"),
            Numeric.generated(f"derive.params_total({attn})", "N_tot"),
            fn(f"attn_params_{attn}"))


class ScenarioError(ValueError, InputError):
    """A scenario that cannot be evaluated (e.g. TP degree that does not fit the KV heads)."""


#: the engine profile a comparison uses unless told otherwise (kvmath/data/engines.csv)
DEFAULT_ENGINE = "vllm-lbhnc"
#: tensor-parallel degrees tried when none is given (powers of two, up to eight 8-GPU nodes)
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


def architecture_values(model: Model, kv_dtype: str | None = None, weight_dtype: str | None = None):
    """Substitution values (by symbol name) for everything a model fixes."""
    mla = model.attention == "mla"
    v = dict(
        d=model.hidden_size, n_q=model.num_attention_heads,
        L_full=model.layers - model.window_layers - model.recurrent_layers,
        L_win=model.window_layers, L_rec=model.recurrent_layers,
        n_rk=model.recurrent_key_heads or 0, n_rv=model.recurrent_value_heads or 0,
        d_rk=model.recurrent_key_head_dim or 0, d_rv=model.recurrent_value_head_dim or 0,
        k_conv=model.recurrent_conv_kernel or 0,
        b_st=DTYPE_BYTES[model.state_dtype or model.weight_dtype],
        W=model.window or 1,  # irrelevant when L_win = 0
        n_kv=model.num_key_value_heads or 1, d_h=model.head_dim or 1,
        r_kv=model.kv_lora_rank or 1, d_rope=model.qk_rope_head_dim or 1,
        d_nope=model.qk_nope_head_dim or 1, r_q=model.q_lora_rank or 0,
        I_ffn=model.intermediate_size or 0, I_exp=model.moe_intermediate_size or 0,
        E=model.num_experts or 0, k_top=model.experts_per_token or 0,
        E_sh=model.shared_experts or 0, L_dense=model.dense_layers,
        L_moe=model.layers - model.dense_layers, V=model.vocab_size,
        tied=int(model.tie_word_embeddings),
        b_kv=DTYPE_BYTES[kv_dtype or model.kv_dtype],
        b_w=DTYPE_BYTES[weight_dtype or model.weight_dtype],
    )
    if mla:
        v["d_qk"] = model.qk_nope_head_dim + model.qk_rope_head_dim
        v["d_v"] = model.v_head_dim
        v["e_kv"] = fn("e_kv_mla").take(v)
    else:
        v["d_qk"] = v["d_v"] = model.head_dim
        v["e_kv"] = fn("e_kv_gqa").take(v)
    v["b_kv"] = kv_element_bytes(kv_dtype or model.kv_dtype, v["e_kv"] if mla else v["d_h"])
    n_lin, n_tot, _ = _param_fns(model.attention)
    try:
        v["N_lin"] = float(n_lin.take(v))
        v["N_tot"] = float(n_tot.take(v))
        v["N_xa"] = float(fn("params_routed_active").take(v))
        v["N_xs"] = float(fn("params_routed_stored").take(v))
    except OverflowError:
        raise ScenarioError(f"{model.name}: its parameter count overflows a float; check the "
                            "magnitudes of the model row's sizes") from None
    return v


def parameter_counts(model: Model):
    """(active matmul parameters, all parameters, attention parameters per layer)."""
    v = architecture_values(model)
    return v["N_lin"], v["N_tot"], float(_param_fns(model.attention)[2].take(v))


def heads_fit(model: Model, tp: int):
    """Whether tp GPUs can split the model's heads: the query heads evenly (vLLM and SGLang
    refuse a TP that does not divide them), and the KV heads one way or the other (one divides
    the other; an MLA latent always)."""
    if model.num_attention_heads % tp:
        return False
    # a hybrid model's recurrent heads split by TP too (vLLM divides their keys, values and
    # convolution channels by it)
    if model.recurrent_layers and (model.recurrent_key_heads % tp or model.recurrent_value_heads % tp):
        return False
    if model.attention == "mla":
        return True
    n_kv = model.num_key_value_heads
    return not (n_kv % tp and tp % n_kv)


def node_tp(model: Model, gpus: int):
    """The TP a node's plan uses by default: all of its gpus, or the largest TP below that the
    model's heads allow (Qwen2.5-7B's 28 heads take TP 4 on an 8-GPU node, not 8)."""
    return max(k for k in range(1, gpus + 1) if heads_fit(model, k))


def replication(model: Model, tp: int):
    """rho, the copies of the KV across tp GPUs; ScenarioError if tp does not fit the KV heads."""
    if model.num_attention_heads % tp:
        raise ScenarioError(f"--tp {tp} does not fit {model.name}'s {model.num_attention_heads} "
                            "attention heads: TP must divide them (vLLM and SGLang refuse it)")
    if model.attention == "mla":
        return float(fn("rho_mla")(K=tp))
    if not heads_fit(model, tp):
        raise ScenarioError(f"--tp {tp} does not fit {model.name}'s "
                            f"{model.num_key_value_heads} KV heads: one must divide the other")
    return float(fn("rho_gqa")(K=tp, n_kv=model.num_key_value_heads))


@dataclass(frozen=True)
class Layout:
    """How a model is laid out on GPUs: attention TP, expert spread, dtypes, and why."""
    tp: int  #: GPUs that split one request's attention and KV (K)
    ep: int  #: expert-parallel ranks: 1 = routed experts sharded by tensor parallelism over the
    #: tp GPUs (vLLM's and SGLang's default); N > 1 = experts spread over N ranks with all-to-all
    #: dispatch and combine (each split tp / N ways when N < tp)
    dp_attention: bool
    weight_dtype: str
    compute_dtype: str
    kv_dtype: str
    reason: str  #: where the layout comes from (a sourced deployment, the user, the smallest fit)

    @property
    def gpus(self):
        """GPUs one replica occupies."""
        return max(self.tp, self.ep)

    @property
    def expert_gpus(self):
        """GPUs the routed experts' weights are spread over (K_e): the replica's GPUs."""
        return self.gpus


@dataclass(frozen=True)
class PathHop:
    link: str
    count: int
    scope: str
    effective_Bps: float  #: bandwidth x efficiency x count, after the engine's copy and I/O sizes
    latency_s: float
    host_memory: bool = False  #: the node's host memory (every rank's copies are read from it)


def _engine(engine):
    from kvmath.tables.rows import engines
    if engine is None:
        return engines()[DEFAULT_ENGINE]
    if isinstance(engine, str):
        from kvmath.tables.rows import resolve_engine
        return resolve_engine(engine)
    return engine


def tier_path(tier: Tier, gpu: Gpu, engine=None, copy_bytes=None):
    """The hops of a tier for a GPU, with their effective bandwidths under an engine profile.

    The GPU's host link runs at the bandwidth of copies of ``copy_bytes`` (the engine's
    layout; copies the engine's load kernel takes, below its kernel_below_bytes, at the link's
    asymptote) and keeps the link's measured duplex fraction while offload writes overlap; node-shared
    hops with a first-byte latency (drives) run at the bandwidth of the engine's storage
    reads with its queue depth, per drive. The ideal profile changes nothing.
    """
    eng = _engine(engine)
    links = bundled().links
    hops = []
    for hop in tier.hops:
        host = hop.link == GPU_HOST_LINK
        link = links[{GPU_HOST_LINK: gpu.host_link, GPU_HOST_MEMORY: gpu.host_memory_link}.get(hop.link, hop.link)]
        one = link.bandwidth_Bps * link.efficiency
        if host and eng.copy_tokens is not None and copy_bytes is not None \
                and not eng.load_kernel(copy_bytes, gpu.platform):  # a kernel reading host
            # memory: no per-copy cost
            # a batched call's copies at the driver's per-descriptor cost, where measured
            fast = eng.fast_copies and eng.copy_batched and link.batched_copy_s is not None
            t_copy = link.batched_copy_s if fast else link.latency_s
            one = float(fn("bandwidth_at_size")(s=copy_bytes, B=one, t_0=t_copy))
        if host and eng.writes_overlap:
            one *= link.duplex_retained
        scope = hop.scope or link.scope
        if hop.requests is not None:  # a pool's read path: its own requests' size and cost
            size, t_req, in_flight = hop.requests
            one = float(fn("bandwidth_at_size_qd")(s=size, q_io=in_flight, B=one, t_0=t_req))
        elif (scope == "per-node" and eng.storage_io_bytes is not None
                and link.latency_s > 0 and hop.engine_io):
            one = float(fn("bandwidth_at_size_qd")(s=eng.storage_io_bytes, q_io=eng.queue_depth,
                                                   B=one, t_0=link.latency_s))
        hops.append(PathHop(link.name, hop.count, scope, one * hop.count * hop.share,
                            link.latency_s + (hop.requests[1] if hop.requests else 0.0),
                            hop.link == GPU_HOST_MEMORY))
    return hops


def hop_copies(hop, rho, read_once, stored_once):
    """Copies of each unique byte a node-shared hop carries (rho_n): 1 when the engine reads
    replicated KV once (rank 0 reads and broadcasts); from a store holding one copy (a drive, a
    remote pool) 1 as well; host memory that every rank loads the shared slot from: rho."""
    if read_once or (stored_once and not hop.host_memory):
        return 1.0
    return rho


def path_values(tier: Tier, gpu: Gpu, tp: int, rho=1.0, concurrent=None, engine=None,
                copy_bytes=None, read_once=None, stored_once=None):
    """(B per GPU in B/s, first-byte latency in s, hops) of a tier's path.

    read_once / stored_once: whether the engine reads replicated KV once across node hops and
    whether its store holds one copy (default: the engine's 'always' rows; :func:`reads_once`
    and :func:`stores_once` decide them per model). Each node-shared hop carries each
    replica's unique bytes (:func:`hop_copies` copies) for the ``concurrent`` replicas
    reloading at once (default: the node's GPUs / tp); the path's B is the narrowest of them.
    """
    eng = _engine(engine)
    hops = tier_path(tier, gpu, eng, copy_bytes)
    read_once = eng.replicated_read_once == "always" if read_once is None else read_once
    stored_once = eng.stored_once == "always" if stored_once is None else stored_once
    b_gpu = min((h.effective_Bps for h in hops if h.scope == "per-gpu"), default=math.inf)
    conc = concurrent if concurrent is not None else default_concurrency(gpu, tp)
    b_path = fn("B_path")
    copies = [hop_copies(h, rho, read_once, stored_once) if h.scope == "per-node" else None
              for h in hops]
    bandwidth = min([float(b_path(B_gpu=b_gpu, B_node=h.effective_Bps, K=tp, n_c=conc, rho=rho,
                                  rho_n=c, N_node=gpu.gpus_per_node))
                     for h, c in zip(hops, copies) if c is not None] or
                    [float(b_path(B_gpu=b_gpu, B_node=math.inf, K=tp, n_c=conc, rho=rho,
                                  rho_n=rho, N_node=gpu.gpus_per_node))])
    return bandwidth, sum(h.latency_s for h in hops), hops


def state_path_rate(hops, gpu, tp, concurrent):
    """B_state, B/s: a hybrid model's recurrent state's per-GPU rate over a path's hops (split by
    head, never replicated: kvmath.derive.kv.B_path_state), the narrowest node hop's, or the
    GPU's own hop where the path has no node hop."""
    b_gpu = min((h.effective_Bps for h in hops if h.scope == "per-gpu"), default=math.inf)
    f = fn("B_path_state")
    return min([float(f(B_gpu=b_gpu, B_node=h.effective_Bps, K=tp, n_c=concurrent,
                        N_node=gpu.gpus_per_node)) for h in hops if h.scope == "per-node"] or
               [float(f(B_gpu=b_gpu, B_node=math.inf, K=tp, n_c=concurrent,
                        N_node=gpu.gpus_per_node))])


def _per_model(rule, model):
    return rule == "always" or (rule == "mla" and model.attention == "mla")


def reads_once(eng, model):
    """Whether the engine reads a replicated KV head or MLA latent across node hops once (rank 0
    reads, then broadcasts) rather than once per rank: engines.csv says always, for MLA only
    (LMCache's save_only_first_rank defaults to use_mla), or never."""
    return _per_model(eng.replicated_read_once, model)


def stores_once(eng, model, tp=1, node_gpus=1, platform="cuda"):
    """Whether the engine's offloaded cache holds one copy of a replicated KV head or MLA latent
    per node (engines.csv stored_once: vLLM from v0.27.0 for MLA on one node, LMCache for MLA),
    rather than one per rank: it sets the bytes a cache occupies and writes, and what a drive
    behind host memory is read for."""
    if eng.stored_once in ("mla-single-node", "mla-single-node-cuda"):
        return (model.attention == "mla" and tp <= node_gpus
                and (eng.stored_once == "mla-single-node" or platform == "cuda"))
    return _per_model(eng.stored_once, model)


def copies_span_layers(eng, v):
    """Whether one copy carries every layer: engines.csv says always, never, or for uniform
    models only (no sliding-window hybrid: vLLM allocates cross-layer blocks only when every
    layer has the same KV layout)."""
    hybrid = v["L_win"] > 0 and v["L_full"] > 0
    return eng.copy_spans_layers == "always" or (eng.copy_spans_layers == "uniform" and not hybrid)


def default_concurrency(gpu: Gpu, tp: int):
    """Replicas reloading at once through one node's shared hops: every replica busy."""
    return float(fn("default_concurrent_reloads")(N_node=gpu.gpus_per_node, K=tp))

def _efficiency(gpu, compute_dtype, efficiency):
    if efficiency is not None:
        return efficiency
    if compute_dtype == "bf16":
        return gpu.prefill_efficiency
    eff = bundled().efficiencies.get((gpu.name, f"prefill-{compute_dtype}"))
    if eff is None:
        raise ScenarioError(f"no {compute_dtype} prefill efficiency for GPU {gpu.name}; "
                            "pass --efficiency")
    return eff.value


def hbm_fit_fraction(eng):
    """Share of each GPU's HBM that weights and KV may fill: the engine's utilised fraction less
    the activation reserve of plan_defaults.csv (activations, CUDA graphs, workspace), as the
    tier plan reserves it."""
    from kvmath.tables.rows import plan_defaults
    return eng.hbm_usable_fraction * (1 - plan_defaults()["activation_reserve_fraction"].value)


def _hbm_slack(model, gpu, layout, tokens, batch, usable):
    v = architecture_values(model, layout.kv_dtype, layout.weight_dtype)
    v.update(K=layout.tp, K_e=layout.expert_gpus, rho=replication(model, layout.tp), n_seq=batch,
             u_hbm=usable, C_hbm=gpu.hbm_capacity_bytes, T=float(tokens))
    weights = float(fn("weights_per_gpu").take(v))
    kv = batch * float(fn("kv_bytes_per_gpu").take(v))
    return float(fn("hbm_slack").take(v)), weights, kv


def choose_layout(model, gpu, tokens=1, tp=None, ep=None, batch=1, compute_dtype=None,
                  kv_dtype=None, usable=None, check_fit=True):
    """How the model is served: a sourced deployment for (model, gpu) when no TP is given,
    else the given TP, else the smallest TP whose HBM holds the weights plus the KV of
    ``batch`` sequences of ``tokens`` tokens within the usable fraction (default: the default
    engine's :func:`hbm_fit_fraction`). A deployment also sets the dtypes under a given TP
    (a TP changes the degree, not the precision it is served in). ScenarioError when
    the given TP cannot hold them (naming a TP that would)."""
    from kvmath.tables.rows import deployments
    usable = hbm_fit_fraction(_engine(None)) if usable is None else usable
    if ep is not None and (int(ep) != ep or ep < 1):
        raise ScenarioError(f"--ep must be a positive integer, got {ep}")
    if ep is not None and ep > 1 and not model.is_moe:
        raise ScenarioError(f"--ep {ep}: {model.name} has no routed experts to spread "
                            "(expert parallelism applies to MoE models only)")
    if ep is not None and model.is_moe and ep > model.num_experts:
        raise ScenarioError(f"--ep {ep}: {model.name} has {model.num_experts} routed experts, "
                            "so at most that many ranks hold one each")
    served = deployments().get((model.name, gpu.name))
    dep = served if tp is None else None
    weight_dtype = served.weight_dtype if served else model.weight_dtype
    if dep is not None:
        layout = Layout(dep.tp, ep or dep.ep, dep.dp_attention, dep.weight_dtype,
                        compute_dtype or dep.compute_dtype, kv_dtype or dep.kv_dtype,
                        f"deployment: {dep.source}")
    else:
        if compute_dtype is None:  # fp8 weights compute in fp8 where the GPU has fp8 tensor cores
            compute_dtype = served.compute_dtype if served else (
                "fp8" if weight_dtype == "fp8" and gpu.fp8_dense_flops is not None else "bf16")
        if compute_dtype in ("fp8", "nvfp4") and DTYPE_BYTES[weight_dtype] > DTYPE_BYTES[compute_dtype]:
            weight_dtype = compute_dtype  # fp8 compute reads fp8 weights, nvfp4 NVFP4 ones
        # experts spread wider than attention: each attention group serves its own requests
        # (data-parallel attention), as SGLang's --enable-dp-attention and vLLM's DP+EP do
        make = lambda k, why: Layout(k, ep or 1, bool(ep and ep > k), weight_dtype,  # noqa: E731
                                     compute_dtype, kv_dtype or (served or model).kv_dtype, why)
        if tp is not None:
            replication(model, tp)  # raises if tp does not fit the heads
            layout = make(tp, "given")
        else:
            layout = None
            for k in TP_CANDIDATES:
                if heads_fit(model, k) and _hbm_slack(model, gpu, make(k, ""), tokens, batch,
                                                      usable)[0] >= 0:
                    layout = make(k, "smallest TP that holds the weights and the batch's KV")
                    break
            if layout is None:
                raise ScenarioError(f"{model.name} does not fit {TP_CANDIDATES[-1]} {gpu.name} "
                                    f"GPUs with {batch} x {tokens:,} tokens of KV")
    if layout.ep > 1 and (layout.tp % layout.ep if layout.ep <= layout.tp
                          else layout.ep % layout.tp):
        raise ScenarioError(f"--ep {layout.ep} and --tp {layout.tp}: one must divide the other "
                            "(experts split tp / ep ways, or ep / tp attention groups)")
    if check_fit:
        slack, weights, kv = _hbm_slack(model, gpu, layout, tokens, batch, usable)
        if slack < 0:
            fits = [k for k in TP_CANDIDATES if heads_fit(model, k) and _hbm_slack(
                model, gpu, Layout(k, layout.ep if ep else 1, layout.dp_attention,
                                   layout.weight_dtype, layout.compute_dtype, layout.kv_dtype,
                                   ""), tokens, batch, usable)[0] >= 0]
            hint = f"; --tp {fits[0]} fits" if fits else ""
            raise ScenarioError(
                f"--tp {layout.tp} cannot hold {model.name} on {gpu.name}: "
                f"{layout.weight_dtype} weights {weights / 1e9:.3g} GB + KV {kv / 1e9:.3g} GB "
                f"({batch} x {tokens:,} tokens) per GPU exceed {usable:.0%} of "
                f"{gpu.hbm_capacity_bytes / 1e9:.3g} GB{hint}")
    return layout


def scenario_values(model, gpu, tier, tp=None, bandwidth_Bps=None, efficiency=None,
                    kv_dtype=None, compute_dtype=None, engine=None, concurrent_reloads=None,
                    ep=None, batch=1, tokens=1, check_fit=False, layout=None, new_tokens=1,
                    token_ids=False, codec=None):
    """Every substitution value except T, plus the path's hops (and the layout under "layout").

    tp None: the sourced deployment or the smallest TP that fits ``tokens``. new_tokens: the
    new turn's own tokens (n); token_ids: the prompt arrives as token IDs (no tokenising).
    codec: a :class:`kvmath.tables.rows.Codec` the KV travels encoded in: B becomes the rate in
    decoded bytes (kvmath.derive.kv.B_coded), B_wire the path's own.
    """
    if tp is not None and tp < 1:
        raise ScenarioError(f"--tp must be a positive integer, got {tp}")
    eng = _engine(engine)
    if layout is None:
        layout = choose_layout(model, gpu, tokens, tp, ep, batch, compute_dtype, kv_dtype,
                               hbm_fit_fraction(eng), check_fit)
    check_kv_dtype(gpu, layout.kv_dtype)
    v = architecture_values(model, layout.kv_dtype, layout.weight_dtype)
    v["K"], v["K_e"] = layout.tp, layout.expert_gpus
    v["rho"] = replication(model, layout.tp)
    try:
        v["P"] = gpu.dense_flops(layout.compute_dtype)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    v["eta"] = _efficiency(gpu, layout.compute_dtype, efficiency)
    v["B_hbm"] = gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency
    v["N_node"] = gpu.gpus_per_node
    v["n_c"] = (float(concurrent_reloads) if concurrent_reloads is not None
                else default_concurrency(gpu, layout.tp))
    once = reads_once(eng, model)
    stored = stores_once(eng, model, layout.tp, gpu.gpus_per_node, gpu.platform)
    v["rho_n"] = 1.0 if once else v["rho"]  # host memory's copies (hop_copies per hop)
    v["rho_s"] = 1.0 if stored or once else v["rho"]  # copies a stored cache holds
    copy = None
    if eng.copy_tokens is not None:
        spans = copies_span_layers(eng, v)
        # a copy of one layer in vLLM's per-layer layout carries K and V apart (an engine that
        # packs layers falls back to it for a hybrid); an MLA latent is one tensor per layer
        split = (eng.kv_split or (eng.copy_spans_layers == "uniform" and not spans)) \
            and model.attention != "mla"
        v.update(c_tok=eng.copy_tokens, c_split=2.0 if split else 1.0,
                 c_lay=float(v["L_full"] + v["L_win"]) if spans else 1.0)
        copy = float(fn("copy_bytes").take(v))
    v["B"], v["t_lat"], hops = path_values(tier, gpu, layout.tp, v["rho"], v["n_c"], eng, copy,
                                           once, stored)
    v["B_state"] = state_path_rate(hops, gpu, layout.tp, v["n_c"])
    v["hop_copies"] = tuple(hop_copies(h, v["rho"], once, stored) if h.scope == "per-node"
                            else None for h in hops)
    v.update(request_cost_values(eng, tier, token_ids))
    v["n"] = float(new_tokens)
    v["n_step"] = eng.request_steps
    # an engine loading layer by layer under its step does so from host memory (its L2): a
    # drive's or a NIC's read is prefetched into host memory first, so it hides nothing
    host_only = bool(tier.hops) and all(h.link in (GPU_HOST_LINK, GPU_HOST_MEMORY)
                                        for h in tier.hops)
    v["o_lay"] = 1.0 if eng.layer_overlap and host_only else 0.0
    v["t_step"] = float(fn("t_step_ideal").take(v))  # compare() re-times it with its prefill model
    v["t_0"] = float(fn("fixed_cost").take(v))
    if bandwidth_Bps is not None:
        v["B"] = v["B_state"] = bandwidth_Bps
    if codec is not None:
        v.update(coded_values(codec, tier, layout.kv_dtype, v["B"]))
    v["copy_bytes"] = copy
    v["layout"], v["engine"] = layout, eng
    return v, hops


def kv_element_bytes(kv_dtype, head_elements):
    """Bytes per KV element in kv_dtype: its listed size, or, for a format whose block is one
    KV head of one token (dtypes.csv block_is_head), its scale shared by the head's elements
    (an MLA latent is one head of its whole width), B."""
    from kvmath.tables.schema import table
    row = table("dtypes").get(kv_dtype)
    if row is None or not row.block_is_head:
        return DTYPE_BYTES[kv_dtype]
    return row.bytes_at(head_elements)


def check_kv_dtype(gpu, kv_dtype):
    """ScenarioError when the GPU cannot read KV in kv_dtype (NVFP4 KV needs FP4 tensor cores:
    dtypes.csv needs_fp4_tensor_cores, gpus.csv fp4_dense_flops)."""
    from kvmath.tables.schema import table
    row = table("dtypes").get(kv_dtype)
    if row is not None and row.needs_fp4_tensor_cores and gpu.fp4_dense_flops is None:
        raise ScenarioError(f"KV dtype {kv_dtype} (--kv-dtype, or the model row's kv_dtype) "
                            f"needs FP4 tensor cores (Blackwell): GPU {gpu.name} has none "
                            "(gpus.csv fp4_dense_flops is empty)")


#: KV element types a codec's measured ratio is against (CacheGen encodes 16-bit KV)
CODEC_KV_DTYPES = ("bf16", "fp16")


def coded_values(codec, tier, kv_dtype, wire_Bps, pipelined=None):
    """{B, B_wire, r_c, B_dec}: the path's bandwidth in decoded bytes when the KV moves encoded
    by codec (decode after transfer, or overlapped when pipelined: the codec row's default)."""
    if not tier.hops:
        raise ScenarioError(f"--codec {codec.name}: a prefix in HBM moves nothing to decode")
    if kv_dtype not in CODEC_KV_DTYPES:
        raise ScenarioError(f"--codec {codec.name} encodes 16-bit KV (its ratio is measured "
                            f"against FP16), not {kv_dtype}; drop --codec or --kv-dtype")
    at = {"B_wire": wire_Bps, "r_c": codec.compression_ratio, "B_dec": codec.decode_Bps}
    over = codec.pipelined if pipelined is None else pipelined
    return {**at, "B": float(fn("B_coded_pipelined" if over else "B_coded").take(at))}


#: the tier a prefix still in GPU memory is "loaded" from: no hop, no connector; the engine's
#: request costs and the new tokens' forward pass remain
HBM_TIER = Tier("hbm", "the prefix still in GPU memory (a prefix-cache hit: nothing moves)", ())


def request_cost_values(eng, tier, token_ids=False):
    """The engine's request costs as substitution values (engine_costs.csv; 0 where the engine
    gives none): t_req and c_hash, c_tokz on every request, c_hit on tokens loaded from a tier
    (none from HBM, where no connector runs; no tokenising for a prompt sent as token IDs)."""
    from kvmath.tables.rows import engine_costs
    costs = {p: row.value for p, row in engine_costs(eng.name).items()}
    return {"t_req": costs.get("request_fixed_s", 0.0), "c_hash": costs.get("hash_token_s", 0.0),
            "c_tokz": 0.0 if token_ids else costs.get("tokenize_token_s", 0.0),
            "c_hit": 0.0 if tier.name == HBM_TIER.name else costs.get("hit_token_s", 0.0)}
