"""Regenerate the committed protobuf/gRPC code from ``protos/*.proto``.

Usage: ``python -m securelp.protos.codegen`` (needs ``grpcio-tools``). Six files: the secure LP's
messages ``securelp.proto``, the protocol runtime ``runtime.proto`` (its frames and the two gRPC
services, one per connection direction), the example protocol ``secure_sum.proto``,
``transcript.proto`` (the session transcript's file records), and the messages of the protocols
``census-federated`` (``census_federated.proto``) and ``ldp-collect`` (``ldp_collect.proto``). Only ``runtime.proto`` defines
services, so only it gets gRPC stubs. The generated modules are committed;
``tests/unit/test_protos_codegen.py`` fails when they differ from a fresh generation.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
#: each .proto file and whether it defines gRPC services (then it gets a ``_pb2_grpc`` module)
PROTO_FILES: tuple[tuple[str, bool], ...] = (("securelp.proto", False), ("runtime.proto", True),
                                             ("secure_sum.proto", False), ("transcript.proto", False),
                                             ("census_federated.proto", False), ("ldp_collect.proto", False))
GENERATED = tuple(f"{Path(name).stem}{suffix}" for name, services in PROTO_FILES
                  for suffix in ("_pb2.py", "_pb2.pyi", *(("_pb2_grpc.py",) if services else ())))


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) on every file of :data:`PROTO_FILES` into ``out_dir``."""
    from grpc_tools import protoc  # lazy: only needed for regeneration

    for name, services in PROTO_FILES:
        args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
        if services:
            args.append(f"--grpc_python_out={out_dir}")
        if protoc.main([*args, str(PROTO_DIR / name)]) != 0:
            raise RuntimeError(f"protoc failed on {name}")
        if services:
            stem = Path(name).stem
            grpc_file = out_dir / f"{stem}_pb2_grpc.py"
            # generated code uses a top-level import; make it package-relative
            text = grpc_file.read_text().replace(f"import {stem}_pb2 as {stem}__pb2",
                                                 f"from securelp.protos import {stem}_pb2 as {stem}__pb2")
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
