"""The column decomposition of the PMO: Dantzig-Wolfe by output column, per mDP-graph component.

Modules, in dependency order: :mod:`~securelp.solvers.mdp.columns.options` (the tunables),
:mod:`~securelp.solvers.mdp.columns.bounds` (certified Lagrangian bounds, dominated outputs),
:mod:`~securelp.solvers.mdp.columns.ascent` (the smoothed dual ascent), :mod:`~securelp.solvers.mdp.columns.pdlp`
(HiGHS's PDLP), :mod:`~securelp.solvers.mdp.columns.optimal_transport` (certificates without an LP),
:mod:`~securelp.solvers.mdp.columns.lazy_rows`, :mod:`~securelp.solvers.mdp.columns.master` (the restricted
master), :mod:`~securelp.solvers.mdp.columns.pricing`, :mod:`~securelp.solvers.mdp.columns.component`,
:mod:`~securelp.solvers.mdp.columns.iterations`, :mod:`~securelp.solvers.mdp.columns.ipm_start`,
:mod:`~securelp.solvers.mdp.columns.starts` and :mod:`~securelp.solvers.mdp.columns.driver`.
"""

from securelp.solvers.mdp.columns.driver import solve_colgen
from securelp.solvers.mdp.columns.options import ColumnGenerationOptions, IPMStartOptions, StartOptions
from securelp.solvers.mdp.columns.starts import FIRST_ORDER_METHODS

__all__ = ["FIRST_ORDER_METHODS", "ColumnGenerationOptions", "IPMStartOptions", "StartOptions", "solve_colgen"]
