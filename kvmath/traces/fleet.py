"""A fleet of N nodes on one trace: the router places each request (:mod:`kvmath.traces.routing`),
then each node replays its own requests through its own tiers (:func:`kvmath.traces.replay.replay`,
priced by :class:`~kvmath.traces.replay.HitCost`): per node its hits, traffic, wear and prefill
demand against its GPUs. After routing the nodes' replays are independent.

The nodes' replays run on Dask (``dask="local"``, the command's default: a local cluster, one
worker of a thread per core in this process, started once per process; or the address of a
running scheduler, given up on after :data:`DASK_TIMEOUT_S`), or in this process on a thread
per core (``dask=None``, the function's default; the compiled kernels release the GIL), with
the same results. A trace streamed from disk (:class:`~kvmath.traces.readers.TraceFile`)
is read in order, a chunk at a time: routing writes each node's blocks to a file of its own,
and each node's replay reads only its own, so memory holds the per-request columns, the
routers' and one replay per thread's caches, not the trace's blocks.

Counted: prefill (the prompts' misses, lost reloads and every request's own forward pass) and
reload time, in GPU-seconds per second; decode, the trace's output tokens at the GPU time one
costs in a decode step of the node's running batch (:func:`kvmath.evaluate.serving.
decode_cost`: batch_seqs sequences over the node's replicas, at the trace's mean decode
context); a node is feasible when its prefill and decode together fit its GPUs (they share
them, as an engine with chunked prefill runs both). Each request's time to first token is its
wait for a free replica of its node (first come, first served over the node's GPUs / TP
replicas, each serving one prefill at a time) plus its own prefill and reloads, stretched by the
share of the GPUs decode leaves (ASSUMED: prefill runs in the time decode steps leave free). Not
counted (stated in every answer): the engine's batching of several prefills into one step.

A pool (``pool=``) sits below every node's tiers, shared by the fleet. Written through (the
default), every request's new blocks are written to it, so its contents are an LRU over the
whole trace, and each request's leading blocks in it come from the whole trace's stack
distances (:func:`kvmath.traces.replay.shared_prefix_hits`) before the nodes' replays. Written
back (``pool_writes="back"``), it takes the blocks the nodes let go: a first pass over the
nodes records, per request, the blocks leaving each node's last tier (a node's tiers hold the
same blocks whatever the pool serves), and the pool's LRU replays the whole trace in arrival
order, each request reading what its node lacks, then taking its node's evictions
(:func:`pool_write_back`). Either way each node then reads from it what its own tiers miss,
over its share of the pool's servers and NICs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvmath.scenario.options import DASK_TIMEOUT_S
from kvmath.traces import readers as T
from kvmath.traces import replay as C
from kvmath.traces.routing import route

#: what the fleet replay leaves out, in every answer
NOT_COUNTED = ("batching several prefills in a step", "a shared pool")


def ttft_fcfs(arrival_s, service_s, servers):
    """Time to first token of each request, s: first come, first served over ``servers``
    identical replicas, each serving one request at a time (wait for the earliest free one, then
    its own service time). Requests in order of arrival. Compiled
    (:func:`kvmath.traces.simulate.queue.fcfs`)."""
    from kvmath.traces.simulate.queue import fcfs
    return fcfs(arrival_s, service_s, servers)


def check_fleet(trace, nodes):
    """Refuse a fleet of more nodes than the trace has requests (every other node would idle,
    and the routing's work grows with nodes x requests)."""
    from kvmath.evaluate.values import ScenarioError
    if nodes > max(trace.n_requests, 1):
        raise ScenarioError(f"--nodes {nodes:,} exceeds the trace's {trace.n_requests:,} "
                            "requests: at most one node per request")


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


def node_setup(trace, model, node, tp=None, engine=None, batch_seqs=None, batch_context=None,
               **cache_kw):
    """(tier specs, block bytes, cost model, blocks a node holds in all its tiers)."""
    from kvmath.evaluate.compare import node_tp
    from kvmath.tables.rows import bundled
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    tp = tp or node_tp(model, node.gpus)
    batch_context = batch_context or T.batch_context_of(trace, model)
    specs = C.node_tiers(node, model, tp=tp, batch_seqs=batch_seqs, batch_context=batch_context,
                         **cache_kw)
    specs = C.with_hbm_blocks(specs, model, gpu, tp, trace.block_tokens, engine)
    block_bytes = C.kv_block_bytes(model, gpu, tp, trace.block_tokens, engine=engine)
    blocks = int(sum(s.capacity_bytes // (s.block_bytes or block_bytes) for s in specs))
    return specs, block_bytes, C.HitCost(model, gpu, specs, tp, node.gpus, engine=engine), blocks, tp


def node_decode(trace, model, node, tp, engine=None, batch_seqs=None):
    """The decode step a node's replica runs (:func:`kvmath.evaluate.serving.decode_cost`): the
    node's running batch (batch_seqs, default plan_defaults.csv) over its node.gpus / tp replicas,
    the busiest replica's share rounded up and at least one sequence, at the trace's mean decode
    context."""
    import math

    from kvmath.evaluate.serving import decode_cost
    from kvmath.tables.rows import bundled, plan_defaults
    seqs = plan_defaults()["batch_seqs"].value if batch_seqs is None else batch_seqs
    per_replica = max(1, math.ceil(seqs / max(node.gpus // tp, 1)))
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    out = decode_cost(model, gpu, tp, per_replica, T.decode_context_of(trace, model),
                      engine=engine)
    return {**out, "batch_seqs_per_node": seqs}


def pool_spec(node, nodes, pool):
    """The TierSpec of ``pool`` shared by the fleet's ``nodes`` GPU nodes: its whole capacity
    (:meth:`~kvmath.tables.rows.Pool.capacity`), read by each node over its share of the pool's
    servers and NICs (:func:`~kvmath.tables.rows.pool_tier`)."""
    from kvmath.evaluate.compare import path_values
    from kvmath.tables.rows import bundled, pool_tier
    gpu = replace(bundled().gpus[node.gpu], gpus_per_node=node.gpus)
    path = pool_tier(pool, nodes)
    bw = path_values(path, gpu, node.gpus)[0] * node.gpus
    return C.TierSpec(f"pool:{pool.name}", pool.capacity(nodes), bw, bw / pool.replicas, path)


def pool_setup(trace, model, node, nodes, pool, tp, block_bytes, engine=None):
    """(TierSpec, leading blocks of each request it holds, blocks written to it) of ``pool``
    shared by the fleet's ``nodes`` GPU nodes, written through (every request's blocks, new ones
    only: :func:`kvmath.traces.replay.shared_prefix_hits`)."""
    spec = pool_spec(node, nodes, pool)
    hits, written = C.shared_prefix_hits(trace, int(spec.capacity_bytes // block_bytes))
    return spec, hits, written


def node_exits(n, sub, specs, block_bytes, writes, path=None):
    """Node n's first pass below a write-back pool: its own tiers' hit of each request
    (``hit_blocks``) and the blocks that leave them while it serves each (``n_exits``), their
    hashes appended to the file ``path`` in order (or returned, ``exit_hashes``, when path is
    None: a worker that may not see this machine's files). The node's tiers hold the same
    blocks whatever the pool serves (every request's blocks end in HBM either way), so this
    pass and the priced one agree on them."""
    if hasattr(sub, "loaded"):
        sub = sub.loaded()
    counts = np.zeros(sub.n_requests, np.int64)
    parts = []
    fh = open(path, "wb") if path else None

    def sink(r, h):  # r: request indices in order, so one slice of counts a buffer
        lo = int(r[0])
        counts[lo:int(r[-1]) + 1] += np.bincount(r - lo)
        if fh is not None:
            h.tofile(fh)
        else:
            parts.append(h.copy())
    try:
        hit = (C.replay(sub, specs, block_bytes, writes=writes, exits=sink)["hit_blocks"]
               if sub.n_requests else np.zeros(0, np.int64))
    finally:
        if fh is not None:
            fh.close()
    return {"node": n, "hit_blocks": hit, "n_exits": counts,
            "exit_hashes": None if path else (np.concatenate(parts) if parts
                                              else np.zeros(0, np.uint64))}


def pool_write_back(trace, where, first, paths, capacity_blocks):
    """(leading blocks of each request its node and the pool hold, blocks written to the pool)
    of a pool of ``capacity_blocks`` that the nodes write their evicted blocks to (written
    back: Mooncake Store's and LMCache's remote backends under HiCache's write_back, a block
    reaching the pool when its node lets it go), over the whole trace in arrival order: each
    request reads what its node lacks from the pool, then the blocks its node evicted while
    serving it are written (:class:`kvmath.traces.simulate.pools.BackLRU`). first: each node's
    :func:`node_exits`, in node order, their hashes in the files ``paths``; read a chunk of
    requests at a time, so memory holds the per-request columns and the pool's blocks."""
    from kvmath.traces.simulate.pools import BackLRU
    n, nodes = trace.n_requests, len(first)
    node_hit, n_exits = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for k, x in enumerate(first):
        mine = np.flatnonzero(where == k)
        node_hit[mine], n_exits[mine] = x["hit_blocks"], x["n_exits"]
    lru = BackLRU(capacity_blocks)
    handles = [open(p, "rb") for p in paths]
    try:
        hits = []
        for a, b, h in T.block_chunks(trace):
            w, ne = where[a:b].astype(np.int64), n_exits[a:b]
            counts = np.zeros(nodes, np.int64)
            np.add.at(counts, w, ne)
            seg = np.concatenate([np.fromfile(handles[k], dtype=np.uint64, count=int(c))
                                  for k, c in enumerate(counts.tolist())]
                                 or [np.zeros(0, np.uint64)])
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            hits.append(lru.feed_back(trace.n_blocks[a:b], h, node_hit[a:b], w, ne, seg, starts))
    finally:
        for fh in handles:
            fh.close()
    return np.concatenate(hits or [np.zeros(0, np.int64)]), lru.written


def replay_node(n, sub, specs, block_bytes, cost, span_s, gpus, replicas,
                decode_gpu_s_per_token=0.0, shared=None, writes="back"):
    """Node n's answer: its requests ``sub`` replayed through its tiers, rates over the whole
    trace's span ``span_s`` (so the nodes' demands add up to the fleet's), its decode demand
    (its output tokens at ``decode_gpu_s_per_token`` GPU-seconds each), and each request's time
    to first token on the node's ``replicas`` (``ttft_s``, an array; None with ``ttft_s_p99``
    when decode alone fills the node's GPUs, the queue then growing without bound)."""
    if hasattr(sub, "loaded"):  # a node's share whose hashes wait in a file
        sub = sub.loaded()
    if sub.n_requests == 0:
        return {"node": n, "requests": 0, "token_hit_rate": None, "prompt_tokens": 0,
                "prefill_gpu_s_per_s": 0.0, "decode_gpu_s_per_s": 0.0,
                "reload_gpu_s_per_s": 0.0, "feasible": True,
                "ttft_s_p99": None, "tiers": [], "ttft_s": np.empty(0)}
    rep = C.replay(sub, specs, block_bytes, cost=cost, service=True, shared=shared, writes=writes)
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


#: the local Dask cluster's client, started on first use and closed as the process ends
_LOCAL = None
#: where the local cluster's HTTP servers listen: this machine only, any free port
LOOPBACK = "127.0.0.1:0"


def _close_local():
    """Close the local cluster (as the process ends); its scheduler's notes on the workers
    leaving are not the answer's, so the distributed logger is quiet while it closes."""
    import logging
    global _LOCAL
    if _LOCAL is not None:
        client, _LOCAL = _LOCAL, None
        log = logging.getLogger("distributed")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            client.close()
            client.cluster.close()
        finally:
            log.setLevel(level)


def _dask_client(dask):
    """A Dask client: a local cluster (``"local"``: one worker in this process with a thread per
    core, so the replays share this process's memory and run in parallel, the compiled kernels
    releasing the GIL) or the scheduler at an address."""
    import os

    from kvmath.evaluate.values import ScenarioError
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - pinned in requirements.txt
        raise ScenarioError("--dask needs the distributed package (pip install distributed)")
    if dask == "local":  # one for the process: a fleet search replays many fleets
        global _LOCAL
        if _LOCAL is None or _LOCAL.status != "running":
            import atexit
            # in this process, over inproc:// transport; the scheduler's and worker's HTTP
            # servers (which Dask starts whatever the dashboard) on this machine's loopback
            # only, on ports of the system's choosing (never a warning that 8787 is taken)
            _LOCAL = Client(LocalCluster(processes=False, n_workers=1,
                                         threads_per_worker=os.cpu_count() or 1,
                                         dashboard_address=LOOPBACK,
                                         worker_dashboard_address=LOOPBACK))
            atexit.register(_close_local)
        return _LOCAL
    try:
        client = Client(dask, timeout=f"{DASK_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ScenarioError(f"--dask {dask}: no Dask scheduler answered within "
                            f"{DASK_TIMEOUT_S} s ({type(exc).__name__})") from None
    try:  # a scheduler without workers would hold the replays forever
        client.wait_for_workers(1, timeout=DASK_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        client.close()
        raise ScenarioError(f"--dask {dask}: the scheduler has no worker after "
                            f"{DASK_TIMEOUT_S} s ({type(exc).__name__})") from None
    return client


class NodeBlocks:
    """Each node's block hashes as routing assigns its requests, in arrival order: in memory,
    or (``directory`` given: a trace streamed from disk) appended to a flat file per node."""

    def __init__(self, trace, nodes, directory=None):
        self.n_blocks, self.nodes, self.directory = trace.n_blocks, nodes, directory
        self.parts = [[] for _ in range(nodes)]
        self.files = ([open(self.path(n), "wb") for n in range(nodes)] if directory else None)

    def path(self, n):
        import os
        return os.path.join(self.directory, f"node-{n}.u64")

    def add(self, a, b, hashes, chosen):
        from kvmath.traces.simulate.routing import split_by_node
        ordered, counts = split_by_node(chosen, self.n_blocks[a:b], hashes, self.nodes)
        o = 0
        for n, c in enumerate(counts.tolist()):
            if self.files:
                ordered[o:o + c].tofile(self.files[n])
            else:
                self.parts[n].append(ordered[o:o + c])
            o += c

    def of(self, n):
        """Node n's hashes: an array, or the path of its file."""
        if self.files:
            return self.path(n)
        return (np.concatenate(self.parts[n]) if self.parts[n]
                else np.zeros(0, np.uint64))

    def close(self):
        for f in self.files or ():
            f.close()


def _node_requests(trace, where, n, blocks):
    keep = where == n
    return T.NodeRequests(name=f"{trace.name}[node {n}]", timestamp_s=trace.timestamp_s[keep],
                      prompt_tokens=trace.prompt_tokens[keep],
                      output_tokens=trace.output_tokens[keep], n_blocks=trace.n_blocks[keep],
                      hashes=blocks.of(n), block_tokens=trace.block_tokens)


def _pool_back(trace, where, by_node, specs, block_bytes, writes, nodes, capacity, dask):
    """A write-back pool's hits and writes: each node's first pass (:func:`node_exits`, run as
    the replays are), its evicted blocks in a file per node in a temporary directory (8 bytes a
    block on disk; in memory, a bounded buffer per node replayed, or, from a scheduler given by
    address, each node's whole list until it is written), then :func:`pool_write_back`."""
    import os
    import tempfile
    remote = dask not in (None, "local")  # its workers may not see this machine's files
    with tempfile.TemporaryDirectory(prefix="kvmath-exits-") as tmp:
        paths = [os.path.join(tmp, f"exits-{n}.u64") for n in range(nodes)]
        jobs = ((n, _node_requests(trace, where, n, by_node), specs, block_bytes, writes,
                 None if remote else paths[n]) for n in range(nodes))
        first = _run_jobs(jobs, dask, node_exits)
        for n, x in enumerate(first):
            if x["exit_hashes"] is not None:  # a worker elsewhere returned them: to disk
                x["exit_hashes"].tofile(paths[n])
                x["exit_hashes"] = None
        return pool_write_back(trace, where, first, paths, capacity)


def _run_jobs(jobs, dask, fn=None):
    """``fn`` (default :func:`replay_node`) over the jobs (made lazily: a job's arrays exist while it is queued or
    running): in this process on a thread per core, or on Dask, at most one job more than the
    workers' threads in flight; answers in node order. On a scheduler given by address each job
    carries its node's hashes (its workers may not see this machine's files)."""
    import os
    fn = fn or replay_node
    if dask is None:
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
        threads, out, running = os.cpu_count() or 1, {}, set()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for job in jobs:  # a job is made when a thread is about to take it
                if len(running) >= threads:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    out.update((x["node"], x) for x in (d.result() for d in done))
                running.add(pool.submit(fn, *job))
            out.update((x["node"], x) for x in (d.result() for d in running))
        return [out[n] for n in sorted(out)]
    from distributed import as_completed
    client = _dask_client(dask)
    try:
        local = dask == "local"  # a worker in this process reads each node's file itself

        def submit(job):
            return client.submit(fn, job[0], job[1] if local else job[1].loaded(),
                                 *job[2:], pure=False)
        threads = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        window, out, it = max(threads + 1, 2), {}, iter(jobs)
        running = as_completed()
        for job in it:
            running.add(submit(job))
            if running.count() >= window:
                break
        for done in running:
            x = done.result()
            done.release()  # its result is ours now: the worker need not keep it
            out[x["node"]] = x
            job = next(it, None)
            if job is not None:
                running.add(submit(job))
        return [out[n] for n in sorted(out)]
    finally:
        if dask != "local":  # the local cluster stays for the process's next fleet
            client.close()


def fleet(trace, model, node, nodes, router, tp=None, engine=None, batch_seqs=None,
          batch_context=None, seed=0, setup=None, dask=None, pool=None, writes="back",
          pool_writes="through", **cache_kw):
    """Route ``trace`` over ``nodes`` copies of ``node`` and replay each (here, a thread per
    core, or on Dask: a local cluster or a scheduler's address); a JSON-ready dict. pool: a
    :class:`~kvmath.tables.rows.Pool` below every node's tiers, shared by the fleet (a pool of
    the nodes' own DRAM takes its share of each node's host DRAM), written through (every
    request's new blocks) or back (``pool_writes="back"``: the blocks the nodes evict, found
    by a first pass over the nodes, :func:`pool_write_back`).

    ``trace``: a :class:`~kvmath.traces.readers.Trace`, or a
    :class:`~kvmath.traces.readers.TraceFile` whose blocks stay on disk: one pass routes it
    and writes each node's blocks to a file beside it, (with a pool) another simulates the
    pool, and each node's replay reads its own file."""
    import os
    check_fleet(trace, nodes)
    if pool is not None:
        cache_kw = {**cache_kw, "pool": pool, "pool_nodes": nodes}
    specs, block_bytes, cost, blocks, tp = setup or node_setup(
        trace, model, node, tp, engine, batch_seqs, batch_context, **cache_kw)
    streamed = isinstance(trace, T.TraceFile)
    by_node = NodeBlocks(trace, nodes, os.path.dirname(trace.hashes_path) if streamed else None)
    try:
        routed = route(trace, nodes, router, blocks, seed=seed, assignment=True,
                       spill=by_node.add)
    finally:
        by_node.close()
    where = routed.pop("assignment")
    decode = node_decode(trace, model, node, tp, engine, batch_seqs)
    shared = pool_answer = None
    if pool is not None:
        if pool_writes not in ("through", "back"):
            raise ValueError(f"unknown pool write mode {pool_writes!r}; expected through or back")
        spec = pool_spec(node, nodes, pool)
        if pool_writes == "through":
            hits, written = C.shared_prefix_hits(trace, int(spec.capacity_bytes // block_bytes))
        else:
            hits, written = _pool_back(trace, where, by_node, specs, block_bytes, writes, nodes,
                                       int(spec.capacity_bytes // block_bytes), dask)
        cost = C.HitCost(cost.model, cost.gpu, [*specs, spec], cost.tp, cost.gpus,
                         engine=cost.engine)
        pool_Bps = written * block_bytes / max(trace.duration_s, 1.0)  # each block once
        pool_answer = {"pool": pool.name, "writes": pool_writes,
                       "capacity_bytes": spec.capacity_bytes,
                       **pool_cost(trace, pool, nodes, pool_Bps * pool.replicas),
                       "replicas": pool.replicas, "write_Bps": pool_Bps * pool.replicas,
                       "write_bandwidth_Bps": spec.write_Bps * nodes,
                       # writes are not dropped: the pool must take them (ASSUMED it does, and
                       # said when it cannot)
                       "writes_within_bandwidth": bool(pool_Bps <= spec.write_Bps * nodes),
                       "read_bandwidth_Bps_per_node": spec.read_Bps}
    # the pricing tables once for the fleet (each node's are slices of them)
    cost = C.HitCost(cost.model, cost.gpu, cost.tiers, cost.tp, cost.gpus,
                     engine=cost.engine).prepare(trace)
    jobs = ((n, _node_requests(trace, where, n, by_node), specs, block_bytes, cost,
             trace.duration_s, node.gpus, node.gpus // tp, decode["decode_gpu_s_per_token"],
             None if pool is None else (spec, hits[where == n]), writes) for n in range(nodes))
    per_node = _run_jobs(jobs, dask)
    hit_tokens = sum(x["token_hit_rate"] * x["prompt_tokens"] for x in per_node if x["requests"])
    ttfts = [x.pop("ttft_s") for x in per_node]
    ttft = None if any(t is None for t in ttfts) else np.concatenate(ttfts)
    del ttfts
    p50 = p99 = None
    if ttft is not None:  # both order statistics at once, in place (the same values)
        p50, p99 = (float(v) for v in np.percentile(ttft, [50, 99], overwrite_input=True))
    del ttft
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
            "ttft_s_p50": p50, "ttft_s_p99": p99,
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
    return {**answer, "hits": hits,
            "hit_rate": hits / max(int(np.sum(trace.n_blocks, dtype=np.int64)), 1),
            "read_Bps": sum(t["read_Bps"] for t in rows)}


def fleet_cost(trace, node, nodes, usd_per_gpu_hour=None):
    """{cost_per_million_tokens_usd, gpu_hour_usd, gpu_price_observed}: the fleet's GPUs at the
    given hourly price, else the GPU's dated list price (gpu_prices.csv), per million tokens the
    trace serves (prompt and output) over its span (kvmath.derive.reuse.
    fleet_cost_per_million_tokens)."""
    from kvmath.evaluate.reuse import gpu_second_price, rfn
    from kvmath.tables.rows import gpu_prices
    tokens = float(trace.prompt_tokens.sum() + trace.output_tokens.sum())
    rate = tokens / max(trace.duration_s, 1.0)
    c_gpu = gpu_second_price(node.gpu, usd_per_gpu_hour)
    row = gpu_prices().get(node.gpu)
    return {"cost_per_million_tokens_usd": float(rfn("fleet_cost_per_million_tokens")(
                N_fleet=nodes, N_node=node.gpus, c_gpu=c_gpu, r_tok=rate)),
            "gpu_hour_usd": c_gpu * 3600,
            "gpu_price_observed": (None if usd_per_gpu_hour is not None or row is None
                                   else str(row.observed))}


def pool_cost(trace, pool, nodes, write_Bps):
    """{pool_cost_per_million_tokens_usd, pool_price_tier}: the pool's media for ``nodes`` GPU
    nodes (every replica's raw bytes) held at its medium's price and worn by ``write_Bps`` (the
    bytes its replicas take per second), per million tokens the trace serves
    (kvmath.derive.reuse.pool_cost_per_million_tokens); its servers, CPUs and NICs are not
    priced, so a lower bound."""
    from kvmath.evaluate.reuse import pool_price_tier, rfn, tier_prices
    tier = pool_price_tier(pool)
    c_cap, c_wear = tier_prices(tier)
    rate = float(trace.prompt_tokens.sum() + trace.output_tokens.sum()) / max(trace.duration_s, 1.0)
    return {"pool_cost_per_million_tokens_usd": float(rfn("pool_cost_per_million_tokens")(
                c_cap=c_cap, c_wear=c_wear, pool_raw_bytes=pool.capacity(nodes) * pool.replicas,
                W_carried=write_Bps, r_tok=rate)),
            "pool_price_tier": tier}


def nodes_needed(trace, model, node, router, max_nodes=64, slo_ttft_p99_s=None, **kw):
    """The fewest nodes (at most max_nodes) whose every node's prefill and decode demand fits its
    GPUs and,
    given slo_ttft_p99_s, whose fleet-wide 99th-percentile time to first token is within it, by
    bisection (both ease as nodes are added); None if max_nodes do not suffice.
    Returns (nodes or None, {nodes: fleet answer} of the fleets tried)."""
    plain = ("tp", "engine", "batch_seqs", "batch_context")
    setup = node_setup(trace, model, node, *(kw.get(k) for k in plain),
                       **{k: v for k, v in kw.items()
                          if k not in (*plain, "seed", "dask", "writes", "pool_writes")})
    tried = {}

    def ok(n):
        tried[n] = fleet(trace, model, node, n, router, setup=setup, **kw)
        p99 = tried[n]["ttft_s_p99"]
        return tried[n]["feasible"] and (slo_ttft_p99_s is None
                                         or (p99 is not None and p99 <= slo_ttft_p99_s))
    if not ok(max_nodes):
        return None, tried
    lo, hi = 0, max_nodes  # lo infeasible (or none), hi feasible
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi, tried
