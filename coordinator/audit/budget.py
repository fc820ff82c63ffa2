"""Time budgets of the attacks.

The coordinator always holds the transcript, so every session runs the transcript-only attacks
at its end; they must cost no more than a small multiple of the session. An attack asks the
:class:`Budget` before a step whose cost it can estimate (dense factorizations: flops over a
conservative rate) and between the rounds of an iterative search; an attack that cannot run in
what is left is reported as skipped, with the reason, never silently dropped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: flops per second assumed when estimating a dense factorization (conservative for one core
#: of a laptop: LAPACK reaches 5-20 Gflop/s there)
FLOP_RATE = 2e9


class Budget:
    """A deadline shared by the attacks of one audit.

    Parameters
    ----------
    seconds : total seconds (None: unlimited).
    clock : monotonic clock (tests pass a fake one).
    """

    def __init__(self, seconds: float | None, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.seconds = seconds
        self._clock = clock
        self._start = clock()

    def elapsed(self) -> float:
        return self._clock() - self._start

    def remaining(self) -> float:
        return math.inf if self.seconds is None else self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def allows_flops(self, flops: float) -> bool:
        """Whether a dense computation of about ``flops`` floating-point operations fits."""
        return flops / FLOP_RATE <= self.remaining()

    def refusal(self, what: str, flops: float) -> str:
        """Why a step of ``flops`` is skipped, in words."""
        return (f"{what} needs about {flops / FLOP_RATE:.3g} s at {FLOP_RATE:.0e} flop/s; "
                f"{max(0.0, self.remaining()):.3g} s of the audit's {self.seconds:g} s budget were left")
