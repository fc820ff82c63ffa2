"""The multi-process subcommands' argument handling: split, coordinator, party (no sockets)."""

from __future__ import annotations

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.coordinator.commands.coordinate import parse_parties
from securelp.solvers.errors import ExitCode, InputError
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import load_block, load_public, save_public, split_columns
from tests.lp_fixtures import TINY_MPS


@pytest.fixture()
def tiny(tmp_path):
    f = tmp_path / "tiny.mps"
    f.write_text(TINY_MPS)
    return f


def test_split_writes_public_rows_and_one_block_per_party(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["split", str(tiny), "--parties", "2", "--split", "2,1", "--ids", "ann,bob", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["ann.npz", "bob.npz", "public.npz"]
    lp = read_mps(tiny)
    ann, bob = load_block(out / "ann.npz", "ann"), load_block(out / "bob.npz", "bob")
    assert (ann.n_cols, bob.n_cols) == (2, 1)
    np.testing.assert_array_equal(ann.A.toarray(), lp.A.toarray()[:, :2])
    np.testing.assert_array_equal(bob.c, lp.c[2:])
    assert (ann.col_names, bob.col_names) == (("X1", "X2"), ("X3",))  # the MPS file's names, kept by their owner
    public = load_public(out / "public.npz")
    np.testing.assert_array_equal(public.row_lower, lp.row_lower)
    assert public.offset == lp.offset != 0.0  # the objective constant travels with the public rows
    assert "ann.npz (2 columns)" in capsys.readouterr().out
    # refuses to overwrite, and names what is there
    assert main(["split", str(tiny), "--parties", "2", "--ids", "ann,bob", "--out", str(out)]) == ExitCode.INPUT
    assert "ann.npz" in capsys.readouterr().err


@pytest.mark.parametrize("argv, fragment", [
    (["--parties", "2", "--split", "1,1"], "sums to 2"),
    (["--parties", "4"], "only 3 columns"),
    (["--parties", "2", "--ids", "a"], "names 1 parties"),
    (["--parties", "2", "--ids", "a,a"], "duplicate"),
])
def test_split_bad_arguments(tiny, tmp_path, capsys, argv, fragment):
    assert main(["split", str(tiny), *argv, "--out", str(tmp_path / "o")]) == ExitCode.INPUT
    assert fragment in capsys.readouterr().err


def test_a_block_file_without_column_names_loads_with_numbered_names(tmp_path):
    """Files written before blocks kept their column names load; the names number the block's own columns."""
    from securelp.solvers.lp.partition import save_block

    f = tmp_path / "tiny.mps"
    f.write_text(TINY_MPS)
    _, (block,) = split_columns(read_mps(f), [3], ids=["solo"])
    assert block.column_names == ("X1", "X2", "X3")
    save_block(block, tmp_path / "named.npz")
    with np.load(tmp_path / "named.npz") as data:
        arrays = {k: data[k] for k in data.files if k != "col_names"}
        assert list(data["col_names"]) == ["X1", "X2", "X3"]
    np.savez(tmp_path / "old.npz", **arrays)
    old = load_block(tmp_path / "old.npz", "solo")
    assert old.col_names is None and old.column_names == ("x1", "x2", "x3")
    arrays["col_names"] = np.array(["a", "b"])  # a name short: refused, naming the file
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match="bad.npz.*2 column names for 3 columns"):
        load_block(tmp_path / "bad.npz")


def test_split_missing_file_names_it(tmp_path, capsys):
    assert main(["split", str(tmp_path / "nope.mps"), "--parties", "2", "--out", str(tmp_path / "o")]) == ExitCode.INPUT
    assert "nope.mps" in capsys.readouterr().err


def test_parse_parties():
    assert parse_parties(["a=h:1", "b=10.0.0.2:50051"]) == [("a", "h:1"), ("b", "10.0.0.2:50051")]
    with pytest.raises(InputError, match="duplicate party ids in --party: a"):
        parse_parties(["a=h:1", "a=h:2"])
    for bad in ("a", "=h:1", "a=h", "a=h:x"):
        with pytest.raises(InputError):
            parse_parties([bad])


def test_coordinator_duplicate_ids_exit_code(tiny, tmp_path, capsys):
    public, _ = split_columns(read_mps(tiny), [3])
    save_public(public, tmp_path / "public.npz")
    code = main(["coordinator", "--public", str(tmp_path / "public.npz"), "--party", "a=127.0.0.1:1",
                 "--party", "a=127.0.0.1:2", "--insecure"])
    assert code == ExitCode.INPUT  # as for a duplicate id in split and certs
    assert "duplicate party ids" in capsys.readouterr().err


def test_coordinator_and_party_need_certs_or_explicit_insecure(tmp_path, capsys):
    assert main(["coordinator", "--public", "x.npz", "--party", "a=h:1"]) == ExitCode.CONFIG
    assert "--certs DIR is required" in capsys.readouterr().err
    assert main(["coordinator", "--public", "x.npz", "--party", "a=h:1", "--certs", "d", "--insecure"]) == ExitCode.CONFIG
    assert main(["party", "--listen", "127.0.0.1:0", "--data", "x.npz", "--id", "a"]) == ExitCode.CONFIG
    assert main(["party", "--listen", "127.0.0.1:0", "--data", "x.npz", "--id", "a", "--certs", "d",
                 "--insecure"]) == ExitCode.CONFIG


def test_party_missing_block_is_an_input_error(tmp_path, capsys):
    assert main(["party", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "none.npz"), "--id", "a",
                 "--insecure"]) == ExitCode.INPUT
    assert "none.npz" in capsys.readouterr().err


def test_a_listening_coordinator_checks_its_party_set_before_listening(tiny, tmp_path, capsys):
    """--listen takes party names (--party NAME) or a count (--expect N) that must fit the split's roster;
    every mistake is one line and exit 3 before any socket opens; --expect without --listen too."""
    out = tmp_path / "blocks"
    assert main(["split", str(tiny), "--parties", "2", "--ids", "ann,bob", "--out", str(out)]) == 0
    capsys.readouterr()
    base = ["coordinator", "--public", str(out / "public.npz"), "--insecure"]
    cases = [
        (["--listen", "127.0.0.1:0", "--party", "ann=h:1", "--party", "bob=h:2"], "give their names only"),
        (["--listen", "127.0.0.1:0"], "--party NAME (repeat per party) or --expect N"),
        (["--listen", "127.0.0.1:0", "--expect", "3"], "the split's roster has 2 parties: ann, bob"),
        (["--listen", "127.0.0.1:0", "--party", "ann"], "the --party set"),
        (["--listen", "127.0.0.1:0", "--party", "ann", "--party", "bob", "--expect", "3"], "--expect 3 but"),
        (["--party", "ann=h:1", "--party", "bob=h:2", "--expect", "2"], "--expect N applies to --listen"),
        (["--listen", "nowhere"], "HOST:PORT"),
    ]
    for extra, message in cases:
        assert main(base + extra) == ExitCode.INPUT, extra
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (extra, err)


def test_a_party_listens_or_connects_never_both(capsys):
    with pytest.raises(SystemExit) as info:
        main(["party", "--listen", "127.0.0.1:0", "--connect", "h:1", "--data", "x.npz", "--id", "a", "--insecure"])
    assert info.value.code == ExitCode.USAGE and "not allowed with argument" in capsys.readouterr().err
