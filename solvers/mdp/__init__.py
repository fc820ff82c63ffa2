"""Metric differential privacy (mDP): optimal perturbation mechanisms by the PMO LP (Qiu).

Modules a reader looks for: :mod:`~securelp.solvers.mdp.datasets` (the secret datasets),
:mod:`~securelp.solvers.mdp.graph` (the mDP neighbour graph), :mod:`~securelp.solvers.mdp.verify` (the
privacy check every mechanism passes), :mod:`~securelp.solvers.mdp.pmo` (the LP),
:mod:`~securelp.solvers.mdp.report` (what a solve returns), :mod:`~securelp.solvers.mdp.expmech` (the
exponential mechanism), :mod:`~securelp.solvers.mdp.repair` (exact repair), :mod:`~securelp.solvers.mdp.direct`
(HiGHS on the whole LP), :mod:`~securelp.solvers.mdp.records` (Qiu's Benders decomposition over a record
partition), :mod:`~securelp.solvers.mdp.columns` (the column decomposition) with
:mod:`~securelp.solvers.mdp.ipm` (its structured interior-point method), :mod:`~securelp.solvers.mdp.bd`
(either decomposition), :mod:`~securelp.solvers.mdp.perturb` (saved mechanisms and releases),
:mod:`~securelp.solvers.mdp.sampling` (exact sampling of a verified matrix's rows) and
:mod:`~securelp.solvers.mdp.plotting`. Every mechanism this package returns has passed
:func:`securelp.solvers.mdp.verify.verify_mechanism`.
"""
