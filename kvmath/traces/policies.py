"""LRU against ARC, S3-FIFO and the Belady bound, on a trace's block accesses (issue 21).

kvmath's tiers are LRU. This module asks how much another eviction policy of the same
capacity would hit, using libCacheSim's implementations (Yang et al., libCacheSim, the
``libcachesim`` Python package, pinned in requirements.txt): LRU, ARC (Megiddo and Modha,
FAST'03), S3-FIFO (Yang et al., SOSP'23; libCacheSim's S3FIFO.c, which inserts into the main
FIFO while the small one is full and the cache is not) and Belady's MIN, the offline optimum
(it evicts the block used again farthest in the future, so it knows the trace's future).

**What is counted.** Each policy is an *object cache* of ``capacity_blocks`` uniform blocks,
fed every block access of the trace, request after request, each request's blocks head first
(the order the trace holds them); an access hits when its block is present, whatever the blocks
before it in the request. kvmath's own LRU (:mod:`kvmath.traces.replay`) counts differently:
a request looks all its blocks up before it inserts any, only its *leading* present blocks are
usable hits (a prefix cache computes the rest again), and it inserts its blocks tail first, head
last, so that LRU evicts a prefix's tail before its head. The two LRUs therefore differ: fed head
first, an object LRU leaves a request's tail the most recent and evicts heads first.
:func:`compare` reports kvmath's prefix-hit LRU beside the policies, and :func:`lru_as_kvmath`
replays libCacheSim's LRU the way kvmath counts (lookups before inserts, tail first), which
tests hold exactly to kvmath's stack distances.

Belady with forced insertion (every miss is inserted, as LRU, ARC and S3-FIFO insert it) is the
optimum of those policies: no policy that inserts every miss hits more at the same capacity.

**Memory.** LRU, ARC and S3-FIFO hold their own state only (the cache and its ghost lists,
bounded by the capacity); the accesses are fed a slice of :data:`FEED_ACCESSES` at a time from
the hashes the trace holds. Belady needs each access's next use: one int64 per access beside the
hashes, the one access-length array this module keeps (while it is made, by one stable sort of
the hashes, three int64 per access at most).

A SHARDS sample (``sample_rate`` < 1) is refused: a scaled-down cache reproduces LRU's hit rate
on a spatial sample (LRU is a stack algorithm), but not ARC's, S3-FIFO's or Belady's, and
kvmath's stratified sample keeps each request's leading blocks at a rate of 1 and the others at
R, so no one scaled capacity stands for the trace's.
"""
from __future__ import annotations

import numpy as np

from kvmath.errors import InputError
from kvmath.traces.readers import Trace

#: the policies compared, by key, and their names in a table
POLICIES = ("lru", "arc", "s3fifo", "belady")
NAMES = {"lru": "LRU", "arc": "ARC", "s3fifo": "S3-FIFO", "belady": "Belady"}
_CLASSES = {"lru": "LRU", "arc": "ARC", "s3fifo": "S3FIFO", "belady": "Belady"}
#: S3-FIFO's small FIFO is this share of the cache (libCacheSim's default, the paper's 10%)
S3FIFO_SMALL_RATIO = 0.1
#: the smallest capacity S3-FIFO runs at: libCacheSim refuses to insert an object as large as
#: the small FIFO (int(0.1 x C) bytes), so with one-block objects the small FIFO needs two
#: blocks; below this it would admit nothing, and :func:`object_hits` answers None
S3FIFO_MIN_BLOCKS = 20
#: "never used again", as libCacheSim's Belady reads a next access time
NEVER = np.iinfo(np.int64).max
#: how the policies are fed, in words (the trace command's output)
FED = ("every block access, request after request, each request's blocks head first; a hit is "
       "any block present")
#: accesses turned into Python integers at a time (memory: one such list)
FEED_ACCESSES = 1 << 16


class PolicyError(InputError, ValueError):
    """A trace or capacity the comparison cannot answer for (a sample, a negative capacity):
    bad input, which the command line prints as one line, exit 2."""


def next_uses(hashes):
    """Per access, the index of the next access of the same block, or :data:`NEVER` (int64)."""
    n = len(hashes)
    by = np.argsort(hashes, kind="stable")  # equal hashes in trace order
    out = np.full(n, NEVER, dtype=np.int64)
    if n > 1:
        ordered = hashes[by]
        same = ordered[1:] == ordered[:-1]
        del ordered
        out[by[:-1]] = np.where(same, by[1:], NEVER)
    return out


def _cache(policy, capacity_blocks):
    import libcachesim as lcs
    # the hash table sized to the cache (libCacheSim's default 2^24 buckets is 128 MiB a cache)
    power = int(min(24, max(10, int(capacity_blocks).bit_length() + 1)))
    kwargs = {"small_size_ratio": S3FIFO_SMALL_RATIO} if policy == "s3fifo" else {}
    return getattr(lcs, _CLASSES[policy])(int(capacity_blocks), hashpower=power, **kwargs)


def _check(trace: Trace, capacity_blocks):
    if trace.sample_rate < 1:
        raise PolicyError(f"{trace.name}: a SHARDS sample (rate {trace.sample_rate:g}) cannot "
                          "compare eviction policies: ARC, S3-FIFO and Belady need every block "
                          "access (LRU alone scales from a sample)")
    if int(capacity_blocks) != capacity_blocks or capacity_blocks < 0:
        raise PolicyError(f"a cache capacity must be a whole number of blocks >= 0, got "
                          f"{capacity_blocks!r}")


def object_hits(trace: Trace, capacity_blocks, policies=POLICIES):
    """{policy: block accesses that find their block present} for an object cache of each
    policy holding ``capacity_blocks`` blocks, fed the trace's accesses head first; None for
    S3-FIFO below :data:`S3FIFO_MIN_BLOCKS`. An empty cache (capacity 0) hits nothing."""
    _check(trace, capacity_blocks)
    import libcachesim as lcs
    out = {}
    hashes = trace.hashes
    for policy in policies:
        if capacity_blocks == 0:
            out[policy] = 0
            continue
        if policy == "s3fifo" and capacity_blocks < S3FIFO_MIN_BLOCKS:
            out[policy] = None
            continue
        cache = _cache(policy, capacity_blocks)
        nxt = next_uses(hashes) if policy == "belady" else None
        req = lcs.Request()
        req.obj_size = 1
        get = cache.get
        hits = 0
        for a in range(0, len(hashes), FEED_ACCESSES):
            ids = hashes[a:a + FEED_ACCESSES].tolist()
            if nxt is None:
                for h in ids:
                    req.obj_id = h
                    hits += get(req)
            else:
                for h, t in zip(ids, nxt[a:a + FEED_ACCESSES].tolist()):
                    req.obj_id = h
                    req.next_access_vtime = t
                    hits += get(req)
            del ids  # before the next slice is made: one slice of Python integers at a time
        del nxt, cache
        out[policy] = hits
    return out


def lru_as_kvmath(trace: Trace, capacity_blocks):
    """(blocks present when their request began, leading blocks present) of libCacheSim's LRU
    replayed as kvmath's replay counts: each request looks all its blocks up first (without
    touching them), then uses them tail first. Equal to the accesses whose stack distance and
    prefix distance (:func:`kvmath.traces.replay.stack_distances`) are within the capacity."""
    _check(trace, capacity_blocks)
    if capacity_blocks == 0:
        return 0, 0
    import libcachesim as lcs
    cache = _cache("lru", capacity_blocks)
    req = lcs.Request()
    req.obj_size = 1
    present = leading = 0
    offsets = np.zeros(trace.n_requests + 1, np.int64)
    np.cumsum(trace.n_blocks, out=offsets[1:])
    for r in range(trace.n_requests):
        blocks = trace.hashes[offsets[r]:offsets[r + 1]].tolist()
        lead = True
        for h in blocks:
            req.obj_id = h
            found = cache.find(req, False) is not None
            present += found
            lead = lead and found
            leading += lead
        for h in reversed(blocks):
            req.obj_id = h
            cache.get(req)
    return present, leading


def compare(trace: Trace, capacities_blocks, policies=POLICIES, distances=None):
    """Rows, one per capacity: ``capacity_blocks``, ``accesses`` (the trace's block accesses),
    per policy its block hit ratio (hits / accesses; None where :func:`object_hits` gives
    None, and every ratio None when the trace has no block access), and kvmath's own LRU at that capacity: ``kvmath_lru_prefix`` (leading blocks
    present, the hits kvmath's replay counts) and ``kvmath_lru_present`` (blocks present when
    the request began), from its stack distances (``distances``: as
    :func:`kvmath.traces.replay.stack_distances` returns them, computed when not given)."""
    for c in capacities_blocks:
        _check(trace, c)
    from kvmath.traces.replay import stack_distances
    d, e = distances if distances is not None else stack_distances(trace)
    n = len(trace.hashes)
    rows = []
    for c in capacities_blocks:
        row = {"capacity_blocks": int(c), "accesses": n}
        if not n:  # no prompt fills a block: a ratio of no accesses is no number
            row.update(dict.fromkeys(tuple(policies) + ("kvmath_lru_prefix",
                                                        "kvmath_lru_present")))
            rows.append(row)
            continue
        hits = object_hits(trace, c, policies)
        row.update({p: (None if h is None else h / n) for p, h in hits.items()})
        row["kvmath_lru_prefix"] = float((e <= c).sum()) / n
        row["kvmath_lru_present"] = float((d <= c).sum()) / n
        rows.append(row)
    return rows


def tier_capacities(specs, block_bytes):
    """[(tier names, bytes, blocks)]: one cache of the node's tiers' capacities added up, top
    down (HBM, then HBM and host DRAM, ...), as ``route`` gives each node and ``trace
    --sample-rate`` reports; a tier's blocks at its own block size (an HBM block is every
    rank's copy)."""
    out, names, blocks, size = [], [], 0, 0.0
    for spec in specs:
        names.append(spec.name)
        blocks += int(spec.capacity_bytes // (spec.block_bytes or block_bytes))
        size += spec.capacity_bytes
        out.append((list(names), size, blocks))
    return out


def version():
    """libCacheSim's version, as its package states it."""
    import libcachesim as lcs
    return lcs.__version__
