# syntax=docker/dockerfile:1
# One image for every Maka authority; the command picks the service:
#   python -m services.interaction.main | services.broker.main | services.mcp_provider.main | surfaces.web.main
# Configuration is by the same MAKA_* environment variables as the Settings classes.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gen ./gen
COPY services ./services
COPY stack ./stack
COPY surfaces ./surfaces
# The Python client library (maka_client): `maka call`, `maka stop` and `maka tools` run on it.
COPY clients/python ./clients/python
RUN pip install --prefix=/install ./clients/python
RUN pip install --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MAKA_LOG_LEVEL=INFO
RUN groupadd --system --gid 10001 maka \
 && useradd --system --uid 10001 --gid maka --home-dir /app --no-create-home --shell /usr/sbin/nologin maka
COPY --from=build /install /usr/local
WORKDIR /app
# The bundled example MCP server (stdio): `python -m examples.deploy_server` resolves from /app.
COPY --chown=root:root examples/__init__.py examples/deploy_server.py examples/mcp.json ./examples/
# The provider's OAuth token directory (MAKA_OAUTH_TOKEN_DIR): a volume mounted here starts owned by 10001.
RUN mkdir -p /var/lib/maka/oauth && chown 10001:10001 /var/lib/maka/oauth && chmod 0700 /var/lib/maka/oauth
USER 10001:10001
EXPOSE 50051 50052 50053 8765
# Health checks are per service (their ports differ): see docker-compose.yml and deploy/k8s.
CMD ["python", "-m", "services.interaction.main"]
