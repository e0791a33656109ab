"""The pure-Python replay, routers, previous turns and queue that the compiled ones replaced
(issue 21 item 5), kept as the oracle the compiled kernels are held equal to
(tests/traces/test_simulate.py). Copied from kvmath/traces/replay.py, routing.py, readers.py and
fleet.py as they stood before the kernels; only the imports differ."""
from __future__ import annotations

import math
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from kvmath.fleet.routers import ROUTERS
from kvmath.evaluate.api import ScenarioError
from kvmath.traces.replay import TierSpec, stack_distances
from kvmath.fleet.routing import LOAD_WINDOW_S, OVERLAP_WEIGHT


@dataclass
class _Tier:
    spec: TierSpec
    capacity_blocks: int
    store: OrderedDict = field(default_factory=OrderedDict)
    hits: int = 0
    writes: int = 0
    dropped: int = 0
    filtered: int = 0


#: requests whose block hashes are turned into Python ints at once during a replay
CHUNK_REQUESTS = 100_000


def window_percentile(values, windows, q):
    """np.percentile (linear) of ``windows`` one-second totals of which ``values`` holds the
    nonzero ones ({window: bytes}), without building the zeros."""
    nonzero = np.sort(np.fromiter(values.values(), dtype=float, count=len(values)))
    zeros = windows - len(nonzero)
    pos = q / 100 * (windows - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, windows - 1)

    def at(i):
        return 0.0 if i < zeros else float(nonzero[i - zeros])
    return at(lo) + (pos - lo) * (at(hi) - at(lo))


def shared_prefix_hits(trace: Trace, capacity_blocks):
    """Leading blocks of each request (an int64 array) found in a write-through LRU store of
    ``capacity_blocks`` that every request of ``trace`` writes and reads (a pool the whole fleet
    shares: every request's blocks are written to it, an existing block only refreshed, so its
    contents are an LRU over the whole trace, whichever node served each request): the blocks
    whose prefix distance is within the capacity (Mattson: present iff D <= C). Also the
    blocks written to it (an int, the accesses not present: new blocks only, deduplicated)."""
    D, E = stack_distances(trace)
    hits = np.bincount(trace.rid, weights=(E <= capacity_blocks),
                       minlength=trace.n_requests).astype(np.int64)
    return hits, int((D > capacity_blocks).sum())


#: how a node's offload tiers are written: "back" (a block reaches host DRAM when HBM evicts it,
#: and the drives when DRAM does: vLLM's offloading connector, SGLang HiCache's write_back) or
#: "through" (every block a request brings into HBM is written at once to every lower tier
#: that lacks it, an eviction then writing nothing: LMCache's store to every backend, HiCache's
#: write_through)
WRITE_MODES = ("back", "through")


def replay(trace: Trace, tiers, block_bytes, policy="lru", ttl_s=None, min_uses=2, cost=None,
           service=False, shared=None, writes="back"):
    """Replay a trace through a list of tiers (fastest first; the first is HBM).

    Every request's blocks end in the first tier; a block evicted from tier k is written to
    tier k+1 unless it is already there (lower tiers keep copies: a reload does not remove
    them). Writes beyond a tier's write bandwidth in a 1-s window are dropped and counted.
    policy: ``lru``; ``ttl`` (blocks unused for ttl_s are dropped from every tier below the
    first); ``selective`` (a drive tier takes only blocks used at least min_uses times, as
    SGLang HiCache's write_through_selective and Dynamo KVBM's frequency filter do).
    writes: :data:`WRITE_MODES`; either way a block a tier holds is never written to it again
    (hash-deduplicated: only new blocks are written).
    cost: a :class:`HitCost` to price each hit (reload against recompute) and the node's load;
    service: also each request's time on its replica (``service_s``, a numpy array).
    shared: (TierSpec, hits) of a store below the node's own tiers that the whole fleet shares
    (a pool): ``hits`` its leading blocks of each request (:func:`shared_prefix_hits`, computed
    over the whole fleet's trace); a request reads from it the blocks beyond its node's own hit.
    Its row reports its reads; its contents and writes are the fleet's, not the node's. The
    cost model must price ``tiers`` then its spec.
    """
    if trace.sample_rate < 1:
        raise ValueError("replay needs the whole trace, not a SHARDS sample")
    if policy not in ("lru", "ttl", "selective"):
        raise ValueError(f"unknown policy {policy!r}; expected lru, ttl or selective")
    if policy == "ttl" and not (ttl_s and ttl_s > 0):
        raise ValueError("policy ttl needs a positive ttl_s")
    if writes not in WRITE_MODES:
        raise ValueError(f"unknown write mode {writes!r}; expected {' or '.join(WRITE_MODES)}")
    mode, through = writes, writes == "through"  # (the name writes is the traffic's, below)
    sizes = [t.block_bytes or block_bytes for t in tiers]  # bytes of a block in each tier
    state = [_Tier(t, int(t.capacity_bytes // b)) for t, b in zip(tiers, sizes)]
    t0 = float(trace.timestamp_s[0])
    windows = int(math.floor(trace.duration_s)) + 1
    # bytes per 1-s window, only the windows with traffic: memory follows the traffic, not the
    # trace's span (a timestamp far in the future had allocated one slot per second to it)
    reads = [defaultdict(float) for _ in tiers]
    writes = [defaultdict(float) for _ in tiers]
    # per-block counts only where a policy reads them (selective: uses; ttl: last use): each
    # holds every block the trace ever names, the replay's largest memory
    uses, last_use = {}, {}
    track_uses, track_last = policy == "selective", policy == "ttl"
    offsets = np.r_[0, np.cumsum(trace.n_blocks)]
    times = trace.timestamp_s.tolist()
    chunk, chunk_start, hashes = CHUNK_REQUESTS, 0, []  # Python ints for one chunk at a time
    ttl = ttl_s if policy == "ttl" else None
    hit_blocks = np.zeros(trace.n_requests, dtype=np.int64)
    runs = []  # (request, tier index, first block, end block)
    if shared is not None:
        shared_spec, shared_hits = shared[0], np.minimum(shared[1], trace.n_blocks).tolist()
        shared_size = shared_spec.block_bytes or block_bytes
    shared_reads, shared_blocks = defaultdict(float), 0

    def offer(k, b, now, w):
        while k < len(state):
            tier = state[k]
            if b in tier.store:
                tier.store.move_to_end(b)
                return
            if policy == "selective" and tier.spec.drive_bytes and uses.get(b, 0) < min_uses:
                tier.filtered += 1
                return
            if writes[k][w] + sizes[k] > tier.spec.write_Bps:
                tier.dropped += 1
                return
            writes[k][w] += sizes[k]
            tier.writes += 1
            tier.store[b] = True
            if ttl is not None and k > 0:
                while tier.store and now - last_use[next(iter(tier.store))] > ttl:
                    tier.store.popitem(last=False)
            if len(tier.store) <= tier.capacity_blocks:
                return
            b, _ = tier.store.popitem(last=False)
            if through:  # every lower tier took its own copy when the block was new
                return
            k += 1

    def offer_all(b, now, w):
        """Write-through: the block into every offload tier that lacks it."""
        for k in range(1, len(state)):
            offer(k, b, now, w)

    for r in range(trace.n_requests):
        if r % chunk == 0:
            chunk_start = int(offsets[r])
            hashes = trace.hashes[chunk_start:int(offsets[min(r + chunk, trace.n_requests)])].tolist()
        now = times[r]
        w = int(now - t0)
        blocks = hashes[int(offsets[r]) - chunk_start:int(offsets[r + 1]) - chunk_start]
        where = []
        for b in blocks:  # lookup before insert: the leading blocks present somewhere
            found = -1
            for k, tier in enumerate(state):
                if b in tier.store:
                    if ttl is not None and k > 0 and now - last_use[b] > ttl:
                        del tier.store[b]
                        continue
                    found = k
                    break
            if found < 0:
                break
            where.append(found)
        for j, k in enumerate(where):
            state[k].hits += 1
            if k > 0:
                reads[k][w] += sizes[k]
                state[k].store.move_to_end(blocks[j])
        hit_blocks[r] = len(where)
        j = 0
        while j < len(where):
            e = j
            while e < len(where) and where[e] == where[j]:
                e += 1
            runs.append((r, where[j], j, e))
            j = e
        if shared is not None and shared_hits[r] > len(where):  # the pool serves the rest
            runs.append((r, len(state), len(where), shared_hits[r]))
            shared_reads[w] += (shared_hits[r] - len(where)) * shared_size
            shared_blocks += shared_hits[r] - len(where)
            hit_blocks[r] = shared_hits[r]
        if track_uses:
            for b in blocks:
                uses[b] = uses.get(b, 0) + 1
        if track_last:
            for b in blocks:
                last_use[b] = now
        hbm = state[0]
        for j in range(len(blocks) - 1, -1, -1):  # tail first, head last
            b = blocks[j]
            if b in hbm.store:
                hbm.store.move_to_end(b)
                continue
            if writes[0][w] + sizes[0] > hbm.spec.write_Bps:
                hbm.dropped += 1
                continue
            writes[0][w] += sizes[0]
            hbm.writes += 1
            hbm.store[b] = True
            if through:
                offer_all(b, now, w)
            while len(hbm.store) > hbm.capacity_blocks:
                old, _ = hbm.store.popitem(last=False)
                if not through:
                    offer(1, old, now, w)

    total_blocks = len(trace.hashes)
    duration = max(trace.duration_s, 1.0)
    tokens = trace.access_tokens()
    out_tiers = []
    for k, tier in enumerate(state):
        rd, wr = reads[k], writes[k]
        row = {"tier": tier.spec.name, "capacity_bytes": tier.spec.capacity_bytes,
               "capacity_blocks": tier.capacity_blocks, "hits": tier.hits,
               "hit_rate": tier.hits / max(total_blocks, 1),
               "read_Bps_mean": float(sum(rd.values()) / duration),
               "read_Bps_p99": window_percentile(rd, windows, 99),
               "write_Bps_mean": float(sum(wr.values()) / duration),
               "write_Bps_p99": window_percentile(wr, windows, 99),
               "read_bandwidth_Bps": tier.spec.read_Bps, "write_bandwidth_Bps": tier.spec.write_Bps,
               "writes": tier.writes, "writes_dropped": tier.dropped,
               "writes_filtered": tier.filtered}
        if tier.spec.drive_bytes:
            dwpd = row["write_Bps_mean"] * 86400 / tier.spec.capacity_bytes
            row["drive_writes_per_day"] = dwpd
            row["rated_dwpd"] = tier.spec.rated_dwpd
            row["lifetime_years"] = (tier.spec.rated_drive_writes / (dwpd * 365.25)
                                     if tier.spec.rated_drive_writes and dwpd > 0 else math.inf)
        out_tiers.append(row)
    if shared is not None:
        out_tiers.append({"tier": shared_spec.name, "capacity_bytes": shared_spec.capacity_bytes,
                          "hits": shared_blocks, "hit_rate": shared_blocks / max(total_blocks, 1),
                          "read_Bps_mean": float(sum(shared_reads.values()) / duration),
                          "read_Bps_p99": window_percentile(shared_reads, windows, 99),
                          "read_bandwidth_Bps": shared_spec.read_Bps, "shared": True})
    hit_tokens = np.zeros(trace.n_requests)
    np.add.at(hit_tokens, trace.rid, np.where(trace.pos < hit_blocks[trace.rid], tokens, 0))
    result = {"requests": trace.n_requests, "policy": policy, "ttl_s": ttl_s, "writes": mode,
              "min_uses": min_uses if policy == "selective" else None,
              "block_bytes": block_bytes, "duration_s": trace.duration_s,
              "block_hit_rate": float(hit_blocks.sum() / max(total_blocks, 1)),
              "token_hit_rate": float(hit_tokens.sum() / trace.prompt_tokens.sum()),
              "tiers": out_tiers}
    if cost is not None:
        result.update(cost.price(trace, runs, duration, service=service))
    return result




class PythonPrice:
    """HitCost.price's loop, over a HitCost's tables."""

    def __init__(self, cost):
        from kvmath.evaluate.api import sweep
        from kvmath.tables.rows import resolve_tier
        self.model, self.gpu, self.tiers = cost.model, cost.gpu, cost.tiers
        self.tp, self.gpus, self.engine = cost.tp, cost.gpus, cost.engine
        self._sweep, self._resolve = sweep, resolve_tier

    def _tables(self, trace):
        bt = trace.block_tokens
        nmax = int(trace.n_blocks.max()) if trace.n_requests else 1
        lengths = np.arange(1, nmax + 1) * bt
        any_tier = self._resolve("host-dram")
        _, rec = self._sweep(self.model, self.gpu, any_tier, lengths, tp=self.tp)
        # R(0) is the request's own forward pass (a one-token prefill), which it runs with or
        # without a cache: a hit saves R(b) - R(a) beyond it, and a reload pays no step of its own
        _, own = self._sweep(self.model, self.gpu, any_tier, np.array([1.0]), tp=self.tp)
        rec_blk = np.r_[float(own[0]), rec]
        reload_blk = []
        for spec in self.tiers:
            if spec.reload_tier is None:
                reload_blk.append(np.zeros(nmax + 1))
            else:
                tier = (spec.reload_tier if not isinstance(spec.reload_tier, str)
                        else self._resolve(spec.reload_tier))  # a node's own path, or by name
                rl, _ = self._sweep(self.model, self.gpu, tier, lengths, own_step=False, tp=self.tp,
                                    engine=self.engine)
                reload_blk.append(np.r_[0.0, rl])
        _, rec_prompt = self._sweep(self.model, self.gpu, any_tier,
                                    trace.prompt_tokens.astype(float), tp=self.tp)
        return rec_blk, reload_blk, np.asarray(rec_prompt, dtype=float)


    def price(self, trace, runs, duration, service=False):
        """The replay's savings and demand; with ``service``, also ``service_s``: each request's
        own time on its replica (its prefill less what its hits saved, plus their reloads), s."""
        rec_blk, reload_blk, rec_prompt = self._tables(trace)
        n_blocks = trace.n_blocks
        saved = np.zeros(len(self.tiers))
        lost = np.zeros(len(self.tiers), dtype=np.int64)
        reload_time = 0.0
        own = np.array(rec_prompt, dtype=float) if service else None
        for r, k, a, b in runs:
            rec = (rec_prompt[r] if b == n_blocks[r] else rec_blk[b]) - rec_blk[a]
            rl = reload_blk[k][b - a]
            if rl < rec or self.tiers[k].reload_tier is None:  # an HBM hit is never lost
                saved[k] += rec - rl
                reload_time += rl
                if own is not None:
                    own[r] -= rec - rl
            else:
                lost[k] += b - a
        demand = self.tp * (rec_prompt.sum() - saved.sum()) / duration
        return {"gpu_seconds_saved_per_s": float(self.tp * saved.sum() / duration),
                "gpu_seconds_saved_per_s_by_tier": {s.name: float(self.tp * v / duration)
                                                    for s, v in zip(self.tiers, saved)},
                "blocks_recomputed_as_reload_lost": {s.name: int(v)
                                                     for s, v in zip(self.tiers, lost)},
                "prefill_gpu_s_per_s_no_cache": float(self.tp * rec_prompt.sum() / duration),
                "prefill_gpu_s_per_s": float(demand),
                "reload_gpu_s_per_s": float(self.tp * reload_time / duration),
                "node_gpu_s_per_s": float(self.gpus),
                "feasible": bool(demand <= self.gpus),
                **({"service_s": own} if own is not None else {})}



def route(trace, nodes, router, capacity_blocks, seed=0, load_window_s=LOAD_WINDOW_S,
          overlap_weight=OVERLAP_WEIGHT, assignment=False):
    """Replay ``trace`` over ``nodes`` nodes under ``router``; the dict described above, with
    ``assignment`` (the node of each request, an int32 array) when asked for."""
    if router not in ROUTERS:
        raise ScenarioError(f"unknown router {router!r}; expected one of {', '.join(ROUTERS)}")
    if nodes < 1:
        raise ScenarioError(f"a fleet of {nodes} nodes: expected at least 1")
    if trace.sample_rate < 1:
        raise ScenarioError("routing needs the whole trace, not a SHARDS sample")
    cap = max(int(capacity_blocks), 0)
    stores = [OrderedDict() for _ in range(nodes)]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, nodes, size=trace.n_requests) if router == "random" else None
    offsets = np.r_[0, np.cumsum(trace.n_blocks)]
    hashes = trace.hashes
    times = trace.timestamp_s
    tokens = trace.prompt_tokens
    bt = trace.block_tokens
    recent = deque()  # (time, node, blocks) of the requests routed in the load window
    load = np.zeros(nodes, dtype=np.int64)  # active blocks per node
    routed_tokens = np.zeros(nodes, dtype=np.float64)
    parent = continuations(trace)
    chosen = np.empty(trace.n_requests, dtype=np.int32)  # the node of each request
    continued = followed = 0
    hit_tokens = best_tokens = 0.0
    holder_requests = reached = 0
    for r in range(trace.n_requests):
        now = float(times[r])
        while recent and now - recent[0][0] > load_window_s:
            _, n_old, k_old = recent.popleft()
            load[n_old] -= k_old
        blocks = hashes[offsets[r]:offsets[r + 1]].tolist()
        # the longest cached prefix on each node (hash ids chain the prefix: block i's id names
        # blocks 0..i, so the match is the leading run present in the node's store)
        match = np.zeros(nodes, dtype=np.int64)
        for n, store in enumerate(stores):
            m = 0
            for b in blocks:
                if b not in store:
                    break
                m += 1
            match[n] = m
        best = int(match.max()) if nodes else 0
        if router == "random":
            node = int(draws[r])
        elif router == "round-robin":
            node = r % nodes
        elif router == "affinity":  # the previous turn's node, else the least loaded
            node = int(chosen[parent[r]]) if parent[r] >= 0 else int(np.argmin(load))
        else:  # kv-aware
            cost = overlap_weight * (len(blocks) - match) + load
            cands = np.flatnonzero(cost == cost.min())
            node = int(cands[np.argmin(load[cands])])
        if best > 0:
            holder_requests += 1
            reached += int(match[node] == best)
        chosen[r] = node
        if parent[r] >= 0:
            continued += 1
            followed += int(chosen[parent[r]] == node)
        m = int(match[node])
        hit_tokens += min(m * bt, int(tokens[r]))
        best_tokens += min(best * bt, int(tokens[r]))
        routed_tokens[node] += int(tokens[r])
        load[node] += len(blocks)
        recent.append((now, node, len(blocks)))
        store = stores[node]
        for b in blocks:  # the request's blocks are the node's most recent
            if b in store:
                store.move_to_end(b)
            else:
                store[b] = True
        while len(store) > cap:
            store.popitem(last=False)
    mean = routed_tokens.mean() if nodes else 0.0
    out = {"assignment": chosen} if assignment else {}
    return out | {"router": router, "nodes": nodes, "requests": trace.n_requests,
            "capacity_blocks_per_node": cap,
            "token_hit_rate": float(hit_tokens / max(float(tokens.sum()), 1.0)),
            "reach_continuation": float(followed / continued) if continued else None,
            "continuations": continued,
            "token_reach": float(hit_tokens / best_tokens) if best_tokens else None,
            "reach": float(reached / holder_requests) if holder_requests else None,
            "requests_with_a_cached_prefix": holder_requests,
            "load_imbalance": float(routed_tokens.max() / mean) if mean > 0 else None,
            "routed_prompt_tokens": routed_tokens.tolist()}


def continuations(trace):
    """The previous turn of each request (an int64 array, -1 for none): the latest earlier request
    whose whole prompt (its full blocks) this one's starts with, as a turn repeats the
    conversation so far. A prompt is continued once: the next request that repeats it is the
    conversation's next turn, and a later one repeating the same blocks is not (so a prompt of
    only a system prompt that every conversation shares does not chain them all)."""
    offsets = np.r_[0, np.cumsum(trace.n_blocks)]
    bt = trace.block_tokens
    last_full = {}  # hash of a prompt's last full block -> the request, until it is continued
    parent = np.full(trace.n_requests, -1, dtype=np.int64)
    for r in range(trace.n_requests):
        blocks = trace.hashes[offsets[r]:offsets[r + 1]].tolist()
        full = min(int(trace.prompt_tokens[r]) // bt, len(blocks))
        for j in range(full - 1, -1, -1):  # the longest earlier whole prompt first
            p = last_full.pop(blocks[j], None)
            if p is not None:
                parent[r] = p
                break
        if full:
            last_full[blocks[full - 1]] = r
    return parent


def ttft_fcfs(arrival_s, service_s, servers):
    """Time to first token of each request, s: first come, first served over ``servers``
    identical replicas, each serving one request at a time (wait for the earliest free one, then
    its own service time). Requests in order of arrival."""
    import heapq
    free = [0.0] * max(int(servers), 1)  # when each replica is next free
    out = np.empty(len(arrival_s))
    for i, (a, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist())):
        start = max(a, heapq.heappop(free))
        heapq.heappush(free, start + s)
        out[i] = start + s - a
    return out




# ------------------------------------------------------------------ the fleet, as it was
# kvmath/traces/fleet.py's fleet (now kvmath/fleet/) before the kernels, on the Python replay,
# routers and pricing above (the setup, decode and costs are the package's own: they did not change)
from dataclasses import replace  # noqa: E402

from kvmath.traces import replay as C  # noqa: E402
from kvmath.fleet.nodes import check_fleet, node_decode, node_setup  # noqa: E402
from kvmath.fleet.pool import pool_cost  # noqa: E402
from kvmath.fleet.run import NOT_COUNTED  # noqa: E402


def subtrace(trace, mask):
    """The requests of ``trace`` where ``mask`` holds, with their block accesses, in order."""
    keep = np.flatnonzero(mask)
    new_id = np.full(trace.n_requests, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    acc = new_id[trace.rid] >= 0
    return replace(trace, name=f"{trace.name}[{len(keep)}]", timestamp_s=trace.timestamp_s[keep],
                   prompt_tokens=trace.prompt_tokens[keep], output_tokens=trace.output_tokens[keep],
                   n_blocks=trace.n_blocks[keep], rid=new_id[trace.rid[acc]],
                   pos=trace.pos[acc], hashes=trace.hashes[acc])


def pool_setup(trace, model, node, nodes, pool, tp, block_bytes, engine=None):
    """(TierSpec, leading blocks of each request it holds, blocks written to it) of ``pool``
    shared by the fleet's ``nodes`` GPU nodes, written through (every request's blocks, new ones
    only): its whole capacity (:meth:`~kvmath.tables.rows.Pool.capacity`), read by each node
    over its share of the pool's servers and NICs (:func:`~kvmath.tables.rows.pool_tier`)."""
    from kvmath.evaluate.api import path_values
    from kvmath.tables.rows import bundled
    from kvmath.tiers.build import pool_tier
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    path = pool_tier(pool, nodes)
    bw = path_values(path, gpu, node.gpus)[0] * node.gpus
    spec = C.TierSpec(f"pool:{pool.name}", pool.capacity(nodes), bw, bw / pool.replicas, path)
    hits, written = shared_prefix_hits(trace, int(spec.capacity_bytes // block_bytes))
    return spec, hits, written


def replay_node(n, sub, specs, block_bytes, cost, span_s, gpus, replicas,
                decode_gpu_s_per_token=0.0, shared=None, writes="back"):
    """Node n's answer: its requests ``sub`` replayed through its tiers, rates over the whole
    trace's span ``span_s`` (so the nodes' demands add up to the fleet's), its decode demand
    (its output tokens at ``decode_gpu_s_per_token`` GPU-seconds each), and each request's time
    to first token on the node's ``replicas`` (``ttft_s``, an array; None with ``ttft_s_p99``
    when decode alone fills the node's GPUs, the queue then growing without bound)."""
    if sub.n_requests == 0:
        return {"node": n, "requests": 0, "token_hit_rate": None, "prompt_tokens": 0,
                "prefill_gpu_s_per_s": 0.0, "decode_gpu_s_per_s": 0.0,
                "reload_gpu_s_per_s": 0.0, "feasible": True,
                "ttft_s_p99": None, "tiers": [], "ttft_s": np.empty(0)}
    rep = replay(sub, specs, block_bytes, cost=PythonPrice(cost), service=True, shared=shared, writes=writes)
    decode = float(sub.output_tokens.sum()) * decode_gpu_s_per_token / max(span_s, 1.0)
    left = 1.0 - decode / gpus  # the share of the GPUs' time decode leaves to prefill
    ttft = (ttft_fcfs(sub.timestamp_s, rep["service_s"] / left, replicas) if left > 0 else None)
    scale = max(sub.duration_s, 1.0) / max(span_s, 1.0)
    demand = rep["prefill_gpu_s_per_s"] * scale
    return {"node": n, "requests": sub.n_requests, "token_hit_rate": rep["token_hit_rate"],
            "prompt_tokens": int(sub.prompt_tokens.sum()),
            "prefill_gpu_s_per_s": demand, "decode_gpu_s_per_s": decode,
            "reload_gpu_s_per_s": rep["reload_gpu_s_per_s"] * scale,
            "feasible": bool(demand + decode <= gpus),
            "ttft_s_p99": None if ttft is None else float(np.percentile(ttft, 99)),
            "ttft_s": ttft,
            "tiers": [{"tier": t["tier"], "hit_rate": t["hit_rate"],
                       "read_Bps": t["read_Bps_mean"] * scale,
                       **({"hits": t["hits"], "shared": True} if t.get("shared") else
                          {"write_Bps": t["write_Bps_mean"] * scale}),
                       **({"drive_writes_per_day": t["drive_writes_per_day"] * scale}
                          if "drive_writes_per_day" in t else {})} for t in rep["tiers"]]}


def fleet(trace, model, node, nodes, router, tp=None, engine=None, batch_seqs=None,
          batch_context=None, seed=0, setup=None, dask=None, pool=None, writes="back",
          **cache_kw):
    """Route ``trace`` over ``nodes`` copies of ``node`` and replay each (here, or on Dask: a
    local cluster or a scheduler's address); a JSON-ready dict. pool: a
    :class:`~kvmath.tables.rows.Pool` below every node's tiers, shared by the fleet and written
    through (a pool of the nodes' own DRAM takes its share of each node's host DRAM)."""
    check_fleet(trace, nodes)
    if pool is not None:
        cache_kw = {**cache_kw, "pool": pool, "pool_nodes": nodes}
    specs, block_bytes, cost, blocks, tp = setup or node_setup(
        trace, model, node, tp, engine, batch_seqs, batch_context, **cache_kw)
    routed = route(trace, nodes, router, blocks, seed=seed, assignment=True)
    where = routed.pop("assignment")
    decode = node_decode(trace, model, node, tp, engine, batch_seqs)
    shared = pool_answer = None
    if pool is not None:
        spec, hits, written = pool_setup(trace, model, node, nodes, pool, tp, block_bytes,
                                         engine=engine)
        cost = C.HitCost(cost.model, cost.gpu, [*specs, spec], cost.tp, cost.gpus,
                         engine=cost.engine)
        pool_Bps = written * block_bytes / max(trace.duration_s, 1.0)  # each block once
        pool_answer = {"pool": pool.name, "writes": "through", "capacity_bytes": spec.capacity_bytes,
                       **pool_cost(trace, pool, nodes, pool_Bps * pool.replicas),
                       "replicas": pool.replicas, "write_Bps": pool_Bps * pool.replicas,
                       "write_bandwidth_Bps": spec.write_Bps * nodes,
                       # writes are not dropped: the pool must take them (ASSUMED it does, and
                       # said when it cannot)
                       "writes_within_bandwidth": bool(pool_Bps <= spec.write_Bps * nodes),
                       "read_bandwidth_Bps_per_node": spec.read_Bps}
    jobs = [(n, subtrace(trace, where == n), specs, block_bytes, cost, trace.duration_s,
             node.gpus, node.gpus // tp, decode["decode_gpu_s_per_token"],
             None if pool is None else (spec, hits[where == n]), writes) for n in range(nodes)]
    if True:
        per_node = [replay_node(*job) for job in jobs]
    else:  # noqa
        client = _dask_client(dask)
        try:
            per_node = client.gather([client.submit(replay_node, *job, pure=False)
                                      for job in jobs])
        finally:
            client.close()
            if dask == "local":
                client.cluster.close()
    hit_tokens = sum(x["token_hit_rate"] * x["prompt_tokens"] for x in per_node if x["requests"])
    ttfts = [x.pop("ttft_s") for x in per_node]
    ttft = None if any(t is None for t in ttfts) else np.concatenate(ttfts)
    demand = [x["prefill_gpu_s_per_s"] for x in per_node]
    decoding = [x["decode_gpu_s_per_s"] for x in per_node]
    return {"router": router, "nodes": nodes, "node": node.name, "model": model.name, "tp": tp,
            "writes": writes,
            "requests": trace.n_requests, "capacity_blocks_per_node": blocks,
            "token_hit_rate": hit_tokens / max(float(trace.prompt_tokens.sum()), 1.0),
            "reach_continuation": routed["reach_continuation"],
            "token_reach": routed["token_reach"], "load_imbalance": routed["load_imbalance"],
            "prefill_gpu_s_per_s": float(sum(demand)), "prefill_gpu_s_per_s_max_node": max(demand),
            "decode_gpu_s_per_s": float(sum(decoding)),
            "decode_gpu_s_per_s_max_node": max(decoding),
            "gpu_s_per_s_max_node": max(a + b for a, b in zip(demand, decoding)),
            "decode": decode,
            "gpus_per_node": node.gpus, "replicas_per_node": node.gpus // tp,
            "ttft_s_p50": None if ttft is None else float(np.percentile(ttft, 50)),
            "ttft_s_p99": None if ttft is None else float(np.percentile(ttft, 99)),
            "feasible": all(x["feasible"] for x in per_node)
            and (pool_answer is None or pool_answer["writes_within_bandwidth"]),
            "not_counted": [x for x in NOT_COUNTED if pool is None or x != "a shared pool"],
            "per_node": per_node,
            **({"pool": _pool_totals(pool_answer, per_node, trace)} if pool is not None else {})}


def _pool_totals(answer, per_node, trace):
    """The pool's fleet-wide hits and traffic: every node's reads of it, and the writes of the
    blocks new to it (each of its replicas written)."""
    rows = [t for x in per_node for t in x["tiers"] if t.get("shared")]
    hits = sum(t["hits"] for t in rows)
    return {**answer, "hits": hits, "hit_rate": hits / max(len(trace.hashes), 1),
            "read_Bps": sum(t["read_Bps"] for t in rows)}


