"""Every symbol of kvmath, declared once with its assumptions and unit.

Units: bytes (B), seconds (s), FLOP, bytes per second (B/s, SI), FLOP per second.
"""
import sympy as sp

_pos_int = dict(positive=True, integer=True)
_nonneg_int = dict(nonnegative=True, integer=True)

# --- prompt ---------------------------------------------------------------
T = sp.Symbol("T", positive=True)  #: tokens in the cached prefix (real, so crossings are continuous)

# --- architecture (from config.json) --------------------------------------
d = sp.Symbol("d", **_pos_int)  #: hidden size
L_full = sp.Symbol("L_full", **_nonneg_int)  #: layers with full (global) attention
L_win = sp.Symbol("L_win", **_nonneg_int)  #: layers with a sliding window
W = sp.Symbol("W", **_pos_int)  #: sliding window, tokens
L_chunk = sp.Symbol("L_chunk", **_nonneg_int)  #: layers with chunked local attention (Llama 4)
C_ch = sp.Symbol("C_ch", **_pos_int)  #: attention chunk of a chunked-local layer, tokens
n_q = sp.Symbol("n_q", **_pos_int)  #: query heads
d_qk = sp.Symbol("d_qk", **_pos_int)  #: query/key width per head (MLA: nope + rope)
d_v = sp.Symbol("d_v", **_pos_int)  #: value width per head
e_kv = sp.Symbol("e_kv", **_pos_int)  #: KV elements stored per token per layer, whole model
b_kv = sp.Symbol("b_kv", positive=True)  #: bytes per KV element (bf16 2, fp8 1)
#: elements a layer caches per token beside its KV (a sparse model's indexer keys), 0 for most
e_aux = sp.Symbol("e_aux", nonnegative=True)
b_aux = sp.Symbol("b_aux", positive=True)  #: bytes per element of that cache (its scales included)
# sparse attention (DeepSeek Sparse Attention): a lightning indexer scores every earlier token
# for each query, and the query attends only to the k_sel best
H_I = sp.Symbol("H_I", nonnegative=True)  #: the indexer's heads (0: no indexer)
d_I = sp.Symbol("d_I", nonnegative=True)  #: the indexer's head width
k_sel = sp.Symbol("k_sel", positive=True)  #: keys a sparse layer's query attends (a dense layer: more than any prompt)
d_qs = sp.Symbol("d_qs", positive=True)  #: query/key width per head of a sparse layer's attention
d_vs = sp.Symbol("d_vs", positive=True)  #: value width per head of a sparse layer's attention
rho = sp.Symbol("rho", positive=True)  #: copies of the KV held across the TP group
N_lin = sp.Symbol("N_lin", positive=True)  #: active matmul parameters in the blocks
N_tot = sp.Symbol("N_tot", positive=True)  #: all parameters (weights read once per prefill)
b_w = sp.Symbol("b_w", positive=True)  #: bytes per weight
N_xa = sp.Symbol("N_xa", nonnegative=True)  #: routed-expert matmul parameters active per token
N_xs = sp.Symbol("N_xs", nonnegative=True)  #: routed-expert parameters stored

# GQA/MHA/MQA and MLA quantities that feed e_kv, rho and the parameter count
n_kv = sp.Symbol("n_kv", **_pos_int)  #: KV heads
d_h = sp.Symbol("d_h", **_pos_int)  #: head dim
r_kv = sp.Symbol("r_kv", **_pos_int)  #: MLA kv_lora_rank
d_rope = sp.Symbol("d_rope", **_pos_int)  #: MLA qk_rope_head_dim
d_nope = sp.Symbol("d_nope", **_pos_int)  #: MLA qk_nope_head_dim
r_q = sp.Symbol("r_q", **_nonneg_int)  #: MLA q_lora_rank (0: no low-rank query)
I_ffn = sp.Symbol("I_ffn", **_nonneg_int)  #: dense MLP intermediate size
I_exp = sp.Symbol("I_exp", **_nonneg_int)  #: per-expert intermediate size
E = sp.Symbol("E", **_nonneg_int)  #: routed experts
k_top = sp.Symbol("k_top", **_nonneg_int)  #: routed experts active per token
E_sh = sp.Symbol("E_sh", **_nonneg_int)  #: shared experts
L_dense = sp.Symbol("L_dense", **_nonneg_int)  #: layers with a dense MLP
L_moe = sp.Symbol("L_moe", **_nonneg_int)  #: layers with an MoE MLP
V = sp.Symbol("V", **_pos_int)  #: vocabulary size
tied = sp.Symbol("tied", **_nonneg_int)  #: 1 if the LM head shares the embedding
# hybrid models: recurrent (linear-attention or SSM) layers beside the attention layers, each a
# Gated DeltaNet or Mamba-2 mixer whose state does not grow with the prompt
L_rec = sp.Symbol("L_rec", **_nonneg_int)  #: recurrent layers (no KV; a fixed state per sequence)
n_rk = sp.Symbol("n_rk", **_nonneg_int)  #: recurrent key heads (Mamba-2: groups)
n_rv = sp.Symbol("n_rv", **_nonneg_int)  #: recurrent value heads (Mamba-2: heads)
d_rk = sp.Symbol("d_rk", **_nonneg_int)  #: recurrent key width per head (Mamba-2: state size)
d_rv = sp.Symbol("d_rv", **_nonneg_int)  #: recurrent value width per head (Mamba-2: head dim)
k_conv = sp.Symbol("k_conv", **_nonneg_int)  #: the recurrent layers' causal-convolution width
b_st = sp.Symbol("b_st", positive=True)  #: bytes per element of the recurrent state

# --- hardware -------------------------------------------------------------
K = sp.Symbol("K", **_pos_int)  #: tensor-parallel GPUs of attention (they split the KV)
K_e = sp.Symbol("K_e", **_pos_int)  #: GPUs the routed experts are spread over (EP; K under plain TP)
N_node = sp.Symbol("N_node", **_pos_int)  #: GPUs per node (they share the node's hops)
n_conc = sp.Symbol("n_c", positive=True)  #: replicas reloading at once through one node's shared hops
n_gpu = sp.Symbol("n_g", positive=True)  #: reloads at once through one replica's own (per-GPU) hops
rho_s = sp.Symbol("rho_s", positive=True)  #: copies of the KV a stored cache holds (1: stored once)
f_rope = sp.Symbol("f_rope", positive=True)  #: RoPE scaling factor (YaRN's factor)
T_native = sp.Symbol("T_native", positive=True)  #: the window a model was pre-trained at, tokens
rho_n = sp.Symbol("rho_n", positive=True)  #: KV copies a replica reads through node hops (1: read once)
t_lat = sp.Symbol("t_lat", nonnegative=True)  #: first-byte latency of the path's hops, s
c_tok = sp.Symbol("c_tok", positive=True)  #: tokens one host-link copy moves (engine layout)
c_lay = sp.Symbol("c_lay", positive=True)  #: layers one host-link copy spans (1 or all)
c_split = sp.Symbol("c_split", positive=True)  #: 2 if keys and values are copied separately, else 1
q_io = sp.Symbol("q_io", positive=True)  #: I/Os in flight (queue depth)
n_step = sp.Symbol("n_step", nonnegative=True)  #: engine steps between a load and its first token
u_hbm = sp.Symbol("u_hbm", positive=True)  #: usable fraction of HBM (weights, KV, batch)
C_hbm = sp.Symbol("C_hbm", positive=True)  #: HBM capacity per GPU, B
P = sp.Symbol("P", positive=True)  #: dense peak FLOP/s per GPU in the compute dtype
eta = sp.Symbol("eta", positive=True)  #: achieved fraction of P during prefill
B_hbm = sp.Symbol("B_hbm", positive=True)  #: HBM bandwidth per GPU, B/s (effective)
B = sp.Symbol("B", positive=True)  #: effective reload bandwidth per GPU, B/s
t_0 = sp.Symbol("t_0", nonnegative=True)  #: fixed cost of one reload (latency and steps), s
B_gpu = sp.Symbol("B_gpu", positive=True)  #: narrowest per-GPU hop of a path, B/s
B_node = sp.Symbol("B_node", positive=True)  #: narrowest node-shared hop of a path, B/s
B_state = sp.Symbol("B_state", positive=True)  #: per-GPU reload rate of a hybrid model's state, B/s
s_xfer = sp.Symbol("s", positive=True)  #: bytes of one transfer
n_seq = sp.Symbol("n_seq", positive=True, integer=True)  #: equal prompts prefilled together
t_meas = sp.Symbol("t_meas", positive=True)  #: a measured prefill time, s
t_rec = sp.Symbol("t_rec", positive=True)  #: a recompute time from any prefill model, s

# --- serving: overlap, split, busy server ----------------------------------
n_new = sp.Symbol("n", positive=True)  #: new tokens of the next turn
x_split = sp.Symbol("x", nonnegative=True)  #: prefix tokens recomputed while the rest loads
b_dec = sp.Symbol("b_dec", nonnegative=True)  #: sequences in the running decode batch
t_req = sp.Symbol("t_req", nonnegative=True)  #: the engine's fixed cost of every request, s
c_hash = sp.Symbol("c_hash", nonnegative=True)  #: engine cost per prompt token: hashing its blocks, s
c_tokz = sp.Symbol("c_tokz", nonnegative=True)  #: engine cost per prompt token: tokenising text, s
c_hit = sp.Symbol("c_hit", nonnegative=True)  #: connector cost per token loaded from a tier, s
o_lay = sp.Symbol("o_lay", nonnegative=True)  #: 1 where the engine loads layer by layer under its step, else 0
t_rec_p = sp.Symbol("t_rec_p", nonnegative=True)  #: prefill-model time of the T-token prefix, s
t_rec_pn = sp.Symbol("t_rec_pn", nonnegative=True)  #: prefill-model time of prefix and new tokens, s
t_rec_n = sp.Symbol("t_rec_n", nonnegative=True)  #: prefill-model time of the new tokens alone, s
t_step = sp.Symbol("t_step", nonnegative=True)  #: one engine step of the reloading request, s

# --- reuse and tiers ---------------------------------------------------------
p_ret = sp.Symbol("p", positive=True)  #: probability the conversation returns at all
#: probability a returning conversation is routed to the node that holds its cache (1: one node,
#: or routing that follows the cache; 1/N: a router that ignores it, over N nodes)
h_route = sp.Symbol("h_route", positive=True)
#: share of an offloaded cache's bytes that are new since its previous offload (the turn's new
#: prompt and output tokens over the cache's): engines write only blocks the store lacks
f_new = sp.Symbol("f_new", positive=True)
tau = sp.Symbol("tau", positive=True)  #: time-to-live of an offloaded cache, s
lam = sp.Symbol("lambda", positive=True)  #: rate of the pause distribution (exponential), 1/s
mu = sp.Symbol("mu", real=True)  #: log-median of a lognormal pause, ln(s)
sigma = sp.Symbol("sigma", positive=True)  #: log-standard deviation of a lognormal pause
c_gpu = sp.Symbol("c_gpu", positive=True)  #: price of a GPU-second, $
c_cap = sp.Symbol("c_cap", nonnegative=True)  #: price of holding one byte for one second in a tier, $
c_wear = sp.Symbol("c_wear", nonnegative=True)  #: price of writing one byte (SSD endurance), $
p_GB = sp.Symbol("p_GB", positive=True)  #: a medium's purchase price per 1e9 B, $
m_amort = sp.Symbol("m_amort", positive=True)  #: months a purchase is amortised over
W_life = sp.Symbol("W_life", positive=True)  #: full-drive writes over a drive's rated life
S_gpu = sp.Symbol("S_gpu", positive=True)  #: GPU-seconds one reuse saves
Bytes = sp.Symbol("Q", positive=True)  #: bytes of one offloaded cache
r_res = sp.Symbol("r", positive=True)  #: resumes per second arriving at a node

N_fleet = sp.Symbol("N_fleet", positive=True)  #: GPU nodes in a fleet
r_tok = sp.Symbol("r_tok", positive=True)  #: tokens a fleet serves per second (prompt and output)

# --- number formats and KV codecs -------------------------------------------
n_bits = sp.Symbol("n_bits", positive=True)  #: bits of one element of a number format
s_bits = sp.Symbol("s_bits", nonnegative=True)  #: bits of the scale (and zero point) of one block
g_s = sp.Symbol("g_s", positive=True)  #: elements sharing one scale (a block), elements
r_c = sp.Symbol("r_c", positive=True)  #: a codec's compression ratio on the KV it moves, 1
B_dec = sp.Symbol("B_dec", positive=True)  #: a codec's decode rate on one GPU, decoded B/s
B_wire = sp.Symbol("B_wire", positive=True)  #: the path's per-GPU bandwidth for the bytes it carries, B/s

#: human-readable meaning and unit of each symbol, for the book's reference chapter
MEANING = {
    T: ("tokens in the cached prefix", "tokens"),
    d: ("hidden size", "elements"),
    L_full: ("layers with full attention", "layers"),
    L_win: ("layers with a sliding window", "layers"),
    L_rec: ("recurrent (linear-attention or SSM) layers", "layers"),
    n_rk: ("recurrent key heads", "heads"), n_rv: ("recurrent value heads", "heads"),
    d_rk: ("recurrent key width per head", "elements"),
    d_rv: ("recurrent value width per head", "elements"),
    k_conv: ("recurrent layers' convolution width", "tokens"),
    b_st: ("bytes per recurrent-state element", "B"),
    B_state: ("per-GPU reload rate of a recurrent state", "B/s"),
    W: ("sliding-window length", "tokens"),
    L_chunk: ("layers with chunked local attention", "layers"),
    C_ch: ("attention chunk of a chunked-local layer", "tokens"),
    e_aux: ("elements cached per token per layer beside the KV (an indexer's keys)", "elements"),
    b_aux: ("bytes per element of that cache, scales included", "B"),
    H_I: ("heads of a sparse layer's lightning indexer", "heads"),
    d_I: ("head width of the lightning indexer", "elements"),
    k_sel: ("keys a sparse layer's query attends (top-k)", "tokens"),
    d_qs: ("query/key width per head of sparse attention", "elements"),
    d_vs: ("value width per head of sparse attention", "elements"),
    n_q: ("query heads", "heads"),
    d_qk: ("query/key width per head", "elements"),
    d_v: ("value width per head", "elements"),
    e_kv: ("KV elements stored per token per layer (whole model)", "elements"),
    b_kv: ("bytes per KV element", "B"),
    rho: ("copies of the KV across the tensor-parallel group", "1"),
    N_lin: ("active matmul parameters in the transformer blocks", "parameters"),
    N_tot: ("all parameters", "parameters"),
    b_w: ("bytes per weight", "B"),
    N_xa: ("routed-expert matmul parameters active per token", "parameters"),
    N_xs: ("routed-expert parameters stored", "parameters"),
    n_kv: ("KV heads", "heads"),
    d_h: ("head dimension", "elements"),
    r_kv: ("MLA latent rank (kv_lora_rank)", "elements"),
    d_rope: ("MLA decoupled RoPE key width", "elements"),
    d_nope: ("MLA non-RoPE query/key width", "elements"),
    r_q: ("MLA query rank (q_lora_rank)", "elements"),
    I_ffn: ("dense MLP intermediate size", "elements"),
    I_exp: ("expert MLP intermediate size", "elements"),
    E: ("routed experts", "experts"),
    k_top: ("routed experts per token", "experts"),
    E_sh: ("shared experts", "experts"),
    L_dense: ("layers with a dense MLP", "layers"),
    L_moe: ("layers with an MoE MLP", "layers"),
    V: ("vocabulary size", "tokens"),
    tied: ("1 if embedding and LM head are tied", "1"),
    K: ("tensor-parallel GPUs of attention (they split the KV)", "GPUs"),
    K_e: ("GPUs the routed experts are spread over", "GPUs"),
    N_node: ("GPUs per node", "GPUs"),
    n_conc: ("replicas reloading at once through one node's shared hops", "replicas"),
    n_gpu: ("reloads at once through one replica's own per-GPU hops", "reloads"),
    rho_s: ("copies of the KV a stored cache holds (1 where the engine stores it once)", "1"),
    f_rope: ("RoPE scaling factor", "1"),
    T_native: ("context window the model was pre-trained at", "tokens"),
    rho_n: ("KV copies a replica reads through node-shared hops", "1"),
    t_lat: ("first-byte latency of the path's hops", "s"),
    c_tok: ("tokens one host-link copy moves", "tokens"),
    c_lay: ("layers one host-link copy spans", "layers"),
    c_split: ("2 if keys and values are copied separately, else 1", "1"),
    q_io: ("I/Os in flight", "1"),
    n_step: ("engine steps between a finished load and the first token (the request's own forward step, plus any wait)", "steps"),
    u_hbm: ("usable fraction of HBM", "1"),
    C_hbm: ("HBM capacity per GPU", "B"),
    P: ("dense peak FLOP/s per GPU", "FLOP/s"),
    eta: ("achieved fraction of peak during prefill", "1"),
    B_hbm: ("effective HBM bandwidth per GPU", "B/s"),
    B: ("effective reload bandwidth per GPU", "B/s"),
    t_0: ("fixed cost of one reload: hop latency plus the engine steps after the load", "s"),
    B_gpu: ("narrowest per-GPU hop of the reload path", "B/s"),
    B_node: ("narrowest node-shared hop of the reload path", "B/s"),
    s_xfer: ("bytes of one transfer", "B"),
    n_seq: ("equal prompts prefilled together", "prompts"),
    t_meas: ("a measured prefill time", "s"),
    t_rec: ("a recompute time from any prefill model", "s"),
    n_new: ("new tokens of the next turn", "tokens"),
    x_split: ("prefix tokens recomputed while the rest loads", "tokens"),
    b_dec: ("sequences in the running decode batch", "sequences"),
    t_req: ("the engine's fixed cost of every request (admission, scheduling, sampling)", "s"),
    c_hash: ("engine cost per prompt token of hashing its blocks for prefix caching", "s/token"),
    c_tokz: ("engine cost per prompt token of tokenising a text prompt", "s/token"),
    c_hit: ("connector cost per token loaded from a tier (lookups, bookkeeping)", "s/token"),
    o_lay: ("1 where the engine loads layer l + 1 while its step computes layer l, else 0", "1"),
    t_rec_p: ("prefill-model time of the T-token prefix", "s"),
    t_rec_pn: ("prefill-model time of the prefix and the new tokens together", "s"),
    t_rec_n: ("prefill-model time of the new tokens alone", "s"),
    t_step: ("one engine step of the reloading request: the new tokens' forward pass over the "
             "loaded prefix, timed by the prefill model in use", "s"),
    p_ret: ("probability the conversation returns", "1"),
    h_route: ("probability a returning conversation reaches the node holding its cache", "1"),
    f_new: ("share of an offloaded cache's bytes new since its previous offload", "1"),
    tau: ("time-to-live of an offloaded cache", "s"),
    lam: ("rate of an exponential pause", "1/s"),
    mu: ("log-median of a lognormal pause", "ln s"),
    sigma: ("log-standard deviation of a lognormal pause", "1"),
    c_gpu: ("price of one GPU-second", "$"),
    c_cap: ("price of holding one byte for one second", "$/(B s)"),
    c_wear: ("price of writing one byte to a drive", "$/B"),
    p_GB: ("a medium's purchase price per 1e9 B", "$/GB"),
    m_amort: ("months a purchase is amortised over", "months"),
    W_life: ("full-drive writes over a drive's rated life", "drive writes"),
    S_gpu: ("GPU-seconds one reuse saves", "GPU s"),
    Bytes: ("bytes of one offloaded cache", "B"),
    r_res: ("resumes per second arriving at a node", "1/s"),
    N_fleet: ("GPU nodes in a fleet", "nodes"),
    r_tok: ("tokens a fleet serves per second, prompt and output", "1/s"),
    n_bits: ("bits of one element of a number format", "bit"),
    s_bits: ("bits of one block's scale (and zero point)", "bit"),
    g_s: ("elements sharing one scale", "elements"),
    r_c: ("a codec's compression ratio on the KV", "1"),
    B_dec: ("a codec's decode rate on one GPU, in decoded bytes", "B/s"),
    B_wire: ("per-GPU path bandwidth for the bytes it carries", "B/s"),
}
