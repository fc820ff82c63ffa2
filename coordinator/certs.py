"""Session certificates for mutual TLS: one CA, one coordinator identity, one per party.

Every gRPC connection of a session is authenticated both ways (RFC 8446 TLS 1.3 with
client certificates), in either connection direction (docs/protocol.md, "Directions"):

- dial-in (the coordinator dials the parties): the coordinator checks that a party's
  certificate is signed by the session CA *and* names the party it meant to dial (SAN
  ``DNS:<party_id>``, enforced with ``grpc.ssl_target_name_override``); a party checks that
  the client certificate is signed by the session CA and that its identity is
  ``coordinator`` (so another party's valid certificate cannot drive a session);
- dial-out (the parties dial a listening coordinator): each party checks that the server
  certificate is the session CA's ``coordinator``; the coordinator checks that a client
  certificate is signed by the session CA and names the party id the client claims.

So every certificate carries both extended key usages, serverAuth and clientAuth (a TLS
stack refuses a server certificate without serverAuth, and a client one without clientAuth).

Keys are ECDSA on NIST P-256 (FIPS 186-4), certificates X.509 v3 signed with
ECDSA-SHA256. The CA's private key is used once, in memory, and never written: nobody
can mint another identity for this session afterwards; a new session gets new
certificates (``securelp certs --force``).

Layout of a certificate directory (all PEM)::

    ca.pem                       the session CA certificate (public)
    coordinator.pem / .key       the coordinator's certificate and private key (0600)
    <party_id>.pem / .key        one pair per party (0600 keys)

Distribute to each host only ``ca.pem`` and its own pair.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from securelp.solvers.errors import InputError
from securelp.solvers.files import (
    current_umask,
    make_output_dir,
    refuse_directories,
    write_atomically,
    written_together,
)

log = logging.getLogger(__name__)

COORDINATOR_ID = "coordinator"
CA_FILE = "ca.pem"
#: party ids double as DNS names in certificates: letters, digits, inner hyphens
PARTY_ID_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
RESERVED_IDS = frozenset({COORDINATOR_ID, "ca"})
DEFAULT_VALID_DAYS = 30
#: longest validity ``securelp certs --days`` accepts (100 years; X.509 dates end in 9999)
MAX_VALID_DAYS = 36500


@dataclass(frozen=True)
class TlsIdentity:
    """PEM material of one participant: its key, its certificate, and the session CA."""

    name: str
    private_key: bytes
    certificate: bytes
    ca_certificate: bytes


@dataclass(frozen=True)
class CertificateSet:
    """Where ``write_session_certs`` put the files."""

    directory: Path
    ca: Path
    coordinator: tuple[Path, Path]
    parties: dict[str, tuple[Path, Path]]


def validate_party_ids(ids: Sequence[str], also_reserved: Mapping[str, str] | None = None) -> list[str]:
    """Check party ids: non-empty, DNS-label safe, not reserved, no duplicates. ``also_reserved``:
    more reserved ids (lower case) and why each is (``securelp split``'s ``public``).

    Raises
    ------
    InputError naming the offending id.
    """
    out = [i.strip() for i in ids]
    if not out or out == [""]:
        raise InputError("no party ids given (expected e.g. --ids owner1,owner2,owner3)")
    seen: set[str] = set()
    for pid in out:
        if not PARTY_ID_RE.match(pid):
            raise InputError(f"party id {pid!r} is not allowed: use 1-63 letters, digits or inner hyphens "
                             "(it becomes the DNS name in the party's certificate)")
        if pid.lower() in RESERVED_IDS:
            raise InputError(f"party id {pid!r} is reserved; choose another name")
        if also_reserved and pid.lower() in also_reserved:
            raise InputError(f"party id {pid!r} is reserved ({also_reserved[pid.lower()]}); choose another name")
        if pid.lower() in seen:
            raise InputError(f"duplicate party id {pid!r} (ids are compared case-insensitively, as DNS names)")
        seen.add(pid.lower())
    return out


def _new_key():  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str):  # type: ignore[no-untyped-def]
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "securelp session"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject_cn: str, key, issuer_cn: str, issuer_key, *, ca: bool, days: int,  # type: ignore[no-untyped-def]
                 server: bool, client: bool):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = _dt.datetime.now(_dt.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject_cn))
               .issuer_name(_name(issuer_cn))
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - _dt.timedelta(minutes=5))
               .not_valid_after(now + _dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject_cn)]), critical=False)
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_cert(cert) -> bytes:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key) -> bytes:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_session_certs(out_dir: str | os.PathLike[str], party_ids: Sequence[str], *, force: bool = False,
                        days: int = DEFAULT_VALID_DAYS) -> CertificateSet:
    """Create a session CA, a coordinator certificate and one certificate per party.

    Parameters
    ----------
    out_dir : target directory (created if missing; its parent must exist).
    party_ids : the parties' ids (validated by ``validate_party_ids``).
    force : overwrite a non-empty directory (otherwise refused).
    days : validity of every certificate.

    Returns
    -------
    CertificateSet with the paths written.
    """
    ids = validate_party_ids(party_ids)
    if not 1 <= days <= MAX_VALID_DAYS:
        raise InputError(f"--days {days}: certificate validity must be 1 to {MAX_VALID_DAYS} days")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(f"{out} is not empty; choose an empty directory or pass --force to overwrite "
                         "the certificates in it")
    names = [CA_FILE] + [f"{n}.{ext}" for n in (COORDINATOR_ID, *ids) for ext in ("pem", "key")]
    refuse_directories(out, names)
    make_output_dir(out, mode=0o700)
    cert_mode = 0o644 & ~current_umask()  # certificates are public, but the umask has the last word
    ca_key = _new_key()
    ca_cert = _certificate("securelp session CA", ca_key, "securelp session CA", ca_key, ca=True, days=days,
                           server=False, client=False)
    ca_path = out / CA_FILE

    def issue(name: str, *, server: bool, client: bool) -> tuple[Path, Path]:
        key = _new_key()
        cert = _certificate(name, key, "securelp session CA", ca_key, ca=False, days=days, server=server, client=client)
        cert_path, key_path = out / f"{name}.pem", out / f"{name}.key"
        write_atomically(key_path, _pem_key(key), mode=0o600)
        write_atomically(cert_path, _pem_cert(cert), mode=cert_mode)
        return cert_path, key_path

    # atomically, each file's mode set before any byte lands (keys are never world-readable), and
    # all of them together: a failure part-way leaves no CA without its certificates
    with written_together():
        write_atomically(ca_path, _pem_cert(ca_cert), mode=cert_mode)
        # both usages for everyone: each side is the TLS server in one of the two directions
        coordinator = issue(COORDINATOR_ID, server=True, client=True)
        parties = {pid: issue(pid, server=True, client=True) for pid in ids}
    log.info("wrote a session CA, a coordinator certificate and %d party certificates to %s", len(ids), out)
    return CertificateSet(out, ca_path, coordinator, parties)


def load_identity(certs_dir: str | os.PathLike[str], name: str) -> TlsIdentity:
    """Read ``ca.pem``, ``<name>.pem`` and ``<name>.key`` from ``certs_dir``.

    Raises
    ------
    InputError naming the missing or unreadable file.
    """
    d = Path(certs_dir)
    if not d.is_dir():
        raise InputError(f"certificate directory {d} does not exist (make one with `securelp certs`)")
    blobs: list[bytes] = []
    for fname in (f"{name}.key", f"{name}.pem", CA_FILE):
        path = d / fname
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{path} is missing: the certificate directory has no identity {name!r} "
                             "(was it made with `securelp certs --ids ...` including this id?)") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
        if b"-----BEGIN" not in data:
            raise InputError(f"{path} is not a PEM file")
        blobs.append(data)
    check_key_pair(d / f"{name}.key", blobs[0], d / f"{name}.pem", blobs[1])
    _check_certificate(d / CA_FILE, blobs[2])
    return TlsIdentity(name, blobs[0], blobs[1], blobs[2])


def key_usages(certificate_pem: bytes) -> frozenset[str]:
    """The extended key usages of a PEM certificate, as ``{"server", "client"}`` (empty: none named,
    which TLS reads as any usage)."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    cert = x509.load_pem_x509_certificate(certificate_pem)
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return frozenset({"server", "client"})
    return frozenset(name for name, oid in (("server", ExtendedKeyUsageOID.SERVER_AUTH),
                                            ("client", ExtendedKeyUsageOID.CLIENT_AUTH)) if oid in eku)


def require_usage(identity: TlsIdentity, usage: str, why: str) -> None:
    """Refuse a certificate that lacks the extended key usage ``usage`` ("server" or "client"), which
    TLS would refuse later with a handshake error blaming the peer: certificates of older ``securelp
    certs`` releases carry one usage each (the coordinator's clientAuth, the parties' serverAuth).

    Raises
    ------
    ConfigError naming the identity, the usage and what to do.
    """
    from securelp.solvers.errors import ConfigError

    if usage not in key_usages(identity.certificate):
        raise ConfigError(f"the certificate of {identity.name!r} is not valid for TLS {usage} authentication, "
                          f"which {why} needs (made by an older `securelp certs`?); make new certificates with "
                          "`securelp certs`, which issues both usages")


def _valid_until(cert) -> _dt.datetime:  # type: ignore[no-untyped-def]
    after = getattr(cert, "not_valid_after_utc", None)  # cryptography >= 42
    return after if after is not None else cert.not_valid_after.replace(tzinfo=_dt.timezone.utc)


def _valid_from(cert) -> _dt.datetime:  # type: ignore[no-untyped-def]
    before = getattr(cert, "not_valid_before_utc", None)
    return before if before is not None else cert.not_valid_before.replace(tzinfo=_dt.timezone.utc)


def _check_certificate(path: Path, pem: bytes):  # type: ignore[no-untyped-def]
    """Parse a PEM certificate and refuse an expired one (TLS would fail later, blaming the peer)."""
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise InputError(f"{path} is not a PEM certificate") from None
    now = _dt.datetime.now(_dt.timezone.utc)
    if _valid_until(cert) < now:
        raise InputError(f"the certificate {path} expired on {_valid_until(cert):%Y-%m-%d %H:%M} UTC; "
                         "make new certificates with `securelp certs`")
    if _valid_from(cert) > now:
        log.warning("the certificate %s is valid only from %s UTC (is this host's clock right?)", path,
                    f"{_valid_from(cert):%Y-%m-%d %H:%M}")
    return cert


def check_key_pair(key_path: Path, key_pem: bytes, cert_path: Path, cert_pem: bytes) -> None:
    """Refuse a private key that is not PEM, or that does not belong to the certificate: gRPC only
    said "Failed to bind" (a party) or blamed the peer's handshake (the coordinator).

    Raises
    ------
    InputError naming the file(s).
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise InputError(f"{key_path} is an encrypted private key; securelp needs it unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise InputError(f"{key_path} is not a PEM private key") from None
    cert = _check_certificate(cert_path, cert_pem)
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.DER, spki) != \
            cert.public_key().public_bytes(serialization.Encoding.DER, spki):
        raise InputError(f"the key {key_path} does not match the certificate {cert_path}")
