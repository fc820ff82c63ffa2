"""``chain`` (M_c^ch): the exact optimum of Model 3 with a certificate checked in code.

Fioretto, Van Hentenryck, Zhu, *Differential Privacy of Hierarchical Census Data: An
Optimization Approach* (AIJ 2021), Model 3 on the noisy cumulative counts. Modules, in
dependency order:

- :mod:`.options`     the tunables (:class:`ChainOptions`)
- :mod:`.certificate` the Lagrangian certificate and the exact Lagrangian bound with its level sets
- :mod:`.tails`       zero tails: leaf suffixes kept out of the LPs, multipliers in closed form
- :mod:`.lp`          one size block's windowed piecewise-linear LP, kept alive in HiGHS
- :mod:`.windows`     the centre, which cells widen together, the size blocks
- :mod:`.integer`     a fractional LP optimum: a local integer point, the level-set branch and bound
- :mod:`.rounds`      rounds of LPs until a certificate passes
- :mod:`.solve`       the entry point: projection, centre, rounds
"""

from securelp.solvers.hierarchy.chain.options import ChainOptions
from securelp.solvers.hierarchy.chain.solve import ChainResult, solve_model3

__all__ = ["ChainOptions", "ChainResult", "solve_model3"]
