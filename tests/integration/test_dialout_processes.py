"""Acceptance of the runtime with real processes: long-running parties that dial out.

``securelp coordinator --listen`` with three ``securelp party --connect --serve --out`` processes runs
a session on afiro whose per-party result files concatenate to the central optimum; a coordinator
SIGKILLed after its hello (mid-session) is noticed by the parties at once and the next coordinator,
on the same address, is served by the same processes, exactly; faults and bad input give one line
naming the party, the documented exit code, no orphan and no half-written output file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from securelp.party.results import read_party_solution
from securelp.solvers.errors import ExitCode
from securelp.solvers.lp import HighsBackend, read_mps

pytestmark = pytest.mark.integration
PY = [sys.executable, "-m", "securelp.coordinator.cli"]
AFIRO = Path(__file__).resolve().parents[1] / "data" / "netlib" / "afiro.mps"
IDS = ("a", "b", "c")
KEEPALIVE_S = 2.0


class Proc:
    """A child process whose stdout lines are collected by a thread (stderr goes to a file)."""

    def __init__(self, args: list[str], cwd: Path, name: str) -> None:
        self.stderr_path = cwd / f"{name}.err"
        self._err = self.stderr_path.open("wb")
        self.p = subprocess.Popen(args, cwd=str(cwd), stdout=subprocess.PIPE, stderr=self._err, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.p.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, prefix: str, count: int = 1, timeout: float = 60.0) -> str:
        """The ``count``-th stdout line starting with ``prefix`` (fails after ``timeout`` seconds)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            hits = [line for line in list(self.lines) if line.startswith(prefix)]
            if len(hits) >= count:
                return hits[count - 1]
            if self.p.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no {count}x {prefix!r} line; exit {self.p.poll()}; stdout {self.lines[-5:]}; "
                             f"stderr {self.stderr()[-800:]}")

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
        self._err.close()


@pytest.fixture()
def afiro_split(tmp_path):
    run = lambda *a: subprocess.run(PY + list(a), check=False, capture_output=True, text=True, timeout=120,
                                    cwd=str(tmp_path))
    res = run("split", str(AFIRO), "--parties", "3", "--ids", ",".join(IDS), "--out", "blocks")
    assert res.returncode == 0, res.stderr
    res = run("certs", "--out", "certs", "--ids", ",".join(IDS))
    assert res.returncode == 0, res.stderr
    (tmp_path / "out").mkdir()
    return tmp_path


def _parties(cwd: Path, address: str, *extra: str) -> dict[str, Proc]:
    return {pid: Proc(PY + ["party", "--connect", address, "--data", f"blocks/{pid}.npz", "--id", pid, "--certs",
                            "certs", "--serve", "--keepalive", str(KEEPALIVE_S), "--out", f"out/{pid}-{{session}}.csv",
                            *extra], cwd, pid) for pid in IDS}


def _coordinator(cwd: Path, listen: str, json_name: str) -> Proc:
    return Proc(PY + ["coordinator", "--public", "blocks/public.npz", "--listen", listen, "--expect", "3", "--certs",
                      "certs", "--keepalive", str(KEEPALIVE_S), "--wait", "60", "--json", json_name], cwd,
                json_name.removesuffix(".json"))


def _check_exact(cwd: Path, report: dict) -> None:
    """Each party's --out file of the report's session, concatenated, is the central optimum's x."""
    lp = read_mps(AFIRO)
    central = HighsBackend().solve(lp)
    sid = report["session_id"]
    names, xs = [], []
    for pid in IDS:
        n, x = read_party_solution(cwd / "out" / f"{pid}-{sid}.csv")
        names += n
        xs.append(x)
        assert (os.stat(cwd / "out" / f"{pid}-{sid}.csv").st_mode & 0o777) == 0o600  # the owner's private data
    x = np.concatenate(xs)
    assert tuple(names) == tuple(lp.col_names)  # the MPS file's names, from the block files
    assert np.linalg.norm(x - central.x) <= 1e-9 * max(1.0, np.linalg.norm(central.x))
    assert abs(report["objective"] - central.objective) <= 1e-9 * abs(central.objective)
    assert [p["saved_as"] for p in report["parties"]] == ["csv"] * 3  # the format, never the path
    assert not any("out/" in json.dumps(p) for p in report["parties"])


KILLED_COORDINATOR = textwrap.dedent("""
    import sys, time
    from securelp.coordinator.certs import COORDINATOR_ID, load_identity
    from securelp.coordinator.listener import PartyListener
    from securelp.party.session import PROTOCOL_VERSION
    from securelp.protos import securelp_pb2 as pb
    from securelp.protos.channels import ServerTls

    ident = load_identity("certs", COORDINATOR_ID)
    listener = PartyListener(sys.argv[1], tls=ServerTls(ident.private_key, ident.certificate, ident.ca_certificate),
                             expected=["a", "b", "c"], keepalive_s=60)
    print("LISTENING", listener.start(), flush=True)
    links = listener.links(60, deadline_s=60)
    for link in links:
        link.hello(pb.HelloRequest(session_id="killed", protocol_version=PROTOCOL_VERSION, n_rows=27,
                                   bounds_mode=pb.BOUNDS_MODE_MONOMIAL))
    print("HELLO DONE", flush=True)
    time.sleep(600)
""")


def test_listening_coordinator_and_long_running_parties_survive_a_killed_coordinator(afiro_split):
    cwd = afiro_split
    procs: list[Proc] = []
    try:
        # 1. a session on afiro: the parties dial out, each keeps its own x_j
        first = _coordinator(cwd, "127.0.0.1:0", "r1.json")
        procs.append(first)
        address = first.wait_line("LISTENING ").split()[1]
        parties = _parties(cwd, address)
        procs += parties.values()
        assert first.p.wait(120) == 0, first.stderr()
        report1 = json.loads((cwd / "r1.json").read_text())
        assert report1["status"] == "optimal" and report1["direction"] == "dial-out"
        _check_exact(cwd, report1)
        assert all(p.p.poll() is None for p in parties.values())  # --serve: still running

        # 2. a coordinator that dies (SIGKILL) after its hello: the parties' session is in progress
        (cwd / "killed.py").write_text(KILLED_COORDINATOR)
        doomed = Proc([sys.executable, "killed.py", address], cwd, "killed")
        procs.append(doomed)
        doomed.wait_line("HELLO DONE")
        doomed.p.kill()
        doomed.p.wait(10)
        killed_at = time.monotonic()

        # 3. the next coordinator on the same address is served by the same processes at once, exactly
        second = _coordinator(cwd, address, "r2.json")
        procs.append(second)
        assert second.p.wait(120) == 0, second.stderr()
        served_in = time.monotonic() - killed_at
        report2 = json.loads((cwd / "r2.json").read_text())
        assert report2["status"] == "optimal" and report2["session_id"] != report1["session_id"]
        _check_exact(cwd, report2)
        for proc in parties.values():
            err = proc.stderr()
            assert "session killed (pplp) dropped" in err, err[-1500:]  # noticed, named, forgotten
            assert "second hello" not in err
            assert proc.p.poll() is None
        # the new coordinator's own start-up (a Python interpreter, imports, TLS) dominates; the parties
        # noticed the dead coordinator at once (its connections closed) and retried every 0.5 s
        assert served_in < 60
        print(f"killed coordinator -> next session done in {served_in:.1f} s")

        # 4. SIGTERM ends every long-running party with the documented code, after its sessions
        for proc in parties.values():
            proc.p.send_signal(signal.SIGTERM)
        for proc in parties.values():
            assert proc.p.wait(30) == ExitCode.INTERRUPTED
            assert "stopped by SIGTERM after 3 session(s)" in proc.stderr()  # two done, the killed one dropped
    finally:
        for proc in procs:
            proc.stop()
    leftovers = [f for f in (cwd / "out").iterdir() if not f.name.endswith(".csv")]
    assert not leftovers  # no temporary or half-written output file


def test_a_party_that_cannot_write_its_output_says_so_before_connecting(afiro_split):
    """Bad input: an --out whose directory does not exist is refused at once, in one line naming the
    party's option, with the input exit code, before the party dials anyone."""
    cwd = afiro_split
    res = subprocess.run(PY + ["party", "--connect", "127.0.0.1:9", "--data", "blocks/a.npz", "--id", "a", "--certs",
                               "certs", "--out", "missing/a.csv"], check=False, cwd=str(cwd), capture_output=True,
                         text=True,
                         timeout=60)
    assert res.returncode == ExitCode.INPUT, res.stderr
    errors = [line for line in res.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "--out" in errors[0] and "Traceback" not in res.stderr
    assert not (cwd / "missing").exists()


def test_a_listening_coordinator_names_the_parties_that_never_connected(afiro_split):
    """Fault: only two of the three parties connect; the coordinator names the missing one, exits 6, and
    the connected long-running parties stay up for the next coordinator."""
    cwd = afiro_split
    coordinator = Proc(PY + ["coordinator", "--public", "blocks/public.npz", "--listen", "127.0.0.1:0", "--expect",
                             "3", "--certs", "certs", "--wait", "4"], cwd, "coord")
    procs = [coordinator]
    try:
        address = coordinator.wait_line("LISTENING ").split()[1]
        for pid in ("a", "b"):
            procs.append(Proc(PY + ["party", "--connect", address, "--data", f"blocks/{pid}.npz", "--id", pid,
                                    "--certs", "certs", "--serve"], cwd, pid))
        assert coordinator.p.wait(60) == ExitCode.TRANSPORT
        err = coordinator.stderr()
        assert "parties c did not connect within 4 s" in err and "connected: a, b" in err.replace("b, a", "a, b")
        assert all(p.p.poll() is None for p in procs[1:])
    finally:
        for proc in procs:
            proc.stop()


def test_long_running_parties_that_listen_serve_coordinator_after_coordinator(afiro_split):
    """``--serve`` in the dial-in direction: two coordinators, one after the other, dial the same
    ``securelp party --listen --serve`` processes; both sessions are exact, each with its own result
    files, and the parties stay up until SIGTERM."""
    cwd = afiro_split
    parties = {pid: Proc(PY + ["party", "--listen", "127.0.0.1:0", "--data", f"blocks/{pid}.npz", "--id", pid,
                               "--certs", "certs", "--serve", "--keepalive", str(KEEPALIVE_S), "--out",
                               f"out/{pid}-{{session}}.csv"], cwd, pid) for pid in IDS}
    try:
        addresses = {pid: proc.wait_line("LISTENING ").split()[1] for pid, proc in parties.items()}
        reports = []
        for run in ("d1", "d2"):
            res = subprocess.run(PY + ["coordinator", "--public", "blocks/public.npz", "--certs", "certs",
                                       "--keepalive", str(KEEPALIVE_S), "--json", f"{run}.json",
                                       *[f"--party={pid}={addr}" for pid, addr in addresses.items()]],
                                 check=False, cwd=str(cwd), capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
            reports.append(json.loads((cwd / f"{run}.json").read_text()))
        assert [r["direction"] for r in reports] == ["dial-in", "dial-in"]
        assert reports[0]["session_id"] != reports[1]["session_id"]
        for report in reports:
            _check_exact(cwd, report)
        for proc in parties.values():
            assert proc.p.poll() is None
            proc.p.send_signal(signal.SIGTERM)
        for proc in parties.values():
            assert proc.p.wait(30) == ExitCode.INTERRUPTED
            assert "stopped by SIGTERM after 2 session(s)" in proc.stderr()
    finally:
        for proc in parties.values():
            proc.stop()



def test_a_stopped_coordinator_is_dropped_by_its_parties_within_their_keepalive(afiro_split):
    """The coordinator stops (SIGSTOP) after its hello: nothing is closed, nothing arrives. Each
    long-running party names it unresponsive and drops the session within its keepalive."""
    cwd = afiro_split
    (cwd / "killed.py").write_text(KILLED_COORDINATOR)
    procs: list[Proc] = []
    try:
        stopped = Proc([sys.executable, "killed.py", "127.0.0.1:0"], cwd, "stopped")
        procs.append(stopped)
        address = f"127.0.0.1:{stopped.wait_line('LISTENING ').split()[1]}"
        parties = _parties(cwd, address)
        procs += parties.values()
        stopped.wait_line("HELLO DONE")
        stopped.p.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        pending = set(parties)
        while pending and time.monotonic() - t0 < 30:
            pending = {pid for pid in pending if "session killed (pplp) dropped" not in parties[pid].stderr()}
            time.sleep(0.05)
        took = time.monotonic() - t0
        assert not pending, {pid: parties[pid].stderr()[-600:] for pid in pending}
        assert took <= KEEPALIVE_S + 2.0, took
        print(f"stopped coordinator dropped by every party {took:.2f} s after SIGSTOP")
        for proc in parties.values():
            assert "unresponsive" in proc.stderr() and proc.p.poll() is None
    finally:
        for proc in procs:
            proc.stop()


def test_simulate_runs_in_either_direction(tmp_path):
    """``simulate(..., transport="grpc", direction=...)``: the same session, exact, whether the coordinator
    dials the simulated parties or they dial it; an unknown direction is refused."""
    from securelp.coordinator.protocol import SessionConfig
    from securelp.coordinator.simulation import owners_consent, simulate
    from securelp.solvers.errors import ConfigError
    from securelp.solvers.lp.partition import split_columns
    from tests.lp_fixtures import random_feasible_lp

    lp = random_feasible_lp(np.random.default_rng(11), 8, 9)
    public, blocks = split_columns(lp, [3, 3, 3], ids=["p1", "p2", "p3"])
    config = SessionConfig(reveal=True)
    for direction in ("dial-in", "dial-out"):
        outcome, _ = simulate(public, blocks, config, transport="grpc", direction=direction, central=lp,
                              policy=owners_consent(config), keepalive_s=2.0, audit_budget_s=0)
        assert outcome.status.value == "optimal" and outcome.transport == "grpc"
        assert outcome.objective_rel_diff <= 1e-9 and outcome.feasibility_violation <= 1e-6
    with pytest.raises(ConfigError, match="direction 'sideways'"):
        simulate(public, blocks, config, transport="grpc", direction="sideways")
