"""Qiu's Benders decomposition of the PMO over a record partition (Qiu Sec. 4-5).

Modules: :mod:`~securelp.solvers.mdp.records.partition` (the partitioners, Sec. 5),
:mod:`~securelp.solvers.mdp.records.options`, :mod:`~securelp.solvers.mdp.records.master` (the
boundary records and Property 3.2's initial cuts), :mod:`~securelp.solvers.mdp.records.blocks` (one
block per subset) and :mod:`~securelp.solvers.mdp.records.driver` (the run and its incumbents).
"""

from securelp.solvers.mdp.records.driver import build_bd_model, solve_records
from securelp.solvers.mdp.records.options import RecordOptions
from securelp.solvers.mdp.records.partition import PARTITIONERS, Partition, partition_records

__all__ = ["PARTITIONERS", "Partition", "RecordOptions", "build_bd_model", "partition_records", "solve_records"]
