"""Regenerate the committed protobuf/gRPC code from ``protos/*.proto``.

Usage: ``python -m securelp.protos.codegen`` (needs ``grpcio-tools``). Two files: the wire
protocol ``securelp.proto`` (messages and the gRPC service) and ``transcript.proto`` (the
session transcript's file records; messages only). The generated modules are committed;
``tests/unit/test_protos_codegen.py`` fails when they differ from a fresh generation.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
GENERATED = ("securelp_pb2.py", "securelp_pb2.pyi", "securelp_pb2_grpc.py", "transcript_pb2.py", "transcript_pb2.pyi")


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) on securelp.proto and transcript.proto into ``out_dir``."""
    from grpc_tools import protoc  # lazy: only needed for regeneration

    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(PROTO_DIR / "securelp.proto"),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    # the transcript file format has no service: no gRPC stubs
    args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
            str(PROTO_DIR / "transcript.proto")]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed on transcript.proto")
    grpc_file = out_dir / "securelp_pb2_grpc.py"
    text = grpc_file.read_text()
    # generated code uses a top-level import; make it package-relative
    text = text.replace("import securelp_pb2 as securelp__pb2", "from securelp.protos import securelp_pb2 as securelp__pb2")
    grpc_file.write_text(text)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        for name in GENERATED:
            (PROTO_DIR / name).write_text((Path(tmp) / name).read_text())
    print(f"regenerated {', '.join(GENERATED)} in {PROTO_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
