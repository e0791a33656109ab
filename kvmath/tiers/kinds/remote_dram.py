"""Remote DRAM: another server's memory over an RDMA NIC per GPU (GPUDirect RDMA), as LMCache's
remote backends and Mooncake's transfer engine read it; an engine moves KV encoded here (LMCache
codes its remote backends). Priced as DDR5 (prices.csv ddr5_usd_per_GB); not in a node's plan
(trace --remote-bytes adds one to the replay)."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="remote-dram", about=__doc__, price="ddr5_usd_per_GB", coded=True)
