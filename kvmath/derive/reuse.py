"""The reuse condition and tier sizing, in SymPy.

Offloading pays only if the expected saving, P(the turn returns before the cache
is evicted) x (GPU time saved), exceeds what holding and writing the cache cost.
A cache written when a turn ends is kept for a time-to-live tau; the conversation
returns with probability p after a pause drawn from a distribution F.

Sizing follows Little's law: caches held = offloads per second x mean holding time.

Across several nodes a cache helps only when its conversation returns to the node that holds
it: a returning turn reaches the holder with probability h_route (the router's), so every
saving, hit and early release counts p x h_route where one node counts p; offloads still
follow every turn that ends (r / p). A pool every node reads has h_route = 1.
"""
import sympy as sp

from kvmath.derive import symcache as C
from kvmath.derive.symbols import (Bytes, K, N_fleet, N_node, S_gpu, W_life, c_cap, c_gpu, c_wear,
                                   f_new, h_route, lam, m_amort, mu, p_GB, p_ret, r_res, r_tok,
                                   sigma, tau)

_t = sp.Symbol("t", positive=True)

# ------------------------------------------------------------------ prices of holding and writing
#: seconds in a month (a Julian year's twelfth)
SECONDS_PER_MONTH = sp.Rational(1461, 4) * 86400 / 12
#: c_cap at purchase: a medium's price per byte, amortised over m_amort months, $ per byte-second
capacity_price = p_GB / 10 ** 9 / (m_amort * SECONDS_PER_MONTH)
#: c_wear of a drive: its price per byte spread over its rated lifetime writes, $ per byte written
wear_price = p_GB / 10 ** 9 / W_life

# ------------------------------------------------------------------ pause distributions
#: exponential pause: CDF at tau
F_exp = 1 - sp.exp(-lam * tau)
#: lognormal pause (median e^mu): CDF at tau
F_logn = (1 + sp.erf((sp.log(tau) - mu) / (sigma * sp.sqrt(2)))) / 2


def mean_min(F):
    """E[min(pause, tau)] = integral of the survival function from 0 to tau."""
    return C.simplify(C.integrate((1 - F).subs(tau, _t), (_t, 0, tau)))


#: expected time a returning conversation's cache is held, exponential pause, s
hold_return_exp = mean_min(F_exp)
#: the standard normal CDF, kept as a named function for display
Phi = sp.Function("Phi")
#: the same for a lognormal pause, via the partial expectation (display form, with Phi), s
hold_return_logn_display = (sp.exp(mu + sigma ** 2 / 2) * Phi((sp.log(tau) - mu - sigma ** 2) / sigma)
                            + tau * (1 - Phi((sp.log(tau) - mu) / sigma)))
#: ... and with Phi written out through erf, for evaluation
hold_return_logn = hold_return_logn_display.replace(Phi, lambda z: (1 + sp.erf(z / sp.sqrt(2))) / 2)


#: probability an offloaded cache's conversation returns to the node that holds it
p_hit = p_ret * h_route


def holding_time(F, hold_return):
    """Expected holding time of one offloaded cache: those whose conversation returns to its
    node until it does (or tau), the others for the full tau, s."""
    return p_hit * hold_return + (1 - p_hit) * tau


def net_value(F, hold_return):
    """Expected value of offloading one cache for tau, $: saving when it returns in time,
    minus capacity held and bytes written (a cache whose previous version is still held, its
    turn having returned within tau, writes only its new share f_new)."""
    return (p_hit * F * S_gpu * c_gpu - c_cap * Bytes * holding_time(F, hold_return)
            - c_wear * Bytes * (1 - p_hit * F * (1 - f_new)))


#: net value per offload, exponential and lognormal pause, $
value_exp = net_value(F_exp, hold_return_exp)
value_logn = net_value(F_logn, hold_return_logn)
#: first-order condition for the best TTL: d value / d tau = 0
dvalue_exp = C.simplify(sp.diff(value_exp, tau))
dvalue_logn = sp.diff(value_logn, tau)
#: the best TTL for an exponential pause, in closed form, s
tau_opt_exp = C.solve(sp.Eq(dvalue_exp, 0), tau)
#: the break-even return probability: value = 0 solved for p (linear in p)
p_breakeven_exp = C.solve(sp.Eq(value_exp, 0), p_ret)[0]
p_breakeven_logn = C.solve(sp.Eq(value_logn, 0), p_ret)[0]

# ------------------------------------------------------------------ Little's law
#: offloads per second when r resumes per second arrive and a fraction p of turns return
offload_rate = r_res / p_ret
#: caches held at once in a tier with TTL tau (Little's law), exponential / lognormal pause
held_exp = offload_rate * holding_time(F_exp, hold_return_exp)
held_logn = offload_rate * holding_time(F_logn, hold_return_logn)
#: read (reload) and write (offload) traffic into a tier, B/s
read_traffic_exp = r_res * h_route * F_exp * Bytes
read_traffic_logn = r_res * h_route * F_logn * Bytes
write_traffic = offload_rate * Bytes

# ------------------------------------------------------------------ a cascade of tiers
#: CDF of the pause at the youngest and oldest age a tier holds (caches age from tier to tier)
F_lo, F_hi = sp.symbols("F_lo F_hi", nonnegative=True)
#: capacity (B) and bandwidth (B/s) of one tier
C_tier, B_tier = sp.symbols("C_tier B_tier", positive=True)
#: resumes per second served from a tier holding ages [tau_lo, tau_hi)
tier_hits = r_res * h_route * (F_hi - F_lo)
#: bytes one resume reads from the tier, B: a stored cache's bytes, or every rank's copy when each
#: rank loads the one shared copy from host memory (vLLM's single-copy MLA slot)
Bytes_read = sp.Symbol("Q_r", positive=True)
#: bytes per second read back from the tier
tier_reads = tier_hits * Bytes_read
#: share of the caches reaching the tier whose previous version it still holds: their turn
#: before was served from this tier's ages (successive pauses independent), so the engine,
#: which writes only the blocks a store lacks (vLLM's and LMCache's lookup before store),
#: writes only their new blocks, f_new of them. ASSUMED: a tier keeps a cache's blocks after
#: a reload from it (as an LRU store does) until the cache comes back to it, a holding the
#: Little's-law count (released at the return) does not charge
tier_held_before = p_hit * (F_hi - F_lo)
#: bytes per second written into the tier: caches that reached its youngest age unreturned,
#: less the blocks it already holds
tier_writes = offload_rate * Bytes * (1 - p_hit * F_lo) * (1 - tier_held_before * (1 - f_new))
#: write bandwidth of the tier, B/s (B_tier is its read bandwidth)
B_write = sp.Symbol("B_write", positive=True)


def time_shared(writes):
    """The time-shared rule for a tier reading tier_reads and writing ``writes`` (B/s):
    (utilisation, headroom, admitted, served, carried, dropped).

    A drive (or a shared DRAM bus) spends its time either reading or writing, so reads and
    writes share it in proportion to their bandwidths: its busy fraction is the utilisation, and
    its headroom how many times over its bandwidth covers the traffic (below 1: it cannot keep
    up). It admits every cache reaching it while it keeps up, otherwise only as many as its read
    and write bandwidth carry together; it serves the hits among the caches it admitted; it
    writes admitted x writes (never above B_write) and drops the rest (counted, never priced:
    nothing is written)."""
    utilisation = tier_reads / B_tier + writes / B_write
    headroom = 1 / utilisation
    admitted = sp.Min(1, headroom)
    return (utilisation, headroom, admitted, h_route * (F_hi - F_lo) * admitted,
            writes * admitted, writes * (1 - admitted))


#: a tier of the node's cascade: utilisation, headroom, admitted share, share of resumes served,
#: bytes per second written and dropped
(tier_utilisation, tier_headroom, tier_admitted, tier_served, tier_writes_carried,
 tier_writes_dropped) = time_shared(tier_writes)
#: net value of the tier per second at purchase cost, $/s: GPU time its hits save, less
#: amortised capacity and wear on the bytes actually written
tier_value_rate = (r_res * tier_served * S_gpu * c_gpu - c_cap * C_tier
                   - c_wear * tier_writes_carried)
#: the same on a node already bought: capacity is sunk, only wear is paid
tier_value_rate_fixed = r_res * tier_served * S_gpu * c_gpu - c_wear * tier_writes_carried

# ------------------------------------------------------------------ a write-through tier
#: a tier every offload is written to as well (a pool the engine writes through to: LMCache
#: stores each chunk in every backend it has), holding ages [0, tau) of every cache: F_lo then
#: stands for the share of returns the tiers above it serve (h_route x F at their last age),
#: so it serves the rest of its ages, reads tier_reads, and takes every offload
#: (less the blocks of caches whose previous version it holds: returns within its ages)
tier_writes_through = offload_rate * Bytes * (1 - p_hit * F_hi * (1 - f_new))
(tier_utilisation_through, tier_headroom_through, tier_admitted_through, tier_served_through,
 tier_writes_through_carried, tier_writes_through_dropped) = time_shared(tier_writes_through)

# ------------------------------------------------------------------ a write-back pool below a fleet
#: a tier below the node's own tiers that every node reads (a pool written back to): a cache
#: reaches it at its youngest age unless its conversation returned to its own node before (the
#: node's reach h_above), and it serves every return in its ages (h_route = 1 there)
h_above = sp.Symbol("h_above", positive=True)
tier_writes_back = (offload_rate * Bytes * (1 - p_ret * h_above * F_lo)
                    * (1 - tier_held_before * (1 - f_new)))
(tier_utilisation_back, tier_headroom_back, tier_admitted_back, tier_served_back,
 tier_writes_back_carried, tier_writes_back_dropped) = time_shared(tier_writes_back)
#: caches it holds beyond what held_* counts with every return releasing one (h_route = 1):
#: those whose conversation returned to another node before reaching it, for their ages past
#: its youngest, tau_lo
tau_lo = sp.Symbol("tau_lo", nonnegative=True)
held_back_extra = offload_rate * p_ret * (1 - h_above) * F_lo * (tau - tau_lo)

# ------------------------------------------------------------------ holding priced by opportunity
#: on a fixed node a held cache costs the cache it displaces: the marginal hits a tier gains
#: per extra byte held at its TTL edge (d hits / d tau over d bytes held / d tau), per second
marginal_hits_per_byte_exp = C.simplify(sp.diff(r_res * h_route * F_exp, tau)
                                         / sp.diff(held_exp * Bytes, tau))
marginal_hits_per_byte_logn = C.simplify(sp.diff(r_res * h_route * F_logn, tau)
                                          / sp.diff(held_logn * Bytes, tau))
#: opportunity price of holding one byte for one second, $/(B s): those hits' saved GPU time
c_cap_opportunity_exp = marginal_hits_per_byte_exp * S_gpu * c_gpu
c_cap_opportunity_logn = marginal_hits_per_byte_logn * S_gpu * c_gpu

# ------------------------------------------------------------------ HBM left for the tier
#: GPUs of the node, HBM per GPU (B), the fraction the engine uses, the share of that kept
#: for activations and workspace, sequences in the running batch and KV bytes of each
N_gpus = sp.Symbol("N_gpus", positive=True)
C_hbm = sp.Symbol("C_hbm", positive=True)
u_hbm = sp.Symbol("u_hbm", positive=True)
a_act = sp.Symbol("a_act", nonnegative=True)
n_batch = sp.Symbol("n_batch", nonnegative=True)
Q_batch = sp.Symbol("Q_batch", nonnegative=True)
W_bytes = sp.Symbol("W_bytes", positive=True)  #: weights of one model copy (one TP group), B
#: HBM of the node the paused caches may use: utilised HBM less the activation reserve, the
#: weights of every TP group (N_gpus / K copies) and the running batch's KV, B
hbm_tier_bytes = (N_gpus * C_hbm * u_hbm * (1 - a_act) - W_bytes * N_gpus / K
                  - n_batch * Q_batch)

# ------------------------------------------------------------------ compute feasibility
#: share of resumes recomputed, and the time one recompute takes on its K GPUs, s
f_rec = sp.Symbol("f_rec", nonnegative=True)
t_rec = sp.Symbol("t_rec", positive=True)
#: GPU-seconds of prefill the recomputed resumes demand per second
prefill_demand = r_res * f_rec * t_rec * K
#: how many times over the node's GPUs cover that demand (below 1: infeasible)
compute_headroom = N_gpus / prefill_demand

# ------------------------------------------------------------------ NVMe endurance
#: drives of the tier, capacity of one (B), rated drive writes per day and warranty years
n_drives = sp.Symbol("n_drives", positive=True)
C_drive = sp.Symbol("C_drive", positive=True)
dwpd_rated = sp.Symbol("DWPD_rated", positive=True)
years_rated = sp.Symbol("Y_rated", positive=True)
W_carried = sp.Symbol("W_carried", nonnegative=True)  #: bytes per second written to the tier
#: full-drive writes per day at the plan's write rate
drive_writes_per_day = W_carried * 86400 / (n_drives * C_drive)
#: sustained write rate the rated endurance allows, B/s (DWPD full-array writes per day)
endurance_write_budget = dwpd_rated * n_drives * C_drive / 86400
#: years until the rated endurance (DWPD x warranty) is used up at that rate
drive_lifetime_years = dwpd_rated * years_rated / drive_writes_per_day


# ------------------------------------------------------------------ a fleet's price
#: what a fleet's GPUs cost per million tokens it serves (prompt and output): N_fleet nodes of
#: N_node GPUs at c_gpu per GPU-second, serving r_tok tokens per second, $
fleet_cost_per_million_tokens = 10 ** 6 * N_fleet * N_node * c_gpu / r_tok
#: raw bytes of a pool's media (its KV capacity times the copies it keeps of each)
pool_raw_bytes = sp.Symbol("pool_raw_bytes", nonnegative=True)
#: what a pool's media cost per million tokens the fleet serves: holding its raw bytes at c_cap
#: and wearing them at c_wear for the W_carried bytes per second its replicas take, $
pool_cost_per_million_tokens = 10 ** 6 * (c_cap * pool_raw_bytes + c_wear * W_carried) / r_tok
