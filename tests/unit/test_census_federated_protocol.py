"""``securelp census federated`` and the party's own checks in ``census-federated``: the command's
per-party files are the release of the same noisy values as ``simulate_federated`` under the same
seed; its report and errors; a party refuses a session that does not fit its data."""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.cli import main
from securelp.party import census_federated as cf
from securelp.protos import census_federated_pb2 as cpb
from securelp.solvers.errors import ProtocolError
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.federated import simulate_federated, split_by_level
from securelp.solvers.randomness import SecureRandom

TAXI = Path(__file__).parent.parent / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"


def _read_party_files(out: Path) -> dict[str, dict[int, int]]:
    rows: dict[str, dict[int, int]] = {}
    for path in sorted(out.glob("*.csv")):
        with path.open() as handle:
            for row in csv.DictReader(handle):
                rows.setdefault(row["region_id"], {})[int(row["size"])] = int(row["count"])
    return rows


def test_the_command_writes_each_party_s_rows_of_the_seeded_single_process_release(tmp_path, capsys):
    out, report = tmp_path / "parties", tmp_path / "r.json"
    rc = main(["census", "federated", "--data", str(TAXI), "--max-size", "12", "--eps", "0.5", "--mechanism", "chain",
               "--level", "3", "--seed", "s1", "--out", str(out), "--json", str(report),
               "--transcript", str(tmp_path / "t.bin")])
    assert rc == 0
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    split = split_by_level(data.hierarchy, 3)
    _, single = simulate_federated(data, split, "chain", Fraction(1, 2), SecureRandom("s1", label="census/federated"))
    got = _read_party_files(out)
    assert len(list(out.glob("*.csv"))) == 28
    for r in split.parties:  # every party region's released row, as the single-process release has it
        rid = data.hierarchy.ids[r]
        dense = [got.get(rid, {}).get(s, 0) for s in range(1, 13)]
        assert dense == single.counts[r].tolist()
    rep = json.loads(report.read_text())
    assert rep["private"] is False and rep["reproducible"] is True and rep["parties"] == 28
    assert rep["constraint_violations"] == 0 and rep["negative_counts"] == 0 and rep["total_matches"]
    assert rep["dataset"]["total"] == data.total and rep["accounting"]["eps_total_exact"] == "1/2"
    assert rep["bytes_sent_per_party_mean"] > 0 and set(rep["bytes"]) == {p.stem for p in out.glob("*.csv")}
    assert (tmp_path / "t.bin").stat().st_size > 0
    assert "28 parties at level 3" in capsys.readouterr().out


def test_without_a_seed_the_release_is_private_and_fresh(tmp_path):
    reports = []
    for k in range(2):
        path = tmp_path / f"r{k}.json"
        assert main(["census", "federated", "--data", str(TAXI), "--max-size", "12", "--eps", "1", "--mechanism",
                     "hdp", "--json", str(path), "--out", str(tmp_path / f"o{k}")]) == 0
        reports.append(json.loads(path.read_text()))
    assert all(r["private"] and not r["reproducible"] for r in reports)
    assert _read_party_files(tmp_path / "o0") != _read_party_files(tmp_path / "o1")  # fresh noise each run


@pytest.mark.parametrize(("args", "message"), [
    (["--level", "4"], "--level must be between 2 and the hierarchy's depth 3, got 4"),
    (["--repeat", "2"], "runs one session"),
])
def test_command_errors_are_one_line_with_the_input_exit_code(args, message, tmp_path, capsys):
    rc = main(["census", "federated", "--data", str(TAXI), "--max-size", "12", "--eps", "1", "--mechanism", "hdp",
               *args])
    err = capsys.readouterr().err
    assert rc == 3 and message in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--listen", "127.0.0.1:0"], 4, "--listen is for --hierarchy FILE"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0", "--party", "a=127.0.0.1:1", "--insecure"], 3,
     "with --listen the parties connect: give their names only"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0", "--party", "a", "--insecure"], 3,
     "--party names 1 parties, but level 2 has 2 regions"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0", "--certs", "c", "--insecure"], 4,
     "--certs and --insecure were both given"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0", "--insecure", "--transport", "grpc"], 4,
     "--transport is for simulated parties"),
    (["--hierarchy", "{geo}"], 3, "--hierarchy needs the running parties: --party NAME=HOST:PORT"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0"], 4, "--listen needs --certs DIR"),
    (["--hierarchy", "{geo}", "--listen", "nohost", "--insecure"], 3, "--listen: address 'nohost'"),
    (["--hierarchy", "{geo}", "--listen", "", "--insecure"], 3, "--listen: address ''"),
    (["--hierarchy", "{geo}", "--listen", "127.0.0.1:0", "--insecure", "--wait", "0"], 3,
     "--wait must be a positive number of seconds"),
])
def test_coordinating_running_parties_refuses_bad_flags_before_it_listens(args, code, message, tmp_path, capsys):
    """Flags that do not go together are configuration errors (4), malformed values input errors (3)."""
    geo = tmp_path / "geo.csv"
    geo.write_text("level,region_id,parent_id\n1,top,\n2,a,top\n2,b,top\n")
    args = [a.replace("{geo}", str(geo)) for a in args]
    source = [] if "--hierarchy" in args else ["--data", str(TAXI)]
    rc = main(["census", "federated", *source, "--max-size", "12", "--eps", "1", "--mechanism", "hdp", *args])
    err = capsys.readouterr().err
    assert rc == code and message in err and "Traceback" not in err, err


def test_data_needs_a_public_max_size(capsys):
    rc = main(["census", "federated", "--data", str(TAXI), "--eps", "1", "--mechanism", "hdp"])
    assert rc == 3 and "--data needs --max-size N" in capsys.readouterr().err


def _session(level: int = 2) -> tuple[cf.CensusFederatedSession, object]:
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    split = split_by_level(data.hierarchy, level)
    return cf.CensusFederatedSession("a", cf.RegionalCounts.of_party(data, split, 0)), split


def test_a_party_refuses_a_size_domain_that_is_not_its_own():
    s, _ = _session()
    with pytest.raises(ProtocolError, match="its counts have sizes 1..12, the session releases sizes 1..20"):
        s.hello(cpb.CensusHelloRequest(session_id="x", protocol_version=1, max_size=20))
    assert s.closed.is_set() and s.close_reason.startswith("refused")


def test_a_party_refuses_to_be_placed_under_another_region():
    s, _ = _session()
    hello = s.hello(cpb.CensusHelloRequest(session_id="x", protocol_version=1, max_size=12))
    assert hello.region_id == "lower" and hello.subtree_ids[0] == "lower" and len(hello.subtree_ids) == 19
    request = cpb.CensusMeasureRequest(
        session_id="x", mechanism="hdp", eps="1", depth=3, party_level=2, parent_id="elsewhere",
        spanning=[cpb.SpanningRegion(region_id="manhattan", level=1, parties=2)],
        peers=[cpb.CensusPeer(party_id="a", public_key=hello.public_key),
               cpb.CensusPeer(party_id="b", public_key=bytes(range(1, 33)))])
    with pytest.raises(ProtocolError, match="places region lower under 'elsewhere', its data says under 'manhattan'"):
        s.measure(request)
    assert s.closed.is_set()


def test_a_party_s_measurement_carries_its_noisy_rows_and_a_masked_vector():
    """What one party sends: its own rows plus noise (never equal to its counts), and a vector of the
    spanning length plus one (G), masked: not its region's values."""
    s, _ = _session()
    hello = s.hello(cpb.CensusHelloRequest(session_id="x", protocol_version=1, max_size=12))
    from securelp.party.aggregation import AggregationKeyPair

    other = AggregationKeyPair(SecureRandom(None).bytes(32))
    reply = s.measure(cpb.CensusMeasureRequest(
        session_id="x", mechanism="hdp", eps="1", depth=3, party_level=2, parent_id="manhattan",
        spanning=[cpb.SpanningRegion(region_id="manhattan", level=1, parties=2)],
        peers=[cpb.CensusPeer(party_id="a", public_key=hello.public_key),
               cpb.CensusPeer(party_id="b", public_key=other.public_key)]))
    own = cf.decode_int64(reply.own, (19, 12), "own")
    assert own.shape == s.data.counts.shape and np.count_nonzero(own != s.data.counts) > own.size // 2
    masked = np.frombuffer(reply.masked, dtype="<i8")
    assert masked.size == 12 + 1
    assert np.count_nonzero(np.abs(masked[:12] - s.data.counts[0]) < 10**6) == 0  # uniform in Z_2^64, not near


def test_the_accounting_skips_the_collusion_figure_beyond_its_noise_scale():
    """Small eps: the exact collusion loss would take minutes; the accounting says it was not computed."""
    from securelp.coordinator.census_federated import COLLUSION_MAX_SCALE, public_accounting

    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    split = split_by_level(data.hierarchy, 2)
    small = public_accounting("hdp", Fraction(1, 100), split, 3)  # b = 600
    assert small["eps_against_coordinator_and_one_party"] is None and "600" in small["collusion_not_computed"]
    big = public_accounting("hdp", Fraction(1), split, 3)  # b = 6
    assert big["eps_against_coordinator_and_one_party"] > 1 / 3 and "collusion_not_computed" not in big
    assert COLLUSION_MAX_SCALE == 100
