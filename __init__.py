"""securelp: several data owners solve one linear program without revealing their data.

Each party holds a private column block ``(A_j, c_j)`` of ``min c'x s.t. lo <= Ax <= hi``, masks
it with a private random matrix and sends only the masked products to a coordinator, which
solves the transformed LP (Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett.
2011) and returns its solution; each party alone decodes its own ``x_j``. Every session states
what the coordinator could reconstruct, from attacks run on what it actually saw.

>>> import securelp
>>> res = securelp.solve("afiro.mps", parties=3)     # doctest: +SKIP
>>> res.status, res.objective, res.parties["party1"].x, res.leakage["party1"]["summary"]  # doctest: +SKIP

The solver layer also bundles a metric-differential-privacy engine and a hierarchical-DP
engine. Subpackages (imports point down this list only):

- ``securelp.coordinator``: sessions, transports, the leakage audit, reports, the CLI, the API;
- ``securelp.party``: the data owner's protocol state machine and its gRPC service;
- ``securelp.protos``: the wire messages (package ``securelp.v1``) and their codecs;
- ``securelp.solvers``: pure computation (LP, Benders, metric DP, LDP, hierarchical DP).

The design is described in docs/explanation/architecture.md of the repository.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("securelp")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

#: the public API, imported on first use so that ``import securelp`` stays light
_EXPORTS = {
    "solve": "securelp.coordinator.api.lp",
    "write_results": "securelp.coordinator.api.lp",
    "SecureLPResult": "securelp.coordinator.api.lp",
    "PartyResult": "securelp.coordinator.api.lp",
    "LinearProgram": "securelp.solvers.lp",
    "SolveStatus": "securelp.solvers.lp",
    "read_mps": "securelp.solvers.lp",
    "SecureLPError": "securelp.solvers.errors",
    "InputError": "securelp.solvers.errors",
    "ConfigError": "securelp.solvers.errors",
    "ProtocolError": "securelp.solvers.errors",
    "TransportError": "securelp.solvers.errors",
    "ResourceError": "securelp.solvers.errors",
    "ExitCode": "securelp.solvers.errors",
}

__all__ = [
    "ConfigError",
    "ExitCode",
    "InputError",
    "LinearProgram",
    "PartyResult",
    "ProtocolError",
    "ResourceError",
    "SecureLPError",
    "SecureLPResult",
    "SolveStatus",
    "TransportError",
    "__version__",
    "read_mps",
    "solve",
    "write_results",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'securelp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
