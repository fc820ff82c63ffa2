"""What this machine can still give a computation: memory, read before a large allocation so that
a request too large is refused with a clear error (:class:`solvers.errors.ResourceError`) rather
than failing inside numpy or being killed."""

from __future__ import annotations

__all__ = ["available_memory", "memory_shortfall"]


def available_memory() -> int | None:
    """Bytes of memory this process can still use: ``MemAvailable`` of ``/proc/meminfo``, capped by
    the cgroup (v2 ``memory.max`` minus ``memory.current``) when one limits it; ``None`` if unknown."""
    found: list[int] = []
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
    return f"{need / 2**30:.1f} GiB, more than {of} {free / 2**30:.1f} GiB available"
