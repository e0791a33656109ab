"""Beyond the single division: overlap, split loading and the busy server, in SymPy.

Builds on :mod:`kvmath.derive.kv`; every expression is the core one re-used with
new arguments, never a second copy of a formula.

* Layer-wise overlap (CachedAttention, ATC'24): layer l's history KV loads while
  layer l-1 of the new turn computes. Loading hides iff load time <= the new
  turn's forward pass; a pipeline of L equal stages finishes after max + min/L
  of the two. Compute times are symbols here: kvmath.evaluate.serving times them with
  compare's prefill model (the calibrated operator model by default).
* Split (Cake, ICML'25): recompute the first x tokens of the history while the
  KV of the other T - x tokens loads; both run at once, so the time is the max
  of the two, minimised where they are equal.
* Busy server (chunked prefill): a decode step is memory-bound, so prefill
  tokens added to it are free up to the ridge point; recompute's marginal cost
  is what lies beyond.
* Decode at a batch (a fleet's other demand): one step of n_seq sequences at a
  T-token context, their one-token forward (timed by the prefill model) then their
  attention reading every sequence's KV once, never under the roofline of reading
  the weights they touch (the routed experts' touched share, uniform routing).
"""
import sympy as sp

from kvmath.derive import symcache as C
from kvmath.derive import kv as D
from kvmath.derive import prefill as DP
from kvmath.derive.symbols import (B, B_hbm, E, K, K_e, L_win, N_lin, N_tot, N_xs, P, T, V,
                      b_dec, b_w, c_hit, d, eta, n_new, n_seq, t_lat, t_req, tied, x_split)

# ------------------------------------------------------------------ overlap (CachedAttention)
#: FLOPs of the next turn's n tokens on top of a T-token history: F(T + n) - F(T)
flops_extend = sp.expand(D.flops_prefill.subs(T, T + n_new) - D.flops_prefill)
#: time to move the history's KV to each GPU, s (no fixed latency)
t_load = D.kv_bytes_per_gpu / B
#: a load's and a forward pass's times as symbols, so a prefill model other than the flat
#: roofline (the calibrated operator model) can time them (SymPy would also merge the forward's
#: own max into the pipeline's), s
load_time, forward_time = sp.symbols("load_time forward_time", nonnegative=True)
#: time to first token, a load then the forward pass, one after the other, s
ttft_serial_pipe = t_lat + c_hit * T + load_time + forward_time
#: time to first token, the load and the forward pipelined over the L layers, s
ttft_pipeline = (t_lat + c_hit * T + sp.Max(load_time, forward_time)
                 + sp.Min(load_time, forward_time) / D.L_attn)

# ------------------------------------------------------------------ split (Cake)
#: KV bytes each GPU loads for the history's tokens x..T
split_load_bytes = (D.kv_bytes_total - D.kv_bytes_total.subs(T, x_split)) / K
#: the load part, s: the path's latency and the connector's cost per loaded token, no engine
#: step (the request's forward pass over the new turn follows either part; its own costs are
#: paid either way)
t_split_load = t_lat + c_hit * (T - x_split) + split_load_bytes / B
#: the recompute part's time as a symbol, for a prefill model other than the flat roofline, s
part_time = sp.Symbol("part_time", nonnegative=True)
#: split time for a given x and recompute-part time: both run at once, s
t_split_of = sp.Max(part_time, t_split_load)

# ------------------------------------------------------------------ busy server
#: one decode step of the running batch is at least a full weight read, s
t_decode_step = N_tot * b_w / (K * B_hbm)
#: prefill tokens that ride along in a memory-bound decode step for free (ridge point
#: minus the decode batch), tokens
p_free = C.simplify(t_decode_step * K * eta * P / (2 * N_lin) - b_dec)
#: marginal GPU time of recomputing T tokens inside a busy server, s
t_recompute_marginal = sp.Max(0, D.t_compute - D.t_compute.subs(T, p_free))
#: effective bandwidth of a reload issued in chunks of s bytes (fixed cost t_0 per chunk), B/s
B_chunked = D.bandwidth_at_size
#: reload time in a busy server: a what-if overhead t_req charged to the reload alone plus the
#: reload (its fixed cost, the connector per loaded token, the transfer in chunks), s
t_reload_busy = t_req + D.t_reload
#: reload minus marginal recompute in a busy server (beyond the free tokens, full attention)
busy_advantage = sp.expand(D.dense(t_reload_busy - (D.t_compute - D.t_compute.subs(T, p_free)))
                           .subs(L_win, 0))

# ------------------------------------------------------------------ decode at a batch
#: share of a MoE layer's routed experts that one decode step of n_seq sequences touches (each
#: token picks k_top of E, uniform routing: kvmath.derive.prefill.experts_touched over E)
decode_experts_share = DP.experts_touched.subs({T: 1, DP.dpa: 0}) / E
#: weight bytes each GPU reads in that step: everything but the routed experts and the input
#: embedding (a step looks up a row of it per sequence; a tied LM head is read as the head), and
#: the touched share of the routed experts it holds, B
decode_weight_bytes = ((N_tot - N_xs - (1 - tied) * V * d) * b_w / K
                       + decode_experts_share * N_xs * b_w / K_e)
#: the roofline of one decode step of n_seq sequences, each one new token over a T-token
#: context: the maximum of their forwards' compute (kvmath.derive.kv.t_compute's increment from
#: T to T + 1) and reading the touched weights and every sequence's KV once from HBM, s; a lower
#: bound no step can beat
t_decode_batch = sp.Max(n_seq * (D.t_compute.subs(T, T + 1) - D.t_compute),
                        (decode_weight_bytes + n_seq * D.kv_bytes_per_gpu) / B_hbm)
#: one decode step as timed: the forward of n_seq one-token sequences with no context
#: (forward_time: the calibrated operator model's, with its kernels' fixed costs and all-reduces)
#: then their attention reading each sequence's KV once, never under the roofline, s
t_decode_step = sp.Max(t_decode_batch, forward_time + n_seq * D.kv_bytes_per_gpu / B_hbm)
#: GPU time one output token costs in that step: the replica's K GPUs over its n_seq tokens, s
decode_gpu_s_per_token = K * t_decode_step / n_seq
