"""Layer 6, request traces: readers (formats, statistics), the LRU curve and tier replay
(replay), the compiled cache simulations by what each simulates (simulate: the keyed store, the
tiers, pools, previous turns, routing, the queue, stack distances), and the analytic plan held
against the replay (plan_vs_replay). The fleet that routes a trace over N nodes is the layer
above (:mod:`kvmath.fleet`).
"""
