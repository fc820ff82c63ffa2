"""Metric differential privacy (mDP): datasets, the mDP graph, the PMO LP, partitioners,
Benders decomposition (Qiu), the exponential mechanism and the Linear-Equations mechanism.

Every mechanism this package returns has passed :func:`securelp.solvers.mdp.verify.verify_mechanism`.
Submodules are imported on demand (``from securelp.solvers.mdp.pmo import solve_direct``).
"""
