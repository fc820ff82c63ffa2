"""An interrupted solver run from the console script exits promptly, even from inside a long C call."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.process_helpers import signal_when_ready

# the main thread in long C calls that release the GIL and do not look at signals (as in a HiGHS
# solve), then, once interrupted, a clean-up that hangs (as the exit's join of worker threads in
# such calls would): the watcher thread must end the process either way
_SNIPPET = """
import time, numpy as np, coordinator.cli as cli
cli._console = True
cli.exit_promptly_on_interrupt()
a = np.ones((3000, 3000))
try:
    print("ready", flush=True)  # inside the try: the signal may come at once
    while True:
        a @ a
except KeyboardInterrupt:
    time.sleep(600)
"""

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stuck_in_a_c_call_exits_130_soon_after_the_signal(sig: int) -> None:
    # SIGINT at its default in the child: a shell's background job, or a test process that ignores
    # SIGINT, would hand it down ignored (and an ignored SIGINT is rightly left ignored)
    p = subprocess.Popen([sys.executable, "-c", _SNIPPET], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509 - no threads yet
    rc, took = signal_when_ready(p, sig, 60)
    assert rc == 130
    assert "interrupted" in p.stderr.read()
    assert took < 30  # the grace is 3 s; the C loop alone would run for hours


def test_it_does_nothing_in_process() -> None:
    import signal as s

    from coordinator import cli

    before = s.set_wakeup_fd(-1)
    s.set_wakeup_fd(before)
    cli.exit_promptly_on_interrupt()  # not the console script: no wakeup pipe, no watcher
    assert s.set_wakeup_fd(before) == before


# a SIGTERM while the command's modules still load (before stop 48: killed, 143, no message; a
# KeyboardInterrupt raised there once broke numpy's import into a 63-line traceback)
_EARLY = """
import os, signal, sys
import coordinator.cli as cli
cli._console = True
if sys.argv[1] == "deferred":
    cli._defer_early_signals()  # what the console script does first
os.kill(os.getpid(), signal.SIGTERM)
sys.exit(cli.main(["mdp", "--dataset", "grid", "--rows", "2", "--cols", "2", "--json", "/dev/null"]))
"""


@pytest.mark.parametrize("mode, code", [("deferred", 130), ("bare", -signal.SIGTERM)])
def test_a_signal_while_the_command_loads_is_one_line_and_130(mode: str, code: int) -> None:
    out = subprocess.run([sys.executable, "-c", _EARLY, mode], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == code, out.stderr
    if code == 130:
        assert out.stderr.strip() == "securelp mdp: interrupted by SIGTERM"


# a SIGTERM after the run, while the interpreter shuts down: the run's own code (7 here), not 143
_LATE = """
import atexit, os, signal, sys, threading, time
import coordinator.cli as cli
cli._console = True
phase, armed = sys.argv[1], sys.argv[2] == "armed"
if phase == "exit-functions":
    atexit.register(os.kill, os.getpid(), signal.SIGTERM)  # registered first: runs last
if armed:
    cli._exit_on_a_late_signal(7)  # what the console script does after main
if phase == "threads":  # a thread still running: the exit joins it; SIGTERM comes during the join
    threading.Thread(target=lambda: (time.sleep(0.3), os.kill(os.getpid(), signal.SIGTERM), time.sleep(30))).start()
sys.exit(7)
"""


@pytest.mark.parametrize("phase", ["threads", "exit-functions"])
@pytest.mark.parametrize("armed", [True, False])
def test_a_signal_at_shutdown_keeps_the_runs_exit_code(phase: str, armed: bool) -> None:
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _LATE, phase, "armed" if armed else "bare"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == (7 if armed else -signal.SIGTERM), out.stderr
    assert "Traceback" not in out.stderr
    assert time.monotonic() - start < 20  # not the thread's 30 s
