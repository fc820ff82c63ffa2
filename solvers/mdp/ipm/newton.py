"""One Newton system of the structured IPM, factorised per output, and its solves.

With ``Theta_k = y_k / s_k`` and ``D_k = w_k / z_k`` each output's ``H_k = A' Theta_k A + D_k`` is
inverted (:class:`~securelp.solvers.mdp.ipm.inverses.Inverses`), and the unit-row step solves
``(sum_k H_k^-1) dmu = r`` by its Cholesky factor; ``ds`` and ``dw`` follow from the linear equations,
so the linear residuals hold to rounding whatever the error of the solve, and one step of iterative
refinement corrects the complementarity equations.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from securelp.solvers.mdp.ipm.inverses import Inverses
from securelp.solvers.mdp.rowops import RowOps

__all__ = ["NewtonSystem", "add_directions", "dot", "gondzio", "step_to_boundary"]


class NewtonSystem:
    """One iteration's Newton system, factorised: the per-output inverses ``Hinv``, the unit-row
    Schur complement's Cholesky factor ``Lm``, and the iterate it linearises at. Arrays hold one
    column per output: records x outputs (``z``, ``w``) and mDP rows x outputs (``s``, ``y``), so
    the products with ``A`` and ``A'`` read and write them in place, split by rows over the threads."""

    def __init__(self, ops: RowOps, Hinv: Inverses, Lm: np.ndarray, theta: np.ndarray, z: np.ndarray,
                 s: np.ndarray, y: np.ndarray, w: np.ndarray, refinements: int = 1) -> None:
        self.ops, self.Hinv, self.Lm, self.theta = ops, Hinv, Lm, theta
        self.z, self.s, self.y, self.w = z, s, y, w
        self.refinements = refinements

    def solve_once(self, rp: np.ndarray | None, ru: np.ndarray | None, rd: np.ndarray | None, rzw: np.ndarray,
                   rsy: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(dz, ds, dy, dw, dmu)`` for the residuals of the primal rows, unit rows, dual rows
        (None: zero) and the two complementarity blocks; ``ds`` and ``dw`` from the linear
        equations, so those hold to rounding whatever the error of the solve."""
        ops, Hinv, theta, z, s = self.ops, self.Hinv, self.theta, self.z, self.s
        q = np.empty_like(s)  # rsy / s, then dy
        u = np.empty_like(s) if rp is not None else q

        def edges1(sl: slice) -> None:
            np.divide(rsy[sl], s[sl], out=q[sl])
            if rp is not None:
                np.multiply(theta[sl], rp[sl], out=u[sl])
                u[sl] -= q[sl]

        ops.edges(edges1)
        h = np.empty_like(z)

        def records1(sl: slice) -> None:
            ops.AT_rows(sl, u, h[sl])
            if rp is None:
                np.negative(h[sl], out=h[sl])
            h[sl] += rzw[sl] / z[sl]
            if rd is not None:
                h[sl] += rd[sl]

        ops.records(records1)
        Hh = Hinv.apply(h)
        r = -Hh.sum(axis=1)
        if ru is not None:
            r += ru
        dmu = lapack.dpotrs(self.Lm, r, lower=1)[0]
        dz = Hinv.apply(None, dmu)
        dz += Hh
        ds = np.empty_like(s)

        def edges2(sl: slice) -> None:
            ops.A_rows(sl, dz, ds[sl])
            if rp is None:
                np.negative(ds[sl], out=ds[sl])
            else:
                np.subtract(rp[sl], ds[sl], out=ds[sl])
            # dy = rsy / s - theta ds, into q
            q[sl] -= theta[sl] * ds[sl]

        ops.edges(edges2)
        dy = q
        dw = np.empty_like(z)

        def records2(sl: slice) -> None:
            ops.AT_rows(sl, dy, dw[sl])
            dw[sl] -= dmu[sl, None]
            if rd is not None:
                dw[sl] -= rd[sl]

        ops.records(records2)
        return dz, ds, dy, dw, dmu

    def solve(self, rp: np.ndarray | None, ru: np.ndarray | None, rd: np.ndarray | None, rzw: np.ndarray,
              rsy: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`solve_once` and :attr:`refinements` steps of refinement of the complementarity
        equations (the linear ones hold by construction)."""
        z, s, y, w = self.z, self.s, self.y, self.w
        d = self.solve_once(rp, ru, rd, rzw, rsy)
        for _ in range(self.refinements):
            dz, ds, dy, dw, _dmu = d
            c = self.solve_once(None, None, None, rzw - (w * dz + z * dw), rsy - (y * ds + s * dy))
            d = add_directions(d, c)
        return d

    def steps(self, d: tuple[np.ndarray, ...]) -> tuple[float, float]:
        """The largest primal and dual steps (at most 1) that keep the iterate nonnegative."""
        dz, ds, dy, dw, _ = d
        return (min(step_to_boundary(self.z, dz), step_to_boundary(self.s, ds)),
                min(step_to_boundary(self.y, dy), step_to_boundary(self.w, dw)))


def add_directions(d: tuple[np.ndarray, ...], c: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The sum of two directions (``d``'s arrays are updated in place)."""
    for u, v in zip(d, c):
        u += v
    return d


def step_to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
    """The largest step in [0, 1] that keeps ``v + step dv`` nonnegative (``v > 0``)."""
    low = float(np.min(np.divide(dv, v)))  # the step to the boundary is -1 / low where low < 0
    return 1.0 if low >= -1.0 else -1.0 / low


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``sum(a * b)`` without the temporary."""
    return float(np.vdot(a, b))


def gondzio(v: np.ndarray, dv: np.ndarray, x: np.ndarray, dx: np.ndarray, tp: float, td: float, target: float
             ) -> np.ndarray:
    """Gondzio's correction of the products ``(v + tp dv)(x + td dx)``: towards ``[0.1, 10]`` x
    ``target``, by at most ``10 target`` down."""
    p = v + tp * dv
    p *= x + td * dx
    c = np.clip(p, 0.1 * target, 10 * target)
    c -= p
    return np.maximum(c, -10 * target, out=c)
