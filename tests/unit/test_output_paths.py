"""Output paths (``--json``, ``--save-mechanism``, ``--plot``, ``--out``) are checked before any
work, so an hour-long solve is not lost to a typo; a write that fails at the end is a one-line
error that leaves neither the file nor a temporary behind (securelp.solvers.files, used by every writer)."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from securelp.coordinator.cli import main
from securelp.coordinator.commands import mdp as mdp_command
from securelp.coordinator.reporting import write_json_report
from securelp.solvers import files
from securelp.solvers.errors import ExitCode, InputError, ResourceError
from securelp.solvers.files import check_writable, write_atomically


def test_check_writable_names_the_option_and_what_is_wrong(tmp_path: Path, monkeypatch) -> None:
    check_writable(None, "--json")
    check_writable("-", "--json")
    check_writable(tmp_path / "r.json", "--json")  # a new file in an existing directory
    with pytest.raises(InputError, match=r"--save-mechanism .*: it is a directory"):
        check_writable(tmp_path, "--save-mechanism")
    with pytest.raises(InputError, match=r"--json .*: directory .*missing does not exist"):
        check_writable(tmp_path / "missing" / "r.json", "--json")
    with pytest.raises(InputError, match=r"--json .*new/: it names a directory, which does not exist"):
        check_writable(f"{tmp_path}/new/", "--json")  # no file named "new" is written
    # root may write anywhere, so the permission check is shown through os.access
    monkeypatch.setattr(files.os, "access", lambda *_a: False)
    with pytest.raises(InputError, match=r"--out .*: directory .* is not writable"):
        check_writable(tmp_path / "c.csv", "--out")


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_a_write_that_fails_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(InputError, match="it is a directory"):
        write_atomically(tmp_path / "adir", b"x")
    with pytest.raises(InputError, match="report .*it is a directory"):
        write_json_report(tmp_path / "adir", {"a": 1})
    assert _leftovers(tmp_path) == ["adir"]

    def refuse(code: int):
        def replace(src, dst):
            raise OSError(code, os.strerror(code))
        return replace

    monkeypatch.setattr(files.os, "replace", refuse(errno.ENOSPC))
    with pytest.raises(ResourceError, match="No space left on device"):
        write_json_report(tmp_path / "r.json", {"a": 1})
    monkeypatch.setattr(files.os, "replace", refuse(errno.EACCES))
    with pytest.raises(InputError, match="Permission denied"):
        write_atomically(tmp_path / "z.npy", b"x")
    assert _leftovers(tmp_path) == ["adir"]  # no file, no temporary
    monkeypatch.undo()
    write_json_report(tmp_path / "r.json", {"a": 1})
    assert _leftovers(tmp_path) == ["adir", "r.json"]


@pytest.mark.parametrize("option, value, fragment", [
    ("--json", "{dir}", "--json {dir}: it is a directory"),
    ("--json", "{dir}/missing/r.json", "does not exist"),
    ("--save-mechanism", "{dir}", "--save-mechanism {dir}: it is a directory"),
    ("--plot", "{dir}/p.xyz", "must end in one of .png, .pdf, .svg"),
    ("--plot", "{dir}/plot", "not nothing"),
])
def test_mdp_refuses_a_bad_output_path_before_solving(tmp_path: Path, capsys, monkeypatch, option, value,
                                                       fragment) -> None:
    def no_solve(*_a, **_k):
        raise AssertionError("the solve began before the output paths were checked")

    monkeypatch.setattr(mdp_command, "_solve", no_solve)
    argv = ["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", option, value.format(dir=tmp_path)]
    if option != "--json":
        argv += ["--json", str(tmp_path / "r.json")]
    assert main(argv) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert fragment.format(dir=tmp_path) in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", b"\x89PNG")])
def test_the_plot_is_written_in_the_format_its_name_asks_for(tmp_path: Path, suffix, magic) -> None:
    plot = tmp_path / f"p{suffix}"
    assert main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--method", "direct", "--plot", str(plot),
                 "--json", str(tmp_path / "r.json")]) == ExitCode.OK
    assert plot.read_bytes().startswith(magic)


@pytest.mark.parametrize("argv", [
    ["ldp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--eps", "1", "--mechanism", "grr", "--users", "10",
     "--json", "{dir}"],
    ["census", "release", "--synthetic", "census", "--eps", "1", "--mechanism", "hdp", "--json", "{dir}/r.json",
     "--out", "{dir}"],
    ["demo", "--transport", "inprocess", "--json", "{dir}"],
    ["perturb", "--dataset", "grid", "--rows", "3", "--cols", "3", "--mechanism-file", "{dir}/Z.npy", "--true",
     "{dir}/t.txt", "--out", "{dir}"],
])
def test_other_commands_refuse_a_directory_as_output(tmp_path: Path, capsys, argv) -> None:
    assert main([a.format(dir=tmp_path) for a in argv]) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert "it is a directory" in err and "Traceback" not in err
    assert _leftovers(tmp_path) == []


def test_write_atomically_sets_the_mode_and_takes_a_writer(tmp_path: Path) -> None:
    key, blob = tmp_path / "k.key", tmp_path / "b.bin"
    write_atomically(key, b"secret", mode=0o600)
    write_atomically(blob, lambda handle: handle.write(b"abc"), mode=0o644)
    assert key.read_bytes() == b"secret" and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert blob.read_bytes() == b"abc" and stat.S_IMODE(blob.stat().st_mode) == 0o644

    def fails(handle) -> None:
        handle.write(b"half")
        raise ValueError("the writer failed")

    with pytest.raises(ValueError, match="the writer failed"):
        write_atomically(tmp_path / "c.bin", fails)
    assert _leftovers(tmp_path) == ["b.bin", "k.key"]  # no half file, no temporary


def test_outputs_get_the_umask_and_private_blocks_stay_owner_only(tmp_path: Path) -> None:
    """A report, a mechanism or the public rows get what ``open()`` would give (``0666`` less the
    umask: others may read them, unlike keys); a party's block file holds private data and
    stays ``0600`` whatever the umask."""
    from securelp.solvers.lp.mps import read_mps
    from securelp.solvers.lp.partition import save_block, save_public, split_columns
    from tests.lp_fixtures import TINY_MPS

    old = os.umask(0o022)
    try:
        write_atomically(tmp_path / "r.json", "{}")
        assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644
        os.umask(0o027)
        write_atomically(tmp_path / "z.npy", b"x")
        assert stat.S_IMODE((tmp_path / "z.npy").stat().st_mode) == 0o640
        os.umask(0o002)
        mps = tmp_path / "lp.mps"
        mps.write_text(TINY_MPS)
        public, blocks = split_columns(read_mps(mps), [2, 1])
        save_public(public, tmp_path / "public.npz")
        save_block(blocks[0], tmp_path / "party1.npz")
        assert stat.S_IMODE((tmp_path / "public.npz").stat().st_mode) == 0o664
        assert stat.S_IMODE((tmp_path / "party1.npz").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_split_and_certs_refuse_a_directory_among_their_files_before_writing(tmp_path: Path, capsys) -> None:
    mps = Path(__file__).resolve().parents[2] / "deploy" / "afiro.mps"
    blocks, certs = tmp_path / "blocks", tmp_path / "certs"
    (blocks / "party1.npz").mkdir(parents=True)
    (certs / "ca.pem").mkdir(parents=True)
    assert main(["split", str(mps), "--parties", "2", "--out", str(blocks), "--force"]) == ExitCode.INPUT
    assert main(["certs", "--out", str(certs), "--parties", "a,b", "--force"]) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert "party1.npz is a directory" in err and "ca.pem is a directory" in err and "Traceback" not in err
    assert _leftovers(blocks) == ["party1.npz"] and _leftovers(certs) == ["ca.pem"]  # nothing written


@pytest.mark.parametrize("argv", [
    ["census", "release", "--data", "{dir}", "--max-size", "3", "--eps", "1", "--mechanism", "hdp", "--json",
     "{dir}/r.json"],
    ["census", "postprocess", "--noisy", "{dir}", "--total", "5", "--mechanism", "hdp", "--json", "{dir}/r.json"],
    ["party", "--data", "{dir}", "--id", "a", "--listen", "127.0.0.1:0", "--insecure"],
    ["coordinator", "--public", "{dir}", "--party", "a=127.0.0.1:1", "--insecure"],
])
def test_an_input_file_that_is_a_directory_is_called_one(tmp_path: Path, capsys, argv) -> None:
    assert main([a.format(dir=tmp_path) for a in argv]) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert f"{tmp_path}" in err and "is a directory, not a file" in err and "Traceback" not in err


def test_check_distinct_sees_one_file_under_other_names(tmp_path: Path) -> None:
    from securelp.solvers.files import check_distinct

    f = tmp_path / "in.csv"
    f.write_text("x")
    (tmp_path / "link.csv").symlink_to(f)
    (tmp_path / "sub").mkdir()
    check_distinct([("--json", tmp_path / "r.json"), ("--out", "-"), ("--plot", None)], [("--points", f), ("--prior", None)])
    for spelling in (f, tmp_path / "link.csv", tmp_path / "sub" / ".." / "in.csv"):
        with pytest.raises(InputError, match=r"--json .* is the input --points .*: writing it would destroy the input"):
            check_distinct([("--json", spelling)], [("--points", f)])
    with pytest.raises(InputError, match=r"--out and --json name the same file"):
        check_distinct([("--out", tmp_path / "new.csv"), ("--json", tmp_path / "sub" / ".." / "new.csv")])


@pytest.mark.parametrize("argv, fragment", [
    (["mdp", "--dataset", "points", "--points", "{dir}/pts.csv", "--save-mechanism", "{dir}/pts.csv"],
     "--save-mechanism {dir}/pts.csv is the input --points"),
    (["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--save-mechanism", "{dir}/z.npz", "--json", "{dir}/z.npz"],
     "--save-mechanism and --json name the same file"),
    (["mdp", "--dataset", "grid", "--rows", "2", "--cols", "2", "--prior", "{dir}/p.txt", "--json", "{dir}/p.txt"],
     "--json {dir}/p.txt is the input --prior"),
    (["ldp", "--dataset", "grid", "--rows", "2", "--cols", "2", "--eps", "1", "--prior", "{dir}/p.txt", "--json",
      "{dir}/p.txt"], "--json {dir}/p.txt is the input --prior"),
    (["census", "release", "--data", "{dir}/c.csv", "--eps", "1", "--mechanism", "hdp", "--json", "{dir}/r.json",
      "--out", "{dir}/c.csv"], "--out {dir}/c.csv is the input --data"),
    (["census", "postprocess", "--noisy", "{dir}/c.csv", "--total", "5", "--mechanism", "hdp", "--json", "{dir}/c.csv"],
     "--json {dir}/c.csv is the input --noisy"),
    (["solve", "{dir}/lp.mps", "--json", "{dir}/lp.mps"], "--json {dir}/lp.mps is the input FILE"),
    (["coordinator", "--public", "{dir}/public.npz", "--party", "a=127.0.0.1:1", "--insecure", "--json",
      "{dir}/public.npz"], "--json {dir}/public.npz is the input --public"),
])
def test_no_command_writes_over_its_own_input(tmp_path: Path, capsys, argv, fragment) -> None:
    """Each of these would replace its input file (a mechanism or a points file by a report, a census
    file by its release); each is refused before any work, the input intact."""
    inputs = {"pts.csv": "0,0\n1,0\n0,1\n", "p.txt": "0.25 0.25 0.25 0.25\n", "c.csv": "level,region_id\n",
              "lp.mps": "NAME x\n", "public.npz": "x", "z.npz": None}
    for name, text in inputs.items():
        if text is not None:
            (tmp_path / name).write_text(text)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main([a.format(dir=tmp_path) for a in argv]) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert fragment.format(dir=tmp_path) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_link_is_followed_and_a_device_or_fifo_is_written_into(tmp_path: Path) -> None:
    """A rename would put a regular file in place of a symbolic link, a device (``--json /dev/full``
    as root would replace the device node) or a FIFO (its reader would wait forever)."""

    target = tmp_path / "target.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    write_atomically(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and target.read_text() == "new"
    write_atomically("/dev/null", "discarded")
    assert Path("/dev/null").is_char_device()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    for _ in range(200):  # until the reader thread has opened its end (a loaded machine: not at once)
        try:
            write_json_report(fifo, {"a": 1})
            break
        except InputError as exc:
            assert "a FIFO that no process reads" in str(exc)
            time.sleep(0.05)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and got and b'"a": 1' in got[0]
    if Path("/dev/full").exists():
        with pytest.raises(ResourceError, match="No space left on device"):
            write_atomically("/dev/full", "x")
        assert Path("/dev/full").is_char_device()


def test_files_written_together_appear_together_or_not_at_all(tmp_path: Path) -> None:
    from securelp.solvers.files import written_together

    with pytest.raises(RuntimeError, match="the command failed"), written_together():
        write_atomically(tmp_path / "a.csv", "a")
        write_json_report(tmp_path / "r.json", {"a": 1})
        assert _leftovers(tmp_path)[0].startswith(".a.csv.") and not (tmp_path / "a.csv").exists()
        raise RuntimeError("the command failed")
    assert _leftovers(tmp_path) == []  # neither file, no temporary
    # the second write fails (its directory is gone by then): the first is not left alone
    (tmp_path / "gone").mkdir()
    with pytest.raises(InputError, match="does not exist"), written_together():
        write_atomically(tmp_path / "a.csv", "a")
        (tmp_path / "gone").rmdir()
        write_atomically(tmp_path / "gone" / "r.json", "{}")
    assert _leftovers(tmp_path) == []
    with written_together():
        write_atomically(tmp_path / "a.csv", "a")
        with written_together():  # nested: the outer block commits
            write_atomically(tmp_path / "b.csv", "b")
        assert not (tmp_path / "b.csv").exists()
    assert (tmp_path / "a.csv").read_text() == "a" and (tmp_path / "b.csv").read_text() == "b"
    assert _leftovers(tmp_path) == ["a.csv", "b.csv"]


def _refuse_renames_to(monkeypatch: pytest.MonkeyPatch, suffix: str, code: int) -> None:
    """The system refuses (``errno`` ``code``) the rename that would complete a file whose name ends in ``suffix``."""
    real = files.os.replace

    def replace(src, dst):
        if str(dst).endswith(suffix):
            raise OSError(code, os.strerror(code))
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)


def test_perturb_leaves_no_report_when_its_released_records_cannot_be_written(tmp_path: Path, monkeypatch,
                                                                              capsys) -> None:
    """The report is written after the released records; a failure on either leaves neither."""
    assert main(["mdp", "--dataset", "grid", "--rows", "3", "--cols", "3", "--save-mechanism",
                 str(tmp_path / "Z.npz"), "--json", str(tmp_path / "m.json")]) == ExitCode.OK
    (tmp_path / "t.txt").write_text("r0c0\n")
    _refuse_renames_to(monkeypatch, ".csv", errno.ENOSPC)
    before = _leftovers(tmp_path)
    rc = main(["perturb", "--mechanism-file", str(tmp_path / "Z.npz"), "--true", str(tmp_path / "t.txt"), "--json",
               str(tmp_path / "p.json"), "--out", str(tmp_path / "o.csv")])
    assert rc == ExitCode.RESOURCE and "No space left on device" in capsys.readouterr().err
    assert _leftovers(tmp_path) == before


def test_census_leaves_no_report_when_its_counts_cannot_be_written(tmp_path: Path, monkeypatch, capsys) -> None:
    """The report and the counts are written together: a failing ``--out`` leaves no report that
    describes a release nobody has."""
    data = tmp_path / "d.csv"
    data.write_text("level,region_id,parent_id,size,count\n1,R,,1,5\n1,R,,3,2\n2,a,R,1,3\n2,a,R,3,2\n2,b,R,1,2\n")
    _refuse_renames_to(monkeypatch, "out.csv", errno.EACCES)
    rc = main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
               "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "out.csv")])
    assert rc == ExitCode.INPUT and "Permission denied" in capsys.readouterr().err
    assert _leftovers(tmp_path) == ["d.csv"]
    monkeypatch.undo()
    assert main(["census", "release", "--data", str(data), "--max-size", "3", "--eps", "1", "--mechanism", "hdp",
                 "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "out.csv")]) == ExitCode.OK
    assert _leftovers(tmp_path) == ["d.csv", "out.csv", "r.json"]


def test_outputs_through_pipes_long_names_loops_and_kept_permissions(tmp_path: Path) -> None:
    """A FIFO nobody reads is an error, not a hang after the other output was renamed into place;
    ``/proc/self/fd/N`` (a link to ``pipe:[...]``) is written into; a 260-byte name is a one-line error
    and a 250-byte one does not fail for its temporary's name; a loop of links is refused, not replaced
    by a file; a link into a missing directory is found before the work; a 0600 file stays 0600."""
    from securelp.solvers.files import written_together

    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a FIFO that no process reads"), written_together():
        write_atomically(tmp_path / "o.csv", "x")
        write_json_report(fifo, {"a": 1})
    assert _leftovers(tmp_path) == ["ff"]
    r, w = os.pipe()
    try:
        write_atomically(f"/proc/self/fd/{w}", "through a pipe")
        os.close(w)
        assert os.read(r, 100) == b"through a pipe"
    finally:
        os.close(r)
    with pytest.raises(InputError, match="name is longer than 255 bytes|File name too long"):
        check_writable(tmp_path / ("n" * 260), "--json")
    long = tmp_path / ("m" * 250)
    check_writable(long, "--json")
    write_atomically(long, "ok")
    assert long.read_text() == "ok"
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for check in (lambda: check_writable(tmp_path / "loop1", "--json"), lambda: write_atomically(tmp_path / "loop1", "x")):
        with pytest.raises(InputError, match="Too many levels of symbolic links"):
            check()
    assert (tmp_path / "loop1").is_symlink()
    (tmp_path / "dangling").symlink_to(tmp_path / "nodir" / "x.json")
    with pytest.raises(InputError, match="directory .*nodir does not exist"):
        check_writable(tmp_path / "dangling", "--json")
    private = tmp_path / "released.csv"
    private.write_text("old")
    private.chmod(0o600)
    write_atomically(private, "new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text() == "new"


def test_an_input_that_is_not_a_regular_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    """require_file (every input file): a directory, a device or FIFO, a dangling link, a missing
    path each say which (not "/dev/null does not exist")."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "gone.mps")
    for path, why in [(tmp_path, "is a directory, not a file"), (Path("/dev/null"), "is not a regular file"),
                      (fifo, "is not a regular file"), (dangling, "is a symbolic link to a file that does not exist"),
                      (tmp_path / "missing.mps", "does not exist")]:
        with pytest.raises(InputError, match=f"^MPS file {path} {why}"):
            files.require_file(path, "MPS file")
    assert files.require_file(__file__, "MPS file") == Path(__file__)
