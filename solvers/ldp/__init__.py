"""Local d-privacy on a finite domain: the Linear-Equations mechanism, its baselines and a simulation.

Modules, in dependency order: :mod:`~securelp.solvers.ldp.options`, :mod:`~securelp.solvers.ldp.domains`,
:mod:`~securelp.solvers.ldp.verification`, :mod:`~securelp.solvers.ldp.kernel` (``exp(-lam d)`` products and
solves), :mod:`~securelp.solvers.ldp.le` (X. Gu, M. Li, Y. Cao, L. Xiong, IEEE CNS 2019),
:mod:`~securelp.solvers.ldp.planar_laplace`, :mod:`~securelp.solvers.ldp.baselines` (GRR, OUE, the
exponential mechanism, planar Laplace) and :mod:`~securelp.solvers.ldp.estimator` (the simulated
collection and its metrics). Every mechanism is verified before use.
"""

from securelp.solvers.ldp.domains import DenseDomain, GridDomain
from securelp.solvers.ldp.estimator import MECHANISMS, LdpResult, build_mechanism, simulate
from securelp.solvers.ldp.options import LdpOptions

__all__ = ["MECHANISMS", "DenseDomain", "GridDomain", "LdpOptions", "LdpResult", "build_mechanism", "simulate"]
