"""Every HiGHS user runs after any other in one fresh Python process (HiGHS's scheduler is per process)."""

from __future__ import annotations


def test_every_highs_user_runs_after_any_other_in_one_process():
    """HiGHS >= 1.16 keeps one task scheduler per process, sized by its first run, and refuses
    a later model that asks for another thread count. Run each engine's HiGHS path after the
    LP backend in a fresh interpreter, so test order cannot hide a regression."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import numpy as np\n"
        "from securelp.solvers.lp import HighsBackend, LinearProgram\n"
        "lp = LinearProgram(c=[1.0, 1.0], A=np.array([[1.0, 1.0]]), row_lower=[1.0], row_upper=[np.inf],\n"
        "                   col_lower=[0.0, 0.0], col_upper=[np.inf, np.inf])\n"
        "assert HighsBackend().solve(lp).status.value == 'optimal'\n"
        "from securelp.solvers.mdp.datasets import load_dataset\n"
        "from securelp.solvers.mdp.pmo import build_pmo\n"
        "from securelp.solvers.mdp.direct import solve_direct\n"
        "from securelp.solvers.mdp.bd import solve_bd\n"
        "from securelp.solvers.mdp.columns import solve_colgen\n"
        "p = build_pmo(load_dataset('grid', rows=3, cols=3, cell_km=1.0), 1.0, 2.0)\n"
        "d = solve_direct(p)\n"
        "b = solve_bd(p, n_subsets=2)\n"
        "c = solve_colgen(p)\n"
        "assert d.status == b.status == c.status == 'optimal', (d.status, b.status, c.status)\n"
        "print('ok')\n"
    )
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", script], cwd=repo, check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok")
