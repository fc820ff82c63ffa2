"""``securelp audit --views FILE`` audits every recorded view when ``--runs`` is not given."""

from __future__ import annotations

from pathlib import Path

import pytest

from securelp.coordinator.cli import main


def test_recorded_views_are_audited_whole_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    views = tmp_path / "v.jsonl"
    assert main(["audit", "--protocol", "ldp", "--runs", "120", "--save-views", str(views), "--seed", "1",
                 "--quiet"]) == 0
    assert main(["audit", "--views", str(views)]) == 0
    assert "120 runs per input" in capsys.readouterr().out
    assert main(["audit", "--views", str(views), "--runs", "121"]) == 3  # more than were recorded
    assert "holds 120 views of input D0" in capsys.readouterr().err
