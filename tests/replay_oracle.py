"""The pure-Python replay and previous turns that the compiled ones replaced (issue 21 item 5),
kept as the oracle the compiled kernels are held equal to (tests/traces/test_simulate.py).
Copied from kvmath/traces/replay.py and readers.py as they stood before the kernels; only the
imports differ. (The routers and the first-come-first-served queue they also held gave way to
the fleet's step-level scheduler, issue 35: tests/fleet/test_scheduler.py holds it to hand
worked cases.)"""
from __future__ import annotations

import math
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from kvmath.evaluate.api import ScenarioError
from kvmath.traces.replay import TierSpec, stack_distances


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
