"""``securelp demo --hosts netns``: the coordinator and each party as processes in their own network
namespaces, in both connection directions; a party killed and a link set down mid-run are named;
nothing is left behind (namespaces, processes, temporary directories). Root only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from securelp.coordinator.examples import mangasarian_example
from securelp.coordinator.netns import list_namespaces
from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import owners_consent
from securelp.solvers.lp.partition import split_columns

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                 reason="network namespaces need root and iproute2's ip")]


def _leftovers(pid: int, tmp: Path) -> tuple[list[str], list[str]]:
    """The namespaces the process ``pid`` made and the demo's directories under ``tmp`` (its TMPDIR):
    only this test's own, so tests running beside it in other workers do not count."""
    return ([n for n in list_namespaces() if n.startswith(f"slp-{pid}-")],
            [p.name for p in tmp.glob("securelp-demo-*")])


@pytest.mark.parametrize("direction", ["dial-in", "dial-out"])
def test_demo_across_namespaces_is_exact_and_leaves_nothing(tmp_path: Path, direction: str) -> None:
    report = tmp_path / "r.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    demo = subprocess.Popen([sys.executable, "-m", "securelp.coordinator.cli", "demo", "--example", "2", "--hosts",
                             "netns", "--direction", direction, "--json", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(tmp)))
    try:
        stdout, stderr = demo.communicate(timeout=300)
    finally:
        demo.kill()
    done = subprocess.CompletedProcess(demo.args, demo.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["hosts"]["kind"] == "netns" and data["hosts"]["direction"] == direction
    assert data["hosts"]["addresses"]["coordinator"] == "10.77.0.1"
    assert data["status"] == "optimal"
    assert abs(data["objective"] - data["known_objective"]) <= 1e-9 * abs(data["known_objective"])
    assert "network namespaces on a private bridge" in done.stdout
    assert _leftovers(demo.pid, tmp) == ([], [])


def _blocks():
    lp, split, _ = mangasarian_example(1, seed=0)
    return split_columns(lp, split, ids=["owner1", "owner2", "owner3"])


@pytest.mark.parametrize("fault", ["kill", "link-down"])
def test_a_party_lost_across_namespaces_is_named_and_nothing_is_left(tmp_path: Path, fault: str) -> None:
    from securelp.coordinator.netns_session import run_on_namespaces

    public, blocks = _blocks()
    config = SessionConfig(deadline_s=30.0)

    def inject(hosts, procs) -> None:  # once the coordinator has started: lose owner2
        def act() -> None:
            if fault == "kill":
                procs["owner2"].kill()
            else:
                hosts.set_link("owner2", up=False)
        threading.Timer(0.5, act).start()

    before = _leftovers(os.getpid(), tmp_path)
    run = run_on_namespaces(public, blocks, config, tmp_path, policy=owners_consent(config), keepalive_s=2.0,
                            wait_s=10.0, on_started=inject)
    log = (tmp_path / "coordinator.log").read_text(errors="replace")
    assert run.exit_code == 6, log[-2000:]  # the documented transport exit code
    assert "owner2" in log.strip().splitlines()[-1]
    assert _leftovers(os.getpid(), tmp_path) == before
    # no process of the run survives it (each ran with its files in tmp_path)
    alive = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False)
    assert alive.stdout.strip() == ""
