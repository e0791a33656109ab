"""A calibrated prefill model: per-operator times summed over the layers, in SymPy.

The flat model (:data:`kvmath.derive.kv.t_recompute`) charges all prefill FLOPs at
one fraction of peak. Here each operator has its own cost:

* GEMM of m tokens through a k x n weight: ``2 m k n`` FLOP at
  ``eta_gemm(m) = r_dt * eta_g * m / (m + m_half)`` of peak P, never faster than
  reading its weight once (``k n b_w / B_hbm``), plus a fixed kernel cost.
  ``eta_g`` is fitted and bounded by the measured matmul ceiling (MAMF), so
  ``eta_gemm < 1`` always. ``r_dt`` is the FP8/BF16 ratio of measured MAMF
  fractions (1 for BF16).
* Non-GEMM ops (RMSNorm, RoPE, activation, residual add) are memory-bound: each
  moves a known number of elements per token at a fitted fraction of the HBM
  datasheet bandwidth (one fraction per op class), plus a fixed kernel cost.
* Attention (scores and weighted values): :data:`kvmath.derive.kv.flops_attention`
  at the kernel's own efficiency ``eta_a * T / (T + T_a)`` (fitted to published
  FlashAttention throughput), on the BF16 peak.
* Tensor-parallel all-reduce: two per layer of ``m d b_act`` bytes, ring time
  ``2 (K-1)/K bytes / busbw`` plus a latency (nccl-tests busbw definition).
* MoE: one fused operator per layer (routing, permutation, grouped GEMMs,
  activation, unpermutation: what engines run and aiconfigurator times), with its
  own measured efficiency per GPU, engine kernels, expert dtype and layout class
  (``moe_fit.csv``). Only the experts the tokens touch are charged,
  ``E (1 - (1 - k/E)^m)`` of them per layer (uniform routing), each a GEMM of its
  own ``m k / touched`` tokens (times an imbalance factor across expert-parallel
  ranks) at ``eta_moe m/(m + m_half_moe)`` of the experts' dtype peak, slowed by
  the expert's width on one GPU ``n = I/K_x`` as ``n/(n + n_half_moe)`` (expert
  tensor parallelism narrows every expert GEMM); never faster than reading the
  touched experts' weights at their stored dtype; the router and shared experts
  are GEMMs of the rank's tokens.
* MoE communication as engines run it: with tensor-parallel attention every rank
  holds every token, so no dispatch: each rank runs its experts on them and the
  layer's output is all-reduced over the attention group (``dpa = 0``); with
  data-parallel attention (``dpa = 1``) each rank sends its own tokens'
  activations ``c_disp`` times (all-to-all: once per distinct destination rank
  other than its own; all-gather: to every other rank) in the dispatch dtype and
  receives them back in the combine dtype, over the all-to-all's bandwidth.

Parallel layout: the attention and dense parts of a request run on ``K_d`` GPUs
(``K`` under plain TP; ``tp_attn`` under data-parallel attention), the routed
experts on ``ep`` ranks, each expert split ``K_x`` ways. ``m = n_seq T`` tokens of
one attention group; with data-parallel attention the ``ep / K_d`` groups route
``m ep / K_d`` tokens to the experts.
"""
import sympy as sp

from kvmath.derive import kv as D
from kvmath.derive import symcache as C
from kvmath.derive.attention import FAMILIES
from kvmath.derive.symbols import (
    B_hbm, E, E_sh, I_exp, I_ffn, L_dense, L_moe, L_rec, P, T, V, b_w, d, d_rk,
    d_rv, k_top, n_rk, n_rv, n_seq,
)

_pos = dict(positive=True)
_nonneg = dict(nonnegative=True)

# ---------------------------------------------------------------- new symbols (this model only)
m_tok = sp.Symbol("m", **_pos)  #: tokens through one GEMM (rows of the activation)
k_in = sp.Symbol("k_in", **_pos)  #: GEMM inner dimension (weight rows)
n_out = sp.Symbol("n_out", **_pos)  #: GEMM output dimension (weight columns, this GPU's share)
eta_g = sp.Symbol("eta_g", **_pos)  #: fitted asymptotic GEMM efficiency, fraction of BF16 peak
m_half = sp.Symbol("m_half", **_nonneg)  #: tokens at which a GEMM reaches half of eta_g
t_kern = sp.Symbol("t_kern", **_nonneg)  #: fixed cost of one GEMM kernel, s
t_kng = sp.Symbol("t_kng", **_nonneg)  #: fixed cost of one non-GEMM kernel, s
r_dt = sp.Symbol("r_dt", **_pos)  #: compute-dtype efficiency ratio (FP8 MAMF fraction / BF16), 1 for BF16
b_act = sp.Symbol("b_act", **_pos)  #: bytes per activation element (2, BF16)
B_peak = sp.Symbol("B_peak", **_pos)  #: datasheet HBM bandwidth per GPU, B/s
eta_norm = sp.Symbol("eta_norm", **_pos)  #: RMSNorm fraction of B_peak
eta_rope = sp.Symbol("eta_rope", **_pos)  #: RoPE fraction of B_peak
eta_act = sp.Symbol("eta_act", **_pos)  #: gated-activation fraction of B_peak
eta_add = sp.Symbol("eta_add", **_pos)  #: residual-add (and MoE permute) fraction of B_peak
eta_a = sp.Symbol("eta_a", **_pos)  #: asymptotic attention-kernel efficiency, fraction of P_a
T_a = sp.Symbol("T_a", **_nonneg)  #: sequence length at which attention reaches half of eta_a
P_a = sp.Symbol("P_a", **_pos)  #: peak FLOP/s the attention kernel runs on (BF16 dense)
busbw = sp.Symbol("busbw", **_pos)  #: all-reduce bus bandwidth (nccl-tests definition), B/s
t_lat = sp.Symbol("t_ar", **_nonneg)  #: fixed latency of one all-reduce, s
K_d = sp.Symbol("K_d", positive=True, integer=True)  #: GPUs the attention and dense parts run on
K_e = sp.Symbol("K_x", positive=True, integer=True)  #: ways each expert is split (expert TP)
ep = sp.Symbol("ep", positive=True, integer=True)  #: expert-parallel ranks
f_imb = sp.Symbol("f_imb", **_pos)  #: load imbalance: busiest EP rank's tokens over the mean
eta_m = sp.Symbol("eta_moe", **_pos)  #: fused MoE operator's asymptotic efficiency, fraction of P_moe
m_half_m = sp.Symbol("m_half_moe", **_nonneg)  #: tokens per expert at half of eta_moe
n_half_m = sp.Symbol("n_half_moe", **_nonneg)  #: expert width on one GPU at half of eta_moe
t_m = sp.Symbol("t_moe", **_nonneg)  #: fixed cost of one of the fused operator's two GEMM kernels, s
P_m = sp.Symbol("P_moe", **_pos)  #: peak FLOP/s of the experts' compute dtype
b_m = sp.Symbol("b_moe", **_pos)  #: bytes per routed-expert weight at its stored dtype
dpa = sp.Symbol("dpa", nonnegative=True)  #: 1 with data-parallel attention (dispatch), else 0
c_disp = sp.Symbol("c_disp", **_nonneg)  #: copies of each own token a rank sends per dispatch
b_disp = sp.Symbol("b_disp", **_pos)  #: bytes per activation element dispatched
b_comb = sp.Symbol("b_comb", **_pos)  #: bytes per activation element combined
bw_a2a = sp.Symbol("busbw_a2a", **_pos)  #: per-GPU bandwidth of the expert dispatch, B/s
t_a2a = sp.Symbol("t_a2a", **_nonneg)  #: fixed latency of one dispatch or combine, s
n_nodes = sp.Symbol("n_nodes", positive=True)  #: nodes the ep ranks span (1 within a node)
c_node = sp.Symbol("c_node", **_nonneg)  #: copies of each own token a rank sends over its NIC
B_nic = sp.Symbol("B_nic", **_pos)  #: between-node bandwidth per GPU (its NIC), B/s

MEANING = {
    m_tok: ("tokens through one GEMM", "tokens"), k_in: ("GEMM inner dimension", "elements"),
    n_out: ("GEMM output dimension on this GPU", "elements"),
    eta_g: ("asymptotic GEMM efficiency", "1"), m_half: ("tokens at half GEMM efficiency", "tokens"),
    t_kern: ("fixed cost of a GEMM kernel", "s"), t_kng: ("fixed cost of a non-GEMM kernel", "s"),
    r_dt: ("FP8 over BF16 matmul-efficiency ratio", "1"), b_act: ("bytes per activation", "B"),
    B_peak: ("datasheet HBM bandwidth", "B/s"), eta_norm: ("RMSNorm share of HBM peak", "1"),
    eta_rope: ("RoPE share of HBM peak", "1"), eta_act: ("activation share of HBM peak", "1"),
    eta_add: ("residual-add share of HBM peak", "1"), eta_a: ("asymptotic attention efficiency", "1"),
    T_a: ("sequence length at half attention efficiency", "tokens"),
    P_a: ("peak FLOP/s of the attention kernel", "FLOP/s"),
    busbw: ("all-reduce bus bandwidth", "B/s"), t_lat: ("all-reduce latency", "s"),
    K_d: ("GPUs running attention and dense parts", "GPUs"), K_e: ("ways each expert is split", "1"),
    ep: ("expert-parallel ranks", "GPUs"), f_imb: ("expert load imbalance", "1"),
    eta_m: ("asymptotic fused-MoE efficiency", "1"),
    m_half_m: ("tokens per expert at half MoE efficiency", "tokens"),
    n_half_m: ("expert width per GPU at half MoE efficiency", "elements"),
    t_m: ("fixed cost of a fused-MoE GEMM kernel", "s"),
    P_m: ("peak FLOP/s of the experts' compute dtype", "FLOP/s"),
    b_m: ("bytes per stored expert weight", "B"), dpa: ("data-parallel attention (0 or 1)", "1"),
    c_disp: ("copies of a token a rank dispatches", "1"), b_disp: ("bytes per dispatched element", "B"),
    b_comb: ("bytes per combined element", "B"), bw_a2a: ("expert dispatch bandwidth", "B/s"),
    c_node: ("copies of a token a rank sends over its NIC", "1"), B_nic: ("NIC bandwidth per GPU", "B/s"),
    n_nodes: ("nodes the expert-parallel ranks span", "1"),
    t_a2a: ("latency of one dispatch or combine", "s"),
}
# e_tok and eta_mem (one memory-bound op's elements per token and its share of B_peak) below

# ---------------------------------------------------------------- one GEMM
#: GEMM efficiency at m tokens, fraction of P (< r_dt * eta_g <= MAMF fraction < 1)
eta_gemm = r_dt * eta_g * m_tok / (m_tok + m_half)
#: compute time of an m x k x n GEMM, s (2mkn FLOP at eta_gemm; written without m in a denominator)
t_gemm_compute = 2 * k_in * n_out * (m_tok + m_half) / (r_dt * eta_g * P)
#: reading the k x n weight once, s: the GEMM's memory floor
t_gemm_floor = k_in * n_out * b_w / B_hbm
#: one GEMM: fixed cost plus the slower of compute and weight read, s
t_gemm = t_kern + sp.Max(t_gemm_compute, t_gemm_floor)


def gemm(m, k, n):
    """t_gemm for m tokens through a k x n weight (SymPy expressions in, expression out)."""
    return C.subs(t_gemm, {m_tok: m, k_in: k, n_out: n})


def gemm_parts(m, k, n):
    """(compute, floor) of the same GEMM, for the breakdown."""
    s = {m_tok: m, k_in: k, n_out: n}
    return t_gemm_compute.subs(s, simultaneous=True), t_gemm_floor.subs(s, simultaneous=True)


# ---------------------------------------------------------------- one memory-bound op
e_tok = sp.Symbol("e_tok", **_pos)  #: elements one memory-bound op moves per token
eta_mem = sp.Symbol("eta_mem", **_pos)  #: its fraction of B_peak
#: one memory-bound kernel of m tokens: fixed cost plus its bytes at eta_mem of B_peak, s
t_membound = t_kng + m_tok * e_tok * b_act / (eta_mem * B_peak)


def membound(m, elements, eff):
    """t_membound for m tokens moving `elements` per token at fraction eff of B_peak."""
    return t_membound.subs({m_tok: m, e_tok: elements, eta_mem: eff}, simultaneous=True)


#: elements per token each non-GEMM op class moves (read + write), per layer, this GPU (RoPE's:
#: each attention family's ``rope_elements``)
norm_elements = 2 * (2 * d)  # two RMSNorms, read d write d
add_elements = 2 * (3 * d)  # two residual adds, read 2d write d
act_elements_dense = 3 * I_ffn / K_d  # SiLU-and-mul: read gate and up, write one
#: an MoE layer's own memory-bound activation: the shared experts' (the routed experts'
#: activation and permutation are inside the fused MoE operator)
act_elements_moe = 3 * E_sh * I_exp / K_d

m_all = n_seq * T  #: tokens in the forward pass


def nongemm_layer(rope_elements, act_elements, act_runs=True):
    """Memory-bound ops of one layer, s; the activation's only where ``act_runs`` holds (a SymPy
    condition: an MoE layer's own activation is its shared experts')."""
    act = membound(m_all, act_elements, eta_act)
    if act_runs is not True:
        act = sp.Piecewise((act, act_runs), (0, True))
    return (membound(m_all, norm_elements / 2, eta_norm) * 2
            + membound(m_all, add_elements / 2, eta_add) * 2
            + membound(m_all, rope_elements, eta_rope) + act)


# ---------------------------------------------------------------- all-reduce
def allreduce(group):
    """One ring all-reduce of the layer output over `group` GPUs (0 for one GPU), s."""
    bytes_ = m_all * d * b_act
    return sp.Piecewise((0, sp.Le(group, 1)),
                        (t_lat + 2 * (group - 1) / group * bytes_ / busbw, True))


# ---------------------------------------------------------------- the layer pieces
#: GEMM shapes (k, n) on one GPU, per layer; the attention projections' are each attention
#: family's (kvmath.derive.attention)
#: a hybrid model's recurrent layer (Gated DeltaNet, Mamba-2): the fused input projection
#: (queries, keys, values, output gate and two gates per value head) and the output, split by
#: head over K_d GPUs
shapes_recurrent = [(d, (2 * n_rk * d_rk + 2 * n_rv * d_rv + 2 * n_rv) / K_d), (n_rv * d_rv / K_d, d)]
#: dense gated MLP: fused gate+up and down
shapes_mlp_dense = [(d, 2 * I_ffn / K_d), (I_ffn / K_d, d)]
#: router and shared experts, GEMMs of all m tokens
shapes_router = [(d, E)]
shapes_shared = [(d, 2 * E_sh * I_exp / K_d), (E_sh * I_exp / K_d, d)]


def gemms(shapes, m=None):
    """Sum of t_gemm over a list of (k, n) shapes at m tokens (default all tokens)."""
    return sp.Add(*(gemm(m_all if m is None else m, k, n) for k, n in shapes))


def floors(shapes):
    """Sum of the weight-read floors of a list of (k, n) shapes, s."""
    return sp.Add(*(gemm_parts(1, k, n)[1] for k, n in shapes))


mlp_dense = gemms(shapes_mlp_dense)

#: tokens the routed experts of an expert-parallel group see: the attention group's own with
#: tensor-parallel attention (every rank holds them all), every group's with data-parallel
#: attention (ep / K_d groups of m tokens)
m_moe = m_all * (1 - dpa + dpa * ep / K_d)
#: expected distinct experts a layer touches when m tokens each pick k of E (uniform routing)
experts_touched = E * (1 - (1 - k_top / E) ** m_moe)
#: tokens each touched expert sees on average: the m k routed copies over the touched experts
m_expert = m_moe * k_top / experts_touched
#: routed experts on the busiest rank: the fused operator's grouped GEMMs (2 kernels) of the
#: experts_touched / ep experts a rank holds that the tokens reach, each at its own m_expert
#: tokens and at eta_moe n/(n + n_half_moe) for an expert n = I/K_x wide on the GPU; an expert no
#: token reaches costs nothing (written without m_expert or n in a denominator)
moe_routed_compute = (f_imb / ep * 6 * d * (I_exp / K_e + n_half_m)
                      * (m_moe * k_top + experts_touched * m_half_m) / (eta_m * P_m))
#: their weight-read floor: the touched experts' slices on one rank, at their stored dtype
moe_routed_floor = experts_touched / ep * 3 * d * I_exp / K_e * b_m / B_hbm
moe_routed = 2 * t_m + sp.Max(moe_routed_compute, moe_routed_floor)
#: router and shared experts: GEMMs of all m tokens
moe_router_shared = gemms(shapes_router) + sp.Piecewise((0, sp.Eq(E_sh, 0)),
                                                       (gemms(shapes_shared), True))
#: copies of each of its own tokens a rank sends in an all-to-all dispatch: once per distinct
#: destination rank of its k experts other than its own (DeepEP's is_token_in_rank; uniform
#: routing over ep ranks)
c_disp_alltoall = (ep - 1) * (1 - (1 - 1 / ep) ** k_top)
#: ... in an all-gather dispatch (vLLM's default allgather_reducescatter): to every other rank
c_disp_allgather = ep - 1
#: copies of each own token that cross a NIC in an all-to-all dispatch across nodes: once per
#: distinct other destination node (DeepEP sends a token over RDMA once per node and forwards it
#: over NVLink; uniform routing over the nodes)
c_node_alltoall = (n_nodes - 1) * (1 - (1 - 1 / n_nodes) ** k_top)
#: ... in an all-gather across nodes: to every rank off the node
c_node_allgather = ep - ep / n_nodes
#: expert-parallel dispatch and combine under data-parallel attention: each rank sends its own
#: tokens' activations c_disp times in the dispatch dtype and gets them back in the combine dtype
moe_dispatch = sp.Piecewise(
    (0, sp.Le(ep, 1)),
    (2 * t_a2a + m_all * d * (b_disp + b_comb) * sp.Max(c_disp / bw_a2a, c_node / B_nic), True))
#: an MoE layer's communication: the all-reduce of its output over the attention group with
#: tensor-parallel attention (no dispatch: every rank holds every token), the dispatch and combine
#: with data-parallel attention
moe_comm = (1 - dpa) * allreduce(K_d) + dpa * moe_dispatch

# ---------------------------------------------------------------- attention kernel
#: attention-kernel efficiency at sequence length T, fraction of P_a
eta_attention = eta_a * T / (T + T_a)
#: attention scores and values of n_seq sequences of T tokens, heads split K_d ways, s
t_attention = (n_seq * D.flops_attention * (T + T_a) / (K_d * eta_a * T * P_a)
               + D.L_attn * t_kern)

#: the recurrent layers' mixing kernel (chunked gated delta rule or selective scan) of n_seq
#: sequences: kvmath.derive.kv.flops_recurrent at the attention kernel's asymptotic efficiency
#: (ASSUMED: no such kernel's throughput is bundled; the chunked kernels run well below the GEMM
#: curve), heads split K_d ways, one kernel per layer, s
t_recurrent_mix = (n_seq * D.flops_recurrent / (K_d * eta_a * P_a)
                   + sp.Piecewise((0, sp.Eq(L_rec, 0)), (L_rec * t_kern, True)))

# ---------------------------------------------------------------- LM head for the first token
#: one logit row per sequence; its weight is read once
t_lm_head = gemm(n_seq, d, V / K_d)

# ---------------------------------------------------------------- whole model
L_all = D.L_attn


def _model(attn_proj, rope_elements):
    parts = {
        "gemm_s": L_all * attn_proj + L_dense * mlp_dense,
        "nongemm_s": (L_dense * nongemm_layer(rope_elements, act_elements_dense)
                      + L_moe * nongemm_layer(rope_elements, act_elements_moe,
                                              sp.Gt(E_sh, 0))),
        "attention_s": t_attention,
        "allreduce_s": (L_all * allreduce(K_d) + L_dense * allreduce(K_d)
                        + L_moe * (1 - dpa) * allreduce(K_d)),
        "moe_s": L_moe * (moe_routed + moe_router_shared + dpa * moe_dispatch),
        "lm_head_s": t_lm_head,
        # a hybrid model's recurrent layers: their projections, mixing kernel and all-reduce
        "recurrent_s": (L_rec * (gemms(shapes_recurrent) + allreduce(K_d)) + t_recurrent_mix),
    }
    return parts


#: the parts of the calibrated prefill time (s) of each attention family's models
PARTS = {name: _model(fam.projections(gemms, K_d), fam.rope_elements(K_d))
         for name, fam in FAMILIES.items()}
#: calibrated prefill time of each family's models, s
T_PREFILL = {name: sp.Add(*parts.values()) for name, parts in PARTS.items()}


#: weight-read floor of the whole prefill, s (informative; every GEMM already takes its max)
_floor_moe = moe_routed_floor + floors(shapes_router) + sp.Piecewise(
    (0, sp.Eq(E_sh, 0)), (floors(shapes_shared), True))
_floor_rest = L_dense * floors(shapes_mlp_dense) + L_moe * _floor_moe + floors([(d, V / K_d)])
_floor_rest += L_rec * floors(shapes_recurrent)
#: the same, each attention family's models
WEIGHTS_FLOOR = {name: L_all * fam.projections(floors, K_d) + _floor_rest
                 for name, fam in FAMILIES.items()}

