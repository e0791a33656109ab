"""The fleet: N nodes serving one trace step by step as their engines schedule it, the router
placing each request from every replica's live state, each node's tiers replayed for their
traffic, a pool they may share below them.

- :mod:`~kvmath.fleet.routers`: the routers as deployed, one module each (name, code in the
  compiled loop, parameters with their deployed defaults and sources, reach), found by the
  registry;
- :mod:`~kvmath.fleet.serving`: the compiled loop's inputs from a scenario and a trace (each
  replica's engine, step-time tables and KV capacity, the tiers below, the router, an open or a
  closed loop) and the loop run (:func:`~kvmath.fleet.serving.serve`);
- :mod:`~kvmath.fleet.metrics`: what requests saw, as objectives are set on it (TTFT, TPOT, E2E
  at any percentile, throughput, goodput, per node and per window, whether the fleet keeps up);
- :mod:`~kvmath.fleet.routing`: a trace routed over N nodes under one router
  (:func:`~kvmath.fleet.routing.route`: hits, reach, load imbalance, TTFT);
- :mod:`~kvmath.fleet.nodes`: one node's tiers and cost model, its share of the trace, its tiers'
  replay;
- :mod:`~kvmath.fleet.pool`: a pool the nodes share, written through or back, and its price;
- :mod:`~kvmath.fleet.jobs`: where the nodes' tier replays run (Dask, or a thread per core);
- :mod:`~kvmath.fleet.run`: the fleet's answer (:func:`~kvmath.fleet.run.fleet`), the fewest
  nodes that keep up and meet the objectives, and their price.

Importing this package imports nothing (the options import the routers' names from it).
"""
