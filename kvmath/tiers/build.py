"""Tiers built from rows: the tiers of tiers.csv (hops in file order, the kind each row names),
a pool's tier as one of the GPU nodes sharing it sees it, the bundled pools as tiers, and the
tier of a prefix still in GPU memory."""
from __future__ import annotations

from dataclasses import replace

from kvmath.tables.schema import DataError, data_path, table
from kvmath.tiers.records import GPU_HOST_LINK, GPU_HOST_MEMORY, Hop, Tier

#: the tier a prefix still in GPU memory is "loaded" from: no hop, no connector; the engine's
#: request costs and the new tokens' forward pass remain
HBM_TIER = Tier("hbm", "the prefix still in GPU memory (a prefix-cache hit: nothing moves)", (),
                kind="hbm")


def tiers_of(rows, path=None):
    """Tiers from tiers.csv rows: hops in file order; a tier's GPUs and kind from its rows (given
    once, or the same on each)."""
    out = {}
    for i, r in enumerate(rows, start=1):
        t = out.setdefault(r.tier, Tier(r.tier, r.description or "", (), r.gpu_names,
                                        kind=r.kind or ""))
        if r.gpu_names and r.gpu_names != t.gpus:
            raise DataError(path or data_path("tiers.csv"), i, "gpus", f"tier {r.tier} names "
                            f"its GPUs as {';'.join(t.gpus) or 'every GPU'} on an earlier row; "
                            "expected the same or empty")
        if r.kind and t.kind and r.kind != t.kind:
            raise DataError(path or data_path("tiers.csv"), i, "kind", f"tier {r.tier} is of "
                            f"kind {t.kind} on an earlier row; expected the same or empty")
        out[r.tier] = replace(t, hops=t.hops + (Hop(r.hop, r.count),), kind=t.kind or r.kind)
    for name, t in out.items():
        if not t.kind:
            raise DataError(path or data_path("tiers.csv"), None, "kind",
                            f"tier {name} names no kind on any of its rows")
    return out


def pool_tier(pool, nodes):
    """The tier of ``pool`` as one of ``nodes`` GPU nodes sharing it sees it: the servers' media
    and NICs (all of them, the node's 1/nodes share of them, split further among the node's
    reloads in flight), the node's client NICs at the engine's request size, cost and requests
    in flight, host memory where the path bounces through it, then the GPU's host link."""
    fleet = pool.servers(nodes)
    hops = (Hop(pool.media_link, fleet * pool.media_per_storage_node, 1.0 / nodes, "per-node",
                engine_io=False),
            Hop(pool.nic_link, fleet * pool.nics_per_storage_node, 1.0 / nodes, "per-node",
                engine_io=False),
            Hop(pool.client_link, pool.client_nics, scope="per-node",
                requests=(pool.request_bytes, pool.request_s, pool.requests_in_flight)))
    if pool.client_via_host_memory:  # each byte crosses host DRAM twice: the NIC writes it,
        hops += (Hop(GPU_HOST_MEMORY, 1, 0.5),)  # the GPU's copy reads it
    return Tier(f"pool:{pool.name}", f"{pool.description}, shared by {nodes} GPU node(s)",
                hops + (Hop(GPU_HOST_LINK, 1),),
                gpu_node_dram_bytes=pool.storage_node_bytes if pool.on_gpu_nodes else 0.0,
                kind="pool", medium=pool.medium)


def pool_tiers():
    """The bundled pools as tiers named ``pool:NAME``, each shared by the GPU nodes its row
    deploys (what ``compare --tier pool:NAME`` and the calculator reload from)."""
    return {f"pool:{p.name}": pool_tier(p, p.gpu_nodes) for p in table("pools").values()}


def kind_tiers():
    """The tiers the kinds bring of their own (:attr:`kvmath.tiers.kind.TierKind.tiers`)."""
    from kvmath.tiers.kinds import KINDS
    return {n: t for k in KINDS.values() for n, t in k.tiers.items()}
