"""No development-history notes in the tree: code, comments, tests and docs say what the code does
and why, and git keeps the history. A note is what ``grep -rniE "\\bstops? [0-9]+"`` finds (the
numbered work sessions the notes referred to).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTE = re.compile(r"\bstops? [0-9]+", re.IGNORECASE)
SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".proto", ".sh"}


def notes(texts: dict[str, str]) -> list[str]:
    """``path:line: note`` for every history note in ``texts`` (path -> text)."""
    return [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
            for name, text in texts.items() for m in NOTE.finditer(text)]


def tracked_texts() -> dict[str, str]:
    """Every text file of the checkout with a suffix in :data:`SUFFIXES` (not under hidden folders or
    build output)."""
    texts = {}
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in {"build", "dist", "__pycache__"}
                   and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(REPO).as_posix()
            if path.suffix in SUFFIXES:
                texts[rel] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def test_the_check_finds_a_planted_note() -> None:
    first, second = "Stop " + "46", "stops " + "47"  # spelled in pieces so this file stays clean
    planted = f"measured at {first}, until {second}-48"
    assert notes({"x.md": "line one\n" + planted}) == [f"x.md:2: {first!r}", f"x.md:2: {second!r}"]
    assert notes({"y.py": "a full stop. 3 items; stopped 3 times"}) == []


def test_no_history_notes_in_the_tree() -> None:
    texts = tracked_texts()
    assert len(texts) > 100
    assert notes(texts) == []
