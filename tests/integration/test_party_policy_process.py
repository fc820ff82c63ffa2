"""Real ``securelp party`` processes: the party enforces its own policy (exit code 5, a log line naming
the refused request), reports it to the coordinator, and secure aggregation runs end to end with keys
bound to the parties' certificates; a party lost after the key agreement ends the session, named."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.transport import PartyLink
from securelp.party.policy import PartyPolicy
from securelp.party.session import PROTOCOL_VERSION
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ConfigError, ExitCode, ProtocolError, TransportError
from securelp.solvers.lp import SolveStatus
from securelp.solvers.lp.partition import split_columns
from tests.lp_fixtures import random_feasible_lp

pytestmark = pytest.mark.integration
PY = [sys.executable, "-m", "securelp.coordinator.cli"]


def test_party_help_states_the_defaults():
    out = subprocess.run(PY + ["party", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "default: monomial only" in out and "default: --no-reveal" in out


def test_a_default_party_process_refuses_rows_asked_directly_and_exits_5(tmp_path):
    """A caller that skips the coordinator's checks (a link's raw calls) asks a real party process for
    bound rows: it refuses with its own typed error and ends its session (exit 5, a log line)."""
    lp = random_feasible_lp(np.random.default_rng(0), 6, 8, free_fraction=0.0)
    _, blocks = split_columns(lp, [8], ids=["owner1"])
    with LocalParties(blocks, tmp_path) as cluster:
        link = GrpcPartyLink("owner1", cluster.endpoints["owner1"], tls=ChannelTls.from_dir(cluster.certs_dir),
                             deadline_s=10)
        try:
            hello = link.hello(pb.HelloRequest(session_id="s", protocol_version=PROTOCOL_VERSION, n_rows=6))
            assert PartyPolicy.from_pb(hello.policy) == PartyPolicy()
            with pytest.raises(ProtocolError, match=r"refused MaskRequest \(bounds mode rows\)") as info:
                link.mask(pb.MaskRequest(session_id="s", bounds_mode=pb.BOUNDS_MODE_ROWS, k=20))
        finally:
            link.shutdown()
        codes = cluster.wait(15)
    assert type(info.value) is ProtocolError  # the party's own error class, across the wire
    assert codes == {"owner1": int(ExitCode.PROTOCOL)}  # it ended its session at once
    log = (tmp_path / "owner1.log").read_text()
    assert "owner1: policy: bounds modes monomial; decoded solution kept (--no-reveal)" in log
    assert "party owner1: session s: refused MaskRequest (bounds mode rows)" in log


def test_the_coordinator_names_a_party_whose_policy_refuses_the_session(tmp_path):
    lp = random_feasible_lp(np.random.default_rng(1), 6, 8)
    public, blocks = split_columns(lp, [4, 4], ids=["p1", "p2"])
    with LocalParties(blocks, tmp_path) as cluster:
        with pytest.raises(ConfigError, match=r"party p1 does not reveal x_j \(run with --no-reveal"):
            run_secure_lp(public, cluster.links(deadline_s=30), SessionConfig(reveal=True))
        codes = cluster.wait(15)
    assert codes == {"p1": int(ExitCode.PROTOCOL), "p2": int(ExitCode.PROTOCOL)}  # told: aborted


def test_secure_aggregation_between_party_processes(tmp_path):
    lp = random_feasible_lp(np.random.default_rng(2), 20, 30, free_fraction=0.6)
    public, blocks = split_columns(lp, [10, 10, 10], ids=["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path, policy=PartyPolicy(reveal=True)) as cluster:
        outcome = run_secure_lp(public, cluster.links(deadline_s=30),
                                SessionConfig(secure_aggregation=True, reveal=True), central=lp)
        codes = cluster.wait(15)
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective_rel_diff <= 1e-9
    assert outcome.feasibility_violation <= 1e-6
    assert outcome.aggregation.participants == ("p1", "p2", "p3") and outcome.aggregation.keys_bound
    assert codes == {"p1": 0, "p2": 0, "p3": 0}


class _KilledBeforeMask(PartyLink):
    """Forwards to a real link; the party's process is killed after its hello (the key agreement)."""

    def __init__(self, inner: GrpcPartyLink, cluster: LocalParties) -> None:
        super().__init__(inner.party_id)
        self.inner, self.cluster = inner, cluster

    @property
    def transport(self) -> str:
        return "grpc"

    def hello(self, request):  # type: ignore[no-untyped-def]
        reply = self.inner.hello(request)
        self.cluster.kill(self.party_id)
        return reply

    def mask(self, request):  # type: ignore[no-untyped-def]
        return self.inner.mask(request)

    def decode(self, notice):  # type: ignore[no-untyped-def]
        return self.inner.decode(notice)

    def close(self, request):  # type: ignore[no-untyped-def]
        self.inner.close(request)


def test_a_party_lost_after_the_key_agreement_ends_the_session_named(tmp_path):
    lp = random_feasible_lp(np.random.default_rng(3), 10, 15, free_fraction=1.0)
    public, blocks = split_columns(lp, [5, 5, 5], ids=["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path) as cluster:
        links = cluster.links(deadline_s=10)
        links[2] = _KilledBeforeMask(links[2], cluster)
        with pytest.raises(TransportError, match=r"mask: party p3 at 127\.0\.0\.1:\d+ disconnected .*did its process end\?"):
            run_secure_lp(public, links, SessionConfig(secure_aggregation=True, deadline_s=10))
        codes = cluster.wait(15)
    assert codes["p1"] == codes["p2"] == int(ExitCode.PROTOCOL) and codes["p3"] == -signal.SIGKILL


FREE_MPS = """NAME          FREE4
ROWS
 N  COST
 G  R1
 L  R2
 G  R3
 L  R4
COLUMNS
    X1        COST      1.0        R1        1.0
    X1        R2        1.0
    X2        COST      1.0        R1        1.0
    X2        R2        -1.0
    X3        COST      1.0        R3        1.0
    X3        R4        1.0
    X4        COST      1.0        R3        1.0
    X4        R4        -1.0
RHS
    RHS       R1        1.0        R2        3.0
    RHS       R3        2.0        R4        1.0
BOUNDS
 FR BND       X1
 FR BND       X2
 FR BND       X3
 FR BND       X4
ENDATA
"""


def test_the_coordinator_command_runs_secure_aggregation_against_party_commands(tmp_path):
    """split + certs + two default `securelp party` processes + `securelp coordinator --secure-aggregation`."""
    import json

    (tmp_path / "free.mps").write_text(FREE_MPS)
    run = lambda *a: subprocess.run(PY + list(a), check=False, capture_output=True, text=True, timeout=120,
                                    cwd=str(tmp_path))
    assert run("split", "free.mps", "--parties", "2", "--ids", "a1,a2", "--out", "blocks").returncode == 0
    assert run("certs", "--out", "certs", "--parties", "a1,a2").returncode == 0
    parties = {pid: subprocess.Popen(PY + ["party", "--listen", "127.0.0.1:0", "--data", f"blocks/{pid}.npz", "--id",
                                           pid, "--certs", "certs", "--idle-timeout", "60"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(tmp_path))
               for pid in ("a1", "a2")}
    try:
        addrs = {pid: p.stdout.readline().split()[1] for pid, p in parties.items()}
        res = run("coordinator", "--public", "blocks/public.npz", *[f"--party={k}={v}" for k, v in addrs.items()],
                  "--certs", "certs", "--secure-aggregation", "--json", "r.json")
        codes = {pid: p.wait(timeout=15) for pid, p in parties.items()}
    finally:
        for p in parties.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["status"] == "optimal" and abs(report["objective"] - 3.0) <= 1e-9
    sa = report["secure_aggregation"]
    assert sa["participants"] == ["a1", "a2"] and sa["keys_bound"]
    assert [p["policy"] for p in report["parties"]] == [{"allow_bounds": ["monomial"], "reveal": False}] * 2
    assert codes == {"a1": 0, "a2": 0}
