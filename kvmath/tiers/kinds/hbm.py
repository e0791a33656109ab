"""HBM: a prefix still in GPU memory (a prefix-cache hit): nothing moves, the engine's own
costs and the new tokens' forward pass remain. The youngest caches of a node's plan, in what the
weights, the activation reserve and the running batch leave. Its holding is priced as DDR5
(prices.csv ddr5_usd_per_GB), an ASSUMPTION (HBM has no price of its own apart from its GPU's:
what-if, a price of your own with --dram-price)."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="hbm", about=__doc__, price="ddr5_usd_per_GB", plan=0)
