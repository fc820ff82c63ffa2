"""What this machine can still give a computation: memory, read before a large allocation so that
a request too large is refused with a clear error (:class:`securelp.solvers.errors.ResourceError`) rather
than failing inside numpy or being killed."""

from __future__ import annotations

import math

__all__ = ["available_memory", "format_bytes", "memory_shortfall", "peak_rss"]


def available_memory() -> int | None:
    """Bytes of memory this process can still use: ``MemAvailable`` of ``/proc/meminfo``, capped by
    the cgroup (v2 ``memory.max`` minus ``memory.current``) when one limits it and by the address
    space limit (``ulimit -v``, ``RLIMIT_AS``) minus this process's ``VmSize``; ``None`` if unknown.

    Without the last cap, ``ulimit -v 1500000`` let ``securelp mdp --method direct`` on a 30x30 grid
    pass its memory check and end in HiGHS's ``std::bad_alloc`` traceback."""
    found: list[int] = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            found.append(max(0, int(soft) - _status_bytes("VmSize")))
    except (OSError, ValueError, ImportError):
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                found.append(max(0, int(limit) - int(f.read().strip())))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def memory_shortfall(need: float, free: int | None, share: float = 1.0) -> str:
    """'' when ``need`` bytes fit in ``share`` of ``free`` (or ``free`` is unknown), else the end of
    an error message: ``"12.3 GiB, more than 60% of the 22.9 GiB available"`` (``"more than the
    ..."`` for a share of 1)."""
    if free is None or need <= share * free:
        return ""
    of = "the" if share >= 1.0 else f"{share:.0%} of the"
    need_text, free_text = format_bytes(need), format_bytes(free)
    if need_text == free_text:  # "391.1 KiB, more than the 391.1 KiB available" reads as no reason
        need_text, free_text = f"{math.ceil(need):,} bytes", f"{free:,} bytes"
    return f"{need_text}, more than {of} {free_text} available"


def format_bytes(n: float) -> str:
    """``n`` bytes for a message, in the largest unit that keeps a digit before the point:
    ``"12.3 GiB"``, ``"412.0 MiB"``, ``"3.0 KiB"``, ``"512 bytes"`` (a figure in GiB alone would read
    a tight ``ulimit -v`` as "more than the 0.0 GiB available")."""
    n = max(0.0, float(n))
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"


def peak_rss() -> int:
    """Peak resident bytes of this process's own address space: ``VmHWM`` of ``/proc/self/status``.

    Not ``ru_maxrss``: Linux carries into a process, at ``exec``, the peak of the address space it
    replaced, so a child started by a large parent reports at least the parent's peak (measured: a
    child of 10.6 MiB started by a parent of 1.2 GB had ``ru_maxrss`` 1,170 MiB). ``ru_maxrss`` is
    the fallback where ``/proc`` is missing.
    """
    try:
        return _status_bytes("VmHWM")
    except (OSError, ValueError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _status_bytes(key: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` in bytes (OSError or ValueError when it cannot be read)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    return int(parts[1]) * 1024
    raise ValueError(f"no {key} in /proc/self/status")
