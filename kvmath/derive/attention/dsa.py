"""DeepSeek Sparse Attention (DeepSeek-V3.2): an MLA latent per token, plus a lightning indexer
whose key per token (d_I elements, FP8 with its scale) is cached beside it. For each query the
indexer scores every earlier token (H_I heads) and the attention reads only the k best, in the
MQA mode of MLA: every head over the latent (keys of r_kv + d_rope, values of r_kv). Every
tensor-parallel rank holds the latent and the indexer keys whole (vLLM: max_tp_shards 1)."""
import sympy as sp

from kvmath.derive.attention import mla
from kvmath.derive.attention.family import Family
from kvmath.derive.symbols import K, H_I, d, d_I, d_nope, d_rope, d_v, r_kv, r_q

#: the indexer's weights: its query from MLA's compressed query (r_q -> H_I heads of d_I), its one
#: key head from the hidden state, and its per-head weights (DeepSeek-V3.2 inference/model.py,
#: class Indexer: wq_b, wk, weights_proj)
indexer_params = r_q * H_I * d_I + d * d_I + d * H_I


def projections(gemm_time, K_d):
    """MLA's projections, then the indexer's, replicated on every rank (vLLM: ReplicatedLinear):
    its query's up-projection and its key and per-head weights from the hidden state."""
    return mla.projections(gemm_time, K_d) + gemm_time([(r_q, H_I * d_I), (d, d_I + H_I)])


FAMILY = Family(
    name="dsa", title="DSA",
    about="an MLA latent and a lightning indexer's key per token; each query attends its top-k",
    fields={"r_kv": "kv_lora_rank", "d_rope": "qk_rope_head_dim", "d_nope": "qk_nope_head_dim",
            "d_v": "v_head_dim", "r_q": "q_lora_rank", "H_I": "index_n_heads",
            "d_I": "index_head_dim", "k_sel": "index_topk"},
    # dense prefill (up to k tokens) in MHA mode; sparse attention in MQA mode over the latent
    derived={"d_qk": d_nope + d_rope, "d_qs": r_kv + d_rope, "d_vs": r_kv},
    e_kv=r_kv + d_rope,
    rho=K,
    attn_params=mla.attn_params + indexer_params,
    projections=projections,
    rope_elements=mla.rope_elements,
    replicated_latent=True,
    head_elements=r_kv + d_rope,
    aux_elements=d_I,
    required=("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
              "q_lora_rank", "index_n_heads", "index_head_dim", "index_topk", "aux_kv_dtype"),
)
