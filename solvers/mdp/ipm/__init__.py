"""The structured interior-point method for one mDP-graph component's PMO on a set of outputs.

Modules, in dependency order: :mod:`~securelp.solvers.mdp.ipm.lapack` (BLAS/LAPACK without the GIL),
:mod:`~securelp.solvers.mdp.ipm.options`, :mod:`~securelp.solvers.mdp.ipm.dissection` (nested
dissection of the mDP graph), :mod:`~securelp.solvers.mdp.ipm.inverses` (the per-output inverses),
:mod:`~securelp.solvers.mdp.ipm.newton` (one Newton system) and :mod:`~securelp.solvers.mdp.ipm.method`
(the iterations).
"""

from securelp.solvers.mdp.ipm.dissection import Dissection, dissection
from securelp.solvers.mdp.ipm.method import IPMResult, memory_needed, structured_ipm
from securelp.solvers.mdp.ipm.options import IPMOptions

__all__ = ["Dissection", "IPMOptions", "IPMResult", "dissection", "memory_needed", "structured_ipm"]
