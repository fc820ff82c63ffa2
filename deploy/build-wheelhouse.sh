#!/usr/bin/env bash
# Fill deploy/wheelhouse with the wheels the container image needs (securelp itself plus the
# LP/gRPC runtime: numpy, scipy, highspy, grpcio, grpcio-health-checking, protobuf,
# cryptography), using the host's ordinary pip. `docker build` then installs offline from it,
# which also avoids any TLS-intercepting proxy between the build container and PyPI.
# The image is the LP deployment only: the mdp text-embedding stack is not installed.
#
# The securelp wheel is built from a fresh copy of exactly what the Dockerfile copies (the root
# package's files and protos/ party/ coordinator/ solvers/), never from the working tree itself,
# so that a stale build/ directory cannot slip old modules into the wheel.
#
#   usage: deploy/build-wheelhouse.sh          (PYTHON names the interpreter; default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
"$python" -m pip --version >/dev/null 2>&1 ||
  { echo "build-wheelhouse: '$python -m pip' does not run: install pip (apt-get install -y python3-pip) or set PYTHON" >&2; exit 1; }

stage="$(mktemp -d /tmp/securelp-wheel-src.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
cp pyproject.toml README.md __init__.py "$stage"/
for pkg in protos party coordinator solvers; do
  tar -c --exclude=__pycache__ --exclude='*.pyc' "$pkg" | tar -x -C "$stage"
done

# the same sources give the same wheel, byte for byte (zip timestamps from SOURCE_DATE_EPOCH), so
# that `docker build` reuses its cached layers when nothing changed
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}"
export SOURCE_DATE_EPOCH

rm -rf deploy/wheelhouse && mkdir -p deploy/wheelhouse
"$python" -m pip wheel -q --no-deps "$stage" -w deploy/wheelhouse
"$python" -m pip download -q --only-binary=:all: --python-version 3.11 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
  -d deploy/wheelhouse -r deploy/runtime-requirements.txt
echo "build-wheelhouse: $(find deploy/wheelhouse -name '*.whl' | wc -l) wheels in deploy/wheelhouse"
