"""The fleet: N nodes serving one trace, its router placing each request, each node replaying its
share through its own tiers, a pool they may share below them.

- :mod:`~kvmath.fleet.routers`: the routers, one module each (name, code in the compiled
  kernel, reach), found by the registry;
- :mod:`~kvmath.fleet.routing`: a trace routed over N nodes (:func:`~kvmath.fleet.routing.route`:
  hits, reach, load imbalance), on the compiled kernel :mod:`kvmath.traces.simulate.routing`;
- :mod:`~kvmath.fleet.nodes`: one node's setup, decode step, share of the trace and answer;
- :mod:`~kvmath.fleet.pool`: a pool the nodes share, written through or back, and its price;
- :mod:`~kvmath.fleet.jobs`: where the nodes' replays run (Dask, or a thread per core);
- :mod:`~kvmath.fleet.run`: the fleet's answer (:func:`~kvmath.fleet.run.fleet`), the fewest
  nodes that serve a trace and their price.

Importing this package imports nothing (the options import the routers' names from it).
"""
