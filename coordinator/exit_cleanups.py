"""Clean-ups that must run however a command ends: normally, by an exception, by Ctrl-C or SIGTERM,
or by the forced exit of :func:`securelp.coordinator.cli.exit_promptly_on_interrupt` when the run is stuck in
a C call. A temporary directory holding keys and private blocks is removed, child processes are
killed. Kept apart from the CLI so the modules that register clean-ups (the launcher, the
simulation, ``demo``) need not import the command-line entry point.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["private_tempdir", "register_exit_cleanup", "run_exit_cleanups", "unregister_exit_cleanup"]

#: clean-ups that must run however the process ends after an interrupt (remove a temporary
#: directory holding keys and private blocks, kill child processes): key -> callable
_exit_cleanups: dict[int, Callable[[], object]] = {}
_exit_cleanups_lock = threading.Lock()
_exit_cleanup_keys = itertools.count()


def register_exit_cleanup(fn: Callable[[], object]) -> int:
    """Register ``fn`` to run if the process is forced out after an interrupt (and after an
    interrupted clean-up); returns a key for :func:`unregister_exit_cleanup`. ``fn`` must be
    idempotent and safe from another thread."""
    key = next(_exit_cleanup_keys)
    with _exit_cleanups_lock:
        _exit_cleanups[key] = fn
    return key


def unregister_exit_cleanup(key: int) -> None:
    with _exit_cleanups_lock:
        _exit_cleanups.pop(key, None)


def run_exit_cleanups() -> None:
    """Run (once) every registered clean-up, newest first; errors are ignored."""
    if not _exit_cleanups_lock.acquire(timeout=1.0):  # pragma: no cover - a holder died mid-update
        return
    try:
        fns = list(_exit_cleanups.values())
        _exit_cleanups.clear()
    finally:
        _exit_cleanups_lock.release()
    for fn in reversed(fns):
        try:
            fn()
        except BaseException:  # noqa: BLE001, S110 - the next clean-up must still run
            pass


@contextlib.contextmanager
def private_tempdir(prefix: str) -> Iterator[Path]:
    """A fresh temporary directory (mode 0700) for keys, certificates and private blocks, removed on
    leaving the block however it is left: normally, by an exception, by Ctrl-C or SIGTERM (both raise
    KeyboardInterrupt in the console script), and by the forced exit of
    :func:`securelp.coordinator.cli.exit_promptly_on_interrupt` when the run is stuck in a C call."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    remove = functools.partial(shutil.rmtree, path, ignore_errors=True)
    key = register_exit_cleanup(remove)
    try:
        yield path
    finally:
        remove()  # a second interrupt may cut this short: then the clean-up stays registered, and
        unregister_exit_cleanup(key)  # run_exit_cleanups (the CLI's interrupt path) removes the rest
