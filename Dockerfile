# syntax=docker/dockerfile:1
# One image for every Maka authority; the command picks the service:
#   python -m services.interaction.main | services.broker.main | services.mcp_provider.main | surfaces.web.main
# Configuration is by the same MAKA_* environment variables as the Settings classes.
#
# Reproducible: the base image is pinned by digest, every dependency is installed from the hash-locked
# requirements/run.lock into the venv /opt/maka (`--require-hashes --no-deps`: pip installs exactly the locked
# files and resolves nothing), the project and the Python client are built into wheels by the build backend
# (hatchling) of the hash-locked requirements/build.lock (in the build stage's own venv /opt/build, used with
# `--no-build-isolation`, so pip fetches nothing unhashed to build them) and installed with `--no-deps` on top,
# and the image carries an SBOM of what it installed (/usr/share/maka/sbom.pip-inspect.json, `pip inspect`).
#
# Two kinds of base, one Dockerfile: PYTHON_IMAGE is the official python:3.13-slim (python3 in /usr/local/bin,
# pip installed) or any Debian-based image with CPython 3.13 as /usr/bin/python3 and python3-venv, without
# pip (deploy/compose/base-image.sh debootstraps one: `--build-arg PYTHON_IMAGE=localhost/maka-base:trixie`).
# `python3 -m venv` works on both and brings pip from the interpreter's own ensurepip wheel; everything lives
# in /opt/maka (first on PATH, `python` and `maka` included), never in the base's site-packages. pip itself is
# removed from /opt/maka once the SBOM is written (the runtime venv carries no installer or build backend).
# Where the build needs the host's CA bundle to reach the index (Podman on a machine behind a TLS proxy),
# mount it for the build only: `podman build -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro`
# (a mount is never part of a layer); no index credentials or CA bundle are ever COPYd.
#
# Pinning the base: PYTHON_IMAGE names a tag AND its digest. To move to a newer base, look the digest up
# and change both together (the tag documents it, the digest is what is pulled):
#   docker buildx imagetools inspect python:3.13-slim --format '{{json .Manifest.Digest}}'
#
# PID 1 is tini (Debian's package): it forwards SIGTERM to the service and reaps the orphans of the MCP
# provider's stdio servers. Kubernetes manifests therefore set `args:` (never `command:`, which would
# replace the ENTRYPOINT). Not `tini -g`: the provider drains its servers itself after SIGTERM.
#
# Targets:
#   docker build -t maka-runtime:0.1.0 .                        the runtime (default, last stage)
#   docker build --target mcp-tools -t maka-runtime:0.1.0-mcp-tools .
#                         the same plus Node.js (npx) and uv (uvx), for mcp.json servers started with
#                         `npx ...` or `uvx ...`; they write their caches under HOME=/home/maka, which the
#                         manifests mount as an emptyDir (the root filesystem stays read-only).
#                         UV_SOURCE=pypi takes uv from the Python package index (hash-locked
#                         requirements/uv.lock) where the uv image cannot be pulled.
ARG PYTHON_IMAGE=python:3.13-slim@sha256:7c61056e61ac89e852de05f3dc6fa51a6dd2181797bceed46aa725dd7cb2cd3b
ARG UV_SOURCE=image
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.12.23@sha256:61d393e44e249f2e4b526b6c7ddcecce245946826e608e11c93ad4f5bba55b21

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# A Debian python3 without its venv module and ensurepip wheel (no python3-venv) gets them in this stage only.
ARG DEBIAN_FRONTEND=noninteractive
RUN python3 -c 'import ensurepip, venv' 2> /dev/null \
 || (apt-get update && apt-get install -y --no-install-recommends python3-venv && rm -rf /var/lib/apt/lists/*)
# The runtime venv and the build backend's own venv (the image never carries the latter).
RUN python3 -m venv /opt/maka && python3 -m venv /opt/build
# Dependencies first (their layer is reused while only the sources change): exactly the locked files.
COPY requirements/run.lock requirements/build.lock ./requirements/
RUN /opt/maka/bin/pip install --require-hashes --no-deps -r requirements/run.lock
RUN /opt/build/bin/pip install --require-hashes --no-deps -r requirements/build.lock
COPY pyproject.toml README.md ./
COPY gen ./gen
COPY services ./services
COPY stack ./stack
COPY surfaces ./surfaces
# The Python client library (maka_client): `maka call`, `maka stop` and `maka tools` run on it.
COPY clients/python ./clients/python
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ./clients/python .
RUN /opt/maka/bin/pip install --no-deps /wheels/*.whl
# The SBOM of the runtime venv, then pip leaves it: `pip inspect` of /opt/maka by the build venv's pip.
RUN /opt/maka/bin/pip uninstall -y -q pip \
 && mkdir -p /sbom \
 && /opt/build/bin/pip --python /opt/maka/bin/python inspect --local > /sbom/sbom.pip-inspect.json \
 && find /opt/maka -name __pycache__ -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/maka \
    PATH=/opt/maka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MAKA_LOG_LEVEL=INFO
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
RUN groupadd --system --gid 10001 maka \
 && useradd --system --uid 10001 --gid maka --home-dir /home/maka --no-create-home --shell /usr/sbin/nologin maka \
 && mkdir -p /home/maka && chown 10001:10001 /home/maka && chmod 0700 /home/maka
COPY --from=build /opt/maka /opt/maka
# The SBOM: every installed Python distribution of /opt/maka (name, version, metadata, requirements:
# `pip inspect`) and every Debian package of the image.
COPY --from=build /sbom/sbom.pip-inspect.json /usr/share/maka/
RUN dpkg-query -W -f '${Package} ${Version}\n' > /usr/share/maka/sbom.debian-packages.txt
WORKDIR /app
# The bundled example MCP server (stdio): `python -m examples.deploy_server` resolves from /app.
COPY --chown=root:root examples/__init__.py examples/deploy_server.py examples/mcp.json ./examples/
# The provider's OAuth token directory (MAKA_OAUTH_TOKEN_DIR): a volume mounted here starts owned by 10001.
RUN mkdir -p /var/lib/maka/oauth && chown 10001:10001 /var/lib/maka/oauth && chmod 0700 /var/lib/maka/oauth
USER 10001:10001
EXPOSE 50051 50052 50053 8765
ENTRYPOINT ["/usr/bin/tini", "--"]
# Health checks are per service (their ports differ): see docker-compose.yml and deploy/k8s.
CMD ["python", "-m", "services.interaction.main"]

# uv and uvx for the mcp-tools target: from the pinned uv image (UV_SOURCE=image, the default) or from the
# Python package index, hash-locked (UV_SOURCE=pypi).
FROM ${UV_IMAGE} AS uv-image
FROM ${PYTHON_IMAGE} AS uv-pypi
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements/uv.lock /tmp/uv.lock
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --require-hashes --no-deps -r /tmp/uv.lock \
 && cp /opt/uv/bin/uv /opt/uv/bin/uvx /
FROM uv-${UV_SOURCE} AS uv

# The runtime plus Node.js/npm (Debian's) and uv/uvx, for npx/uvx stdio MCP servers. Their packages are
# fetched at run time into HOME (an emptyDir in Kubernetes): pin their versions in mcp.json
# (`npx -y pkg@1.2.3`, `uvx pkg==1.2.3`) and allow their registry in the Host pods' egress.
FROM runtime AS mcp-tools
ARG DEBIAN_FRONTEND=noninteractive
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY --from=uv /uv /uvx /usr/local/bin/
RUN dpkg-query -W -f '${Package} ${Version}\n' > /usr/share/maka/sbom.debian-packages.txt
USER 10001:10001

# The default target: the runtime without Node.js or uv.
FROM runtime
