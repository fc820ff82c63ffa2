"""Real party processes (``securelp party``) over gRPC with mutual TLS, started by
``LocalParties`` or by the CLI itself: results, statuses, failures, and no orphan process
on any exit path (normal end, error, a party dying or hanging, kill -9 of the launcher, Ctrl-C).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.certs import write_session_certs
from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.transport import PartyLink
from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import AuthenticationError, ExitCode, TransportError
from securelp.solvers.lp import HighsBackend, LinearProgram, SolveStatus, read_mps
from securelp.solvers.lp.partition import split_columns
from tests.lp_fixtures import INFEASIBLE_MPS, UNBOUNDED_MPS, random_feasible_lp
from tests.process_helpers import sigint_raises

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
PY = [sys.executable, "-m", "securelp.coordinator.cli"]


def alive(pid: int) -> bool:
    """True if ``pid`` runs (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def party_children() -> list[str]:
    """``securelp.coordinator.cli party`` processes that are children of this test process."""
    out = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "securelp.coordinator.cli party"], check=False, capture_output=True,
                         text=True)
    return out.stdout.split()


@pytest.fixture(autouse=True)
def no_orphans():
    yield
    assert party_children() == [], "a party process outlived its test"


def small_lp(seed=0, m=8, n=9):
    return random_feasible_lp(np.random.default_rng(seed), m, n)


def blocks_of(lp, sizes, ids):
    return split_columns(lp, sizes, ids=ids)


def test_processes_match_central_and_exit_with_the_status(tmp_path):
    lp = small_lp()
    public, blocks = blocks_of(lp, [3, 3, 3], ["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path) as cluster:
        pids = cluster.processes
        assert sorted(pids) == ["p1", "p2", "p3"] and all(alive(p) for p in pids.values())
        assert all(addr.startswith("127.0.0.1:") for addr in cluster.endpoints.values())
        outcome = run_secure_lp(public, cluster.links(deadline_s=30), SessionConfig(), central=lp)
        codes = cluster.wait(15)  # each party exits by itself after Close
        lines = {p: cluster.stdout_lines(p) for p in pids}
    assert outcome.transport == "grpc" and outcome.status is SolveStatus.OPTIMAL
    assert outcome.objective_rel_diff <= 1e-9
    assert codes == {"p1": 0, "p2": 0, "p3": 0}
    for p, out in lines.items():
        assert out[0].startswith("LISTENING 127.0.0.1:")
        assert re.fullmatch(rf"party {p}: session [0-9a-f]+ ended: status optimal, objective "
                            rf"{re.escape(f'{outcome.objective:.15g}')}", out[-1]), out[-1]
    assert not any(alive(p) for p in pids.values())
    for p in pids:  # the party logs name no private data: no x_j value appears in them
        log = (tmp_path / f"{p}.log").read_text()
        assert "x_j" not in log


@pytest.mark.parametrize("text, status, code", [(INFEASIBLE_MPS, SolveStatus.INFEASIBLE, ExitCode.INFEASIBLE),
                                                (UNBOUNDED_MPS, SolveStatus.UNBOUNDED, ExitCode.UNBOUNDED)])
def test_status_reaches_every_party_process(tmp_path, text, status, code):
    f = tmp_path / "lp.mps"
    f.write_text(text)
    lp = read_mps(f)
    public, blocks = blocks_of(lp, [1, 1], ["left", "right"])
    with LocalParties(blocks, tmp_path) as cluster:
        outcome = run_secure_lp(public, cluster.links(deadline_s=30), SessionConfig())
        codes = cluster.wait(15)
    assert outcome.status is status
    assert codes == {"left": int(code), "right": int(code)}  # each process learned the status


class DyingAfterMask(PartyLink):
    """Forwards to a real link; the party's process is killed right after it sent its block."""

    def __init__(self, inner: GrpcPartyLink, cluster: LocalParties) -> None:
        super().__init__(inner.party_id)
        self.inner, self.cluster = inner, cluster

    @property
    def transport(self) -> str:
        return "grpc"

    def hello(self, request):
        return self.inner.hello(request)

    def mask(self, request):
        reply = self.inner.mask(request)
        self.cluster.kill(self.party_id)
        return reply

    def decode(self, notice):
        return self.inner.decode(notice)

    def close(self, request):
        self.inner.close(request)


def test_party_dying_mid_session_is_named(tmp_path):
    lp = small_lp(1)
    public, blocks = blocks_of(lp, [3, 3, 3], ["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path) as cluster:
        links = cluster.links(deadline_s=10)
        links[1] = DyingAfterMask(links[1], cluster)
        start = time.monotonic()
        with pytest.raises(TransportError, match=r"decode: party p2 at 127\.0\.0\.1:\d+ disconnected .*did its process end\?"):
            run_secure_lp(public, links, SessionConfig(deadline_s=10))
        assert time.monotonic() - start < 10
        codes = cluster.wait(15)
    # the survivors were told the session was aborted and exited with the protocol code
    assert codes["p1"] == codes["p3"] == int(ExitCode.PROTOCOL)
    assert codes["p2"] == -signal.SIGKILL


def test_hung_party_hits_the_deadline(tmp_path):
    lp = small_lp(2)
    public, blocks = blocks_of(lp, [4, 5], ["quick", "frozen"])
    with LocalParties(blocks, tmp_path, grace_s=1.0) as cluster:
        cluster.kill("frozen", signal.SIGSTOP)
        start = time.monotonic()
        links = cluster.links(deadline_s=4, wait_ready=False)
        with pytest.raises(TransportError, match=r"party frozen at 127\.0\.0\.1:\d+ did not answer hello within 4 s"):
            run_secure_lp(public, links, SessionConfig(deadline_s=4))
        # the deadline plus 1 s of best-effort Close to the party that timed out (not min(deadline, 10 s)
        # more for it: that would be 8 s here)
        assert time.monotonic() - start < 4 + 3
        assert [link.timed_out for link in links] == [False, True]
    # a stopped process ignores SIGTERM: the launcher had to SIGKILL it


def test_an_interrupted_run_does_not_wait_out_the_calls_in_flight(tmp_path):
    """Ctrl-C (or SIGTERM, which takes its path) while a party is stopped: the calls in flight are
    cancelled and the stopped party's Close gets 1 s. Waiting min(deadline, 10 s) for that Close
    and for the call itself would let the console script's 5 s watchdog end the run with
    "shutdown did not finish"."""
    import threading

    lp = small_lp(2)
    public, blocks = blocks_of(lp, [4, 5], ["quick", "frozen"])
    with LocalParties(blocks, tmp_path, grace_s=1.0) as cluster:
        links = cluster.links(deadline_s=30)
        cluster.kill("frozen", signal.SIGSTOP)
        main = threading.main_thread().ident  # a real SIGINT to this thread: it wakes a blocked wait
        timer = threading.Timer(1.0, lambda: signal.pthread_kill(main, signal.SIGINT))
        start = time.monotonic()
        with sigint_raises():
            timer.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    run_secure_lp(public, links, SessionConfig(deadline_s=30))
            finally:
                timer.cancel()
        assert time.monotonic() - start < 1.0 + 3.0
        assert all(link.interrupted for link in links)


def test_unreachable_party(tmp_path):
    lp = small_lp(3)
    public, blocks = blocks_of(lp, [4, 5], ["here", "gone"])
    with LocalParties(blocks, tmp_path) as cluster:
        cluster.kill("gone")
        start = time.monotonic()
        with pytest.raises(TransportError, match=r"party gone at 127\.0\.0\.1:\d+ was not ready within 2 s"):
            cluster.links(ready_timeout=2)
        assert time.monotonic() - start < 8
        with pytest.raises(TransportError, match=r"party gone at 127\.0\.0\.1:\d+ is unreachable"):
            run_secure_lp(public, cluster.links(deadline_s=10, wait_ready=False), SessionConfig())


def test_certificates_from_another_ca_are_refused(tmp_path):
    lp = small_lp(4)
    public, blocks = blocks_of(lp, [4, 5], ["p1", "p2"])
    (tmp_path / "run").mkdir()
    other = write_session_certs(tmp_path / "other", ["p1", "p2"])
    with LocalParties(blocks, tmp_path / "run") as cluster:
        session_tls = ChannelTls.from_dir(cluster.certs_dir)
        foreign_tls = ChannelTls.from_dir(other.directory)
        hello = pb.HelloRequest(session_id="s", protocol_version=1, n_rows=public.n_rows)
        # (a) a coordinator whose certificate the session CA did not sign: the party refuses it
        intruder = ChannelTls(session_tls.root_certificates, foreign_tls.private_key, foreign_tls.certificate_chain)
        # (b) a party whose certificate the session CA did not sign: the coordinator refuses it
        misled = ChannelTls(foreign_tls.root_certificates, session_tls.private_key, session_tls.certificate_chain)
        # (d) a party answering at p1's address with p2's (valid) certificate: wrong identity (before (c):
        # the one-shot party ends with the session that (c) opens and drops)
        swapped = GrpcPartyLink("p2", cluster.endpoints["p1"], tls=session_tls, deadline_s=10)
        with pytest.raises(AuthenticationError, match="does not name 'p2'"):
            swapped.wait_ready(5)
        swapped.shutdown()
        # (c) negative control: the right material works
        for tls, ok in ((intruder, False), (misled, False), (session_tls, True)):
            link = GrpcPartyLink("p1", cluster.endpoints["p1"], tls=tls, deadline_s=10)
            try:
                if ok:
                    assert link.hello(hello).party_id == "p1"
                else:
                    with pytest.raises(AuthenticationError, match="party p1 at 127.0.0.1"):
                        link.hello(hello)
            finally:
                link.shutdown()


def lone_party_command(tmp_path: Path, party_id: str) -> list[str]:
    """``securelp party`` for a one-party session whose block and certificates are written to ``tmp_path``."""
    _, blocks = blocks_of(small_lp(5), [9], [party_id])
    from securelp.solvers.lp.partition import save_block

    save_block(blocks[0], tmp_path / f"{party_id}.npz")
    write_session_certs(tmp_path / "c", [party_id])
    return PY + ["party", "--listen", "127.0.0.1:0", "--data", str(tmp_path / f"{party_id}.npz"), "--id", party_id,
                 "--certs", str(tmp_path / "c")]


def test_party_exits_after_idle_timeout_and_on_sigterm(tmp_path):
    base = lone_party_command(tmp_path, "lonely")
    start = time.monotonic()
    idle = subprocess.run(base + ["--idle-timeout", "1"], check=False, capture_output=True, text=True, timeout=60)
    assert idle.returncode == ExitCode.TRANSPORT
    assert idle.stdout.startswith("LISTENING 127.0.0.1:")
    assert "no coordinator for 1 s" in idle.stderr
    assert time.monotonic() - start < 30
    proc = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("LISTENING")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == ExitCode.INTERRUPTED
        assert "stopped by SIGTERM" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_party_refuses_a_block_of_another_party(tmp_path):
    lp = small_lp(6)
    _, blocks = blocks_of(lp, [4, 5], ["p1", "p2"])
    from securelp.solvers.lp.partition import save_block

    save_block(blocks[1], tmp_path / "p2.npz")
    write_session_certs(tmp_path / "c", ["p1", "p2"])
    res = subprocess.run(PY + ["party", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "p2.npz"), "--id", "p1",
                               "--certs", str(tmp_path / "c")], check=False, capture_output=True, text=True, timeout=60)
    assert res.returncode == ExitCode.INPUT
    assert "belongs to 'p2', not 'p1'" in res.stderr and "Traceback" not in res.stderr


def test_launcher_killed_with_sigkill_leaves_no_party(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time, numpy as np
        from pathlib import Path
        from securelp.coordinator.launcher import LocalParties
        from securelp.solvers.lp.partition import split_columns
        from tests.lp_fixtures import random_feasible_lp
        lp = random_feasible_lp(np.random.default_rng(0), 5, 6)
        _, blocks = split_columns(lp, [3, 3], ids=["k1", "k2"])
        with LocalParties(blocks, Path({str(tmp_path)!r})) as cluster:
            print(" ".join(str(p) for p in cluster.processes.values()), flush=True)
            time.sleep(120)
    """)
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        pids = [int(p) for p in launcher.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        launcher.kill()  # kill -9: no cleanup code runs in the launcher
        launcher.wait(timeout=10)
        end = time.monotonic() + 15
        while any(alive(p) for p in pids) and time.monotonic() < end:
            time.sleep(0.1)
        left = [p for p in pids if alive(p)]
        logs = {f.name: f.read_text(errors="replace")[-2000:] for f in tmp_path.glob("*.log")}
        assert not left, f"PR_SET_PDEATHSIG did not stop the parties {left}; their logs: {logs}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for p in pids:  # a failed run leaves no orphan behind either
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_burst_of_sigterms_stops_the_party(tmp_path):
    """The launcher's death delivers SIGTERM once per launcher thread; re-entered handlers must not deadlock.

    Before the handler was made lock-free, about 4 bursts in 10 left the party hung in a
    re-entered handler (its main thread waiting on a lock the outer handler held).
    """
    cmd = lone_party_command(tmp_path, "b1")
    for _ in range(5):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().startswith("LISTENING")
            for _ in range(2000):
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    break
            assert proc.wait(timeout=15) == ExitCode.INTERRUPTED
            err = proc.stderr.read()
            assert "stopped by SIGTERM" in err and "Traceback" not in err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_ctrl_c_during_demo_leaves_no_party(tmp_path):
    demo = subprocess.Popen(PY + ["demo", "--example", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(tmp_path))
    try:
        end = time.monotonic() + 60
        children: list[str] = []
        while time.monotonic() < end and len(children) < 3:
            children = subprocess.run(["pgrep", "-P", str(demo.pid)], check=False, capture_output=True, text=True).stdout.split()
            time.sleep(0.05)
        assert len(children) == 3, "the demo did not start its three parties"
        demo.send_signal(signal.SIGINT)
        _, err = demo.communicate(timeout=30)
        assert demo.returncode in (int(ExitCode.INTERRUPTED), 0)  # 0 only if it finished before the signal
        if demo.returncode:
            assert "interrupted" in err and "Traceback" not in err
        deadline = time.monotonic() + 10
        while any(alive(int(p)) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(int(p)) for p in children)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def _cli_session(tmp_path, mps, ids=("a1", "a2", "a3")):
    """split + certs + one `securelp party` process per id + `securelp coordinator`, all via the CLI."""
    run = lambda *a: subprocess.run(PY + list(a), check=False, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    res = run("split", str(mps), "--parties", str(len(ids)), "--ids", ",".join(ids), "--out", "blocks")
    assert res.returncode == 0, res.stderr
    assert run("certs", "--out", "certs", "--parties", ",".join(ids)).returncode == 0
    parties = {}
    try:
        for pid in ids:
            parties[pid] = subprocess.Popen(
                PY + ["party", "--listen", "127.0.0.1:0", "--data", f"blocks/{pid}.npz", "--id", pid,
                      "--certs", "certs", "--idle-timeout", "60"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(tmp_path))
        addrs = {pid: p.stdout.readline().split()[1] for pid, p in parties.items()}
        res = run("coordinator", "--public", "blocks/public.npz", *[f"--party={k}={v}" for k, v in addrs.items()],
                  "--certs", "certs", "--json", "r.json")
        codes = {pid: p.wait(timeout=15) for pid, p in parties.items()}
        finals = {pid: p.stdout.read() for pid, p in parties.items()}
    finally:
        for p in parties.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return res, codes, finals


def test_split_certs_party_coordinator_commands_end_to_end(tmp_path):
    mps = Path(__file__).resolve().parents[1] / "data" / "netlib" / "afiro.mps"  # in the repo: never skipped
    central = HighsBackend().solve(read_mps(mps))
    res, codes, finals = _cli_session(tmp_path, mps)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["transport"] == "grpc" and report["status"] == "optimal"
    assert abs(report["objective"] - central.objective) <= 1e-8 * max(1.0, abs(central.objective))
    assert [p["id"] for p in report["parties"]] == ["a1", "a2", "a3"]
    assert all(p["bytes_sent"] > 0 for p in report["parties"])
    assert codes == {"a1": 0, "a2": 0, "a3": 0}
    assert all("status optimal" in text for text in finals.values())


def test_cli_infeasible_exit_code_for_coordinator_and_parties(tmp_path):
    mps = tmp_path / "infeasible.mps"
    mps.write_text(INFEASIBLE_MPS)
    res, codes, finals = _cli_session(tmp_path, mps, ids=("l", "r"))
    assert res.returncode == ExitCode.INFEASIBLE, res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "infeasible"
    assert codes == {"l": int(ExitCode.INFEASIBLE), "r": int(ExitCode.INFEASIBLE)}
    assert all("status infeasible" in text for text in finals.values())


@pytest.mark.slow
def test_payload_over_64_mb_through_grpc(tmp_path):
    # m = k = 3,000, one party with 3,000 free dense columns: A B' is 72 MB of doubles.
    # Rows 2..m are free (presolve drops them) so HiGHS's time stays moderate; the optimum is
    # min 3 a_1'x s.t. a_1'x >= 2, i.e. 6.
    m = n = 3000
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (m, n))
    lo = np.full(m, -np.inf)
    lo[0] = 2.0
    lp = LinearProgram(c=3.0 * A[0], A=A, row_lower=lo, row_upper=np.full(m, np.inf),
                       col_lower=np.full(n, -np.inf), col_upper=np.full(n, np.inf))
    public, blocks = split_columns(lp, [n], ids=["big"])
    with LocalParties(blocks, tmp_path) as cluster:
        outcome = run_secure_lp(public, cluster.links(deadline_s=300), SessionConfig(deadline_s=300))
    assert outcome.status is SolveStatus.OPTIMAL
    assert outcome.objective == pytest.approx(6.0, rel=1e-8)
    assert outcome.parties[0].bytes_sent > 64 * 10**6


def test_insecure_and_reproducible_modes_are_explicit_and_flagged(tmp_path):
    lp = small_lp(7)
    public, blocks = blocks_of(lp, [4, 5], ["p1", "p2"])
    with LocalParties(blocks, tmp_path, insecure=True, seed="fixed") as cluster:
        assert not (tmp_path / "certs").exists()
        outcome = run_secure_lp(public, cluster.links(deadline_s=30), SessionConfig(), central=lp)
        cluster.wait(15)
    assert outcome.reproducible and outcome.objective_rel_diff <= 1e-9
    for p in ("p1", "p2"):
        log = (tmp_path / f"{p}.log").read_text()
        assert "WITHOUT TLS" in log and "reproducible-simulation mode" in log
