"""``securelp demo --out DIR``: every owner's x_j (written by its own process over gRPC, by its
simulated session in-process) and the public part; concatenated, the x_j are the central optimum."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.examples import mangasarian_example
from securelp.party.results import read_party_solution
from securelp.solvers.lp import HighsBackend

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def central_x() -> np.ndarray:
    lp, _, _ = mangasarian_example(2, seed=0)
    return HighsBackend().solve(lp).x


@pytest.mark.parametrize("flags", [["--transport", "inprocess"], ["--no-reveal"], ["--direction", "dial-out"]])
def test_demo_out_gives_each_owner_its_part_of_the_optimum(tmp_path: Path, central_x: np.ndarray,
                                                            flags: list[str]) -> None:
    out, report = tmp_path / "res", tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", "demo", "--example", "2", "--out", str(out),
                           "--json", str(report), "--quiet", *flags],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    parts = [read_party_solution(out / f"owner{i}.csv") for i in (1, 2, 3)]
    x = np.concatenate([p[1] for p in parts])
    assert np.abs(x - central_x).max() <= 1e-9 * max(1.0, np.abs(central_x).max())
    public = json.loads((out / "public.json").read_text())
    assert public["status"] == "optimal" and len(public["y"]) == 1000 and public["rows"][0] == "r1"
    assert json.loads(report.read_text())["results"]["parties"]["owner2"] == str(out / "owner2.csv")


def test_demo_out_is_refused_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", "demo", "--out", str(blocker)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3 and "exists and is not a directory" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
