# securelp: one image for the coordinator and every party (docker-compose.yml).
#
# No image registry is reachable here, so the base image is built locally from Debian
# bookworm (Python 3.11) with debootstrap -- see deploy/build-base-image.sh:
#
#     sudo deploy/build-base-image.sh            # -> image securelp-base:bookworm
#     docker-compose build
#
# With a registry, `--build-arg BASE_IMAGE=python:3.11-slim` works as well.
ARG BASE_IMAGE=securelp-base:bookworm
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/securelp/bin:$PATH

# python3 + venv (bookworm: Python 3.11); the Python wheels come from PyPI at build time only
RUN if ! command -v python3 >/dev/null || ! python3 -m venv --help >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/securelp \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin securelp

WORKDIR /src
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY party ./party
COPY coordinator ./coordinator
COPY solvers ./solvers
RUN pip install --upgrade pip && pip install . && rm -rf /src/build

COPY deploy /deploy
USER securelp
WORKDIR /home/securelp
ENTRYPOINT ["securelp"]
CMD ["--help"]
