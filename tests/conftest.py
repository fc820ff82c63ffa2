"""Shared fixtures: the test data in tests/data, and the integration marker of tests/integration."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = REPO / "tests" / "data"
INTEGRATION = REPO / "tests" / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration starts processes or opens sockets: mark it ``integration``
    (so ``-m "not integration"`` runs the in-process tests only)."""
    for item in items:
        if INTEGRATION in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def netlib_dir() -> Path:
    """The netlib LPs the tests use (tests/data/netlib/SOURCES.md says where they come from)."""
    return TEST_DATA / "netlib"


def shared_path(*parts: str) -> Path:
    """A path under tests/data (the data every test needs is in the repository)."""
    path = TEST_DATA.joinpath(*parts)
    assert path.exists(), f"{path} is missing from the checkout"
    return path
