"""Small PMO instances shared by the mDP engine tests: one with a solved optimum, a subset of a
dataset, a component's column generation."""

from __future__ import annotations

import functools

import numpy as np

from securelp.solvers.mdp.columns.bounds import undominated_outputs
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.datasets import SecretDataset, load_dataset
from securelp.solvers.mdp.direct import solve_direct
from securelp.solvers.mdp.pmo import build_pmo
from securelp.solvers.mdp.verify import verify_mechanism


def gaussian(n_records: int, seed: int = 1):
    """Gaussian ``n_records`` records (``seed``, eps 1, eta 0.9): the problem, HiGHS's direct solution,
    the giant component's records and that component's share of the optimum. Computed once per process
    and shared by the tests, which only read it (its arrays are read-only)."""
    return _gaussian(int(n_records), int(seed))


@functools.cache
def _gaussian(n_records: int, seed: int):
    p = build_pmo(load_dataset("gaussian", n_records=n_records, seed=seed), 1.0, 0.9)
    direct = solve_direct(p)
    idx = max(p.graph.component_members(), key=lambda g: g.size)
    opt_c = float(np.sum(p.cost[idx] * direct.mechanism[idx]))
    for a in (p.loss, p.outputs, p.dataset.prior, p.dataset.distance, direct.mechanism, idx):
        a.setflags(write=False)
    return p, direct, idx, opt_c


def gaussian70():
    """:func:`gaussian` on 70 records, seed 1."""
    return gaussian(70)


def assert_certified_optimum(p, direct, r) -> None:
    """``r`` (a colgen result on ``p``) is verified, at ``direct``'s optimum and certified there."""
    verify_mechanism(r.mechanism, p.dataset.distance, p.eps, eta=p.eta)
    assert abs(r.objective - direct.objective) <= 1e-6 * abs(direct.objective)
    assert r.lower_bound <= direct.objective * (1 + 1e-9) and r.status == "optimal"


def component(p, idx, workers: int = 1, gap: float = 1e-4, options=None):
    """The column generation of ``p``'s component ``idx`` over its entrywise-undominated outputs; close it after use."""
    return ComponentCG(p, idx, undominated_outputs(p.cost[idx]), workers, gap, options)


def subset(ds: SecretDataset, idx: np.ndarray, name: str) -> SecretDataset:
    """The records ``idx`` of ``ds`` as a dataset of their own, with a uniform prior."""
    coords = None if ds.coords is None else ds.coords[idx]
    return SecretDataset(name, tuple(ds.labels[i] for i in idx), ds.distance[np.ix_(idx, idx)], coords,
                         np.full(idx.size, 1.0 / idx.size), ds.default_eps, ds.default_eta, ds.unit)
