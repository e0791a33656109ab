"""The logic's constants, each stated once: the default engine and layouts tried, the shortest
prefix, the prefill models and their parts, the symbols a family leaves unset, the codec's KV
types, and the words an error uses to offer an override."""
from __future__ import annotations

#: the engine profile a comparison uses unless told otherwise (kvmath/data/engines.csv)
DEFAULT_ENGINE = "vllm-lbhnc"
#: tensor-parallel degrees tried when none is given (powers of two, up to eight 8-GPU nodes)
TP_CANDIDATES = [1, 2, 4, 8, 16, 32, 64]
#: the shortest prefix whose reload means anything, tokens: at one token the reload's own
#: forward pass is the whole prefill, and recompute wins by the load's first byte
MIN_PREFIX_TOKENS = 2.0
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
#: what the other commands say in its place (only compare takes the flag)
BEYOND_CONTEXT_ELSEWHERE = ("(only compare takes --allow-beyond-context, for one request beyond "
                            "the window; serve the model within it here)")
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
