"""Where a fleet's node jobs run (:func:`run_jobs`): on Dask (``dask="local"``, the command's
default: a local cluster, one worker of a thread per core in this process, started once per
process; or the address of a running scheduler, given up on after
:data:`~kvmath.scenario.options.DASK_TIMEOUT_S`), or in this process on a thread per core
(``dask=None``, the function's default; the compiled kernels release the GIL), with the same
results. The jobs are made lazily, so a job's arrays exist while it is queued or running, and
the answers come back in node order.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

from kvmath.scenario.options import DASK_TIMEOUT_S


class Job(NamedTuple):
    """One node's job: ``fn(node, requests, *args, **kw)`` (:func:`run_jobs`)."""
    node: int
    #: the node's requests (:class:`~kvmath.traces.readers.NodeRequests`), whose hashes may wait
    #: in a file on this machine
    requests: object
    args: tuple
    kw: dict


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


def dask_client(dask):
    """A Dask client: a local cluster (``"local"``: one worker in this process with a thread per
    core, so the replays share this process's memory and run in parallel, the compiled kernels
    releasing the GIL) or the scheduler at an address."""
    import os

    from kvmath.logic.runtime import ScenarioError
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


def run_jobs(jobs, dask, fn):
    """``fn`` over the jobs (:class:`Job`, made lazily: a job's arrays exist while it is queued
    or running): in this process on a thread per core, or on Dask, at most one job more than the
    workers' threads in flight; answers (dicts naming their ``node``) in node order. On a
    scheduler given by address each job carries its node's hashes (its workers may not see this
    machine's files)."""
    import os
    if dask is None:
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
        threads, out, running = os.cpu_count() or 1, {}, set()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for job in jobs:  # a job is made when a thread is about to take it
                if len(running) >= threads:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    out.update((x["node"], x) for x in (d.result() for d in done))
                running.add(pool.submit(partial(fn, **job.kw), job.node, job.requests,
                                        *job.args))
            out.update((x["node"], x) for x in (d.result() for d in running))
        return [out[n] for n in sorted(out)]
    from distributed import as_completed
    client = dask_client(dask)
    try:
        local = dask == "local"  # a worker in this process reads each node's file itself

        def submit(job):
            return client.submit(partial(fn, **job.kw), job.node,
                                 job.requests if local else job.requests.loaded(), *job.args,
                                 pure=False)
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
