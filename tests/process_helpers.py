"""Signalling a child process in tests: wait for its ``ready`` line, send the signal, time the exit."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator


def signal_when_ready(p: subprocess.Popen, sig: int, timeout: float,
                      before: Callable[[], None] | None = None) -> tuple[int, float]:
    """Read ``p``'s first stdout line (it must be ``ready``), run ``before`` (a check on the running
    child), send ``sig`` and wait at most ``timeout`` seconds; the child is killed if it is still
    running then (or if a check failed). Returns its exit code and the seconds it took to exit."""
    try:
        line = p.stdout.readline().strip()
        assert line == "ready", p.stderr.read()
        if before is not None:
            before()
        t = time.perf_counter()
        p.send_signal(sig)
        rc = p.wait(timeout=timeout)
        return rc, time.perf_counter() - t
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@contextlib.contextmanager
def sigint_raises() -> Iterator[None]:
    """In this (main) thread, SIGINT raises KeyboardInterrupt for the duration: a test process started
    as a background job of a non-interactive shell inherits SIGINT ignored (``nohup sh -c '...' &``
    did, and a test that interrupts itself waited out its 30 s deadline)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
