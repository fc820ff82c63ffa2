"""Liveness with real processes: a peer that dies or stops is named within the runtime's keepalive, in
every phase, in both connection directions -- not when the next call's deadline or the solve ends.

The coordinator's solve is made slow (20 s) so that "within the keepalive" and "when the solve ends"
cannot be confused; each test also checks the survivors' exit codes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from securelp.coordinator import protocol
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.solvers.errors import ExitCode, TransportError
from securelp.solvers.lp import HighsBackend
from securelp.solvers.lp.partition import split_columns
from tests.lp_fixtures import random_feasible_lp

pytestmark = pytest.mark.integration
PY = [sys.executable, "-m", "securelp.coordinator.cli"]
KEEPALIVE_S = 1.0
SLOW_SOLVE_S = 20.0


class SlowHighs(HighsBackend):
    """HiGHS after a 20 s pause: the coordinator 'solves' long enough for a party to die meanwhile."""

    def solve(self, lp):  # type: ignore[no-untyped-def]
        time.sleep(SLOW_SOLVE_S)
        return super().solve(lp)


class HitAfterMask:
    """Forwards to a real link; ``sig`` hits its party's process 0.3 s after its masked block arrived
    (the coordinator is then solving). Records when."""

    def __init__(self, inner, cluster, sig):  # type: ignore[no-untyped-def]
        self.inner, self.cluster, self.sig = inner, cluster, sig
        self.hit_at: float | None = None

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def mask(self, request):  # type: ignore[no-untyped-def]
        reply = self.inner.mask(request)

        def hit() -> None:
            self.cluster.kill(self.inner.party_id, self.sig)
            self.hit_at = time.monotonic()

        threading.Timer(0.3, hit).start()
        return reply


@pytest.mark.parametrize("connect", [False, True], ids=["dial-in", "dial-out"])
@pytest.mark.parametrize("sig, kind", [(signal.SIGKILL, "disconnected"), (signal.SIGSTOP, "unresponsive")],
                         ids=["killed", "stopped"])
def test_a_party_lost_while_the_coordinator_solves_is_named_within_the_keepalive(tmp_path, monkeypatch, connect,
                                                                                   sig, kind):
    monkeypatch.setattr(protocol, "HighsBackend", SlowHighs)
    lp = random_feasible_lp(np.random.default_rng(7), 8, 9)
    public, blocks = split_columns(lp, [3, 3, 3], ids=["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path, keepalive_s=KEEPALIVE_S, connect=connect, grace_s=1.0) as cluster:
        links = cluster.links(deadline_s=60)
        links[1] = HitAfterMask(links[1], cluster, sig)
        start = time.monotonic()
        with pytest.raises(TransportError, match=rf"solve: .*party p2 at 127\.0\.0\.1:\d+.*{kind}") as info:
            run_secure_lp(public, links, SessionConfig(deadline_s=60))
        detected = time.monotonic() - links[1].hit_at
        assert time.monotonic() - start < SLOW_SOLVE_S  # not when the solve ends
        assert detected <= KEEPALIVE_S + 1.5, (detected, str(info.value))
        print(f"{kind} party named {detected:.2f} s after the signal ({'dial-out' if connect else 'dial-in'})")
        if sig == signal.SIGSTOP:
            cluster.kill("p2", signal.SIGKILL)  # a stopped process ignores SIGTERM
        codes = cluster.wait(15)
    # the survivors were told the session was aborted
    assert codes["p1"] == codes["p3"] == int(ExitCode.PROTOCOL)
    assert codes["p2"] == -signal.SIGKILL


def test_wait_against_a_stopped_party_reports_it_unresponsive_not_a_certificate_problem(tmp_path):
    """A SIGSTOPped party process still accepts TCP connections, and gRPC's TLS handshake times out after
    20 s with "Handshake read failed": ``--wait 25`` outlasts that timeout, and the coordinator must still
    call the party unresponsive (exit 6), never blame its certificate."""
    lp = random_feasible_lp(np.random.default_rng(8), 6, 6)
    public, blocks = split_columns(lp, [6], ids=["frozen"])
    from securelp.solvers.lp.partition import save_public

    save_public(public, tmp_path / "public.npz")
    with LocalParties(blocks, tmp_path, grace_s=1.0) as cluster:
        cluster.kill("frozen", signal.SIGSTOP)
        res = subprocess.run(PY + ["coordinator", "--public", str(tmp_path / "public.npz"), "--party",
                                   f"frozen={cluster.endpoints['frozen']}", "--certs", str(cluster.certs_dir),
                                   "--wait", "25"], check=False, capture_output=True, text=True, timeout=120)
        cluster.kill("frozen", signal.SIGKILL)
    assert res.returncode == ExitCode.TRANSPORT, res.stderr
    err = res.stderr.strip().splitlines()[-1]
    assert "party frozen" in err and "unresponsive" in err and "stopped or overloaded" in err, err
    assert "certificate" not in res.stderr
