"""Secure aggregation of the dense PPLP products: pairwise masks in Z_2^64 that cancel in the sum.

In Mangasarian's PPLP (Optim. Lett. 2011) the coordinator needs only the sums
AB' = sum_j A_d,j B_d,j' and Bc = sum_j B_d,j c_d,j of the parties' dense products, never one
party's own product (from which it estimates the row Gram A_d,j A_d,j' of that party). With
secure aggregation in the style of Bonawitz et al. (*Practical Secure Aggregation for
Privacy-Preserving Machine Learning*, CCS 2017, without its dropout recovery), party j sends

    S_j = E_j + sum_{q != j} s(j, q) R_jq   (mod 2^64),   s(j, q) = +1 if j < q else -1,

where E_j is its product in fixed point (below) and R_jq = R_qj is a pseudorandom matrix that
only j and q can compute: the ChaCha20 keystream (RFC 8439) under the key
HKDF-SHA256(X25519(sk_j, pk_q), info = session id, both party ids) (RFC 7748, RFC 5869). The
masks cancel in sum_j S_j = sum_j E_j (mod 2^64) exactly. Given the sum, the shares are
uniformly distributed over the vectors with that sum (the mask differences e_j - e_q span the
sum-zero subspace of Z_2^64^p and every R_jq is uniform), so any p - 1 shares are uniform and
independent of the products -- as long as ChaCha20 is a PRF and the coordinator relays every
party's true public key (semi-honest coordinator; see key binding below).

Fixed point. The products are real; the masks cancel exactly only in a ring. An entry v is
encoded as round(v 2^f) in Z_2^64 (two's complement). No sum may wrap: each party reports
coarse magnitude exponents e_j with |v| <= 2^e_j for every entry of its product
(:func:`magnitude_exponent`: Z_MAX times the largest row 1-norm of A_d,j, or the 1-norm of
c_d,j, since every mask entry is at most Z_MAX in magnitude), and the session uses
f = 61 - ceil(log2(sum_j 2^e_j)) (:func:`fraction_bits`), so every partial sum stays below
2^62 and every decoded entry is within p 2^-(f+1) of the float sum. The exponents are a
disclosure (a power-of-two bound on the scale of each party's dense rows and costs); the
leakage statement says so.

Key binding. A coordinator that replaces q's public key by its own learns R_jq and unmasks
S_j: the scheme above assumes it relays keys faithfully. When a party has a TLS identity from
the session CA (``securelp certs``), it signs its public key together with the session id and
its party id with its certificate's key (ECDSA-SHA256), and every party checks each peer's
certificate (issued by the session CA, naming that peer) and signature before it uses the key;
a coordinator then cannot substitute keys without a party's private key.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from securelp.solvers.errors import ProtocolError

#: the largest magnitude ``SecureRandom.standard_normal`` returns: a Box-Muller radius
#: sqrt(-2 ln(1 - u)) with u < 1 on a 2^-53 grid is at most sqrt(2 * 53 * ln 2) = 8.5716...
Z_MAX = 8.5717
#: fixed-point headroom: f is chosen so that the magnitude bound of the sum is at most 2^61, which
#: leaves room for the rounding of every party (p/2) below 2^63
SUM_BITS = 61
#: the magnitude exponent reported for a part that is exactly zero
ZERO_MAGNITUDE = -2000
#: label of the key derivation and the key binding (versions the scheme)
KDF_LABEL = b"securelp secure aggregation v1"
BINDING_LABEL = b"securelp aggregation key binding v1"
PUBLIC_KEY_BYTES = 32
#: keystream bytes per ``update_into`` call
_KEYSTREAM_CHUNK = 1 << 22


def _framed(*parts: bytes) -> bytes:
    """Length-prefixed concatenation (unambiguous whatever the parts contain)."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def magnitude_exponent(bound: float) -> int:
    """The smallest integer e with ``bound <= 2^e`` (:data:`ZERO_MAGNITUDE` for 0)."""
    if not math.isfinite(bound) or bound < 0:
        raise ValueError(f"magnitude bound must be finite and non-negative, got {bound}")
    if bound == 0:
        return ZERO_MAGNITUDE
    mantissa, exponent = math.frexp(bound)  # bound = mantissa 2^exponent, mantissa in [0.5, 1)
    return exponent - 1 if mantissa == 0.5 else exponent


def product_magnitudes(A_d: sp.spmatrix | np.ndarray, c_d: np.ndarray) -> tuple[int, int]:
    """Exponents (e_a, e_c) bounding every entry of A_d B' and of B c_d for ANY mask B whose entries
    are at most :data:`Z_MAX` in magnitude: |(A_d B')_ik| <= Z_MAX ||A_d,i||_1."""
    if A_d.shape[1] == 0:
        return ZERO_MAGNITUDE, ZERO_MAGNITUDE
    row_l1 = np.asarray(abs(A_d).sum(axis=1)).ravel()
    e_a = magnitude_exponent(Z_MAX * float(row_l1.max()) if row_l1.size else 0.0)
    e_c = magnitude_exponent(Z_MAX * float(np.abs(c_d).sum()))
    return e_a, e_c


def fraction_bits(exponents: Sequence[int]) -> int:
    """The fixed-point precision f of a sum whose terms are bounded by ``2^e`` for e in ``exponents``:
    ``SUM_BITS - ceil(log2(sum 2^e))`` (0 when every term is zero)."""
    live = [int(e) for e in exponents if int(e) != ZERO_MAGNITUDE]
    if not live:
        return 0
    top = max(live)
    total = sum(2.0 ** (e - top) for e in live)  # in [1, p]
    return SUM_BITS - (top + magnitude_exponent(total))


def encode(values: np.ndarray, f: int, exponent: int, *, what: str) -> np.ndarray:
    """``round(values 2^f)`` as elements of Z_2^64 (uint64, two's complement).

    Raises ProtocolError when an entry exceeds the reported bound ``2^exponent`` (the party would
    break the promise the session's f rests on) or the encoding would not fit in 62 bits.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size and not np.all(np.isfinite(values)):
        raise ProtocolError(f"{what}: NaN or Inf in a product")
    peak = float(np.abs(values).max()) if values.size else 0.0
    if peak > 0 and (exponent == ZERO_MAGNITUDE or peak > math.ldexp(1.0, exponent)):
        raise ProtocolError(f"{what}: a product entry exceeds the magnitude bound reported with the hello")
    if peak > 0 and exponent + f > SUM_BITS:
        raise ProtocolError(f"{what}: {f} fraction bits would overflow entries bounded by 2^{exponent}")
    scaled = np.ldexp(values, f)  # exact: a power-of-two scaling
    np.rint(scaled, out=scaled)
    return scaled.astype(np.int64).view(np.uint64)


def decode(total: np.ndarray, f: int) -> np.ndarray:
    """The real sum from the sum of the shares in Z_2^64 (uint64, read as two's complement)."""
    return np.ldexp(np.asarray(total, dtype=np.uint64).view(np.int64).astype(np.float64), -int(f))


def sum_shares(shares: Sequence[np.ndarray]) -> np.ndarray:
    """The sum of uint64 shares in Z_2^64 (wrapping addition)."""
    total = np.zeros_like(shares[0], dtype=np.uint64)
    for s in shares:
        np.add(total, s, out=total)  # uint64 addition wraps: arithmetic mod 2^64
    return total


def encoding_error_bound(n_parties: int, f: int) -> float:
    """Largest difference between the decoded sum and the sum of the float products, per entry:
    every party rounds to the nearest multiple of 2^-f."""
    return float(n_parties) * math.ldexp(0.5, -int(f))


@dataclass(frozen=True)
class SigningIdentity:
    """A party's TLS identity, used to bind its aggregation key: its key, its certificate and the
    session CA (all PEM)."""

    private_key: bytes
    certificate: bytes
    ca_certificate: bytes


def key_binding_message(session_id: str, party_id: str, public_key: bytes) -> bytes:
    """The bytes a party signs to bind ``public_key`` to itself in this session."""
    return _framed(BINDING_LABEL, session_id.encode(), party_id.encode(), public_key)


def sign_key(identity: SigningIdentity, session_id: str, party_id: str, public_key: bytes) -> bytes:
    """ECDSA-SHA256 signature of :func:`key_binding_message` with the party's TLS key."""
    key = serialization.load_pem_private_key(identity.private_key, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ProtocolError(f"party {party_id}: its TLS key is not an EC key; cannot bind its aggregation key")
    return key.sign(key_binding_message(session_id, party_id, public_key), ec.ECDSA(hashes.SHA256()))


def verify_binding(ca_pem: bytes, session_id: str, peer_id: str, public_key: bytes, certificate: bytes,
                   signature: bytes, *, who: str) -> None:
    """Check that ``certificate`` was issued by the session CA to ``peer_id`` (SAN DNS name), is
    valid now, and signed ``public_key`` for this session. Raises ProtocolError naming both."""
    if not certificate or not signature:
        raise ProtocolError(f"{who}: the aggregation key of party {peer_id} carries no certificate binding; "
                            "a coordinator could have substituted it")
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(certificate)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise ProtocolError(f"{who}: the certificate relayed for party {peer_id} is not one of the session CA") from None
    now = _dt.datetime.now(_dt.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise ProtocolError(f"{who}: the certificate relayed for party {peer_id} is not valid now")
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if peer_id not in names:
        raise ProtocolError(f"{who}: the certificate relayed for party {peer_id} names {sorted(names) or 'nobody'}")
    pub = cert.public_key()
    if not isinstance(pub, ec.EllipticCurvePublicKey):
        raise ProtocolError(f"{who}: the certificate of party {peer_id} has no EC key")
    try:
        pub.verify(signature, key_binding_message(session_id, peer_id, public_key), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ProtocolError(f"{who}: the aggregation key relayed for party {peer_id} is not the one it signed "
                            "(substituted on the way?)") from None


class AggregationKeyPair:
    """One party's X25519 key pair for one session, and the pairwise masks it derives."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != 32:
            raise ValueError("an X25519 private key is 32 bytes")
        self._private = X25519PrivateKey.from_private_bytes(secret)
        self.public_key = self._private.public_key().public_bytes(serialization.Encoding.Raw,
                                                                 serialization.PublicFormat.Raw)

    def pair_key(self, peer_public: bytes, session_id: str, own_id: str, peer_id: str) -> bytes:
        """The 32-byte ChaCha20 key this party shares with ``peer_id`` (the same on both sides)."""
        if len(peer_public) != PUBLIC_KEY_BYTES:
            raise ProtocolError(f"party {own_id}: the aggregation key of party {peer_id} is {len(peer_public)} bytes, "
                                f"not {PUBLIC_KEY_BYTES}")
        try:
            shared = self._private.exchange(X25519PublicKey.from_public_bytes(peer_public))
        except ValueError:  # a low-order point: the shared secret would be all zeros
            raise ProtocolError(f"party {own_id}: the aggregation key of party {peer_id} is invalid") from None
        lo, hi = sorted((own_id, peer_id))
        info = _framed(KDF_LABEL, session_id.encode(), lo.encode(), hi.encode())
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def pair_mask(key: bytes, count: int) -> np.ndarray:
    """``count`` uniform elements of Z_2^64: the ChaCha20 keystream under ``key`` (nonce 0)."""
    out = np.empty(8 * count, dtype=np.uint8)
    enc = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()
    zeros = np.zeros(min(out.size, _KEYSTREAM_CHUNK), dtype=np.uint8)
    view = memoryview(out)
    for start in range(0, out.size, zeros.size or 1):
        take = min(zeros.size, out.size - start)
        enc.update_into(zeros[:take], view[start:start + take])  # keystream XOR zeros
    return out.view("<u8").astype(np.uint64, copy=False)


def mask_shares(encoded: np.ndarray, keys: Sequence[tuple[bytes, int]]) -> np.ndarray:
    """``encoded`` (flat uint64) plus ``sign * pair_mask(key)`` for every (key, sign) pair, in place."""
    for key, sign in keys:
        r = pair_mask(key, encoded.size)
        if sign > 0:
            np.add(encoded, r, out=encoded)
        else:
            np.subtract(encoded, r, out=encoded)
    return encoded
