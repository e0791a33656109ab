"""The derivations: each quantity written once, as a SymPy expression.

Conventions (all stated in the book's arithmetic chapter):

* A FLOP is one multiply or one add, so a multiply-accumulate is 2 FLOP.
* Prefill of a T-token prefix recomputes the KV of every layer; it needs no
  logits, so the embedding lookup and LM head cost nothing here.
* Causal attention: query i attends to min(i, window) keys. Each query-key
  pair costs 2*d_qk FLOP for the score and 2*d_v FLOP for the weighted value,
  per query head. Softmax and norms are ignored (O(T*d) and O(T^2) with tiny
  constants).
* Tensor parallelism over K GPUs splits FLOPs and weights K ways. KV is split
  by KV head; when K exceeds the KV heads each head is replicated, and MLA's
  latent is replicated on every rank (rho counts the copies: each attention family's, in
  :mod:`kvmath.derive.attention`). Routed experts
  may be spread over K_e GPUs instead (expert parallelism); K_e = K is plain TP.
* Bytes are counted per hop. A per-GPU hop (the GPU's host link) carries that
  GPU's bytes. A node-shared hop (drives, host DRAM) carries each replica's
  unique bytes rho_n times (1: a replicated head or MLA latent is read once and
  fanned out; a replica spanning nodes carries through each node only what that
  node's ranks hold), for each of the n_c replicas reloading at once.
"""
import sympy as sp

from kvmath.derive import symcache as C
from kvmath.derive.symbols import (
    B, B_gpu, B_hbm, b_kv, B_node, b_st, B_state, b_w, c_hash, C_hbm, c_hit, c_lay, c_split, c_tok,
    c_tokz, d, d_rk, d_rv, k_conv, L_rec, n_rk, n_rv,
    d_h, d_nope, d_qk, d_rope, d_v, E, e_kv, E_sh, eta, I_exp, I_ffn, K, K_e, k_top, L_dense,
    L_full, L_moe, L_win, n_conc, n_kv, N_lin, n_new, N_node, n_q, n_seq, n_step, N_tot, N_xa,
    N_xs, o_lay, P, q_io, r_kv, r_q, r_res, rho, rho_n, s_xfer, T, t_0, t_lat, t_meas, t_rec, t_rec_n,
    t_rec_p, t_rec_pn, t_req, t_step, tied, u_hbm, V, W,
)
from kvmath.derive.symbols import B_dec, B_wire, g_s, n_bits, r_c, s_bits
from kvmath.derive.symbols import C_ch, H_I, L_chunk, b_aux, d_I, d_qs, d_vs, e_aux, k_sel, n_gpu
from kvmath.derive.symbols import T_native, f_rope, rho_s

# ---------------------------------------------------------------- KV size
#: layers with attention (full, sliding-window and chunked-local): each has projections and a KV
L_attn = L_full + L_win + L_chunk
#: bytes one layer caches per token, one copy: its KV and, for a sparse model, its indexer's keys
b_token_layer = e_kv * b_kv + e_aux * b_aux
#: token-layers held for a T-token prefix: sliding-window layers keep at most W tokens, and
#: chunked-local layers at most one chunk (an engine reloads their last C tokens: vLLM's
#: offloading connector looks back one chunk, as it looks back one window)
held_token_layers = L_full * T + L_win * sp.Min(T, W) + L_chunk * sp.Min(T, C_ch)
#: bytes per token of KV when every layer holds the token (T <= W and T <= C), one copy
kv_bytes_per_token = b_token_layer * L_attn
#: bytes of one copy of the attention layers' KV of a T-token prefix
kv_bytes_attention = b_token_layer * held_token_layers
#: recurrent-state elements per sequence per recurrent layer: the state (one d_rk x d_rv matrix
#: per value head; Mamba-2's heads x head dim x state size) and the causal convolution's last
#: k_conv - 1 inputs of its channels (keys, queries and values)
state_elements = n_rv * d_rk * d_rv + (k_conv - 1) * (2 * n_rk * d_rk + n_rv * d_rv)
#: bytes of a sequence's recurrent state, every recurrent layer: the same at any prompt length,
#: split over the TP group by head (never replicated), B
state_bytes = L_rec * state_elements * b_st
#: tokens between the prefix lengths at which an engine keeps a hybrid model's state: vLLM's
#: prefix caching (mamba_cache_mode align) stores a state only on its block grid, and sizes a
#: block so that one recurrent layer's state fills the page of a block's attention KV on each GPU
#: (HybridAttentionMambaModelConfig: attention tokens per state page, rounded up; vLLM's further
#: rounding to its kernels' chunk is not modelled), tokens
state_checkpoint_tokens = sp.ceiling(state_elements * b_st / (b_token_layer * rho))
#: bytes of one copy of a T-token prefix's cache (what a replica must read at least once): the
#: attention layers' KV and, for a hybrid model, the recurrent state at the prefix's end
kv_bytes_unique = kv_bytes_attention + state_bytes
#: bytes of a T-token prefix's cache, all copies on all GPUs (what the GPUs must receive): the
#: KV's rho copies and one state
kv_bytes_total = rho * kv_bytes_attention + state_bytes
#: bytes of KV each GPU must receive
kv_bytes_per_gpu = kv_bytes_total / K

# ---------------------------------------------------------------- parameters
#: gated (SwiGLU) MLP weights: gate, up and down
mlp_params_dense = 3 * d * I_ffn
#: MoE MLP weights touched per token: k_top routed + shared experts + router
mlp_params_moe_active = 3 * d * I_exp * (k_top + E_sh) + d * E
#: MoE MLP weights stored
mlp_params_moe_total = 3 * d * I_exp * (E + E_sh) + d * E
#: a recurrent layer's matmul weights (Gated DeltaNet: in_proj_qkvz, in_proj_ba and out_proj;
#: Mamba-2's in_proj and out_proj, its per-head dt counted twice): queries and keys of n_rk
#: heads, values and output gates of n_rv heads, two gates per value head, the output
recurrent_proj_params = (d * (2 * n_rk * d_rk + 2 * n_rv * d_rv) + d * 2 * n_rv
                         + n_rv * d_rv * d)
#: its depthwise causal convolution over the keys, queries and values
recurrent_conv_params = (2 * n_rk * d_rk + n_rv * d_rv) * k_conv
#: routed-expert matmul parameters active per token (spread over K_e GPUs under EP)
params_routed_active = L_moe * 3 * d * I_exp * k_top
#: routed-expert parameters stored
params_routed_stored = L_moe * 3 * d * I_exp * E


def params_active_matmul(attn_params):
    """N_lin: active matmul parameters of the blocks (no embedding, no LM head)."""
    return (L_attn * attn_params + L_rec * recurrent_proj_params
            + L_dense * mlp_params_dense + L_moe * mlp_params_moe_active)


def params_total(attn_params):
    """N_tot: every parameter, embedding and (untied) LM head included; norms ignored."""
    return (L_attn * attn_params + L_rec * (recurrent_proj_params + recurrent_conv_params)
            + L_dense * mlp_params_dense + L_moe * mlp_params_moe_total + V * d * (2 - tied))


# ---------------------------------------------------------------- FLOPs
#: causal query-key pairs of one full-attention layer
pairs_full = T * (T + 1) / 2
#: causal query-key pairs of one sliding-window layer (query i sees min(i, W) keys)
pairs_window = sp.Min(T, W) * (sp.Min(T, W) + 1) / 2 + (T - sp.Min(T, W)) * W
#: query-key pairs of one sparse layer (query i attends to its min(i, k) best keys)
pairs_topk = sp.Min(T, k_sel) * (sp.Min(T, k_sel) + 1) / 2 + (T - sp.Min(T, k_sel)) * k_sel
#: whole chunks of a T-token prefix in a chunked-local layer
chunks_whole = sp.floor(T / C_ch)
#: query-key pairs of one chunked-local layer: each token sees the earlier tokens of its own
#: chunk only (non-overlapping chunks of C: Llama 4's iRoPE local layers)
pairs_chunk = (chunks_whole * C_ch * (C_ch + 1) / 2
               + (T - chunks_whole * C_ch) * (T - chunks_whole * C_ch + 1) / 2)
#: attention FLOPs per query head of one full-attention layer: dense (every earlier key at the
#: model's widths), or, for a sparse layer past its top-k, its k best keys at the widths its
#: kernel works in (DSA: the absorbed latent); a prefill no longer than k runs dense (vLLM's and
#: SGLang's short-prefill MHA path)
full_pair_flops = sp.Piecewise(((d_qk + d_v) * pairs_full, T <= k_sel),
                               ((d_qs + d_vs) * pairs_topk, True))
#: the lightning indexer's FLOPs of the T-token prefill: each query scores every earlier token
#: with its H_I heads of d_I (0 without an indexer)
flops_indexer = 2 * H_I * d_I * L_full * pairs_full
#: matmul FLOPs of the T-token prefill
flops_linear = 2 * N_lin * T
#: attention FLOPs (scores and weighted values) of the T-token prefill, and a sparse model's
#: indexer
flops_attention = (2 * n_q * (L_full * full_pair_flops
                              + (d_qk + d_v) * (L_win * pairs_window + L_chunk * pairs_chunk))
                   + flops_indexer)
#: recurrent mixing FLOPs of the T-token prefix (a hybrid model's linear-attention layers): each
#: token updates every value head's d_rk x d_rv state and reads it out (two multiply-adds per
#: state element); the chunked kernels' work within a chunk is not counted (a lower bound)
flops_recurrent = 4 * L_rec * n_rv * d_rk * d_rv * T
#: all prefill FLOPs of the T-token prefix, whole model
flops_prefill = flops_linear + flops_attention + flops_recurrent

# ---------------------------------------------------------------- times
#: routed-expert FLOPs of the T-token prefill
flops_routed = 2 * N_xa * T
#: time to compute the prefill at fraction eta of peak, s: the routed experts on K_e GPUs,
#: everything else on the K attention GPUs (K_e = K: all FLOPs over K GPUs)
t_compute = ((flops_prefill - flops_routed) / K + flops_routed / K_e) / (eta * P)
#: weight bytes each GPU holds: routed experts split K_e ways, the rest K ways
weights_per_gpu = (N_tot - N_xs) * b_w / K + N_xs * b_w / K_e
#: time to read every weight once from HBM, s: no prefill can beat it
t_weights = weights_per_gpu / B_hbm
#: recompute time, the roofline maximum of the two, s
t_recompute = sp.Max(t_compute, t_weights)
#: recompute of n_seq equal prompts in one batch: the compute adds up, the weights are read once, s
t_recompute_batch = sp.Max(n_seq * t_compute, t_weights)
#: the prefill efficiency a measured compute-bound prefill time implies
eta_implied = C.solve(sp.Eq(t_compute, t_meas), eta)[0]
#: bytes one offloaded cache occupies in a tier: rho_s copies of its KV, encoded by a codec
#: (1/r_c of them; r_c = 1 without one), and its recurrent state (never replicated, not
#: encoded: CacheGen codes KV tensors), B
kv_bytes_stored = rho_s * kv_bytes_attention / r_c + state_bytes
#: the context window of a model served with RoPE scaling (YaRN and kin): its pre-training
#: window stretched by the factor, tokens; KV bytes and FLOPs per token do not change with it
context_scaled = f_rope * T_native
#: replicas reloading at once through one node's shared hops when every replica is busy
default_concurrent_reloads = sp.Max(1, sp.floor(N_node / K))
#: KV copies (in units of the replica's unique KV) one replica's reload carries through a
#: node-shared hop. The replica's min(K, N_node) GPUs on this node hold rho min(K, N_node) / K
#: copies; read once (rho_n = 1) it carries only the distinct bytes among them,
#: max(min(K, N_node), rho) / K (a replicated head's rho copies sit on adjacent ranks; MLA's
#: latent, rho = K, is on every rank, so each node needs all of it)
node_copies = sp.Min(rho_n * sp.Max(sp.Min(K, N_node), rho) / K, rho * sp.Min(K, N_node) / K)
#: bytes one replica's reload carries through a node-shared hop: its copies of the KV, and the
#: state its ranks on this node hold (split by head, never replicated)
node_bytes = node_copies * kv_bytes_attention + state_bytes * sp.Min(K, N_node) / K
#: bytes crossing a node-shared hop for the n_c reloads in flight there, encoded by a codec, B
node_hop_bytes = n_conc * node_bytes / r_c
#: time of the node-shared hops: n_c replicas each move their bytes, s
t_node_hop = n_conc * node_bytes / B_node
#: one reload's time alone on a node-shared hop (n_c = 1), s: the hop's service time
t_node_hop_alone = t_node_hop.subs(n_conc, 1)
#: utilisation of a node-shared hop when r_res reloads per second arrive at the node, each
#: holding it for t_node_hop_alone, 1
hop_utilisation = r_res * t_node_hop_alone
#: reloads sharing the hop as one arrives (itself included), under processor sharing: the
#: mean response of an M/G/1-PS server is t_alone / (1 - u), the time of 1 / (1 - u) equal
#: sharers (a reload finds u / (1 - u) others in flight on average), replicas
concurrent_reloads_at_load = 1 / (1 - hop_utilisation)
#: time of the per-GPU hops: each GPU moves its own bytes, for each of the n_g reloads its
#: replica has in flight, s
t_gpu_hop = n_gpu * kv_bytes_per_gpu / B_gpu
#: bytes crossing each per-GPU hop for the n_g reloads in flight there, encoded by a codec
#: (1/r_c of them; r_c = 1 without one), B
gpu_hop_bytes = n_gpu * kv_bytes_per_gpu / r_c
#: HBM the other reloads in flight on a replica hold beside this one's KV, B per GPU: each
#: lands in blocks the engine allocates before it loads
hbm_inflight_bytes = (n_gpu - 1) * kv_bytes_per_gpu
#: one reload's time alone on a replica's per-GPU hops (n_g = 1), s
t_gpu_hop_alone = t_gpu_hop.subs(n_gpu, 1)
#: utilisation of a replica's per-GPU hops when r_res reloads per second arrive at the node,
#: spread over its replicas, each holding the hops for t_gpu_hop_alone, 1
gpu_hop_utilisation = r_res / default_concurrent_reloads * t_gpu_hop_alone
#: reloads sharing a replica's per-GPU hops as one arrives (itself included), under processor
#: sharing, as for a node-shared hop: 1 / (1 - u), reloads
gpu_reloads_at_load = 1 / (1 - gpu_hop_utilisation)
#: the fixed cost of one reload: the hops' first-byte latency and n_step engine steps between
#: the finished load and the first token (the request's own forward step over its new tokens,
#: plus any wait for a step boundary), each timed by the same prefill model as the recompute
#: (t_step = t_suffix), s
fixed_cost = t_lat + n_step * t_step
#: one engine step on the flat roofline: the prefill of one token, s
t_step_ideal = t_recompute.subs(T, 1)
#: what every request pays, cold or reloaded: the engine's fixed cost of a request (admission,
#: scheduling, sampling the first token) and its work per prompt token on all T + n tokens
#: (hashing blocks for prefix caching; tokenising when the prompt arrives as text), s
t_request = t_req + (c_hash + c_tokz) * (T + n_new)
#: the forward pass of the new turn's n tokens after a loaded T-token prefix: the prefill model's
#: time for T + n tokens less that for T, never below a forward of n tokens alone plus one read of
#: the prefix's KV from HBM (every new query attends to all of it), s
t_suffix = sp.Max(t_rec_pn - t_rec_p, t_rec_n + kv_bytes_per_gpu / B_hbm)
#: reload time, hop by hop: the fixed cost, the connector's cost per loaded token and the
#: slowest hop, s
t_reload_hops = t_0 + c_hit * T + sp.Max(t_node_hop, t_gpu_hop)
#: effective per-GPU bandwidth of a path: the one B with t_reload_hops = t_0 + KV per GPU / B
B_path = sp.Min(B_gpu / n_gpu, B_node * rho / (K * n_conc * node_copies))
#: the same for a hybrid model's recurrent state, split by head and never replicated: a node hop
#: carries min(K, N_node) / K of the replica's state for each GPU's 1 / K, B/s
B_path_state = sp.Min(B_gpu / n_gpu, B_node / (n_conc * sp.Min(K, N_node)))
#: bytes per element of a number format: its bits plus one block's scale bits shared by g_s
#: elements (FP8 with a per-tensor scale: g_s so large the scale vanishes), B
dtype_bytes = (n_bits + s_bits / g_s) / 8
#: a KV codec (CacheGen): the path carries 1/r_c of the bytes, then the GPU decodes them at
#: B_dec, one after the other (no overlap: an upper bound on the time); the per-GPU bandwidth
#: in decoded bytes that the reload sees, B/s (r_c = 1 and no decode: B_wire itself)
B_coded = 1 / (1 / (r_c * B_wire) + 1 / B_dec)
#: the same when decode and transfer pipeline chunk by chunk (the codec's fast end), B/s
B_coded_pipelined = sp.Min(r_c * B_wire, B_dec)
#: a GPU's decoder shared by the n_g reloads its replica has in flight, decoded B/s each
B_dec_at_load = B_dec / n_gpu
#: the time a GPU's decoder takes over one reload's KV at the decoded rate it has, s
t_decode = kv_bytes_per_gpu / B_dec
#: the path rate below which a codec (decode after transfer) speeds the reload: where
#: B_coded = B_wire, B/s; a faster path loses to its decoding
codec_breakeven_wire = sp.solve(sp.Eq(B_coded, B_wire), B_wire)[0]
#: the same for a pipelined codec: it speeds any path slower than its decode, B/s
codec_breakeven_wire_pipelined = B_dec
#: the path rate a codec needs for a reload rate of B in decoded bytes (B < B_dec; at or above
#: it no path suffices), decode after transfer and pipelined, B/s
codec_wire_for = sp.solve(sp.Eq(B_coded, B), B_wire)[0]
codec_wire_for_pipelined = B / r_c
#: reload time: the fixed cost, the connector's cost per loaded token and each GPU's bytes at
#: the path's effective bandwidth, s
#: (the attention KV at the path's rate B and a hybrid model's state at its own, B_state: each
#: part no faster than its share of every hop, so never below the hop-by-hop time)
t_reload = t_0 + c_hit * T + rho * kv_bytes_attention / (K * B) + state_bytes / (K * B_state)
#: time to first token with no cache: the request's costs and the prefill of all T + n tokens
#: (t_rec_pn from the prefill model in use), s
ttft_cold = t_request + t_rec_pn
#: what an engine that loads layer by layer under its step (o_lay = 1) hides of a reload: the
#: load and the step pipelined over the L layers take max + min / L of the two instead of their
#: sum (CachedAttention's pipeline), so min(load, step) (1 - 1/L) is hidden; 0 for an engine
#: that loads before its step (o_lay = 0), s
t_overlap_hidden = (o_lay * sp.Min(kv_bytes_per_gpu / B, t_step)
                    * (1 - 1 / L_attn))
#: time to first token with the prefix loaded from a tier: the request's costs and the reload,
#: whose engine step is the new tokens' forward pass (t_step = t_suffix), less what a
#: layer-by-layer load hides under that step, s
ttft_hit = t_request + t_reload - t_overlap_hidden
#: bytes one host-link copy moves, from the engine's KV layout: c_tok tokens of c_lay layers of
#: this GPU's share, keys and values together (c_split = 1) or apart (c_split = 2), B
copy_bytes = b_token_layer * rho / K * c_tok * c_lay / c_split
#: time of one transfer of s bytes over a link with fixed cost t_0 and asymptotic bandwidth B, s
t_transfer = t_0 + s_xfer / B
#: its effective bandwidth: small transfers are latency-bound, B/s
bandwidth_at_size = s_xfer / t_transfer
#: the same with q_io transfers in flight (a drive's queue), never above the link, B/s
bandwidth_at_size_qd = sp.Min(B, q_io * s_xfer / t_transfer)
#: transfer size at which a link reaches half its asymptotic bandwidth, B
half_bandwidth_size = C.solve(sp.Eq(bandwidth_at_size, B / 2), s_xfer)[0]
#: reload minus recompute: negative where reload wins, s
t_advantage = t_reload - t_recompute

# ---------------------------------------------------------------- deployments that fit
#: HBM left on each GPU after the weights and n_seq sequences of T tokens, of the usable
#: fraction u_hbm of its capacity, B (negative: the deployment does not fit)
hbm_slack = u_hbm * C_hbm - weights_per_gpu - n_seq * kv_bytes_per_gpu

# ---------------------------------------------------------------- the one division
#: the model's prefill FLOPs per byte of KV moved, linear term only, for a token every
#: layer holds (T <= W), FLOP/B
model_flops_per_kv_byte = C.simplify(flops_linear / (T * kv_bytes_per_token * rho))
#: the same at prefix length T, attention and windows included, FLOP/B
model_flops_per_kv_byte_at_T = flops_prefill / kv_bytes_total
#: the GPU's achieved FLOP/s per byte/s of the reload path (K GPUs, K links), FLOP/B
gpu_flops_per_link_byte = eta * P / B
#: minimum reload bandwidth per GPU for reload to beat a recompute of t_rec seconds at T
#: (while t_rec > t_0 + c_hit T), B/s
breakeven_bandwidth_at = kv_bytes_per_gpu / (t_rec - t_0 - c_hit * T)
#: the same against the flat roofline recompute, B/s
breakeven_bandwidth = breakeven_bandwidth_at.subs(t_rec, t_recompute)


# ---------------------------------------------------------------- crossings
def dense(expr):
    """expr for a model with no chunked-local layer and no sparse attention (every full layer
    dense, no indexer): the pieces whose crossings are closed-form (a chunked or sparse model's
    are found numerically)."""
    return expr.xreplace({full_pair_flops: (d_qk + d_v) * pairs_full}).subs({L_chunk: 0, H_I: 0})


def regimes():
    """The smooth pieces of t_advantage, as (name, expression, conditions).

    On each piece Min and Max are resolved, so t_advantage is a polynomial of
    degree <= 2 in T and its roots are closed-form. A root is a crossing if it
    satisfies the piece's conditions (each a SymPy relational in T).
    """
    pieces = []
    for window_name, min_tw, cond_w in (("T<=W", T, T <= W), ("T>W", W, T > W)):
        for roof_name, rec, cond_r in (
            ("compute", t_compute, t_compute >= t_weights),
            ("weights", t_weights, t_weights > t_compute),
        ):
            expr = dense(t_reload - rec).subs(sp.Min(T, W), min_tw)
            cond = dense(cond_r).subs(sp.Min(T, W), min_tw)
            pieces.append((f"{roof_name},{window_name}", sp.expand(expr), (cond_w, cond)))
    return pieces


def quadratic_coefficients(expr):
    """(a2, a1, a0) of expr = a2*T**2 + a1*T + a0; raises if expr is not polynomial of degree <= 2."""
    poly = sp.Poly(expr, T)
    if poly.degree() > 2:
        raise ValueError(f"expected degree <= 2 in T, got {poly.degree()}")
    coeffs = poly.all_coeffs()
    coeffs = [sp.Integer(0)] * (3 - len(coeffs)) + coeffs
    return tuple(C.simplify(c) for c in coeffs)


#: the core regime (every layer full attention, compute-bound): reload - recompute = 0
core_advantage = sp.expand(dense(t_reload - t_compute).subs(L_win, 0))
#: its two closed-form roots in T (one is negative when t_0 > 0)
core_crossings = C.solve(sp.Eq(core_advantage, 0), T)

#: Mooncake (FAST'25) Eq. 2 in its own symbols: reuse pays when B/G exceeds this.
#: l layers cancel; n prefix length, d hidden size, g GQA group size, s bytes per
#: element, a and b the constants of their Eq. 1 flops = l*(a*n^2*d + b*n*d^2).
mc_n, mc_d, mc_g, mc_s, mc_a, mc_b = sp.symbols("n d g s a b", positive=True)
mooncake_eq2_B_over_G = 2 * mc_d * mc_s / (mc_g * (mc_a * mc_n * mc_d + mc_b * mc_d ** 2))
