"""Multi-head latent attention (DeepSeek-V2/V3): each layer keeps one compressed latent of
``r_kv`` elements and one shared RoPE key of ``d_rope`` per token; every tensor-parallel rank
holds the whole latent (``rho = K``)."""
import sympy as sp

from kvmath.derive.attention.family import Family
from kvmath.derive.symbols import K, d, d_nope, d_rope, d_v, n_q, r_kv, r_q

#: low-rank query (r_q > 0) or a full-rank one, the joint KV latent and its RoPE key, the
#: latent's up-projection to keys and values, and the output
attn_params = (
    sp.Piecewise(
        (d * r_q + r_q * n_q * (d_nope + d_rope), r_q > 0),
        (d * n_q * (d_nope + d_rope), True),
    )
    + d * (r_kv + d_rope)
    + r_kv * n_q * (d_nope + d_v)
    + n_q * d_v * d
)


def projection_shapes(K_d):
    """(low-rank q, full-rank q, the rest): GEMM (k, n) shapes on one GPU. The query's
    down-projection and the joint KV latent are replicated; the up-projections and the output
    split by head."""
    lowrank_q = [(d, r_q), (r_q, n_q * (d_nope + d_rope) / K_d)]
    full_q = [(d, n_q * (d_nope + d_rope) / K_d)]
    rest = [(d, r_kv + d_rope), (r_kv, n_q * (d_nope + d_v) / K_d), (n_q * d_v / K_d, d)]
    return lowrank_q, full_q, rest


def projections(gemm_time, K_d):
    """The projections' time: a low-rank query where the model has one."""
    lowrank_q, full_q, rest = projection_shapes(K_d)
    return sp.Piecewise((gemm_time(lowrank_q), r_q > 0), (gemm_time(full_q), True)) + gemm_time(rest)


def rope_elements(K_d):
    """RoPE of the query's rope part per head and of the one shared rope key, read and written."""
    return 2 * (n_q / K_d + 1) * d_rope


FAMILY = Family(
    name="mla", title="MLA",
    about="one compressed latent and one shared RoPE key per token, whole on every rank",
    fields={"r_kv": "kv_lora_rank", "d_rope": "qk_rope_head_dim", "d_nope": "qk_nope_head_dim",
            "d_v": "v_head_dim", "r_q": "q_lora_rank"},
    derived={"d_qk": d_nope + d_rope, "d_qs": d_nope + d_rope, "d_vs": d_v},
    e_kv=r_kv + d_rope,
    rho=K,
    attn_params=attn_params,
    projections=projections,
    rope_elements=rope_elements,
    replicated_latent=True,
    head_elements=r_kv + d_rope,
    required=("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"),
)
