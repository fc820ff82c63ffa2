"""Partitions of the secret dataset's records for Qiu's record decomposition (Qiu Sec. 5).

The records are split into ``M`` subsets. A record is a *boundary* record when one of its
mDP neighbours (``d <= eta``) lies in another subset, otherwise *internal*. Internal
records of subset ``m`` only share constraints with records of subset ``m``, so they form
Benders block ``m``; boundary records stay in the master. Fewer boundary records mean a
smaller master (Qiu Tables 1-2 report the boundary counts of each partitioner).

Partitioners (k-means is Lloyd's algorithm with k-means++ seeding; the seed only drives
the public partition, not a privacy-relevant sample):

``kmdv``  k-means on the *distance vectors* (row ``i`` of the distance matrix).
``kmrec`` k-means on the record coordinates (classical MDS coordinates when a dataset has none).
``kmadj`` k-means on the rows of the mDP adjacency matrix (neighbour indicator vectors).
``bsc``   our reading of Qiu's boundary-size-conscious variant: spectral clustering of the mDP
          graph (edge weight ``exp(-eps d)``; embedding = the ``M`` smallest eigenvectors of the
          normalised Laplacian, rows normalised), then k-means; it cuts few (and weak) edges.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import InputError

__all__ = ["PARTITIONERS", "Partition", "boundary_mask", "kmeans", "partition_records"]

logger = logging.getLogger(__name__)

PARTITIONERS = ("kmdv", "kmrec", "kmadj", "bsc")


@dataclass(frozen=True)
class Partition:
    """A partition of the records into subsets with boundary/internal records.

    Attributes
    ----------
    method:
        Partitioner name.
    labels:
        ``(n,)`` subset of every record (``0..M-1``; empty subsets are dropped and relabelled).
    boundary:
        ``(n,)`` True for boundary records.
    """

    method: str
    labels: np.ndarray
    boundary: np.ndarray

    @property
    def n_subsets(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    @property
    def sizes(self) -> list[int]:
        return np.bincount(self.labels, minlength=self.n_subsets).tolist()

    @property
    def n_boundary(self) -> int:
        return int(self.boundary.sum())

    def internal_sizes(self) -> list[int]:
        return np.bincount(self.labels[~self.boundary], minlength=self.n_subsets).tolist()


def kmeans(data: np.ndarray, k: int, *, seed: int = 0, iterations: int = 100) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding; returns labels (``k`` clipped to the number of distinct points)."""
    X = np.asarray(data, dtype=float)
    n = X.shape[0]
    k = max(1, min(int(k), n))
    rng = np.random.default_rng(seed)
    centres = np.empty((k, X.shape[1]))
    centres[0] = X[rng.integers(n)]
    d2 = np.sum((X - centres[0]) ** 2, axis=1)
    for c in range(1, k):
        total = d2.sum()
        idx = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        centres[c] = X[idx]
        d2 = np.minimum(d2, np.sum((X - centres[c]) ** 2, axis=1))
    labels = np.zeros(n, dtype=np.int64)
    sq = np.sum(X**2, axis=1)
    for _ in range(iterations):
        dist = sq[:, None] - 2 * X @ centres.T + np.sum(centres**2, axis=1)[None, :]
        new = np.argmin(dist, axis=1)
        if _ > 0 and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = labels == c
            if members.any():
                centres[c] = X[members].mean(axis=0)
    return labels


def _relabel(labels: np.ndarray) -> np.ndarray:
    _, inv = np.unique(labels, return_inverse=True)
    return inv.astype(np.int64)


def boundary_mask(labels: np.ndarray, rows: np.ndarray, cols: np.ndarray, n: int) -> np.ndarray:
    """True for records with a neighbour in another subset."""
    mask = np.zeros(n, dtype=bool)
    cross = labels[rows] != labels[cols]
    mask[rows[cross]] = True
    mask[cols[cross]] = True
    return mask


def _mds(distance: np.ndarray, dims: int = 3) -> np.ndarray:
    n = distance.shape[0]
    J = np.eye(n) - 1.0 / n
    B = -0.5 * J @ (distance**2) @ J
    vals, vecs = np.linalg.eigh(B)
    order = np.argsort(vals)[::-1][:dims]
    return vecs[:, order] * np.sqrt(np.clip(vals[order], 0, None))


def partition_records(method: str, distance: np.ndarray, rows: np.ndarray, cols: np.ndarray, n_subsets: int, *,
                      coords: np.ndarray | None = None, eps: float = 1.0, seed: int = 0) -> Partition:
    """Partition ``n`` records into ``n_subsets`` subsets with ``method`` (see module docstring).

    ``rows, cols`` are the ordered neighbouring pairs of the full mDP graph.

    Raises
    ------
    InputError
        Unknown method or ``n_subsets < 1``.
    """
    if method not in PARTITIONERS:
        raise InputError(f"unknown partitioner {method!r}; choose one of {', '.join(PARTITIONERS)}",
                         parameter="partitioner")
    M = int(n_subsets)
    if M < 1:
        raise InputError(f"the number of subsets must be >= 1, got {n_subsets}", parameter="n_subsets")
    d = np.asarray(distance, dtype=float)
    n = d.shape[0]
    M = min(M, n)
    if M == 1:
        labels = np.zeros(n, dtype=np.int64)
    elif method == "kmdv":
        labels = kmeans(d, M, seed=seed)
    elif method == "kmrec":
        X = np.asarray(coords, dtype=float) if coords is not None else _mds(d)
        labels = kmeans(X, M, seed=seed)
    elif method == "kmadj":
        A = np.zeros((n, n))
        A[rows, cols] = 1.0
        np.fill_diagonal(A, 1.0)
        labels = kmeans(A, M, seed=seed)
    else:  # bsc
        labels = _spectral(d, rows, cols, M, eps, seed)
    labels = _relabel(labels)
    return Partition(method, labels, boundary_mask(labels, rows, cols, n))


def _spectral(d: np.ndarray, rows: np.ndarray, cols: np.ndarray, M: int, eps: float, seed: int) -> np.ndarray:
    n = d.shape[0]
    W = np.zeros((n, n))
    W[rows, cols] = np.exp(-eps * d[rows, cols])
    deg = W.sum(axis=1)
    inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    Lap = np.eye(n) - inv_sqrt[:, None] * W * inv_sqrt[None, :]
    _vals, vecs = np.linalg.eigh(Lap)
    U = vecs[:, :M]
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    U = U / np.where(norms > 0, norms, 1.0)
    return kmeans(U, M, seed=seed)
