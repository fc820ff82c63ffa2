"""The local-privacy collection as seen by its collector (:mod:`securelp.solvers.ldp`).

Each of ``n`` users perturbs its own value ``x`` with one exact draw from row ``x`` of a verified
mechanism ``P`` (Gu, Li, Cao, Xiong, IEEE CNS 2019: the Linear-Equations mechanism and its
baselines) and sends the report; the collector sees every report and publishes the estimate
``(P^T)^{-1} y`` of the value frequencies. The claim, for a user whose value changes from ``x``
to ``x'``: ``P[x, y] <= exp(eps d(x, x')) P[x', y]`` for local d-privacy (``le``, ``em``, ``pl``),
``e^eps`` for any pair for eps-LDP (``grr``, ``oue``). The audited claim is therefore
``eps d(x, x')`` or ``eps``.

The view of one run: ``report[u]`` for every user (a value index; for ``oue`` a bit vector) and
the collector's release ``estimate``. Neighbouring inputs: user 0's value is ``x`` in D0 and
``x'`` in D1, the other users' values are the same. Under one seed a run's view is bit for bit what
the collector of a real ``ldp-collect`` session receives from a client holding those users and
publishes (checked by ``tests/unit/test_dpaudit_protocols.py`` for le, grr and em; ``oue`` is not
a mechanism of that protocol).

Planted leaks (test-only, ``plant=``; never part of the collection):

- ``count-in-message``: user 0's message carries its true value;
- ``half-noise``: the users perturb with a mechanism built for ``2 eps`` (half the noise) while the
  claim stays ``eps``;
- ``report-field``: the collector's report carries the true number of users holding value ``x``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from securelp.coordinator.dpaudit.views import View
from securelp.solvers.errors import InputError
from securelp.solvers.ldp import GridDomain, build_mechanism
from securelp.solvers.ldp.baselines import OptimizedUnaryEncoding
from securelp.solvers.mdp.sampling import bernoulli_dyadic, sample_from_rows
from securelp.solvers.randomness import SecureRandom

__all__ = ["LDP_PLANTS", "LdpCollectionViews"]

#: planted leaks of the LDP adapter (test-only)
LDP_PLANTS = ("count-in-message", "half-noise", "report-field")
#: mechanisms whose claim is eps-LDP for every pair (not scaled by the distance)
PURE_LDP = frozenset({"grr", "oue"})


class LdpCollectionViews:
    """View source of a simulated LDP collection on a neighbouring pair (see the module docstring).

    Parameters
    ----------
    eps:
        The claimed privacy parameter (per distance unit for d-privacy).
    mechanism:
        ``le``, ``grr``, ``oue``, ``em`` or ``pl``.
    rows, cols:
        The grid of values (cells of one distance unit).
    users:
        Users per run (user 0 is the one whose value changes).
    x0, x1:
        User 0's value in D0 and D1 (default: cells 0 and 1, at distance 1).
    plant:
        A planted leak of :data:`LDP_PLANTS` (test-only), or None.
    """

    protocol = "ldp"

    def __init__(self, eps: float = 1.0, *, mechanism: str = "le", rows: int = 3, cols: int = 3, users: int = 10,
                 x0: int = 0, x1: int = 1, plant: str | None = None) -> None:
        if plant is not None and plant not in LDP_PLANTS:
            raise InputError(f"unknown planted leak {plant!r} for ldp; choose one of {', '.join(LDP_PLANTS)}",
                             parameter="plant")
        if users < 1:
            raise InputError(f"users must be >= 1, got {users}", parameter="users")
        self.domain = GridDomain(rows, cols, 1.0)
        m = self.domain.m
        if not (0 <= x0 < m and 0 <= x1 < m) or x0 == x1:
            raise InputError(f"x0 and x1 must be two different values in 0..{m - 1}, got {x0} and {x1}",
                             parameter="x0")
        self.eps = float(eps)
        self.mechanism_name = mechanism
        self.plant = plant
        self.mechanism = build_mechanism(mechanism, self.domain, 2 * self.eps if plant == "half-noise" else self.eps)
        self.claimed_mechanism = self.mechanism if plant != "half-noise" else build_mechanism(mechanism, self.domain,
                                                                                              self.eps)
        values = np.arange(users, dtype=np.int64) % m
        d0, d1 = values.copy(), values.copy()
        d0[0], d1[0] = x0, x1
        self.inputs = (d0, d1)
        self.x0, self.x1 = x0, x1
        self.distance = float(self.domain.distance_row(x0)[x1])
        self.claimed_eps = self.eps if mechanism in PURE_LDP else self.eps * self.distance

    def describe(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism_name, "domain": f"grid {self.domain.rows} x {self.domain.cols}",
                "users": int(self.inputs[0].size), "neighbour": f"user 0's value {self.x0} -> {self.x1} (distance "
                                                                 f"{self.distance:g})",
                "eps_per_unit": self.eps, "claim": "eps-LDP" if self.mechanism_name in PURE_LDP else "eps d(x, x')",
                "view": "every user's report and the collector's estimate", "plant": self.plant}

    def _reports(self, values: np.ndarray, runs: int, rng: SecureRandom) -> np.ndarray:
        mech = self.mechanism
        n, m = values.size, self.domain.m
        tiled = np.tile(values, runs)
        if isinstance(mech, OptimizedUnaryEncoding):
            bits = bernoulli_dyadic(mech.q_frac, (tiled.size, m), rng)
            bits[np.arange(tiled.size), tiled] = bernoulli_dyadic(mech.p_frac, tiled.size, rng)
            return bits.reshape(runs, n, m)
        return sample_from_rows(mech.row, tiled, rng, m=m).reshape(runs, n)

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]:
        values = self.inputs[side]
        reports = self._reports(values, runs, rng)
        n, m = values.size, self.domain.m
        out: list[View] = []
        for k in range(runs):
            rep = reports[k]
            y = rep.sum(axis=0) / n if rep.ndim == 2 else np.bincount(rep, minlength=m) / n
            view: dict[str, Any] = {f"report[{u}]": rep[u] for u in range(n)}
            view["estimate"] = self.claimed_mechanism.estimate(y)
            if self.plant == "count-in-message":
                view["user0.true_value"] = int(values[0])
            if self.plant == "report-field":
                view["collector.users_with_x0"] = int((values == self.x0).sum())
            out.append(view)
        return out
