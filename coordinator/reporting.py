"""Writing machine-readable reports: atomic (never half-written), NaN-free JSON."""

from __future__ import annotations

import errno
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from solvers.errors import InputError, ResourceError


def _clean(obj: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into strict-JSON values."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


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
    if target.is_dir():
        raise InputError(f"cannot write {option} {target}: it is a directory")
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {option} {target}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {option} {target}: directory {directory} is not writable")


def _write_atomically(target: Path, data: bytes | str, what: str) -> None:
    """Write ``data`` to ``target`` through a temporary file in its directory and a rename, so the
    file appears complete or not at all; an error leaves no temporary file behind.

    Raises
    ------
    InputError
        ``target`` is a directory, its directory is missing, or the system refused the write.
    ResourceError
        The disk (or the quota) is full.
    """
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {what}{target}: directory {directory} does not exist")
    if target.is_dir():
        raise InputError(f"cannot write {what}{target}: it is a directory")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w" if isinstance(data, str) else "wb",
                       **({"encoding": "utf-8"} if isinstance(data, str) else {})) as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            raise (ResourceError if full else InputError)(f"cannot write {what}{target}: {exc.strerror or exc}") from exc
        raise


def write_json_report(path: str | os.PathLike[str], report: dict[str, Any]) -> None:
    """Write ``report`` as JSON to ``path`` atomically; ``-`` means standard output.

    Non-finite floats become ``null``. The file appears complete or not at all
    (written to a temporary file in the same directory, then renamed).
    """
    text = json.dumps(_clean(report), indent=2, sort_keys=False, allow_nan=False) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _write_atomically(Path(path), text, "report ")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write bytes atomically (temporary file + rename; see :func:`_write_atomically`)."""
    _write_atomically(Path(path), data, "")


def quiet_output(json_path: str | None) -> bool:
    """True when progress output must stay quiet: JSON to stdout, or no terminal."""
    return json_path == "-" or not sys.stderr.isatty()


def human_stream(json_path: str | None) -> Any:
    """Where the human-readable report goes: stderr when the JSON report takes stdout."""
    return sys.stderr if json_path == "-" else sys.stdout
