"""Session certificates: layout, permissions, validation, chain of trust, identities."""

from __future__ import annotations

import os
import stat

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from securelp.coordinator.certs import load_identity, validate_party_ids, write_session_certs
from securelp.coordinator.cli import main
from securelp.solvers.errors import ExitCode, InputError


def _cert(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def _signed_by(cert, ca) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def test_layout_permissions_and_identities(tmp_path):
    out = tmp_path / "certs"
    written = write_session_certs(out, ["owner1", "owner2"])
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["ca.pem", "coordinator.pem", "coordinator.key", "owner1.pem", "owner1.key",
                            "owner2.pem", "owner2.key"])  # the CA key is never written
    for key in out.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    ca = _cert(written.ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in ("coordinator", "owner1", "owner2"):
        cert = _cert(out / f"{name}.pem")
        assert _signed_by(cert, ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == [name]
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        # both usages: each side is the TLS server in one connection direction and the client in the other
        assert ExtendedKeyUsageOID.SERVER_AUTH in eku and ExtendedKeyUsageOID.CLIENT_AUTH in eku
        assert isinstance(cert.public_key().curve, ec.SECP256R1)
    ident = load_identity(out, "owner2")
    assert b"PRIVATE KEY" in ident.private_key and ident.ca_certificate == written.ca.read_bytes()


def test_a_certificate_without_a_usage_is_refused_by_name(tmp_path):
    from securelp.coordinator.certs import _certificate, _new_key, _pem_cert, _pem_key, require_usage
    from securelp.solvers.errors import ConfigError

    out = tmp_path / "certs"
    write_session_certs(out, ["owner1"])
    require_usage(load_identity(out, "coordinator"), "server", "listening")  # both usages: accepted
    ca_key = _new_key()  # an older release's coordinator certificate: clientAuth only
    key = _new_key()
    old = _certificate("coordinator", key, "CA", ca_key, ca=False, days=1, server=False, client=True)
    (out / "coordinator.pem").write_bytes(_pem_cert(old))
    (out / "coordinator.key").write_bytes(_pem_key(key))
    with pytest.raises(ConfigError, match="'coordinator' is not valid for TLS server authentication, which "
                                          "listening needs"):
        require_usage(load_identity(out, "coordinator"), "server", "listening")


def test_two_sessions_do_not_trust_each_other(tmp_path):
    a = write_session_certs(tmp_path / "a", ["p1"])
    b = write_session_certs(tmp_path / "b", ["p1"])
    assert not _signed_by(_cert(b.parties["p1"][0]), _cert(a.ca))  # negative control of the check above
    assert _signed_by(_cert(a.parties["p1"][0]), _cert(a.ca))


@pytest.mark.parametrize("ids, fragment", [
    (["a", "a"], "duplicate"),
    (["Owner", "owner"], "duplicate"),
    (["coordinator"], "reserved"),
    (["../x"], "not allowed"),
    (["a b"], "not allowed"),
    (["-a"], "not allowed"),
    ([""], "no party ids"),
])
def test_bad_party_ids_are_refused(ids, fragment):
    with pytest.raises(InputError, match=fragment):
        validate_party_ids(ids)


def test_refuses_non_empty_dir_unless_forced(tmp_path):
    out = tmp_path / "c"
    write_session_certs(out, ["p1"])
    before = (out / "ca.pem").read_bytes()
    with pytest.raises(InputError, match="not empty"):
        write_session_certs(out, ["p1"])
    assert (out / "ca.pem").read_bytes() == before
    write_session_certs(out, ["p1"], force=True)
    assert (out / "ca.pem").read_bytes() != before


def test_missing_identity_names_the_file(tmp_path):
    write_session_certs(tmp_path / "c", ["p1"])
    with pytest.raises(InputError, match="p2.key"):
        load_identity(tmp_path / "c", "p2")


def test_certs_command(tmp_path, capsys):
    assert main(["certs", "--out", str(tmp_path / "c"), "--parties", "x1,x2,x3"]) == 0
    assert (tmp_path / "c" / "x3.key").is_file()
    assert "3 party certificates" in capsys.readouterr().out
    assert main(["certs", "--out", str(tmp_path / "c"), "--parties", "x1"]) == ExitCode.INPUT
    assert main(["certs", "--out", str(tmp_path / "d"), "--parties", "x1,x1"]) == ExitCode.INPUT
    assert "duplicate party id 'x1'" in capsys.readouterr().err


@pytest.mark.parametrize("umask, cert_mode", [(0o022, 0o644), (0o077, 0o600), (0o027, 0o640)])
def test_certificates_follow_the_umask_keys_stay_private(tmp_path, umask, cert_mode):
    old = os.umask(umask)
    try:
        write_session_certs(tmp_path / "certs", ["owner1"])
    finally:
        os.umask(old)
    for path in (tmp_path / "certs").iterdir():
        expected = 0o600 if path.suffix == ".key" else cert_mode
        assert stat.S_IMODE(path.stat().st_mode) == expected, path.name
