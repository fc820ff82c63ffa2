"""Check that an installed securelp is ONE import package, complete and usable.

Run by the Dockerfile at the end of the image build (with ``--source /src``, the copied
source tree) and by deploy/smoke.sh against the built image. It checks that

- the distribution installs one top-level name, ``securelp`` (its RECORD lists nothing else
  but the dist-info directory and the console script);
- the repository's folder names (``protos``, ``party``, ``coordinator``, ``solvers``) are not
  importable as top-level packages;
- the subpackages import under ``securelp`` from the installed location, not from a source tree;
- with ``--source DIR``: every ``.py`` file of the root package and of its four folders in DIR
  is installed at the same place under ``securelp/`` (so a package missing from pyproject.toml's
  ``packages`` list fails the build instead of failing at run time).

Exit status 0 when every check passes, 1 otherwise, with one line per failed check.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from importlib import metadata
from pathlib import Path

FOLDERS = ("protos", "party", "coordinator", "solvers")
# what a deployment imports: the CLI and the party and coordinator sides of a session
SESSION_MODULES = ("securelp.coordinator.cli", "securelp.party.session", "securelp.protos.securelp_pb2",
                   "securelp.solvers.lp")


def installed_top_level_names(dist: metadata.Distribution) -> set[str]:
    """Return the first path component of every file the distribution installed in site-packages.

    Parameters
    ----------
    dist : importlib.metadata.Distribution
        The installed ``securelp`` distribution.

    Returns
    -------
    set of str
        Top-level names, without the console script (installed outside site-packages, ``..``).
    """
    names = set()
    for f in dist.files or ():
        first = f.parts[0]
        if first != "..":
            names.add(first)
    return names


def check(source: Path | None) -> list[str]:
    """Run every check and return the failures (empty when all pass).

    Parameters
    ----------
    source : pathlib.Path or None
        The source tree the wheel was built from, or None to skip the completeness check.

    Returns
    -------
    list of str
        One message per failed check.
    """
    failures: list[str] = []
    try:
        dist = metadata.distribution("securelp")
    except metadata.PackageNotFoundError:
        return ["the distribution securelp is not installed in this interpreter"]
    names = installed_top_level_names(dist)
    extra = sorted(n for n in names if n != "securelp" and not n.endswith(".dist-info"))
    if extra:
        failures.append(f"the distribution installs other top-level names besides securelp: {extra}")
    for name in FOLDERS:
        if importlib.util.find_spec(name) is not None:
            failures.append(f"'{name}' is importable as a top-level package (it must be securelp.{name})")
    import securelp

    site = Path(securelp.__file__).resolve().parent
    if source is not None and site.is_relative_to(source.resolve()):
        failures.append(f"securelp imports from the source tree {site}, not from the installed package")
    for module in ("securelp",) + tuple(f"securelp.{f}" for f in FOLDERS) + SESSION_MODULES:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is a failed check
            failures.append(f"import {module} failed: {type(exc).__name__}: {exc}")
    if source is not None:
        wanted = [Path("__init__.py")] + [p.relative_to(source) for f in FOLDERS
                                           for p in sorted((source / f).rglob("*.py"))]
        missing = [str(p) for p in wanted if "__pycache__" not in p.parts and not (site / p).is_file()]
        if missing:
            failures.append(f"{len(missing)} source modules are not installed under {site}: {missing[:10]}")
    if not failures:
        modules = sum(1 for _ in site.rglob("*.py"))
        print(f"securelp {dist.version}: one package at {site} ({modules} modules; "
              f"dist files under {sorted(names)})")
    return failures


def main() -> int:
    """Parse the arguments, run the checks, print failures; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="the source tree the wheel was built from")
    args = parser.parse_args()
    failures = check(args.source)
    for line in failures:
        print(f"check-package: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
