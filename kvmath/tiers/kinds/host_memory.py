"""Host memory: the node's DRAM (or a Grace or Vera tray's LPDDR5X over NVLink-C2C), read by the
GPU over its host link; every TP rank loads its own copy of a replicated KV from it. Priced as
DDR5 (prices.csv ddr5_usd_per_GB), the second tier of a node's plan (the node's host_dram_bytes,
less what a pool of the nodes' DRAM takes, capped by the engine's host cache)."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="host-memory", about=__doc__, price="ddr5_usd_per_GB", reads="every-rank",
                plan=1, plan_tier="host-dram", holds=lambda node: node.host_dram_bytes,
                cache=("host_cache_bytes", "host cache", "DRAM"), host_dram=True)
