"""A Dask scheduler's address (``fleet --dask ADDRESS``, issue 37 item 4): a scheme the
installed Dask cannot reach from here is refused in words before anything is tried (tls:// and
ucx:// ended in tracebacks; an unknown scheme was said not to have answered within 10 s);
connecting and the scheduler's first message have a deadline (a listener that accepts and never
answers hung fleet); an answer that is not Dask's handshake is an error (a garbage length had
Dask try to allocate 3 EiB)."""
import socket
import struct
import threading
import time

import pytest

from kvmath.cli.main import main
from kvmath.fleet import jobs

FLEET = ["fleet", "synthetic", "--model", "llama-3.1-8b", "--nodes", "2"]


def refused(capsys, address, *words, within=30):
    start = time.monotonic()
    code = main([*FLEET, "--dask", address])
    out, err = capsys.readouterr()
    assert time.monotonic() - start < within
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith(f"kvmath: error: --dask {address}: ") and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.mark.parametrize("address, words", [
    ("tls://127.0.0.1:1", "certificates"),
    ("wss://127.0.0.1:1", "certificates"),
    ("ucx://127.0.0.1:1", "UCX"),
    ("ws://127.0.0.1:1", "TCP only"),
    ("inproc://x", "another process"),
    ("foo://127.0.0.1:1", "'foo' is no scheme"),
    ("tcp://", "no host and port"),
    ("tcp://127.0.0.1", "no host and port"),
    ("tcp://127.0.0.1:0", "no host and port"),
    ("tcp://127.0.0.1:65536", "no host and port"),
    ("tcp://[::1", "no host and port"),
])
def test_a_scheme_or_address_kvmath_cannot_reach_is_refused_in_words(capsys, address, words):
    err = refused(capsys, address, words, "tcp://HOST:PORT", within=10)
    assert "answered within" not in err  # nothing was tried, so nothing is said to have waited


def test_nothing_listening_is_said_so_at_once(capsys):
    refused(capsys, "tcp://127.0.0.1:9", "nothing listens there", within=10)
    refused(capsys, "127.0.0.1:9", "nothing listens there", within=10)


class Listener:
    """A TCP listener on the loopback that accepts and then does ``answer(conn)``."""

    def __init__(self, answer):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answer, self.conns = answer, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            try:
                self.answer(conn)
            except OSError:
                pass

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture
def listener():
    made = []

    def make(answer):
        made.append(Listener(answer))
        return f"tcp://127.0.0.1:{made[-1].port}"
    yield make
    for x in made:
        x.close()


def test_a_listener_that_never_answers_is_given_up_on_in_time(capsys, monkeypatch, listener):
    """It hung fleet for ever."""
    monkeypatch.setattr(jobs, "DASK_TIMEOUT_S", 2)
    address = listener(lambda conn: None)
    refused(capsys, address, "accepted", "did not come within 2 s", within=20)


@pytest.mark.parametrize("answer, words", [
    (b"\xff" * 64, "announces"),                               # 3 EiB announced
    (struct.pack("Q", 40) + b"\x00" * 40, "not a Dask scheduler's handshake"),
    (struct.pack("Q", 24) + struct.pack("QQ", 1, 8) + b"\xc1" * 8,  # frames that add up,
     "not a Dask scheduler's handshake"),                            # not msgpack
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "announces"),
    (b"\x01\x02", "closed the connection"),
])
def test_a_garbage_answer_is_an_error_not_an_allocation(capsys, listener, answer, words):
    def say(conn):
        conn.sendall(answer)
        if answer == b"\x01\x02":
            conn.close()
    refused(capsys, listener(say), words, within=20)


def test_a_real_scheduler_passes_the_first_exchange():
    """The deadline and the check read a real scheduler's handshake (a local cluster over
    TCP), and the client connects after it."""
    from distributed import LocalCluster
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=1, protocol="tcp://",
                      dashboard_address="127.0.0.1:0") as cluster:
        address = cluster.scheduler_address
        assert jobs.dask_address(address) == address
        jobs._handshake(address, address)
        client = jobs.dask_client(address)
        try:
            assert client.scheduler_info()["workers"]
        finally:
            client.close()
