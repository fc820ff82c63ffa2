"""``securelp ldp``: local d-privacy -- the Linear-Equations mechanism and its baselines.

Builds the chosen mechanism on a grid (or a metric dataset), verifies it, simulates
``--users`` users drawn from the prior, and reports theory next to simulation for the
range error and the frequency-estimation MSE (keys documented in docs/reference/reports.md).

``securelp ldp collect`` runs the protocol ``ldp-collect`` (docs/howto/ldp-collection.md):
``--parties`` client parties, each holding its share of ``--users`` users' values (simulated from
the prior, or read from ``--values FILE``), perturb every user locally and stream the reports to a
collector (in-process or over gRPC with mutual TLS), which estimates the value frequencies. Its
report and ``--out`` hold only what the collector computed from the reports; ``--evaluate`` adds the
MSE against the true frequencies and the theory (then the report says it is NOT private).

``securelp ldp`` alone releases nothing: every simulated figure is computed from the simulated users' true values
(and the prior), so the command is an evaluation, NOT private. Its human output says so in its
first line (:data:`NOT_PRIVATE`) and its report carries ``"private": false``.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from securelp.coordinator.commands.common import (
    DeprecatedAlias,
    add_output_arguments,
    grid_size,
    not_private_seed_help,
    print_summary,
    refuse_inapplicable,
)
from securelp.coordinator.commands.mdp import naming_flags
from securelp.coordinator.reporting import check_distinct, check_writable, write_json_report
from securelp.solvers.errors import InputError

logger = logging.getLogger(__name__)

NAME = "ldp"
#: the value domains ``--dataset`` names: a grid, or a metric dataset of ``securelp.solvers.mdp.datasets``
DATASETS = ["grid", "text", "road", "rome"]
#: The first line of the human output: the figures are errors against the simulated truth.
NOT_PRIVATE = ("NOT PRIVATE: simulation against the simulated users' true values (errors and MSE computed "
               "from them and the prior); not a release")
#: the flags for the parameter an engine's error names (``SecureLPError.parameter``)
LDP_FLAGS = {"eps": "--eps", "users": "--users", "domain": "--dataset, --rows, --cols", "prior": "--prior",
             "radius": "--range", "mechanism": "--mechanism", "name": "--dataset"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``ldp`` subcommand."""
    p = subparsers.add_parser(
        NAME,
        help="local d-privacy: Linear-Equations mechanism and baselines",
        description=(
            "Build a verified local d-privacy mechanism (le, grr, oue, em, pl), simulate users drawn "
            "from a prior, and report Error_range and MSE_freq, theory next to simulation."
        ),
    )
    p.add_argument("--dataset", default="grid", choices=DATASETS,
                   help="the users' value domain: a rows x cols grid (default) or a metric dataset")
    p.add_argument("--domain", dest="dataset", choices=DATASETS, action=DeprecatedAlias, new="--dataset")
    p.add_argument("--rows", type=int, default=None, help="grid rows (default 10)")
    p.add_argument("--cols", type=int, default=None, help="grid columns (default 10)")
    p.add_argument("--cell-km", type=float, default=None, help="grid cell size in km (default 1); eps is per km")
    p.add_argument("--records", type=int, default=None, help="records of a text/road dataset (default 500)")
    p.add_argument("--eps", type=float, default=None, help="privacy parameter per distance unit (> 0); required")
    p.add_argument("--mechanism", default="le", choices=["le", "grr", "oue", "em", "pl"], help="mechanism (default le)")
    p.add_argument("--users", type=int, default=10000, help="simulated users (default 10,000)")
    p.add_argument("--prior", default=None, help="prior file (comma/whitespace separated, one value per domain element)")
    p.add_argument("--range", dest="radius", type=float, default=None,
                   help="range r of Error_range in distance units (default: one grid cell)")
    p.add_argument("--seed", default=None, help=not_private_seed_help("the simulated users and the mechanism's noise",
                                                                      "the noise"))
    add_output_arguments(p, dest="json_path")
    p.set_defaults(func=lambda args: run(args) if args.eps is not None else p.error(
        "the following arguments are required: --eps"))
    sub = p.add_subparsers(dest="ldp_command", metavar="ACTION")
    sub.required = False
    c = sub.add_parser("collect", help="run the ldp-collect protocol: clients stream perturbed reports to a collector",
                       description="Client parties (--parties N) each hold their users' values and perturb every user locally "
                       "with the public mechanism; the collector receives only the reports, in chunks, and "
                       "estimates the value frequencies. See docs/howto/ldp-collection.md.")
    c.add_argument("--eps", type=float, required=True, help="privacy parameter per distance unit (> 0)")
    c.add_argument("--mechanism", default="le", choices=["le", "grr", "em", "pl"], help="mechanism (default le)")
    c.add_argument("--rows", type=int, default=None, help="grid rows (default 10)")
    c.add_argument("--cols", type=int, default=None, help="grid columns (default 10)")
    c.add_argument("--cell-km", type=float, default=None, help="grid cell size in km (default 1); eps is per km")
    c.add_argument("--parties", type=int, default=3, metavar="N", help="client parties (default 3)")
    c.add_argument("--users", type=int, default=None,
                   help="simulated users, split evenly among the parties (default 10,000; not with --values)")
    c.add_argument("--values", default=None, metavar="FILE",
                   help="the users' true values instead of simulated ones: cell indices (row-major), whitespace or "
                        "comma separated, or a .npy array; split evenly among the parties")
    c.add_argument("--prior", default=None, help="prior file of the simulated users (default uniform)")
    c.add_argument("--transport", choices=["inprocess", "grpc"], default="inprocess",
                   help="inprocess (default; every message through protobuf) or grpc (a server per client on "
                        "127.0.0.1, mutual TLS, fresh certificates)")
    c.add_argument("--chunk", type=int, default=None, metavar="N", help="reports per collect call (default 262144)")
    c.add_argument("--seed", default=None, help=not_private_seed_help("the simulated users and their reports",
                                                                      "the reports"))
    c.add_argument("--evaluate", action="store_true",
                   help="NOT PRIVATE: add the MSE of the estimate against the true frequencies, and the theory")
    c.add_argument("--out", default=None, metavar="CSV", help="write the estimate here (cell,row,col,frequency)")
    add_output_arguments(c, dest="json_path")
    c.add_argument("--transcript", metavar="FILE", default=None,
                   help="write what the collector received, per client, to FILE (binary)")
    c.set_defaults(func=run_collect)


def _domain(args: argparse.Namespace):
    from securelp.solvers.ldp import DenseDomain, GridDomain

    refuse_inapplicable(args, "--dataset", args.dataset, {
        "rows": ("--rows", ("grid",)), "cols": ("--cols", ("grid",)), "cell_km": ("--cell-km", ("grid",)),
        "records": ("--records", ("text", "road"))})
    if args.dataset == "grid":
        args.rows, args.cols, args.cell_km = grid_size(args)  # the report shows them
        if args.rows < 1 or args.cols < 1:
            raise InputError(f"--rows and --cols must be >= 1, got {args.rows} x {args.cols}")
        if args.rows * args.cols < 2:
            raise InputError("the grid needs at least 2 cells")
        return GridDomain(args.rows, args.cols, args.cell_km), None
    from securelp.solvers.mdp.datasets import load_dataset

    params = {"n_records": args.records} if args.dataset in ("text", "road") else {}
    ds = load_dataset(args.dataset, **params)
    if ds.n < 2:
        raise InputError(f"--dataset {args.dataset} needs at least 2 records, got {ds.n}")
    return DenseDomain(ds.distance, ds.name), ds


def run(args: argparse.Namespace) -> int:
    """Run one simulated LDP collection and report it; an engine's error names the flag to change
    (:data:`LDP_FLAGS`)."""
    with naming_flags(LDP_FLAGS):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from securelp.solvers.ldp import simulate

    check_writable(args.json_path, "--json")
    check_distinct([("--json", args.json_path)], [("--prior", args.prior)])
    domain, _ = _domain(args)
    prior = None
    if args.prior is not None:
        from securelp.solvers.mdp.datasets import load_prior

        prior = load_prior(args.prior, domain.m)
    if args.users < 1:
        raise InputError(f"--users must be >= 1, got {args.users}")
    seed = args.seed
    if seed is not None and isinstance(seed, str) and seed.lstrip("-").isdigit():
        seed = int(seed)
    result = simulate(domain, args.mechanism, args.eps, args.users, prior=prior, radius=args.radius, seed=seed)
    report = {"command": "ldp", "private": False, "evaluation": NOT_PRIVATE, "dataset": args.dataset}
    if args.dataset == "grid":
        report.update({"rows": args.rows, "cols": args.cols, "cell_km": args.cell_km})
    report["prior"] = args.prior or "uniform"
    report.update(result.as_dict())
    report["seed"] = args.seed
    if args.json_path:
        write_json_report(args.json_path, report)

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.6g}"

    print_summary(args, NOT_PRIVATE + "\n" + (
        f"{result.mechanism} eps={result.eps:g} m={result.m} users={result.users}: "
        f"Error_range(r={result.range_r:g}) {fmt(result.error_range)} (theory {fmt(result.error_range_theory)}), "
        f"MSE_freq {fmt(result.mse_freq)} (theory {fmt(result.mse_freq_theory)}), "
        f"verified [{result.verification.get('method')}], {result.time_s:.2f} s"), dest="json_path")
    del np
    return 0


def _users(args: argparse.Namespace, m: int, rng: np.random.Generator) -> np.ndarray:
    """The users' true values: from --values, or drawn from the prior (uniform by default)."""
    if args.values is not None:
        from pathlib import Path

        path = Path(args.values)
        try:
            if path.suffix == ".npy":
                values = np.load(path, allow_pickle=False)
            else:
                text = path.read_text(encoding="utf-8").replace(",", " ").split()
                values = np.array([int(t) for t in text], dtype=np.int64)
        except (OSError, ValueError) as exc:
            raise InputError(f"--values {args.values}: cannot read the users' values ({exc})") from None
        values = np.asarray(values)
        if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
            raise InputError(f"--values {args.values}: expected a non-empty list of integer cell indices")
        if int(values.min()) < 0 or int(values.max()) >= m:
            raise InputError(f"--values {args.values}: cell indices must be in 0..{m - 1} (the {m}-cell grid)")
        return values.astype(np.int64)
    prior = np.full(m, 1.0 / m)
    if args.prior is not None:
        from securelp.solvers.mdp.datasets import load_prior

        prior = load_prior(args.prior, m)
    return rng.choice(m, size=args.users, p=prior)


def run_collect(args: argparse.Namespace) -> int:
    """``ldp collect``: the protocol ldp-collect with every client simulated in this process."""
    with naming_flags(LDP_FLAGS):
        return _run_collect(args)


def _run_collect(args: argparse.Namespace) -> int:
    from securelp.coordinator.commands.audit import check_transcript_path
    from securelp.coordinator.exit_cleanups import private_tempdir
    from securelp.coordinator.ldp_collect import DEFAULT_CHUNK, simulate_collection
    from securelp.party.ldp_collect import MechanismSpec

    check_writable(args.json_path, "--json")
    check_writable(args.out, "--out")
    check_transcript_path(args.transcript)
    check_distinct([("--json", args.json_path), ("--out", args.out), ("--transcript", args.transcript)],
                   [("--values", args.values), ("--prior", args.prior)])
    rows, cols, cell_km = grid_size(args)
    if rows < 1 or cols < 1 or rows * cols < 2:
        raise InputError(f"the grid needs at least 2 cells, got --rows {rows} --cols {cols}")
    if args.parties < 1:
        raise InputError(f"--parties must be >= 1, got {args.parties}")
    if args.values is not None and args.users is not None:
        raise InputError("--users and --values both say who the users are; give one")
    if args.values is not None and args.prior is not None:
        raise InputError("--prior draws simulated users; with --values the users are given (remove --prior)")
    if args.values is None:
        args.users = 10_000 if args.users is None else args.users
        if args.users < 1:
            raise InputError(f"--users must be >= 1, got {args.users}")
    chunk = DEFAULT_CHUNK if args.chunk is None else args.chunk
    if not 1 <= chunk <= 1 << 22:
        raise InputError(f"--chunk must be between 1 and {1 << 22}, got {chunk}")
    spec = MechanismSpec(args.mechanism, float(args.eps), rows, cols, cell_km)
    seed = args.seed
    if seed is not None:
        logger.warning("--seed: the users' reports are reproducible, so this collection is NOT private")
    import hashlib

    users_seed = None if seed is None else int.from_bytes(hashlib.sha256(f"ldp-collect/users/{seed}".encode()).digest()[:8],
                                                          "little")
    rng = np.random.default_rng(users_seed)  # the simulated users' values (not the mechanism's noise)
    values = _users(args, spec.m, rng)
    if values.size < args.parties:
        raise InputError(f"{values.size} users cannot be split among {args.parties} parties")
    shares = np.array_split(values, args.parties)
    with private_tempdir("securelp-ldp-") as tmp:
        sim = simulate_collection(shares, spec, transport=args.transport, seed=seed, chunk=chunk,
                                  transcript_path=args.transcript, workdir=tmp, record=args.transcript is not None)
    o = sim.outcome
    users = o.total_users
    sent = int(sum(o.bytes_sent))
    report: dict = {
        "command": "ldp collect",
        "private": seed is None and not args.evaluate,
        "reproducible": seed is not None,
        "seed": seed,
        "mechanism": args.mechanism, "eps": float(args.eps), "rows": rows, "cols": cols, "cell_km": cell_km, "m": spec.m,
        "transport": args.transport,
        "session_id": o.session_id,
        "parties": len(o.parties),
        "users": users,
        "chunk": chunk,
        "chunks": o.chunks,
        "time_s": sim.seconds,
        "build_s": sim.build_s,
        "phase_s": o.phase_s,
        "users_per_s": users / sim.seconds if sim.seconds > 0 else None,
        "seconds_per_user": sim.seconds / users,
        "bytes_sent": sent,
        "bytes_per_user": sent / users,
        "bytes": {pid: {"sent": s, "received": r} for pid, s, r in zip(o.parties, o.bytes_sent, o.bytes_received)},
        "collector_received": "reports only: one perturbed cell index per user, packed, in chunks",
        "estimate_sum": float(np.sum(o.estimate)),
        "estimate_negative_cells": int(np.count_nonzero(o.estimate < 0)),
    }
    if args.evaluate:
        true = np.bincount(values, minlength=spec.m) / values.size
        from securelp.party.ldp_collect import MechanismCache

        mech, _ = MechanismCache().get(spec)
        prior = true if args.values is not None else (np.full(spec.m, 1.0 / spec.m) if args.prior is None else
                                                      _prior(args.prior, spec.m))
        mse_th, mse_se, method = mech.mse_theory(prior, users)  # type: ignore[attr-defined]
        report["evaluation"] = NOT_PRIVATE
        report["mse_freq"] = float(np.mean((o.estimate - true) ** 2))
        report["mse_freq_theory"] = float(mse_th)
        report["mse_freq_theory_stderr"] = float(mse_se)
        report["mse_freq_theory_method"] = method
    if args.out:
        from securelp.solvers.files import write_atomically

        lines = ["cell,row,col,frequency"] + [f"{k},{k // cols},{k % cols},{float(v)!r}" for k, v in
                                               enumerate(o.estimate)]
        write_atomically(args.out, "\n".join(lines) + "\n", what="estimate ")
    if args.json_path:
        write_json_report(args.json_path, report)
    text = (f"ldp collect {args.mechanism} eps={args.eps:g} on {rows}x{cols}: {users:,} users from {len(o.parties)} "
            f"parties over {args.transport} in {sim.seconds:.2f} s ({users / sim.seconds:,.0f} users/s, "
            f"{sent / users:.2f} bytes/user, {o.chunks} chunks)")
    if args.evaluate:
        text = (f"{NOT_PRIVATE}\n{text}\n  MSE_freq {report['mse_freq']:.6g} "
                f"(theory {report['mse_freq_theory']:.6g})")
    print_summary(args, text, dest="json_path")
    return 0


def _prior(path: str, m: int) -> np.ndarray:
    from securelp.solvers.mdp.datasets import load_prior

    return load_prior(path, m)
