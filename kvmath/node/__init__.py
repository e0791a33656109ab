"""A node and what lives where on it: the capacity and read and write rates of each of its tiers
(:mod:`~kvmath.node.capacities`, the one source for the plan and the trace replay) and the plan
itself (:mod:`~kvmath.node.plan`): caches cascading by age through the tiers the kinds place on a
node (:mod:`kvmath.tiers.kinds`: HBM, host memory, its drives, a pool below them), the traffic
each carries at a resume rate, whether the node can run it, what each tier's capacity costs and
is worth.
"""
