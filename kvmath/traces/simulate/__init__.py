"""The compiled cache simulations (numba), one module for what each simulates, over compact
arrays and the requests in arrival order:

- :mod:`~kvmath.traces.simulate.store`: the keyed store they keep what a cache holds in (a hash
  table from a block and a list to an entry, and an LRU order per list), growing on demand;
- :mod:`~kvmath.traces.simulate.tiers`: one node's tiered replay (HBM and the tiers below it,
  a policy, writes back or through, each tier's write bandwidth) and its hits priced;
- :mod:`~kvmath.traces.simulate.pools`: a pool the fleet shares, written through or back;
- :mod:`~kvmath.traces.simulate.turns`: each request's previous turn;
- :mod:`~kvmath.traces.simulate.engine`, :mod:`~kvmath.traces.simulate.batching`: one engine
  replica's KV in HBM and the steps its scheduler builds (vLLM V1, SGLang);
- :mod:`~kvmath.traces.simulate.serve`: a fleet serving its requests step by step, the routers
  placing each from the replicas' live state, open and closed loops;
- :mod:`~kvmath.traces.simulate.routing`: each node's blocks gathered from a served trace;
- :mod:`~kvmath.traces.simulate.distances`: LRU stack and prefix distances (every cache size
  at once).

Each kernel is a plain loop written to give exactly the results of the Python simulation it
replaced (tests/replay_oracle.py, the oracle: the same lookups, insertions and evictions in the
same order, every floating-point sum in the same order). A kernel takes at most seven
positional arguments: what it reads and writes travels in records (named tuples of arrays and
scalars, grouped by what they describe, which numba reads as typed tuples); a function one
calls in its loop gets a record of what it uses and no more, as every array of a record is passed
on each call (a whole node's record had slowed the tier replay by a fifth). A kernel stops at a
request boundary when its store or output arrays could fill, and its Python driver grows them
and resumes it.
Importing this package imports nothing; each module compiles its kernels on first use (cached on
disk).
"""
