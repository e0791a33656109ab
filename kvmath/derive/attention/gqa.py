"""Grouped-query attention (MHA and MQA at its ends): each layer keeps a key and a value of
``d_h`` elements per KV head per token; tensor parallelism splits the KV heads, replicating each
once the GPUs outnumber them."""
import sympy as sp

from kvmath.derive.attention.family import Family
from kvmath.derive.symbols import K, d, d_h, n_kv, n_q

#: query and output projections (n_q heads) and key and value projections (n_kv heads)
attn_params = 2 * d * n_q * d_h + 2 * d * n_kv * d_h


def projections(gemm_time, K_d):
    """Fused qkv (KV heads replicate once K_d > n_kv) and the output projection."""
    kv_local = sp.Max(n_kv, K_d) / K_d
    return gemm_time([(d, (n_q / K_d + 2 * kv_local) * d_h), (n_q * d_h / K_d, d)])


def rope_elements(K_d):
    """RoPE of q and k on one GPU, read and written."""
    return 2 * (n_q + sp.Max(n_kv, K_d)) * d_h / K_d


FAMILY = Family(
    name="gqa", title="GQA",
    about="a key and a value per KV head per token (MHA: a KV head per query head; MQA: one)",
    fields={"n_kv": "num_key_value_heads", "d_h": "head_dim"},
    derived={"d_qk": d_h, "d_v": d_h, "d_qs": d_h, "d_vs": d_h},
    e_kv=2 * n_kv * d_h,
    rho=sp.Max(1, K / n_kv),
    attn_params=attn_params,
    projections=projections,
    rope_elements=rope_elements,
    replicated_latent=False,
    head_elements=d_h,
    divides=("num_key_value_heads", "num_attention_heads"),
    required=("num_key_value_heads", "head_dim"),
)
