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
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["private_tempdir", "register_exit_cleanup", "run_exit_cleanups", "sweep_stale_tempdirs",
           "unregister_exit_cleanup"]

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


#: the file in a private temporary directory that names the process owning it (pid and start time)
OWNER_FILE = ".securelp-owner"


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), which
    tells a live owner from a later process that reuses its pid; None when there is no such process.
    Without ``/proc``, a live pid is taken as the owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
        return stat.rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return "alive"


def _owner_alive(directory: Path) -> bool:
    try:
        pid_text, start = (directory / OWNER_FILE).read_text(encoding="ascii").split()
        pid = int(pid_text)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # not ours to judge: leave it
    now = _process_start(pid)
    return now is not None and now in (start, "alive")


def sweep_stale_tempdirs(prefix: str, parent: Path | None = None) -> list[Path]:
    """Remove the private temporary directories ``prefix*`` that a run killed beyond any clean-up
    (SIGKILL, a power cut while the OS kept /tmp) left with its keys and blocks: those of this user
    whose owner file names a process that no longer runs. Returns the directories removed."""
    base = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        candidates = [d for d in base.glob(f"{prefix}*") if d.is_dir() and not d.is_symlink()]
    except OSError:
        return removed
    for d in candidates:
        try:
            if d.stat().st_uid != os.getuid() or not (d / OWNER_FILE).is_file() or _owner_alive(d):
                continue
        except OSError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


@contextlib.contextmanager
def private_tempdir(prefix: str) -> Iterator[Path]:
    """A fresh temporary directory (mode 0700) for keys, certificates and private blocks, removed on
    leaving the block however it is left: normally, by an exception, by Ctrl-C or SIGTERM (both raise
    KeyboardInterrupt in the console script), and by the forced exit of
    :func:`securelp.coordinator.cli.exit_promptly_on_interrupt` when the run is stuck in a C call.
    A run killed beyond any clean-up (SIGKILL) leaves its directory behind; the next run that makes
    one with the same prefix removes it (:func:`sweep_stale_tempdirs`), as does the OS's /tmp policy."""
    sweep_stale_tempdirs(prefix)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    remove = functools.partial(shutil.rmtree, path, ignore_errors=True)
    key = register_exit_cleanup(remove)
    try:
        (path / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid()) or 'alive'}\n", encoding="ascii")
        yield path
    finally:
        remove()  # a second interrupt may cut this short: then the clean-up stays registered, and
        unregister_exit_cleanup(key)  # run_exit_cleanups (the CLI's interrupt path) removes the rest
