"""The reuse condition and tier sizing, in SymPy.

Offloading pays only if the expected saving, P(the turn returns before the cache
is evicted) x (GPU time saved), exceeds what holding and writing the cache cost.
A cache written when a turn ends is kept for a time-to-live tau; the conversation
returns with probability p after a pause drawn from a distribution F.

Sizing follows Little's law: caches held = offloads per second x mean holding time.
"""
import sympy as sp

from .symbols import Bytes, S_gpu, c_cap, c_gpu, c_wear, lam, mu, p_ret, r_res, sigma, tau

_t = sp.Symbol("t", positive=True)

# ------------------------------------------------------------------ pause distributions
#: exponential pause: CDF at tau
F_exp = 1 - sp.exp(-lam * tau)
#: lognormal pause (median e^mu): CDF at tau
F_logn = (1 + sp.erf((sp.log(tau) - mu) / (sigma * sp.sqrt(2)))) / 2


def mean_min(F):
    """E[min(pause, tau)] = integral of the survival function from 0 to tau."""
    return sp.simplify(sp.integrate((1 - F).subs(tau, _t), (_t, 0, tau)))


#: expected time a returning conversation's cache is held, exponential pause, s
hold_return_exp = mean_min(F_exp)
#: the standard normal CDF, kept as a named function for display
Phi = sp.Function("Phi")
#: the same for a lognormal pause, via the partial expectation (display form, with Phi), s
hold_return_logn_display = (sp.exp(mu + sigma ** 2 / 2) * Phi((sp.log(tau) - mu - sigma ** 2) / sigma)
                            + tau * (1 - Phi((sp.log(tau) - mu) / sigma)))
#: ... and with Phi written out through erf, for evaluation
hold_return_logn = hold_return_logn_display.replace(Phi, lambda z: (1 + sp.erf(z / sp.sqrt(2))) / 2)


def holding_time(F, hold_return):
    """Expected holding time of one offloaded cache: returning ones until they return
    (or tau), the others for the full tau, s."""
    return p_ret * hold_return + (1 - p_ret) * tau


def net_value(F, hold_return):
    """Expected value of offloading one cache for tau, $: saving when it returns in time,
    minus capacity held and bytes written."""
    return (p_ret * F * S_gpu * c_gpu - c_cap * Bytes * holding_time(F, hold_return)
            - c_wear * Bytes)


#: net value per offload, exponential and lognormal pause, $
value_exp = net_value(F_exp, hold_return_exp)
value_logn = net_value(F_logn, hold_return_logn)
#: first-order condition for the best TTL: d value / d tau = 0
dvalue_exp = sp.simplify(sp.diff(value_exp, tau))
dvalue_logn = sp.diff(value_logn, tau)
#: the best TTL for an exponential pause, in closed form, s
tau_opt_exp = sp.solve(sp.Eq(dvalue_exp, 0), tau)
#: the break-even return probability: value = 0 solved for p (linear in p)
p_breakeven_exp = sp.solve(sp.Eq(value_exp, 0), p_ret)[0]
p_breakeven_logn = sp.solve(sp.Eq(value_logn, 0), p_ret)[0]

# ------------------------------------------------------------------ Little's law
#: offloads per second when r resumes per second arrive and a fraction p of turns return
offload_rate = r_res / p_ret
#: caches held at once in a tier with TTL tau (Little's law), exponential / lognormal pause
held_exp = offload_rate * holding_time(F_exp, hold_return_exp)
held_logn = offload_rate * holding_time(F_logn, hold_return_logn)
#: read (reload) and write (offload) traffic into a tier, B/s
read_traffic_exp = r_res * F_exp * Bytes
read_traffic_logn = r_res * F_logn * Bytes
write_traffic = offload_rate * Bytes

# ------------------------------------------------------------------ a cascade of tiers
#: CDF of the pause at the youngest and oldest age a tier holds (caches age from tier to tier)
F_lo, F_hi = sp.symbols("F_lo F_hi", nonnegative=True)
#: capacity (B) and bandwidth (B/s) of one tier
C_tier, B_tier = sp.symbols("C_tier B_tier", positive=True)
#: resumes per second served from a tier holding ages [tau_lo, tau_hi)
tier_hits = r_res * (F_hi - F_lo)
#: bytes per second read back from the tier
tier_reads = tier_hits * Bytes
#: bytes per second written into the tier: caches that reached its youngest age unreturned
tier_writes = offload_rate * Bytes * (1 - p_ret * F_lo)
#: how many times over the tier's bandwidth covers its traffic
tier_headroom = B_tier / (tier_reads + tier_writes)
#: share of all resumes the tier serves: a tier short of bandwidth serves only that share
tier_served = (F_hi - F_lo) * sp.Min(1, tier_headroom)
#: net value of the tier per second, $/s: GPU time its hits save, less capacity and wear
tier_value_rate = (r_res * tier_served * S_gpu * c_gpu - c_cap * C_tier
                   - c_wear * tier_writes)
