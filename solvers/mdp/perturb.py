"""Applying a saved mDP mechanism: each true record is replaced by an output drawn exactly from its row.

``securelp mdp --save-mechanism Z.npy`` writes a verified ``n x K`` matrix; this module reads it back
(:func:`load_mechanism`), and :func:`perturb_records` verifies it again against the dataset's metric,
``eps`` and ``eta`` -- a file is not trusted because it was once verified: it may have been written
for another ``eps``, edited, or truncated -- before any row is sampled. Rows are sampled with
:class:`solvers.mdp.sampling.RowSampler`, which draws the row's float64 weights *exactly* (no
floating-point transform of random bits), from a ChaCha20 keystream seeded by the OS
(:class:`solvers.randomness.SecureRandom`); a seeded draw is for reproducible simulations only.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solvers.errors import InputError
from solvers.mdp.sampling import sample_from_rows
from solvers.mdp.verify import VerificationReport, verify_mechanism
from solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

def _savemat(handle: Any, Z: np.ndarray) -> None:
    from scipy.io import savemat

    savemat(handle, {"Z": Z})


#: ``securelp mdp --save-mechanism``'s formats by suffix: how each writes the matrix to a binary
#: file (:func:`load_mechanism` reads each back)
MECHANISM_FORMATS: dict[str, Callable[[Any, np.ndarray], None]] = {
    ".npy": lambda handle, Z: np.save(handle, Z),
    # 17 significant digits read back as the same doubles: the saved matrix is the verified one
    ".csv": lambda handle, Z: np.savetxt(handle, Z, fmt="%.17g", delimiter=","),
    ".mat": _savemat,
}


def mechanism_suffix(path: str | Path, where: str) -> str:
    """The format of a mechanism file, its name's suffix (lower case), one of
    :data:`MECHANISM_FORMATS`; another is an :class:`InputError` that starts with ``where``."""
    suffix = Path(path).suffix.lower()
    if suffix not in MECHANISM_FORMATS:
        raise InputError(f"{where}: its name must end in one of {', '.join(MECHANISM_FORMATS)} (the format), "
                         f"not {suffix or 'no suffix'}")
    return suffix


def load_mechanism(path: str | Path) -> np.ndarray:
    """Read a mechanism saved by ``securelp mdp --save-mechanism``: ``.npy``, ``.csv`` (comma
    separated) or ``.mat`` (variable ``Z``), by the name's suffix.

    Raises
    ------
    InputError
        A missing or unreadable file, another suffix, a file that is not a 2-D array of numbers.
    """
    path = Path(path)
    suffix = mechanism_suffix(path, f"mechanism {path}")
    if not path.is_file():
        raise InputError(f"mechanism {path}: no such file")
    try:
        if suffix == ".npy":
            with path.open("rb") as f:
                if f.read(6) != b"\x93NUMPY":  # np.load would take it for a pickle and say so
                    raise InputError(f"mechanism {path}: not a .npy file (no NPY header)")
            Z = np.load(path, allow_pickle=False)
        elif suffix == ".csv":
            Z = np.loadtxt(path, delimiter=",", ndmin=2, dtype=float)
        else:
            from scipy.io import loadmat

            data = loadmat(path)
            if "Z" not in data:
                found = ", ".join(sorted(k for k in data if not k.startswith("__"))) or "none"
                raise InputError(f"mechanism {path}: no variable Z (found {found})")
            Z = data["Z"]
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a parser's every failure on a bad file (scipy's MatReadError too)
        # numpy's and scipy's messages name the bad token or header; the first line is enough
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"mechanism {path}: cannot read it as {suffix[1:]}: {first}") from None
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.size == 0:
        raise InputError(f"mechanism {path}: expected a records x outputs matrix, got shape {Z.shape}")
    if not np.issubdtype(Z.dtype, np.number) or np.issubdtype(Z.dtype, np.complexfloating):
        raise InputError(f"mechanism {path}: expected real numbers, got {Z.dtype}")
    return np.ascontiguousarray(Z, dtype=np.float64)


def read_true_records(path: str | Path, labels: Sequence[str], *, by_index: bool = False) -> np.ndarray:
    """The true records to perturb (``path`` ``-``: standard input), one per line: each a record's
    label (``r2c3`` on a grid, a word of the text dataset, a points file's label or ``p<i>``) or,
    ``by_index``, its 0-based index. Blank lines and lines starting with ``#`` are skipped.

    Raises
    ------
    InputError
        An unreadable file, no records, an unknown label or an index out of range (line named).
    """
    stdin = str(path) == "-"
    path = Path("<stdin>" if stdin else path)
    try:
        text = sys.stdin.read() if stdin else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read true records {path}: {getattr(exc, 'strerror', None) or exc}") from None
    index: dict[str, int] = {}
    for i, label in enumerate(labels):
        index.setdefault(label, i)
    # a points file may label two records alike: refused only where such a label is asked for
    repeated = {label for label, count in Counter(labels).items() if count > 1}
    n = len(labels)
    out: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        token = line.strip()
        if not token or token.startswith("#"):
            continue
        if by_index:
            try:
                i = int(token)
            except ValueError:
                raise InputError(f"{path}, line {lineno}: {token[:40]!r} is not a record index") from None
            if not 0 <= i < n:
                raise InputError(f"{path}, line {lineno}: record index {i} is outside 0..{n - 1}")
        else:
            if token not in index:
                hint = " (use --by-index for record numbers)" if token.lstrip("-").isdigit() else ""
                raise InputError(f"{path}, line {lineno}: no record is labelled {token[:40]!r}{hint}")
            if token in repeated:
                raise InputError(f"{path}, line {lineno}: the label {token[:40]!r} names more than one record; "
                                 "use --by-index")
            i = index[token]
        out.append(i)
    if not out:
        raise InputError(f"true records {path}: no records in it")
    return np.asarray(out, dtype=np.int64)


@dataclass(frozen=True)
class Perturbation:
    """What :func:`perturb_records` drew: ``columns[u]`` is the output column drawn for the ``u``-th
    true record, ``outputs[columns[u]]`` the record it is released as."""

    columns: np.ndarray
    outputs: np.ndarray
    verification: VerificationReport
    reproducible: bool

    @property
    def released(self) -> np.ndarray:
        """The released records' indices, in the order of the true records."""
        return self.outputs[self.columns]


def perturb_records(Z: np.ndarray, true_records: np.ndarray, distance: np.ndarray, eps: float, eta: float,
                    outputs: np.ndarray, *, seed: int | str | None = None) -> Perturbation:
    """Verify ``Z`` as an ``eps``-mDP mechanism on the records at ``distance`` (neighbours within
    ``eta``), then draw one output per true record, exactly, from its row.

    Raises
    ------
    InputError
        ``Z``'s shape is not records x outputs.
    VerificationError
        ``Z`` is not an ``eps``-mDP mechanism there (nothing is sampled).
    """
    n, K = distance.shape[0], int(np.asarray(outputs).size)
    if Z.shape != (n, K):
        raise InputError(f"the mechanism is {Z.shape[0]} x {Z.shape[1]}, but the dataset has {n} records and "
                         f"{K} outputs: give the dataset options (and --outputs, --seed) it was computed with")
    report = verify_mechanism(Z, distance, eps, eta=eta)
    rng = SecureRandom(seed, label="mdp-perturb")
    columns = sample_from_rows(lambda j: Z[j], true_records, rng)
    logger.info("perturbed %d records with a verified %d x %d mechanism", true_records.size, n, K)
    return Perturbation(columns, np.asarray(outputs), report, seed is not None)
