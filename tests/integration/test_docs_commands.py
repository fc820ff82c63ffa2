"""Every command of README.md and docs/tutorial.md runs as written, in an empty folder.

The commands are the lines of the ``sh`` blocks, in order (a trailing ``\\`` continues a line; a
line ending in ``&`` runs in the background and must exit 0 by the end). A command's expected exit
code is 0, or N where its comment says ``exits N`` (a refusal shown on purpose). The set-up
commands (``pip install ...``, ``python -m pytest ...``) are what runs this test, so they are
skipped. The ``securelp`` console script is the one installed beside this interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/tutorial.md")
EXPECTED = re.compile(r"#.*\bexits (\d+)\b")
SETUP = ("pip ", "python -m pytest")


def commands(page: Path) -> list[tuple[str, int, bool]]:
    """(command, expected exit code, in the background) for every command of ``page``'s sh blocks."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            expected = EXPECTED.search(line)
            command = line.split(" #", 1)[0].strip()
            if any(part.strip().startswith(SETUP) for part in command.split("&&")):
                continue
            background = command.endswith("&")
            out.append((command.rstrip("&").strip(), int(expected.group(1)) if expected else 0, background))
    return out


def test_the_pages_have_commands() -> None:
    found = {page: commands(REPO / page) for page in PAGES}
    assert all(len(c) >= 5 for c in found.values()), found
    # the parser reads refusals and background commands (they are what the tutorial shows)
    tutorial = found["docs/tutorial.md"]
    assert any(code != 0 for _, code, _ in tutorial) and any(bg for _, _, bg in tutorial)


@pytest.mark.parametrize("page", PAGES)
def test_every_command_runs_as_written(page: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    background: list[tuple[str, subprocess.Popen]] = []
    try:
        for command, expected, in_background in commands(REPO / page):
            if in_background:
                background.append((command, subprocess.Popen(["bash", "-c", command], cwd=tmp_path, env=env,
                                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                             text=True)))
                continue
            done = subprocess.run(["bash", "-c", command], check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == expected, (f"{page}: `{command}` exited {done.returncode}, not {expected}:\n"
                                                 f"{done.stderr[-2000:]}")
            assert "Traceback" not in done.stderr, f"{page}: `{command}`:\n{done.stderr[-2000:]}"
        for command, proc in background:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{page}: `{command}` exited {proc.returncode}:\n{err[-2000:]}"
    finally:
        for _, proc in background:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
