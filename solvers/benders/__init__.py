"""Generic Benders decomposition for block-ladder LPs (J. F. Benders 1962; Qiu Sec. 4), with HiGHS.

Modules, in dependency order: :mod:`~securelp.solvers.benders.model` (the problem and the result),
:mod:`~securelp.solvers.benders.options` (the tunables), :mod:`~securelp.solvers.benders.highs_calls`
(HiGHS runs), :mod:`~securelp.solvers.benders.cuts`, :mod:`~securelp.solvers.benders.blocks`,
:mod:`~securelp.solvers.benders.master`, :mod:`~securelp.solvers.benders.stopping` and
:mod:`~securelp.solvers.benders.driver` (the iterations).
"""

from securelp.solvers.benders.driver import BendersEngine
from securelp.solvers.benders.model import (
    BendersIteration,
    BendersResult,
    LinkedRows,
    MasterSpec,
    RowBlock,
    SubproblemSpec,
)
from securelp.solvers.benders.options import BendersOptions

__all__ = ["BendersEngine", "BendersIteration", "BendersOptions", "BendersResult", "LinkedRows", "MasterSpec",
           "RowBlock", "SubproblemSpec"]
