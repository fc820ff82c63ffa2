"""Typed errors of the hierarchy engine, with the fields a caller needs to act on them.

Each is a subclass of the shared :mod:`securelp.solvers.errors` classes (so it maps to its exit
code) and carries what went wrong as fields; its message says what, where and what to do, in
the engine's terms (the largest size N, the time limit), never a command-line flag: the CLI
catches these types and names its own flags.
"""

from __future__ import annotations

from securelp.solvers.errors import ConfigError, InputError, ResourceError


def quoted(text: str, width: int = 40) -> str:
    """``text`` quoted for a one-line message, cut after ``width`` characters."""
    return repr(text) if len(text) <= width else repr(text[:width]) + f"... ({len(text)} characters)"


class OptionError(ConfigError):
    """An options dataclass was given a value outside its range (checked once, when it is built)."""

    def __init__(self, options: str, option: str, value: object, requirement: str) -> None:
        self.options, self.option, self.value, self.requirement = options, option, value, requirement
        super().__init__(f"{options}.{option} must be {requirement}, got {value!r}")


class EpsilonError(InputError):
    """A privacy budget that is not a number, not > 0, or outside the exact-fraction rule."""

    def __init__(self, text: str, problem: str) -> None:
        self.text, self.problem = text, problem
        super().__init__(f"eps {quoted(text)}: {problem}")


class CountsFileError(InputError):
    """A counts or noisy-values file that does not validate; ``line`` is None for a problem of the whole file."""

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source, self.problem, self.line = source, problem, line
        super().__init__(f"{source if line is None else f'{source} line {line}'}: {problem}")


class HierarchyError(InputError):
    """Regions that do not form one rooted tree with every leaf at the same depth (``regions``: examples)."""

    def __init__(self, problem: str, regions: list[str]) -> None:
        self.problem, self.regions = problem, regions
        super().__init__(problem)


class SizeDomainError(InputError):
    """A file holds sizes above the largest size N it is read with."""

    def __init__(self, source: str, largest: int, max_size: int) -> None:
        self.source, self.largest, self.max_size = source, largest, max_size
        super().__init__(f"{source}: sizes go up to {largest} but the largest size N is {max_size}; "
                         f"read it with N >= {largest}")


class TooFewSizesError(InputError):
    """A largest size N below what an instance needs (the synthetic census spans sizes 1..N, N >= 10)."""

    def __init__(self, what: str, max_size: int, minimum: int) -> None:
        self.what, self.max_size, self.minimum = what, max_size, minimum
        super().__init__(f"{what} needs a largest size N >= {minimum}, got {max_size}")


class DomainTooLargeError(ResourceError):
    """A dense regions x sizes array above the cell limit, or beyond the memory available.

    ``needed`` and ``fits`` are set for the memory check (a text such as "1.2 GiB ... available"
    and the number of cells that would fit), None for the cell limit.
    """

    def __init__(self, what: str, regions: int, sizes: int, limit: int, needed: str | None = None,
                 bytes_per_cell: float | None = None, fits: int | None = None) -> None:
        self.what, self.regions, self.sizes, self.limit = what, regions, sizes, limit
        self.needed, self.bytes_per_cell, self.fits = needed, bytes_per_cell, fits
        cells = regions * sizes
        if needed is None:
            why = f"exceeds the limit of {limit:,}"
        else:
            why = (f"need about {needed} (estimate: {bytes_per_cell:g} bytes per cell); about {fits:,} cells "
                   f"would fit")
        super().__init__(f"{what}: {regions} regions x {sizes} sizes = {cells:,} cells {why}: use fewer sizes "
                         f"(a smaller largest size N) or a smaller hierarchy")


class TableLimitError(ResourceError):
    """The exact Model 1 DP would need windows whose tables exceed the cell limit or the memory."""

    def __init__(self, halfwidth: int, sizes: int, cells: int, limit: int | None = None,
                 shortfall: str | None = None) -> None:
        self.halfwidth, self.sizes, self.cells, self.limit, self.shortfall = halfwidth, sizes, cells, limit, shortfall
        why = f"({cells:,} table cells > {limit:,})" if shortfall is None else f"({cells:,} table cells held): {shortfall}"
        super().__init__(f"the exact DP needs windows of half-width {halfwidth} for {sizes} sizes {why}; the noise "
                         f"is too large for this hierarchy/total")


class TimeLimitReached(ResourceError):
    """The caller's time limit ran out before a certified release; ``where`` says where it stopped."""

    def __init__(self, where: str, time_limit: float | None = None) -> None:
        self.where, self.time_limit = where, time_limit
        if time_limit is None:
            super().__init__(where)
        else:
            super().__init__(f"chain: no certified release within the time limit ({time_limit:g} s of "
                             f"post-processing; stopped {where}); allow more time, or use hdp or cdp (exact and "
                             f"much faster at this scale)")

    def at(self, where: str) -> TimeLimitReached:
        """The same stop, its place completed (e.g. with the LP round)."""
        return TimeLimitReached(f"{self.where} {where}", self.time_limit)

    def limited(self, time_limit: float) -> TimeLimitReached:
        """The same stop, with the limit that ran out (the message a caller shows)."""
        return TimeLimitReached(self.where, time_limit)


class ChainLimitError(ResourceError):
    """The exact Model 3 solve needs more than one of its limits allows (``limit`` names it)."""

    def __init__(self, limit: str, detail: str) -> None:
        self.limit, self.detail = limit, detail
        super().__init__(f"chain: {detail}")


class NoCertificateError(ResourceError):
    """No certified Model 3 optimum could be found for these noisy values (no release)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"chain: {reason}")


def check_option(options: object, option: str, ok: bool, requirement: str) -> None:
    """Raise OptionError naming ``options``' class and field ``option`` unless ``ok``."""
    if not ok:
        raise OptionError(type(options).__name__, option, getattr(options, option), requirement)
