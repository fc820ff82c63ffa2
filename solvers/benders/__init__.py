"""Generic Benders decomposition for block-ladder LPs (see :mod:`solvers.benders.engine`)."""

from solvers.benders.engine import (
    BendersEngine,
    BendersIteration,
    BendersResult,
    LinkedRows,
    MasterSpec,
    RowBlock,
    SubproblemSpec,
)

__all__ = ["BendersEngine", "BendersIteration", "BendersResult", "LinkedRows", "MasterSpec", "RowBlock", "SubproblemSpec"]
