"""The local-privacy engine's tunables (:class:`LdpOptions`), passed to
:func:`securelp.solvers.ldp.estimator.simulate` and the mechanisms' builders."""

from __future__ import annotations

from dataclasses import dataclass

from securelp.solvers.options import at_least, fraction, option, positive, validate

__all__ = ["LdpOptions"]


@dataclass(frozen=True)
class LdpOptions:
    """Tunables of the local d-privacy mechanisms and their simulation (solvers/ldp)."""

    dense_max: int = option(
        400, "the largest grid handled with dense matrices (Cholesky, explicit P, exact trace); larger grids "
        "use the structured BTTB operator (O(m) memory, a Hutchinson trace)", at_least(1))
    full_verify_max: int = option(
        400, "the largest grid verified on every pair and output (O(m^3)); larger grids are verified "
        "structurally (p >= 0, every row sum, the triangle inequality) and on sampled triples", at_least(1))
    sampled_triples: int = option(200_000, "random (j, l, k) triples checked in a structural verification",
                                  at_least(1))
    pcg_tolerance: float = option(1e-13, "relative residual at which conjugate gradients on a grid kernel stop",
                                  positive())
    hutchinson_probes: int = option(
        128, "Rademacher probes of the Hutchinson estimate of the MSE's trace on large grids: a smaller "
        "standard error for more solves", at_least(2))
    pl_max_cells: int = option(
        900, "planar Laplace builds and verifies an explicit matrix (all m^3 pair/output triples) on at most "
        "this many cells", at_least(1))
    users_memory_share: float = option(
        0.8, "the simulation (its users, the mechanism's computation) may take this share of the memory "
        "available", fraction(open_low=True))

    def __post_init__(self) -> None:
        validate(self)
