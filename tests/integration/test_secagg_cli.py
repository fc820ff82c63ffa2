"""``securelp demo --secure-aggregation`` as a process: the report lists the policies and the encoding."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_report_lists_policies_and_the_encoding(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "securelp.coordinator.cli", "demo", "--example", "2", "--transport",
                          "inprocess", "--secure-aggregation", "--json", str(out)], capture_output=True, text=True,
                         timeout=300, check=False, cwd=REPO)
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    sa = report["secure_aggregation"]
    assert sa["participants"] == ["owner1", "owner2", "owner3"] and sa["ring"] == "Z_2^64"
    assert 0 < sa["encoding_error_a"] < 1e-9 and sa["fraction_bits_a"] > 30
    assert report["objective_rel_diff"] <= 1e-9
    assert all(p["policy"] == {"allow_bounds": ["monomial"], "reveal": True} and p["aggregated"]
               for p in report["parties"])
    assert "secure aggregation over 3 parties in Z_2^64" in res.stdout
    assert report["audit"]["claims_hold"]
    assert all(any("only inside the sum of the masked products of 3 parties" in s
                   for s in p["leakage"]["coordinator_can_reconstruct"]) for p in report["parties"])
