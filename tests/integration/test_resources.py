"""securelp.solvers.resources: the memory a run may still use, limits included, and a process's own peak;
and an out-of-memory the estimates missed is one line with exit code 12."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def _limited(limit: int, code: str | list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` (or ``python -m securelp.coordinator.cli ARGS``) under ``ulimit -v`` (a shell sets
    it: ``preexec_fn`` is not safe in a process with threads)."""
    argv = [sys.executable, "-c", code] if isinstance(code, str) else [sys.executable, "-m", "securelp.coordinator.cli", *code]
    return subprocess.run(["sh", "-c", f'ulimit -v {limit // 1024} && exec "$@"', "sh", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_address_space_limit_caps_the_available_memory() -> None:
    out = _limited(2 * GIB, "from securelp.solvers.resources import available_memory, _status_bytes\n"
                            "print(available_memory(), _status_bytes('VmSize'))")
    assert out.returncode == 0, out.stderr
    available, vm_size = map(int, out.stdout.split())
    assert 0 < available <= 2 * GIB - vm_size + (1 << 20)  # VmSize read a moment apart


def test_a_run_under_ulimit_v_is_refused_up_front() -> None:
    # without the ulimit in the check it sees 22 GiB of RAM and HiGHS dies with std::bad_alloc (exit 1)
    out = _limited(3 * GIB // 2, ["mdp", "--dataset", "grid", "--rows", "30", "--cols", "30", "--eps", "1", "--eta", "2",
                                  "--method", "direct", "--json", "-"])
    assert out.returncode == ExitCode.RESOURCE, out.stderr
    err = out.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "GiB available" in err, err
    assert out.stdout == ""


@pytest.mark.parametrize("error, start", [
    (MemoryError("Unable to allocate 3.0 GiB for an array with shape (20000, 20000) and data type float64"),
     "securelp ldp: error: out of memory (Unable to allocate 3.0 GiB"),
    (RuntimeError("can't start new thread"), "securelp ldp: error: no new thread could be started"),
])
def test_a_resource_the_estimates_missed_is_one_line_and_exit_12(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 error: Exception, start: str) -> None:
    from securelp.coordinator.commands import ldp

    def fails(args: object) -> int:
        raise error

    monkeypatch.setattr(ldp, "run", fails)
    assert main(["ldp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--mechanism", "le"]) \
        == ExitCode.RESOURCE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(start) and "ulimit -v" in err


def test_a_childs_peak_is_its_own_not_its_parents() -> None:
    import numpy as np

    from securelp.solvers.resources import peak_rss

    held = np.ones(40_000_000)  # 320 MB touched in this process before the child starts
    out = subprocess.run([sys.executable, "-c", "from securelp.solvers.resources import peak_rss; print(peak_rss())"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 200 << 20 < held.nbytes <= peak_rss()  # ru_maxrss of wait4 would say >= 320 MB


def test_an_unexpected_error_after_an_interrupt_is_the_interrupt(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # a KeyboardInterrupt inside an import leaves e.g. "ImportError: initialization failed"
    from securelp.coordinator import cli
    from securelp.coordinator.commands import ldp

    def broken_import(args: object) -> int:
        cli._signalled.append("SIGTERM")  # the console script noted a signal meanwhile
        raise ImportError("initialization failed")

    monkeypatch.setattr(ldp, "run", broken_import)
    monkeypatch.setattr(cli, "_console", True)
    monkeypatch.setattr(cli, "_signalled", [])
    monkeypatch.setattr(cli, "_terminate_like_interrupt", lambda: None)  # this process's handlers stay
    monkeypatch.setattr(cli, "_ignore_further_interrupts", lambda: None)
    # the console script's prompt-exit watch (a daemon thread that ends the process 5 s after any later
    # SIGINT) must not outlive this test inside the test process
    monkeypatch.setattr(cli, "exit_promptly_on_interrupt", lambda *args, **kwargs: None)
    assert main(["ldp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--mechanism", "le"]) \
        == ExitCode.INTERRUPTED
    assert capsys.readouterr().err.strip() == "securelp ldp: interrupted by SIGTERM"


def test_an_interrupted_removal_of_private_keys_is_finished_by_the_exit_cleanups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from securelp.coordinator import exit_cleanups

    real_rmtree = shutil.rmtree
    calls: list[int] = []

    def interrupted_once(path: object, **kw: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # a second signal during the clean-up
        real_rmtree(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt), exit_cleanups.private_tempdir("securelp-test-") as tmp:
        (tmp / "party.key").write_text("secret")
    assert tmp.exists()  # cut short: the clean-up is still registered
    exit_cleanups.run_exit_cleanups()
    assert not tmp.exists()


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 bytes"), (512, "512 bytes"), (3 * 1024, "3.0 KiB"), (412 * 2**20, "412.0 MiB"),
    (int(12.34 * GIB), "12.3 GiB"), (-5, "0 bytes"),
])
def test_byte_figures_keep_a_digit_before_the_point(n: int, text: str) -> None:
    from securelp.solvers.resources import format_bytes

    assert format_bytes(n) == text


def test_a_tight_limit_is_not_read_as_zero() -> None:
    # not "more than the 0.0 GiB available"
    from securelp.solvers.resources import memory_shortfall

    assert memory_shortfall(3 * 2**20, 2**20) == "3.0 MiB, more than the 1.0 MiB available"
    assert memory_shortfall(2 * GIB, 100 * 2**20, 0.9) == "2.0 GiB, more than 90% of the 100.0 MiB available"
    assert memory_shortfall(1, 2**20) == ""
    # figures that round alike are given in bytes
    assert memory_shortfall(400_500, 400_480) == "400,500 bytes, more than the 400,480 bytes available"
