"""``securelp.party.server.ExitWatchdog``: a stopping party process ends even when its exit blocks.

The hang is real: a process whose main thread returns while a non-daemon thread waits forever
never exits (the control case below times out). With the watchdog armed it exits with the
armed code after the delay and says why on stderr.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from securelp.party.server import ExitWatchdog
from securelp.solvers.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _script(arm: str) -> list[str]:
    code = textwrap.dedent(f"""
        import threading
        from securelp.party.server import ExitWatchdog
        w = ExitWatchdog(0.3, label="securelp party: t1")
        threading.Thread(target=threading.Event().wait, name="stuck").start()  # blocks the exit
        {arm}
    """)
    return [sys.executable, "-c", code]


def test_armed_watchdog_ends_a_process_whose_exit_blocks():
    start = time.monotonic()
    res = subprocess.run(_script("w.arm(6); w.arm(42)"), check=False, capture_output=True, text=True, timeout=30,
                         cwd=str(REPO))
    assert res.returncode == 42  # the last code armed wins; the countdown started at the first arm
    assert "securelp party: t1: shutdown did not finish within 0.3 s; exiting (code 42)" in res.stderr
    assert "Traceback" not in res.stderr
    assert time.monotonic() - start < 20


def _assert_hangs(arm: str, seconds: float) -> None:
    proc = subprocess.Popen(_script(arm), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(REPO))
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=seconds)
    finally:
        proc.kill()
        proc.wait()


def test_without_the_watchdog_the_same_process_hangs():
    _assert_hangs("pass", 2.0)


@pytest.mark.parametrize("seconds", [0, -1, float("nan")])
def test_watchdog_needs_a_positive_delay(seconds):
    with pytest.raises(ConfigError, match="positive delay"):
        ExitWatchdog(seconds)


def test_unarmed_or_disarmed_watchdog_does_nothing():
    w = ExitWatchdog(0.01)
    assert not w.armed
    time.sleep(0.05)  # still alive: nothing was started
    w.arm(3)
    assert w.armed
    w.disarm()  # in time: this test process must survive the 0.01 s delay
    time.sleep(0.1)
    assert not w.armed
    w.arm(4)  # a disarmed watchdog stays disarmed
    time.sleep(0.05)
    assert not w.armed


def test_disarm_in_a_blocked_process_leaves_it_hanging():
    """The disarmed path really cancels: the blocked process is not ended by the watchdog."""
    _assert_hangs("w.arm(42); w.disarm()", 1.5)
