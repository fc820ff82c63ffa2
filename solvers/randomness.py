"""Cryptographically secure randomness for masks and noise.

``SecureRandom`` draws from a ChaCha20 keystream (RFC 8439 cipher, via the
``cryptography`` package). Without a seed the 256-bit key comes from the operating
system (``os.urandom``); with a seed the key is SHA-256 of the seed, which makes a run
reproducible -- that is the explicit, flagged *reproducible-simulation* mode, and every
report that used it says so (``reproducible`` is True).

Floating-point draws (masks) are built from 53 random bits each; integer draws use
rejection sampling, so they are exactly uniform. Samplers whose privacy claim rests on
an exact distribution (geometric noise, rows of perturbation matrices) must be built on
``randbelow``/``bits`` (exact integers), never on floating-point transforms.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

_ZERO_BLOCK = bytes(1 << 16)
_CHUNK = 1 << 22  # keystream bytes per update_into call
_NORMAL_PAIRS = 1 << 15  # Box-Muller pairs per chunk (scratch stays in cache)


class SecureRandom:
    """A ChaCha20-keystream random source.

    Parameters
    ----------
    seed:
        ``None`` (default) for fresh OS entropy; an integer or string for the flagged
        reproducible-simulation mode.
    label:
        Domain separation: two sources with the same seed and different labels are
        independent (e.g. one per party).
    """

    def __init__(self, seed: int | str | None = None, label: str = "") -> None:
        self.reproducible = seed is not None
        if seed is None:
            key = os.urandom(32)
        else:
            key = hashlib.sha256(f"securelp/seed/{seed}/{label}".encode()).digest()
        self._key = key
        self._children = 0
        nonce = bytes(16)
        self._enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()

    # -- raw material -------------------------------------------------------------
    def bytes(self, n: int) -> bytes:
        """``n`` keystream bytes."""
        if n <= 0:
            return b""
        if n > len(_ZERO_BLOCK):
            return self._keystream(n).tobytes()
        return self._enc.update(_ZERO_BLOCK[:n])

    def _keystream(self, n: int) -> np.ndarray:
        """``n`` keystream bytes as a new uint8 array (see :meth:`_keystream_into`)."""
        out = np.empty(n, dtype=np.uint8)
        self._keystream_into(out)
        return out

    def _keystream_into(self, out: np.ndarray) -> None:
        """Overwrite the uint8 array ``out`` with the next keystream bytes, in place.

        The same bytes, in the same order, as the same number of bytes from :meth:`bytes`:
        ChaCha20 is a stream cipher, so chunking does not change the stream (reproducible
        runs stay equal).
        """
        n = out.size
        zeros = np.zeros(min(n, _CHUNK), dtype=np.uint8)
        view = memoryview(out)
        done = 0
        while done < n:
            take = min(n - done, _CHUNK)
            written = self._enc.update_into(zeros[:take], view[done:done + take])
            if written != take:  # pragma: no cover - a stream cipher writes what it reads
                raise RuntimeError("ChaCha20 keystream came back short")
            done += take

    def bits(self, k: int) -> int:
        """A uniform integer in [0, 2**k)."""
        if k <= 0:
            return 0
        nbytes = (k + 7) // 8
        value = int.from_bytes(self.bytes(nbytes), "little")
        return value >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), exact (rejection sampling)."""
        if n <= 0:
            raise ValueError("randbelow needs n >= 1")
        k = (n - 1).bit_length()
        while True:
            r = self.bits(k)
            if r < n:
                return r

    def spawn(self, label: str) -> SecureRandom:
        """An independent child source (derived key), e.g. one per party or round."""
        self._children += 1
        child = SecureRandom.__new__(SecureRandom)
        child.reproducible = self.reproducible
        child._key = hashlib.sha256(self._key + f"/{label}/{self._children}".encode()).digest()
        child._children = 0
        child._enc = Cipher(algorithms.ChaCha20(child._key, bytes(16)), mode=None).encryptor()
        return child

    # -- numpy arrays -------------------------------------------------------------
    def _uint64(self, count: int) -> np.ndarray:
        return self._keystream(8 * count).view("<u8").astype(np.uint64, copy=False)

    def random(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform floats in [0, 1) with 53 random bits each."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        u = (self._uint64(count) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        return u.reshape(shape)

    def uniform(self, low: float, high: float, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform floats in [low, high)."""
        return low + (high - low) * self.random(size)

    def standard_normal(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Standard normal floats (Box-Muller on keystream uniforms).

        Pairs are made in chunks of ``_NORMAL_PAIRS``: a chunk of c pairs reads 2c keystream
        words, the first c giving radii ``sqrt(-2 ln(1 - u))`` and the last c angles ``2 pi u``;
        the cosines fill ``z[:half]`` and the sines ``z[half:]`` at the chunk's offset. Scratch
        buffers are reused across chunks, so a large mask touches fresh memory only once
        (its output): in a VM, first-touch page faults of whole-array temporaries cost more
        than the arithmetic (measured: 4.5e6 normals 1.06 s whole-array vs. chunked below).
        """
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        half = (count + 1) // 2
        z = np.empty(2 * half)
        chunk = min(half, _NORMAL_PAIRS)
        raw = np.empty(16 * chunk, dtype=np.uint8)
        words = raw.view("<u8")
        u = np.empty(2 * chunk)
        angle = np.empty(chunk)
        for lo in range(0, half, chunk):
            c = min(chunk, half - lo)
            self._keystream_into(raw[: 16 * c])
            w = words[: 2 * c]
            np.right_shift(w, np.uint64(11), out=w)
            uu = u[: 2 * c]
            uu[:] = w  # exact: < 2**53
            uu *= 1.0 / (1 << 53)
            r = uu[:c]
            np.subtract(1.0, r, out=r)  # (0, 1]
            np.log(r, out=r)
            r *= -2.0
            np.sqrt(r, out=r)
            th = np.multiply(uu[c:], 2 * np.pi, out=angle[:c])
            np.multiply(np.cos(th), r, out=z[lo: lo + c])
            np.sin(th, out=th)
            np.multiply(th, r, out=z[half + lo: half + lo + c])
        return z[:count].reshape(shape)

    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> np.ndarray:
        """Exactly uniform integers in [low, high) (vectorised rejection sampling)."""
        if high <= low:
            raise ValueError("integers needs high > low")
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        span = high - low
        k = max(1, (span - 1).bit_length())
        mask = np.uint64((1 << k) - 1) if k < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            need = count - filled
            draw = self._uint64(max(16, int(need * 1.3) + 8)) & mask
            ok = draw[draw < np.uint64(span)][:need]
            out[filled : filled + ok.size] = ok.astype(np.int64) + low
            filled += ok.size
        return out.reshape(shape)

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of range(n) (Fisher-Yates on exact integers)."""
        perm = np.arange(n)
        for i in range(n - 1, 0, -1):
            j = self.randbelow(i + 1)
            perm[i], perm[j] = perm[j], perm[i]
        return perm
