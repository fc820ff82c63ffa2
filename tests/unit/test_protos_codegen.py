"""The committed generated protobuf code equals a fresh generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from securelp.protos import codegen


def test_generated_code_is_up_to_date(tmp_path: Path):
    pytest.importorskip("grpc_tools")
    codegen.generate(tmp_path)
    for name in codegen.GENERATED:
        committed = (codegen.PROTO_DIR / name).read_text()
        fresh = (tmp_path / name).read_text()
        assert committed == fresh, f"protos/{name} is stale: run python -m securelp.protos.codegen"
