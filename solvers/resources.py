"""What this machine can still give a computation: memory, read before a large allocation so that
a request too large is refused with a clear error (:class:`solvers.errors.ResourceError`) rather
than failing inside numpy or being killed."""

from __future__ import annotations

__all__ = ["available_memory"]


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
