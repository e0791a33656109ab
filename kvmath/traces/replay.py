"""Cache simulation on a trace: exact LRU hit-rate curves from stack distances, SHARDS, and a
multi-tier replay (HBM, host DRAM, NVMe, remote pool).

**Prefix semantics.** A request looks its blocks up *before* it inserts any of them, and its hit
is its leading blocks that are all present. It then inserts all its blocks, tail first and head
last, so that a prefix's head is always more recent than its tail and LRU evicts tails first (as
vLLM's free-block queue does). The LRU stack distance ``D`` of a block is the number of distinct
blocks used at or after its last use, before the request began: the block is present in an LRU
cache of ``C`` blocks iff ``D <= C``. The request's leading ``j+1`` blocks hit iff
``max(D_0..D_j) <= C``, the *prefix distance*. One histogram of prefix distances gives the hit
rate at every capacity (Mattson et al. 1970).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvmath.traces.trace import Trace, block_chunks, block_ids


# ------------------------------------------------------------------ stack distances
def access_sequence(trace: Trace):
    """The order a replay uses the kept accesses in: requests in turn, each tail first (the
    order a request inserts its blocks), as trace indices (int32 where they fit)."""
    n = len(trace.hashes)
    small = np.int32 if n < 2 ** 31 - 1 else np.int64
    rid = trace.rid
    grouped = n < 2 or bool((rid[1:] >= rid[:-1]).all())
    if grouped:  # requests in turn: is each head first (positions rising)?
        same = rid[1:] == rid[:-1]
        grouped = bool((trace.pos[1:][same] > trace.pos[:-1][same]).all())
        del same
    if not grouped:
        return np.lexsort((-trace.pos.astype(np.int64), rid)).astype(small)
    # reverse each request's run in place of a sort: index i of a run [o, o + c) goes to
    # o + (o + c - 1 - i)
    counts = np.bincount(rid, minlength=trace.n_requests)
    starts = np.r_[0, np.cumsum(counts)[:-1]].astype(small)
    ends = (starts + counts.astype(small) - 1).astype(small)
    order = (starts + ends)[rid].astype(small)
    order -= np.arange(n, dtype=small)
    return order


def stack_distances(trace: Trace):
    """(D, E) per kept access, in trace order: LRU stack distance and prefix distance, blocks.

    np.inf marks a block never seen before (or, for E, a prefix with such a block). On a
    SHARDS sample a distance counts each distinct kept block by its weight
    (:meth:`Trace.weights`: 1 / sample_rate, or 1 in the fully kept stratum), an unbiased
    estimate of the distinct blocks in between (Horvitz-Thompson); plain SHARDS scales the
    sample's distance by 1 / R, the same when every weight is 1 / R. Computed by
    :func:`kvmath.traces.simulate.distances.prefix_distances` (a Fenwick tree, a few
    access-length arrays).
    """
    from kvmath.traces.simulate.distances import prefix_distances
    ids, n_ids = block_ids(trace.hashes)
    order = access_sequence(trace)
    if trace.sample_rate >= 1:
        full, inv_rate = np.ones(len(ids), dtype=bool), 1.0
    else:
        full, inv_rate = trace.pos < trace.full_positions, 1.0 / trace.sample_rate
    return prefix_distances(order, trace.rid, ids, full, n_ids, inv_rate)


@dataclass
class Curve:
    """LRU hit rates against capacity (blocks; tokens = blocks x block_tokens)."""
    capacity_blocks: np.ndarray
    block_hit_rate: np.ndarray
    token_hit_rate: np.ndarray
    block_tokens: int
    max_block_hit_rate: float
    max_token_hit_rate: float
    sample_rate: float = 1.0
    base_block_hit_rate: float = 0.0  #: below the first step (SHARDS_adj's credit, else 0)
    base_token_hit_rate: float = 0.0

    @property
    def capacity_tokens(self):
        return self.capacity_blocks * self.block_tokens

    def at(self, capacity_blocks):
        """(block, token) hit rate at capacities (blocks), from the step curve."""
        i = np.searchsorted(self.capacity_blocks, capacity_blocks, "right") - 1
        ok = i >= 0
        if not len(self.capacity_blocks):
            return (np.full(np.shape(i), self.base_block_hit_rate),
                    np.full(np.shape(i), self.base_token_hit_rate))
        blocks = np.where(ok, self.block_hit_rate[np.maximum(i, 0)], self.base_block_hit_rate)
        tokens = np.where(ok, self.token_hit_rate[np.maximum(i, 0)], self.base_token_hit_rate)
        return blocks, tokens

    def rows(self, points=48):
        """Rows {capacity_tokens, block_hit_rate, token_hit_rate} on a geometric grid."""
        top = self.capacity_blocks[-1] if len(self.capacity_blocks) else 1
        caps = np.unique(np.round(np.geomspace(1, max(top, 1), points)))
        b, t = self.at(caps)
        return [{"capacity_tokens": int(c * self.block_tokens), "block_hit_rate": float(x),
                 "token_hit_rate": float(y)} for c, x, y in zip(caps, b, t)]


def lru_curve(trace: Trace, distances=None):
    """The exact LRU hit-rate curve at every capacity (steps at each distinct prefix distance).

    On a stratified SHARDS sample (see :func:`kvmath.traces.sampling.shards_keep`) each access counts
    by its weight, and SHARDS_adj (Waldspurger et al., FAST'15, sec. 4.2) is applied to the
    hash-sampled stratum: its totals are known exactly, and the difference between them and
    the weighted sample is credited to the smallest distance (hot blocks).
    """
    _, e = distances if distances is not None else stack_distances(trace)
    hashed = np.minimum(trace.n_blocks * trace.block_tokens, trace.prompt_tokens).sum()
    coverage = hashed / trace.prompt_tokens.sum()  # share of prompt tokens inside hashed blocks
    finite = np.isfinite(e)
    if trace.sample_rate >= 1:
        return _exact_curve(trace, e, finite, coverage)
    tokens = trace.access_tokens().astype(float)
    w = trace.weights()
    order = np.argsort(e[finite], kind="stable")
    ef = e[finite][order]
    cum_b = np.cumsum(w[finite][order])
    cum_t = np.cumsum((tokens * w)[finite][order])
    last = np.r_[ef[1:] != ef[:-1], True] if len(ef) else np.zeros(0, bool)
    nb, nt = float(w.sum()), float((tokens * w).sum())
    adj_b = adj_t = 0.0
    if trace.sample_rate < 1:
        full = trace.pos < trace.full_positions  # kept whole: totals exact
        n_full = np.minimum(trace.n_blocks, trace.full_positions)
        t_full = np.minimum(trace.prompt_tokens, n_full * trace.block_tokens)
        nb_all = float(trace.n_blocks.sum())
        nt_all = float(hashed)
        adj_b = (nb_all - n_full.sum()) - float(w[~full].sum())
        adj_t = (nt_all - t_full.sum()) - float((tokens * w)[~full].sum())
        nb, nt = nb_all, nt_all
    nb, nt = max(nb, 1.0), max(nt, 1.0)
    clip = lambda x: np.clip(x, 0.0, 1.0)  # noqa: E731
    return Curve(capacity_blocks=ef[last], block_hit_rate=clip((cum_b[last] + adj_b) / nb),
                 token_hit_rate=clip((cum_t[last] + adj_t) / nt) * coverage,
                 block_tokens=trace.block_tokens,
                 max_block_hit_rate=float(clip((w[finite].sum() + adj_b) / nb)),
                 max_token_hit_rate=float(clip(((tokens * w)[finite].sum() + adj_t) / nt)
                                          * coverage),
                 sample_rate=trace.sample_rate,
                 base_block_hit_rate=float(clip(adj_b / nb)),
                 base_token_hit_rate=float(clip(adj_t / nt) * coverage))


def _exact_curve(trace, e, finite, coverage):
    """lru_curve of a whole trace: its prefix distances are whole numbers of blocks, so one
    histogram per distance (np.bincount) replaces a sort of every access (the same sums:
    token counts are integers, exact in float64)."""
    tokens = trace.access_tokens()
    ef = e[finite].astype(np.int64)
    counts = np.bincount(ef)
    per_tokens = np.bincount(ef, weights=tokens[finite])
    del ef
    steps = np.flatnonzero(counts)
    cum_b = np.cumsum(counts)[steps].astype(float)
    cum_t = np.cumsum(per_tokens)[steps]
    nb, nt = float(max(len(e), 1)), float(max(tokens.sum(), 1))
    clip = lambda x: np.clip(x, 0.0, 1.0)  # noqa: E731
    return Curve(capacity_blocks=steps.astype(float), block_hit_rate=clip(cum_b / nb),
                 token_hit_rate=clip(cum_t / nt) * coverage, block_tokens=trace.block_tokens,
                 max_block_hit_rate=float(clip(finite.sum() / nb)),
                 max_token_hit_rate=float(clip(float(tokens[finite].sum()) / nt) * coverage),
                 sample_rate=trace.sample_rate)


def curve_error(approx: Curve, exact: Curve, points=200):
    """Largest absolute difference in block and token hit rate on a geometric capacity grid."""
    top = max(exact.capacity_blocks[-1], 1)
    caps = np.geomspace(1, top * 1.5, points)
    ab, at = approx.at(caps)
    eb, et = exact.at(caps)
    return float(np.abs(ab - eb).max()), float(np.abs(at - et).max())


# ------------------------------------------------------------------ multi-tier replay
@dataclass(frozen=True)
class TierSpec:
    """One tier of a node's KV store. Bandwidths are node totals, B/s.

    reload_tier: the kvmath tier (a Tier, or a ``tiers.csv`` name) whose path prices a reload; None for
    HBM (a hit there reloads nothing). drive_bytes set marks a tier of drives (NVMe): the
    selective policy filters its writes and its drive writes per day are reported.
    """
    name: str
    capacity_bytes: float
    read_Bps: float
    write_Bps: float
    reload_tier: str | Tier | None = None  # noqa: F821 (a kvmath.tables.rows.Tier; not evaluated)
    drive_bytes: float | None = None
    rated_dwpd: float | None = None
    rated_drive_writes: float | None = None  #: full-drive writes over a drive's rated life
    #: bytes one block occupies in this tier (None: the replay's block_bytes): in HBM every
    #: rank holds its own copy of replicated KV, where a store may hold one
    block_bytes: float | None = None


def window_percentile(values, windows, q):
    """np.percentile (linear) of ``windows`` one-second totals of which ``values`` holds some
    (an array or a {window: bytes} dict; the others are zero), without building the zeros."""
    if isinstance(values, dict):
        values = np.fromiter(values.values(), dtype=float, count=len(values))
    nonzero = np.sort(np.asarray(values, dtype=float))
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
    contents are an LRU over the whole trace, whichever node served each request), and the
    blocks written to it (an int, the accesses not present: new blocks only, deduplicated).

    Simulated (:class:`kvmath.traces.simulate.pools.SharedLRU`, memory bounded by the capacity), a
    chunk of requests at a time; the same as the blocks whose prefix distance is within the
    capacity (Mattson: present iff D <= C), which tests hold it to."""
    from kvmath.traces.simulate.pools import SharedLRU
    lru = SharedLRU(capacity_blocks)
    hits = np.concatenate([lru.feed(trace.n_blocks[a:b], h) for a, b, h in block_chunks(trace)]
                          or [np.zeros(0, np.int64)])
    return hits, lru.written


#: how a node's offload tiers are written: "back" (a block reaches host DRAM when HBM evicts it,
#: and the drives when DRAM does: vLLM's offloading connector, SGLang HiCache's write_back) or
#: "through" (every block a request brings into HBM is written at once to every lower tier
#: that lacks it, an eviction then writing nothing: LMCache's store to every backend, HiCache's
#: write_through)
WRITE_MODES = ("back", "through")


def replay(trace: Trace, tiers, block_bytes, policy="lru", ttl_s=None, min_uses=2, cost=None,
           service=False, shared=None, writes="back", exits=None):
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
    exits: called with (request indices, hashes) of the blocks leaving the node, a bounded
    buffer at a time (:func:`kvmath.traces.simulate.tiers.replay_arrays`): what a write-back pool
    below the node takes; the answer then also holds each request's own ``hit_blocks``. A block
    the ``ttl`` policy lets expire is deleted, not handed on.

    The replay is compiled (:func:`kvmath.traces.simulate.tiers.replay_arrays`): the trace's
    per-request arrays and its block hashes (8 bytes an access), beside the tiers' contents
    (a few tens of bytes a block held; with ``ttl`` or ``selective``, a count for every block
    the trace names).
    """
    if trace.sample_rate < 1:
        raise ValueError("replay needs the whole trace, not a SHARDS sample")
    if policy not in ("lru", "ttl", "selective"):
        raise ValueError(f"unknown policy {policy!r}; expected lru, ttl or selective")
    if policy == "ttl" and not (ttl_s and ttl_s > 0):
        raise ValueError("policy ttl needs a positive ttl_s")
    if writes not in WRITE_MODES:
        raise ValueError(f"unknown write mode {writes!r}; expected {' or '.join(WRITE_MODES)}")
    from kvmath.traces.simulate.tiers import Tiers, replay_arrays
    sizes = [t.block_bytes or block_bytes for t in tiers]  # bytes of a block in each tier
    caps = [int(t.capacity_bytes // b) for t, b in zip(tiers, sizes)]
    windows = int(math.floor(trace.duration_s)) + 1
    if shared is not None:
        shared_spec = shared[0]
        shared_size = shared_spec.block_bytes or block_bytes
    out = replay_arrays(trace, Tiers(cap=caps, size=sizes, wbps=[t.write_Bps for t in tiers],
                                     drive=[bool(t.drive_bytes) for t in tiers]),
                        policy, ttl=ttl_s if policy == "ttl" else None, min_uses=min_uses,
                        through=writes == "through",
                        shared_hits=None if shared is None else shared[1],
                        shared_size=shared_size if shared is not None else 0.0, exits=exits)
    total_blocks = int(np.sum(trace.n_blocks))
    duration = max(trace.duration_s, 1.0)
    out_tiers = []
    for k, spec in enumerate(tiers):
        # sum() of the 1-s windows in arrival order, as the Python replay summed its dict
        rd, wr = out["rd"][k], out["wr"][k]
        row = {"tier": spec.name, "capacity_bytes": spec.capacity_bytes,
               "capacity_blocks": caps[k], "hits": int(out["hits"][k]),
               "hit_rate": int(out["hits"][k]) / max(total_blocks, 1),
               "read_Bps_mean": float(sum(rd.tolist()) / duration),
               "read_Bps_p99": window_percentile(rd, windows, 99),
               "write_Bps_mean": float(sum(wr.tolist()) / duration),
               "write_Bps_p99": window_percentile(wr, windows, 99),
               "read_bandwidth_Bps": spec.read_Bps, "write_bandwidth_Bps": spec.write_Bps,
               "writes": int(out["writes"][k]), "writes_dropped": int(out["dropped"][k]),
               "writes_filtered": int(out["filtered"][k])}
        if spec.drive_bytes:
            dwpd = row["write_Bps_mean"] * 86400 / spec.capacity_bytes
            row["drive_writes_per_day"] = dwpd
            row["rated_dwpd"] = spec.rated_dwpd
            row["lifetime_years"] = (spec.rated_drive_writes / (dwpd * 365.25)
                                     if spec.rated_drive_writes and dwpd > 0 else math.inf)
        out_tiers.append(row)
    if shared is not None:
        srd, shared_blocks = out["srd"], out["shared_blocks"]
        out_tiers.append({"tier": shared_spec.name, "capacity_bytes": shared_spec.capacity_bytes,
                          "hits": shared_blocks, "hit_rate": shared_blocks / max(total_blocks, 1),
                          "read_Bps_mean": float(sum(srd.tolist()) / duration),
                          "read_Bps_p99": window_percentile(srd, windows, 99),
                          "read_bandwidth_Bps": shared_spec.read_Bps, "shared": True})
    # the tokens of each request's hit blocks: its leading blocks' tokens (whole numbers, so
    # the sum is exact in float64 in any order)
    hit_tokens = np.minimum(out["hit_blocks"] * trace.block_tokens,
                            trace.prompt_tokens).astype(float)
    result = {"requests": trace.n_requests, "policy": policy, "ttl_s": ttl_s, "writes": writes,
              "min_uses": min_uses if policy == "selective" else None,
              "block_bytes": block_bytes, "duration_s": trace.duration_s,
              "block_hit_rate": float(out["hit_blocks"].sum() / max(total_blocks, 1)),
              "token_hit_rate": float(hit_tokens.sum() / trace.prompt_tokens.sum()),
              "tiers": out_tiers}
    if exits is not None:
        result["hit_blocks"] = out["hit_blocks"]
    if cost is not None:
        result.update(cost.price(trace, out["runs"], duration, service=service))
    return result


class HitCost:
    """Reload against recompute for each hit, from :func:`kvmath.evaluate.compare.sweep` (the same
    lambdified expressions as ``compare``), tabulated once per block count.

    A run of hit blocks [a, b) from tier k saves R(b) - R(a) of recompute (R: recompute time of
    a prefix, s; R(0) the one-token prefill, the request's own forward pass, which it runs
    anyway) and costs the tier's reload of b - a blocks without an engine step of its own; a run
    whose reload is not faster is recomputed (an HBM run never is). GPU-seconds are tp x
    seconds. Demand counts the prefill still run (misses, lost reloads and every request's own
    forward pass) plus the reload time, in GPU-seconds per second.
    """

    def __init__(self, model, gpu, tiers, tp, gpus, engine=None, kv_dtype=None):
        from kvmath.evaluate.api import sweep
        from kvmath.tables.rows import resolve_tier
        self.model, self.gpu, self.tiers, self.tp, self.gpus = model, gpu, tiers, tp, gpus
        self.engine = engine  #: the engine profile of the reloads (None: the default)
        self.kv_dtype = kv_dtype  #: the KV's element type (None: the model's)
        self._sweep, self._resolve = sweep, resolve_tier

    def _tables(self, trace):
        if getattr(self, "_prepared", None) is not None:
            tables = self._from_prepared(trace)
            if tables is not None:
                return tables
        nmax = int(trace.n_blocks.max()) if trace.n_requests else 1
        rec_blk, reload_blk = self._block_tables(trace.block_tokens, nmax)
        # each distinct prompt length once (the sweep is elementwise: the same values)
        lengths, which = np.unique(trace.prompt_tokens, return_inverse=True)
        return rec_blk, reload_blk, self._prompt_table(lengths)[which.ravel()]

    def _block_tables(self, bt, nmax):
        lengths = np.arange(1, nmax + 1) * bt
        any_tier = self._resolve("host-dram")
        _, rec = self._sweep(self.model, self.gpu, any_tier, lengths, tp=self.tp,
                             kv_dtype=self.kv_dtype)
        # R(0) is the request's own forward pass (a one-token prefill), which it runs with or
        # without a cache: a hit saves R(b) - R(a) beyond it, and a reload pays no step of its own
        _, own = self._sweep(self.model, self.gpu, any_tier, np.array([1.0]), tp=self.tp,
                             kv_dtype=self.kv_dtype)
        rec_blk = np.r_[float(own[0]), rec]
        reload_blk = []
        for spec in self.tiers:
            if spec.reload_tier is None:
                reload_blk.append(np.zeros(nmax + 1))
            else:
                tier = (spec.reload_tier if not isinstance(spec.reload_tier, str)
                        else self._resolve(spec.reload_tier))  # a node's own path, or by name
                rl, _ = self._sweep(self.model, self.gpu, tier, lengths, own_step=False, tp=self.tp,
                                    engine=self.engine, kv_dtype=self.kv_dtype)
                reload_blk.append(np.r_[0.0, rl])
        return rec_blk, reload_blk

    def _prompt_table(self, lengths):
        _, rec = self._sweep(self.model, self.gpu, self._resolve("host-dram"),
                             np.asarray(lengths).astype(float), tp=self.tp,
                             kv_dtype=self.kv_dtype)
        return np.asarray(rec, dtype=float)

    def prepare(self, trace):
        """Tabulate once what pricing the parts of ``trace`` needs (a fleet's nodes, each
        priced on its own): every block count up to the trace's longest request, and every
        prompt length it holds (the sweep is elementwise: a part's tables are slices of
        these). A prepared cost model prices without the expressions (a Dask worker needs
        none of them)."""
        nmax = int(trace.n_blocks.max()) if trace.n_requests else 1
        lengths = np.unique(trace.prompt_tokens)
        self._prepared = (trace.block_tokens, nmax,
                          *self._block_tables(trace.block_tokens, nmax),
                          lengths, self._prompt_table(lengths))
        return self

    def _from_prepared(self, trace):
        bt, nmax, rec_blk, reload_blk, lengths, rec_len = self._prepared
        need = int(trace.n_blocks.max()) if trace.n_requests else 1
        if bt != trace.block_tokens or need > nmax:
            return None
        i = np.searchsorted(lengths, trace.prompt_tokens)
        if np.any(i >= len(lengths)) or np.any(lengths[np.minimum(i, len(lengths) - 1)]
                                               != trace.prompt_tokens):
            return None
        return rec_blk[:need + 1], [r[:need + 1] for r in reload_blk], rec_len[i]

    def price(self, trace, runs, duration, service=False):
        """The replay's savings and demand; with ``service``, also ``service_s``: each request's
        own time on its replica (its prefill less what its hits saved, plus their reloads), s.
        runs: the replay's hit runs (arrays of request, tier, first block, end block), priced
        in order by a compiled loop (:func:`kvmath.traces.simulate.tiers.price_runs`)."""
        from kvmath.traces.simulate.tiers import price_runs
        rec_blk, reload_blk, rec_prompt = self._tables(trace)
        saved, lost, reload_time, own = price_runs(
            runs, trace.n_blocks, rec_prompt, rec_blk, reload_blk,
            [s.reload_tier is None for s in self.tiers], service)
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


def with_hbm_blocks(specs, model, gpu, tp, block_tokens, engine=None, kv_dtype=None):
    """specs with the HBM tier's block size set to what one block occupies there: every rank's
    copy (kv_replication copies), where the offload tiers hold what the engine stores
    (:func:`kv_block_bytes`). A block is attention KV only (a hybrid model's state is not a
    block's: the replay counts blocks, a limit for hybrids)."""
    from dataclasses import replace as _replace

    from kvmath.evaluate.api import compare_at
    from kvmath.tables.rows import resolve_tier
    # per-token bytes, the same at any prefix the windows hold (compare needs 2 tokens or more)
    r = compare_at(model, gpu, resolve_tier("host-dram"), max(block_tokens, 2), tp=tp,
                   engine=engine, kv_dtype=kv_dtype)
    hbm = r["kv_bytes_per_token"] * block_tokens * r["kv_replication"]
    return [_replace(t, block_bytes=hbm) if t.name == "hbm" else t for t in specs]


def kv_block_bytes(model, gpu, tp, block_tokens, engine=None, kv_dtype=None):
    """KV bytes one block occupies in the offload tiers: compare's kv_bytes_per_token x
    block_tokens, times the copies the engine stores of it (one per rank of a replicated MLA
    latent or KV head unless the engine stores it once: kv_stored_copies)."""
    from kvmath.evaluate.api import compare_at
    from kvmath.tables.rows import resolve_tier
    # per-token bytes, the same at any prefix the windows hold (compare needs 2 tokens or more)
    r = compare_at(model, gpu, resolve_tier("host-dram"), max(block_tokens, 2), tp=tp,
                   engine=engine, kv_dtype=kv_dtype)
    return r["kv_bytes_per_token"] * block_tokens * r["kv_stored_copies"]


def node_tiers(node, model, tp=None, remote_bytes=None, batch_seqs=None, batch_context=None,
               **plan_kw):
    """Tier specs of a node for the replay, from :func:`kvmath.evaluate.reuse.node_capacities`: the
    same capacities and bandwidths as the analytic plan (HBM after the activation reserve,
    weights and a running batch of batch_seqs sequences of batch_context tokens; host DRAM;
    the NVMe array with drives.csv's write bandwidth and rated endurance), and optionally a
    remote pool of remote_bytes over the node's RDMA path. plan_kw: the other options of
    node_capacities (gpu, compute_dtype, gpu_memory_utilization, activation_reserve,
    writes_within_rating)."""
    from kvmath.evaluate.api import path_values
    from kvmath.node.capacities import node_capacities
    from kvmath.evaluate.api import node_nvme_tier
    from kvmath.tables.rows import bundled, prices
    nc = node_capacities(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context,
                         **plan_kw)
    t, drive = nc["tiers"], nc["drive"]
    specs = [TierSpec("hbm", t["hbm"]["capacity_bytes"], t["hbm"]["read_Bps"],
                      t["hbm"]["write_Bps"])]
    if "host-dram" in t:  # none where the engine caches nothing there (--host-cache-bytes 0)
        specs.append(TierSpec("host-dram", t["host-dram"]["capacity_bytes"],
                              t["host-dram"]["read_Bps"], t["host-dram"]["write_Bps"],
                              "host-dram"))
    if "nvme" in t:
        lifetime = drive.lifetime_drive_writes if drive else \
            prices()["nvme_drive_writes_lifetime"].value
        specs.append(TierSpec("nvme", t["nvme"]["capacity_bytes"], t["nvme"]["read_Bps"],
                              t["nvme"]["write_Bps"], node_nvme_tier(node),
                              drive_bytes=node.nvme_drive_bytes,
                              rated_dwpd=drive.drive_writes_per_day if drive else None,
                              rated_drive_writes=lifetime))
    if remote_bytes:
        bw = path_values(bundled().tiers["rdma"], nc["gpu"], node.gpus)[0] * node.gpus
        specs.append(TierSpec("remote", remote_bytes, bw, bw, "rdma"))
    return specs
