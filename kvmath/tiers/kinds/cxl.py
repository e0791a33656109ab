"""CXL memory: expander modules on the host's PCIe, read by the GPU over its host link without a
bounce through host DRAM. Priced as DDR5 (prices.csv ddr5_usd_per_GB: the modules hold DDR5; the
controllers are not priced); not in a node's plan."""
from kvmath.tiers.kind import TierKind

KIND = TierKind(name="cxl", about=__doc__, price="ddr5_usd_per_GB")
