"""One protocol audit: collect the runs of both inputs, distinguish, compare with the claim.

The runs are collected in alternating chunks (D0, D1, D0, ...), so a drift of the machine during
the audit touches both inputs alike; each run draws fresh randomness from its own child of the
audit's generator. The verdict compares the held-out lower bound with the protocol's claim:
``VIOLATES its claim`` when ``eps_lb > claimed eps`` (a false alarm has probability at most
``1 - confidence`` for a protocol that meets its claim), ``consistent`` otherwise, ``no claim``
for a protocol that claims no DP (its bound is reported as measured distinguishability).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from securelp.coordinator.dpaudit.harness import DistinguishingResult, distinguish
from securelp.coordinator.dpaudit.views import View, ViewSource, flatten_views
from securelp.solvers.errors import InputError
from securelp.solvers.randomness import SecureRandom

__all__ = ["CONSISTENT", "NO_CLAIM", "VIOLATES", "ProtocolAudit", "audit_protocol", "collect_views"]

log = logging.getLogger(__name__)

CONSISTENT = "consistent"
VIOLATES = "VIOLATES its claim"
NO_CLAIM = "no claim"


@dataclass(frozen=True)
class ProtocolAudit:
    """The audit of one protocol on one neighbouring pair."""

    protocol: str
    claimed_eps: float | None
    runs: int
    result: DistinguishingResult
    seconds: float
    setup: dict[str, Any]
    reproducible: bool

    @property
    def eps_lb(self) -> float:
        """The held-out Clopper-Pearson lower bound on eps."""
        return self.result.eps_lb

    @property
    def verdict(self) -> str:
        """:data:`VIOLATES`, :data:`CONSISTENT` or :data:`NO_CLAIM`."""
        if self.claimed_eps is None:
            return NO_CLAIM
        return VIOLATES if self.eps_lb > self.claimed_eps else CONSISTENT

    @property
    def violated(self) -> bool:
        """True when the lower bound exceeds the claim."""
        return self.verdict == VIOLATES

    def summary(self) -> str:
        """One line for people."""
        claim = "no DP claim" if self.claimed_eps is None else f"claimed eps {self.claimed_eps:g}"
        line = (f"securelp audit --protocol {self.protocol}: eps >= {self.eps_lb:.3f} at {self.result.confidence:.0%} "
                f"confidence ({claim}; {self.runs} runs per input, event: {self.result.event.describe()}): "
                f"{self.verdict}")
        if self.claimed_eps is not None and self.result.max_detectable_eps <= self.claimed_eps:
            line += (f" -- too few runs to flag this claim: {self.result.n_test} held-out runs show at most eps "
                     f"{self.result.max_detectable_eps:.3f}")
        return line

    def as_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "claimed_eps": self.claimed_eps, "eps_lower_bound": self.eps_lb,
                "confidence": self.result.confidence, "runs_per_input": self.runs, "verdict": self.verdict,
                "event": self.result.as_dict()["event"], "seconds": self.seconds, "reproducible": self.reproducible,
                "distinguishing": self.result.as_dict(), "setup": self.setup}


def collect_views(source: ViewSource, runs: int, rng: SecureRandom, chunk: int = 250
                  ) -> tuple[list[View], list[View]]:
    """``runs`` views of each input, collected in alternating chunks of at most ``chunk`` runs."""
    if runs < 8:
        raise InputError(f"--runs must be at least 8 (a quarter fits the scores, a quarter chooses the event, half "
                         f"evaluates it), got {runs}", parameter="runs")
    out: tuple[list[View], list[View]] = ([], [])
    done, i = 0, 0
    while done < runs:
        step = min(chunk, runs - done)
        for side in (0, 1):
            out[side].extend(source.views(side, step, rng.spawn(f"chunk{i}/D{side}")))
        done += step
        i += 1
        log.info("dpaudit %s: %d of %d runs per input", source.protocol, done, runs)
    return out


def audit_protocol(source: ViewSource, runs: int = 2000, confidence: float = 0.95,
                   seed: int | str | None = None, *, chunk: int = 250) -> ProtocolAudit:
    """Audit ``source``'s protocol: ``runs`` runs of each neighbouring input, the event chosen on the
    first half, the bound from the second.

    Parameters
    ----------
    source:
        The protocol adapter or recorded views (:class:`~securelp.coordinator.dpaudit.views.ViewSource`).
    runs:
        Runs per input (at least 8).
    confidence:
        Confidence of the lower bound.
    seed:
        ``None``: fresh OS entropy; a seed makes the audit's runs reproducible (tests, benchmarks).
    """
    start = time.perf_counter()
    rng = SecureRandom(seed, label=f"dpaudit/{source.protocol}")
    v0, v1 = collect_views(source, runs, rng, chunk)
    b0 = flatten_views(v0 + v1)  # one feature set for both inputs (a field of one input only shows up)
    d0 = type(b0)(b0.names, b0.values[:len(v0)])
    d1 = type(b0)(b0.names, b0.values[len(v0):])
    result = distinguish(d0, d1, confidence)
    seconds = time.perf_counter() - start
    log.info("dpaudit %s: %d features, eps_lb %.3f, %.2f s", source.protocol, len(b0.names), result.eps_lb, seconds)
    return ProtocolAudit(source.protocol, source.claimed_eps, runs, result, seconds,
                         {**source.describe(), "features": len(b0.names)}, rng.reproducible)
