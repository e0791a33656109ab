"""A pool: a KV store shared by several GPU nodes (pools.csv: Mooncake Store's DRAM, 3FS's
drives), its servers' media and NICs split over the nodes, read over the node's client NICs at
the engine's request size; every node reaches it, and an engine moves KV encoded here. Its
capacity is priced as its medium, NVMe's writes wearing its drives (its servers, CPUs and NICs
are not priced: a lower bound); the last tier of a node's plan, written through or back."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="pool", about=__doc__, shared=True, coded=True, plan=3,
                price_by_medium={"dram": ["ddr5_usd_per_GB", None],
                                 "nvme": ["nvme_usd_per_GB", "drive"]})
