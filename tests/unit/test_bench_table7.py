"""benchmarks/bench_table7.py: the metrics of the Table 7 comparison on a hand-built hierarchy with
known answers (L1 per level in the paper's units, the #CV count with planted violations), the
pooling of repetitions and the rendered tables."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_table7 as bt
from securelp.solvers.errors import InputError
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.model import GroupSizeData, Hierarchy
from securelp.solvers.randomness import SecureRandom


def _tiny() -> GroupSizeData:
    """R -> A, B; A -> a1, a2; B -> b1 (3 levels), sizes 1..3, consistent true counts."""
    h = Hierarchy.from_parents(["R", "A", "B", "a1", "a2", "b1"], ["", "R", "R", "A", "A", "B"])
    c = np.zeros((h.size, 3), dtype=np.int64)
    leaves = {"a1": [4, 2, 0], "a2": [1, 3, 1], "b1": [2, 0, 5]}
    for k, v in leaves.items():
        c[h.ids.index(k)] = v
    for r in reversed(range(h.size)):
        if h.children[r]:
            c[r] = c[list(h.children[r])].sum(axis=0)
    return GroupSizeData(h, c)


def _row(data: GroupSizeData, rid: str) -> int:
    return data.hierarchy.ids.index(rid)


def test_l1_by_level_in_paper_units_known_answer() -> None:
    data = _tiny()
    x = data.counts.copy()
    x[_row(data, "R"), 0] += 3           # level 1: 3
    x[_row(data, "A"), 1] -= 2           # level 2: 2 + 5 = 7
    x[_row(data, "B"), 2] += 5
    x[_row(data, "a1"), 2] += 4          # level 3: 4 + 1 + 6 = 11
    x[_row(data, "a2"), 0] -= 1
    x[_row(data, "b1"), 1] += 6
    assert bt.l1_by_level(data.hierarchy, x, data.counts) == {1: 3.0, 2: 7.0, 3: 11.0}
    assert bt.l1_by_level(data.hierarchy, x, data.counts, unit=10) == {1: 0.3, 2: 0.7, 3: 1.1}
    # restricted to the cells whose true count is 0: a1 size 3 (+4) and b1 size 2 (+6); R, A, B have none
    zero = data.counts == 0
    assert bt.l1_by_level(data.hierarchy, x, data.counts, unit=1, mask=zero) == {1: 0.0, 2: 0.0, 3: 10.0}
    # the same figure as the engine's evaluation metric, divided by the unit
    engine = mech.l1_error_by_level(data.hierarchy, x, data.counts)
    assert {int(k): v / 1000 for k, v in engine.items()} == bt.l1_by_level(data.hierarchy, x, data.counts, 1000)
    # the truth itself has no error
    assert bt.l1_by_level(data.hierarchy, data.counts, data.counts, 10) == {1: 0.0, 2: 0.0, 3: 0.0}


def test_l1_by_level_refuses_mismatched_shapes_and_units() -> None:
    data = _tiny()
    with pytest.raises(InputError, match="regions"):
        bt.l1_by_level(data.hierarchy, data.counts[:, :2], data.counts)
    with pytest.raises(InputError, match="unit"):
        bt.l1_by_level(data.hierarchy, data.counts, data.counts, unit=0)


def test_violations_of_a_consistent_release_are_zero() -> None:
    data = _tiny()
    assert bt.count_violations(data.hierarchy, data.counts) == bt.Violations(pairs=0, regions=0)
    # a consistent release far from the truth (every count doubled) has no violation either
    assert bt.count_violations(data.hierarchy, 2 * data.counts) == bt.Violations(0, 0)


def test_planted_violations_are_counted_per_internal_region_and_size() -> None:
    data = _tiny()
    x = data.counts.copy()
    x[_row(data, "a1"), 1] += 1  # breaks A = a1 + a2 at size 2 only (A, and so R, keep their values)
    assert bt.count_violations(data.hierarchy, x) == bt.Violations(pairs=1, regions=1)
    x[_row(data, "B"), 0] += 2   # breaks B = b1 and R = A + B, both at size 1
    assert bt.count_violations(data.hierarchy, x) == bt.Violations(pairs=3, regions=3)
    x[_row(data, "a2"), 2] -= 1  # a second size of A: one more pair, no new region
    assert bt.count_violations(data.hierarchy, x) == bt.Violations(pairs=4, regions=3)
    # the count agrees with what a release reports
    assert mech.release_metrics(data.hierarchy, x, data.total)["constraint_violations"] == 4
    # fractional values: a rounding-sized disagreement counts, float noise far below 1e-9 does not
    f = data.counts.astype(np.float64)
    f[_row(data, "b1"), 2] += 1e-12
    assert bt.count_violations(data.hierarchy, f).pairs == 0
    f[_row(data, "b1"), 2] += 0.5
    assert bt.count_violations(data.hierarchy, f) == bt.Violations(pairs=1, regions=1)  # B = b1 at size 3; R = A + B holds


def test_violation_count_matches_the_engine_on_random_rounded_releases() -> None:
    data = _tiny()
    rng = np.random.default_rng(5)
    for _ in range(50):
        x = np.rint(data.counts + rng.normal(0, 1.0, data.counts.shape)).astype(np.int64)
        assert bt.count_violations(data.hierarchy, x).pairs == mech.release_metrics(
            data.hierarchy, x, data.total)["constraint_violations"]


def test_count_violations_refuses_wrong_shape() -> None:
    data = _tiny()
    with pytest.raises(InputError, match="one row per region"):
        bt.count_violations(data.hierarchy, data.counts[:3])


def test_geometric_mean_abs_matches_the_pmf() -> None:
    for b in (0.5, 3.0, 30.0):
        a = math.exp(-1 / b)
        z = np.arange(-4000, 4001)
        pmf = (1 - a) / (1 + a) * a ** np.abs(z)
        assert bt.geometric_mean_abs(b) == pytest.approx(float((pmf * np.abs(z)).sum()), rel=1e-9)


def test_paper_figures_are_the_published_table() -> None:
    assert len(bt.PAPER) == 2 * 3 * 6
    assert bt.PAPER[("taxi", "0.1", "hqp")] == bt.PaperCell((25.4, 158.7, 904.4), 18206)
    assert bt.PAPER[("census", "1", "chain")] == bt.PaperCell((0.0, 1.7, 86.9), 0)
    assert bt.PAPER[("census", "0.5", "cqp")] == bt.PaperCell((23.1, 61.0, 494.2), 1718)
    # the exact mechanisms and TopDown report no violation in the paper
    assert all(c.cv == 0 for (_, _, m), c in bt.PAPER.items() if m in ("hdp", "cdp", "chain", "topdown"))


def test_one_repetition_records_the_metrics_not_private() -> None:
    data = _tiny()
    opts = mech.PostprocessOptions()
    rec = bt.run_repetition("taxi", data, "1", "hqp", 0, opts)
    assert set(rec["l1"]) == {"1", "2", "3"}
    again = bt.run_repetition("taxi", data, "1", "hqp", 0, opts)
    assert again["l1"] == rec["l1"] and again["cv"] == rec["cv"]  # seeded: the same draw
    cell = bt.run_cell("taxi", data, "1", "hdp", range(2), opts, progress=False)
    assert cell["private"] is False and cell["evaluation"].startswith("NOT PRIVATE")
    assert [r["rep"] for r in cell["reps"]] == [0, 1] and all(r["cv"] == 0 for r in cell["reps"])
    assert cell["noise_scale"] == 6.0  # 2L/eps with L = 3, eps = 1
    # the machine is shared: every repetition and every cell carries the load average it ran under
    assert all(r["load_avg_1m"] >= 0 for r in cell["reps"])
    assert len(cell["load_avg"]["start"]) == 3 and len(cell["load_avg"]["end"]) == 3


def test_cqp_by_fista_matches_the_engines_cqp() -> None:
    """The benchmark's M_c^r for models the engine's cqp refuses: the same rounded relaxation."""
    data = _tiny()
    for k in range(5):
        noisy = mech.add_noise("cqp", data, Fraction(1, 2), SecureRandom(seed=f"t7-cqp/{k}", label="test"))
        ours = bt.cqp_by_fista(data.hierarchy, noisy, data.total, tol=1e-7)
        engine = mech.postprocess("cqp", data.hierarchy, noisy, data.total)
        assert engine.details["qp_backend"] == "highs-qp" and ours.details["qp_backend"] == "fista (benchmark)"
        np.testing.assert_array_equal(ours.counts, engine.counts)


def _cell(ds: str, eps: str, m: str, reps: list[tuple[int, list[float], int]], commit: str = "c1") -> dict:
    return {"kind": "cell", "dataset": ds, "eps": eps, "mechanism": m, "commit": commit, "refused": [],
            "reps": [{"rep": k, "l1": {"1": a, "2": b, "3": c}, "cv": cv, "post_s": 1.0} for k, (a, b, c), cv in
                     [(k, l1, cv) for k, l1, cv in reps]]}


def test_pool_cells_merges_lines_and_the_newer_repetition_wins() -> None:
    recs = [_cell("taxi", "1", "hdp", [(0, [1, 2, 3], 0), (1, [3, 4, 5], 0)]),
            _cell("taxi", "1", "hdp", [(1, [5, 6, 7], 0), (2, [3, 4, 5], 0)], commit="c2")]
    st = bt.pool_cells(recs)[("taxi", "1", "hdp")]
    assert st.n == 3 and st.commits == ("c1", "c2")
    assert st.l1_mean == pytest.approx((3.0, 4.0, 5.0))  # reps 0, 1 (newer: 5, 6, 7) and 2
    assert st.l1_sd[0] == pytest.approx(2.0)


def test_rendered_table_has_ours_beside_the_paper_with_the_ratio(tmp_path: Path) -> None:
    recs = [_cell("taxi", "1", "chain", [(0, [1.0, 9.0, 157.2], 0), (1, [1.0, 9.0, 157.2], 0)]),
            _cell("taxi", "1", "hqp", [(0, [7.7, 77.2, 558.0], 100), (1, [7.7, 77.2, 558.0], 300)])]
    table = bt.render_main_table("taxi", bt.pool_cells(recs))
    chain = next(ln for ln in table.splitlines() if ln.startswith("| 1 | M_c^ch"))
    # ours 1.00 vs the paper's 0.5 -> ratio 2.00; level 3: 157 vs 78.6 -> 2.00; #CV 0 vs 0
    assert "| 1.00 ± 0.00 | 0.5 | 2.00 |" in chain and "| 157 ± 0.00 | 78.6 | 2.00 |" in chain
    hqp = next(ln for ln in table.splitlines() if ln.startswith("| 1 | M_H^r"))
    assert "| 7.70 ± 0.00 | 7.7 | 1.00 |" in hqp and "| 200 ± 277 | 18,085 | 0.01 |" in hqp  # mean 200, sd 141.4 -> 1.96 sd = 277
    assert "not run" in next(ln for ln in table.splitlines() if ln.startswith("| 0.1 | M_H^dp"))
    # the page section between the markers is rewritten, the rest kept
    page = tmp_path / "t7.md"
    page.write_text(f"intro\n{bt.TABLE_BEGIN}\nold\n{bt.TABLE_END}\noutro\n")
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in recs))
    bt.render(results, page)
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text and "M_c^ch" in text
    page.write_text("no markers\n")
    with pytest.raises(InputError, match="markers"):
        bt.render(results, page)


def test_ordering_marks_resolved_and_unresolved_differences() -> None:
    # chain far below hqp (resolved), cdp within noise of chain (not resolved)
    recs = [_cell("census", "1", "chain", [(k, [1.0 + 0.1 * k, 2.0, 80.0 + k], 0) for k in range(5)]),
            _cell("census", "1", "cdp", [(k, [1.05 + 0.1 * k, 3.0, 90.0 + k], 0) for k in range(5)]),
            _cell("census", "1", "hqp", [(k, [40.0 + k, 39.0, 130.0 + k], 1900) for k in range(5)])]
    text = bt.render_ordering("census", bt.pool_cells(recs))
    lev1 = next(ln for ln in text.splitlines() if ln.startswith("| 1 | 1 |"))
    assert "M_c^ch ≈ M_c^dp < M_H^r" in lev1 and "yes, not resolved" in lev1
    lev3 = next(ln for ln in text.splitlines() if ln.startswith("| 1 | 3 |"))
    assert "M_c^ch < M_c^dp < M_H^r" in lev3 and "yes, resolved" in lev3


def test_parse_reps_for() -> None:
    assert bt.parse_reps_for(["census:chain=3", "taxi:cqp=10"], bt.DATASETS, bt.ORDER) == {
        ("census", "chain"): 3, ("taxi", "cqp"): 10}
    for bad in ("census-chain=3", "census:foo=3", "census:chain=0", "census:chain=x"):
        with pytest.raises(InputError, match="--reps-for"):
            bt.parse_reps_for([bad], bt.DATASETS, bt.ORDER)


def test_a_single_draw_has_no_spread_and_resolves_no_ordering() -> None:
    recs = [_cell("census", "1", "chain", [(0, [1.0, 2.0, 80.0], 0)]),
            _cell("census", "1", "hqp", [(k, [40.0 + k, 39.0, 130.0 + k], 1900) for k in range(5)])]
    stats = bt.pool_cells(recs)
    chain = next(ln for ln in bt.render_main_table("census", stats).splitlines() if ln.startswith("| 1 | M_c^ch"))
    assert "| 1 (one draw, no sd) |" in chain and "±" not in chain
    lev1 = next(ln for ln in bt.render_ordering("census", stats).splitlines() if ln.startswith("| 1 | 1 |"))
    assert "M_c^ch ≈ M_H^r" in lev1 and "yes, not resolved" in lev1


def test_occupancy_table_divides_l1_by_occupied_cells_times_the_mean_noise() -> None:
    ez = bt.geometric_mean_abs(6.0)  # hdp at eps = 1 on three levels: b = 6
    cells = {"1": 10, "2": 20, "3": 40}
    l1 = [cells[k] * ez / 10_000 for k in ("1", "2", "3")]  # exactly cells x E|Z|, in units of 10^4
    rec = _cell("taxi", "1", "hdp", [(0, l1, 0), (1, l1, 0)])
    rec["dataset_info"] = {"nonzero_cells_per_level": cells}
    text = bt.render_occupancy([rec], bt.pool_cells([rec]))
    lev3 = next(ln for ln in text.splitlines() if ln.startswith("| taxi | M_H^dp | 1 |") and "| 3 | 40 |" in ln)
    # ours: ratio 1.00; the paper's 328.5 x 10^4 at level 3 implies 328.5e4 / E|Z| occupied cells
    assert "| 1.00 |" in lev3 and f"| {328.5e4 / ez:,.0f} |" in lev3


def test_chain_behind_another_mechanism_is_tied_unless_resolved() -> None:
    recs = [_cell("taxi", "1", "chain", [(k, [1.0 + 0.1 * k, 2.0 + 0.1 * k, 80.0 + k], 0) for k in range(5)]),
            _cell("taxi", "1", "cdp", [(k, [0.99 + 0.1 * k, 1.0 + 0.1 * k, 90.0 + k], 0) for k in range(5)])]
    text = bt.render_ordering("taxi", bt.pool_cells(recs))
    assert "tied: M_c^dp lower mean, not resolved" in next(ln for ln in text.splitlines() if ln.startswith("| 1 | 1 |"))
    assert "no: M_c^dp lower, resolved" in next(ln for ln in text.splitlines() if ln.startswith("| 1 | 2 |"))
    assert "yes, resolved" in next(ln for ln in text.splitlines() if ln.startswith("| 1 | 3 |"))
