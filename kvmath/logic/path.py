"""The tier's path: a tier on a node (its own drives, its NICs to a pool), whether a tier
exists on a GPU, the hops a tier's bytes cross under an engine profile and their effective
rates (the engine's copy sizes, its storage reads, a pool's requests), the copies each
node-shared hop carries, the path's per-GPU rate at the reloads in flight, a hybrid model's state
rate, and a codec's rate in decoded bytes.
"""
from __future__ import annotations

import math

from kvmath.logic.constants import CODEC_KV_DTYPES
from kvmath.logic.layout import default_concurrency
from kvmath.logic.rules import copy_path, own_value
from kvmath.logic.runtime import DATA, PathHop, ScenarioError, formula, with_fields


def node_gpu(node, node_gpu_row, gpu):
    """The GPU of a scenario on a node (a nodes.csv row): its own GPU (node_gpu_row, the gpus.csv
    row it names) with the node's GPU count; ScenarioError when ``gpu`` (given, or None) is
    another GPU."""
    if gpu is not None and gpu.name != node.gpu:
        raise ScenarioError(f"--gpu {gpu.name} is not the GPU of node {node.name} ({node.gpus}x "
                            f"{node.gpu}): drop --gpu, or give a node with that GPU")
    return with_fields(node_gpu_row, {"gpus_per_node": node.gpus})


def tier_kind(tier):
    """What the tier's kind declares (kvmath.tiers.kinds: on_node, node_tier, price, wear,
    coded, reads)."""
    return DATA.tier_kinds[tier.kind]


def node_tier(node, tier):
    """A tier on a node, as its kind places it (kvmath.tiers.kinds): a kind of the node's own
    units (on_node "stripe": drives) makes its node tier (nvme) of the node's units (nodes.csv:
    their link and count) before the bundled path's later hops (host memory, the GPU's host
    link); any other tier as it is. ScenarioError for such a tier on a node without those units,
    or one of the kind that names units of its own (nvme-gen5, nvme-1drive): each would be priced
    on drives the node does not have; for a pool read over more NICs per GPU node than the node
    has; and for a pool of the GPU nodes' own DRAM that takes all of a node's DRAM or more."""
    pool = tier.name[len("pool:"):] if tier.name.startswith("pool:") else tier.name
    for h in tier.hops:  # a pool's client hop: the NICs each GPU node reads it over
        if h.requests is not None and h.scope == "per-node" and not h.count <= node.nics:
            if not node.nics > 0:
                raise ScenarioError(f"--pool {pool}: node {node.name} has no NICs (nics 0), so "
                                    "no engine on it can reach a pool over the network")
            raise ScenarioError(f"--pool {pool}: its engines read it over {h.count} NICs per "
                                f"GPU node (pools.csv client_nics), and node {node.name} has "
                                f"{node.nics} (nics {node.nics})")
    taken = tier.gpu_node_dram_bytes or 0.0  # a row from a page's data may lack the field
    if taken > 0 and not taken < node.host_dram_bytes:
        raise ScenarioError(f"--pool {pool} takes {taken / 1e9:.4g} GB of each GPU node's DRAM "
                            f"(pools.csv storage_node_bytes), and node {node.name} has "
                            f"{node.host_dram_bytes / 1e9:.4g} GB (host_dram_bytes): nothing "
                            "would be left for its own host tier")
    kind = tier_kind(tier)
    if kind["on_node"] != "stripe":
        return tier
    if not node.nvme_drives > 0:
        raise ScenarioError(f"node {node.name} has no NVMe drives (nvme_drives "
                            f"{node.nvme_drives}): --tier {tier.name} has nothing to read")
    if tier.name != kind["node_tier"]:
        raise ScenarioError(f"--tier {tier.name} names drives of its own ({tier.description}); "
                            f"node {node.name} has {node.nvme_drives} {node.nvme_drive_link} "
                            f"drives: use --tier {kind['node_tier']} on the node, or a nodes "
                            "CSV row with the drives you mean")
    drives = with_fields(tier.hops[0], {"link": node.nvme_drive_link, "count": node.nvme_drives})
    return with_fields(tier, {
        "hops": tuple([drives] + list(tier.hops[1:])),
        "description": f"{node.name}'s {node.nvme_drives} {node.nvme_drive_link} drives "
                       "striped, bounced through host DRAM, then the GPU's host link"})


def tier_exists_on(tier, gpu_name):
    """Whether a tier exists on a GPU: every tier but those of one GPU family (tiers.csv gpus: a
    Grace tray's memory, a peer over NVLink, CXL behind an x86 host)."""
    return len(tier.gpus) == 0 or gpu_name in tier.gpus


def check_tier_gpu(tier, gpu):
    """ScenarioError when a tier that exists on some GPUs only is asked of another."""
    if not tier_exists_on(tier, gpu.name):
        raise ScenarioError(f"tier {tier.name} exists only on GPU(s) {', '.join(tier.gpus)} "
                            f"(tiers.csv, field 'gpus'), not on {gpu.name}: its hops are those "
                            "GPUs' own links")



def copy_row(link_name, path, direction, copy_bytes):
    """The copy_paths.csv row of a link's copy path and direction that covers copies of
    copy_bytes (the one with the largest from_bytes not above it), or None."""
    rows = DATA.copy_paths.get(link_name, {}).get(path + " " + direction, [])
    out = None
    for r in rows:
        if r.from_bytes <= copy_bytes:
            out = r
    return out


def copy_rate(link, path, copy_bytes, end="nominal"):
    """The rate (B/s) of a load's copies of copy_bytes over a host link by a copy path
    (:func:`kvmath.logic.rules.copy_path`), at the nominal or the band's "fast" or "slow" end of
    its measured spread: t = per-copy cost + s / rate (kvmath.derive.kv.bandwidth_at_size).
    driver: the link's own per-copy cost (links.csv latency_s) at its measured asymptote;
    batched and kernel: copy_paths.csv's per-copy cost and fraction of that asymptote for the
    class of copies that size falls in; a link with no such row: the kernel at the asymptote (an
    assumption), a batched call as driver copies."""
    base = link.bandwidth_Bps * link.efficiency
    if path == "asymptote":
        return base
    row = None
    if path != "driver":
        row = copy_row(link.name, path, "h2d", copy_bytes)
    if row is None and path == "kernel":
        return base
    t_copy = link.latency_s
    rate = base
    if row is not None:
        t_copy = row.per_copy_s
        frac = row.rate_fraction
        if end == "fast":
            t_copy = row.per_copy_fast_s if row.per_copy_fast_s is not None else t_copy
            frac = row.rate_fraction_high if row.rate_fraction_high is not None else frac
        if end == "slow":
            t_copy = row.per_copy_slow_s if row.per_copy_slow_s is not None else t_copy
            frac = row.rate_fraction_low if row.rate_fraction_low is not None else frac
        rate = base * frac
    return float(formula("derive.bandwidth_at_size", {"s": copy_bytes, "B": rate, "t_0": t_copy}))


def tier_path(tier, gpu, eng, copy_bytes=None):
    """The hops of a tier for a GPU, with their effective bandwidths under an engine profile.

    The GPU's host link runs at the rate of the engine's copies of ``copy_bytes`` (its layout)
    by the path its code takes for them (:func:`kvmath.logic.rules.copy_path`: its copy kernel,
    one batched driver call, or driver copies one by one; :func:`copy_rate`) and keeps the
    link's measured duplex fraction while offload writes overlap;
    node-shared hops with a first-byte latency (drives) run at the bandwidth of the engine's
    storage reads with its queue depth, per drive. The ideal profile changes nothing.
    """
    hops = []
    for hop in tier.hops:
        host = hop.link == DATA.gpu_host_link
        name = hop.link
        if host:
            name = gpu.host_link
        elif hop.link == DATA.gpu_host_memory:
            name = gpu.host_memory_link
        link = DATA.links[name]
        one = link.bandwidth_Bps * link.efficiency
        if host and eng.copy_tokens is not None and copy_bytes is not None:
            one = copy_rate(link, copy_path(eng, copy_bytes, gpu.platform)[0], copy_bytes,
                            eng.copy_end)
        if host and eng.writes_overlap:
            one = one * link.duplex_retained
        scope = hop.scope or link.scope
        if hop.requests is not None:  # a pool's read path: its own requests' size and cost
            one = float(formula("derive.bandwidth_at_size_qd", {
                "s": hop.requests[0], "q_io": hop.requests[2], "B": one, "t_0": hop.requests[1]}))
        elif (scope == "per-node" and eng.storage_io_bytes is not None
                and link.latency_s > 0 and hop.engine_io):
            one = float(formula("derive.bandwidth_at_size_qd", {
                "s": eng.storage_io_bytes, "q_io": eng.queue_depth, "B": one,
                "t_0": link.latency_s}))
        hops.append(PathHop(link=link.name, count=hop.count, scope=scope,
                            effective_Bps=one * hop.count * hop.share,
                            latency_s=link.latency_s + (hop.requests[1] if hop.requests is not None
                                                        else 0.0),
                            host_memory=hop.link == DATA.gpu_host_memory))
    return hops


def hop_copies(hop, rho, read_once, stored_once):
    """Copies of each unique byte a node-shared hop carries (rho_n): 1 when the engine reads
    replicated KV once (rank 0 reads and broadcasts); from a store holding one copy (a drive, a
    remote pool) 1 as well; host memory that every rank loads the shared slot from: rho."""
    if read_once or (stored_once and not hop.host_memory):
        return 1.0
    return rho




def path_values(tier, gpu, eng, at):
    """[B per GPU in B/s, first-byte latency in s, hops] of a tier's path under engine ``eng``.

    ``at``: the sharing, by symbol name where it has one: K (the replica's TP), rho (the KV's
    copies across it; default 1), n_c (replicas reloading at once through the node's shared
    hops; default every one of the node's), n_g (reloads one replica has in flight on its own
    per-GPU hops; default 1), N_node (default the GPU's), own (a reader's own values), and
    copy_bytes (the host link's copy size; default none), read_once and stored_once (whether
    the engine reads replicated KV once across node hops and whether its store holds one copy;
    default: the engine's 'always' rows: :func:`kvmath.logic.rules.reads_once` and
    :func:`~kvmath.logic.rules.stores_once` decide them per model). Each node-shared hop
    carries each replica's unique bytes (:func:`hop_copies` copies) for the n_c replicas
    reloading at once; the path's B is the narrowest of them, and never above the narrowest
    per-GPU hop shared by the n_g reloads one replica has in flight.
    """
    hops = tier_path(tier, gpu, eng, at.get("copy_bytes"))
    read_once = at.get("read_once")
    stored_once = at.get("stored_once")
    if read_once is None:
        read_once = eng.replicated_read_once == "always"
    if stored_once is None:
        stored_once = eng.stored_once == "always"
    tp = at["K"]
    rho = at.get("rho", 1.0)
    own = at.get("own")
    b_gpu = min([h.effective_Bps for h in hops if h.scope == "per-gpu"], default=math.inf)
    n_node = at.get("N_node", own_value(own, "N_node", gpu.gpus_per_node))
    conc = at.get("n_c")
    if conc is None:
        conc = default_concurrency(gpu, tp, own)
    n_g = at.get("n_g", 1.0)
    widths = [float(formula("derive.B_path", {
        "B_gpu": b_gpu, "B_node": h.effective_Bps, "K": tp, "n_c": conc, "rho": rho,
        "rho_n": hop_copies(h, rho, read_once, stored_once), "N_node": n_node,
        "n_g": n_g})) for h in hops if h.scope == "per-node"]
    if len(widths) == 0:
        widths = [float(formula("derive.B_path", {
            "B_gpu": b_gpu, "B_node": math.inf, "K": tp, "n_c": conc, "rho": rho, "rho_n": rho,
            "N_node": n_node, "n_g": n_g}))]
    return [min(widths), sum([h.latency_s for h in hops]), hops]


def state_path_rate(hops, n_node, tp, concurrent, gpu_reloads=1.0):
    """B_state, B/s: a hybrid model's recurrent state's per-GPU rate over a path's hops (split by
    head, never replicated: kvmath.derive.kv.B_path_state), the narrowest node hop's, or the
    GPU's own hop where the path has no node hop."""
    b_gpu = min([h.effective_Bps for h in hops if h.scope == "per-gpu"], default=math.inf)
    rates = [float(formula("derive.B_path_state", {
        "B_gpu": b_gpu, "B_node": h.effective_Bps, "K": tp, "n_c": concurrent, "N_node": n_node,
        "n_g": gpu_reloads})) for h in hops if h.scope == "per-node"]
    if len(rates) == 0:
        rates = [float(formula("derive.B_path_state", {
            "B_gpu": b_gpu, "B_node": math.inf, "K": tp, "n_c": concurrent, "N_node": n_node,
            "n_g": gpu_reloads}))]
    return min(rates)


def coded_values(codec, tier, kv_dtype, wire_Bps, pipelined=None, sharers=1.0):
    """{B, B_wire, r_c, B_dec, codec_pipelined}: the path's bandwidth in decoded bytes when the
    KV moves encoded by codec (decode after transfer, or overlapped when pipelined: the codec
    row's default), the GPU's decoder shared by the ``sharers`` reloads its replica has in
    flight (kvmath.derive.kv.B_dec_at_load)."""
    if len(tier.hops) == 0:
        raise ScenarioError(f"--codec {codec.name}: a prefix in HBM moves nothing to decode")
    if kv_dtype not in CODEC_KV_DTYPES:
        raise ScenarioError(f"--codec {codec.name} encodes 16-bit KV (its ratio is measured "
                            f"against FP16), not {kv_dtype}; drop --codec or --kv-dtype")
    at = {"B_wire": wire_Bps, "r_c": codec.compression_ratio,
          "B_dec": float(formula("derive.B_dec_at_load", {"B_dec": codec.decode_Bps,
                                                          "n_g": sharers}))}
    over = codec.pipelined if pipelined is None else pipelined
    at["codec_pipelined"] = 1.0 if over else 0.0
    at["B"] = float(formula("derive.B_coded_pipelined" if over else "derive.B_coded", at))
    return at


