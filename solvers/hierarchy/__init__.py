"""Hierarchical DP group-size releases (PGSR): the data model, exact noise, the six mechanisms.

F. Fioretto, P. Van Hentenryck, K. Zhu, *Differential Privacy of Hierarchical Census Data: An
Optimization Approach*, Artificial Intelligence 296 (2021). Modules, in dependency order (each
imports only modules above it):

- :mod:`.errors`       typed errors with fields (never naming a command-line flag)
- :mod:`.model`        the hierarchy, group-size counts, cumulative counts, dense-size limits
- :mod:`.counts_csv`   validating CSV readers and the writer
- :mod:`.noise`        exact two-sided geometric noise (CKS 2020), the exact privacy budget
- :mod:`.consistency`  the rows of H1/C7 and C8, tree least squares, feasibility checks
- :mod:`.relaxation`   continuous relaxations of Model 1 and Model 3 (HiGHS QP, tree, Dykstra, FISTA)
- :mod:`.baselines`    M_H^r, M_c^r (rounded relaxations) and Census TopDown
- :mod:`.hdp`          M_H^dp: the exact Model 1 DP with its exchange certificate
- :mod:`.cdp`          M_c^dp: Algorithm 2, then the Model 1 DP
- :mod:`.chain`        M_c^ch: the exact Model 3 optimum with a Lagrangian certificate (a package)
- :mod:`.mechanisms`   the six mechanisms end to end, their options, the figures a release may carry
- :mod:`.synthetic`    the census-scale synthetic instance

Tunables are frozen options dataclasses, one per method (:class:`.hdp.HdpOptions`,
:class:`.chain.ChainOptions`, :class:`.baselines.HqpOptions`, :class:`.baselines.CqpOptions`),
validated when built and passed in (:class:`.mechanisms.PostprocessOptions` bundles them).
"""
