"""Peer HBM: another GPU's memory in the same NVLink domain, read over the loading GPU's own
NVLink. Its capacity is priced as DDR5 (prices.csv ddr5_usd_per_GB), an ASSUMPTION that
understates it (HBM a peer gives up is worth its GPU's work: what-if, price it with
--dram-price); not in a node's plan."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="peer-hbm", about=__doc__, price="ddr5_usd_per_GB")
