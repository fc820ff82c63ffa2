"""The deployment image installs securelp with ``--no-deps`` from deploy/runtime-requirements.txt, so
that file must name every required dependency of pyproject.toml (a missing one breaks the image at
run time: the audit's ``threadpoolctl`` once did)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def names(lines: list[str]) -> set[str]:
    return {_name(line) for line in lines if line.strip() and not line.strip().startswith("#")}


def test_the_image_requirements_name_every_required_dependency() -> None:
    required = names(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    image = names((REPO / "deploy" / "runtime-requirements.txt").read_text().splitlines())
    assert "numpy" in required and "grpcio" in image
    assert required <= image, f"missing from deploy/runtime-requirements.txt: {sorted(required - image)}"


def test_the_check_sees_a_missing_name() -> None:
    assert names(["numpy>=1", "# comment", "tqdm==4"]) == {"numpy", "tqdm"}
    assert not {"threadpoolctl"} <= names(["numpy>=1"])
