"""SIGTERM to ``securelp demo`` / ``solve --transport grpc`` takes Ctrl-C's path: exit 130, one line,
no temporary directory (keys, private blocks) and no party process left -- also when the run is
stuck and the forced exit has to do the clean-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lp_fixtures import TINY_MPS
from tests.process_helpers import signal_when_ready

REPO = Path(__file__).resolve().parents[2]

# the console script with the session replaced by a wait (so the signal surely comes mid-run, with
# the parties up and the keys on disk); "hang": a clean-up that never finishes (as a C call would)
_SNIPPET = """
import sys, time
import securelp.coordinator.cli as cli
import securelp.coordinator.commands.demo as demo
import securelp.coordinator.simulation as simulation

def session(*args, **kwargs):
    print("ready", flush=True)
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        if sys.argv[1] == "hang":
            while True:
                try:
                    time.sleep(1)
                except KeyboardInterrupt:
                    pass
        raise

demo.run_secure_lp = simulation.run_secure_lp = session
cli._console = True
sys.exit(cli.main(sys.argv[2:]))
"""


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _run_and_terminate(tmp_path: Path, mode: str, *argv: str) -> tuple[int, str, float]:
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    p = subprocess.Popen([sys.executable, "-c", _SNIPPET, mode, *argv], cwd=REPO, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def keys_on_disk() -> None:
        assert list((tmp_path / "tmp").iterdir())

    try:
        rc, took = signal_when_ready(p, signal.SIGTERM, 30, before=keys_on_disk)
    finally:
        for pid in _processes_mentioning(str(tmp_path)):  # a test leaves no process either
            os.kill(pid, signal.SIGKILL)
    return rc, p.stderr.read(), took


@pytest.mark.parametrize("argv", [["demo"], ["solve", "{tiny}", "--transport", "grpc"]])
def test_sigterm_cleans_up_and_exits_130_with_one_line(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "lp.mps").write_text(TINY_MPS)
    argv = [a.replace("{tiny}", str(tmp_path / "lp.mps")) for a in argv]
    rc, err, _ = _run_and_terminate(tmp_path, "normal", *argv)
    assert rc == 130, err
    assert err.strip() == f"securelp {argv[0]}: interrupted by SIGTERM"
    assert list((tmp_path / "tmp").iterdir()) == []  # no securelp-demo-*/securelp-sim-* with keys or blocks
    assert _processes_mentioning(str(tmp_path)) == []  # no orphan party process


def test_a_stuck_run_is_forced_out_after_cleaning_up(tmp_path: Path) -> None:
    rc, err, took = _run_and_terminate(tmp_path, "hang", "demo")
    assert rc == 130
    assert "interrupted" in err and "Traceback" not in err
    assert took < 9  # the grace of demo is 5 s
    time.sleep(0.2)
    assert list((tmp_path / "tmp").iterdir()) == []
    assert _processes_mentioning(str(tmp_path)) == []
