"""``securelp census``: hierarchical DP group-size releases (PGSR), and their non-private evaluation.

``securelp census release (--data FILE --max-size N | --synthetic census) --eps E --mechanism M
[--seed S] [--repeat R] [--json R] [--out released.csv] [--noisy-out noisy.csv]`` adds exact
geometric noise to the true counts (or cumulative counts) and post-processes them;
``securelp census postprocess --noisy FILE --total G --mechanism M [--json R] [--out F]`` only
post-processes given noisy values; ``securelp census evaluate`` runs the same releases and
compares them with the true counts (NOT private). JSON keys are documented in docs/reference/reports.md.

What leaves a release is a function of the noisy measurements and of public parameters only
(the hierarchy, the public total G, the size domain 1..N, eps, the mechanism): the true counts
are read, noised, and used for nothing else. The report, the ``--out`` and ``--noisy-out``
files, the progress lines and the engine's log lines are all computed after the noise, from
the noisy values; timings are those of the post-processing (a function of the noisy values).
N is public: with ``--data`` it must be given (``--max-size``) and larger groups are counted at
size N, since a default read from the data, or a refusal, would disclose the largest group.
Errors against the truth are computed only by ``evaluate``, whose output says first that it is
not private.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import io
import logging
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from securelp.coordinator.commands.common import (
    DeprecatedAlias,
    add_output_arguments,
    non_negative_int,
    not_private_seed_help,
    positive_int,
    print_summary,
    refuse_inapplicable,
)
from securelp.coordinator.reporting import (
    check_distinct,
    check_writable,
    human_stream,
    quiet_output,
    write_json_report,
)
from securelp.solvers.errors import ConfigError, InputError, ResourceError
from securelp.solvers.files import write_atomically, written_together
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.chain import ChainOptions
from securelp.solvers.hierarchy.counts_csv import counts_csv_text, read_counts_csv, read_noisy_csv
from securelp.solvers.hierarchy.errors import (
    DomainTooLargeError,
    EpsilonError,
    SizeDomainError,
    TimeLimitReached,
    TooFewSizesError,
    quoted,
)
from securelp.solvers.hierarchy.model import MAX_COUNT, GroupSizeData, Hierarchy, to_cumulative
from securelp.solvers.hierarchy.noise import parse_epsilon
from securelp.solvers.hierarchy.synthetic import census_synthetic
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)


#: Default wall-clock limit (s) of one chain release from the CLI (the library has none).
CHAIN_TIME_LIMIT = 1800.0
#: Largest size of the synthetic census instance when --max-size is not given.
SYNTHETIC_MAX_SIZE = 1000
#: The first line of every evaluation's human output (and the report's ``evaluation`` key).
NOT_PRIVATE = ("NOT PRIVATE: evaluation against the true counts (errors computed from them); "
               "do not publish this output, publish only 'securelp census release'")
#: ``--seed``'s help: a seeded noise can be recomputed, so nothing drawn from it is private.
SEED_HELP = not_private_seed_help("the noise", "the noise")


def _add_time_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=float, default=CHAIN_TIME_LIMIT, metavar="SECONDS",
                   help=f"chain only: give up (no release, exit 12) when one exact solve has not been certified "
                        f"after this many seconds (default {CHAIN_TIME_LIMIT:g}; 0: no limit)")


def _time_limit(args: argparse.Namespace) -> float | None:
    """The checked --time-limit: seconds, or None for 0 (no limit)."""
    value = args.time_limit
    if value == 0:
        return None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"--time-limit must be a positive number of seconds (or 0 for no limit), got {value}")
    return value


@contextlib.contextmanager
def _flags() -> Iterator[None]:
    """The engine's typed errors in the terms of this command's flags (the engine never names them)."""
    try:
        yield
    except EpsilonError as exc:
        raise InputError(f"--eps {quoted(exc.text)}: {exc.problem}") from None
    except SizeDomainError as exc:
        raise InputError(f"{exc.source}: sizes go up to {exc.largest} but --max-size is {exc.max_size}") from None
    except TooFewSizesError as exc:
        raise InputError(f"{exc.what} needs --max-size >= {exc.minimum}, got {exc.max_size}") from None
    except DomainTooLargeError as exc:
        raise ResourceError(f"{exc} (--max-size sets N)") from None
    except TimeLimitReached as exc:
        raise ResourceError(f"{exc} (--time-limit SECONDS; 0: no limit)") from None


def _with_flags(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        with _flags():
            return run(args)

    return wrapped


def _options(args: argparse.Namespace) -> mech.PostprocessOptions:
    """The engine's options from the flags (``--time-limit`` bounds ``chain``)."""
    return mech.PostprocessOptions(chain=ChainOptions(time_limit=_time_limit(args)))


def _add_noise_options(p: argparse.ArgumentParser, max_size_help: str, *, parties: bool = False) -> None:
    """The options shared by ``release``, ``evaluate`` and ``federated``: the true data and the noise
    (``parties``: or the public hierarchy alone, the counts staying with running party processes)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="FILE", help="CSV level,region_id,parent_id,size,count")
    src.add_argument("--synthetic", choices=["census"], help="the bundled census-scale synthetic instance")
    if parties:
        src.add_argument("--hierarchy", metavar="FILE",
                         help="coordinate running party processes (--party NAME=HOST:PORT, or --listen HOST:PORT "
                              "for parties that connect) instead of simulating them: the public hierarchy, a CSV "
                              "with columns region_id,parent_id (and level; no counts: the coordinator reads none)")
    p.add_argument("--eps", required=True, help="privacy budget eps > 0 (decimal, read exactly)")
    p.add_argument("--mechanism", required=True, choices=mech.MECHANISMS)
    p.add_argument("--seed", default=None, help=SEED_HELP)
    p.add_argument("--repeat", type=positive_int, default=1, metavar="R", help="independent releases (default 1)")
    p.add_argument("--max-size", type=positive_int, default=None, metavar="N", help=max_size_help)
    p.add_argument("--data-seed", type=non_negative_int, default=None,
                   help="--synthetic only: seed of the (public) synthetic instance (default 0)")
    p.add_argument("--synthetic-seed", dest="data_seed", type=non_negative_int, action=DeprecatedAlias,
                   new="--data-seed")
    p.add_argument("--total", type=non_negative_int, default=None, metavar="G",
                   help="optional check: the public total G must equal the data's number of groups")
    _add_time_limit(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "census",
        help="hierarchical DP group-size releases (PGSR)",
        description="Consistent differentially private releases of hierarchical group-size counts "
        "(Fioretto, Van Hentenryck, Zhu, AIJ 2021). See docs/explanation/census.md.",
    )
    csub = p.add_subparsers(dest="census_command", metavar="ACTION")
    csub.required = True
    r = csub.add_parser("release", help="add exact geometric noise and post-process",
                        description="Release noisy, post-processed group-size counts of a hierarchy. Everything "
                        "it writes, prints and logs is computed from the noisy values and public parameters.")
    _add_noise_options(r, "the public largest group size N; required with --data (groups larger than N are "
                          "counted at size N, which then means 'N or more'); synthetic: default 1000")
    add_output_arguments(r)
    r.add_argument("--out", metavar="CSV", default=None, help="write the (last) released counts here")
    r.add_argument("--noisy-out", metavar="CSV", default=None,
                   help="write the (last) noisy measurements here (level,region_id,parent_id,size,noisy_count: "
                        "noisy counts, or noisy cumulative counts c_s = #groups of size >= s for cdp/chain/cqp); "
                        "'census postprocess' on them gives the same release")
    r.set_defaults(func=_with_flags(run_release))
    q = csub.add_parser("postprocess", help="post-process given noisy values only",
                        description="Post-process noisy values (CSV level,region_id,parent_id,size,noisy_count): "
                        "noisy counts for hdp/hqp/topdown, noisy cumulative counts c_s = #groups of size >= s "
                        "for cdp/cqp/chain.")
    q.add_argument("--noisy", required=True, metavar="FILE")
    q.add_argument("--total", required=True, type=non_negative_int, metavar="G", help="public number of groups G")
    q.add_argument("--mechanism", required=True, choices=mech.MECHANISMS)
    q.add_argument("--max-size", type=positive_int, default=None, metavar="N",
                   help="largest group size (default: the largest size in the file)")
    q.add_argument("--cumulative-order", choices=["ge", "le"], default=None,
                   help="cdp/chain/cqp only: ge (default) c_s = #groups of size >= s (c_1 = total); "
                        "le: c_s = #groups of size <= s (c_N = total)")
    add_output_arguments(q)
    q.add_argument("--out", metavar="CSV", default=None, help="write the post-processed counts here")
    _add_time_limit(q)
    q.set_defaults(func=_with_flags(run_postprocess))
    e = csub.add_parser("evaluate", help="NOT PRIVATE: releases compared with the true counts",
                        description="NOT PRIVATE. Run the same releases as 'census release' and compare them "
                        "with the true counts (L1 error per level). Its output is computed from the true "
                        "counts: never publish it.")
    _add_noise_options(e, "largest group size N (groups larger than N are counted at size N); default: the "
                          "data's largest size, synthetic: 1000")
    add_output_arguments(e)
    e.set_defaults(func=_with_flags(run_evaluate))
    f = csub.add_parser("federated", help="a regional release in which no process sees a count it does not own",
                        description="Simulate the protocol census-federated in one command: one party per region "
                        "of --level (each holds only its subtree's counts and adds its own regions' noise; the "
                        "regions above get exact noise shares summed under secure aggregation), a coordinator that "
                        "assembles and post-processes. See docs/howto/federated-census.md.")
    _add_noise_options(f, "the public largest group size N; required with --data and --hierarchy (groups larger "
                          "than N are counted at size N); synthetic: default 1000", parties=True)
    f.add_argument("--party", action="append", default=None, metavar="NAME=HOST:PORT", dest="parties",
                   help="with --hierarchy: a running party (securelp party --listen ... --census FILE), dialed with "
                        "mutual TLS; repeat once per region of --level. With --listen: NAME only, the parties "
                        "admitted (by their certificates' names; default: the first that connect, one per region)")
    f.add_argument("--listen", metavar="HOST:PORT", default=None,
                   help="with --hierarchy, instead of --party: dial-out: listen on this address for the running "
                        "parties (securelp party --connect ... --census FILE), one per region of --level; no data "
                        "owner opens an inbound port. Prints LISTENING HOST:PORT")
    f.add_argument("--certs", metavar="DIR", default=None,
                   help="with --party or --listen: directory with ca.pem and coordinator.pem/.key (securelp certs)")
    f.add_argument("--insecure", action="store_true",
                   help="with --party or --listen: plaintext gRPC (for debugging only)")
    f.add_argument("--wait", type=float, default=30.0, metavar="S",
                   help="with --party: seconds to wait for every party to report SERVING; with --listen: for every "
                        "party to connect (default 30)")
    f.add_argument("--level", "--parties-level", dest="level", type=positive_int, default=2, metavar="L*",
                   help="the party level: one party per region of this level (2 = the root's children, e.g. "
                        "states; default 2)")
    f.add_argument("--transport", choices=["inprocess", "grpc"], default=None,
                   help="--data or --synthetic: inprocess: simulated parties, every message through protobuf "
                        "(default); grpc: one gRPC server per party on 127.0.0.1 with mutual TLS and fresh "
                        "certificates (running parties, --hierarchy, always talk gRPC)")
    f.add_argument("--deadline", type=float, default=600.0, metavar="S", help="deadline of each call (default 600)")
    f.add_argument("--out", metavar="DIR", default=None,
                   help="write each party's released rows to DIR/<party>.csv (level,region_id,parent_id,size,count)")
    add_output_arguments(f)
    f.add_argument("--transcript", metavar="FILE", default=None,
                   help="write what the coordinator received and sent, per party, to FILE (binary)")
    f.set_defaults(func=_with_flags(run_federated))
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _check_total(total: int | None) -> None:
    """--total within the bound on counts (2**50), as the data files."""
    if total is not None and total > MAX_COUNT:
        raise InputError(f"--total {total} exceeds the largest accepted total 2**50 = {MAX_COUNT:,}")


def _progress(args: argparse.Namespace, text: str) -> None:
    if not (args.quiet or quiet_output(args.json)):
        print(text, file=sys.stderr, flush=True)


def _summary(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Means (and standard deviations) of the per-run figures ``keys``; ``total_matches`` of every run."""
    out: dict[str, Any] = {}
    for key in keys:
        vals = np.array([float(r[key]) for r in runs])
        out[key] = float(vals.mean()) if len(runs) > 1 else runs[0][key]
        out[f"{key}_sd"] = float(vals.std(ddof=1)) if len(runs) > 1 else 0.0
    out["total_matches"] = all(bool(r["total_matches"]) for r in runs)
    return out


def _check_outputs(args: argparse.Namespace) -> None:
    """The report and counts paths, before any work."""
    written = [("--json", args.json), ("--out", getattr(args, "out", None)),
               ("--noisy-out", getattr(args, "noisy_out", None))]
    for flag, path in written:
        check_writable(path, flag)
    inputs = [(flag, getattr(args, key, None)) for flag, key in (("--data", "data"), ("--noisy", "noisy"))]
    check_distinct(written, inputs)


def _true_data(args: argparse.Namespace, *, public_max_size: bool) -> tuple[GroupSizeData, str]:
    """The true counts and a description of their source, checked against ``--total``.

    With ``public_max_size`` (a release) the size domain 1..N is public: ``--data`` needs
    ``--max-size`` and larger groups are top-coded at N. An evaluation may take N from the data.
    """
    _check_total(args.total)
    bytes_per_cell = mech.BYTES_PER_CELL[args.mechanism]
    if args.data:
        if args.data_seed is not None:
            raise InputError("--data-seed is for --synthetic census only; --data FILE is read as it is "
                             "(remove --data-seed)")
        if public_max_size and args.max_size is None:
            raise InputError("--data needs --max-size N, the largest group size, chosen without looking at the data: "
                             "the size domain is part of the release, and one taken from the data would disclose "
                             "its largest group (groups larger than N are counted at size N)")
        data = read_counts_csv(args.data, max_size=args.max_size, bytes_per_cell=bytes_per_cell,
                               top_code=args.max_size is not None)
        source = args.data
    else:
        seed = args.data_seed or 0
        data = census_synthetic(max_size=args.max_size or SYNTHETIC_MAX_SIZE, seed=seed,
                                bytes_per_cell=bytes_per_cell)
        source = f"synthetic:census(seed={seed})"
    if args.total is not None and args.total != data.total:
        raise InputError(f"--total {args.total} does not match the data's number of groups G = {data.total}")
    return data, source


def _noisy_measurements(args: argparse.Namespace, data: GroupSizeData, rng: SecureRandom) -> Iterator[np.ndarray]:
    """The ``--repeat`` independent noisy measurements of ``data`` (the only use of the true counts)."""
    eps = parse_epsilon(args.eps)
    for k in range(args.repeat):
        yield mech.add_noise(args.mechanism, data, eps, rng.spawn(f"run{k}"))


def _postprocess_run(args: argparse.Namespace, hier: Hierarchy, noisy: np.ndarray, total: int,
                     options: mech.PostprocessOptions) -> tuple[dict[str, Any], mech.PostProcessed]:
    """One release from its noisy measurements and the public G: its report entry and its counts."""
    pp = mech.postprocess(args.mechanism, hier, noisy, total, options)
    entry = {"objective": pp.objective, **mech.release_metrics(hier, pp.counts, total), "time_s": pp.time_s,
             "details": pp.details}
    return entry, pp


def _noise_description(args: argparse.Namespace, levels: int) -> dict[str, Any]:
    eps = parse_epsilon(args.eps)
    return {
        "eps": float(eps),
        "eps_exact": str(eps),
        "noise": "two-sided geometric (exact CKS sampler), "
                 + ("cumulative counts" if args.mechanism in mech.CUMULATIVE else "counts"),
        "noise_scale": float(mech.noise_scale(args.mechanism, levels, eps)),
    }


def _warn_if_seeded(args: argparse.Namespace, what: str) -> None:
    if args.seed is not None:
        logger.warning("--seed: the noise is reproducible, so this %s is NOT private (simulations only)", what)


RELEASE_FIGURES = ("objective", "constraint_violations", "negative_counts", "non_integer_counts", "time_s")


def run_release(args: argparse.Namespace) -> int:
    _check_outputs(args)
    parse_epsilon(args.eps)
    options = _options(args)
    _warn_if_seeded(args, "release")
    data, source = _true_data(args, public_max_size=True)
    hier, total, max_size = data.hierarchy, data.total, data.max_size  # public: the hierarchy, G and N
    rng = SecureRandom(seed=args.seed, label="census/release")
    runs: list[dict[str, Any]] = []
    last: tuple[np.ndarray, mech.PostProcessed] | None = None
    # below, only the noisy measurements and the public parameters are used
    for k, noisy in enumerate(_noisy_measurements(args, data, rng)):
        entry, pp = _postprocess_run(args, hier, noisy, total, options)
        runs.append({"run": k, **entry})
        last = (noisy, pp)
        proof = f" (certificate: {pp.details['certificate']})" if "certificate" in pp.details else ""
        _progress(args, f"census release {args.mechanism} eps={args.eps}: run {k + 1}/{args.repeat} "
                        f"post-processed in {pp.time_s:.2f}s{proof}")
    assert last is not None
    report: dict[str, Any] = {
        "mechanism": args.mechanism,
        "private": not rng.reproducible,
        **_summary(runs, RELEASE_FIGURES),
        **_noise_description(args, hier.depth),
        "reproducible": rng.reproducible,
        "seed": args.seed,
        "repeat": args.repeat,
        "dataset": {"source": source, "regions": hier.size, "levels": hier.depth, "max_size": max_size,
                    "total": total},
        "runs": runs,
    }
    noisy, pp = last
    with written_together():  # the counts and the report that describes them, together or not at all
        if args.noisy_out:
            write_atomically(args.noisy_out, counts_csv_text(hier, noisy, column="noisy_count", dense=True),
                             what="noisy measurements ")
        if args.out:
            write_atomically(args.out, counts_csv_text(hier, pp.counts))
        if args.json:
            write_json_report(args.json, report)
    print_summary(args, f"census release {args.mechanism} eps={args.eps}: {args.repeat} release"
                        f"{'s' if args.repeat != 1 else ''} of {hier.size} regions ({hier.depth} levels, N = {max_size}, "
                        f"G = {total}){'; NOT private: seeded noise' if rng.reproducible else ''}"
                        + "".join(f"; {flag} {path}" for flag, path in (("counts in", args.out),
                                                                           ("noisy measurements in", args.noisy_out),
                                                                           ("report in", args.json))
                                  if path and path != "-"))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """``census evaluate``: the releases ``release`` would make, with their errors against the truth."""
    check_writable(args.json, "--json")
    check_distinct([("--json", args.json)], [("--data", args.data)])
    parse_epsilon(args.eps)
    options = _options(args)
    print_summary(args, NOT_PRIVATE)
    data, source = _true_data(args, public_max_size=False)
    hier, total = data.hierarchy, data.total
    rng = SecureRandom(seed=args.seed, label="census/release")
    runs: list[dict[str, Any]] = []
    for k, noisy in enumerate(_noisy_measurements(args, data, rng)):
        entry, pp = _postprocess_run(args, hier, noisy, total, options)
        runs.append({"run": k, **entry, "l1_error_by_level": mech.l1_error_by_level(hier, pp.counts, data.counts)})
    levels = list(runs[0]["l1_error_by_level"])
    l1 = np.array([[r["l1_error_by_level"][lev] for lev in levels] for r in runs])
    sd = l1.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(levels))
    report: dict[str, Any] = {
        "mechanism": args.mechanism,
        "private": False,
        "evaluation": NOT_PRIVATE,
        **_summary(runs, RELEASE_FIGURES),
        "l1_error_by_level": {lev: float(v) for lev, v in zip(levels, l1.mean(axis=0))},
        "l1_error_by_level_sd": {lev: float(v) for lev, v in zip(levels, sd)},
        **_noise_description(args, hier.depth),
        "reproducible": rng.reproducible,
        "seed": args.seed,
        "repeat": args.repeat,
        "dataset": {"source": source, "regions": hier.size, "levels": hier.depth, "max_size": data.max_size,
                    "total": total},
        "runs": runs,
    }
    if args.json:
        write_json_report(args.json, report)
    lines = [(f"census evaluate {args.mechanism} eps={args.eps}, {args.repeat} release{'s' if args.repeat != 1 else ''} "
             f"of {source} ({hier.size} regions, N = {data.max_size}, G = {total}):")]
    lines += [f"  level {lev}: L1 error {l1[:, k].mean():,.1f} (sd {sd[k]:,.1f})" for k, lev in enumerate(levels)]
    lines.append(f"  constraint violations {report['constraint_violations']}, negative {report['negative_counts']}, "
                 f"non-integer {report['non_integer_counts']}, total = G: {report['total_matches']}")
    print_summary(args, "\n".join(lines))
    return 0


def run_postprocess(args: argparse.Namespace) -> int:
    _check_outputs(args)
    options = _options(args)
    _check_total(args.total)
    refuse_inapplicable(args, "--mechanism", args.mechanism, {
        "cumulative_order": ("--cumulative-order", tuple(m for m in mech.MECHANISMS if m in mech.CUMULATIVE))})
    noisy = read_noisy_csv(args.noisy, max_size=args.max_size, bytes_per_cell=mech.BYTES_PER_CELL[args.mechanism])
    hier = noisy.hierarchy
    values = noisy.values
    reverse = args.mechanism in mech.CUMULATIVE and args.cumulative_order == "le"
    if reverse:  # c^le on sizes 1..N is c^ge on the reversed size axis
        values = values[:, ::-1].copy()
    pp = mech.postprocess(args.mechanism, hier, values, args.total, options)
    if reverse:
        pp = mech.PostProcessed(pp.mechanism, pp.counts[:, ::-1].copy(), pp.objective, pp.time_s, pp.details)
    report: dict[str, Any] = {
        "mechanism": args.mechanism,
        "private": True,
        "objective": pp.objective,
        **mech.release_metrics(hier, pp.counts, args.total),
        "time_s": pp.time_s,
        "input": (f"cumulative counts c_s = #groups of size {'<=' if reverse else '>='} s"
                  if args.mechanism in mech.CUMULATIVE else "group-size counts"),
        "dataset": {"source": args.noisy, "regions": hier.size, "levels": hier.depth,
                    "max_size": int(noisy.values.shape[1]), "total": args.total},
        "details": pp.details,
    }
    small = pp.counts.size <= 10_000
    if args.mechanism in mech.CUMULATIVE:
        cum = np.cumsum(pp.counts, axis=1) if reverse else to_cumulative(pp.counts)
        report["cumulative_counts"] = {hier.ids[r]: cum[r].tolist() for r in range(hier.size)} if small else None
    report["counts"] = {hier.ids[r]: pp.counts[r].tolist() for r in range(hier.size)} if small else None
    with written_together():
        if args.out:
            write_atomically(args.out, counts_csv_text(hier, pp.counts))
        if args.json:
            write_json_report(args.json, report)
    print_summary(args, f"census postprocess {args.mechanism}: {hier.size} regions, objective {pp.objective:g} in "
                        f"{pp.time_s:.2f}s" + "".join(f"; {flag} {path}" for flag, path in
                                                     (("counts in", args.out), ("report in", args.json))
                                                     if path and path != "-"))
    return 0


def _party_csv(hier: Hierarchy, owned: np.ndarray, counts: np.ndarray) -> str:
    """CSV text of one party's released rows (its regions, in the hierarchy's order, non-zero cells)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("level", "region_id", "parent_id", "size", "count"))
    for r, row in zip(owned.tolist(), counts):
        par = "" if hier.parent[r] < 0 else hier.ids[int(hier.parent[r])]
        for k in np.nonzero(row)[0].tolist():
            writer.writerow((int(hier.level[r]), hier.ids[r], par, k + 1, int(row[k])))
    return out.getvalue()


def _collusion_text(book: dict[str, Any]) -> str:
    value = book.get("eps_against_coordinator_and_one_party")
    return f"{value:.4g}" if value is not None else "not computed (noise scale too large; see the report)"


def run_federated(args: argparse.Namespace) -> int:
    """``census federated``: every party and the coordinator of ``census-federated`` in one command."""
    from securelp.coordinator.census_federated import simulate_release
    from securelp.coordinator.commands.audit import check_transcript_path
    from securelp.coordinator.exit_cleanups import private_tempdir

    if args.repeat != 1:
        raise InputError("census federated runs one session (--repeat 1); run the command again for another release")
    if args.hierarchy is not None:
        return _run_with_parties(args)
    for flag, value in (("--party", args.parties), ("--listen", args.listen), ("--certs", args.certs),
                        ("--insecure", args.insecure or None)):
        if value is not None:
            raise ConfigError(f"{flag} is for --hierarchy FILE (coordinating running parties); with --data or "
                             "--synthetic the command simulates every party itself")
    if args.transport is None:
        args.transport = "inprocess"
    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("--data", args.data)])
    if args.out is not None:
        out_dir = Path(args.out)
        if out_dir.exists() and not out_dir.is_dir():
            raise InputError(f"--out {args.out}: not a directory (one CSV per party goes there)")
    if not (math.isfinite(args.deadline) and args.deadline > 0):
        raise InputError(f"--deadline must be a positive number of seconds, got {args.deadline}")
    eps = parse_epsilon(args.eps)
    options = _options(args)
    _warn_if_seeded(args, "release")
    data, source = _true_data(args, public_max_size=True)
    hier = data.hierarchy
    if not 2 <= args.level <= hier.depth:
        raise InputError(f"--level must be between 2 and the hierarchy's depth {hier.depth}, got {args.level}")
    _progress(args, f"census federated {args.mechanism} eps={args.eps}: {len(hier.levels()[args.level])} parties "
                    f"at level {args.level}, {args.transport}")
    with private_tempdir("securelp-census-") as tmp:
        sim = simulate_release(data, party_level=args.level, mechanism=args.mechanism, eps=eps,
                               transport=args.transport, seed=args.seed, options=options, deadline_s=args.deadline,
                               transcript_path=args.transcript, workdir=tmp)
    outcome = sim.outcome
    # below, only what the coordinator and the parties hold after the session (noisy values, the release)
    pp = outcome.release
    files = 0
    with written_together():
        if args.out is not None:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            for j, (pid, session) in enumerate(zip(outcome.parties, sim.sessions)):
                owned = outcome.split.owned(j)
                rows = np.empty_like(session.released)
                index = {rid: k for k, rid in enumerate(session.data.region_ids)}
                for k, r in enumerate(owned.tolist()):
                    rows[k] = session.released[index[hier.ids[r]]]
                write_atomically(Path(args.out) / f"{pid}.csv", _party_csv(hier, owned, rows),
                                 what=f"party {pid}'s release ")
                files += 1
        report: dict[str, Any] = {
            "command": "census federated",
            "mechanism": args.mechanism,
            "private": args.seed is None,
            "reproducible": args.seed is not None,
            "seed": args.seed,
            **_noise_description(args, hier.depth),
            "transport": args.transport,
            "session_id": outcome.session_id,
            "party_level": args.level,
            "parties": len(outcome.parties),
            "spanning_regions": len(outcome.split.spanning),
            "dataset": {"source": source, "regions": hier.size, "levels": hier.depth, "max_size": data.max_size,
                        "total": outcome.total},
            "objective": pp.objective,
            **mech.release_metrics(hier, pp.counts, outcome.total),
            "time_s": sim.seconds,
            "phase_s": outcome.phase_s,
            "bytes": {pid: {"sent": s, "received": r} for pid, s, r in
                      zip(outcome.parties, outcome.bytes_sent, outcome.bytes_received)},
            "bytes_sent_per_party_mean": float(np.mean(outcome.bytes_sent)),
            "bytes_received_per_party_mean": float(np.mean(outcome.bytes_received)),
            "accounting": outcome.accounting,
            "coordinator_received": "each party's own regions' noisy values, and its spanning vector masked for "
                                    "secure aggregation (the sum: the spanning regions' noisy values and G)",
            "out_files": files,
        }
        if args.json:
            write_json_report(args.json, report)
    lines = [(f"census federated {args.mechanism} eps={args.eps}: {len(outcome.parties)} parties at level {args.level} "
             f"over {args.transport}, {hier.size} regions x N = {data.max_size}, G = {outcome.total}"),
             (f"  released in {sim.seconds:.2f} s (post-processing {outcome.phase_s.get('postprocess', 0.0):.2f} s); "
             f"per party {np.mean(outcome.bytes_sent):,.0f} bytes sent, {np.mean(outcome.bytes_received):,.0f} received"),
             (f"  constraint violations {report['constraint_violations']}, negative {report['negative_counts']}, "
             f"non-integer {report['non_integer_counts']}, total = G: {report['total_matches']}"),
             (f"  eps {outcome.accounting['eps_total_exact']} against the coordinator; against it with one colluding "
             f"party {_collusion_text(outcome.accounting)}")]
    if files:
        lines.append(f"  wrote {files} party files to {args.out}")
    print_summary(args, "\n".join(lines))
    return 0


def read_hierarchy_csv(path: str) -> Hierarchy:
    """The public hierarchy from a CSV with columns ``region_id,parent_id`` (a ``level`` column is
    checked by ``Hierarchy.from_parents``' depth); a file with counts is refused: the coordinator of a
    federated release reads no count."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise InputError(f"--hierarchy {path}: cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"--hierarchy {path}: not a CSV file ({exc})") from None
    if not rows or "region_id" not in rows[0] or "parent_id" not in rows[0]:
        raise InputError(f"--hierarchy {path}: expected a header with region_id and parent_id")
    if "count" in rows[0] or "noisy_count" in rows[0]:
        raise InputError(f"--hierarchy {path}: the file has counts; the coordinator of a federated release reads "
                         "the public geography only (columns level,region_id,parent_id)")
    parent: dict[str, str] = {}
    for k, row in enumerate(rows):
        rid, par = (row["region_id"] or "").strip(), (row["parent_id"] or "").strip()
        if not rid:
            raise InputError(f"--hierarchy {path}: line {k + 2} has no region_id")
        if parent.setdefault(rid, par) != par:
            raise InputError(f"--hierarchy {path}: region {rid!r} has two parents ({parent[rid]!r}, {par!r})")
    return Hierarchy.from_parents(parent.keys(), parent.values())


def _run_with_parties(args: argparse.Namespace) -> int:
    """``census federated --hierarchy FILE --party NAME=HOST:PORT ...`` (dial-in) or ``--listen
    HOST:PORT`` (dial-out): the coordinator of one session against running party processes, mutual
    TLS."""
    from securelp.coordinator.census_federated import run_census_federated
    from securelp.coordinator.commands.audit import check_transcript_path
    from securelp.coordinator.grpc_link import parse_address
    from securelp.coordinator.transcript import TranscriptRecorder, write_transcript
    from securelp.coordinator.transport import ProtocolLink
    from securelp.party.census_federated import CENSUS_FEDERATED
    from securelp.solvers.hierarchy.federated import split_by_level
    from securelp.solvers.lp.partition import PublicRows

    check_writable(args.json, "--json")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json), ("--transcript", args.transcript)], [("--hierarchy", args.hierarchy)])
    for flag, value in (("--out", args.out), ("--seed", args.seed), ("--data-seed", args.data_seed)):
        if value is not None:
            raise ConfigError(f"{flag} does not apply to --hierarchy: each party keeps its own released rows "
                             "(securelp party --out) and draws its own noise")
    if args.max_size is None:
        raise InputError("--hierarchy needs --max-size N, the public largest group size every party releases")
    if args.transport is not None:
        raise ConfigError("--transport is for simulated parties (--data or --synthetic); running parties "
                          "(--hierarchy) talk gRPC with mutual TLS")
    if not args.parties and args.listen is None:
        raise InputError("--hierarchy needs the running parties: --party NAME=HOST:PORT, once per region of --level, "
                         "or --listen HOST:PORT for parties that connect (securelp party --connect)")
    if args.certs and args.insecure:
        raise ConfigError("--certs and --insecure were both given; choose one")
    if not args.certs and not args.insecure:
        raise ConfigError(f"{'--listen' if args.listen is not None else '--party'} needs --certs DIR (or --insecure, for debugging "
                         "only)")
    if not (math.isfinite(args.wait) and args.wait > 0):
        raise InputError(f"--wait must be a positive number of seconds, got {args.wait}")
    if not (math.isfinite(args.deadline) and args.deadline > 0):
        raise InputError(f"--deadline must be a positive number of seconds, got {args.deadline}")
    if args.listen is not None:
        try:
            parse_address(args.listen)
        except InputError as exc:
            raise InputError(f"--listen: {exc}") from None
    eps = parse_epsilon(args.eps)
    options = _options(args)
    hier = read_hierarchy_csv(args.hierarchy)
    if not 2 <= args.level <= hier.depth:
        raise InputError(f"--level must be between 2 and the hierarchy's depth {hier.depth}, got {args.level}")
    recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0), name=f"census-federated {args.mechanism}"))
    start = time.perf_counter()
    connect = _listen_for_parties if args.listen is not None else _dial_parties
    regions = len(split_by_level(hier, args.level).parties)
    with connect(args, regions) as (connections, endpoints):
        links = [recorder.wrap(ProtocolLink(c, CENSUS_FEDERATED, deadline_s=args.deadline)) for c in connections]
        try:
            outcome = run_census_federated(links, hier, args.max_size, mechanism=args.mechanism, eps=eps,
                                           party_level=args.level, total=args.total, options=options)
        finally:
            if args.transcript is not None:
                write_transcript(recorder.transcript(), args.transcript)
    seconds = time.perf_counter() - start
    pp = outcome.release
    report: dict[str, Any] = {
        "command": "census federated", "mechanism": args.mechanism, "private": True, "reproducible": False,
        **_noise_description(args, hier.depth), "transport": "grpc",
        "direction": "dial-out" if args.listen is not None else "dial-in", "endpoints": endpoints,
        "session_id": outcome.session_id, "party_level": args.level, "parties": len(outcome.parties),
        "spanning_regions": len(outcome.split.spanning),
        "dataset": {"source": f"parties:{args.hierarchy}", "regions": hier.size, "levels": hier.depth,
                    "max_size": args.max_size, "total": outcome.total},
        "objective": pp.objective, **mech.release_metrics(hier, pp.counts, outcome.total), "time_s": seconds,
        "phase_s": outcome.phase_s,
        "bytes": {pid: {"sent": s, "received": r} for pid, s, r in
                  zip(outcome.parties, outcome.bytes_sent, outcome.bytes_received)},
        "bytes_sent_per_party_mean": float(np.mean(outcome.bytes_sent)),
        "bytes_received_per_party_mean": float(np.mean(outcome.bytes_received)),
        "accounting": outcome.accounting,
        "coordinator_received": "each party's own regions' noisy values, and its spanning vector masked for "
                                "secure aggregation (the sum: the spanning regions' noisy values and G)",
        "out_files": 0,
    }
    if args.json:
        write_json_report(args.json, report)
    print_summary(args, "\n".join([
        (f"census federated {args.mechanism} eps={args.eps}: {len(outcome.parties)} running parties at level "
         f"{args.level}, {hier.size} regions x N = {args.max_size}, G = {outcome.total}"),
        f"  released in {seconds:.2f} s; each party keeps its own rows",
        (f"  constraint violations {report['constraint_violations']}, negative {report['negative_counts']}, "
         f"total = G: {report['total_matches']}")]))
    return 0


@contextlib.contextmanager
def _dial_parties(args: argparse.Namespace, regions: int) -> Iterator[tuple[list[Any], dict[str, str]]]:
    """Dial-in: dial every ``--party``, wait for their health services; the connections and addresses
    (the session checks that there is one party per region, ``regions`` in all)."""
    from securelp.coordinator.commands.coordinate import _wait_all_ready, parse_parties
    from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink

    parties = parse_parties(args.parties)
    tls = ChannelTls.from_dir(args.certs) if args.certs else None
    links: list[GrpcPartyLink] = []
    try:
        for name, address in parties:
            links.append(GrpcPartyLink(name, address, tls=tls, insecure=args.insecure, deadline_s=args.deadline))
        _wait_all_ready(links, args.wait)
        yield [link.connection for link in links], dict(parties)
    finally:
        for link in links:
            link.shutdown()


@contextlib.contextmanager
def _listen_for_parties(args: argparse.Namespace, regions: int) -> Iterator[tuple[list[Any], dict[str, str]]]:
    """Dial-out: listen on ``--listen`` until the ``--party`` names, or else ``regions`` parties (one per
    region of the party level), have connected within ``--wait``; the connections and the addresses
    they came from. Each party names its region in the session's hello, which checks that every region
    has exactly one."""
    from securelp.coordinator.certs import COORDINATOR_ID, load_identity, require_usage
    from securelp.coordinator.commands.coordinate import parse_listen_parties
    from securelp.coordinator.listener import PartyListener
    from securelp.protos.channels import ServerTls

    names = parse_listen_parties(args.parties, None, None) if args.parties else None
    if names is not None and len(names) != regions:
        raise InputError(f"--party names {len(names)} parties, but level {args.level} has {regions} regions (one "
                         "party per region)")
    tls = None
    if args.certs:
        ident = load_identity(args.certs, COORDINATOR_ID)
        require_usage(ident, "server", "--listen (the coordinator is the TLS server)")
        tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
    listener = PartyListener(args.listen, tls=tls, insecure=args.insecure, expected=names,
                             count=None if names else regions)
    try:
        port = listener.start()
        # the LISTENING line also with --quiet: a launcher reads it to start the parties
        print(f"LISTENING {args.listen.rsplit(':', 1)[0]}:{port}", file=human_stream(args.json), flush=True)
        connections = listener.wait_for_parties(args.wait)
        yield list(connections), {c.party_id: c.address for c in connections}
    finally:
        listener.stop()
