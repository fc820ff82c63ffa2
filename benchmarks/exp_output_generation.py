"""Experiment (not a product path): output generation on the PMO's largest mDP-graph component.

The restricted PMO keeps every record of the component but only a subset ``S`` of its outputs,
and is solved whole by HiGHS (``--solver ipm``: interior point without crossover; ``choose``:
simplex). At its unit-row duals ``mu`` every kept output is priced by the cone LP of
:mod:`securelp.solvers.mdp.columns.pricing` (``v_k(mu) = min {(g_k - mu)' z : z in C, 0 <= z <= 1}``);
the ``--add`` most negative outputs join ``S``. Both lower bounds of :mod:`securelp.solvers.mdp.columns.bounds` are
evaluated from clipped duals only, so they are valid whatever the solvers' tolerances:
``sum(mu) + sum_k min(0, v_k(mu))`` and ``sum_i min_k (g_k + A'y_k)_i``. The upper bound
printed is the restricted LP's objective (not a repaired, verified mechanism: this script
measures how many outputs the optimum needs and what the restricted solves cost).

Why: at a vertex optimum of gaussian 300's giant component (213 records, 261 kept outputs)
only 38 outputs carry mass, so a restricted PMO over a few dozen outputs can be exact.
Results and the side-by-side run against ``bd --decomposition columns`` are in
docs/benchmarks/mdp.md ("Output generation").

    python -m benchmarks.exp_output_generation --records 300 --add 20 --solver ipm
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.sparse as sp

from securelp.solvers.errors import InputError
from securelp.solvers.lp.highs import new_highs, pass_lp
from securelp.solvers.lp.model import LinearProgram
from securelp.solvers.mdp.columns.bounds import undominated_outputs
from securelp.solvers.mdp.columns.component import ComponentCG
from securelp.solvers.mdp.datasets import gaussian_dataset
from securelp.solvers.mdp.pmo import build_pmo


def largest_component(records: int, seed: str) -> ComponentCG:
    """The column decomposition's model of the largest component: ``G`` (records x kept outputs), ``A``
    (mDP rows), the stored certificates and the pricer."""
    prob = build_pmo(gaussian_dataset(records, seed=seed))
    idx = max(prob.graph.component_members(), key=lambda g: g.size)
    return ComponentCG(prob, idx, undominated_outputs(prob.cost[idx]), 1, 1e-6)


def solve_restricted(G: np.ndarray, A: sp.csr_matrix, S: list[int], solver: str):
    """The PMO over outputs ``S``: ``(status, objective, Z (m x |S|), mu, Y (|S| x E))``."""
    m, E, s = G.shape[0], A.shape[0], len(S)
    M = sp.vstack([sp.kron(sp.identity(s, format="csr"), A, format="csr"),
                   sp.hstack([sp.identity(m, format="csr")] * s, format="csr")], format="csc")
    lp = LinearProgram(c=G[:, S].T.ravel(), A=M, row_lower=np.r_[np.full(E * s, -np.inf), np.ones(m)],
                       row_upper=np.r_[np.zeros(E * s), np.ones(m)], col_lower=np.zeros(m * s), col_upper=np.ones(m * s))
    h = new_highs({"solver": solver, **({"run_crossover": "off"} if solver == "ipm" else {})}, tight=True)
    if not pass_lp(h, lp):
        raise RuntimeError("HiGHS refused the restricted PMO")
    h.run()
    sol = h.getSolution()
    rd = np.asarray(sol.row_dual, dtype=float)
    obj = float(h.getInfo().objective_function_value)
    mu = rd[E * s:]
    if abs(mu.sum() - obj) > 1e-6 * max(1.0, abs(obj)):  # HiGHS's dual sign convention
        mu, rd = -mu, -rd
    return (h.modelStatusToString(h.getModelStatus()), obj, np.asarray(sol.col_value).reshape(s, m).T, mu,
            rd[:E * s].reshape(s, E))


def run(records: int, add: int, solver: str, seed: str = "0", gap: float = 1e-6, max_rounds: int = 50,
        out=sys.stdout) -> dict[str, float]:
    t0 = time.perf_counter()
    cg = largest_component(records, seed)
    G, A = cg.G, cg.A
    m, K = G.shape
    print(f"largest component: {m} records, {K} kept outputs, {A.shape[0]} mDP rows per output", file=out, flush=True)
    S = [int(np.argmin(G.sum(axis=0)))]
    best = -np.inf
    try:
        for rnd in range(1, max_rounds + 1):
            tr = time.perf_counter()
            status, obj, Z, mu, Y = solve_restricted(G, A, S, solver)
            t_res = time.perf_counter() - tr
            tp = time.perf_counter()
            in_s = np.zeros(K, dtype=bool)
            in_s[S] = True
            Q = cg.certs.Q
            Q[S] = G[:, S].T + (cg.AT @ np.maximum(0.0, -Y).T).T  # q_k = g_k + A'y_k, y_k clipped
            cg.pricer.price(np.flatnonzero(~in_s), mu, 1e-12)  # keeps the better certificate per output
            Q = cg.certs.Q
            v = np.minimum(0.0, Q - mu).sum(axis=1)
            lower = max(float(mu.sum() + v.sum()), float(Q.min(axis=0).sum()))
            best = max(best, lower)
            rel = (obj - best) / abs(obj)
            used = int((Z.max(axis=0) > 1e-9).sum())
            print(f"round {rnd}: |S| {len(S)} (mass on {used}), restricted {status} {obj:.8f} in {t_res:.1f} s; "
                  f"lower {best:.8f}, gap {rel:.2e}; pricing {time.perf_counter() - tp:.1f} s; "
                  f"t = {time.perf_counter() - t0:.1f} s", file=out, flush=True)
            cand = np.flatnonzero(~in_s & (v < -1e-9))
            if rel <= gap or cand.size == 0:
                break
            S = sorted(set(S) | {int(k) for k in cand[np.argsort(v[cand])][:add]})
    finally:
        cg.close()
    return {"objective": obj, "lower": best, "rel_gap": rel, "rounds": rnd, "outputs": len(S),
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--add", type=int, default=20, help="outputs added per round (default 20)")
    p.add_argument("--solver", choices=["ipm", "choose"], default="ipm")
    p.add_argument("--seed", default="0")
    a = p.parse_args(argv)
    if a.records < 2 or a.add < 1:
        p.error(f"--records must be >= 2 and --add >= 1 (got {a.records} and {a.add})")
    try:
        r = run(a.records, a.add, a.solver, a.seed)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    print(f"done: objective {r['objective']:.10f}, lower {r['lower']:.10f}, gap {r['rel_gap']:.2e}, "
          f"{r['outputs']} outputs, {r['rounds']} rounds, {r['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
