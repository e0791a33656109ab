"""The tiers a cache can live in: the records a tier is made of (:mod:`~kvmath.tiers.records`:
its hops, its kind), the tier kinds, one module each (:mod:`kvmath.tiers.kinds`: how a kind's
tiers sit on a node, what prices their capacity and wear, whether an engine codes KV on them,
their place in a node's plan), and the tiers built from the tables (:mod:`~kvmath.tiers.build`:
tiers.csv's, the pools', HBM).

A tier's path under an engine and its rates are the logic's (:mod:`kvmath.logic.path`); the
node's plan, which tier holds which caches, is :mod:`kvmath.node`'s.
"""
