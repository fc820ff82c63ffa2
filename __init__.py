"""securelp: several data owners solve one linear program without revealing their data.

Each party holds a private column block ``(A_j, c_j)`` of ``min c'x s.t. lo <= Ax <= hi``, masks
it with a private random matrix and sends only the masked products to a coordinator, which
solves the transformed LP (Mangasarian, *Privacy-Preserving Linear Programming*, Optim. Lett.
2011) and returns its solution; each party alone decodes its own ``x_j``. Every session states
what the coordinator could reconstruct, from attacks run on what it actually saw.

>>> import securelp
>>> res = securelp.solve("afiro.mps", parties=3)     # doctest: +SKIP
>>> res.status, res.objective, res.parties["party1"].x, res.leakage["party1"]["summary"]  # doctest: +SKIP
>>> mech = securelp.optimal_mechanism("grid", eps=0.5, dataset_params={"rows": 4, "cols": 4})  # doctest: +SKIP
>>> release = securelp.census_release("counts.csv", eps="0.5", max_size=20)  # doctest: +SKIP

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
    "optimal_mechanism": "securelp.coordinator.api.mdp",
    "OptimalMechanism": "securelp.coordinator.api.mdp",
    "load_dataset": "securelp.solvers.mdp.datasets",
    "ldp_mechanism": "securelp.coordinator.api.ldp",
    "ldp_perturb": "securelp.coordinator.api.ldp",
    "ldp_estimate": "securelp.coordinator.api.ldp",
    "GridDomain": "securelp.solvers.ldp",
    "DenseDomain": "securelp.solvers.ldp",
    "census_release": "securelp.coordinator.api.census",
    "CensusRelease": "securelp.coordinator.api.census",
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
    "CensusRelease",
    "ConfigError",
    "DenseDomain",
    "ExitCode",
    "GridDomain",
    "InputError",
    "LinearProgram",
    "OptimalMechanism",
    "PartyResult",
    "ProtocolError",
    "ResourceError",
    "SecureLPError",
    "SecureLPResult",
    "SolveStatus",
    "TransportError",
    "__version__",
    "census_release",
    "ldp_estimate",
    "ldp_mechanism",
    "ldp_perturb",
    "load_dataset",
    "optimal_mechanism",
    "read_mps",
    "solve",
    "write_results",
]


#: the engines' namespaces: ``securelp.mdp.optimal_mechanism``, ``securelp.ldp.mechanism``,
#: ``securelp.census.release`` (attributes of ``securelp``, loaded on first use)
_NAMESPACES = {
    "mdp": "securelp.coordinator.api.mdp",
    "ldp": "securelp.coordinator.api.ldp",
    "census": "securelp.coordinator.api.census",
}


def __getattr__(name: str) -> Any:
    if name in _NAMESPACES:
        import importlib

        module = importlib.import_module(_NAMESPACES[name])
        globals()[name] = module
        return module
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'securelp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_NAMESPACES])
