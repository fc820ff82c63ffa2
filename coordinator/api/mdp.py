"""``securelp.optimal_mechanism``: an optimal metric-DP perturbation matrix in one call.

Builds the PMO LP of Qiu et al. (*Primal-dual optimization of metric-DP mechanisms*, Eq. 4-7:
minimise the expected loss over row-stochastic matrices ``Z`` with ``Z[i,k] <= exp(eps d(i,j))
Z[j,k]`` for every pair within ``eta``) on a secret dataset and solves it with the method named.
Every mechanism returned has passed :func:`securelp.solvers.mdp.verify.verify_mechanism` (row
sums, non-negativity, every mDP inequality), so a caller never holds an unchecked matrix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets import SecretDataset, load_dataset
from securelp.solvers.mdp.pmo import PMOProblem, build_pmo
from securelp.solvers.mdp.report import MechanismResult

__all__ = ["METHODS", "OptimalMechanism", "optimal_mechanism", "partition_seed"]

#: ``bd``: Benders decomposition (records or columns); ``direct``: HiGHS on the whole LP;
#: ``expmech``: the exponential mechanism, the baseline (feasible, not optimal)
METHODS = ("bd", "direct", "expmech")


@dataclass(frozen=True)
class OptimalMechanism:
    """A verified mechanism with what it means: row ``i`` is record ``labels[i]``'s distribution over
    the outputs, column ``k`` is record ``outputs[k]``."""

    #: the row-stochastic matrix (records x outputs), verified against every mDP inequality
    mechanism: np.ndarray
    #: the records' labels (rows) and the outputs' record indices (columns)
    labels: tuple[str, ...]
    outputs: np.ndarray
    eps: float
    eta: float
    status: str
    objective: float
    lower_bound: float
    upper_bound: float
    rel_gap: float
    #: the engine's full result (iterations, history, partition, verification report)
    result: MechanismResult
    #: the PMO LP that was solved (dataset, mDP graph, loss)
    problem: PMOProblem


def partition_seed(seed: str | int | None) -> int:
    """The k-means seed of ``seed``: the integer itself when it is one >= 0, else 31 bits of its
    SHA-256, so a negative or non-numeric seed is reproducible too (numpy's generator refuses ``-1``,
    and Python's ``hash`` of a word is salted per process)."""
    if seed is None:
        return 0
    text = str(seed).strip()
    if text.isascii() and text.isdigit():  # (str.isdigit also takes '²', which int() refuses)
        return int(text)
    return int.from_bytes(hashlib.sha256(f"securelp/partition-seed/{text}".encode()).digest()[:4], "big") >> 1


def optimal_mechanism(dataset: str | SecretDataset = "grid", eps: float | None = None, eta: float | None = None, *,
                      method: str = "bd", outputs: int | None = None, loss: str = "distance",
                      seed: int | str = 0, gap: float = 1e-4, time_limit: float | None = None,
                      dataset_params: dict[str, Any] | None = None, **solver_options: Any) -> OptimalMechanism:
    """Compute a verified metric-DP mechanism for ``dataset``.

    Parameters
    ----------
    dataset:
        A :class:`~securelp.solvers.mdp.datasets.SecretDataset`, or the name of a built-in one
        (``grid``, ``rome``, ``gaussian``, ``points``, ``text``, ``road``) loaded with
        ``dataset_params`` (e.g. ``{"rows": 5, "cols": 5}``, ``{"path": "pts.csv"}``).
    eps, eta:
        Privacy per distance unit and the neighbourhood radius (the dataset's defaults when ``None``).
    method:
        One of :data:`METHODS`.
    outputs:
        The number of outputs K (default: every record is an output).
    loss:
        ``distance`` or ``squared``.
    seed:
        Draws the outputs when ``outputs < n`` and seeds the record partition; it does not make
        the mechanism's later use reproducible (sampling from it is :mod:`securelp.solvers.mdp.sampling`).
    gap:
        Relative optimality gap at which ``bd`` and ``direct`` stop, in (0, 1).
    time_limit:
        Seconds; the result then says ``status="time_limit"`` with the bounds reached.
    solver_options:
        Passed to :func:`securelp.solvers.mdp.bd.solve_bd` (``decomposition``, ``partitioner``,
        ``n_subsets``, ``workers``, ``max_iterations``, ``options``, ``columns``, ...).

    Returns
    -------
    OptimalMechanism
        The verified matrix with its rows' labels and its outputs, the bounds reached and the
        engine's full result.

    Raises
    ------
    InputError
        An unknown dataset, method or loss; eps, eta, K or gap out of range (``parameter`` names it).
    VerificationError
        A mechanism failed its check (never returned).
    """
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}", parameter="method")
    if method != "expmech" and not (0 < gap < 1):
        raise InputError(f"gap must be in (0, 1), got {gap}", parameter="gap")
    if method != "bd" and solver_options:
        raise InputError(f"{', '.join(sorted(solver_options))}: options of method 'bd', not of {method!r}",
                         parameter="method")
    if isinstance(dataset, str):
        dataset = load_dataset(dataset, **(dataset_params or {}))
    elif dataset_params:
        raise InputError("dataset_params are for a dataset given by name", parameter="dataset_params")
    problem = build_pmo(dataset, eps, eta, n_outputs=outputs, loss=loss, seed=seed)
    result: MechanismResult
    if method == "direct":
        from securelp.solvers.mdp.direct import solve_direct

        result = solve_direct(problem, gap=gap, time_limit=time_limit)
    elif method == "expmech":
        from securelp.solvers.mdp.expmech import solve_expmech

        result = solve_expmech(problem)
    else:
        from securelp.solvers.mdp.bd import solve_bd

        solver_options.setdefault("seed", partition_seed(seed))
        result = solve_bd(problem, gap=gap, time_limit=float("inf") if time_limit is None else time_limit,
                          **solver_options)
    return OptimalMechanism(result.mechanism, tuple(problem.dataset.labels), np.asarray(problem.outputs),
                            float(problem.eps), float(problem.eta), result.status, result.objective,
                            result.lower_bound, result.upper_bound, result.rel_gap, result, problem)
