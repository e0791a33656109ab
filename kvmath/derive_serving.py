"""Beyond the single division: overlap, split loading and the busy server, in SymPy.

Builds on :mod:`kvmath.derive`; every expression is the core one re-used with
new arguments, never a second copy of a formula.

* Layer-wise overlap (CachedAttention, ATC'24): layer l's history KV loads while
  layer l-1 of the new turn computes. Loading hides iff load time <= compute
  time of the new tokens; a pipeline of L equal stages finishes after
  max + min/L of the two.
* Split (Cake, ICML'25): recompute the first x tokens of the history while the
  KV of the other T - x tokens loads; both run at once, so the time is the max
  of the two, minimised where they are equal.
* Busy server (chunked prefill): a decode step is memory-bound, so prefill
  tokens added to it are free up to the ridge point; recompute's marginal cost
  is what lies beyond.
"""
import sympy as sp

from . import symcache as C
from . import derive as D
from .symbols import (B, B_hbm, K, L_full, L_win, N_lin, N_tot, P, T, b_dec, b_w, c_hit, eta,
                      n_new, t_lat, t_req, x_split)

# ------------------------------------------------------------------ overlap (CachedAttention)
#: FLOPs of the next turn's n tokens on top of a T-token history: F(T + n) - F(T)
flops_extend = sp.expand(D.flops_prefill.subs(T, T + n_new) - D.flops_prefill)
#: time to compute the new tokens, s
t_new = flops_extend / (K * eta * P)
#: time to move the history's KV to each GPU, s (no fixed latency)
t_load = D.kv_bytes_per_gpu / B
#: the new turn's forward pass on the flat roofline: its tokens' compute, at least one read of
#: the weights. It is the reloaded request's own engine step, so a reload here adds only its
#: path's first-byte latency and the connector's cost per loaded token to the load (the
#: request's own costs, t_request, are paid either way and left out of both sides), s
t_forward_new = sp.Max(t_new, D.t_weights)
#: time to first token, reload then the new turn's forward, one after the other, s
ttft_serial = t_lat + c_hit * T + t_load + t_forward_new
#: a load and a forward pass of L equal layers, pipelined, written with their two times as
#: symbols (SymPy would merge the forward's own max into the pipeline's), s
load_time, forward_time = sp.symbols("load_time forward_time", nonnegative=True)
ttft_pipeline = (t_lat + c_hit * T + sp.Max(load_time, forward_time)
                 + sp.Min(load_time, forward_time) / (L_full + L_win))
#: time to first token, layer-wise pipelined load and forward over L layers, s
ttft_overlap = ttft_pipeline.subs({load_time: t_load, forward_time: t_forward_new})
#: time to first token, recomputing history and new tokens together, s
ttft_recompute = D.t_recompute.subs(T, T + n_new)
#: CachedAttention's condition: loading hides behind compute iff this is <= 0, s
overlap_slack = t_load - t_new
#: new tokens needed to hide the load of a T-token history (full attention), tokens
n_hide = [r for r in C.solve(sp.Eq(overlap_slack.subs(L_win, 0), 0), n_new)]

# ------------------------------------------------------------------ split (Cake)
#: KV bytes each GPU loads for the history's tokens x..T
split_load_bytes = (D.kv_bytes_total - D.kv_bytes_total.subs(T, x_split)) / K
#: the recompute part: prefill of the first x tokens (compute-bound), s
t_split_compute = D.t_compute.subs(T, x_split)
#: the load part, s: the path's latency and the connector's cost per loaded token, no engine
#: step (the request's forward pass over the new turn follows either part; its own costs are
#: paid either way)
t_split_load = t_lat + c_hit * (T - x_split) + split_load_bytes / B
#: split time for a given x: both run at once, s
t_split = sp.Max(t_split_compute, t_split_load)
#: the balance point where both parts take equal time (full attention), tokens
x_balance = C.solve(sp.Eq(t_split_compute.subs(L_win, 0),
                           t_split_load.subs(L_win, 0)), x_split)

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
busy_advantage = sp.expand((t_reload_busy - (D.t_compute - D.t_compute.subs(T, p_free)))
                           .subs(L_win, 0))
