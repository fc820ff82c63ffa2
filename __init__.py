"""securelp: several data owners solve one linear program without revealing their data.

Each party holds a private column block ``(A_j, c_j)`` of ``min c'x s.t. lo <= Ax <= hi``, masks
it with a private random matrix and sends only the masked products to a coordinator, which
solves the transformed LP (Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett.
2011) and returns its solution; each party alone decodes its own ``x_j``. The solver layer also
bundles a metric-differential-privacy engine and a hierarchical-DP engine.

Subpackages (imports point down this list only):

- ``securelp.coordinator``: sessions, transports, the leakage audit, reports and the CLI;
- ``securelp.party``: the data owner's protocol state machine and its gRPC service;
- ``securelp.protos``: the wire messages (package ``securelp.v1``) and their codecs;
- ``securelp.solvers``: pure computation (LP, Benders, metric DP, hierarchical DP).

See docs/architecture.md in the repository for the design.
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("securelp")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
