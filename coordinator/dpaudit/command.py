"""``securelp audit --protocol census|ldp|lp [--runs N] [--eps E] [--confidence C] [--json R] [--seed S]``.

The options of the end-to-end privacy audit on the ``audit`` subcommand (whose ``TRANSCRIPT`` form
runs the leakage attacks on a secure LP transcript, unchanged), and the run: one line for people,
a JSON report (``kind: "dpaudit"``), exit code 9 (:attr:`ExitCode.VERIFICATION`) when the audit
shows a protocol to violate its claim. ``--plant`` runs a protocol with a deliberately planted leak
(test-only: the negative controls that show the audit can fail); ``--views FILE`` audits recorded
views instead of running the protocol, ``--save-views FILE`` records the runs' views.
"""

from __future__ import annotations

import argparse
from typing import Any

from securelp.solvers.errors import ConfigError, ExitCode

__all__ = ["PROTOCOLS", "add_protocol_arguments", "refuse_protocol_options", "run_protocol_audit"]

PROTOCOLS = ("census", "ldp", "lp")
#: the mechanisms of each protocol's ``--mechanism``
CENSUS_MECHANISMS = ("hdp", "cdp", "chain", "hqp", "cqp", "topdown")
LDP_MECHANISMS = ("le", "grr", "oue", "em", "pl")
#: options of the protocol audit only (dest -> flag)
_PROTOCOL_ONLY = {"runs": "--runs", "eps": "--eps", "confidence": "--confidence", "plant": "--plant",
                  "mechanism": "--mechanism", "views": "--views", "save_views": "--save-views"}
#: options of the transcript audit only (dest -> flag)
_TRANSCRIPT_ONLY = {"truth": "--truth", "known_rows": "--known-rows", "recovered": "--recovered"}


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a confidence in (0, 1) such as 0.95, got {text!r}")
    return value


def add_protocol_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--protocol`` options of ``securelp audit``."""
    from securelp.coordinator.commands.common import positive_float, positive_int

    g = p.add_argument_group("end-to-end privacy audit (instead of TRANSCRIPT)")
    g.add_argument("--protocol", choices=PROTOCOLS, default=None,
                   help="run this protocol many times on two neighbouring inputs and bound its eps from below: census "
                        "(federated regional release), ldp (local-privacy collection), lp (secure LP: no DP claim)")
    g.add_argument("--runs", type=positive_int, default=None, metavar="N",
                   help="runs per input (default 2000, or every view of --views; half choose the distinguishing event, half evaluate it)")
    g.add_argument("--eps", type=positive_float, default=None, metavar="E",
                   help="the claimed eps the protocol runs with (default 1; ldp: per distance unit)")
    g.add_argument("--confidence", type=_confidence, default=None, metavar="C",
                   help="confidence of the Clopper-Pearson lower bound (default 0.95)")
    g.add_argument("--mechanism", default=None, choices=(*CENSUS_MECHANISMS, *LDP_MECHANISMS),
                   help="census: hdp, cdp (default), chain, hqp, cqp, topdown; ldp: le (default), grr, oue, em, pl")
    g.add_argument("--plant", default=None, choices=("count-in-message", "half-noise", "report-field"),
                   help="TEST ONLY: run the protocol with a planted leak (the true count in a message; noise at half "
                        "the claimed scale; the truth in a report field); the audit must flag it")
    g.add_argument("--views", metavar="FILE.jsonl", default=None,
                   help="audit recorded views (JSON lines, as --save-views writes them) instead of running the protocol")
    g.add_argument("--save-views", metavar="FILE.jsonl", default=None,
                   help="also write every run's view (what the coordinator saw) to FILE.jsonl")


def refuse_protocol_options(args: argparse.Namespace) -> None:
    """ConfigError when the transcript audit is given an option of the protocol audit."""
    given = [flag for dest, flag in _PROTOCOL_ONLY.items() if getattr(args, dest, None) is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} belong to the protocol audit: give --protocol census|ldp|lp instead of "
                          "TRANSCRIPT, or drop them")


def _source(args: argparse.Namespace, eps: float) -> Any:
    from securelp.coordinator.dpaudit.census import CensusFederatedViews
    from securelp.coordinator.dpaudit.ldp import LdpCollectionViews
    from securelp.coordinator.dpaudit.lp import LpSessionViews
    from securelp.coordinator.dpaudit.views import RecordedViews

    if args.views is not None:
        if args.plant is not None or args.mechanism is not None:
            raise ConfigError("--plant and --mechanism choose how the protocol runs; recorded --views are audited "
                              "as they are")
        source = RecordedViews(args.views, claimed_eps=args.eps)
        if args.protocol is not None and source.protocol not in (args.protocol, "recorded"):
            raise ConfigError(f"{args.views} holds views of protocol {source.protocol!r}, not {args.protocol!r}")
        return source
    wrong = {"census": LDP_MECHANISMS, "ldp": CENSUS_MECHANISMS}.get(args.protocol, ())
    if args.mechanism in wrong:
        raise ConfigError(f"--mechanism {args.mechanism} is not a mechanism of {args.protocol}; choose one of "
                          f"{', '.join(CENSUS_MECHANISMS if args.protocol == 'census' else LDP_MECHANISMS)}")
    if args.protocol == "census":
        return CensusFederatedViews(str(eps), mechanism=args.mechanism or "cdp", plant=args.plant)
    if args.protocol == "ldp":
        return LdpCollectionViews(eps, mechanism=args.mechanism or "le", plant=args.plant)
    if args.plant is not None or args.mechanism is not None:
        raise ConfigError("the secure LP makes no DP claim: --plant and --mechanism apply to census and ldp")
    if args.eps is not None:
        raise ConfigError("the secure LP makes no DP claim, so it has no --eps: its audit reports the measured "
                          "distinguishability")
    return LpSessionViews()


class _Recording:
    """A view source that keeps every view it hands out (for ``--save-views``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.protocol = inner.protocol
        self.claimed_eps = inner.claimed_eps
        self.kept: list[tuple[int, Any]] = []

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def views(self, side: int, runs: int, rng: Any) -> list[Any]:
        out = self.inner.views(side, runs, rng)
        self.kept.extend((side, v) for v in out)
        return out


def run_protocol_audit(args: argparse.Namespace) -> int:
    """Run the audit the options ask for; 9 when the protocol violates its claim, else 0."""
    from securelp.coordinator.commands.common import summary_stream
    from securelp.coordinator.dpaudit.audit import audit_protocol
    from securelp.coordinator.dpaudit.views import write_views
    from securelp.coordinator.report import REPORT_VERSION
    from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report

    if args.protocol is None and args.views is None:
        raise ConfigError("give TRANSCRIPT (the leakage attacks on a session transcript) or --protocol "
                          "census|ldp|lp (the end-to-end privacy audit)")
    if args.transcript is not None:
        raise ConfigError(f"give either TRANSCRIPT ({args.transcript}) or --protocol/--views, not both")
    given = [flag for dest, flag in _TRANSCRIPT_ONLY.items() if getattr(args, dest, None) is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} belong to the transcript audit (securelp audit TRANSCRIPT)")
    check_writable(args.json, "--json")
    check_writable(args.save_views, "--save-views")
    check_distinct([("--json", args.json), ("--save-views", args.save_views)], [("--views", args.views)])
    eps = 1.0 if args.eps is None else args.eps
    confidence = 0.95 if args.confidence is None else args.confidence
    source = _source(args, eps)
    if args.runs is not None:
        runs = args.runs
    elif hasattr(source, "available"):  # recorded views: all of them, as many of each input
        runs = min(source.available(0), source.available(1))
    else:
        runs = 2000
    recording = _Recording(source) if args.save_views else None
    result = audit_protocol(recording or source, runs, confidence, seed=args.seed)
    out = summary_stream(args)
    if out is not None:  # --quiet: no summary
        print(result.summary(), file=out)
        if args.plant:
            print(f"  (TEST ONLY: the protocol ran with the planted leak {args.plant!r})", file=out)
    if recording is not None:
        write_views(args.save_views, recording.kept,
                    {"protocol": result.protocol, "claimed_eps": result.claimed_eps, **result.setup})
    if args.json:
        write_json_report(args.json, {"report_version": REPORT_VERSION, "kind": "dpaudit", **result.as_dict(),
                                      "plant": args.plant, "seed": args.seed})
    return int(ExitCode.VERIFICATION) if result.violated else 0
