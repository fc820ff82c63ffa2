"""Small LPs with known answers, written as MPS text or built directly."""

from __future__ import annotations

import numpy as np

from securelp.solvers.lp import LinearProgram

INFEASIBLE_MPS = """NAME          INFEAS
ROWS
 N  COST
 G  R1
 L  R2
COLUMNS
    X1        COST         1.0   R1           1.0
    X1        R2           1.0
    X2        COST         1.0   R1           1.0
    X2        R2           1.0
RHS
    RHS       R1           4.0   R2           2.0
ENDATA
"""

UNBOUNDED_MPS = """NAME          UNBND
ROWS
 N  COST
 G  R1
COLUMNS
    X1        COST        -1.0   R1           1.0
    X2        COST        -1.0   R1           1.0
RHS
    RHS       R1           1.0
ENDATA
"""

TINY_MPS = """NAME          TINY
ROWS
 N  COST
 G  R1
 L  R2
COLUMNS
    X1        COST         1.0   R1           1.0
    X1        R2           1.0
    X2        COST         2.0   R1           1.0
    X2        R2           3.0
    X3        COST        -1.0   R2           1.0
RHS
    RHS       R1           1.0   R2           6.0
    RHS       COST        -2.5
BOUNDS
 UP BND       X3           2.0
 FR BND       X1
ENDATA
"""


def random_feasible_lp(rng: np.random.Generator, m: int, n: int, *, free_fraction: float = 0.5,
                       sparse_density: float = 1.0) -> LinearProgram:
    """A random LP that is feasible and bounded by construction (mixed bound types).

    x0 is feasible; every column gets either a box, a one-sided bound or none; row
    bounds bracket A x0; the objective is c = A'y + w with y and w of the signs that make
    the objective bounded below on the feasible set (a dual-feasible pair).
    """
    A = rng.uniform(-5, 5, size=(m, n))
    if sparse_density < 1.0:
        A *= rng.random((m, n)) < sparse_density
    x0 = rng.uniform(-2, 2, size=n)
    kind = rng.choice(["free", "box", "lower"], size=n, p=[free_fraction, (1 - free_fraction) / 2,
                                                              (1 - free_fraction) / 2])
    col_lower = np.where(kind == "free", -np.inf, x0 - rng.uniform(0, 1, n))
    col_upper = np.where(kind == "box", x0 + rng.uniform(0, 1, n), np.inf)
    ax = A @ x0
    row_lower = ax - rng.uniform(0, 1, m)
    row_upper = np.where(rng.random(m) < 0.5, ax + rng.uniform(0, 1, m), np.inf)
    # dual-feasible objective: rows with only a lower bound get y >= 0, two-sided rows any sign
    y = np.where(np.isinf(row_upper), rng.uniform(0, 1, m), rng.uniform(-1, 1, m))
    w = np.where(kind == "free", 0.0, np.where(kind == "box", rng.uniform(-1, 1, n), rng.uniform(0, 1, n)))
    c = A.T @ y + w
    return LinearProgram(c=c, A=A, row_lower=row_lower, row_upper=row_upper, col_lower=col_lower,
                         col_upper=col_upper, offset=float(rng.uniform(-3, 3)))
