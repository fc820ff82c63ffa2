# securelp: one image for the coordinator and every party (docker-compose.yml).
#
# No image registry is reachable here, so the base image is built locally from Debian
# bookworm (Python 3.11) with debootstrap -- see deploy/build-base-image.sh:
#
#     deploy/build-base-image.sh                 # as root -> image securelp-base:bookworm
#     deploy/build-wheelhouse.sh                 # wheels via the host's pip (offline docker build)
#     docker-compose build
#
# With a registry, `--build-arg BASE_IMAGE=python:3.11-slim` works as well. The build ends by
# checking that securelp installed as one import package holding every module of the copied
# tree (deploy/check-package.py) and that `securelp --help` runs.
ARG BASE_IMAGE=securelp-base:bookworm
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/securelp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# python3 + venv (bookworm: Python 3.11), and an unprivileged user for the processes
RUN if ! command -v python3 >/dev/null || ! python3 -m venv --help >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/securelp \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin securelp

WORKDIR /src
COPY pyproject.toml README.md __init__.py ./
COPY protos ./protos
COPY party ./party
COPY coordinator ./coordinator
COPY solvers ./solvers
COPY deploy /deploy
# Offline from deploy/wheelhouse when it is there (deploy/build-wheelhouse.sh), else from PyPI.
# The image is the LP deployment: securelp without its mdp text-embedding dependencies.
RUN if ls /deploy/wheelhouse/securelp-*.whl >/dev/null 2>&1; then \
        pip install --no-index --find-links /deploy/wheelhouse -r /deploy/runtime-requirements.txt \
        && pip install --no-index --find-links /deploy/wheelhouse --no-deps securelp; \
    else \
        pip install -r /deploy/runtime-requirements.txt && pip install --no-deps . ; \
    fi \
    && python /deploy/check-package.py --source /src \
    && rm -rf /src /deploy/wheelhouse \
    && securelp --help >/dev/null

USER securelp
WORKDIR /home/securelp
ENTRYPOINT ["securelp"]
CMD ["--help"]
