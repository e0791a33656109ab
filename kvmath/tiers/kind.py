"""What a tier kind declares (:class:`TierKind`): one module of :mod:`kvmath.tiers.kinds` each."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class TierKind:
    """A kind of tier: how its tiers sit on a node, what their capacity and wear cost, whether an
    engine moves KV encoded on them, and its place in a node's plan.

    The logic reads the declarative part (:meth:`portable`, in the calculator too); the node plan
    (:mod:`kvmath.node`) calls ``capacity`` and ``bandwidths``."""
    name: str
    about: str
    #: its capacity's price: a prices.csv row (USD per GB) or a number (USD per GB, a kind's
    #: own, said where it comes from in ``about``)
    price: object = None
    #: what its writes wear: "drive" (its tiers' drives, priced over the node drive's rated
    #: lifetime writes, else prices.csv nvme_drive_writes_lifetime) or None
    wear: str | None = None
    #: for a kind whose tiers say their medium (a pool): {medium: [price, wear]} in place of
    #: price and wear
    price_by_medium: dict | None = None
    #: a store every node of a fleet reads (a pool): every returning conversation reaches it
    shared: bool = False
    #: how a tier of it sits on a node (kvmath.logic.path.node_tier): "stripe" (the tier named
    #: ``node_tier`` is the node's own drives striped, any other tier of the kind names drives
    #: of its own and is refused on a node) or "as-is"
    on_node: str = "as-is"
    node_tier: str | None = None  #: the kind's tier that a node's own units make (on_node stripe)
    #: an engine moves KV encoded on it (LMCache codes its remote backends); elsewhere a codec is
    #: a what-if
    coded: bool = False
    #: what one reload reads from it: "every-rank" (host memory every TP rank loads its copy of
    #: a replicated KV from) or "stored" (the engine's stored copies: a drive, a remote store)
    reads: str = "stored"
    #: where its tier stands in a node's plan, youngest caches first (None: not planned on a node)
    plan: int | None = None
    #: the tier of the kind a node's plan holds caches in (its name in tiers.csv, or None for a
    #: tier the plan builds: HBM, a pool)
    plan_tier: str | None = None
    #: bytes a node has of it for the plan (holds(node)), None where the plan sizes it itself
    #: (HBM, a pool); the engine's own cache setting of it, node totals in B (cache: the
    #: settings' key, host_cache_bytes or disk_cache_bytes, and its words), caps it
    holds: Callable | None = field(default=None, compare=False)
    #: (settings key, what, medium[, what the node lacks when it has none]):
    #: ("disk_cache_bytes", "disk cache", "drives", "NVMe drives")
    cache: tuple | None = None
    #: its capacity is the node's host DRAM: a pool of the GPU nodes' own DRAM takes its share
    host_dram: bool = False
    #: the node's read and write rates of it in the plan: "path" (its tier's path rate, every
    #: GPU of the node, both ways) or "drives" (the drives' own read and write rates, drives.csv,
    #: striped and capped by the rest of the path)
    rates: str = "path"
    #: tiers this kind brings of its own, by name (a kind with no tiers.csv rows), and the
    #: GPUs each exists on is in the Tier
    tiers: dict = field(default_factory=dict, compare=False)

    def portable(self):
        """What the portable logic reads of the kind (kvmath.logic.runtime.portable_data)."""
        return {"price": self.price, "wear": self.wear, "price_by_medium": self.price_by_medium,
                "shared": self.shared, "on_node": self.on_node, "node_tier": self.node_tier,
                "coded": self.coded, "reads": self.reads}
