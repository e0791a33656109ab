"""NVMe drives: a node's drives striped (the tier named nvme on a node is its own drives, from
nodes.csv; nvme-1drive and nvme-gen5 name drives of their own), read into host DRAM and then
over the GPU's host link. Priced as NVMe (prices.csv nvme_usd_per_GB), their writes wear the
drives (over the node drive's rated lifetime writes); the third tier of a node's plan (its
drives' bytes, capped by the engine's disk cache), at the drives' own read and write rates."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="drives", about=__doc__, price="nvme_usd_per_GB", wear="drive",
                on_node="stripe", node_tier="nvme", plan=2, plan_tier="nvme",
                holds=lambda node: node.nvme_drives * node.nvme_drive_bytes,
                cache=("disk_cache_bytes", "disk cache", "drives", "NVMe drives"), rates="drives")
