"""The repository passes ruff with the pinned version and the rules in pyproject.toml."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing() -> None:
    ruff_main = pytest.importorskip("ruff.__main__", reason="ruff is installed with the test extra")
    ruff = ruff_main.find_ruff_bin()
    res = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(REPO)], cwd=REPO,
                         check=False, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
