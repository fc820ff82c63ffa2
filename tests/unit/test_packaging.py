"""pyproject.toml keeps to the packaging metadata that current setuptools builds without warning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_is_an_spdx_expression() -> None:
    # setuptools >= 77 warns that a `license = { text = ... }` table stops being accepted after
    # 2027-02-18; a fresh `pip install .` takes the newest setuptools, so that date would turn CI red
    license_ = _pyproject()["project"]["license"]
    assert isinstance(license_, str) and license_ == "Apache-2.0"


def test_the_build_asks_for_a_setuptools_that_reads_spdx_licenses() -> None:
    requires = _pyproject()["build-system"]["requires"]
    pins = [r for r in requires if r.startswith("setuptools")]
    assert len(pins) == 1
    found = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", pins[0].replace(" ", ""))
    assert found is not None and int(found.group(1)) >= 77, pins[0]
