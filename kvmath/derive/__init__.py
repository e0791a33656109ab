"""Layer 1, the derivations: SymPy symbols and every expression kvmath evaluates, derived once
(kv: KV bytes, FLOPs, hops and crossings; prefill; reuse; serving), with the checked cache of
slow SymPy results (symcache). Imports nothing of kvmath's above it.
"""
