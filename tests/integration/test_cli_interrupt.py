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
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, even if SIGINT came down ignored
import time, numpy as np, securelp.coordinator.cli as cli
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
    # the child sets Python's SIGINT handler itself: a shell's background job, or a test process that
    # ignores SIGINT, would hand it down ignored (and an ignored SIGINT is rightly left ignored); not
    # with preexec_fn, which runs between fork and exec in a test process whose gRPC threads make
    # that unsafe (gRPC's poller aborted such a child with "epoll_wait error: Bad file descriptor")
    p = subprocess.Popen([sys.executable, "-c", _SNIPPET], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rc, took = signal_when_ready(p, sig, 60)
    assert rc == 130
    assert "interrupted" in p.stderr.read()
    assert took < 30  # the grace is 3 s; the C loop alone would run for hours


def test_it_does_nothing_in_process() -> None:
    import signal as s

    from securelp.coordinator import cli

    before = s.set_wakeup_fd(-1)
    s.set_wakeup_fd(before)
    cli.exit_promptly_on_interrupt()  # not the console script: no wakeup pipe, no watcher
    assert s.set_wakeup_fd(before) == before


# a SIGTERM while the command's modules still load must end with 130 and one line, not be killed (143,
# no message), and a KeyboardInterrupt raised there must not break numpy's import into a traceback
_EARLY = """
import os, signal, sys
import securelp.coordinator.cli as cli
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


# a signal after the run, while the interpreter shuts down (here: joining a thread that is still
# running): SIGINT keeps the run's own code (7 here; a KeyboardInterrupt traceback before); SIGTERM
# keeps its default action, so that a shutdown that hangs stays killable
_LATE = """
import os, signal, sys, threading, time
import securelp.coordinator.cli as cli
cli._console = True
sig, armed = getattr(signal, sys.argv[1]), sys.argv[2] == "armed"
signal.signal(signal.SIGINT, cli._raise_interrupt)  # as during the run
signal.signal(signal.SIGTERM, cli._raise_interrupt)
if armed:
    cli._after_the_run(7, set())  # what the console script does after main
threading.Thread(target=lambda: (time.sleep(0.3), os.kill(os.getpid(), sig), time.sleep(30))).start()
sys.exit(7)
"""


@pytest.mark.parametrize("sig, armed, code", [("SIGINT", True, 7), ("SIGTERM", True, -signal.SIGTERM),
                                              ("SIGINT", False, 7)])
def test_a_signal_at_shutdown(sig: str, armed: bool, code: int) -> None:
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _LATE, sig, "armed" if armed else "bare"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == code, out.stderr
    assert ("Traceback" in out.stderr) == (not armed)  # unarmed: "Exception ignored" KeyboardInterrupt traceback
    assert time.monotonic() - start < 20  # not the thread's 30 s
