"""Shared fixtures: paths to ../shared data (skipped when absent) and small LPs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def netlib_dir() -> Path:
    path = SHARED_DATA / "netlib"
    if not path.is_dir():
        pytest.skip("../shared/data/netlib is not present")
    return path


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data, or a pytest skip when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return path
