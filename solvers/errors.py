"""Typed errors and process exit codes shared by every securelp package area.

Library code raises these; only ``securelp.coordinator.cli.main`` turns them into an exit
code and a one-line message (library code never calls ``sys.exit``).
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes of the ``securelp`` console script (stable, documented)."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    INPUT = 3
    CONFIG = 4
    PROTOCOL = 5
    TRANSPORT = 6
    AUTHENTICATION = 7
    SOLVER = 8
    VERIFICATION = 9
    INFEASIBLE = 10
    UNBOUNDED = 11
    RESOURCE = 12
    INTERRUPTED = 130


class SecureLPError(Exception):
    """Base class of every error securelp raises on purpose.

    ``parameter``: the name of the offending parameter or option field, when one value is to blame
    (an engine names its own parameter; a command turns it into the flag the user gave).
    """

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, *args: object, parameter: str | None = None) -> None:
        super().__init__(*args)
        self.parameter = parameter


class InputError(SecureLPError):
    """A user-supplied file, dataset or value is malformed or out of range."""

    exit_code = ExitCode.INPUT


class ConfigError(SecureLPError):
    """An invalid combination of options or configuration values."""

    exit_code = ExitCode.CONFIG


class ProtocolError(SecureLPError):
    """A peer broke the protocol (wrong shapes, ids, order, checksums)."""

    exit_code = ExitCode.PROTOCOL


class TransportError(SecureLPError):
    """A peer could not be reached, died, or missed its deadline."""

    exit_code = ExitCode.TRANSPORT


class AuthenticationError(TransportError):
    """A TLS handshake or peer identity check failed."""

    exit_code = ExitCode.AUTHENTICATION


class SolverError(SecureLPError):
    """The numerical backend failed (not: the model is infeasible or unbounded)."""

    exit_code = ExitCode.SOLVER


class VerificationError(SecureLPError):
    """A produced mechanism or release failed its privacy/consistency verification."""

    exit_code = ExitCode.VERIFICATION


class ResourceError(SecureLPError):
    """A request would exceed memory or size limits; refused before allocating."""

    exit_code = ExitCode.RESOURCE
