"""The generated reference pages are current, and the hand-written ones cover what the code defines."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from securelp.solvers.errors import ExitCode

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_cli_reference_is_current() -> None:
    """docs/reference/cli.md is what render_cli.py renders from the parsers: a flag added, renamed or
    re-documented without re-running the script fails here (run ``python docs/reference/render_cli.py``)."""
    renderer = runpy.run_path(str(DOCS / "reference" / "render_cli.py"))
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == renderer["render"](), "docs/reference/cli.md is stale: run python docs/reference/render_cli.py"
    assert renderer["main"](["--check"]) == 0


def test_the_cli_reference_names_every_command() -> None:
    from securelp.coordinator.cli import COMMANDS

    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## `securelp {name}`" in page, name


def test_the_exit_code_page_lists_every_code() -> None:
    page = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", page, flags=re.MULTILINE))
    assert {int(code): name for code, name in rows.items()} == {int(c): c.name for c in ExitCode}


def test_the_python_api_examples_run(capsys) -> None:
    """Every ``python`` block of docs/reference/api.md runs as written (each in a fresh namespace)."""
    page = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        exec(compile(block, "docs/reference/api.md", "exec"), {})  # noqa: S102 (the documented example)
    out = capsys.readouterr().out
    assert "optimal" in out and "total_matches" in out
