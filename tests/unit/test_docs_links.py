"""Every relative link in the docs, the README and the CHANGELOG points at a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def broken(page: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a page at ``page``) whose target does not exist."""
    out = []
    for m in LINK.finditer(text):
        link = m.group(1)
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        if not (page.parent / link).exists():
            out.append(f"{page.relative_to(REPO)}: {link}")
    return out


def test_the_check_finds_a_planted_broken_link() -> None:
    page = REPO / "docs" / "index.md"
    assert broken(page, "see [x](no-such-page.md) and [y](https://example.org)") == ["docs/index.md: no-such-page.md"]
    assert broken(page, "see [t](tutorial.md#set-up)") == []


def test_every_relative_link_resolves() -> None:
    pages = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md", REPO / "CHANGELOG.md"]
    assert len(pages) > 20
    found = [b for page in pages for b in broken(page, page.read_text(encoding="utf-8"))]
    assert found == []
