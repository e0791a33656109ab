"""The ``kvmath`` console script: the command line, with an interrupt while its modules load
answered as one line (exit 130), as every interrupt after that is (issue 20).

While the modules load, Ctrl-C ends the process at once with that line (nothing is written yet,
so nothing is left half done): an interrupt inside an extension module's import would otherwise
surface as that module's ImportError and its traceback. Once they have loaded, Python's own
handler is back and the command line answers an interrupt itself (kvmath.cli.main.main)."""
import os
import signal
import sys


def _interrupted_while_loading(signum, frame):
    sys.stderr.write("kvmath: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def main():
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started ignoring it (a background
        from kvmath.cli.main import main as command_line  # job of a script): it keeps doing so
        return command_line()
    previous = signal.signal(signal.SIGINT, _interrupted_while_loading)
    try:
        from kvmath.cli.main import main as command_line
    finally:
        signal.signal(signal.SIGINT, previous)
    return command_line()
