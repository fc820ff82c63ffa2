"""Bad input to the PPLP commands gives one line and a documented exit code, not a traceback:
MPS files HiGHS would read silently otherwise, --k and memory, certificates, certs --days/--out,
bench options."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from securelp.coordinator import sizing
from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError, ResourceError
from securelp.solvers.lp import read_mps
from tests.lp_fixtures import TINY_MPS

REPO = Path(__file__).resolve().parents[2]
AFIRO = REPO / "deploy" / "afiro.mps"

NO_ROWS = "NAME E\nROWS\n N COST\nCOLUMNS\n    X1 COST 1\n    X2 COST 1\n    X3 COST 1\nRHS\nENDATA\n"
_HEAD = "NAME T\nROWS\n N COST\n G R1\n L R2\nCOLUMNS\n"


def _one_error_line(capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


# -- MPS -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, fragments", [
    ("    X1 COST 1 R1 1\n    X2 COST 2 R1 1\nRHS\n    RHS R1 1\nENDATA\n", ()),  # control: fine
    ("    X1 COST 1 R1 1\n    X2 COST 2 R1 1\n    X1 R2 1\nRHS\n    RHS R1 1\nENDATA\n",
     ("line 9", "column 'X1' appears again", "line 7")),
    ("    X1 COST 1 R1 1\n    X2 COST 2 R1 1\nRHS\n    RHS R1 1\nBOUNDS\n UP BND X9 4\nENDATA\n",
     ("line 12", "column 'X9'", "not in COLUMNS")),
    ("    X1 COST 1 R7 1\n    X2 COST 2 R1 1\nRHS\n    RHS R1 1\nENDATA\n", ("line 7", "row 'R7'")),
    ("    X1 COST 1 R1 1e300\n    X2 COST 2 R1 1\nRHS\n    RHS R1 1\nENDATA\n", ("line 7", "1e300", "too large")),
    ("    X1 COST 1 R1 1\n    X2 COST 2 R1 1\nRHS\n    RHS R1 -5\nBOUNDS\n UP BND X1 -1\nENDATA\n",
     ("column 'X1'", "lower bound 0 above upper bound -1")),
])
def test_mps_read_silently_by_highs_is_refused_with_the_name(tmp_path, body, fragments):
    f = tmp_path / "t.mps"
    f.write_text(_HEAD + body)
    if not fragments:
        assert read_mps(f).n_cols == 2
        return
    with pytest.raises(InputError) as info:
        read_mps(f)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_a_row_defined_twice_is_refused(tmp_path):
    f = tmp_path / "t.mps"
    f.write_text("NAME T\nROWS\n N COST\n G R1\n L R1\nCOLUMNS\n    X1 COST 1 R1 1\nRHS\n    RHS R1 1\nENDATA\n")
    with pytest.raises(InputError, match=r"line 5: row 'R1' is defined twice \(first on line 4\)"):
        read_mps(f)


@pytest.mark.parametrize("extra", [[], ["--bounds", "rows"]])
def test_an_lp_without_rows_is_refused_when_read(tmp_path, capsys, extra):
    f = tmp_path / "e.mps"
    f.write_text(NO_ROWS)
    assert main(["solve", str(f), *extra]) == ExitCode.INPUT
    _one_error_line(capsys, "defines no constraint rows")
    assert main(["split", str(f), "--parties", "3", "--out", str(tmp_path / "out")]) == ExitCode.INPUT
    _one_error_line(capsys, "defines no constraint rows")


def test_a_file_name_that_is_not_utf8_is_refused(tmp_path, capsys):
    name = os.path.join(os.fsencode(tmp_path), b"bad\xff\xfe.mps")
    with open(name, "wb") as handle:
        handle.write(TINY_MPS.encode())
    assert main(["solve", os.fsdecode(name)]) == ExitCode.INPUT
    _one_error_line(capsys, "not valid UTF-8")


def test_insecure_without_grpc_is_refused(capsys):
    assert main(["solve", str(AFIRO), "--insecure", "--transport", "inprocess"]) == ExitCode.CONFIG
    _one_error_line(capsys, "--insecure applies to --transport grpc only")


# -- k and memory ------------------------------------------------------------------------------------
def test_a_k_beyond_the_protocol_is_refused(capsys):
    assert main(["solve", str(AFIRO), "--k", "99999999999999999999999"]) == ExitCode.INPUT
    _one_error_line(capsys, "--k 99999999999999999999999", "protocol")


def test_the_memory_guard_covers_the_whole_run_and_exits_12(monkeypatch, capsys):
    monkeypatch.setattr(sizing, "available_memory", lambda: 16 << 30)
    # 27 x 3e6 per party passed the party's 8 GiB guard; bound rows, the sum and HiGHS were killed by the OOM killer
    assert main(["solve", str(AFIRO), "--bounds", "rows", "--k", "3000000"]) == ExitCode.RESOURCE
    _one_error_line(capsys, "k 3000000", "GiB", "16.0 GiB available")


def test_a_default_k_too_large_exits_12_not_5(tmp_path, monkeypatch, capsys):
    n = 1000  # diagonal, all columns free: k = n + 10
    lines = ["NAME DIAG", "ROWS", " N COST", *[f" E R{i}" for i in range(n)], "COLUMNS",
             *[f"    X{i} COST 1 R{i} 1" for i in range(n)], "RHS", *[f"    RHS R{i} 1" for i in range(n)],
             "BOUNDS", *[f" FR BND X{i}" for i in range(n)], "ENDATA"]
    f = tmp_path / "diag.mps"
    f.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(sizing, "available_memory", lambda: 400 << 20)
    assert main(["solve", str(f)]) == ExitCode.RESOURCE
    _one_error_line(capsys, "k = 1010", "1000 rows, 1000 masked columns")


def _afiro_session(k: int):  # type: ignore[no-untyped-def]
    from securelp.coordinator.protocol import SessionConfig
    from securelp.solvers.lp.partition import split_columns

    lp = read_mps(AFIRO)
    public, blocks = split_columns(lp, [11, 11, 10])
    return public, blocks, SessionConfig(k=k, bounds_mode="rows")


def test_the_coordinator_checks_its_own_memory_before_any_mask(monkeypatch):
    """``securelp coordinator`` has no blocks to size a session by; from the Hello replies it
    refuses a k it could not hold (exit 12) before a party draws a mask, and closes every party."""
    from securelp.coordinator.protocol import run_secure_lp
    from securelp.coordinator.simulation import owners_consent, simulated_links
    from securelp.solvers.errors import ResourceError

    public, blocks, config = _afiro_session(2000)
    need = sizing.coordinator_memory(27, [11, 11, 10], [11, 11, 10], 2000)  # rows mode: every column bounded
    monkeypatch.setattr(sizing, "available_memory", lambda: int(need / sizing.MEMORY_SHARE) - 1)
    with simulated_links(blocks, "inprocess", policy=owners_consent(config)) as links:
        with pytest.raises(ResourceError, match=r"^--k 2000 with 27 rows, 32 masked columns, 32 bound rows and 3 "
                                                r"parties: the coordinator would need about 281\.1 MiB"):
            run_secure_lp(public, links, config)
        sessions = [link._session for link in links]
        assert all(s._state == "closed" and s._mask is None for s in sessions)  # closed, no mask drawn
    monkeypatch.setattr(sizing, "available_memory", lambda: int(need / sizing.MEMORY_SHARE) + 1)  # just enough
    with simulated_links(blocks, "inprocess", policy=owners_consent(config)) as links:
        assert run_secure_lp(public, links, config).status.value == "optimal"


@pytest.mark.parametrize("k, error, match", [
    (sizing.MAX_K + 1, InputError, "more than the protocol carries"),
    (sizing.MAX_K, ResourceError, "party party1 would need more than 8 GiB for its mask .* more than a party accepts"),
    (2**24, ResourceError, "party party1.s masked block .* would exceed the protocol's 2 GiB message"),
])
def test_the_coordinator_refuses_a_k_no_party_could_send(k, error, match):
    from securelp.coordinator.protocol import run_secure_lp
    from securelp.coordinator.simulation import owners_consent, simulated_links

    public, blocks, config = _afiro_session(k)
    with simulated_links(blocks, "inprocess", policy=owners_consent(config)) as links:
        with pytest.raises(error, match=match):
            run_secure_lp(public, links, config)
        assert all(link._session._mask is None for link in links)


def test_a_party_checks_its_own_memory_before_it_masks(monkeypatch):
    from securelp.party import session as party_session
    from securelp.party.policy import PartyPolicy
    from securelp.protos import securelp_pb2 as pb

    _, blocks, _ = _afiro_session(5000)
    need = party_session.mask_memory(27, 11, 11, 5000)
    for available, refused in ((int(need / party_session.MASK_MEMORY_SHARE) - 1, True),
                               (int(need / party_session.MASK_MEMORY_SHARE) + 1, False)):
        monkeypatch.setattr(party_session, "available_memory", lambda a=available: a)
        sess = party_session.PartySession(blocks[0], policy=PartyPolicy(frozenset({"rows"})))
        sess.hello(pb.HelloRequest(session_id="s", protocol_version=party_session.PROTOCOL_VERSION, n_rows=27))
        request = pb.MaskRequest(session_id="s", k=5000, bounds_mode=pb.BOUNDS_MODE_ROWS)
        if refused:
            with pytest.raises(ResourceError, match=r"^party party1: its masked block with k = 5000 would need about .* (GiB|MiB|KiB|bytes) available$"):
                sess.mask(request)
            assert sess._mask is None
        else:
            sess.mask(request)
            assert sess._mask.shape == (5000, 11)


def _certs(tmp_path: Path, *ids: str) -> Path:
    from securelp.coordinator.certs import write_session_certs

    return write_session_certs(tmp_path / "certs", list(ids)).directory


def test_a_key_that_does_not_match_its_certificate_is_named(tmp_path):
    from securelp.coordinator.certs import load_identity

    d = _certs(tmp_path, "p1", "p2")
    (d / "p1.key").write_bytes((d / "p2.key").read_bytes())
    with pytest.raises(InputError, match=r"the key .*p1\.key does not match the certificate .*p1\.pem"):
        load_identity(d, "p1")


def test_a_corrupt_key_is_named_also_the_coordinators(tmp_path):
    from securelp.coordinator.certs import load_identity
    from securelp.coordinator.grpc_link import ChannelTls

    d = _certs(tmp_path, "p1")
    (d / "p1.key").write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    with pytest.raises(InputError, match=r"p1\.key is not a PEM private key"):
        load_identity(d, "p1")
    (d / "coordinator.key").write_bytes((d / "coordinator.key").read_bytes()[:90])
    with pytest.raises(InputError, match=r"coordinator\.key is not a PEM private key"):
        ChannelTls.from_dir(d)


def test_a_party_with_a_mismatched_key_exits_3_not_6(tmp_path, capsys):
    from securelp.coordinator.certs import load_identity  # noqa: F401 - the party command loads it lazily
    from securelp.solvers.lp.partition import save_block, split_columns

    d = _certs(tmp_path, "party1", "party2")
    (d / "party1.key").write_bytes((d / "party2.key").read_bytes())
    _, blocks = split_columns(read_mps(AFIRO), [32])
    save_block(blocks[0], tmp_path / "party1.npz")
    assert main(["party", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "party1.npz"), "--id", "party1",
                 "--certs", str(d)]) == ExitCode.INPUT
    _one_error_line(capsys, "does not match the certificate")


def test_an_expired_certificate_is_refused_with_its_date(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from securelp.coordinator.certs import _name, _pem_key, load_identity

    d = _certs(tmp_path, "p1")
    key = serialization.load_pem_private_key((d / "p1.key").read_bytes(), password=None)
    past = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name("p1")).issuer_name(_name("p1"))
            .public_key(key.public_key()).serial_number(1).not_valid_before(past)
            .not_valid_after(past + dt.timedelta(days=2)).sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256()))
    (d / "p1.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    assert _pem_key(key)  # the key still matches: only the date is wrong
    with pytest.raises(InputError, match=r"p1\.pem expired on 2020-01-03"):
        load_identity(d, "p1")


def test_certs_days_is_bounded_before_anything_is_created(tmp_path, capsys):
    from securelp.coordinator.certs import write_session_certs

    out = tmp_path / "D"
    with pytest.raises(SystemExit) as info:
        main(["certs", "--out", str(out), "--parties", "a", "--days", "3000000"])
    assert info.value.code == ExitCode.USAGE
    assert "1 to 36500 days" in capsys.readouterr().err
    with pytest.raises(InputError, match="1 to 36500 days"):
        write_session_certs(out, ["a"], days=3000000)
    assert not out.exists()


def test_certs_into_an_uncreatable_directory_is_one_line(capsys):
    assert main(["certs", "--out", "/proc/securelp-z", "--ids", "a"]) == ExitCode.INPUT
    _one_error_line(capsys, "cannot create /proc/securelp-z")


# -- benchmarks ------------------------------------------------------------------------------------------
def test_bench_checks_its_options_before_running(tmp_path, capsys):
    from benchmarks import bench_pplp

    with pytest.raises(SystemExit) as info:
        bench_pplp.main(["--repeat", "0"])
    assert info.value.code == ExitCode.USAGE
    assert "expected a positive integer" in capsys.readouterr().err
    assert bench_pplp.main(["--out", str(tmp_path / "nonexist" / "x.jsonl")]) == ExitCode.INPUT
    _one_error_line(capsys, "directory", "does not exist")


def test_a_file_that_is_not_mps_is_refused_at_its_first_line(tmp_path, capsys):
    # refused at its first line, before HiGHS reads a large file of numbers to its end
    zeros = tmp_path / "zeros.mps"
    zeros.write_text("0\n" * 2_000_000)
    assert main(["solve", str(zeros)]) == ExitCode.INPUT
    _one_error_line(capsys, "line 1", "'0' is not an MPS section name")
    tiny = tmp_path / "tiny.mps"  # control: a real MPS file passes the section check
    tiny.write_text(TINY_MPS)
    assert read_mps(tiny).n_cols > 0
