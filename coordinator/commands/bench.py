"""``securelp bench NAME [ARGS...]``: run a benchmark script from ``benchmarks/``.

The scripts live in the source tree (they are not installed), so this works from a
checkout: ``securelp bench pplp --repeat 5`` runs ``python -m benchmarks.bench_pplp``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from securelp.solvers.errors import ConfigError


def _add_source_tree() -> None:
    """Make ``benchmarks`` importable from a checkout (the package beside ``coordinator``, or cwd)."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "benchmarks" / "__init__.py").is_file() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
            return


def _available() -> list[str]:
    _add_source_tree()
    try:
        import benchmarks
    except ImportError:
        return []
    return sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules(benchmarks.__path__)
                  if m.name.startswith("bench_"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run the reproducible benchmarks",
                       description="Run benchmarks/bench_NAME.py (from a source checkout); extra arguments are "
                                   "passed to the script. `securelp bench list` lists them.")
    p.add_argument("name", help="benchmark name (e.g. pplp), or 'list'")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark script")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = _available()
    if args.name == "list":
        print("\n".join(names) if names else "no benchmarks found (run from a source checkout)")
        return 0
    if args.name not in names:
        where = ", ".join(names) if names else "none found: run from a source checkout of securelp"
        raise ConfigError(f"unknown benchmark {args.name!r} (available: {where})")
    module = importlib.import_module(f"benchmarks.bench_{args.name}")
    saved = sys.argv
    sys.argv = [f"benchmarks/bench_{args.name}.py", *args.args]
    try:
        return int(module.main() or 0)
    finally:
        sys.argv = saved
