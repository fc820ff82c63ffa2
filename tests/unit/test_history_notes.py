"""No development-history notes in the tree: code, comments, tests and docs say what the code does
and why, and git keeps the history. A note is what ``grep -rniE "\\bstops? [0-9]+"`` finds (the
numbered work sessions the notes referred to).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTE = re.compile(r"\bstops? [0-9]+", re.IGNORECASE)
SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".proto", ".sh"}
#: pages another change rewrites as a whole (docs/reports.md: the secure-LP report keys and exit codes)
REWRITTEN_ELSEWHERE = {"docs/reports.md"}


def notes(texts: dict[str, str]) -> list[str]:
    """``path:line: note`` for every history note in ``texts`` (path -> text)."""
    return [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
            for name, text in texts.items() for m in NOTE.finditer(text)]


def tracked_texts() -> dict[str, str]:
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not installed or this is not a checkout")
    return {f: (REPO / f).read_text(encoding="utf-8", errors="replace") for f in files
            if Path(f).suffix in SUFFIXES and f not in REWRITTEN_ELSEWHERE and (REPO / f).is_file()}


def test_the_check_finds_a_planted_note() -> None:
    first, second = "Stop " + "46", "stops " + "47"  # spelled in pieces so this file stays clean
    planted = f"measured at {first}, until {second}-48"
    assert notes({"x.md": "line one\n" + planted}) == [f"x.md:2: {first!r}", f"x.md:2: {second!r}"]
    assert notes({"y.py": "a full stop. 3 items; stopped 3 times"}) == []


def test_no_history_notes_in_the_tree() -> None:
    texts = tracked_texts()
    assert len(texts) > 100
    assert notes(texts) == []
