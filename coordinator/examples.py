"""Mangasarian's numerical examples (PPLP, Optim. Lett. 2011, Section 4), regenerated.

Example 1: m = 100, n = 1000, columns split 500/300/200; Example 2: m = 1000, n = 100,
split 50/30/20. A ~ U[-50, 50]; a known solution x* ~ U[-5, 5]; about half of the rows
active at x* with duals y ~ U[0, 10], the other rows slack. With
``min c'x s.t. Ax >= b``, x free, c = A'y and b_i = A_i x* (active) or A_i x* - s_i
(slack, s_i ~ U[0, 1]): x* is primal feasible, y dual feasible, complementary slackness
holds, so the LP is solvable with optimal value c'x* = b'y, known in advance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securelp.solvers.errors import ConfigError
from securelp.solvers.lp import LinearProgram


@dataclass(frozen=True)
class ExampleSpec:
    m: int
    n: int
    split: tuple[int, ...]


EXAMPLES = {1: ExampleSpec(100, 1000, (500, 300, 200)), 2: ExampleSpec(1000, 100, (50, 30, 20))}


def random_solvable_lp(m: int, n: int, rng: np.random.Generator, *, active_fraction: float = 0.5,
                       name: str = "random") -> tuple[LinearProgram, float]:
    """A dense LP ``min c'x s.t. Ax >= b`` (x free) with a known optimal value."""
    A = rng.uniform(-50.0, 50.0, size=(m, n))
    x_star = rng.uniform(-5.0, 5.0, size=n)
    active = rng.random(m) < active_fraction
    if not active.any():
        active[0] = True
    y = np.where(active, rng.uniform(0.0, 10.0, size=m), 0.0)
    c = A.T @ y
    b = A @ x_star - np.where(active, 0.0, rng.uniform(0.0, 1.0, size=m))
    lp = LinearProgram(c=c, A=A, row_lower=b, row_upper=np.full(m, np.inf), col_lower=np.full(n, -np.inf),
                       col_upper=np.full(n, np.inf), name=name)
    return lp, float(b @ y)


def mangasarian_example(number: int, seed: int = 0) -> tuple[LinearProgram, tuple[int, ...], float]:
    """Example ``number`` (1 or 2): the LP, the party split, and its known optimal value.

    The data are public test data (seeded with numpy's generator); masks never are.
    """
    if number not in EXAMPLES:
        raise ConfigError(f"--example must be 1 or 2, got {number}")
    spec = EXAMPLES[number]
    lp, value = random_solvable_lp(spec.m, spec.n, np.random.default_rng(seed), name=f"mangasarian-example-{number}")
    return lp, spec.split, value
