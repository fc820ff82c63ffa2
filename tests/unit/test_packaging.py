"""The distribution installs one import package, securelp, holding every package of the tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALLED = ("protos", "party", "coordinator", "solvers")


def _packages_in_tree() -> set[str]:
    found = {"securelp"}
    for top in INSTALLED:
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO)
            found.add("securelp." + ".".join(rel.parts))
    return found


def test_pyproject_lists_every_package_of_the_tree() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(config["tool"]["setuptools"]["packages"]) == _packages_in_tree()


def test_no_other_top_level_name_is_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    # what an installed securelp (a wheel, or pip install -e) makes importable from outside the
    # repository: securelp, and none of the folders' own names
    outside = [p for p in sys.path if p and Path(p).resolve() != REPO]
    monkeypatch.setattr(sys, "path", outside)
    for name in INSTALLED:
        assert name not in sys.modules
        assert importlib.util.find_spec(name) is None, f"{name} is importable as a top-level package"
    assert importlib.util.find_spec("securelp") is not None


def test_the_subpackages_import_under_securelp() -> None:
    import securelp
    import securelp.coordinator.cli
    import securelp.party.session
    import securelp.protos.securelp_pb2
    import securelp.solvers.lp

    assert securelp.__version__ != "0+unknown"
    assert securelp.solvers.lp.__name__ == "securelp.solvers.lp"
