"""True MPC side by side: MPyC's secure simplex against securelp on the same LPs.

Both systems solve the same LPs with three local parties in one run: netlib sc50b and kb2 and
Mangasarian's Examples 1 and 2 (O. L. Mangasarian, *Privacy-Preserving Linear Programming*,
Optim. Lett. 2011). securelp runs its PPLP protocol (masked column blocks, a coordinator solves
the transformed LP with HiGHS) in-process and over gRPC with mutual TLS to three real party
processes, in monomial bounds mode. MPyC runs a secure simplex on Shamir secret shares among
three processes, honest majority (threshold t = 1 < p/2), in which nothing but the declared
outputs is opened.

The MPyC side follows the demo ``demos/np_lpsolver.py`` of MPyC (https://github.com/lschoe/mpyc,
MIT license, Copyright (c) 2018 Berry Schoenmakers; read at tag v0.11, commit 5a1eed4, and
unchanged up to commit 06d24ae): the small-tableau simplex of Toft (FC 2009) with Dantzig's
rule on secure integers, the integer-preserving tableau update with the previous pivot as common
denominator (Catrina and de Hoogh, ESORICS 2010), oblivious (co)basis tracking by powers of an
N-th root of unity, and the certificate check of de Hoogh, Schoenmakers and Veeningen
(AFRICACRYPT 2016): ``c.x == y.b, A.x <= b, x >= 0, y.A >= c, y >= 0``. It runs on the PyPI
release pinned by the ``bench`` extra (``pip install -e '.[bench]'``: mpyc, gmpy2, uvloop).
Departures from the demo, each so that the MPyC run is a true multi-party one:

* every party secret-shares its own column block with ``mpc.input`` (the demo loads the whole
  tableau as public constants); the public rows' right-hand sides and the surplus columns of
  the conversion below are public constants;
* the per-iteration progress the demo opens (objective, pivot, denominator) is not opened; the
  loop test is (so the iteration count is public, as in the demo);
* each party receives only its own x_j (``receivers=j``); the optimum's numerator and the common
  denominator cd go to every party;

LP conversion (the demo needs ``max c'x s.t. Ax <= b, x >= 0`` with ``b >= 0``, so that the
origin is a feasible basis). From ``min/max c'x s.t. lo <= Ax <= hi, l <= x <= u``:

* columns: ``x = l + x'`` (finite l; a finite u adds the row ``x' <= u - l``, owned by the
  column's party), ``x = u - x'`` (only u finite), ``x = x+ - x-`` (free);
* rows: each finite side becomes ``g'x <= beta``. With ``beta >= 0`` it is kept. An equality with
  zero right-hand side becomes two rows ``a'x <= 0, -a'x <= 0`` (as in MPyC's own sc50b and kb2
  tables, 70 x 48 and 68 x 41). A side with ``beta < 0`` becomes ``-g'x - s <= -beta`` with a public
  surplus column s, and a nonzero equality one row oriented so that its right-hand side is
  positive; in both, the row's slack r is an artificial variable, penalized by big-M:
  ``max c'x - M sum r_i`` with ``r_i = b_i - A_i x``, i.e. ``c += M sum_i A_i`` and a constant. The
  optimum equals the original one when M exceeds the optimal duals of those rows (exact
  penalty); sc50b and kb2 need no artificial row, Mangasarian's examples do (x is free and
  ``Ax >= b`` has both signs of b).

Integers: the converted data are multiplied by the smallest ``10^d`` (d <= ``--decimals``) that
makes them integral; Mangasarian's examples (uniform doubles) are rounded at ``10^d``, which
changes the LP slightly (the relative difference to HiGHS's optimum shows by how much). MPyC's
secure integers need a bit length l such that every compared value fits in l bits: the largest
tableau entry B (bits) enters the ratio test as a product, hence ``l = 2 (B + 1) + 2``. B is
measured by running the same integer simplex in the clear (same pivot rules, MPyC's tournament
argmin with its tie-breaking), which also gives the iteration count and the exact optimum in
advance. When that run exceeds ``--exact-budget`` seconds, B is the largest entry of the
iterations it did: a lower bound on what the whole run needs (Hadamard's bound on the minors,
also recorded, is far larger), so MPyC runs with fewer bits than a complete solve would need,
and the iteration count is estimated by replaying the same pivot rules in floating point. Each
choice favours MPyC; the clear run is a benchmark device: in a deployment the parties would
agree l from public bounds on their data. The demo's row-wise gcd reduction is applied too
(``--no-row-gcd`` to leave it out), although a row's gcd spans several parties' entries.

Usage::

    python -m benchmarks.bench_mpyc [--lps sc50b,kb2,example1,example2] [--time-limit 1800]
    python -m benchmarks.bench_mpyc --render docs/benchmarks/mpc.md

Each run appends one JSON line per system and LP to ``benchmarks/results/mpyc.jsonl`` (machine,
command, commit, date, figures); ``--render`` rewrites the marked table of the docs page from the
newest run of each LP.
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.mpyc_lp import (  # re-exported: the conversion is part of this benchmark's interface
    IntegerTableau,
    StandardFormLP,
    exact_simplex,
    float_replay,
    hadamard_bits,
    integer_tableau,
    to_standard_form,
)
from benchmarks.render import begin_marker, end_marker
from benchmarks.results import commit, machine
from securelp.coordinator.commands.common import positive_int
from securelp.solvers.errors import ConfigError, InputError, SecureLPError
from securelp.solvers.files import write_atomically
from securelp.solvers.lp import HighsBackend, LinearProgram, SolveStatus, read_mps

REPO_ROOT = Path(__file__).resolve().parents[1]
#: ../shared/data/netlib beside the checkout (or beside a parent folder, for worktrees)
DEFAULT_NETLIB = next((d / "shared" / "data" / "netlib" for d in REPO_ROOT.parents
                       if (d / "shared" / "data" / "netlib").is_dir()), REPO_ROOT.parent / "shared" / "data" / "netlib")
DEFAULT_RESULTS = REPO_ROOT / "benchmarks" / "results" / "mpyc.jsonl"
DEFAULT_LPS = "sc50b,kb2,example1,example2"
EXTRA_HINT = "pip install -e '.[bench]' (the optional 'bench' extra: mpyc, gmpy2, uvloop)"
TABLE_BEGIN = begin_marker("mpyc")
TABLE_END = end_marker("mpyc")
#: what each system reveals to whom, as the rendered table's column states it (docs/benchmarks/mpc.md details it)
REVEALS = {
    "highs": "everything, to the one solver",
    "mpyc": "only the outputs, to any 1 of the 3 parties (t < p/2): optimum and cd, iteration count; x_j to party j",
    "securelp": "to the coordinator: each bounded column up to one positive factor (on real sparse LPs our "
                "attacks' best guesses are right for most columns), x_j when revealed "
                "([threat model](../threat_model.md)); nothing between parties",
}


# ----------------------------------------------------------------------------------------------
# The MPyC party program (one process per party; mpyc is imported only here)
# ----------------------------------------------------------------------------------------------

def _party_files(std: StandardFormLP, tab: IntegerTableau, parties: int, bit_length: int) -> list[dict[str, Any]]:
    """What each party process loads: the public part and only its own columns and bound rows."""
    n = std.n_cols
    T = tab.T
    cols = [np.flatnonzero(std.col_owner == j) for j in range(parties)]
    pub_cols = np.flatnonzero(std.col_owner < 0)
    pub_rows = np.flatnonzero(std.row_owner < 0)
    bound = [np.flatnonzero(std.row_owner == j) for j in range(parties)]
    public = {"m": std.n_rows, "n": n, "parties": parties, "bit_length": bit_length,
              "cols": [len(c) for c in cols], "bound_rows": [len(r) for r in bound],
              "public_cols": [[int(v) for v in row] for row in T[:, pub_cols]],
              "public_rhs": [int(T[0, -1])] + [int(T[i + 1, -1]) for i in pub_rows]}
    return [{"public": public,
             "block": [[int(v) for v in row] for row in T[:, cols[j]]],
             "bound_rhs": [int(T[i + 1, -1]) for i in bound[j]]} for j in range(parties)]


def _np_pwlst(mpc: Any, a: Any, x: Any, n: int) -> Any:
    """``[a, a x, ..., a x^(n-1)]`` as a secure array (the demo's np_pwlst)."""
    if n == 1:
        return mpc.np_fromlist([a])
    if n == 2:
        return mpc.np_fromlist([a, a * x])
    even = _np_pwlst(mpc, a, x * x, (n + 1) // 2)
    if n % 2:
        even, d = even[:-1], even[-1:]
    powers = np.stack((even, x * even)).reshape(n - (n % 2), order="F")
    if n % 2:
        powers = np.append(powers, d)
    return powers


async def _secure_simplex(mpc: Any, spec: dict[str, Any], out_path: Path, progress_path: Path) -> None:
    """One party's side of the demo's secure simplex on the shared tableau (see the module docstring)."""
    pub = spec["public"]
    m, n, p, me = pub["m"], pub["n"], pub["parties"], mpc.pid
    secint = mpc.SecInt(pub["bit_length"], n=m + n)  # an N-th root of unity, N >= m + n

    class SecureFraction:
        size = 2

        def __init__(self, a: Any) -> None:
            self.a = a

        def __lt__(self, other: SecureFraction) -> Any:
            return self.a[..., 0] * other.a[..., 1] < self.a[..., 1] * other.a[..., 0]

    Zp = secint.field
    N = Zp.nth
    w = Zp.root
    w_powers = Zp.array(np.empty(N), check=False)
    w_powers[0] = 1
    for i in range(1, N):
        w_powers[i] = w_powers[i - 1] * w
    await mpc.start()
    t0 = time.perf_counter()
    cpu0 = time.process_time()  # this party's own CPU time: a figure the machine's load does not inflate
    parts = []
    for j in range(p):
        if pub["cols"][j]:
            mine = np.array(spec["block"], dtype=object) if j == me else np.zeros((m + 1, pub["cols"][j]), dtype=object)
            parts.append(mpc.input(secint.array(mine.reshape(m + 1, pub["cols"][j])), senders=j))
    if pub["public_cols"] and pub["public_cols"][0]:
        parts.append(secint.array(np.array(pub["public_cols"], dtype=object)))
    rhs = [secint.array(np.array(pub["public_rhs"], dtype=object))]
    for j in range(p):
        if pub["bound_rows"][j]:
            mine = np.array(spec["bound_rhs"], dtype=object) if j == me else np.zeros(pub["bound_rows"][j], dtype=object)
            rhs.append(mpc.input(secint.array(mine), senders=j))
    parts.append(np.concatenate(rhs).reshape(m + 1, 1))
    T = np.concatenate(parts, axis=1)
    c, A, b = -T[0, :-1], T[1:, :-1], T[1:, -1]
    cobasis = w_powers[:n]
    basis = w_powers[N - m:N]
    previous_pivot = secint(1)
    iteration = 0

    def progress() -> None:
        sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.pid != me)
        with progress_path.open("a") as f:  # counts and times only
            f.write(json.dumps({"iteration": iteration, "elapsed_s": time.perf_counter() - t0,
                                "cpu_s": time.process_time() - cpu0, "bytes_sent": sent}) + "\n")

    progress()
    while await mpc.output((arg_min := T[0, :-1].argmin())[1] < 0):
        p_col_index = arg_min[0]
        p_col = T[:, :-1] @ p_col_index
        denominator = p_col[1:]
        constraints = np.column_stack((T[1:, -1] + (denominator <= 0), denominator))
        p_row_index, (_, pivot) = constraints.argmin(key=SecureFraction)
        delta = basis @ p_row_index - cobasis @ p_col_index
        cobasis += delta * p_col_index
        basis -= delta * p_row_index
        p_col_index = np.concatenate((p_col_index, np.array([0])))
        p_row_index = np.concatenate((np.array([0]), p_row_index))
        pp_inv = 1 / previous_pivot
        p_col = p_col * pp_inv - p_row_index
        p_row = p_row_index @ T + previous_pivot * p_col_index
        T = T * (pivot * pp_inv) - np.outer(p_col, p_row)
        previous_pivot = pivot
        iteration += 1
        progress()
    loop_s = time.perf_counter() - t0
    mx = await mpc.output(T[0, -1])
    cd = await mpc.output(previous_pivot)
    coefs = w_powers[[[(-j * k) % N for k in range(N)] for j in range(n)]]
    sum_powers = np.sum(np.fromiter((_np_pwlst(mpc, T[i + 1][-1] / N, basis[i], N) for i in range(m)), "O", count=m))
    x = coefs @ sum_powers
    coefs = w_powers[[[(-i * k) % N for k in range(N)] for i in range(N - m, N)]]
    sum_powers = np.sum(np.fromiter((_np_pwlst(mpc, T[0][j] / N, cobasis[j], N) for j in range(n)), "O", count=n))
    y = coefs @ sum_powers
    check = mpc.all([c @ x == y @ b, np.all(A @ x <= b * cd), np.all(x >= 0), np.all(y @ A >= c * cd), np.all(y >= 0)])
    check = bool(await mpc.output(check))
    own = None
    offset = 0
    for j in range(p):
        if pub["cols"][j]:
            xj = await mpc.output(x[offset:offset + pub["cols"][j]], receivers=j)
            if j == me:
                own = [int(v) for v in np.asarray(xj).reshape(-1)]
        offset += pub["cols"][j]
    solve_s = time.perf_counter() - t0
    sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.pid != me)
    result = {"pid": me, "iterations": iteration, "solve_s": solve_s, "loop_s": loop_s,
              "cpu_s": time.process_time() - cpu0, "bytes_sent": sent, "value_num": int(mx),
              "cd": int(cd), "check": check, "x_num": own}
    write_atomically(out_path, json.dumps(result), mode=0o600)
    await mpc.shutdown()


def mpyc_party(spec_path: Path, index: int, base_port: int, out_path: Path, progress_path: Path) -> None:
    """Run party ``index`` of the MPyC secure simplex described by ``spec_path`` (its own file).

    MPyC configures its runtime from ``sys.argv`` when ``mpyc.runtime`` is first imported, so the
    arguments it reads are set here, just before that import, and nowhere else.
    """
    spec = json.loads(spec_path.read_text())
    parties = spec["public"]["parties"]
    sys.argv = [sys.argv[0], "-M", str(parties), "-I", str(index), "-B", str(base_port)]
    from mpyc.runtime import mpc  # reads sys.argv at import

    mpc.run(_secure_simplex(mpc, spec, out_path, progress_path))


# ----------------------------------------------------------------------------------------------
# Driving both systems
# ----------------------------------------------------------------------------------------------

def mpyc_available() -> bool:
    """Whether the optional ``bench`` extra (mpyc) is installed.

    Asks for the installed distribution, not for an importable name: a checkout in a folder named
    ``mpyc`` is itself importable as ``mpyc`` under pytest (the repository root is a package).
    """
    import importlib.metadata

    try:
        importlib.metadata.version("mpyc")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _free_base_port(parties: int) -> int:
    """A base port with ``parties`` consecutive free TCP ports on localhost (MPyC's ``-B``)."""
    for _ in range(50):
        base = 20000 + secrets.randbelow(30000)
        socks = []
        try:
            for i in range(parties):
                s = socket.socket()
                s.bind(("127.0.0.1", base + i))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise ConfigError(f"no {parties} consecutive free ports found on localhost for the MPyC parties")


def _last_progress(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return json.loads(lines[-1]) if lines else None


def run_mpyc(std: StandardFormLP, tab: IntegerTableau, bit_length: int, *, parties: int = 3,
             time_limit_s: float = 1800.0) -> dict[str, Any]:
    """Run the MPyC secure simplex with ``parties`` local processes; wall time, bytes, outputs.

    Returns a dict with ``status`` ("optimal", "time_limit" or "error"), ``solve_s`` (party 0,
    from all connected to its outputs, input sharing included), ``wall_s`` (launch to exit of
    every process), ``cpu_s`` (the parties' own CPU time in that phase, summed), ``bytes`` (sent
    by all parties, MPyC's own counters: 12-byte header plus payload per message), ``iterations``, and on success ``value`` (exact, scaled back) and ``x``
    (the converted variables, gathered from every party's own output for evaluation).
    """
    if not mpyc_available():
        raise ConfigError(f"mpyc is not installed; {EXTRA_HINT}")
    files = _party_files(std, tab, parties, bit_length)
    with tempfile.TemporaryDirectory(prefix="securelp-mpyc-") as tmp_name:
        tmp = Path(tmp_name)
        port = _free_base_port(parties)
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        t0 = time.perf_counter()
        try:
            for i in range(parties):
                spec = tmp / f"party{i}.json"
                write_atomically(spec, json.dumps(files[i]), mode=0o600)
                log = (tmp / f"party{i}.log").open("wb")
                logs.append(log)
                cmd = [sys.executable, "-m", "benchmarks.bench_mpyc", "--mpyc-party", str(spec), "--index", str(i),
                       "--base-port", str(port), "--out", str(tmp / f"out{i}.json"),
                       "--progress", str(tmp / f"progress{i}.jsonl")]
                procs.append(subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT))
            status = "optimal"
            while any(p.poll() is None for p in procs):
                if time.perf_counter() - t0 > time_limit_s:
                    status = "time_limit"
                    break
                if any(p.poll() not in (None, 0) for p in procs):
                    status = "error"
                    break
                time.sleep(0.2)
            if status == "optimal" and any(p.returncode != 0 for p in procs):
                status = "error"
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            for log in logs:
                log.close()
        wall = time.perf_counter() - t0
        row: dict[str, Any] = {"status": status, "wall_s": wall, "bit_length": bit_length}
        if status == "optimal":
            outs = [json.loads((tmp / f"out{i}.json").read_text()) for i in range(parties)]
            cd = outs[0]["cd"]
            x_num = np.zeros(std.n_cols, dtype=object)
            for j in range(parties):
                x_num[np.flatnonzero(std.col_owner == j)] = outs[j]["x_num"]
            row.update(solve_s=outs[0]["solve_s"], loop_s=outs[0]["loop_s"], iterations=outs[0]["iterations"], check=outs[0]["check"],
                       bytes=sum(o["bytes_sent"] for o in outs), cpu_s=sum(o["cpu_s"] for o in outs),
                       value=Fraction(outs[0]["value_num"], cd * tab.scale),
                       x=np.array([float(Fraction(int(v), cd)) for v in x_num]))
        else:
            last = [_last_progress(tmp / f"progress{i}.jsonl") for i in range(parties)]
            if last[0] is not None:
                row.update(iterations=last[0]["iteration"], solve_s=last[0]["elapsed_s"])
            if all(x is not None for x in last):
                row["bytes"] = sum(x["bytes_sent"] for x in last)
                row["cpu_s"] = sum(x["cpu_s"] for x in last)
            if status == "error":
                tail = (tmp / "party0.log").read_text(errors="replace").splitlines()[-5:]
                row["error"] = " | ".join(tail)
    return row


def _securelp_runs(lp: LinearProgram, split: Sequence[int]) -> list[dict[str, Any]]:
    """securelp's PPLP on ``lp`` with three parties: in-process, and gRPC + mTLS to real processes."""
    from securelp.coordinator.launcher import LocalParties
    from securelp.coordinator.protocol import SessionConfig
    from securelp.coordinator.simulation import audit_simulation, simulate
    from securelp.coordinator.transcript import run_recorded
    from securelp.solvers.lp.partition import split_columns

    public, blocks = split_columns(lp, list(split))
    config = SessionConfig(bounds_mode="monomial", deadline_s=600.0)
    rows = []
    t0 = time.perf_counter()
    out, audit = simulate(public, blocks, config, transport="inprocess", central=lp)
    wall = time.perf_counter() - t0
    rows.append(("inprocess", out, audit.claims_hold, wall, None))
    with tempfile.TemporaryDirectory(prefix="securelp-mpyc-bench-") as tmp:
        t0 = time.perf_counter()
        with LocalParties(blocks, Path(tmp)) as cluster:
            start = time.perf_counter() - t0
            out, transcript = run_recorded(public, cluster.links(deadline_s=600.0), config, central=lp)
        wall = time.perf_counter() - t0
    rows.append(("grpc-processes", out, audit_simulation(transcript, blocks).claims_hold, wall, start))
    result = []
    for transport, o, aud, wall, start in rows:
        result.append({"system": "securelp", "transport": transport, "bounds_mode": "monomial",
                       "status": o.status.value, "objective": o.objective, "solve_s": o.timings_s["total"],
                       "wall_s": wall, "process_start_s": start,
                       "bytes": sum(p.bytes_sent + p.bytes_received for p in o.parties),
                       "iterations": o.iterations, "feasibility_violation": o.feasibility_violation,
                       "audit_claims_hold": aud})
    return result


def load_lp(name: str, netlib_dir: Path, parties: int) -> tuple[LinearProgram, list[int]]:
    """``example1``/``example2`` (Mangasarian's, with their split) or a netlib file (contiguous split)."""
    from securelp.coordinator.examples import mangasarian_example
    from securelp.solvers.lp.partition import parse_split

    if name.startswith("example"):
        lp, split, _ = mangasarian_example(int(name[len("example"):]))
        return lp, list(split)
    path = netlib_dir / f"{name}.mps"
    if not path.is_file():
        raise InputError(f"netlib file {path} does not exist; pass --netlib-dir DIR (with {name}.mps) or drop "
                         f"{name} from --lps")
    lp = read_mps(path)
    return lp, parse_split(None, lp.n_cols, parties)


def owners_from_split(split: Sequence[int]) -> np.ndarray:
    """The party of each column for contiguous blocks of sizes ``split``."""
    return np.repeat(np.arange(len(split)), split)


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b):
        return None
    return abs(a - b) / max(1.0, abs(b))


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM, Python and the versions that matter here."""
    m = machine(("mpyc", "gmpy2", "uvloop", "numpy", "highspy", "grpcio"))
    return {"cpu": m["cpu"], "cores": m["cores"], "ram_gib": round(m["memory_bytes"] / 2**30, 1),
            "python": m["python"], "versions": m["versions"], "load_avg_1m": m["load_average"][0]}


def bench_lp(name: str, args: argparse.Namespace, context: dict[str, Any]) -> list[dict[str, Any]]:
    """Both systems on one LP; one record per system/transport."""
    lp, split = load_lp(name, args.netlib_dir, args.parties)
    t0 = time.perf_counter()
    central = HighsBackend().solve(lp)
    central_s = time.perf_counter() - t0
    if central.status != SolveStatus.OPTIMAL:
        raise InputError(f"{name}: HiGHS reports {central.status.value}; the comparison needs a solvable LP")
    base = {**context, "lp": name, "m": lp.n_rows, "n": lp.n_cols, "split": list(split),
            "central_objective": central.objective, "central_s": central_s}
    records = []
    systems = args.systems.split(",")
    if "mpyc" in systems:
        std = to_standard_form(lp, owners_from_split(split))
        conv = HighsBackend(time_limit=300.0).solve(std.as_lp())
        conv_obj = std.original_objective(conv.objective) if conv.status == SolveStatus.OPTIMAL else None
        tab = integer_tableau(std, args.decimals, row_gcd=args.row_gcd)
        exact = exact_simplex(tab, time_budget_s=args.exact_budget)
        replay = float_replay(std)
        if exact.status == "optimal":
            bits, source = exact.required_bit_length(), "clear run of the same simplex"
        else:  # a lower bound on what a complete run needs: MPyC runs with fewer bits than it should
            bits = exact.required_bit_length()
            source = (f"clear run's first {exact.iterations} iterations only (a lower bound; "
                      f"Hadamard's bound gives {2 * (hadamard_bits(tab) + 1) + 2} bits)")
        conversion = {"m": std.n_rows, "row_gcd": args.row_gcd, "n": std.n_cols, "artificial_rows": int(std.artificial.sum()),
                      "big_m": std.big_m, "scale": tab.scale, "exact_scaling": tab.exact,
                      "converted_rel_diff": _rel(conv_obj, central.objective),
                      "clear_run": {"status": exact.status, "iterations": exact.iterations,
                                    "max_entry_bits": exact.max_bits, "seconds": exact.seconds,
                                    "objective": std.original_objective(Fraction(exact.value_num, exact.cd * tab.scale))
                                    if exact.status == "optimal" else None},
                      "float_replay_iterations": replay, "hadamard_entry_bits": hadamard_bits(tab),
                      "bit_length_source": source}
        print(f"{name}: converted {std.n_rows} x {std.n_cols} ({conversion['artificial_rows']} artificial rows), "
              f"scale {tab.scale}{'' if tab.exact else ' (rounded)'}, clear run {exact.status} in "
              f"{exact.iterations} iterations ({exact.seconds:.1f} s), {bits}-bit secure integers ({source})",
              flush=True)
        res = run_mpyc(std, tab, bits, parties=args.parties, time_limit_s=args.time_limit)
        rec = {**base, "system": "mpyc", "transport": "mpyc-processes", "status": res["status"],
               "time_limit_s": args.time_limit, "solve_s": res.get("solve_s"), "loop_s": res.get("loop_s"),
               "wall_s": res["wall_s"],
               "bytes": res.get("bytes"), "cpu_s": res.get("cpu_s"), "iterations": res.get("iterations"),
               "bit_length": bits,
               "conversion": conversion}
        if res["status"] == "optimal":
            obj = std.original_objective(res["value"])
            x = std.recover @ res["x"] + std.shift
            rec.update(objective=obj, objective_from_x=lp.objective_value(x),
                       feasibility_violation=lp.max_violation(x), certificate_check=res["check"])
        if "error" in res:
            rec["error"] = res["error"]
        rec["rel_diff"] = _rel(rec.get("objective"), central.objective)
        records.append(rec)
        print(f"  mpyc: {rec['status']}, solve {rec['solve_s'] or float('nan'):.1f} s, "
              f"{rec['iterations']} iterations, rel diff {rec['rel_diff']}", flush=True)
    if "securelp" in systems:
        runs = [_securelp_runs(lp, split) for _ in range(args.repeat)]
        for per_transport in zip(*runs):
            # the figures of the run with the median solve time
            r = dict(sorted(per_transport, key=lambda q: q["solve_s"])[len(per_transport) // 2])
            r["repeat"] = len(per_transport)
            r["solve_s_all"] = [q["solve_s"] for q in per_transport]
            r["max_rel_diff_all"] = max(_rel(q["objective"], central.objective) or 0.0 for q in per_transport)
            rec = {**base, **r, "rel_diff": _rel(r["objective"], central.objective)}
            records.append(rec)
            print(f"  securelp {rec['transport']}: {rec['status']}, solve {rec['solve_s']:.3f} s, "
                  f"rel diff {rec['rel_diff']}", flush=True)
    return records


def append_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Append JSON lines to ``path`` (the whole file rewritten atomically)."""
    old = path.read_text() if path.is_file() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    new = "".join(json.dumps(_plain(r), allow_nan=False) + "\n" for r in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, old + new, what="results ")


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    return v


# ----------------------------------------------------------------------------------------------
# Rendering the docs table
# ----------------------------------------------------------------------------------------------

def _fmt_s(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f} s" if v < 10 else f"{v:,.1f} s"


def _fmt_bytes(v: int | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1e6:,.1f} MB" if v >= 1e5 else f"{v / 1e3:,.1f} kB"


def render_table(records: Sequence[dict[str, Any]]) -> str:
    """The markdown table of the newest run of each LP (both systems of that run side by side)."""
    newest: dict[str, str] = {}
    for r in records:
        newest[r["lp"]] = r["run_id"]
    order = list(dict.fromkeys(r["lp"] for r in records))
    lines = [("| LP (m x n) | system | status | optimum | rel. diff to HiGHS | secure solve | wall | "
              "bytes | ratio vs securelp (in-process / gRPC) | reveals to whom | run |"),
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    notes = []
    for lp in order:
        rs = [r for r in records if r["lp"] == lp and r["run_id"] == newest[lp]]
        sl = {r["transport"]: r for r in rs if r["system"] == "securelp"}
        central = rs[0]["central_objective"]
        lines.append(f"| {lp} ({rs[0]['m']} x {rs[0]['n']}) | HiGHS, central | optimal | {central:.10g} | - | "
                     f"{_fmt_s(rs[0]['central_s'])} | - | - | - | {REVEALS['highs']} | {rs[0]['date'][:10]} `{rs[0]['commit']}` |")
        for r in rs:
            if r["system"] == "mpyc":
                conv = r["conversion"]
                if r["status"] == "optimal":
                    status = f"optimal, {r['iterations']} iterations, check {'passed' if r.get('certificate_check') else 'FAILED'}"
                elif r["status"] == "time_limit":
                    need = (conv["clear_run"]["iterations"] if conv["clear_run"]["status"] == "optimal"
                            else f"about {conv.get('float_replay_iterations')}")
                    done = r.get("iterations") or 0
                    status = (f"**not finished** at the {r['time_limit_s']:.0f} s limit: {done} of {need} iterations"
                              + (f" (the last done at {r['solve_s']:,.1f} s)" if done else ""))
                else:
                    status = f"error: {r.get('error', '')}"
                ratios = "-"
                if r["status"] == "optimal" and r.get("solve_s") and sl:
                    parts = [f"{r['solve_s'] / sl[t]['solve_s']:,.0f}x" for t in ("inprocess", "grpc-processes") if t in sl]
                    ratios = " / ".join(parts)
                elif r["status"] == "time_limit" and sl:
                    parts = [f"> {r['wall_s'] / sl[t]['solve_s']:,.0f}x" for t in ("inprocess", "grpc-processes") if t in sl]
                    ratios = " / ".join(parts)
                name = f"MPyC {r['versions']['mpyc']}, 3 processes, {r['bit_length']}-bit"
                rel = f"{r['rel_diff']:.1e}" if r.get("rel_diff") is not None else "-"
                obj = f"{r['objective']:.10g}" if r.get("objective") is not None else "-"
                solve = _fmt_s(r.get("solve_s"))
                sent = _fmt_bytes(r.get("bytes"))
                if r["status"] != "optimal":  # the time reached; bytes up to the last completed iteration
                    solve = f"> {_fmt_s(r['wall_s'])}"
                    sent = f">= {sent}" if r.get("bytes") else "-"
                lines.append(f"| | {name} | {status} | {obj} | {rel} | {solve} | "
                             f"{_fmt_s(r['wall_s'])} | {sent} | {ratios} | {REVEALS['mpyc']} | |")
                notes.append(f"{lp}: converted to {conv['m']} x {conv['n']}, {conv['artificial_rows']} artificial rows"
                             + (f" (big-M {conv['big_m']:g})" if conv['artificial_rows'] else "")
                             + f", scale {conv['scale']}{'' if conv['exact_scaling'] else ' (data rounded)'}; "
                             f"HiGHS on the converted LP: rel. diff "
                             + (f"{conv['converted_rel_diff']:.1e}" if conv['converted_rel_diff'] is not None else "-")
                             + f"; bit length from the {conv['bit_length_source']}"
                             + (f" (clear run: {conv['clear_run']['iterations']} iterations, largest entry "
                                f"{conv['clear_run']['max_entry_bits']} bits)" if conv['clear_run']['status'] == 'optimal'
                                else f" (clear run stopped after {conv['clear_run']['seconds']:.0f} s; the float "
                                     f"replay of the same rules needs {conv.get('float_replay_iterations')} iterations)")
                             + (f"; the MPyC parties' own CPU time {r['cpu_s']:,.1f} s (three summed"
                                + (")" if r["status"] == "optimal" else f", up to iteration {r.get('iterations')})")
                                if r.get("cpu_s") is not None and (r["status"] == "optimal" or r.get("iterations"))
                                else "")
                             + ".")
            else:
                label = {"inprocess": "securelp, in-process", "grpc-processes": "securelp, gRPC + mTLS, 3 processes"}
                rel = f"{r['rel_diff']:.1e}" if r.get("rel_diff") is not None else "-"
                lines.append(f"| | {label.get(r['transport'], r['transport'])} (monomial) | {r['status']} | "
                             f"{r['objective']:.10g} | {rel} | {_fmt_s(r['solve_s'])} | {_fmt_s(r['wall_s'])} | "
                             f"{_fmt_bytes(r['bytes'])} | 1x | {REVEALS['securelp']} | |")
    machines = {(r["machine"]["cpu"], r["machine"]["cores"], r["machine"]["ram_gib"]) for r in records
                if r["run_id"] == newest[r["lp"]]}
    loads = sorted({r["machine"].get("load_avg_1m") for r in records
                    if r["run_id"] == newest[r["lp"]] and r["machine"].get("load_avg_1m") is not None})
    out = ["\n".join(lines), "", "Conversions for MPyC:", ""]
    out += [f"* {n}" for n in notes]
    out += ["", "Machines: " + "; ".join(f"{c}, {k} cores, {r} GiB" for c, k, r in sorted(machines, key=str))
            + (f" (1-minute load average when a run started: {', '.join(f'{v:.1f}' for v in loads)})" if loads else "")
            + ".",
            "Commands: " + "; ".join(sorted({f"`{r['command']}` ({r['date'][:16]})" for r in records
                                              if r["run_id"] == newest[r["lp"]]}))]
    return "\n".join(out) + "\n"


def render(results: Path, page: Path) -> None:
    """Rewrite the section of ``page`` between the table markers from ``results``."""
    if not results.is_file():
        raise InputError(f"results file {results} does not exist; run the benchmark first (without --render)")
    records = [json.loads(ln) for ln in results.read_text().splitlines() if ln.strip()]
    if not records:
        raise InputError(f"results file {results} holds no record; run the benchmark first")
    if not page.is_file():
        raise InputError(f"docs page {page} does not exist; create it with the lines {TABLE_BEGIN!r} and "
                         f"{TABLE_END!r} where the table goes")
    text = page.read_text()
    if TABLE_BEGIN not in text or TABLE_END not in text or text.index(TABLE_BEGIN) > text.index(TABLE_END):
        raise InputError(f"{page} lacks the table markers; add the line {TABLE_BEGIN!r} and, below it, "
                         f"{TABLE_END!r} where the table goes")
    head, rest = text.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    write_atomically(page, head + TABLE_BEGIN + "\n" + render_table(records) + TABLE_END + tail, what="docs page ")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lps", default=DEFAULT_LPS, help=f"comma-separated: netlib names and example1/example2 "
                                                       f"(default {DEFAULT_LPS})")
    ap.add_argument("--netlib-dir", type=Path, default=DEFAULT_NETLIB)
    ap.add_argument("--parties", type=positive_int, default=3)
    ap.add_argument("--systems", default="mpyc,securelp")
    ap.add_argument("--repeat", type=positive_int, default=5, help="securelp runs per LP (the median is reported)")
    ap.add_argument("--time-limit", type=float, default=1800.0, help="per-LP limit of the MPyC run, seconds")
    ap.add_argument("--exact-budget", type=float, default=120.0,
                    help="seconds for the clear run that sizes MPyC's integers (else Hadamard's bound)")
    ap.add_argument("--decimals", type=int, default=6, help="at most this many decimals when scaling to integers")
    ap.add_argument("--no-row-gcd", dest="row_gcd", action="store_false",
                    help="leave out the demo's row-wise gcd reduction of the integer tableau")
    ap.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    ap.add_argument("--render", type=Path, default=None, metavar="PAGE",
                    help="only rewrite PAGE's marked table from --results")
    ap.add_argument("--mpyc-party", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--base-port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--progress", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.mpyc_party is None and argv is None:  # the command line's process: stop the parties on SIGTERM too
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.mpyc_party is not None:
            mpyc_party(args.mpyc_party, args.index, args.base_port, args.out, args.progress)
            return 0
        if args.render is not None:
            render(args.results, args.render)
            print(f"rewrote the table in {args.render} from {args.results}")
            return 0
        if "mpyc" in args.systems.split(",") and not mpyc_available():
            raise ConfigError(f"mpyc is not installed; {EXTRA_HINT}")
        if args.time_limit <= 0 or args.exact_budget < 0 or args.decimals < 0:
            raise ConfigError("--time-limit must be positive, --exact-budget and --decimals nonnegative")
        context = {"run_id": secrets.token_hex(6), "machine": machine_info(), "commit": commit(),
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "command": "python -m benchmarks.bench_mpyc " + " ".join(sys.argv[1:] if argv is None else argv)}
        context["versions"] = context["machine"]["versions"]
        for name in [s for s in args.lps.split(",") if s]:
            records = bench_lp(name, args, context)
            append_records(args.results, records)  # per LP, so a long run keeps what it measured
        return 0
    except SecureLPError as exc:
        print(f"bench_mpyc: {exc}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    raise SystemExit(main())
