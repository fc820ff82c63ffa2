"""A session's memory estimate covers the peak measured in a child process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator import simulation
from securelp.solvers.lp import read_mps

REPO = Path(__file__).resolve().parents[2]
AFIRO = REPO / "deploy" / "afiro.mps"

_MEASURE = """
import sys
from securelp.coordinator.simulation import owners_consent, simulate
from securelp.solvers.resources import peak_rss
from tests.integration.test_pplp_memory import measured_case
public, blocks, config, lp = measured_case(sys.argv[1])
outcome, _ = simulate(public, blocks, config, central=lp, policy=owners_consent(config))
print(outcome.status.value, peak_rss())
"""


def measured_case(name: str):  # type: ignore[no-untyped-def]
    """Two sessions of about 0.3 and 0.6 GB: free columns (monomial), bounded columns (rows)."""
    from securelp.coordinator.examples import random_solvable_lp
    from securelp.coordinator.protocol import SessionConfig
    from securelp.solvers.lp.partition import split_columns

    if name == "free":
        lp, _ = random_solvable_lp(200, 30, np.random.default_rng(0))
        config = SessionConfig(k=15000, bounds_mode="monomial")
    else:
        lp = read_mps(AFIRO)
        config = SessionConfig(k=20000, bounds_mode="rows")
    public, blocks = split_columns(lp, [lp.n_cols // 3, lp.n_cols // 3, lp.n_cols - 2 * (lp.n_cols // 3)])
    return public, blocks, config, lp


@pytest.mark.parametrize("case", ["free", "afiro"])
def test_the_estimate_covers_the_measured_peak(case):
    # the child's own peak (VmHWM), not ru_maxrss of wait4: that starts from this pytest process's peak
    out = subprocess.run([sys.executable, "-c", _MEASURE, case], cwd=REPO, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    status, peak_text = out.stdout.split()[-2:]  # after anything HiGHS prints
    assert status == "optimal"
    peak = int(peak_text)
    public, blocks, config, _ = measured_case(case)
    estimate = simulation.estimate_session_memory(public, blocks, config)
    print(f"{case}: peak {peak / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} MiB")
    assert peak <= estimate, (peak, estimate)
    assert estimate < 3 * peak  # and not absurdly cautious


# -- certificates ------------------------------------------------------------------------------------
