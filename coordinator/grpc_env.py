"""gRPC C-core logging for the console script.

gRPC's C core prints its own lines on stderr (e.g. "Handshake failed ..." for every retry),
which would bury the one-line typed error the CLI prints. Unless the user asked for debug
output (``-vv``) or set ``GRPC_VERBOSITY`` themselves, the CLI commands that use gRPC turn
them off before gRPC is first imported; the typed errors carry the details.
"""

from __future__ import annotations

import os


def quiet_grpc_core(verbosity: int) -> None:
    """Set ``GRPC_VERBOSITY=NONE`` (if unset) when ``verbosity`` < 2; call before importing grpc."""
    if verbosity < 2:
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
