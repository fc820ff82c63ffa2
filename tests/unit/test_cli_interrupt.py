"""An interrupted solver run from the console script exits promptly, even from inside a long C call."""

from __future__ import annotations

import signal
import subprocess
import sys

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
