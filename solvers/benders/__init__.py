"""Generic Benders decomposition for block-ladder LPs (see :mod:`securelp.solvers.benders.engine`)."""

from securelp.solvers.benders.engine import (
    PACE_WINDOW,
    BendersEngine,
    BendersIteration,
    BendersResult,
    LinkedRows,
    MasterSpec,
    RowBlock,
    SubproblemSpec,
)

__all__ = ["PACE_WINDOW", "BendersEngine", "BendersIteration", "BendersResult", "LinkedRows", "MasterSpec", "RowBlock", "SubproblemSpec"]
