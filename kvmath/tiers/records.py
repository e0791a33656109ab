"""The records a tier is made of: a :class:`Hop` (a link, how many of it are striped, the node's
share of it, the engine's requests on it) and a :class:`Tier` (its kind, its hops in the order
the bytes cross them, the GPUs it exists on)."""
from __future__ import annotations

from dataclasses import dataclass

#: hop names that stand for the GPU's own host link and its host's memory in a tier
GPU_HOST_LINK, GPU_HOST_MEMORY = "gpu-host-link", "gpu-host-memory"


@dataclass(frozen=True)
class Hop:
    link: str
    count: int  #: parallel units striped (drives, NICs)
    #: the node's share of the units: 1 for its own; 1/N for a pool's, shared by N GPU nodes
    share: float = 1.0
    scope: str | None = None  #: in place of the link's scope (a pool's hops are the node's share)
    engine_io: bool = True  #: the engine's storage reads size this hop (False: a pool's servers)
    #: the engine's requests on this hop: (bytes per request, fixed cost per request in s,
    #: requests in flight); None: the engine profile's storage reads (drives) or none
    requests: tuple | None = None


@dataclass(frozen=True)
class Tier:
    name: str
    description: str
    hops: tuple[Hop, ...]
    #: the GPUs the tier exists on (tiers.csv gpus); empty: every GPU
    #: (kvmath.logic.path.tier_exists_on)
    gpus: tuple = ()
    #: bytes of each GPU node's own host DRAM the tier's store takes (a pool of the GPU nodes'
    #: DRAM, such as Mooncake Store's; kvmath.logic.path.node_tier checks the node has it)
    gpu_node_dram_bytes: float = 0.0
    #: its kind (kvmath.tiers.kinds: tiers.csv kind), which says how it sits on a node, what
    #: prices its capacity and wear, and whether an engine codes KV on it
    kind: str = "host-memory"
    #: what its capacity is made of, where the kind prices it by medium (a pool: dram, nvme)
    medium: str | None = None
