"""``ldp-collect`` in-process and ``securelp ldp collect``: the collector's estimate has the MSE the
theory of ``securelp ldp`` predicts (and an estimate without the inversion does not: the check can
fail); a client refuses another mechanism than the one it builds, and values outside the grid; the
command's report, evaluation path and errors."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.coordinator.ldp_collect import simulate_collection
from securelp.party import ldp_collect as lc
from securelp.protos import ldp_collect_pb2 as lpb
from securelp.solvers.errors import ProtocolError

SPEC = lc.MechanismSpec("le", 1.0, 5, 5, 1.0)


def _mse_ratios(estimator, runs: int = 16, users: int = 20_000) -> np.ndarray:  # type: ignore[no-untyped-def]
    mech, _ = lc.MechanismCache().get(SPEC)
    theory, _, _ = mech.mse_theory(np.full(SPEC.m, 1 / SPEC.m), users)
    out = []
    for k in range(runs):
        values = np.random.default_rng(k).integers(0, SPEC.m, users)
        sim = simulate_collection(np.array_split(values, 3), SPEC, seed=f"run{k}", record=False, chunk=4096)
        true = np.bincount(values, minlength=SPEC.m) / users
        out.append(np.mean((estimator(sim.outcome, mech) - true) ** 2) / theory)
    return np.array(out)


def test_the_estimate_s_mse_matches_the_theory_of_securelp_ldp():
    ratios = _mse_ratios(lambda o, mech: o.estimate)
    assert 0.75 < ratios.mean() < 1.25, ratios  # mean of 16 runs: about +-7 % (one sd)
    # negative control: the reports' distribution itself (no inversion) is far outside that range
    naive = _mse_ratios(lambda o, mech: o.histogram / o.histogram.sum(), runs=4)
    assert not 0.75 < naive.mean() < 1.25, naive


def test_the_estimate_is_the_mechanism_s_inversion_of_the_histogram():
    values = np.arange(1000) % SPEC.m
    sim = simulate_collection([values[:400], values[400:]], SPEC, seed="x", record=False)
    mech, _ = lc.MechanismCache().get(SPEC)
    o = sim.outcome
    np.testing.assert_allclose(o.estimate, mech.estimate(o.histogram / 1000), rtol=0, atol=1e-12)
    P = np.array([mech.row(j) for j in range(SPEC.m)])
    np.testing.assert_allclose(P.T @ o.estimate, o.histogram / 1000, atol=1e-8)  # P^T c_hat = y


def _hello(spec: lc.MechanismSpec, fingerprint: str) -> lpb.LdpHelloRequest:
    return lpb.LdpHelloRequest(session_id="s", protocol_version=1, mechanism=spec.name, eps=spec.eps, rows=spec.rows,
                               cols=spec.cols, cell_km=spec.cell_km, fingerprint=fingerprint)


def test_a_client_refuses_a_mechanism_it_does_not_build_and_values_outside_the_grid():
    _, fp = lc.MechanismCache().get(SPEC)
    other = lc.MechanismCache().get(lc.MechanismSpec("le", 2.0, 5, 5, 1.0))[1]
    s = lc.LdpCollectSession("c", np.array([0, 1, 2]))
    with pytest.raises(ProtocolError, match="fingerprints differ"):
        s.hello(_hello(SPEC, other))
    assert s.closed.is_set() and s.close_reason.startswith("refused")
    s = lc.LdpCollectSession("c", np.array([0, 25]))
    with pytest.raises(ProtocolError, match="not all cells of the 5x5 grid"):
        s.hello(_hello(SPEC, fp))
    s = lc.LdpCollectSession("c", np.array([0, 24]))
    assert s.hello(_hello(SPEC, fp)).users == 2
    reply = s.collect(lpb.LdpCollectRequest(session_id="s", max_reports=10))
    assert reply.last and reply.width == 1 and len(reply.reports) == 2


def test_reports_pack_in_the_smallest_width():
    assert [lc.report_width(m) for m in (2, 256, 257, 65536, 65537)] == [1, 1, 2, 2, 4]
    r = np.array([0, 300, 65535])
    np.testing.assert_array_equal(lc.unpack_reports(lc.pack_reports(r, 2), 2, 65536, "t"), r)
    with pytest.raises(ProtocolError, match="outside the domain"):
        lc.unpack_reports(lc.pack_reports(r, 2), 2, 300, "t")


def test_the_command_reports_only_what_the_collector_computed(tmp_path, capsys):
    report, out = tmp_path / "r.json", tmp_path / "est.csv"
    assert main(["ldp", "collect", "--eps", "1", "--rows", "4", "--cols", "4", "--users", "3000", "--parties", "3",
                 "--json", str(report), "--out", str(out)]) == 0
    rep = json.loads(report.read_text())
    assert rep["private"] is True and rep["users"] == 3000 and rep["parties"] == 3 and rep["m"] == 16
    assert "mse_freq" not in rep and "evaluation" not in rep
    assert abs(rep["estimate_sum"] - 1) < 1e-9 and 0.9 < rep["bytes_per_user"] < 1.5
    lines = out.read_text().splitlines()
    assert lines[0] == "cell,row,col,frequency" and len(lines) == 17
    assert "NOT PRIVATE" not in capsys.readouterr().out


def test_evaluate_is_the_not_private_path(tmp_path, capsys):
    report = tmp_path / "r.json"
    values = tmp_path / "v.txt"
    values.write_text(" ".join(str(k % 16) for k in range(1600)))
    assert main(["ldp", "collect", "--eps", "1", "--rows", "4", "--cols", "4", "--values", str(values),
                 "--evaluate", "--seed", "3", "--json", str(report)]) == 0
    rep = json.loads(report.read_text())
    assert rep["private"] is False and rep["evaluation"].startswith("NOT PRIVATE") and rep["users"] == 1600
    assert rep["mse_freq"] > 0 and rep["mse_freq_theory"] > 0
    assert capsys.readouterr().out.startswith("NOT PRIVATE")


@pytest.mark.parametrize(("args", "message"), [
    (["--users", "10", "--values", "x.txt"], "--users and --values both"),
    (["--parties", "0"], "--parties must be >= 1"),
    (["--chunk", "0"], "--chunk must be between 1"),
    (["--mechanism", "le", "--eps", "-1"], "eps"),
])
def test_command_errors_are_one_line(args, message, capsys):
    base = ["ldp", "collect", "--rows", "3", "--cols", "3"]
    rc = main(base + (["--eps", "1"] if "--eps" not in args else []) + args)
    err = capsys.readouterr().err
    assert rc == 3 and message in err and "Traceback" not in err


@pytest.mark.slow
def test_a_million_users_in_process_within_a_minute():
    values = np.random.default_rng(0).integers(0, 100, 10**6)
    start = time.perf_counter()
    sim = simulate_collection(np.array_split(values, 4), lc.MechanismSpec("le", 1.0, 10, 10, 1.0), record=False)
    assert sim.outcome.total_users == 10**6
    assert time.perf_counter() - start < 60
