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
    address = dask_address(dask)
    if address.startswith("tcp://"):
        _handshake(dask, address)  # a scheduler's own first words, within the deadline
    try:
        client = Client(address, timeout=f"{DASK_TIMEOUT_S}s")
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


#: why kvmath reaches no scheduler over a scheme other than tcp:// (the one ``dask scheduler``
#: listens on by default, and the one it checks the first exchange of)
_SCHEMES = {
    "tls": "a TLS scheduler needs certificates and keys (Dask's security settings), which "
           "kvmath does not take",
    "wss": "a TLS scheduler needs certificates and keys (Dask's security settings), which "
           "kvmath does not take",
    "ws": "kvmath reaches a scheduler over TCP only, not websockets",
    "ucx": "UCX needs its own transport package and network, which kvmath does not set up",
    "inproc": "an in-process address names a scheduler inside another process (its id is not "
              "this one's), which this one cannot reach",
}
_EXPECTED = ("expected 'local', 'none' or a scheduler's tcp://HOST:PORT (as `dask scheduler` "
             "prints it)")
#: the largest first message a scheduler sends (its handshake: versions and compression, a few
#: hundred bytes); a larger length announced is not Dask's
MAX_HANDSHAKE_BYTES = 1 << 16


def dask_address(dask):
    """``tcp://HOST:PORT`` of a scheduler's address as given (``HOST:PORT`` is TCP, as Dask
    takes it), or an inproc:// address of a scheduler in this process; ScenarioError saying why
    for any other scheme, a missing or bad port, or no host, before anything is tried."""
    import os

    from kvmath.logic.runtime import ScenarioError
    scheme, sep, loc = dask.partition("://")
    if not sep:
        scheme, loc = "tcp", dask
    scheme = scheme.lower()
    if scheme == "inproc" and loc.split("/")[1:2] == [str(os.getpid())]:
        return dask  # a scheduler in this very process (inproc://HOST/PID/N): Dask reaches it
    if scheme != "tcp":
        why = _SCHEMES.get(scheme, f"{scheme!r} is no scheme kvmath reaches a scheduler by")
        raise ScenarioError(f"--dask {dask}: {why}; {_EXPECTED}")
    host, port = _host_port(loc)
    if not host or port is None:
        raise ScenarioError(f"--dask {dask}: no host and port (1 to 65535) in it; {_EXPECTED}")
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def _host_port(loc):
    """(host, port or None) of ``HOST:PORT`` or ``[IPv6]:PORT``."""
    if loc.startswith("["):
        host, close, rest = loc[1:].partition("]")
        if not close or not rest.startswith(":"):
            return host, None
        port = rest[1:]
    else:
        host, _, port = loc.rpartition(":")
    ok = port.isascii() and port.isdigit() and 0 < int(port) < 65536 and host.isprintable() \
        and not any(c.isspace() or c in "/[]@" for c in host)
    return (host, int(port)) if ok else (host, None)


def _handshake(dask, address):
    """Connect to the scheduler at ``address`` and read its first message, all within
    :data:`~kvmath.scenario.options.DASK_TIMEOUT_S` (name resolution included): a scheduler
    speaks first, its handshake (a few frames of msgpack naming its compression and pickle
    protocol). ScenarioError naming what happened when nothing listens, the connection is not
    accepted in time, the listener says nothing in time (it hung fleet), or what it says is
    not Dask's (a garbage length had Dask allocate 3 EiB)."""
    import socket
    import struct
    import threading
    import time

    from kvmath.logic.runtime import ScenarioError
    host, port = _host_port(address[len("tcp://"):])
    host = host.strip("[]")
    deadline = time.monotonic() + DASK_TIMEOUT_S

    def fail(what):
        return ScenarioError(f"--dask {dask}: {what}")

    found = []
    resolver = threading.Thread(target=lambda: found.append(_resolve(host, port)), daemon=True)
    resolver.start()
    resolver.join(DASK_TIMEOUT_S)
    if not found:
        raise fail(f"the host name did not resolve within {DASK_TIMEOUT_S} s")
    if isinstance(found[0], OSError):
        raise fail(f"unknown host {host!r} ({found[0].strerror or found[0]})")
    family, kind, proto, _, where = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            sock.connect(where)
        except (socket.timeout, TimeoutError):
            raise fail(f"no connection accepted within {DASK_TIMEOUT_S} s") from None
        except ConnectionRefusedError:
            raise fail("nothing listens there (connection refused)") from None
        except OSError as exc:
            raise fail(f"cannot connect ({exc.strerror or exc})") from None

        def take(n, what):
            data = b""
            while len(data) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise fail(f"the connection was accepted, but {what} did not come within "
                               f"{DASK_TIMEOUT_S} s (not a Dask scheduler, or one too busy "
                               "to answer)")
                sock.settimeout(left)
                try:
                    got = sock.recv(min(n - len(data), 1 << 16))
                except (socket.timeout, TimeoutError):
                    continue
                except OSError as exc:
                    raise fail(f"the connection failed ({exc.strerror or exc})") from None
                if not got:
                    raise fail(f"the listener closed the connection before {what} (not a "
                               "Dask scheduler)")
                data += got
            return data
        (size,) = struct.unpack("Q", take(8, "a Dask scheduler's handshake"))
        if not 16 <= size <= MAX_HANDSHAKE_BYTES:
            raise fail(f"the listener's first message announces {size:,} B, not a Dask "
                       f"scheduler's handshake (at most {MAX_HANDSHAKE_BYTES:,} B): not a "
                       "Dask scheduler")
        if not _is_handshake(take(size, "the rest of its handshake")):
            raise fail("the listener's first message is not a Dask scheduler's handshake")
    finally:
        sock.close()


def _resolve(host, port):
    """The first TCP address of host:port (getaddrinfo), or the OSError it raised."""
    import socket
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        return exc


def _is_handshake(data):
    """Whether ``data`` (a message's frames, packed as Dask's TCP comm sends them) is a Dask
    handshake: a few frames whose lengths add up, decoding to a dict naming its pickle
    protocol."""
    import struct
    try:
        (n,) = struct.unpack_from("Q", data)
        if not 0 < n <= 16 or 8 * (n + 1) > len(data):
            return False
        lengths = struct.unpack_from(f"{n}Q", data, 8)
        if 8 * (n + 1) + sum(lengths) != len(data):
            return False
        from distributed.protocol import loads
        frames, at = [], 8 * (n + 1)
        for length in lengths:
            frames.append(data[at:at + length])
            at += length
        msg = loads(frames, deserialize=False)
    except Exception:  # anything a garbage message makes the decoder raise
        return False
    return isinstance(msg, dict) and "pickle-protocol" in msg


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
