"""Benchmark results as data: one JSON line per measured case in ``benchmarks/results/NAME.jsonl``.

Every benchmark writes through :func:`append_run`, so every line carries the same context:

``bench``    the benchmark's name (``pplp``, ``grpc``, ...), also the file's name;
``run_id``   shared by the lines of one run (one invocation of the script);
``date``     UTC, ISO 8601, when the run started;
``commit``   ``git rev-parse --short HEAD`` of the checkout, ``+uncommitted`` when it had changes;
``command``  the command line that reproduces the run;
``machine``  CPU model, cores, RAM, load average (1, 5, 15 min) at the start, Python, platform;
``case``     what was measured (instance, sizes, options);
``figures``  what was measured on it (times, bytes, errors, statuses).

The tables in docs/benchmarks/ are generated from these files by ``python -m benchmarks.render``
(docs/BENCHMARKS.md); nothing in a table is typed by hand. The figures of a shared machine are noisy:
the load average in each line says how busy it was.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from securelp.solvers.errors import SecureLPError
from securelp.solvers.files import write_atomically

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "benchmarks" / "results"


def shared_data(*parts: str) -> Path:
    """A path under the project's shared data folder, ``shared/data`` beside the checkout or beside one
    of its parent folders (a worktree's); large benchmark inputs stay there, out of the repository."""
    for folder in REPO.parents:
        candidate = folder / "shared" / "data"
        if candidate.is_dir():
            return candidate.joinpath(*parts)
    return REPO.parent.joinpath("shared", "data", *parts)


def machine(packages: Sequence[str] = ()) -> dict[str, Any]:
    """The machine a run measures: CPU model, cores, RAM, load average, Python and platform; with
    ``packages``, also their installed versions (``versions``, None for one not installed)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    found = {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": memory, "load_average": load,
             "python": platform.python_version(), "platform": platform.platform()}
    if packages:
        import importlib.metadata as md

        versions: dict[str, str | None] = {}
        for package in packages:
            try:
                versions[package] = md.version(package)
            except md.PackageNotFoundError:
                versions[package] = None
        found["versions"] = versions
    return found


def commit() -> str:
    """The checkout's short commit, ``+uncommitted`` when tracked files differ from it; ``unknown``
    outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+uncommitted' if dirty else ''}"


def run_context(bench: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The fields every line of one run shares (``bench``, ``run_id``, ``date``, ``commit``, ``command``,
    ``machine``); ``argv``: the script's arguments (default ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return {"bench": bench, "run_id": secrets.token_hex(6),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit(), "command": shlex.join(["python", "-m", f"benchmarks.bench_{bench}", *args]),
            "machine": machine()}


def results_path(bench: str, directory: Path | None = None) -> Path:
    """``benchmarks/results/<bench>.jsonl`` (or in ``directory``)."""
    return (RESULTS_DIR if directory is None else Path(directory)) / f"{bench}.jsonl"


def append_run(path: Path, context: dict[str, Any], cases: Iterable[tuple[dict[str, Any], dict[str, Any]]]) -> int:
    """Append one line per ``(case, figures)`` to ``path``, each with ``context``; the file is rewritten
    atomically (a run's lines appear together or not at all). Returns the number of lines written."""
    lines = [json.dumps({**context, "case": case, "figures": figures}, sort_keys=True, allow_nan=False)
             for case, figures in cases]
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = path.read_text(encoding="utf-8") if path.exists() else ""
    write_atomically(path, previous + "".join(line + "\n" for line in lines), what="benchmark results ")
    return len(lines)


def load(path: Path) -> list[dict[str, Any]]:
    """Every line of a results file, oldest first (an absent file: no lines)."""
    if not path.exists():
        return []
    return [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]


def latest_run(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines of the newest run (the last ``run_id`` in the file)."""
    if not records:
        return []
    newest = records[-1]["run_id"]
    return [r for r in records if r["run_id"] == newest]


def describe_run(record: dict[str, Any]) -> str:
    """One sentence naming a run's date, commit, machine and load, and its command (under a table)."""
    m = record["machine"]
    memory = f", {m['memory_bytes'] / 2**30:.0f} GiB RAM" if m.get("memory_bytes") else ""
    load = (f", load average {m['load_average'][0]:.1f} at the start" if m.get("load_average") else "")
    return (f"Run of {record['date']} at commit `{record['commit']}` on {m['cpu']} ({m['cores']} cores{memory}"
            f"{load}; a shared machine, so times are indicative): `{record['command']}`.")


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (no numpy needed for a handful of repetitions)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def one_line_errors(bench: str, main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """``main`` of a benchmark with securelp's typed errors turned into one line on standard error and
    their exit code (as the ``securelp`` console script does), e.g. an ``--out`` that cannot be written."""
    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except SecureLPError as exc:
            print(f"benchmarks.bench_{bench}: error: {exc}", file=sys.stderr)
            return int(exc.exit_code)

    return wrapped
