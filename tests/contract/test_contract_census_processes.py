"""``securelp party --census SUBTREE.csv --max-size N``: real party processes serve census-federated
over gRPC with mutual TLS (dial-in); each reads only its own subtree's rows, exits 0 after a ``done``
session and writes its own released counts with ``--out``; the release is consistent, and the
coordinator received nothing of the parties' true rows."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.census_federated import run_census_federated
from securelp.coordinator.certs import write_session_certs
from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink
from securelp.coordinator.transcript import Direction, TranscriptRecorder
from securelp.coordinator.transport import ProtocolLink
from securelp.party.census_federated import CENSUS_FEDERATED, encode_int64, read_subtree_csv
from securelp.solvers.hierarchy import mechanisms as mech
from securelp.solvers.hierarchy.counts_csv import read_counts_csv
from securelp.solvers.hierarchy.federated import split_by_level
from securelp.solvers.lp.partition import PublicRows

pytestmark = pytest.mark.integration
TAXI = Path(__file__).parent.parent / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"
PY = [sys.executable, "-m", "securelp.coordinator.cli"]


def write_subtrees(tmp_path: Path) -> dict[str, Path]:
    """Each level-2 region's rows of the whole file, as its owner would hold them."""
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    hier = data.hierarchy
    with TAXI.open() as handle:
        rows = list(csv.reader(handle))
    files = {}
    for r in split_by_level(hier, 2).parties:
        below = {hier.ids[k] for k in range(hier.size) if k == r or _under(hier, k, r)}
        path = tmp_path / f"{hier.ids[r]}.csv"
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(rows[0])
            writer.writerows(row for row in rows[1:] if row and row[1] in below)
        files[hier.ids[r]] = path
    return files


def _under(hier, k: int, r: int) -> bool:  # type: ignore[no-untyped-def]
    a = int(hier.parent[k])
    while a >= 0:
        if a == r:
            return True
        a = int(hier.parent[a])
    return False


def start_parties(files: dict[str, Path], certs: Path, tmp_path: Path) -> tuple[dict, dict]:  # type: ignore[type-arg]
    procs = {rid: subprocess.Popen(
        PY + ["party", "--listen", "127.0.0.1:0", "--census", str(path), "--max-size", "12", "--id", rid,
              "--certs", str(certs), "--out", str(tmp_path / f"{rid}.released.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rid, path in files.items()}
    return procs, {rid: p.stdout.readline().split()[1] for rid, p in procs.items()}


def write_geography(tmp_path: Path) -> Path:
    """The public hierarchy of the taxi data (level,region_id,parent_id; no counts)."""
    geography = tmp_path / "geo.csv"
    with TAXI.open() as handle:
        seen = {}
        for row in csv.DictReader(handle):
            seen.setdefault(row["region_id"], (row["level"], row["parent_id"]))
    geography.write_text("level,region_id,parent_id\n" + "".join(f"{lv},{r},{p}\n" for r, (lv, p) in seen.items()))
    return geography


def stop(procs: dict) -> None:  # type: ignore[type-arg]
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_coordinator_command_runs_a_session_against_party_processes(tmp_path):
    """``securelp census federated --hierarchy FILE --party NAME=HOST:PORT``: the coordinator reads the
    public geography only and dials the running parties."""
    import json

    from securelp.coordinator.cli import main

    files = write_subtrees(tmp_path)
    certs = tmp_path / "certs"
    write_session_certs(certs, list(files))
    geography = write_geography(tmp_path)
    procs, addresses = start_parties(files, certs, tmp_path)
    try:
        rc = main(["census", "federated", "--hierarchy", str(geography), "--max-size", "12", "--eps", "1",
                   "--mechanism", "topdown", "--certs", str(certs), "--json", str(tmp_path / "r.json"),
                   *[a for rid, addr in addresses.items() for a in ("--party", f"{rid}={addr}")]])
        codes = {rid: p.wait(timeout=30) for rid, p in procs.items()}
    finally:
        stop(procs)
    assert rc == 0 and codes == {rid: 0 for rid in files}
    rep = json.loads((tmp_path / "r.json").read_text())
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    assert rep["parties"] == 2 and rep["dataset"]["total"] == data.total and rep["total_matches"]
    assert rep["constraint_violations"] == 0 and rep["negative_counts"] == 0
    assert all((tmp_path / f"{rid}.released.csv").stat().st_size > 0 for rid in files)
    with pytest.raises(SystemExit):
        main(["census", "federated", "--hierarchy", str(geography), "--data", str(TAXI), "--eps", "1",
              "--mechanism", "hdp"])
    assert main(["census", "federated", "--hierarchy", str(TAXI), "--max-size", "12", "--eps", "1", "--mechanism",
                 "hdp", "--insecure", "--party", "a=127.0.0.1:1"]) == 3  # a counts file: refused


def test_the_coordinator_command_listens_for_parties_that_connect(tmp_path):
    """``securelp census federated --hierarchy FILE --listen HOST:PORT --party NAME ...``: dial-out, the
    parties (``securelp party --connect ... --census FILE``) open no port; the coordinator admits the
    named parties, and each party keeps its own released rows."""
    import json

    files = write_subtrees(tmp_path)
    certs = tmp_path / "certs"
    write_session_certs(certs, list(files))
    geography = write_geography(tmp_path)
    report = tmp_path / "r.json"
    coordinator = subprocess.Popen(
        PY + ["census", "federated", "--hierarchy", str(geography), "--max-size", "12", "--eps", "1", "--mechanism",
              "topdown", "--listen", "127.0.0.1:0", "--certs", str(certs), "--json", str(report), "--quiet",
              *[a for rid in files for a in ("--party", rid)]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = {"coordinator": coordinator}
    try:
        line = coordinator.stdout.readline()
        assert line.startswith("LISTENING 127.0.0.1:"), coordinator.stderr.read() if not line else line
        address = line.split()[1]
        for rid, path in files.items():
            procs[rid] = subprocess.Popen(
                PY + ["party", "--connect", address, "--census", str(path), "--max-size", "12", "--id", rid,
                      "--certs", str(certs), "--out", str(tmp_path / f"{rid}.released.csv")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        codes = {name: p.wait(timeout=60) for name, p in procs.items()}
    finally:
        stop(procs)
    assert codes == {name: 0 for name in procs}, coordinator.stderr.read()
    rep = json.loads(report.read_text())
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    assert rep["direction"] == "dial-out" and sorted(rep["endpoints"]) == sorted(files)
    assert rep["parties"] == 2 and rep["dataset"]["total"] == data.total and rep["total_matches"]
    assert rep["constraint_violations"] == 0 and rep["negative_counts"] == 0
    assert all((tmp_path / f"{rid}.released.csv").stat().st_size > 0 for rid in files)


def test_the_listening_coordinator_names_a_region_whose_party_never_connects(tmp_path):
    """Only one of the two parties connects: the command ends after --wait with the transport exit code
    and names the party that did connect; that party says it keeps waiting for a coordinator."""
    files = write_subtrees(tmp_path)
    certs = tmp_path / "certs"
    write_session_certs(certs, list(files))
    geography = write_geography(tmp_path)
    coordinator = subprocess.Popen(
        PY + ["census", "federated", "--hierarchy", str(geography), "--max-size", "12", "--eps", "1", "--mechanism",
              "topdown", "--listen", "127.0.0.1:0", "--certs", str(certs), "--wait", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rid, path = next(iter(files.items()))
    procs = {"coordinator": coordinator}
    try:
        address = coordinator.stdout.readline().split()[1]
        procs[rid] = subprocess.Popen(
            PY + ["party", "--connect", address, "--census", str(path), "--max-size", "12", "--id", rid,
                  "--certs", str(certs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rc = coordinator.wait(timeout=60)
        time.sleep(2.0)  # the party notices the closed connection and says it waits on
        party_running = procs[rid].poll() is None
    finally:
        stop(procs)
    err = coordinator.stderr.read()
    assert rc == 6, err  # the documented transport exit code
    assert f"1 of the 2 expected parties connected within 3 s (--wait; connected: {rid})" in err, err
    assert "Traceback" not in err and party_running
    party_err = procs[rid].stderr.read()
    assert "closed the connection before a session; waiting for a coordinator there, for up to 600 s" in party_err


def test_a_party_reads_its_subtree_file_as_the_whole_file_has_it(tmp_path):
    files = write_subtrees(tmp_path)
    data = read_counts_csv(TAXI, max_size=12, top_code=True)
    split = split_by_level(data.hierarchy, 2)
    for j, r in enumerate(split.parties):
        got = read_subtree_csv(files[data.hierarchy.ids[r]], 12)
        assert got.region_id == data.hierarchy.ids[r] and got.parent_ids[0] == "manhattan" and got.levels[0] == 2
        np.testing.assert_array_equal(got.counts, data.counts[split.owned(j)])
    bad = tmp_path / "two.csv"
    bad.write_text("level,region_id,parent_id,size,count\n2,a,top,1,3\n2,b,top,1,4\n")
    with pytest.raises(Exception, match="one top region"):
        read_subtree_csv(bad, 12)


def test_party_processes_serve_a_federated_release(tmp_path):
    files = write_subtrees(tmp_path)
    certs = tmp_path / "certs"
    write_session_certs(certs, list(files))
    procs = {}
    try:
        for rid, path in files.items():
            procs[rid] = subprocess.Popen(
                PY + ["party", "--listen", "127.0.0.1:0", "--census", str(path), "--max-size", "12", "--id", rid,
                      "--certs", str(certs), "--out", str(tmp_path / f"{rid}.released.csv")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        addresses = {rid: p.stdout.readline().split()[1] for rid, p in procs.items()}
        recorder = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0)))
        grpc_links = [GrpcPartyLink(rid, addr, tls=ChannelTls.from_dir(certs), deadline_s=60)
                      for rid, addr in addresses.items()]
        try:
            links = [recorder.wrap(ProtocolLink(g.connection, CENSUS_FEDERATED, deadline_s=60)) for g in grpc_links]
            data = read_counts_csv(TAXI, max_size=12, top_code=True)
            outcome = run_census_federated(links, data.hierarchy, 12, mechanism="hdp", eps=Fraction(1),
                                           total=data.total)
        finally:
            for g in grpc_links:
                g.shutdown()
        codes = {rid: p.wait(timeout=30) for rid, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == {rid: 0 for rid in files}
    metrics = mech.release_metrics(data.hierarchy, outcome.release.counts, data.total)
    assert metrics["constraint_violations"] == 0 and metrics["negative_counts"] == 0 and metrics["total_matches"]
    split = outcome.split
    for j, r in enumerate(split.parties):
        rid = data.hierarchy.ids[r]
        with (tmp_path / f"{rid}.released.csv").open() as handle:
            written = {(row["region_id"], int(row["size"])): int(row["count"]) for row in csv.DictReader(handle)}
        for k in split.owned(j).tolist():
            for s in range(12):
                assert written.get((data.hierarchy.ids[k], s + 1), 0) == outcome.release.counts[k, s]
    blobs = [rec.payload for rec in recorder.transcript().records if rec.direction is Direction.FROM_PARTY]
    for row in data.counts[1:]:  # no true row of a party's region (nor below) in what the coordinator received
        if row.any():
            assert not any(encode_int64(row[None, :]) in b for b in blobs)
