"""A private temporary directory left by a run killed beyond any clean-up (SIGKILL) is removed by the
next run that makes one with the same prefix; a live run's directory and foreign ones are kept."""

from __future__ import annotations

import os

from securelp.coordinator.exit_cleanups import OWNER_FILE, private_tempdir, sweep_stale_tempdirs


def _own_start() -> str:
    return (open(f"/proc/{os.getpid()}/stat", encoding="ascii").read().rsplit(")", 1)[1].split()[19]
            if os.path.exists(f"/proc/{os.getpid()}/stat") else "alive")


def test_a_dead_owners_directory_is_swept_and_a_live_ones_kept(tmp_path):
    dead = tmp_path / "securelp-demo-dead"
    dead.mkdir()
    (dead / "party1.key").write_text("secret")
    # this process's pid with another start time: a later process reusing the pid of a killed run
    (dead / OWNER_FILE).write_text(f"{os.getpid()} 1\n")
    live = tmp_path / "securelp-demo-live"
    live.mkdir()
    (live / OWNER_FILE).write_text(f"{os.getpid()} {_own_start()}\n")
    foreign = tmp_path / "securelp-demo-foreign"  # no owner file: not made by private_tempdir
    foreign.mkdir()
    other_prefix = tmp_path / "securelp-sim-dead"
    other_prefix.mkdir()
    (other_prefix / OWNER_FILE).write_text(f"{os.getpid()} 1\n")

    assert sweep_stale_tempdirs("securelp-demo-", tmp_path) == [dead]
    assert not dead.exists() and live.is_dir() and foreign.is_dir() and other_prefix.is_dir()


def test_private_tempdir_names_its_owner_and_is_removed_on_exit(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with private_tempdir("securelp-test-") as path:
        assert path.parent == tmp_path
        pid, start = (path / OWNER_FILE).read_text().split()
        assert int(pid) == os.getpid() and start == _own_start()
        assert oct(path.stat().st_mode & 0o777) == oct(0o700)
        # a second run while this one lives keeps this directory
        assert sweep_stale_tempdirs("securelp-test-", tmp_path) == []
    assert not path.exists()
