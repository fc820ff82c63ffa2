"""Writing output files: checked before the work that fills them, written whole or not at all.

Every file securelp writes (reports, mechanisms, plots, released counts, party blocks,
certificates and keys) goes through :func:`write_atomically`: a temporary file in the target's
directory, then a rename, so a reader never sees half a file and an error leaves nothing behind.
:func:`check_writable` lets a command refuse an unwritable output path before an hour of work.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import io
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from securelp.solvers.errors import InputError, ResourceError

__all__ = ["check_distinct", "check_writable", "refuse_directories", "require_file", "write_atomically",
           "written_together"]


def require_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it names a file to read.

    Raises
    ------
    InputError
        ``what`` and the path, and whether it is a directory or does not exist.
    """
    p = Path(path)
    if not p.is_file():
        if p.is_dir():
            why = "is a directory, not a file"
        elif p.exists():  # a device exists, but is no regular file
            why = "is not a regular file (a device, FIFO or socket)"
        elif p.is_symlink():
            why = "is a symbolic link to a file that does not exist"
        else:
            why = "does not exist"
        raise InputError(f"{what} {p} {why}")
    return p


def check_writable(path: str | os.PathLike[str] | None, option: str) -> None:
    """Fail now, before any work is done, when the output ``path`` given to ``option`` could not
    be written later: it is a directory, or its directory is missing or not writable. ``None``
    (not asked for) and ``-`` (standard output) pass.

    Raises
    ------
    InputError
        Saying which option and what is wrong with its path.
    """
    if path is None or str(path) == "-":
        return
    target = Path(path)
    try:
        if target.is_dir():
            raise InputError(f"cannot write {option} {target}: it is a directory")
        if str(path).endswith(os.sep):  # Path() drops the slash: "out/" would become a file named "out"
            raise InputError(f"cannot write {option} {path}: it names a directory, which does not exist; "
                             "give a file name")
        resolved, special = _resolve_output(target)  # a link's target is what gets written
        if special:
            return
        if len(os.fsencode(resolved.name)) > 255:
            raise InputError(f"cannot write {option} {target}: its name is longer than 255 bytes")
        directory = resolved.parent if str(resolved.parent) else Path(".")
        if not directory.is_dir():
            raise InputError(f"cannot write {option} {target}: directory {directory} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise InputError(f"cannot write {option} {target}: directory {directory} is not writable")
    except OSError as exc:  # a name too long for the system, a loop of links
        raise InputError(f"cannot write {option} {path}: {exc.strerror or exc}") from None


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: the same existing file (links, ``..`` and other spellings
    included), or the same place once resolved."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):  # a loop of links, a name the system refuses
        return False


def check_distinct(outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
                   inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = ()) -> None:
    """Refuse, before any work, an output path (``(option, path)``; ``None`` and ``-`` pass) that
    names the same file as another output or as an input: the command would overwrite its own
    input (a mechanism replaced by the released records, a points file by a report) or lose one
    output under another.

    Raises
    ------
    InputError
        Naming both options and the file.
    """
    given = [(o, p) for o, p in outputs if p is not None and str(p) != "-"]
    sources = [(o, p) for o, p in inputs if p is not None and str(p) != "-"]
    for i, (option, path) in enumerate(given):
        for other, other_path in given[:i]:
            if _same_file(path, other_path):
                raise InputError(f"{other} and {option} name the same file {path}: one would overwrite the other")
        for other, other_path in sources:
            if _same_file(path, other_path):
                raise InputError(f"{option} {path} is the input {other} {other_path}: writing it would destroy the "
                                 "input; choose another name")


def refuse_directories(directory: str | os.PathLike[str], names: Sequence[str]) -> None:
    """Refuse, before a command writes any of its files ``names`` into ``directory``, those that
    are directories there (a write would fail on them after the others had been written).

    Raises
    ------
    InputError
        Naming the directory and each such file name.
    """
    if folders := [n for n in names if (Path(directory) / n).is_dir()]:
        raise InputError(f"cannot write into {directory}: {', '.join(folders)} is a directory")


def make_output_dir(directory: str | os.PathLike[str], mode: int = 0o777) -> None:
    """Create the output directory ``directory`` (its parent must exist) unless it exists.

    Raises
    ------
    InputError
        The parent is missing, or the directory cannot be made (a read-only parent, ``/proc``, a
        full disk): one line, not a traceback.
    """
    out = Path(directory)
    if out.exists():
        return
    if not out.parent.is_dir():
        raise InputError(f"cannot create {out}: directory {out.parent} does not exist")
    try:
        out.mkdir(mode=mode)
    except OSError as exc:
        raise InputError(f"cannot create {out}: {exc.strerror or exc.__class__.__name__}") from None


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``/proc/self/status``);
    elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


#: the files a :func:`written_together` block has staged: (temporary file or None, target, bytes for
#: a special file, the ``what`` of messages), renamed (or written) when the block ends without an error
_staged: contextvars.ContextVar[list[tuple[str | None, Path, bytes | None, str]] | None] = contextvars.ContextVar(
    "securelp_staged_writes", default=None)


@contextlib.contextmanager
def written_together() -> Iterator[None]:
    """Inside the block, :func:`write_atomically` writes each file to its temporary file only; the
    temporaries are renamed over their targets together when the block ends, and removed when it
    raises. So a command with several outputs (a report and a CSV, a mechanism and a plot) leaves
    all of them or none: no report describes a release whose ``--out`` failed."""
    if _staged.get() is not None:  # nested: the outer block commits
        yield
        return
    staged: list[tuple[str | None, Path, bytes | None, str]] = []
    token = _staged.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _target, _data, _what in staged:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        raise
    finally:
        _staged.reset(token)
    # devices and FIFOs first: a write into them can fail (a reader gone, /dev/full) and cannot be
    # taken back, so it happens before any file is renamed into place
    order = [item for item in staged if item[0] is None] + [item for item in staged if item[0] is not None]
    for i, (tmp, target, data, what) in enumerate(order):
        try:
            if tmp is None:
                _write_special(target, data or b"")
            else:
                os.replace(tmp, target)
        except OSError as exc:
            for later, _t, _d, _w in order[i:]:
                if later is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(later)
            raise _write_error(exc, what, target) from exc


def _write_error(exc: OSError, what: str, target: Path) -> Exception:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return (ResourceError if full else InputError)(f"cannot write {what}{target}: {exc.strerror or exc}")


def _write_special(target: Path, data: bytes) -> None:
    """Write ``data`` straight into a device or a FIFO (``/dev/null``, a pipe a reader waits on): a
    rename would put a regular file in its place. A FIFO is opened without blocking first, so one
    that no process reads is an error (ENXIO), not a hang."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(exc.errno, "a FIFO that no process reads") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _resolve_output(target: Path) -> tuple[Path, bool]:
    """Where to write ``target``, and whether it is a special file (written into, not replaced).

    A link to a regular file, or to nothing yet, is followed: its target is replaced and the link
    stays. A path that is, or leads to, anything else (a device, a FIFO, ``/proc/self/fd/3`` whose
    link names ``pipe:[...]``) is written through as given. A loop of links is an OSError (ELOOP).
    """
    if target.exists():  # follows links; False for a dangling link
        if not target.is_file():
            return target, not target.is_dir()
    elif target.is_symlink():
        try:
            os.stat(target)
        except FileNotFoundError:  # a dangling link: its target is created; a loop raises ELOOP
            pass
    return (Path(os.path.realpath(target)) if target.is_symlink() else target), False


def _as_bytes(data: bytes | str | Callable[[BinaryIO], None]) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    buffer = io.BytesIO()
    data(buffer)
    return buffer.getvalue()


def write_atomically(path: str | os.PathLike[str], data: bytes | str | Callable[[BinaryIO], None], *,
                     what: str = "", mode: int | None = None) -> None:
    """Write ``data`` (bytes, text as UTF-8, or a function that writes to the binary file it is
    given) to ``path`` through a temporary file in its directory and a rename, so the file appears
    complete or not at all; an error leaves no temporary file behind. ``mode``: the file's
    permissions, set before any byte is written (the temporary file is created ``0600``, so a
    key is never readable by others, not even for a moment); ``None``: what ``open()`` would give,
    ``0666`` less the umask (reports, mechanisms, plots: others may read them).
    Private data (keys, a party's block) passes ``0o600``. ``what`` prefixes the path in
    messages (e.g. ``"report "``).

    A symbolic link to a regular file (or to nothing yet) is followed: its target is replaced, the
    link stays; a loop of links is refused. A
    device, a FIFO or what leads to one (``/proc/self/fd/3``) is written into, not replaced (so
    ``--json /dev/full`` fails and leaves no regular file in /dev); a FIFO that no process reads is an
    error, not a hang. A file that exists keeps its permissions. Inside :func:`written_together`
    the rename (or the write into a device) waits for the end of the block.

    Raises
    ------
    InputError
        ``path`` is a directory, its directory is missing, or the system refused the write.
    ResourceError
        The disk (or the quota) is full.
    """
    target = Path(path)
    try:
        target, special = _resolve_output(target)
        directory = target.parent if str(target.parent) else Path(".")
        if not directory.is_dir():
            raise InputError(f"cannot write {what}{target}: directory {directory} does not exist")
        if target.is_dir():
            raise InputError(f"cannot write {what}{target}: it is a directory")
    except OSError as exc:  # a name too long, a loop of links
        raise InputError(f"cannot write {what}{path}: {exc.strerror or exc}") from None
    staged = _staged.get()
    if special:  # a device, a FIFO, a socket, /proc/self/fd/N
        payload = _as_bytes(data)
        if staged is not None:
            staged.append((None, target, payload, what))
            return
        try:
            _write_special(target, payload)
        except OSError as exc:
            raise _write_error(exc, what, target) from exc
        return
    tmp = None
    if mode is None:
        # a file that exists keeps its permissions (a release written 0600 stays 0600); a new one
        # gets what open() would give
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else 0o666 & ~current_umask()
    try:
        # a short prefix: a name of up to 255 bytes must leave room for the temporary one
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:40]}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            if isinstance(data, str):
                handle.write(data.encode("utf-8"))
            elif isinstance(data, bytes):
                handle.write(data)
            else:
                data(handle)
        if staged is not None:
            staged.append((tmp, target, None, what))
            return
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise _write_error(exc, what, target) from exc
        raise


def write_or_check_generated(path: str | os.PathLike[str], text: str, *, check: bool, command: str) -> int:
    """A generated page: with ``check``, compare ``text`` with the committed ``path`` and return 1 (naming
    ``command``, the one that regenerates it, on standard error) when they differ; else write it
    atomically. Returns the exit code."""
    import sys

    target = Path(path)
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"{target} is stale: run {command}", file=sys.stderr)
            return 1
        return 0
    write_atomically(target, text)
    return 0
