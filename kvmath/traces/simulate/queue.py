"""The queue of a node's replicas (numba): first come, first served over identical replicas, each
serving one request at a time, a request waiting for the replica free earliest
(:func:`fcfs`). What a request waits is its time to first token less its own service time.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _fcfs(arrival, service, servers, out):  # pragma: no cover (compiled)
    """Each request's wait and service (out), in arrival order, over ``servers`` replicas."""
    free = np.zeros(servers)
    for i in range(len(arrival)):
        k = 0
        for j in range(1, servers):
            if free[j] < free[k]:
                k = j
        a = arrival[i]
        start = a if a >= free[k] else free[k]
        free[k] = start + service[i]
        out[i] = start + service[i] - a


def fcfs(arrival_s, service_s, servers):
    """Each request's time to first token over ``servers`` replicas, first come first served
    (the heap of the Python queue it replaced, as a scan: the replica free earliest)."""
    out = np.empty(len(arrival_s))
    if len(out):
        _fcfs(np.asarray(arrival_s, np.float64), np.asarray(service_s, np.float64),
              max(int(servers), 1), out)
    return out
