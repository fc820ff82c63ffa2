"""Linear programs in general form, MPS input, the HiGHS backend and solve results.

Solving is build -> backend -> result: a frozen ``LinearProgram`` goes to a backend
(``HighsBackend``, importing ``highspy`` lazily) which returns a frozen ``LPResult``.
Infeasible or unbounded is a status, never an exception.
"""

from securelp.solvers.lp.highs import HighsBackend, solve
from securelp.solvers.lp.model import LinearProgram, Sense
from securelp.solvers.lp.mps import read_mps
from securelp.solvers.lp.result import LPResult, SolveStatus

__all__ = ["HighsBackend", "LPResult", "LinearProgram", "Sense", "SolveStatus", "read_mps", "solve"]
