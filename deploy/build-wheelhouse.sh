#!/usr/bin/env bash
# Fill deploy/wheelhouse with the wheels the container image needs (securelp itself plus the
# LP/gRPC runtime: numpy, scipy, highspy, grpcio, grpcio-health-checking, protobuf,
# cryptography), using the host's ordinary pip. `docker build` then installs offline from it,
# which also avoids any TLS-intercepting proxy between the build container and PyPI.
# The image is the LP deployment only: the mdp text-embedding stack is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf deploy/wheelhouse && mkdir -p deploy/wheelhouse
python3 -m pip wheel --no-deps . -w deploy/wheelhouse
python3 -m pip download --only-binary=:all: --python-version 3.11 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
  -d deploy/wheelhouse -r deploy/runtime-requirements.txt
