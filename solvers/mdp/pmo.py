"""The privacy-preserving mechanism optimisation (PMO) LP: its parameters, outputs and loss.

Qiu, "Enhancing Scalability of Metric Differential Privacy via Secret Dataset Partitioning and
Benders Decomposition", Eq. 4-7: with records ``i`` (prior ``p_i``), outputs ``k`` and loss
``c_ik``,

    min   sum_i p_i sum_k c_ik z_ik                                   (Eq. 4)
    s.t.  z_ik - exp(eps d_ij) z_jk <= 0   for every ordered neighbour pair (d_ij <= eta), every k   (Eq. 5)
          sum_k z_ik = 1                   for every record i                                        (Eq. 6)
          z_ik >= 0                                                                                 (Eq. 7)

Loss: ``c_ik = d(x_i, y_k)`` (default, outputs ``y_k`` are records) or Qiu's travel-cost
loss (Eq. 48), which we read as the mean, over ``T`` random destinations ``t``, of the
travel-cost estimation error ``|d(x_i, t) - d(y_k, t)|``. Implied constraints
(:func:`securelp.solvers.mdp.graph.essential_edges`) are left out of the LP (same feasible set); the
verifier checks all pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets import SecretDataset
from securelp.solvers.mdp.graph import NeighbourGraph, build_graph, essential_edges
from securelp.solvers.randomness import SecureRandom

__all__ = ["MAX_FACTOR", "PMOProblem", "build_pmo", "choose_outputs", "require_lp_factors", "travel_cost_loss"]


@dataclass(frozen=True)
class PMOProblem:
    """A PMO instance (Qiu Eq. 4-7).

    Attributes
    ----------
    dataset:
        The secret dataset.
    eps, eta:
        Privacy parameter per unit and neighbourhood radius.
    outputs:
        ``(K,)`` record indices used as outputs.
    loss:
        ``(n, K)`` loss ``c_ik``.
    loss_name:
        ``"distance"`` or ``"travel"``.
    graph:
        The mDP neighbour graph.
    lp_edges:
        Ordered pairs kept in the LP (implied ones pruned), as ``(rows, cols)``.
    """

    dataset: SecretDataset
    eps: float
    eta: float
    outputs: np.ndarray
    loss: np.ndarray
    loss_name: str
    graph: NeighbourGraph
    lp_edges: tuple[np.ndarray, np.ndarray]

    @property
    def n(self) -> int:
        return self.dataset.n

    @property
    def K(self) -> int:
        return int(self.outputs.size)

    @property
    def cost(self) -> np.ndarray:
        """Objective coefficients ``p_i c_ik`` as an ``(n, K)`` array."""
        return self.dataset.prior[:, None] * self.loss

    def objective_of(self, Z: np.ndarray) -> float:
        """Expected loss ``sum_ik p_i c_ik z_ik`` of a mechanism."""
        return float(np.sum(self.cost * Z))


def travel_cost_loss(distance: np.ndarray, outputs: np.ndarray, *, n_destinations: int = 50,
                     seed: int | str | None = None) -> np.ndarray:
    """Qiu's travel-cost loss (Eq. 48): mean over random destinations ``t`` of ``|d(i,t) - d(k,t)|``.

    Destinations are records drawn uniformly without replacement (public randomness, not
    a privacy-relevant sample; :class:`SecureRandom` so a seed reproduces them).
    """
    n = distance.shape[0]
    T = min(int(n_destinations), n)
    rng = SecureRandom(seed, label="mdp-travel-destinations")
    dest = np.sort(rng.permutation(n)[:T])
    di = distance[:, dest]  # (n, T)
    dk = distance[outputs][:, dest]  # (K, T)
    return np.abs(di[:, None, :] - dk[None, :, :]).mean(axis=2)


#: the largest factor ``exp(eps d)`` an mDP row may carry: HiGHS treats matrix entries above 1e15
#: (its ``large_matrix_value``) as infinite and refuses the model
MAX_FACTOR = 1e15


def require_lp_factors(problem: PMOProblem) -> None:
    """Refuse, with what to change, a PMO whose mDP rows would carry a factor ``exp(eps d)`` above
    :data:`MAX_FACTOR`: no LP solver takes it (HiGHS calls it infinite), and such a row only says
    that the two records' supports must match. ``expmech`` needs no LP and is not limited.

    Raises
    ------
    InputError
        Naming the largest ``eps d`` on an mDP edge, the records and the largest ``eta`` that fits.
    """
    rows, cols = problem.lp_edges
    if rows.size == 0:
        return
    d = np.asarray(problem.dataset.distance)[rows, cols]
    worst = int(np.argmax(d))
    limit = math.log(MAX_FACTOR)
    if problem.eps * float(d[worst]) <= limit:
        return
    ds = problem.dataset
    unit = ds.unit or "units"
    names = ds.labels[int(rows[worst])], ds.labels[int(cols[worst])]
    raise InputError(
        f"eps * d reaches {problem.eps * float(d[worst]):.4g} on the mDP edge between records {names[0]} and "
        f"{names[1]} (d = {float(d[worst]):.4g} {unit}, eps = {problem.eps:g} per {unit.rstrip('s')}, "
        f"eta = {problem.eta:.4g}): its factor exp(eps d) exceeds {MAX_FACTOR:.0e}, the largest an LP solver "
        f"takes. Choose eps * eta <= {limit:.1f}, e.g. eta {limit / problem.eps:.4g} or eps "
        f"{limit / problem.eta:.4g} (mind the distances' unit), or the exponential mechanism, which needs no LP",
        parameter="eta")


def choose_outputs(n: int, n_outputs: int | None = None, seed: int | str | None = None) -> np.ndarray:
    """The record indices used as outputs, sorted: every record (``n_outputs`` ``None`` or ``n``), or
    ``n_outputs`` of them drawn with ``seed`` (fresh OS entropy when ``None``, so only a seeded draw
    can be made again, e.g. by ``securelp perturb``).

    Raises
    ------
    InputError
        ``K <= 0`` or ``K > n``.
    """
    if n_outputs is None:
        return np.arange(n)
    K = int(n_outputs)
    if K <= 0:
        raise InputError(f"the number of outputs K must be >= 1, got {n_outputs}", parameter="n_outputs")
    if K > n:
        raise InputError(f"the number of outputs K = {K} exceeds the {n} records they are drawn from",
                         parameter="n_outputs")
    if K == n:
        return np.arange(n)
    return np.sort(SecureRandom(seed, label="mdp-outputs").permutation(n)[:K])


def build_pmo(dataset: SecretDataset, eps: float | None = None, eta: float | None = None, *,
              n_outputs: int | None = None, loss: str = "distance", seed: int | str | None = None,
              prune: bool = True) -> PMOProblem:
    """Validate parameters and build a :class:`PMOProblem`.

    Raises
    ------
    InputError
        ``eps <= 0``, ``eta <= 0``, ``K <= 0`` or ``K > n``, unknown loss.
    """
    eps = dataset.default_eps if eps is None else eps
    eta = dataset.default_eta if eta is None else eta
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise InputError(f"eps must be a finite number > 0 (per {dataset.unit or 'unit'}), got {eps}", parameter="eps")
    if not (isinstance(eta, (int, float)) and math.isfinite(eta) and eta > 0):
        raise InputError(f"eta must be a finite number > 0 ({dataset.unit or 'units'}), got {eta}", parameter="eta")
    outputs = choose_outputs(dataset.n, n_outputs, seed)
    if loss == "distance":
        c = np.asarray(dataset.distance)[:, outputs].astype(float)
    elif loss == "travel":
        c = travel_cost_loss(np.asarray(dataset.distance), outputs, seed=seed)
    else:
        raise InputError(f"unknown loss {loss!r}: use distance or travel", parameter="loss")
    graph = build_graph(dataset.distance, float(eta))
    rows, cols = graph.rows, graph.cols
    if prune and rows.size:
        keep = essential_edges(np.asarray(dataset.distance), rows, cols)
        rows, cols = rows[keep], cols[keep]
    c.setflags(write=False)
    outputs.setflags(write=False)
    return PMOProblem(dataset, float(eps), float(eta), outputs, c, loss, graph, (rows, cols))
