"""Applying a saved mDP mechanism: each true record is replaced by an output drawn exactly from its row.

``securelp mdp --save-mechanism Z.npz`` writes a verified ``n x K`` matrix and its description
(:func:`describe_mechanism`: the dataset and how to load it again, ``eps``, ``eta``, the outputs, and
what recognises the dataset: its labels' digest and a few distances; ``.npy`` is the bare matrix).
This module reads it back (:func:`load_mechanism`), checks a dataset against the description
(:func:`check_same_dataset`), and :func:`perturb_records` verifies the matrix again against the
dataset's metric, ``eps`` and ``eta`` -- a file is not trusted because it was once verified: it may
have been written for another ``eps``, edited, or truncated -- before any row is sampled. Rows are
sampled with :class:`securelp.solvers.mdp.sampling.RowSampler`, which draws the row's float64 weights
*exactly* (no floating-point transform of random bits), from a ChaCha20 keystream seeded by the OS
(:class:`securelp.solvers.randomness.SecureRandom`); a seeded draw is for reproducible simulations only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.sampling import sample_from_rows
from securelp.solvers.mdp.verify import VerificationReport, verify_mechanism
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

#: what a described mechanism file says it is (its ``format`` key), and the version of the description
DESCRIPTION_FORMAT = "securelp-mdp-mechanism"
DESCRIPTION_VERSION = 1
#: a ``.csv`` mechanism's description is its first line: this prefix, then the description's JSON
CSV_DESCRIPTION_PREFIX = "# securelp-mechanism "
#: pairs of records whose distance a description keeps, to recognise its metric again
PROBE_PAIRS = 64
#: how far (relative) a probed distance may move and still be the same metric: a dataset rebuilt on
#: another machine may differ in its last bits (the text dataset's embeddings), another ``--cell-km``
#: or metric by far more
PROBE_RTOL = 1e-6


def _save_npy(handle: Any, Z: np.ndarray, description: dict[str, Any]) -> None:
    np.save(handle, Z)  # a bare matrix: the format has no room for a description


def _save_npz(handle: Any, Z: np.ndarray, description: dict[str, Any]) -> None:
    np.savez(handle, Z=Z, description=np.array(json.dumps(description)))


def _save_csv(handle: Any, Z: np.ndarray, description: dict[str, Any]) -> None:
    # 17 significant digits read back as the same doubles: the saved matrix is the verified one
    header = json.dumps(description, separators=(",", ":"))
    np.savetxt(handle, Z, fmt="%.17g", delimiter=",", header=header, comments=CSV_DESCRIPTION_PREFIX)


def _save_mat(handle: Any, Z: np.ndarray, description: dict[str, Any]) -> None:
    from scipy.io import savemat

    savemat(handle, {"Z": Z, "description": json.dumps(description)})


#: ``securelp mdp --save-mechanism``'s formats by suffix: how each writes the matrix and its
#: description (:func:`describe_mechanism`) to a binary file; :func:`load_mechanism` reads each back.
#: Every format but ``.npy`` keeps the description
MECHANISM_FORMATS: dict[str, Callable[[Any, np.ndarray, dict[str, Any]], None]] = {
    ".npz": _save_npz, ".csv": _save_csv, ".mat": _save_mat, ".npy": _save_npy,
}


def mechanism_suffix(path: str | Path, where: str) -> str:
    """The format of a mechanism file, its name's suffix (lower case), one of
    :data:`MECHANISM_FORMATS`; another is an :class:`InputError` that starts with ``where``."""
    suffix = Path(path).suffix.lower()
    if suffix not in MECHANISM_FORMATS:
        raise InputError(f"{where}: its name must end in one of {', '.join(MECHANISM_FORMATS)} (the format), "
                         f"not {suffix or 'no suffix'}")
    return suffix


def _probe_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """:data:`PROBE_PAIRS` record pairs spread over ``n`` records (the same for the same ``n``)."""
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    i = np.unique(np.linspace(0, n - 1, min(PROBE_PAIRS, n)).astype(np.int64))
    j = (i * 7919 + 1 + n // 2) % n
    j = np.where(j == i, (i + 1) % n, j)
    return i, j


def labels_digest(labels: Sequence[str]) -> str:
    """SHA-256 of the records' labels in order: the same records, in the same order."""
    return hashlib.sha256("\n".join(labels).encode("utf-8")).hexdigest()


def describe_mechanism(dataset: Any, options: dict[str, Any], eps: float, eta: float,
                       outputs: np.ndarray, seed: str) -> dict[str, Any]:
    """What a saved mechanism was computed for: the dataset (its name and the options that load it
    again, :func:`securelp.solvers.mdp.datasets.load_dataset`; no prior), ``eps``, ``eta``, the outputs as
    record indices and the ``--seed`` that drew them, and what recognises the dataset again (its labels' digest and a few distances).
    Nothing in it is private: the dataset is the set of possible records, not anyone's record."""
    i, j = _probe_pairs(dataset.n)
    d = np.asarray(dataset.distance)
    return {
        "format": DESCRIPTION_FORMAT, "version": DESCRIPTION_VERSION,
        "dataset": dataset.name, "dataset_options": options,
        "eps": float(eps), "eta": float(eta), "unit": dataset.unit,
        "n_records": int(dataset.n), "outputs": [int(k) for k in outputs], "seed": str(seed),
        "labels_sha256": labels_digest(dataset.labels),
        "distance_probe": [[int(a), int(b), float(d[a, b])] for a, b in zip(i, j)],
    }


@dataclass(frozen=True)
class SavedMechanism:
    """A mechanism file read back: the matrix and, unless it is a bare ``.npy``, its description
    (:func:`describe_mechanism`)."""

    Z: np.ndarray
    description: dict[str, Any] | None


#: the longest description read (gaussian's 20,000 outputs take about 120 kB)
DESCRIPTION_MAX_CHARS = 16_000_000


def _is_int(v: Any) -> bool:
    return type(v) is int  # bool is an int subclass, and True is no record index


def _is_real(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _check_description(raw: str, where: str, shape: tuple[int, int]) -> dict[str, Any]:
    """The description of a mechanism file, checked key by key, and against the matrix it came with
    (what ``securelp mdp`` writes passes; an edited file is refused with the key named)."""
    if len(raw) > DESCRIPTION_MAX_CHARS:
        raise InputError(f"{where}: its description is longer than {DESCRIPTION_MAX_CHARS:,} characters")
    try:
        desc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InputError(f"{where}: its description is not JSON: {first}") from None
    if not isinstance(desc, dict) or desc.get("format") != DESCRIPTION_FORMAT:
        raise InputError(f"{where}: its description is not a {DESCRIPTION_FORMAT} description")
    version = desc.get("version")
    if not _is_int(version) or version != DESCRIPTION_VERSION:
        raise InputError(f"{where}: its description has version {str(version)[:40]}; this securelp reads "
                         f"version {DESCRIPTION_VERSION}")

    def bad(key: str, what: str) -> InputError:
        return InputError(f"{where}: its description's {key} {what}")

    n, outputs, options = desc.get("n_records"), desc.get("outputs"), desc.get("dataset_options")
    name = desc.get("dataset")
    if not isinstance(name, str) or not 0 < len(name) <= 40:
        raise bad("dataset", "is not a dataset name")
    if not isinstance(options, dict) or not all(
            isinstance(k, str) and len(k) <= 40
            and ((isinstance(v, str) and len(v) <= 4096) or (_is_real(v) and abs(v) <= 1e12)) for k, v in options.items()):
        raise bad("dataset_options", "are not names with a number or a text each")
    for key in ("eps", "eta"):
        if not (_is_real(desc.get(key)) and desc[key] > 0):
            raise bad(key, "is not a finite number > 0")
    if not isinstance(desc.get("seed"), str) or len(desc["seed"]) > 4096:
        raise bad("seed", "is not a text")
    if not (_is_int(n) and n >= 1):
        raise bad("n_records", "is not a number of records")
    if not (isinstance(outputs, list) and all(_is_int(k) for k in outputs)
            and all(0 <= a < b < n for a, b in itertools.pairwise(outputs)) and outputs and 0 <= outputs[0] < n):
        raise bad("outputs", "are not record indices in increasing order, each below n_records")
    if shape != (n, len(outputs)):
        raise InputError(f"{where}: its description ({n} records, {len(outputs)} outputs) does not fit the "
                         f"{shape[0]} x {shape[1]} matrix")
    digest = desc.get("labels_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise bad("labels_sha256", "is not a SHA-256 in hex")
    probe = desc.get("distance_probe")
    if not (isinstance(probe, list) and (probe or n < 2) and len(probe) <= PROBE_PAIRS and all(
            isinstance(e, list) and len(e) == 3 and _is_int(e[0]) and _is_int(e[1]) and 0 <= e[0] < n
            and 0 <= e[1] < n and _is_real(e[2]) and e[2] >= 0 for e in probe)):
        raise bad("distance_probe", f"is not a list of up to {PROBE_PAIRS} [record, record, distance] triples")
    return desc


def load_mechanism(path: str | Path) -> SavedMechanism:
    """Read a mechanism saved by ``securelp mdp --save-mechanism``, by the name's suffix: ``.npz``
    (arrays ``Z`` and ``description``), ``.csv`` (comma separated, the description on its first
    line), ``.mat`` (variables ``Z`` and ``description``) or ``.npy`` (the bare matrix). A file
    without a description (``.npy``, or written by hand) is read all the same.

    Raises
    ------
    InputError
        A missing or unreadable file, another suffix, a file that is not a 2-D array of numbers, a
        description that is malformed or does not fit the matrix.
    """
    path = Path(path)
    where = f"mechanism {path}"
    suffix = mechanism_suffix(path, where)
    try:
        if not path.is_file():
            raise InputError(f"{where}: " + ("not a regular file" if path.exists() else "no such file"))
    except OSError as exc:  # a name too long for the system
        raise InputError(f"{where}: {exc.strerror or exc}") from None
    raw = None
    try:
        if suffix in (".npy", ".npz"):
            with path.open("rb") as f:
                magic = f.read(6)
            if suffix == ".npy" and magic != b"\x93NUMPY":  # np.load would take it for a pickle and say so
                raise InputError(f"{where}: not a .npy file (no NPY header)")
            if suffix == ".npz" and not magic.startswith(b"PK"):
                raise InputError(f"{where}: not a .npz file (not a zip archive)")
            loaded = np.load(path, allow_pickle=False)
            if suffix == ".npy":
                Z = loaded
            else:
                with loaded:
                    if "Z" not in loaded.files:
                        raise InputError(f"{where}: no array Z (found {', '.join(loaded.files) or 'none'})")
                    Z = loaded["Z"]
                    if "description" in loaded.files:
                        raw = str(loaded["description"][()])
        elif suffix == ".csv":
            # utf-8-sig: a byte-order mark (a spreadsheet's export) is not part of the first number
            with path.open(encoding="utf-8-sig") as f:
                first = f.readline()
            if first.startswith(CSV_DESCRIPTION_PREFIX):
                raw = first[len(CSV_DESCRIPTION_PREFIX):]
            with warnings.catch_warnings():  # an empty file: numpy warns, and the shape check below says it
                warnings.simplefilter("ignore", UserWarning)
                Z = np.loadtxt(path, delimiter=",", ndmin=2, dtype=float, encoding="utf-8-sig")
        else:
            from scipy.io import loadmat

            data = loadmat(path)
            if "Z" not in data:
                found = ", ".join(sorted(k for k in data if not k.startswith("__"))) or "none"
                raise InputError(f"{where}: no variable Z (found {found})")
            Z = data["Z"]
            if "description" in data:
                text = np.asarray(data["description"])
                raw = str(text.ravel()[0]) if text.size else ""
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a parser's every failure on a bad file (scipy's MatReadError too)
        # numpy's and scipy's messages name the bad token or header; the first line is enough
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{where}: cannot read it as {suffix[1:]}: {first_line}") from None
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.size == 0:
        raise InputError(f"{where}: expected a records x outputs matrix, got shape {Z.shape}")
    if not np.issubdtype(Z.dtype, np.number) or np.issubdtype(Z.dtype, np.complexfloating):
        raise InputError(f"{where}: expected real numbers, got {Z.dtype}")
    description = None if raw is None else _check_description(raw, where, Z.shape)
    return SavedMechanism(np.ascontiguousarray(Z, dtype=np.float64), description)


def describe_dataset(name: str, options: dict[str, Any], n: int) -> str:
    """``grid (rows 4, cols 4, cell_km 1.0; 16 records)``: a dataset in messages (long values cut)."""
    opts = ", ".join(f"{k} {str(v)[:80]}" for k, v in options.items())
    return f"{name} ({opts + '; ' if opts else ''}{n} records)"


def check_same_dataset(description: dict[str, Any], dataset: Any, where: str, given: str) -> None:
    """Refuse ``dataset`` unless it is the one ``description`` was computed for: its name, its number
    of records, its labels (digest) and its metric (the probed distances, :data:`PROBE_RTOL`).
    ``given`` says in the message where ``dataset`` came from."""
    saved = describe_dataset(description["dataset"], description["dataset_options"], description["n_records"])
    why = None
    if dataset.name != description["dataset"] or dataset.n != description["n_records"]:
        why = f"that is {dataset.name} with {dataset.n} records"
    elif labels_digest(dataset.labels) != description["labels_sha256"]:
        why = "its records are other records (their labels differ)"
    else:
        d = np.asarray(dataset.distance)
        for a, b, value in description["distance_probe"]:  # indices below n_records = dataset.n, checked
            if not math.isclose(float(d[a, b]), float(value), rel_tol=PROBE_RTOL, abs_tol=1e-300):
                why = (f"its metric differs (records {dataset.labels[a]} and {dataset.labels[b]}: {float(d[a, b]):.6g} "
                       f"{dataset.unit} apart, {float(value):.6g} in the file)").replace("  ", " ")
                break
    if why is not None:
        raise InputError(f"{where} was computed for {saved}, not for the dataset {given}: {why}")


#: a record index in a ``--by-index`` file: ASCII digits only (``int()`` would also take ``1_0`` and
#: other scripts' digits)
INDEX_TOKEN = re.compile(r"[0-9]+")


def read_true_records(path: str | Path, labels: Sequence[str], *, by_index: bool = False) -> np.ndarray:
    """The true records to perturb (``path`` ``-``: standard input), one per line: each a record's
    label (``r2c3`` on a grid, a word of the text dataset, a points file's label or ``p<i>``) or,
    ``by_index``, its 0-based index. Blank lines and lines starting with ``#`` are skipped, and a
    byte-order mark at the start. An error names the line, never what is on it: the lines are the
    true records, private data.

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
    text = text.removeprefix("\ufeff")
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
            if not INDEX_TOKEN.fullmatch(token):
                raise InputError(f"{path}, line {lineno}: not a record index (digits 0-9 only)")
            i = int(token)
            if not i < n:
                raise InputError(f"{path}, line {lineno}: the record index is outside 0..{n - 1}")
        else:
            if token not in index:
                number = INDEX_TOKEN.fullmatch(token.lstrip("-")) is not None  # perhaps meant as an index
                raise InputError(f"{path}, line {lineno}: no record has that label",
                                 parameter="by_index" if number else None)
            if token in repeated:
                raise InputError(f"{path}, line {lineno}: that label names more than one record; read the records "
                                 "by index", parameter="by_index")
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
                         f"{K} outputs: give the dataset, outputs and seed it was computed with", parameter="outputs")
    report = verify_mechanism(Z, distance, eps, eta=eta)
    rng = SecureRandom(seed, label="mdp-perturb")
    columns = sample_from_rows(lambda j: Z[j], true_records, rng)
    logger.info("perturbed %d records with a verified %d x %d mechanism", true_records.size, n, K)
    return Perturbation(columns, np.asarray(outputs), report, seed is not None)
