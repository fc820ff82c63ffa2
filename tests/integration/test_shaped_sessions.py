"""``--link`` on ``securelp solve`` (and the API's ``link=``): a session through shaped links is exact
in both connection directions, a link cut mid-transfer is named, and bad specs are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import securelp
from securelp.solvers.errors import ConfigError, InputError, TransportError

pytestmark = pytest.mark.integration

AFIRO = Path(__file__).resolve().parents[1] / "data" / "netlib" / "afiro.mps"


@pytest.mark.parametrize("direction", ["dial-in", "dial-out"])
def test_a_session_through_shaped_links_is_exact(direction: str) -> None:
    res = securelp.solve(AFIRO, 3, transport="grpc", direction=direction, audit_budget_s=0,
                         link=["latency=5ms,jitter=2ms,bandwidth=50mbit", "party2:latency=30ms"])
    assert res.status.value == "optimal"
    assert abs(res.objective - res.central_objective) <= 1e-9 * abs(res.central_objective)


@pytest.mark.parametrize("direction", ["dial-in", "dial-out"])
def test_a_link_cut_mid_transfer_names_its_party(direction: str) -> None:
    """A cut link is a transport failure (exit 6) naming the party, never an authentication one (7)."""
    with pytest.raises(TransportError, match="party2") as caught:
        securelp.solve(AFIRO, 3, transport="grpc", direction=direction, audit_budget_s=0, keepalive_s=2.0,
                       deadline_s=20.0, link="party2:cut=3kB")
    assert caught.value.exit_code == 6, str(caught.value)


def test_bad_link_specs_are_input_errors_and_link_without_grpc_a_config_error() -> None:
    with pytest.raises(InputError, match="'speed=1' is not KEY=VALUE"):
        securelp.solve(AFIRO, 3, transport="grpc", link="speed=1")
    with pytest.raises(InputError, match="'party9' is not a party of this session"):
        securelp.solve(AFIRO, 3, transport="grpc", link="party9:latency=1ms")
    with pytest.raises(InputError, match="no shape after party1:"):
        securelp.solve(AFIRO, 3, transport="grpc", link="party1:")
    with pytest.raises(InputError, match="latency is given twice"):
        securelp.solve(AFIRO, 3, transport="grpc", link="latency=20ms,latency=30ms")
    with pytest.raises(ConfigError, match="need --transport grpc"):
        securelp.solve(AFIRO, 3, transport="inprocess", link="latency=1ms")
    done = subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", "solve", str(AFIRO), "--transport",
                           "grpc", "--link", "latency=fast"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1
    assert "'fast' is not a duration" in done.stderr
