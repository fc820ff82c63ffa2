"""``securelp split`` records the roster (ids, column counts, split id); the coordinator refuses a
``--party`` set that is not the split's, and bad ``--party`` ids, at once (no sockets needed)."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError
from securelp.solvers.lp import read_mps
from securelp.solvers.lp.partition import (
    ColumnBlock,
    PublicRows,
    Roster,
    load_block,
    load_public,
    save_block,
    save_public,
    split_columns,
)
from tests.lp_fixtures import TINY_MPS


@pytest.fixture()
def tiny(tmp_path):
    f = tmp_path / "tiny.mps"
    f.write_text(TINY_MPS)
    return f


def _split(tiny, out, *extra):
    return main(["split", str(tiny), "--parties", "3", "--out", str(out), *extra])


def test_split_records_the_roster_in_public_and_every_block(tiny, tmp_path):
    assert _split(tiny, tmp_path / "b") == 0
    public = load_public(tmp_path / "b" / "public.npz")
    roster = public.roster
    assert roster is not None and roster.party_ids == ("party1", "party2", "party3")
    assert roster.n_cols == (1, 1, 1) and len(roster.split_id) == 32  # 128 random bits, hex
    for pid in roster.party_ids:
        assert load_block(tmp_path / "b" / f"{pid}.npz", pid).split_id == roster.split_id
    # another split of the same file gets another id
    assert _split(tiny, tmp_path / "c") == 0
    assert load_public(tmp_path / "c" / "public.npz").roster.split_id != roster.split_id


@pytest.mark.parametrize("ids", ["a,b,public", "a,PUBLIC,b", "Public,a,b"])
def test_public_is_a_reserved_id(tiny, tmp_path, capsys, ids):
    out = tmp_path / "x2"
    assert _split(tiny, out, "--ids", ids) == ExitCode.INPUT
    err = capsys.readouterr().err
    assert "is reserved" in err and "public.npz" in err and "Traceback" not in err
    assert not (out / "public.npz").exists()


def test_files_from_before_the_roster_still_load(tiny, tmp_path):
    lp = read_mps(tiny)
    public, blocks = split_columns(lp, [2, 1], ids=["a", "b"])
    save_public(PublicRows(public.row_lower, public.row_upper, public.sense, public.offset, public.name),
                tmp_path / "public.npz")
    save_block(ColumnBlock("a", blocks[0].A, blocks[0].c, blocks[0].col_lower, blocks[0].col_upper), tmp_path / "a.npz")
    with np.load(tmp_path / "public.npz") as d:
        assert "split_id" not in d.files
    assert load_public(tmp_path / "public.npz").roster is None
    assert load_block(tmp_path / "a.npz", "a").split_id == ""


def test_roster_check_names_missing_and_extra_parties():
    roster = Roster("0" * 32, ("p1", "p2", "p3"), (1, 2, 3))
    roster.check_parties(["p3", "p1", "p2"])
    with pytest.raises(InputError, match=r"\(missing p2; not in the split: p9\)"):
        roster.check_parties(["p1", "p3", "p9"])
    with pytest.raises(InputError):
        Roster("not hex!", ("a",), (1,))


def _coordinator(public, *parties, wait="30"):
    argv = ["coordinator", "--public", str(public), "--insecure", "--wait", wait]
    for p in parties:
        argv += ["--party", p]
    return main(argv)


def test_coordinator_refuses_a_party_set_that_is_not_the_split(tiny, tmp_path, capsys):
    assert _split(tiny, tmp_path / "b") == 0
    capsys.readouterr()
    start = time.monotonic()
    # nothing listens on these ports: the refusal comes before any dialing and any --wait
    code = _coordinator(tmp_path / "b" / "public.npz", "party1=127.0.0.1:1", "party3=127.0.0.1:3")
    assert code == ExitCode.INPUT and time.monotonic() - start < 5
    err = capsys.readouterr().err.strip()
    assert "missing party2" in err and "Traceback" not in err and len(err.splitlines()) == 1
    code = _coordinator(tmp_path / "b" / "public.npz", "party1=127.0.0.1:1", "party2=127.0.0.1:2",
                        "party3=127.0.0.1:3", "party4=127.0.0.1:4")
    assert code == ExitCode.INPUT and "not in the split: party4" in capsys.readouterr().err


@pytest.mark.parametrize("parties, fragment", [
    (["PARTY1=127.0.0.1:1", "party1=127.0.0.1:2"], "duplicate party id 'party1'"),
    (["coordinator=127.0.0.1:1"], "'coordinator' is reserved"),
    (["CA=127.0.0.1:1"], "'CA' is reserved"),
    (["public=127.0.0.1:1"], "'public' is reserved"),
    (["bad_id=127.0.0.1:1"], "is not allowed"),
])
def test_coordinator_refuses_bad_party_ids_at_once(tiny, tmp_path, capsys, parties, fragment):
    assert _split(tiny, tmp_path / "b") == 0
    capsys.readouterr()
    start = time.monotonic()
    assert _coordinator(tmp_path / "b" / "public.npz", *parties) == ExitCode.INPUT
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert fragment in err and "--party" in err


def test_coordinator_warns_about_a_public_file_without_roster(tiny, tmp_path, capsys, caplog):
    lp = read_mps(tiny)
    public, _ = split_columns(lp, [3], ids=["solo"])
    save_public(PublicRows(public.row_lower, public.row_upper, public.sense, public.offset), tmp_path / "public.npz")
    capsys.readouterr()
    # nothing listens: it gets as far as the --wait, after the warning
    with caplog.at_level(logging.WARNING, logger="securelp.coordinator.commands.coordinate"):
        code = _coordinator(tmp_path / "public.npz", "solo=127.0.0.1:1", wait="0.5")
    assert code == ExitCode.TRANSPORT
    err = capsys.readouterr().err
    assert "no party roster (written by an older securelp split)" in caplog.text
    assert "was not ready within 0.5 s (--wait)" in err and "raise --wait" in err


def test_a_mask_over_the_partys_memory_limit_is_a_resource_error(tmp_path) -> None:
    """A party refusing a k whose masked block would pass its 8 GiB limit reports a resource limit
    (exit 12), not a protocol fault (exit 5)."""
    from securelp.party import session as party_session
    from securelp.party.policy import PartyPolicy
    from securelp.protos import securelp_pb2 as pb
    from securelp.solvers.errors import ResourceError

    assert ResourceError.exit_code == ExitCode.RESOURCE
    mps = tmp_path / "tiny.mps"
    mps.write_text(TINY_MPS)
    lp = read_mps(mps)
    _, blocks = split_columns(lp, [lp.n_cols])
    sess = party_session.PartySession(blocks[0], policy=PartyPolicy(frozenset({"rows"})))
    sess.hello(pb.HelloRequest(session_id="s", protocol_version=party_session.PROTOCOL_VERSION, n_rows=lp.n_rows))
    k = party_session.MAX_MASK_DOUBLES // max(lp.n_rows, lp.n_cols) + 1
    with pytest.raises(ResourceError, match="would need more than 8 GiB"):
        sess.mask(pb.MaskRequest(session_id="s", k=k, bounds_mode=pb.BOUNDS_MODE_ROWS))


@pytest.mark.parametrize("field, corrupt, fragment", [
    ("indices", lambda a: np.where(np.arange(a.size) == 0, -1, a), "indices must be >= 0"),
    ("indices", lambda a: np.where(np.arange(a.size) == a.size - 1, 10**6, a), "indices must be <"),
    ("indptr", lambda a: a[::-1].copy(), "index pointer"),
    ("indices", lambda a: a.astype(float) + 0.5, "not integers"),
])
def test_a_block_file_with_bad_indices_is_refused_on_load(tiny, tmp_path, field, corrupt, fragment):
    # accepted, such a block would crash compiled code later or mask the wrong data
    assert _split(tiny, tmp_path / "b") == 0
    arrays = dict(np.load(tmp_path / "b" / "party1.npz"))
    arrays[field] = corrupt(arrays[field])
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=fragment):
        load_block(tmp_path / "bad.npz")
    assert load_block(tmp_path / "b" / "party1.npz").n_cols > 0  # control: the original loads
