"""Offline validation of the deployment files: Compose against the compose-spec schema, Kubernetes
manifests against the bundled Kubernetes 1.33 OpenAPI schemas (strict; the CRD kinds structurally), plus the
rules a platform team relies on (non-root, read-only root FS, native gRPC probes, h2c ports, AOF Redis with
a PVC, env names that the Settings classes read, shutdown budgets, namespace-relative names, one team's
Hosts, Secrets and tokens apart from another's, metrics coverage and alerts), and deploy/README.md's walks:
its Secret commands run (``kubectl create --dry-run=client``) and create exactly the Secrets and keys the
rendered manifests reference, and its rollback runbook names only objects that exist. Nothing here needs a
Docker engine or a cluster.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kubernetes_validate
import pytest
import redis
import yaml
from kubernetes_validate.utils import ValidationError
from pydantic_settings import BaseSettings

from maka_client._channel import BROKER_NEW_CALLS_SERVICE
from services.broker.main import SERVICE_NAME as BROKER_SERVICE_NAME
from services.broker.settings import Settings as BrokerSettings
from services.core import metrics
from services.core.auth import Role, TokenTable
from services.core.settings import ClientTlsSettings, DrainBudgetSettings
from services.interaction.main import served_hosts
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider.config import check_config
from services.mcp_provider.oauth import read_key_file
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.mcp.calls import STOP_TIMEOUT_SECONDS as MCP_STOP_TIMEOUT_SECONDS
from surfaces.mcp.drain import READY_PATH as MCP_READY_PATH
from surfaces.mcp.main import SHUTDOWN_GRACE_SECONDS as MCP_SHUTDOWN_GRACE_SECONDS
from surfaces.mcp.main import STOP_CALLS_SECONDS as MCP_STOP_CALLS_SECONDS
from surfaces.mcp.server import HEALTH_PATH as MCP_HEALTH_PATH
from surfaces.mcp.settings import McpSettings
from surfaces.web.main import SHUTDOWN_GRACE_SECONDS as WEB_SHUTDOWN_GRACE_SECONDS
from surfaces.web.settings import WebSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
TEAM = K8S / "team"
MONITORING = K8S / "components" / "monitoring"
OVERLAYS = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
TEAMS = [K8S / "overlays" / "team-a", K8S / "overlays" / "team-b"]
EXAMPLE = K8S / "overlays" / "example"
EXAMPLE_HA = K8S / "overlays" / "example-ha"
INSTALLATIONS = [EXAMPLE, EXAMPLE_HA]
RENDERINGS = [BASE, *OVERLAYS]
"""Every directory a cluster could be given: the base, each team overlay, each installation."""
K8S_VERSION = "1.33.0"
"""Native gRPC probes are GA since 1.27; the ``sleep`` preStop action validates from 1.30."""

README = ROOT / "deploy" / "README.md"
SETTINGS_CLASS: dict[str, type[InteractionSettings | BrokerSettings | ProviderSettings | WebSettings | McpSettings]] = {
    "services.interaction.main": InteractionSettings,
    "services.broker.main": BrokerSettings,
    "services.mcp_provider.main": ProviderSettings,
    "surfaces.web.main": WebSettings,
    "surfaces.mcp.main": McpSettings,
}
DIALS_GRPC = {"services.broker.main", "services.mcp_provider.main", "surfaces.web.main", "surfaces.mcp.main"}
"""Entry points that open gRPC channels, so they also read ``ClientTlsSettings`` (``MAKA_TLS_CA_FILE`` ...)."""
SETTINGS_BY_MODULE: dict[str, set[str]] = {
    module: {f"MAKA_{name.upper()}" for name in settings.model_fields}
    | ({f"MAKA_{name.upper()}" for name in ClientTlsSettings.model_fields} if module in DIALS_GRPC else set())
    for module, settings in SETTINGS_CLASS.items()
}
"""The environment names each entry point's Settings classes read (env prefix ``MAKA_``)."""

S = TypeVar("S", bound=BaseSettings)
DRAIN_BUDGET_FIELDS = set(DrainBudgetSettings.model_fields)

GRPC_MODULES = {"services.interaction.main", "services.broker.main", "services.mcp_provider.main"}
WORKLOADS = ("Deployment", "StatefulSet")
CRD_KINDS = {
    "PodMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
    "HTTPRoute": "gateway.networking.k8s.io/v1",
    "GRPCRoute": "gateway.networking.k8s.io/v1",
}
"""Custom resources the renderings hold (no schema ships with kubernetes-validate: checked structurally)."""


@functools.cache
def _render(directory: Path) -> tuple[dict[str, Any], ...]:
    """``kubectl kustomize DIR``: the documents a cluster would receive."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: run `make setup-node`"
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return tuple(d for d in yaml.safe_load_all(result.stdout) if d)


def _k8s_documents(directory: Path = EXAMPLE) -> Iterator[dict[str, Any]]:
    yield from copy.deepcopy(_render(directory))


def _every_rendering() -> list[tuple[str, dict[str, Any]]]:
    return [(d.name, doc) for d in RENDERINGS for doc in _k8s_documents(d)]


OVERRIDE = re.compile(r"\$\{(MAKA_[A-Z_]+):-([^}]*)\}")
"""``${MAKA_X_IMAGE:-default}``: a value the environment may override, with its default."""


def _compose() -> dict[str, Any]:
    """docker-compose.yml as Compose reads it with no ``MAKA_*`` variable set (every override at its default)."""
    text = OVERRIDE.sub(lambda found: found.group(2), (ROOT / "docker-compose.yml").read_text())
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_every_image_of_compose_is_overridable_by_a_maka_variable_defaulting_to_the_pinned_one() -> None:
    raw = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    images = {name: service["image"] for name, service in raw["services"].items()}
    overrides = {name: OVERRIDE.fullmatch(image) for name, image in images.items()}
    assert all(overrides.values()), images
    variables = {name: found.group(1) for name, found in overrides.items() if found}
    assert variables["redis"] == "MAKA_REDIS_IMAGE"
    assert variables["proxy"] == "MAKA_NGINX_IMAGE"
    assert {variables[name] for name in images if name not in ("redis", "proxy")} == {"MAKA_IMAGE"}
    assert raw["x-service"]["build"]["args"]["PYTHON_IMAGE"].startswith("${MAKA_PYTHON_IMAGE:-python:3.13-slim@")
    dockerfile_default = dict(
        line.removeprefix("ARG ").split("=", 1) for line in _dockerfile() if line.startswith("ARG ")
    )["PYTHON_IMAGE"]
    assert _compose()["x-service"]["build"]["args"]["PYTHON_IMAGE"] == dockerfile_default
    assert "configs" not in raw, "podman-compose does not mount configs: bind-mount the file"


def _module(container: dict[str, Any]) -> str:
    """The Maka entry point a container runs (``args`` under the image's tini ENTRYPOINT; Compose's
    ``command`` replaces only the image's CMD), or ""."""
    command: list[str] = container.get("args") or container.get("command") or []
    return command[2] if command[:2] == ["python", "-m"] else ""


# --- Docker Compose ----------------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec_schema() -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(ROOT / "docker-compose.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_schema_check_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  redis:\n    image: redis\n    healthcheck: {interval: forever, bogus: 1}\n")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1


IMAGES_NOT_OURS = {"redis", "proxy"}


def _ours() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _compose()["services"].items() if name not in IMAGES_NOT_OURS}


def test_compose_runs_redis_with_auth_from_a_file_aof_a_memory_cap_a_volume_and_a_health_check() -> None:
    redis = _compose()["services"]["redis"]
    command = " ".join(redis["command"])

    assert re.fullmatch(r"redis:7\.4-alpine@sha256:[0-9a-f]{64}", redis["image"]), "pinned by digest"
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command
    # The password reaches redis-server through a config file on a tmpfs, never its command line.
    assert "--requirepass" not in command
    assert "printf 'requirepass %s\\n' \"$$(cat /run/secrets/redis_password)\" > /run/redis/auth.conf" in command
    assert "exec redis-server /run/redis/auth.conf" in command
    assert "/run/redis" in redis["tmpfs"]
    assert redis["secrets"] == ["redis_password"]
    assert "redis-data:/data" in redis["volumes"]
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])


def test_compose_describes_the_k8s_topology_hosts_share_a_namespace_tier_and_web_are_replicated() -> None:
    services = _ours()
    brokers = {n for n, s in services.items() if _module(s) == "services.broker.main"}
    providers = {n: s for n, s in services.items() if _module(s) == "services.mcp_provider.main"}

    assert brokers == {"host-0", "host-1", "host-2"}
    assert {s["environment"]["MAKA_HOST_ID"] for n, s in services.items() if n in brokers} == brokers
    assert {p["network_mode"] for p in providers.values()} == {f"service:{b}" for b in brokers}
    assert all(p["environment"]["MAKA_BROKER_TARGET"] == "127.0.0.1:50052" for p in providers.values())
    assert services["interaction"]["deploy"]["replicas"] == 2
    assert services["web"]["deploy"]["replicas"] == 2
    for name in (*brokers, "web"):
        assert services[name]["environment"]["MAKA_INTERACTION_TARGET"] == "dns:///interaction:50051", name
    assert sorted(services["interaction"]["environment"]["MAKA_HOST_IDS"].split(",")) == sorted(brokers)
    assert services["web"]["environment"]["MAKA_HOST_IDS"] == "*", "the web follows every Host"
    assert services["web"]["environment"]["MAKA_BROKER_TARGET"].removesuffix(":50052") in brokers
    for broker, provider in ((s["network_mode"].removeprefix("service:"), s) for s in providers.values()):
        assert provider["environment"]["MAKA_DRAIN_SECONDS"] == services[broker]["environment"]["MAKA_DRAIN_SECONDS"]


def test_compose_runs_each_hosts_mcp_front_door_in_its_namespace_published_on_loopback() -> None:
    services = _ours()
    doors = {n: s for n, s in services.items() if _module(s) == "surfaces.mcp.main"}
    brokers = {n for n, s in services.items() if _module(s) == "services.broker.main"}

    assert {d["network_mode"] for d in doors.values()} == {f"service:{b}" for b in brokers}
    for door in doors.values():
        host = door["network_mode"].removeprefix("service:")
        env = door["environment"]
        assert env["MAKA_HOST_ID"] == services[host]["environment"]["MAKA_HOST_ID"]
        assert env["MAKA_BROKER_TARGET"] == "127.0.0.1:50052", "its own Host's broker, as in a pod"
        port = env["MAKA_MCP_LISTEN"].rpartition(":")[2]
        published = [p for p in services[host]["ports"] if p.endswith(f":{port}")]
        assert len(published) == 1, (host, published)
        assert published[0].startswith("127.0.0.1:"), "published on loopback only"
        assert env["MAKA_WEB_URL"] == services["web"]["environment"]["MAKA_WEB_PUBLIC_ORIGIN"]
        assert env["MAKA_DRAIN_SECONDS"] == services[host]["environment"]["MAKA_DRAIN_SECONDS"], "drains as its broker"
        assert f"127.0.0.1:{port}/healthz" in " ".join(door["healthcheck"]["test"])


def test_compose_has_one_service_per_authority_built_from_the_one_dockerfile() -> None:
    built = _ours()

    assert {_module(s) for s in built.values()} == set(SETTINGS_BY_MODULE)
    for service in built.values():
        assert service["build"]["dockerfile"] == "Dockerfile"
        assert service["read_only"] is True
        assert "no-new-privileges:true" in service["security_opt"]


def test_compose_services_use_only_environment_names_their_settings_read() -> None:
    for name, service in _ours().items():
        unknown = set(service["environment"]) - SETTINGS_BY_MODULE[_module(service)]
        assert not unknown, f"{name}: {unknown}"


def test_compose_grpc_services_have_grpc_health_checks_on_their_listen_port() -> None:
    for name, service in _ours().items():
        if _module(service) not in GRPC_MODULES:
            continue
        port = service["environment"]["MAKA_LISTEN"].rsplit(":", 1)[1]
        assert service["healthcheck"]["test"] == [
            "CMD",
            "python",
            "-m",
            "services.core.healthcheck",
            f"127.0.0.1:{port}",
        ], name
        for dependency in service["depends_on"].values():
            assert dependency["condition"] == "service_healthy"


def test_compose_publishes_ports_on_loopback_only() -> None:
    for service in _compose()["services"].values():
        for mapping in service.get("ports", []):
            assert mapping.startswith("127.0.0.1:"), mapping


def _compose_providers() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _ours().items() if _module(s) == "services.mcp_provider.main"}


def test_compose_providers_read_the_oauth_key_secret_and_keep_tokens_on_their_hosts_own_volume() -> None:
    compose = _compose()
    services = compose["services"]
    volumes_used = []
    for name, provider in _compose_providers().items():
        broker = services[provider["network_mode"].removeprefix("service:")]
        env = provider["environment"]
        settings = _settings(ProviderSettings, env)

        assert env["MAKA_HOST_ID"] == broker["environment"]["MAKA_HOST_ID"], "token files bound to the Host id"
        assert provider["secrets"] == ["oauth_key"]
        assert settings.oauth_key_file == Path("/run/secrets/oauth_key")
        assert compose["secrets"]["oauth_key"]["file"] == "./deploy/compose/secrets/oauth_key"
        (volume,) = [v for v in provider["volumes"] if v.endswith(f":{settings.oauth_token_dir}")]
        volumes_used.append(volume.split(":", 1)[0])
        assert volumes_used[-1] in compose["volumes"], name
    assert len(volumes_used) == len(set(volumes_used)) == 3, "one token volume per Host"


def test_compose_interaction_replicas_share_the_answer_key_secret() -> None:
    compose = _compose()
    (tier,) = [s for s in _ours().values() if _module(s) == "services.interaction.main"]
    settings = _settings(InteractionSettings, tier["environment"])

    assert tier["deploy"]["replicas"] >= 2, "one secret file, so every replica seals with the same key"
    assert "answer_key" in tier["secrets"]
    assert settings.answer_key_file == Path("/run/secrets/answer_key")
    assert compose["secrets"]["answer_key"]["file"] == "./deploy/compose/secrets/answer_key"


def test_compose_web_reads_its_hosts_broker_and_the_providers_redirect_to_its_public_callback() -> None:
    web = _compose()["services"]["web"]["environment"]

    assert web["MAKA_BROKER_TARGET"] == "host-0:50052"
    for provider in _compose_providers().values():
        assert provider["environment"]["MAKA_OAUTH_REDIRECT_URI"] == f"{web['MAKA_WEB_PUBLIC_ORIGIN']}/oauth/callback"


def test_compose_shutdown_budgets_fit_each_stop_grace_period() -> None:
    for name, service in _ours().items():
        module = _module(service)
        period = float(service["stop_grace_period"].removesuffix("s"))
        env = {k: str(v) for k, v in service["environment"].items()}
        assert _shutdown_seconds(module, env) + 5 <= period, (name, _shutdown_seconds(module, env), period)


def test_the_compose_secret_files_the_script_makes_are_the_ones_compose_reads() -> None:
    """deploy/compose/secrets.sh writes every file the compose file reads (the header and the README point to it)."""
    files = {Path(s["file"]).name for s in _compose()["secrets"].values()}
    files |= {Path(v.split(":")[0]).name for v in _compose()["services"]["proxy"]["volumes"] if "/secrets/" in v}
    script = (ROOT / "deploy" / "compose" / "secrets.sh").read_text()
    header = (ROOT / "docker-compose.yml").read_text()

    assert files == {"redis_password", "web_secret", "oauth_key", "answer_key", "tls.crt", "tls.key"}
    for file in files:
        assert re.search(rf"(write |-keyout |-out ){re.escape(file)}\b", script), file
    assert "deploy/compose/secrets.sh" in header
    assert "openssl" not in header, "the steps live in the script"
    assert "deploy/compose/secrets.sh" in _readme_block("deploy/compose/secrets.sh")
    assert "deploy/compose/secrets/" in (ROOT / ".gitignore").read_text().split()


def test_compose_services_run_under_the_images_init_with_a_writable_home_only() -> None:
    for name, service in _ours().items():
        assert "init" not in service, f"{name}: the image's tini is PID 1"
        assert set(service["tmpfs"]) == {"/tmp", "/home/maka"}, name
        assert service["environment"].get("MAKA_WEB_FORWARDED_ALLOW_IPS", "") != "*", name


# --- The image ---------------------------------------------------------------------------------


def _dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _stages() -> dict[str, list[str]]:
    """Build stage name (or ``final``) → its instructions after ``FROM``."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in _dockerfile():
        if line.startswith("FROM "):
            words = line.split()
            current = stages.setdefault(words[3] if len(words) == 4 else "final", [line])
        elif stages:
            current.append(line)
    return stages


def test_dockerfile_pins_its_base_images_by_digest() -> None:
    args = dict(line.removeprefix("ARG ").split("=", 1) for line in _dockerfile() if line.startswith("ARG "))

    assert re.fullmatch(r"python:3\.13-slim@sha256:[0-9a-f]{64}", args["PYTHON_IMAGE"])
    assert re.fullmatch(r"ghcr\.io/astral-sh/uv:[0-9.]+@sha256:[0-9a-f]{64}", args["UV_IMAGE"])
    assert args["UV_SOURCE"] == "image"
    froms = [line.split()[1] for line in _dockerfile() if line.startswith("FROM ")]
    assert set(froms) <= {"${PYTHON_IMAGE}", "${UV_IMAGE}", "uv-${UV_SOURCE}", "runtime"}, froms
    assert "docker buildx imagetools inspect python:3.13-slim" in (ROOT / "Dockerfile").read_text(), "how to bump"


PINNED = re.compile(r"[a-z0-9][a-z0-9./_-]*:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}")
"""``name:tag@sha256:<digest>``: the tag documents the image, the digest is what is pulled."""
OWN_IMAGES = ("maka-runtime", "registry.example.com/maka-runtime")
"""The project's own image, built from the Dockerfile: an installation names it (and its digest) with ``images:``."""


def test_every_third_party_image_of_every_rendering_compose_and_the_dockerfile_is_pinned_by_digest() -> None:
    images: dict[str, str] = {}
    for directory in RENDERINGS:
        for workload, _pod, container in _containers(directory, init=True):
            images[container["image"]] = f"{directory.name}: {workload['metadata']['name']}/{container['name']}"
    for name, service in _compose()["services"].items():
        if "image" in service:
            images[service["image"]] = f"docker-compose.yml: {name}"
    args = dict(line.removeprefix("ARG ").split("=", 1) for line in _dockerfile() if line.startswith("ARG "))
    images |= {value: f"Dockerfile: {name}" for name, value in args.items() if name.endswith("_IMAGE")}
    third_party = {image: where for image, where in images.items() if image.split(":")[0] not in OWN_IMAGES}

    assert "quay.io/oliver006/redis_exporter" in {i.split(":")[0] for i in third_party}
    unpinned = {image: where for image, where in third_party.items() if not PINNED.fullmatch(image)}
    assert not unpinned, unpinned
    assert not PINNED.fullmatch("oliver006/redis_exporter:v1.67.0"), "a tag alone is refused"
    # Digests cannot be looked up offline: the README says so and how to check each before use.
    supply_chain = README.read_text().split("### Supply chain", 1)[1].split("\n### ", 1)[0]
    assert "docker buildx imagetools inspect" in supply_chain
    for image in third_party:
        assert image.split("@")[0] in supply_chain, f"deploy/README.md's supply chain does not list {image}"


def test_dockerfile_installs_exactly_the_hash_locked_requirements_then_the_project_without_dependencies() -> None:
    build = _stages()["build"]
    pips = [line for line in build if re.match(r"RUN /opt/\w+/bin/pip ", line)]

    # Both venvs from the base's python3 (python:3.13-slim or a Debian base without pip: ensurepip brings it).
    assert "RUN python3 -m venv /opt/maka && python3 -m venv /opt/build" in build
    assert pips[:4] == [
        "RUN /opt/maka/bin/pip install --require-hashes --no-deps -r requirements/run.lock",
        # The build backend from its own hash-locked file, into the build venv only (never /opt/maka).
        "RUN /opt/build/bin/pip install --require-hashes --no-deps -r requirements/build.lock",
        # Built by that backend: pip's build isolation would fetch an unhashed hatchling.
        "RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ./clients/python .",
        "RUN /opt/maka/bin/pip install --no-deps /wheels/*.whl",
    ]
    assert build.index("COPY requirements/run.lock requirements/build.lock ./requirements/") < build.index(pips[0])
    assert "requirements" not in (ROOT / ".dockerignore").read_text().split()
    # pip leaves the runtime venv once the SBOM of it is written.
    assert any("/opt/maka/bin/pip uninstall -y -q pip" in line for line in build)


def test_the_runtime_image_runs_under_tini_non_root_with_an_sbom_and_a_home() -> None:
    stages = _stages()
    runtime = stages["runtime"]
    text = " ".join(runtime)

    assert "apt-get install -y --no-install-recommends tini" in text
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in runtime
    assert "USER 10001:10001" in runtime
    assert runtime.index("USER 10001:10001") > runtime.index("COPY --from=build /opt/maka /opt/maka")
    assert "PATH=/opt/maka/bin:" in text
    assert "COPY --from=build /sbom/sbom.pip-inspect.json /usr/share/maka/" in runtime
    assert "pip --python /opt/maka/bin/python inspect --local > /sbom/sbom.pip-inspect.json" in " ".join(
        stages["build"]
    )
    assert "HOME=/home/maka" in text
    assert "chown 10001:10001 /home/maka" in text
    # A named volume mounted on the token directory starts with the image's owner: the non-root provider.
    assert (
        "RUN mkdir -p /var/lib/maka/oauth && chown 10001:10001 /var/lib/maka/oauth && chmod 0700 /var/lib/maka/oauth"
        in runtime
    )
    assert stages["final"] == ["FROM runtime"], "`docker build .` builds the runtime, without Node.js or uv"
    assert (ROOT / ".dockerignore").read_text().count(".venv") == 1


def test_the_mcp_tools_target_adds_node_and_uv_for_npx_and_uvx_servers() -> None:
    tools = _stages()["mcp-tools"]
    text = " ".join(tools)

    assert tools[0] == "FROM runtime AS mcp-tools"
    assert "apt-get install -y --no-install-recommends nodejs npm" in text
    assert "COPY --from=uv /uv /uvx /usr/local/bin/" in tools
    assert tools[-1] == "USER 10001:10001"
    assert "--target mcp-tools" in README.read_text()


# --- Kubernetes --------------------------------------------------------------------------------


def _containers(
    directory: Path = EXAMPLE, kind: str | None = None, *, init: bool = False
) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec, container) for every Deployment/StatefulSet container (and init container)."""
    for document in _k8s_documents(directory):
        if document["kind"] in WORKLOADS and kind in (None, document["kind"]):
            pod = document["spec"]["template"]["spec"]
            for container in pod["containers"] + (pod.get("initContainers", []) if init else []):
                yield document, pod, container


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {env["name"]: env for env in container.get("env", [])}


def _one(directory: Path, kind: str, name: str) -> dict[str, Any]:
    (document,) = [d for d in _k8s_documents(directory) if d["kind"] == kind and d["metadata"]["name"] == name]
    return document


def _hosts(directory: Path) -> list[dict[str, Any]]:
    """Every team's Host StatefulSet (broker + provider pods)."""
    return [
        d
        for d in _k8s_documents(directory)
        if d["kind"] == "StatefulSet" and d["spec"]["template"]["metadata"]["labels"].get("maka.dev/role") == "host"
    ]


def _host_ids(directory: Path) -> list[str]:
    """The pod names (Host ids) of every team's StatefulSet, in rendering order."""
    return [f"{h['metadata']['name']}-{i}" for h in _hosts(directory) for i in range(h["spec"].get("replicas", 1))]


def test_the_renderings_are_a_base_a_team_unit_two_teams_and_two_installations() -> None:
    assert (BASE / "kustomization.yaml").exists()
    assert (TEAM / "kustomization.yaml").exists()
    assert [p.name for p in OVERLAYS] == ["example", "example-ha", "team-a", "team-b"]
    for team in TEAMS:
        kustomization = yaml.safe_load((team / "kustomization.yaml").read_text())
        assert kustomization["resources"][0] == "../../team", "a team is the unit, named"
        assert kustomization["namePrefix"] == f"{team.name}-"
        assert kustomization["labels"] == [
            {"pairs": {"maka.dev/team": team.name}, "includeSelectors": True, "includeTemplates": True}
        ]


def _check_custom_resource(document: dict[str, Any]) -> None:
    """A structural check of the CRD kinds: their group version, and the fields their controllers need."""
    kind, spec = document["kind"], document["spec"]
    assert document["apiVersion"] == CRD_KINDS[kind]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", document["metadata"]["name"])
    if kind == "PodMonitor":
        assert spec["selector"]["matchLabels"]
        assert all(set(e) <= {"port", "path", "interval"} and e["port"] for e in spec["podMetricsEndpoints"])
    elif kind == "PrometheusRule":
        for group in spec["groups"]:
            for rule in group["rules"]:
                assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
                assert rule["labels"]["severity"] in {"warning", "critical"}
                assert {"summary", "description", "runbook"} <= set(rule["annotations"])
    else:
        assert spec["parentRefs"]
        assert spec["hostnames"]
        for rule in spec["rules"]:
            assert all(set(ref) == {"name", "port"} for ref in rule["backendRefs"])


@pytest.mark.parametrize(
    ("rendering", "document"),
    [pytest.param(r, d, id=f"{r}:{d['kind']}/{d['metadata']['name']}") for r, d in _every_rendering()],
)
def test_every_rendered_k8s_document_is_valid_for_the_pinned_kubernetes_version(
    rendering: str, document: dict[str, Any]
) -> None:
    if document["kind"] in CRD_KINDS:
        _check_custom_resource(document)
    else:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_k8s_validation_rejects_an_unknown_field() -> None:
    document = next(d for d in _k8s_documents() if d["kind"] == "Deployment")
    document["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpcc"] = {"port": 1}

    with pytest.raises(ValidationError):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


@pytest.mark.parametrize("directory", [BASE, TEAM], ids=lambda p: p.name)
def test_each_kustomization_lists_every_manifest(directory: Path) -> None:
    listed = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]

    assert sorted(listed) == sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda p: p.name)
def test_every_k8s_container_is_non_root_read_only_and_without_privilege_escalation(directory: Path) -> None:
    for workload, pod, container in _containers(directory, init=True):
        name = f"{workload['metadata']['name']}/{container['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
        assert container["resources"]["requests"].keys() == {"cpu", "memory"}, name
        assert "memory" in container["resources"]["limits"], name


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda p: p.name)
def test_maka_containers_keep_the_images_init_as_pid_1(directory: Path) -> None:
    for workload, _pod, container in _containers(directory):
        if container["image"].split("/")[-1].startswith("maka-runtime"):
            # `command` would replace the image's ENTRYPOINT (tini); `args` replaces only its CMD.
            assert "command" not in container, (workload["metadata"]["name"], container["name"])
            assert _module(container), (workload["metadata"]["name"], container["name"])


def test_grpc_services_use_native_grpc_probes_that_do_not_restart_a_busy_process() -> None:
    modules = set()
    for workload, _pod, container in _containers():
        module = _module(container)
        if module not in GRPC_MODULES:
            continue
        modules.add(module)
        port = container["ports"][0]["containerPort"]
        name = (workload["metadata"]["name"], container["name"])
        # Liveness asks the process (the overall status), never Redis: a Redis outage must not restart
        # healthy pods. The Interaction service's readiness is its named service (Redis reachable).
        assert container["startupProbe"]["grpc"] == {"port": port}, name
        assert container["livenessProbe"]["grpc"] == {"port": port}, name
        ready: dict[str, Any] = {"port": port}
        if module == "services.interaction.main":
            ready["service"] = "maka.interaction.v1.InteractionService"
        if module == "services.broker.main":  # "takes new calls": NOT_SERVING at once when it drains
            ready["service"] = BROKER_SERVICE_NAME
        assert container["readinessProbe"]["grpc"] == ready, name
        live, readiness = container["livenessProbe"], container["readinessProbe"]
        assert live["timeoutSeconds"] >= 5, name
        assert live["periodSeconds"] * live["failureThreshold"] >= 60, "a minute of failures before a restart"
        assert readiness.get("timeoutSeconds", 1) > 1, name
        assert live != readiness, name
    assert modules == GRPC_MODULES


SHUTDOWN_PHASES: dict[str, tuple[str, ...]] = {
    # BrokerApp.stop: broker.drain(drain_seconds), broker.shutdown(timeout=grace_seconds) settles what is
    # left (calls lost, forms closed stopped), then serving's server.stop(grace_seconds).
    "services.broker.main": ("drain_seconds", "grace_seconds", "grace_seconds"),
    # ProviderApp.stop: provider.drain(drain_seconds), provider.close(grace_seconds) half-closes each broker
    # stream and waits for the broker to end it, then serving's server.stop(grace_seconds).
    "services.mcp_provider.main": ("drain_seconds", "grace_seconds", "grace_seconds"),
    # The Interaction app's stop: servicer.drain(grace_seconds) ends every stream, then server.stop(grace_seconds).
    "services.interaction.main": ("grace_seconds", "grace_seconds"),
    "surfaces.web.main": (),  # uvicorn's graceful shutdown: WEB_SHUTDOWN_GRACE_SECONDS
    # serve: the drain (drain_seconds, ``auto`` derived as the broker's), the bounded Stop of the calls left
    # (MCP_STOP_CALLS_SECONDS), uvicorn's graceful shutdown (MCP_SHUTDOWN_GRACE_SECONDS), then every detached
    # call's bounded Stop.
    "surfaces.mcp.main": ("drain_seconds",),
}
"""What each entry point may spend after SIGTERM, phase by phase, by the setting that bounds the phase."""


def _shutdown_seconds(module: str, env: dict[str, str]) -> float:
    """The worst-case time from SIGTERM to exit of ``module`` with literal environment ``env``."""
    if module == "surfaces.web.main":
        return WEB_SHUTDOWN_GRACE_SECONDS
    if module == "surfaces.mcp.main":
        drain = _settings(McpSettings, env).drain_budget_seconds()
        return drain + MCP_STOP_CALLS_SECONDS + MCP_SHUTDOWN_GRACE_SECONDS + MCP_STOP_TIMEOUT_SECONDS
    settings = SETTINGS_CLASS[module]
    values = {
        name: env.get(f"MAKA_{name.upper()}", settings.model_fields[name].default)
        for name in {"drain_seconds", "grace_seconds"} & set(settings.model_fields)
    }
    if module == "services.broker.main":  # ``auto`` resolves to the budget derived from the other settings
        values["drain_seconds"] = _settings(BrokerSettings, env).drain_budget_seconds()
    return sum(float(values[phase]) for phase in SHUTDOWN_PHASES[module])


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {name: env["value"] for name, env in _env(container).items() if "value" in env}


def _settings(settings: type[S], env: dict[str, str]) -> S:
    """``settings`` from the ``MAKA_*`` values in ``env`` that it declares (the process environment aside)."""
    names = {f"MAKA_{name.upper()}": name for name in settings.model_fields}
    return settings.model_validate({names[k]: v for k, v in env.items() if k in names})


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda p: p.name)
def test_each_pods_shutdown_budget_fits_its_termination_grace(directory: Path) -> None:
    checked = set()
    for workload, pod, container in _containers(directory):
        module = _module(container)
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        budget = pre_stop + (_shutdown_seconds(module, _literal_env(container)) if module else 0)
        name = (workload["metadata"]["name"], container["name"])
        assert budget + 5 <= pod["terminationGracePeriodSeconds"], (name, budget, pod["terminationGracePeriodSeconds"])
        checked.add(module)
    if directory in INSTALLATIONS:
        assert set(SHUTDOWN_PHASES) <= checked


def _derived_drain_budget(grace: float) -> float:
    """The ``auto`` drain budget from the settings' defaults, computed here on its own: the longest a form
    can still wait (the Interaction tier's maximum) + one provider leg after its answer + grace."""
    form_wait = InteractionSettings.model_fields["form_wait_max_seconds"].default
    leg = BrokerSettings.model_fields["execution_timeout_seconds"].default
    return float(form_wait + leg + grace)


def test_the_host_pods_termination_grace_is_prestop_plus_the_derived_drain_plus_settling() -> None:
    for directory in (TEAM, *TEAMS, *INSTALLATIONS):
        for host in _hosts(directory):
            pod = host["spec"]["template"]["spec"]
            containers = {c["name"]: c for c in pod["containers"]}
            broker_env, provider_env = _literal_env(containers["broker"]), _literal_env(containers["provider"])
            pre_stop = containers["broker"]["lifecycle"]["preStop"]["sleep"]["seconds"]
            grace = float(broker_env["MAKA_GRACE_SECONDS"])
            budget = _derived_drain_budget(grace)

            assert broker_env["MAKA_DRAIN_SECONDS"] == "auto", "a planned stop drains until the work is done"
            assert _settings(BrokerSettings, broker_env).drain_budget_seconds() == budget
            # The provider keeps its MCP connections for as long as the broker may drain.
            assert float(provider_env["MAKA_DRAIN_SECONDS"]) == budget
            assert pod["terminationGracePeriodSeconds"] == pre_stop + budget + 2 * grace + 5, "5 s margin"
            text = " ".join((TEAM / "host.yaml").read_text().split())
            assert (
                f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} = preStop {pre_stop} s" in text
            )
            assert f"= {budget:g} s" in text


def test_the_readmes_upgrade_budget_is_the_host_pods_own_figures() -> None:
    (host, *_others) = _hosts(EXAMPLE)
    pod = host["spec"]["template"]["spec"]
    broker = next(c for c in pod["containers"] if c["name"] == "broker")
    env = _literal_env(broker)
    pre_stop = broker["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain, grace = int(_settings(BrokerSettings, env).drain_budget_seconds()), int(env["MAKA_GRACE_SECONDS"])
    total = pre_stop + drain + 2 * grace
    sentence = (
        f"{pre_stop} + {drain} + {grace} + {grace} = {total} s fits `terminationGracePeriodSeconds: "
        f"{pod['terminationGracePeriodSeconds']}`"
    )
    text = " ".join(README.read_text().split())

    assert sentence in text
    assert f"`MAKA_DRAIN_SECONDS=auto` ({drain} s)" in text
    assert f"`MAKA_GRACE_SECONDS` ({grace} s)" in text
    assert f"{pre_stop} s `preStop`" in text
    assert total == _shutdown_seconds("services.broker.main", env) + pre_stop
    # A node drain waits for the Host's drain: the PDB lets one Host go at a time, its termination grace bounds it.
    assert "a node drain waits for the Host's drain" in text


def test_rollouts_surge_before_they_remove_and_hosts_roll_one_at_a_time() -> None:
    for name in ("interaction", "team-a-web", "team-b-web"):
        strategy = _one(EXAMPLE, "Deployment", name)["spec"]["strategy"]
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}, name
    for host in _hosts(EXAMPLE):
        team = host["metadata"]["labels"]["maka.dev/team"]
        assert host["spec"]["updateStrategy"]["type"] == "RollingUpdate"
        assert "partition" not in host["spec"]["updateStrategy"].get("rollingUpdate", {})
        # The budgets bound evictions (node drains), not rollouts: the README says which is which.
        assert _one(EXAMPLE, "PodDisruptionBudget", host["metadata"]["name"])["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "maka-host", "maka.dev/team": team}},
        }
    for name in ("interaction", "team-a-web", "team-b-web"):
        assert _one(EXAMPLE, "PodDisruptionBudget", name)["spec"]["minAvailable"] == 1, name


def test_k8s_services_name_grpc_ports_with_h2c_app_protocol() -> None:
    services = [d for d in _k8s_documents() if d["kind"] == "Service"]
    grpc_ports = [port for s in services for port in s["spec"]["ports"] if port["name"] == "grpc"]

    assert {s["metadata"]["name"] for s in services} == {
        "interaction",
        "redis",
        "team-a-host",
        "team-a-hosts",
        "team-a-host-0",
        "team-a-host-1",
        "team-a-web",
        "team-b-host",
        "team-b-hosts",
        "team-b-host-0",
        "team-b-web",
    }
    assert len(grpc_ports) == 8
    assert all(port["appProtocol"] == "kubernetes.io/h2c" for port in grpc_ports)


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda p: p.name)
def test_k8s_containers_use_only_environment_names_their_settings_read(directory: Path) -> None:
    for workload, _pod, container in _containers(directory):
        module = _module(container)
        if not module:
            continue
        unknown = set(_env(container)) - SETTINGS_BY_MODULE[module]
        assert not unknown, (workload["metadata"]["name"], container["name"], unknown)


@pytest.mark.parametrize("directory", TEAMS, ids=lambda p: p.name)
def test_a_host_is_one_statefulset_pod_with_its_broker_and_provider_on_localhost(directory: Path) -> None:
    (host,) = _hosts(directory)
    name = host["metadata"]["name"]
    service = _one(directory, "Service", name)
    containers = {c["name"]: c for c in host["spec"]["template"]["spec"]["containers"]}

    assert name == f"{directory.name}-host", "the Host ids come from the team"
    assert service["spec"]["clusterIP"] == "None"
    assert host["spec"]["serviceName"] == name
    assert {_module(c) for c in containers.values()} == {
        "services.broker.main",
        "services.mcp_provider.main",
        "surfaces.mcp.main",
    }
    broker_env, provider_env = _env(containers["broker"]), _env(containers["provider"])
    assert broker_env["MAKA_HOST_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert provider_env["MAKA_BROKER_TARGET"]["value"] == "127.0.0.1:50052"
    # The MCP front door calls the team's pool of ready Hosts (new calls while its own Host drains run elsewhere).
    assert _env(containers["mcp"])["MAKA_BROKER_TARGET"]["value"] == f"dns:///{name}s:50052"
    # The provider's port serves only its health (the kubelet probes the pod IP, so it cannot be loopback);
    # neither the Service nor the NetworkPolicy exposes it.
    provider_port = int(provider_env["MAKA_LISTEN"]["value"].rsplit(":", 1)[1])
    assert provider_port not in {p["port"] for p in service["spec"]["ports"]}
    policy = _one(directory, "NetworkPolicy", name)
    assert provider_port not in {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    # Both get SIGTERM together: the provider keeps the MCP connections for as long as the broker drains.
    assert (
        float(provider_env["MAKA_DRAIN_SECONDS"]["value"])
        == _settings(BrokerSettings, _literal_env(containers["broker"])).drain_budget_seconds()
    )
    assert broker_env["MAKA_DRAIN_SECONDS"]["value"] == "auto"
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")
    for env in (broker_env, _env(web)):
        assert env["MAKA_INTERACTION_TARGET"]["value"] == "dns:///interaction:50051", "round_robin, in-namespace"


@pytest.mark.parametrize("directory", TEAMS, ids=lambda p: p.name)
def test_a_teams_pool_lists_its_ready_hosts_and_each_host_keeps_its_own_name_while_it_drains(directory: Path) -> None:
    (host,) = _hosts(directory)
    name = host["metadata"]["name"]
    selector = host["spec"]["selector"]["matchLabels"]
    pool, per_host = _one(directory, "Service", f"{name}s"), _one(directory, "Service", name)
    grpc_port = [{"name": "grpc", "port": 50052, "targetPort": "grpc", "appProtocol": "kubernetes.io/h2c"}]
    for service in (pool, per_host):
        assert service["spec"]["clusterIP"] == "None", "headless: callers balance over the Hosts themselves"
        assert service["spec"]["selector"] == selector
        assert service["spec"]["ports"] == grpc_port
    # New calls: only Hosts that take them. Reattach: every Host by name, a draining one included.
    assert pool["spec"]["publishNotReadyAddresses"] is False
    assert per_host["spec"]["publishNotReadyAddresses"] is True
    assert host["spec"]["serviceName"] == name
    broker = next(c for c in host["spec"]["template"]["spec"]["containers"] if c["name"] == "broker")
    assert broker["readinessProbe"]["grpc"]["service"] == BROKER_SERVICE_NAME == BROKER_NEW_CALLS_SERVICE
    assert "service" not in broker["livenessProbe"]["grpc"], "liveness stays on the overall status"
    # The broker advertises its per-Host name (a dependent variable: MAKA_HOST_ID must come first).
    names = [env["name"] for env in broker["env"]]
    advertise = _env(broker)["MAKA_ADVERTISE_ADDRESS"]["value"]
    assert advertise == f"$(MAKA_HOST_ID).{name}:50052"
    assert names.index("MAKA_HOST_ID") < names.index("MAKA_ADVERTISE_ADDRESS")
    assert _one(directory, "PodDisruptionBudget", name)["spec"]["maxUnavailable"] == 1


def test_the_provider_has_a_writable_home_on_an_emptydir_for_npx_and_uvx_servers() -> None:
    for host in _hosts(EXAMPLE):
        pod = host["spec"]["template"]["spec"]
        provider = next(c for c in pod["containers"] if c["name"] == "provider")
        mount = _mount_of(provider, "/home/maka")
        assert mount["mountPath"] == "/home/maka"
        assert not mount.get("readOnly", False)
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert "emptyDir" in volume
    assert "HOME=/home/maka" in (ROOT / "Dockerfile").read_text()


# --- Namespace- and domain-relative names ------------------------------------------------------


def _install_into(tmp_path: Path, namespace: str) -> list[dict[str, Any]]:
    overlay = tmp_path / "elsewhere"
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": [os.path.relpath(d, overlay) for d in (BASE, *TEAMS)],
        "components": [os.path.relpath(MONITORING, overlay)],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return list(_render(overlay))


def test_the_base_and_two_teams_rendered_into_another_namespace_name_no_maka_namespace(tmp_path: Path) -> None:
    documents = _install_into(tmp_path, "agents-prod")
    text = yaml.safe_dump_all(documents)

    assert {d["metadata"].get("namespace") for d in documents if d["kind"] != "Namespace"} == {"agents-prod"}
    assert [d["metadata"]["name"] for d in documents if d["kind"] == "Namespace"] == ["agents-prod"]
    assert not re.search(r"\.maka(?!\.example\.com)\b", text), "no address names the namespace maka"
    assert "cluster.local" not in text, "no address names a cluster domain"
    for document in documents:
        if document["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)


@pytest.mark.parametrize("directory", [BASE, *INSTALLATIONS], ids=lambda p: p.name)
def test_every_address_a_service_dials_is_a_short_in_namespace_name(directory: Path) -> None:
    services = {d["metadata"]["name"] for d in _k8s_documents(directory) if d["kind"] == "Service"}
    for workload, _pod, container in _containers(directory):
        env = _literal_env(container)
        for name in ("MAKA_INTERACTION_TARGET", "MAKA_BROKER_TARGET", "MAKA_REDIS_URL"):
            if name not in env or env[name].startswith("127.0.0.1:"):
                continue
            hosts = [re.sub(r"^(dns:///|redis://)", "", t).split(":")[0] for t in env[name].split(",")]
            for host in hosts:
                parts = host.split(".")
                assert len(parts) <= 2, (workload["metadata"]["name"], name, host)
                assert parts[-1] in services, (workload["metadata"]["name"], name, host, "a Service of this rendering")


# --- Teams: each its own Hosts, Secrets and tokens ---------------------------------------------


def test_two_teams_render_with_separate_hosts_secrets_and_policies() -> None:
    by_team: dict[str, dict[str, set[str]]] = {}
    for team in TEAMS:
        secrets = {r.secret for r in _secret_references(team)}
        workloads = {d["metadata"]["name"] for d in _k8s_documents(team) if d["kind"] in WORKLOADS}
        by_team[team.name] = {"secrets": secrets, "workloads": workloads, "hosts": set(_host_ids(team))}
        assert secrets
        assert all(s.startswith(f"{team.name}-") for s in secrets), secrets
        for document in _k8s_documents(team):
            assert document["metadata"]["name"].startswith(f"{team.name}-"), document["metadata"]["name"]
            assert document["metadata"]["labels"]["maka.dev/team"] == team.name
            selector = document["spec"].get("selector", {})
            if document["kind"] in (*WORKLOADS, "PodDisruptionBudget"):
                assert selector["matchLabels"]["maka.dev/team"] == team.name
            if document["kind"] == "NetworkPolicy":
                assert document["spec"]["podSelector"]["matchLabels"]["maka.dev/team"] == team.name
                for rule in document["spec"]["ingress"]:
                    for peer in rule["from"]:
                        labels = peer.get("podSelector", {}).get("matchLabels")
                        assert labels is None or labels["maka.dev/team"] == team.name, "only its own pods"
    a, b = by_team["team-a"], by_team["team-b"]
    assert a["hosts"] == {"team-a-host-0", "team-a-host-1"}
    assert b["hosts"] == {"team-b-host-0"}
    for key in ("secrets", "workloads", "hosts"):
        assert not a[key] & b[key], key


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_the_interaction_tier_serves_exactly_every_teams_host_ids_and_each_web_follows_its_teams_pool(
    directory: Path,
) -> None:
    (tier_workload, tier_pod, tier) = next(
        (w, p, c) for w, p, c in _containers(directory) if _module(c) == "services.interaction.main"
    )

    # No list of Host ids or teams: every Host a broker token names, the tokens one file per team.
    assert _env(tier)["MAKA_HOST_IDS"]["value"] == "*"
    assert _env(tier)["MAKA_AUTH_TOKENS_DIR"]["value"] == "/etc/maka/tokens.d"
    assert not any(host in yaml.safe_dump(tier_workload) for host in _host_ids(directory))
    volumes = {v["name"]: v for v in tier_pod["volumes"]}
    for team in TEAMS:
        (mount,) = [m for m in tier["volumeMounts"] if m["mountPath"] == f"/etc/maka/tokens.d/{team.name}"]
        assert mount["readOnly"] is True
        assert volumes[mount["name"]]["secret"] == {
            "secretName": f"{team.name}-tokens",
            "items": [{"key": "tier.json", "path": "tokens.json"}],
        }, "only the team's tier entries reach the tier, never its callers' or providers' tokens"
    webs = [(w, c) for w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main"]
    assert len(webs) == len(TEAMS)
    for workload, web in webs:
        team = workload["metadata"]["labels"]["maka.dev/team"]
        # Every Host its surface token names (the team's Hosts: the token test below), not one pinned Host.
        assert _env(web)["MAKA_HOST_IDS"]["value"] == "*", "a team's web follows the team's whole pool"
        assert "MAKA_HOST_ID" not in _env(web)
        # The web surface reads one of its own Hosts' brokers (status, sign-in prompts, /oauth/callback).
        broker = _env(web)["MAKA_BROKER_TARGET"]["value"]
        host_id, _, rest = broker.partition(".")
        assert host_id in _host_ids(K8S / "overlays" / team), "a team's web reads one of its own Hosts' brokers"
        assert rest == f"{host_id.rsplit('-', 1)[0]}:50052"


def test_no_hpa_target_pins_its_replicas_and_the_tier_rebalances_within_minutes() -> None:
    for directory in RENDERINGS:
        documents = list(_k8s_documents(directory))
        for hpa in (d for d in documents if d["kind"] == "HorizontalPodAutoscaler"):
            target = hpa["spec"]["scaleTargetRef"]
            (workload,) = [
                d for d in documents if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]
            ]
            assert "replicas" not in workload["spec"], (directory.name, target["name"], "the HPA owns it")
    hpa = _one(EXAMPLE, "HorizontalPodAutoscaler", "interaction")
    assert hpa["spec"]["minReplicas"] >= 2
    assert _one(EXAMPLE, "Service", "interaction")["spec"]["clusterIP"] == "None"
    tier = next(c for _w, _p, c in _containers() if _module(c) == "services.interaction.main")
    settings = _settings(InteractionSettings, _literal_env(tier))
    assert 0 < settings.max_connection_age_seconds + settings.max_connection_age_grace_seconds <= 300


# --- Redis -------------------------------------------------------------------------------------


def _redis(directory: Path = EXAMPLE) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    statefulset = _one(directory, "StatefulSet", "redis")
    pod = statefulset["spec"]["template"]["spec"]
    return statefulset, {c["name"]: c for c in pod["containers"] + pod["initContainers"]}


def _bytes(quantity: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * units[unit]


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_k8s_redis_reads_its_password_from_a_file_caps_memory_without_eviction_and_keeps_an_aof_on_a_pvc(
    directory: Path,
) -> None:
    statefulset, containers = _redis(directory)
    redis, auth = containers["redis"], containers["auth"]
    args = redis["args"]
    text = json.dumps(statefulset)

    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert re.fullmatch(r"redis:7\.4-alpine@sha256:[0-9a-f]{64}", redis["image"])
    assert redis["command"] == ["redis-server"]
    assert args[0] == "/run/redis/auth.conf"
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    # No password on a command line or in an environment variable: the init container writes it into files.
    assert "requirepass" not in " ".join(args)
    assert "REDIS_PASSWORD" not in text
    assert "printf 'requirepass %s\\nmasterauth %s\\n'" in auth["args"][0]
    for container in containers.values():
        assert not any("valueFrom" in e for e in container.get("env", [])), container["name"]
    (run,) = [v for v in statefulset["spec"]["template"]["spec"]["volumes"] if v["name"] == "run"]
    assert run["emptyDir"]["medium"] == "Memory", "the written password never reaches the node's disk"
    assert {"name": "data", "mountPath": "/data"} in redis["volumeMounts"]


def test_k8s_redis_has_guaranteed_qos_with_room_for_an_aof_rewrite_fork() -> None:
    _statefulset, containers = _redis()
    args = containers["redis"]["args"]
    maxmemory = _bytes(args[args.index("--maxmemory") + 1])

    for container in containers.values():
        resources = container["resources"]
        assert resources["requests"] == resources["limits"], (container["name"], "Guaranteed QoS")
        assert set(resources["limits"]) == {"cpu", "memory"}, container["name"]
    # The fork's copy-on-write pages can reach the data set's size while the parent keeps serving.
    assert _bytes(containers["redis"]["resources"]["limits"]["memory"]) >= 2.5 * maxmemory


def test_k8s_redis_has_an_exporter_reading_a_password_file_and_a_disruption_budget() -> None:
    _statefulset, containers = _redis()
    exporter = containers["exporter"]

    assert re.fullmatch(r"quay\.io/oliver006/redis_exporter:v[0-9.]+@sha256:[0-9a-f]{64}", exporter["image"])
    assert "--redis.password-file=/run/redis/exporter.json" in exporter["args"]
    assert not any("password" in a and "file" not in a for a in exporter["args"])
    assert '{"redis://localhost:6379": "%s"}' in containers["auth"]["args"][0]
    assert {p["name"]: p["containerPort"] for p in exporter["ports"]} == {"metrics": 9121}
    assert _one(EXAMPLE, "PodDisruptionBudget", "redis")["spec"]["minAvailable"] == 1


def _run_redis_init(tmp_path: Path, password: str, *, hostname: str = "", sentinels: str = "") -> tuple[Path, Any]:
    """The rendered Redis init script run for real (``sh``), its Secret and emptyDir paths moved under
    ``tmp_path``: the directory it wrote, and its completed process."""
    _statefulset, containers = _redis(EXAMPLE_HA if sentinels else EXAMPLE)
    secret, run, bin_dir = tmp_path / "secret", tmp_path / "run", tmp_path / "bin"
    for directory in (secret, run, bin_dir):
        directory.mkdir()
    (secret / "password").write_text(password)
    script = containers["auth"]["args"][0].replace("/etc/maka/redis-secret", str(secret))
    script = script.replace("/run/redis", str(run))
    (bin_dir / "hostname").write_text(f"#!/bin/sh\necho {hostname}\n")
    (bin_dir / "hostname").chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SENTINELS": sentinels}
    environ["SENTINEL_SERVICE"] = "mymaster"
    result = subprocess.run(["sh", "-c", script], env=environ, capture_output=True, text=True, timeout=30)
    return run, result


def test_the_redis_init_script_and_args_start_a_real_redis_that_requires_the_secrets_password(
    tmp_path: Path,
) -> None:
    password = "0123456789abcdef" * 4
    run, result = _run_redis_init(tmp_path, password)
    assert result.returncode == 0, result.stderr
    assert json.loads((run / "exporter.json").read_text()) == {"redis://localhost:6379": password}
    for written in ("auth.conf", "exporter.json"):
        assert (run / written).stat().st_mode & 0o077 == 0, written
    _statefulset, containers = _redis()
    args = [str(tmp_path / "data") if a == "/data" else a for a in containers["redis"]["args"]]
    args = [str(run / "auth.conf") if a == "/run/redis/auth.conf" else a for a in args]
    (tmp_path / "data").mkdir()
    sock = tmp_path / "redis.sock"
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: run `make setup`"
    process = subprocess.Popen(
        [binary, *args, "--port", "0", "--unixsocket", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert process.poll() is None, "redis-server refused the manifest's configuration"
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.01)
        with redis.Redis(unix_socket_path=str(sock)) as anonymous, pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.ping()
        with redis.Redis(unix_socket_path=str(sock), password=password, decode_responses=True) as client:
            assert client.ping() is True
            assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
            assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert password not in Path(f"/proc/{process.pid}/cmdline").read_text(), "never on the command line"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_redis_init_script_refuses_a_password_it_cannot_write_safely(tmp_path: Path) -> None:
    run, result = _run_redis_init(tmp_path, 'with "quotes" and spaces')

    assert result.returncode == 1
    assert "maka-redis" in result.stderr
    assert not list(run.iterdir()), "nothing written"


def test_under_sentinel_a_restarted_redis_replicates_from_redis_0_when_no_sentinel_answers(tmp_path: Path) -> None:
    (tmp_path / "replica").mkdir()
    (tmp_path / "first").mkdir()
    replica, replica_result = _run_redis_init(
        tmp_path / "replica", "a" * 64, hostname="redis-2", sentinels="127.0.0.1:1"
    )
    first, first_result = _run_redis_init(tmp_path / "first", "a" * 64, hostname="redis-0", sentinels="127.0.0.1:1")

    assert replica_result.returncode == 0, replica_result.stderr
    assert first_result.returncode == 0, first_result.stderr
    replica_conf = (replica / "auth.conf").read_text().splitlines()
    assert "replica-announce-ip redis-2.redis" in replica_conf
    assert "replicaof redis-0.redis 6379" in replica_conf
    assert not [line for line in (first / "auth.conf").read_text().splitlines() if line.startswith("replicaof")]


def test_the_ha_overlay_runs_redis_replicas_under_three_sentinels_and_the_tier_in_sentinel_mode() -> None:
    statefulset, containers = _redis(EXAMPLE_HA)
    sentinels = _one(EXAMPLE_HA, "StatefulSet", "redis-sentinel")
    tier = next(c for _w, _p, c in _containers(EXAMPLE_HA) if _module(c) == "services.interaction.main")
    settings = _settings(InteractionSettings, _literal_env(tier))
    auth_env = _literal_env(containers["auth"])

    assert statefulset["spec"]["replicas"] == 3
    assert sentinels["spec"]["replicas"] == 3
    assert settings.redis_mode.value == "sentinel"
    assert settings.wait_replicas == 1, "an acknowledged answer reached a replica"
    expected = [f"redis-sentinel-{i}.redis-sentinel:26379" for i in range(3)]
    assert settings.redis_url.split(",") == expected
    assert auth_env["SENTINELS"].split() == expected
    assert auth_env["SENTINEL_SERVICE"] == settings.redis_sentinel_service
    assert f"sentinel monitor {settings.redis_sentinel_service} redis-0.redis 6379 2" in json.dumps(sentinels)
    for name in ("redis", "redis-sentinel"):
        assert _one(EXAMPLE_HA, "PodDisruptionBudget", name)["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        }
    policies = {d["metadata"]["name"]: d["spec"] for d in _k8s_documents(EXAMPLE_HA) if d["kind"] == "NetworkPolicy"}
    tier_out = {p["port"] for rule in policies["interaction"]["egress"] for p in rule["ports"]}
    assert tier_out == {6379, 26379}


# --- Network policies ----------------------------------------------------------------------------


def test_only_the_interaction_tier_reaches_redis_and_only_hosts_and_surfaces_reach_the_tier() -> None:
    policies = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "NetworkPolicy"}

    assert policies["default-deny"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    redis_rule, monitoring_rule = policies["redis"]["spec"]["ingress"]
    assert redis_rule["from"] == [{"podSelector": {"matchLabels": {"maka.dev/role": "interaction"}}}]
    assert monitoring_rule["ports"] == [{"port": 9121, "protocol": "TCP"}]
    tier_sources = policies["interaction"]["spec"]["ingress"][0]["from"]
    assert {s["podSelector"]["matchLabels"]["maka.dev/role"] for s in tier_sources} == {"host", "surface"}
    roles = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"].get("maka.dev/role")
        for w, _p, _c in _containers()
    }
    assert roles == {
        "interaction": "interaction",
        "redis": "redis",
        "team-a-host": "host",
        "team-b-host": "host",
        "team-a-web": "surface",
        "team-b-web": "surface",
    }


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_egress_is_denied_by_default_and_only_host_pods_leave_the_cluster_on_https(directory: Path) -> None:
    policies = [d for d in _k8s_documents(directory) if d["kind"] == "NetworkPolicy"]
    (deny,) = [p for p in policies if p["metadata"]["name"] == "default-deny"]
    assert deny["spec"]["podSelector"] == {}
    assert "Egress" in deny["spec"]["policyTypes"]
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            assert rule.get("to"), (policy["metadata"]["name"], "no open-ended egress")
            assert rule.get("ports"), (policy["metadata"]["name"], "no open-ended egress")
            if any("ipBlock" in peer for peer in rule["to"]):
                assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "maka-host"
                assert rule["ports"] == [{"port": 443, "protocol": "TCP"}]
    # Every workload can resolve names (the kube-dns rule selects every pod).
    (dns,) = [p for p in policies if p["metadata"]["name"] == "egress-dns"]
    assert dns["spec"]["podSelector"] == {}
    assert {(p["port"], p["protocol"]) for p in dns["spec"]["egress"][0]["ports"]} == {(53, "UDP"), (53, "TCP")}


def test_the_web_trusts_forwarded_headers_from_private_addresses_only() -> None:
    for _workload, _pod, web in (x for x in _containers() if _module(x[2]) == "surfaces.web.main"):
        allowed = _env(web)["MAKA_WEB_FORWARDED_ALLOW_IPS"]["value"]
        assert "*" not in allowed
        assert set(allowed.split(",")) <= {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}


# --- Secrets -------------------------------------------------------------------------------------


def test_mcp_servers_tokens_and_the_web_secret_come_from_secrets_that_no_manifest_carries() -> None:
    for rendering, document in _every_rendering():
        assert document["kind"] != "Secret", (rendering, document["metadata"]["name"])
        if document["kind"] == "ConfigMap":  # only the Grafana dashboard, which is not secret
            assert document["metadata"]["name"] == "maka-dashboard", rendering
    references = _secret_references(EXAMPLE)
    required: set[tuple[str, str | None]] = {
        ("maka-tokens", "tokens.json"),
        ("maka-redis", "password"),
        ("maka-answer-key", "answer.key"),
    }
    for team in ("team-a", "team-b"):
        required |= {
            (f"{team}-mcp-servers", None),
            (f"{team}-tokens", "tokens.json"),
            (f"{team}-tokens", "broker-token"),
            (f"{team}-tokens", "provider-token"),
            (f"{team}-tokens", "surface-token"),
            (f"{team}-web", "secret"),
        }
    assert {(r.secret, r.key) for r in references if not r.optional} >= required
    assert {r.secret for r in references if r.optional} == {
        "team-a-mcp-env",
        "team-a-oauth-key",
        "team-b-mcp-env",
        "team-b-oauth-key",
    }
    for _w, _p, web in (x for x in _containers() if _module(x[2]) == "surfaces.web.main"):
        assert _env(web)["MAKA_WEB_SECRET_FILE"]["value"] == "/etc/maka/web/secret"
        assert _env(web)["MAKA_WEB_PUBLIC_ORIGIN"]["value"].startswith("https://")


def _mebibytes(quantity: str) -> float:
    return _bytes(quantity) / 2**20


def test_memory_requests_leave_headroom_over_the_peaks_make_scale_measured() -> None:
    """Requests and limits are sized from ``bench/results/scale.json`` (peak RSS per role)."""
    resources = json.loads((ROOT / "bench" / "results" / "scale.json").read_text())["resources"]
    role_of = {
        "services.broker.main": "broker",
        "services.mcp_provider.main": "provider",
        "services.interaction.main": "interaction",
        "surfaces.web.main": "web",
    }
    checked = set()
    for workload, _pod, container in _containers():
        is_redis = workload["metadata"]["name"] == "redis" and container["name"] == "redis"
        role = role_of.get(_module(container)) or ("redis" if is_redis else "")
        if not role:
            continue
        peak = resources[role]["peak_rss_mib"]
        name = (workload["metadata"]["name"], container["name"])
        assert _mebibytes(container["resources"]["requests"]["memory"]) >= 1.5 * peak, (name, peak)
        assert _mebibytes(container["resources"]["limits"]["memory"]) >= 3 * peak, (name, peak)
        checked.add(role)
    assert checked == {"broker", "provider", "interaction", "web", "redis"}


# --- deploy/README.md: from an empty cluster, and the Secrets the manifests reference -----------


@dataclass(frozen=True)
class SecretRef:
    """One place a rendered workload reads a Secret: ``key`` None = the whole Secret (every key)."""

    secret: str
    key: str | None
    optional: bool
    where: str


def _secret_references(directory: Path) -> set[SecretRef]:
    found: set[SecretRef] = set()
    for document in _k8s_documents(directory):
        name = f"{document['kind']}/{document['metadata']['name']}"
        if document["kind"] == "Ingress":
            for tls in document["spec"].get("tls", []):
                found.add(SecretRef(tls["secretName"], None, False, f"{name} tls"))
        if document["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = document["spec"]["template"]["spec"]
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                source = volume["secret"]
                optional = bool(source.get("optional", False))
                for key in [item["key"] for item in source.get("items", [])] or [None]:
                    found.add(SecretRef(source["secretName"], key, optional, f"{name} volume {volume['name']}"))
        for container in pod["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    found.add(SecretRef(ref["name"], ref["key"], bool(ref.get("optional", False)), f"{name} env"))
            for source in container.get("envFrom", []):
                ref = source.get("secretRef")
                if ref:
                    found.add(SecretRef(ref["name"], None, bool(ref.get("optional", False)), f"{name} envFrom"))
    return found


def _readme_block(containing: str, language: str = "sh") -> str:
    """The first fenced ``language`` block of deploy/README.md whose text contains ``containing``."""
    blocks = re.findall(rf"^ *```{language}\n(.*?)^ *```$", README.read_text(), flags=re.MULTILINE | re.DOTALL)
    (block, *_rest) = [b for b in blocks if containing in b]
    return textwrap.dedent(block)  # a block inside a list item is indented; what is copied is not


@pytest.fixture(scope="module")
def readme_secrets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Run the README's Secret commands from a checkout-like directory with ``kubectl create`` in
    ``--dry-run=client -o yaml`` mode; every Secret they would create, strictly validated: name → data."""
    work = tmp_path_factory.mktemp("readme-secrets")
    (work / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "mcp.json", work / "examples" / "mcp.json")
    for team in TEAMS:  # each team's own API keys
        (work / f"{team.name}.mcp.env").write_text(f"GITHUB_TOKEN=canary-{team.name}\n")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    out = work / "created.yaml"
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: run `make setup-node`"
    wrapper = bin_dir / "kubectl"
    wrapper.write_text(f'#!/bin/sh\necho --- >> "{out}"\nexec "{kubectl}" "$@" --dry-run=client -o yaml >> "{out}"\n')
    wrapper.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    script = _readme_block("create secret generic maka-tokens")
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=work,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    created: dict[str, dict[str, str]] = {}
    for document in (d for d in yaml.safe_load_all(out.read_text()) if d):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
        assert (document["kind"], document["metadata"]["namespace"]) == ("Secret", "maka"), document
        data = {key: base64.b64decode(value).decode() for key, value in document.get("data", {}).items()}
        created[document["metadata"]["name"]] = data
    return created


@pytest.fixture(scope="module")
def readme_tokens(
    readme_secrets: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, TokenTable]:
    """Every ``tokens.json`` the README creates (the tier's ``maka-tokens``, each team's), loaded by the
    services' own loader (``MAKA_AUTH_TOKENS_FILE``): Secret name → table."""
    directory = tmp_path_factory.mktemp("readme-tokens")
    tables = {}
    for name, data in readme_secrets.items():
        if "tokens.json" in data:
            path = directory / f"{name}.json"
            path.write_text(data["tokens.json"])
            tables[name] = TokenTable.from_file(path)
    return tables


KEYS_FOR_CALLERS = {("team-a-tokens", "caller-token"), ("team-b-tokens", "caller-token")}
"""Keys the README creates that no manifest reads: each team's callers' token (``MAKA_CALLER_TOKEN``)."""


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_the_readme_creates_every_secret_and_key_the_rendered_manifests_read_and_nothing_else(
    directory: Path, readme_secrets: dict[str, dict[str, str]]
) -> None:
    references = {r for r in _secret_references(directory) if not r.secret.endswith("-web-tls")}  # step 4

    missing = [
        r for r in references if r.secret not in readme_secrets or (r.key and r.key not in readme_secrets[r.secret])
    ]
    assert not missing, missing
    read = {(r.secret, r.key) for r in references}
    whole = {r.secret for r in references if r.key is None}
    extra = {
        (name, key)
        for name, data in readme_secrets.items()
        for key in data
        if name not in whole and (name, key) not in read | KEYS_FOR_CALLERS
    }
    assert not extra, extra
    assert {r.secret for r in references if r.optional} <= set(readme_secrets), "optional ones are shown too"


def test_the_readmes_secret_values_are_what_the_services_accept(
    readme_secrets: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    for team in TEAMS:
        key_file = tmp_path / "oauth.key"
        key_file.write_text(readme_secrets[f"{team.name}-oauth-key"]["oauth.key"])
        assert len(read_key_file(key_file)) == 32
        secret_file = tmp_path / "web-secret"
        secret_file.write_text(readme_secrets[f"{team.name}-web"]["secret"])
        assert WebSettings(web_secret_file=secret_file).shared_secret()
        servers = tmp_path / "mcp.json"
        servers.write_text(readme_secrets[f"{team.name}-mcp-servers"]["mcp.json"])
        assert [server.name for server in check_config(servers).servers] == ["examples"]
        assert readme_secrets[f"{team.name}-mcp-env"] == {"GITHUB_TOKEN": f"canary-{team.name}"}, "its own keys"
        for name, value in readme_secrets[f"{team.name}-tokens"].items():
            if name.endswith("-token"):
                assert value == value.strip(), f"{name}: a newline would end up in the bearer header"
    answer_key = tmp_path / "answer.key"
    answer_key.write_text(readme_secrets["maka-answer-key"]["answer.key"])
    assert len(read_key_file(answer_key)) == 32
    password = readme_secrets["maka-redis"]["password"]
    assert len(password) >= 32
    assert re.fullmatch(r"[A-Za-z0-9._~+/=-]+", password), "what Redis's init container accepts"


def test_the_readmes_secret_loop_creates_each_teams_host_count() -> None:
    loop = re.search(r"for spec in ([^;]+);", _readme_block("create secret generic maka-tokens"))
    assert loop is not None
    counts = dict(spec.split(":") for spec in loop.group(1).split())

    assert {team: int(n) for team, n in counts.items()} == {t.name: len(_host_ids(t)) for t in TEAMS}


@pytest.fixture(scope="module")
def readme_tier_settings(
    readme_secrets: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> InteractionSettings:
    """The tier's settings as a pod of the example installation gets them, its token files laid out as its
    volumes mount the README's Secrets: ``maka-tokens`` at the file, each team's ``tier.json`` in the directory."""
    directory = tmp_path_factory.mktemp("readme-tier")
    tier = next(c for _w, _p, c in _containers(EXAMPLE) if _module(c) == "services.interaction.main")
    env = _literal_env(tier)
    (directory / "tokens.json").write_text(readme_secrets["maka-tokens"]["tokens.json"])
    for mount in tier["volumeMounts"]:
        if mount["mountPath"].startswith(env["MAKA_AUTH_TOKENS_DIR"] + "/"):
            unit = directory / "tokens.d" / Path(mount["mountPath"]).name
            unit.mkdir(parents=True)
            (unit / "tokens.json").write_text(readme_secrets[mount["name"]]["tier.json"])
    return InteractionSettings(
        host_ids=env["MAKA_HOST_IDS"],
        auth_tokens_file=directory / "tokens.json",
        auth_tokens_dir=directory / "tokens.d",
    )


@pytest.fixture(scope="module")
def readme_tier_tokens(readme_tier_settings: InteractionSettings) -> TokenTable:
    """The table the tier's own loader builds from the README's Secrets as the example installation mounts them."""
    return TokenTable.from_files(readme_tier_settings.auth_tokens_file, readme_tier_settings.auth_tokens_dir)


def test_the_front_doors_surface_token_may_act_for_people_at_the_tier(
    readme_secrets: dict[str, dict[str, str]], readme_tier_tokens: TokenTable
) -> None:
    # the MCP front door answers its clients' forms naming their principal (x-maka-acts-for)
    doors = [c for _w, _p, c in _containers(EXAMPLE) if _module(c) == "surfaces.mcp.main"]
    assert doors
    for door in doors:
        ref = _env(door)["MAKA_SURFACE_TOKEN"]["valueFrom"]["secretKeyRef"]
        principal = readme_tier_tokens.lookup(readme_secrets[ref["name"]][ref["key"]])
        assert principal is not None, ref
        assert principal.acts_for, ref


def test_the_webs_surface_token_may_act_for_people_at_its_brokers(
    readme_secrets: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    # the web asks the broker's status as the signed-in person (x-maka-acts-for): the team's tokens.json allows it
    webs = [c for _w, _p, c in _containers(EXAMPLE) if _module(c) == "surfaces.web.main"]
    assert webs
    for web in webs:
        ref = _env(web)["MAKA_SURFACE_TOKEN"]["valueFrom"]["secretKeyRef"]
        brokers_file = tmp_path / f"{ref['name']}.json"
        brokers_file.write_text(readme_secrets[ref["name"]]["tokens.json"])
        principal = TokenTable.from_files(brokers_file, None).lookup(readme_secrets[ref["name"]][ref["key"]])
        assert principal is not None, ref
        assert principal.acts_for, ref


def test_the_tier_serves_exactly_every_teams_hosts_from_the_readmes_tokens(
    readme_tier_settings: InteractionSettings,
) -> None:
    assert sorted(served_hosts(readme_tier_settings)) == sorted(_host_ids(EXAMPLE))


def test_each_teams_tokens_serve_only_its_hosts_and_its_callers_only_its_brokers(
    readme_secrets: dict[str, dict[str, str]], readme_tokens: dict[str, TokenTable], readme_tier_tokens: TokenTable
) -> None:
    tier = readme_tier_tokens
    seen: set[str] = set()
    for team in TEAMS:
        hosts = set(_host_ids(team))
        tokens = readme_secrets[f"{team.name}-tokens"]
        own = readme_tokens[f"{team.name}-tokens"]
        other = readme_tokens[f"{next(t for t in TEAMS if t != team).name}-tokens"]

        broker = tier.lookup(tokens["broker-token"])
        assert broker is not None
        assert broker.roles == {Role.BROKER}
        assert broker.hosts == hosts, "a team's brokers act for its Hosts only"
        assert own.lookup(tokens["broker-token"]) is None
        for table in (tier, own):
            surface = table.lookup(tokens["surface-token"])
            assert surface is not None
            assert surface.roles == {Role.SURFACE}
            assert surface.hosts == hosts, "a team's web reads its Hosts only"
        provider, caller = own.lookup(tokens["provider-token"]), own.lookup(tokens["caller-token"])
        assert provider is not None
        assert provider.roles == {Role.PROVIDER}
        assert caller is not None
        assert caller.roles == {Role.CALLER}
        assert tier.lookup(tokens["caller-token"]) is None
        assert other.lookup(tokens["caller-token"]) is None, "another team's brokers refuse its callers"
        assert other.lookup(tokens["provider-token"]) is None
        assert len(set(tokens.values())) == len(tokens), "every role its own token"
        assert not seen & set(tokens.values())
        seen |= set(tokens.values())


def test_the_readme_creates_the_namespace_before_its_secrets() -> None:
    text = README.read_text()
    command = "kubectl apply -f deploy/k8s/base/namespace.yaml"
    assert command in _readme_block(command)
    (document,) = list(yaml.safe_load_all((BASE / "namespace.yaml").read_text()))

    assert document["kind"] == "Namespace"
    assert document["metadata"]["name"] == "maka"
    assert text.index(command) < text.index("create secret generic maka-tokens")
    for directory in INSTALLATIONS:
        assert {d["metadata"].get("namespace", "maka") for d in _k8s_documents(directory)} == {"maka"}


# --- OAuth: the provider's token key and token store -------------------------------------------


def _provider(directory: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return next((w, p, c) for w, p, c in _containers(directory) if _module(c) == "services.mcp_provider.main")


def _mount_of(container: dict[str, Any], path: str) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [m for m in container["volumeMounts"] if Path(path).is_relative_to(m["mountPath"])]
    (mount,) = mounts
    return mount


@pytest.mark.parametrize("directory", [*TEAMS, *INSTALLATIONS], ids=lambda p: p.name)
def test_the_provider_reads_its_oauth_key_from_an_optional_secret_mounted_read_only_at_the_setting(
    directory: Path,
) -> None:
    workload, pod, provider = _provider(directory)
    team = workload["metadata"]["labels"]["maka.dev/team"]
    settings = _settings(ProviderSettings, _literal_env(provider))
    assert settings.oauth_key_file is not None

    mount = _mount_of(provider, str(settings.oauth_key_file))
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    source = volume["secret"]
    assert source["secretName"] == f"{team}-oauth-key", "the team's own key"
    assert source["optional"] is True, "a cluster without the Secret still starts"
    assert settings.oauth_key_optional is True, "...and the provider then keeps tokens in memory"
    relative = settings.oauth_key_file.relative_to(mount["mountPath"]).as_posix()
    assert [(item["key"], item["path"]) for item in source["items"]] == [("oauth.key", relative)]
    assert source["defaultMode"] & 0o007 == 0, "no other user reads the key"


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_the_tier_reads_its_answer_key_from_a_required_secret_mounted_read_only_at_the_setting(
    directory: Path,
) -> None:
    _workload, pod, tier = next(
        (w, p, c) for w, p, c in _containers(directory) if _module(c) == "services.interaction.main"
    )
    settings = _settings(InteractionSettings, _literal_env(tier))
    assert settings.answer_key_file is not None, "answer values are sealed in Redis (docs/security.md)"

    mount = _mount_of(tier, str(settings.answer_key_file))
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    source = volume["secret"]
    assert source["secretName"] == "maka-answer-key"
    assert not source.get("optional", False), "no replica starts without the shared key"
    relative = settings.answer_key_file.relative_to(mount["mountPath"]).as_posix()
    assert [(item["key"], item["path"]) for item in source["items"]] == [("answer.key", relative)]
    assert source["defaultMode"] & 0o007 == 0, "no other user reads the key"
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"], "the service's group reads it"


@pytest.mark.parametrize("directory", [*TEAMS, *INSTALLATIONS], ids=lambda p: p.name)
def test_the_provider_keeps_its_tokens_on_the_hosts_own_volume_claim_bound_to_its_host_id(directory: Path) -> None:
    workload, pod, provider = _provider(directory)
    broker = next(c for c in pod["containers"] if _module(c) == "services.broker.main")
    settings = _settings(ProviderSettings, _literal_env(provider))
    assert settings.oauth_token_dir is not None

    mount = _mount_of(provider, str(settings.oauth_token_dir))
    assert not mount.get("readOnly", False)
    assert mount["name"] in {t["metadata"]["name"] for t in workload["spec"]["volumeClaimTemplates"]}
    assert mount["name"] not in {v["name"] for v in pod["volumes"]}, "a claim per Host, not a shared volume"
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"], "the non-root provider writes it"
    assert workload["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    # Token files are bound to the Host id: the provider's is the broker's, the pod name.
    assert _env(provider)["MAKA_HOST_ID"]["valueFrom"] == _env(broker)["MAKA_HOST_ID"]["valueFrom"]


# --- The edge: Ingress and Gateway API routes ----------------------------------------------------


@pytest.mark.parametrize("directory", TEAMS, ids=lambda p: p.name)
def test_the_ingress_the_route_the_web_origin_and_the_oauth_redirect_name_one_public_host(directory: Path) -> None:
    team = directory.name
    ingress = _one(directory, "Ingress", f"{team}-web")
    route = _one(directory, "HTTPRoute", f"{team}-web")
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")
    _workload, _pod, provider = _provider(directory)
    origin = _env(web)["MAKA_WEB_PUBLIC_ORIGIN"]["value"]

    (rule,) = ingress["spec"]["rules"]
    assert origin == f"https://{rule['host']}"
    assert rule["http"]["paths"][0]["backend"]["service"]["name"] == f"{team}-web"
    assert ingress["spec"]["tls"] == [{"hosts": [rule["host"]], "secretName": f"{team}-web-tls"}]
    assert route["spec"]["hostnames"] == [rule["host"]]
    assert _env(provider)["MAKA_OAUTH_REDIRECT_URI"]["value"] == f"{origin}/oauth/callback"
    others = [
        _env(c)["MAKA_WEB_PUBLIC_ORIGIN"]["value"]
        for t in TEAMS
        if t != directory
        for _w, _p, c in _containers(t)
        if _module(c) == "surfaces.web.main"
    ]
    assert origin not in others, "each team its own public host name"


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_gateway_routes_reach_each_teams_web_and_every_host_through_its_own_service(directory: Path) -> None:
    documents = list(_k8s_documents(directory))
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    webs = {
        d["metadata"]["name"] for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] != "interaction"
    }
    http_routes = [d for d in documents if d["kind"] == "HTTPRoute"]
    grpc_routes = [d for d in documents if d["kind"] == "GRPCRoute"]
    web_routes = [r for r in http_routes if not r["metadata"]["name"].endswith("-mcp")]

    assert {r["spec"]["rules"][0]["backendRefs"][0]["name"] for r in web_routes} == webs
    routed_hosts = set()
    for route in grpc_routes:
        ((ref,),) = [rule["backendRefs"] for rule in route["spec"]["rules"]]
        service = services[ref["name"]]
        assert ref["port"] in {p["port"] for p in service["spec"]["ports"]}
        pod_name = service["spec"]["selector"]["statefulset.kubernetes.io/pod-name"]
        assert route["spec"]["hostnames"] == [f"{pod_name}.grpc.maka.example.com"], "one host name per Host"
        routed_hosts.add(pod_name)
    assert routed_hosts == set(_host_ids(directory)), "every Host reachable, each through its own Service"
    for route in http_routes + grpc_routes:
        for ref in route["spec"]["rules"][0]["backendRefs"]:
            assert ref["port"] in {p["port"] for p in services[ref["name"]]["spec"]["ports"]}
        assert all("namespace" not in parent for parent in route["spec"]["parentRefs"])


def _expand(value: str, pod_name: str) -> str:
    """A dependent environment value as the kubelet expands it in pod ``pod_name`` (``$(MAKA_HOST_ID)``)."""
    return value.replace("$(MAKA_HOST_ID)", pod_name)


@pytest.mark.parametrize("directory", [*TEAMS, *INSTALLATIONS], ids=lambda p: p.name)
def test_each_hosts_mcp_front_door_has_its_own_route_whose_name_its_host_check_admits(directory: Path) -> None:
    documents = list(_k8s_documents(directory))
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    routes = [d for d in documents if d["kind"] == "HTTPRoute" and d["metadata"]["name"].endswith("-mcp")]
    policies = {d["metadata"]["name"]: d for d in documents if d["kind"] == "NetworkPolicy"}
    routed = {}
    for route in routes:
        (rule,) = route["spec"]["rules"]
        (ref,) = rule["backendRefs"]
        service = services[ref["name"]]
        (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
        assert port["targetPort"] == "mcp"
        assert route["spec"]["parentRefs"] == [{"name": "maka", "sectionName": "mcp"}], "TLS at the Gateway"
        assert "timeouts" not in rule, "a call's stream stays open while a person answers"
        (hostname,) = route["spec"]["hostnames"]
        routed[service["spec"]["selector"]["statefulset.kubernetes.io/pod-name"]] = hostname
        # A draining Host is not ready, yet its calls' retries and resumptions must still reach it.
        assert service["spec"]["publishNotReadyAddresses"] is True, service["metadata"]["name"]
    assert set(routed) == set(_host_ids(directory)), "every Host's front door, each on its own name"
    for host in _hosts(directory):
        pod = host["spec"]["template"]["spec"]
        (door,) = [c for c in pod["containers"] if _module(c) == "surfaces.mcp.main"]
        env, names = _env(door), [e["name"] for e in door["env"]]
        assert env["MAKA_HOST_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert names.index("MAKA_HOST_ID") < names.index("MAKA_MCP_ALLOWED_HOSTS")
        assert names.index("MAKA_HOST_ID") < names.index("MAKA_MCP_RESOURCE_URL")
        assert env["MAKA_AUTH_TOKENS_FILE"]["value"] == "/etc/maka/tokens/tokens.json", "bearer tokens required"
        (mcp_port,) = [p["containerPort"] for p in door["ports"] if p["name"] == "mcp"]
        assert env["MAKA_MCP_LISTEN"]["value"] == f"0.0.0.0:{mcp_port}"
        assert door["readinessProbe"]["httpGet"] == {"path": MCP_READY_PATH, "port": "mcp"}, "503 while it drains"
        for index in range(host["spec"].get("replicas", 1)):
            pod_name = f"{host['metadata']['name']}-{index}"
            literal = {k: _expand(v, pod_name) for k, v in _literal_env(door).items()}
            settings = _settings(McpSettings, literal)
            assert settings.mcp_allowed_hosts == [routed[pod_name]], "DNS rebinding protection admits its name"
            assert settings.mcp_resource_url == f"https://{routed[pod_name]}/mcp"
        # Only the edge reaches the front door.
        policy = policies[host["metadata"]["name"]]
        admitting = [rule for rule in policy["spec"]["ingress"] if mcp_port in {p["port"] for p in rule["ports"]}]
        edge = {"namespaceSelector": {"matchLabels": {"maka.dev/edge": "true"}}}
        assert [rule["from"] for rule in admitting] == [[edge]]


DRAIN_INPUTS = sorted(f"MAKA_{name.upper()}" for name in DRAIN_BUDGET_FIELDS)
"""The variables the ``auto`` drain budget derives from (:class:`DrainBudgetSettings`), ``MAKA_DRAIN_SECONDS``
included."""


@pytest.mark.parametrize("directory", [TEAM, *TEAMS, *INSTALLATIONS], ids=lambda p: p.name)
def test_each_hosts_mcp_front_door_drains_with_the_brokers_budget_ready_only_while_it_does_not(
    directory: Path,
) -> None:
    for host in _hosts(directory):
        pod = host["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        door, broker = containers["mcp"], containers["broker"]
        door_env, broker_env = _literal_env(door), _literal_env(broker)

        assert door_env["MAKA_DRAIN_SECONDS"] == "auto", "a planned stop drains until its calls are done"
        for name in DRAIN_INPUTS:
            assert door_env.get(name) == broker_env.get(name), (name, "the same budget from the same variables")
        budget = _settings(McpSettings, door_env).drain_budget_seconds()
        assert budget == _settings(BrokerSettings, broker_env).drain_budget_seconds() > 0
        # Readiness turns 503 at once when it drains; liveness is never the readiness path.
        assert door["readinessProbe"]["httpGet"] == {"path": MCP_READY_PATH, "port": "mcp"}
        assert door["startupProbe"]["httpGet"]["path"] == MCP_HEALTH_PATH
        assert MCP_READY_PATH not in json.dumps(door["livenessProbe"])
        # Every container's preStop + budget + 2 x its grace fits the pod's termination grace.
        for container in pod["containers"]:
            env = _literal_env(container)
            pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
            settings = _settings(SETTINGS_CLASS[_module(container)], env)
            grace = float(getattr(settings, "grace_seconds", 0))
            drain = float(_settings(McpSettings, env).drain_budget_seconds()) if "MAKA_DRAIN_SECONDS" in env else 0
            assert pre_stop + drain + 2 * grace <= pod["terminationGracePeriodSeconds"], container["name"]


@pytest.mark.parametrize("directory", [TEAM, *TEAMS, *INSTALLATIONS], ids=lambda p: p.name)
def test_each_hosts_mcp_front_door_calls_its_teams_pool_of_ready_hosts_which_its_pods_may_reach(
    directory: Path,
) -> None:
    services = {d["metadata"]["name"]: d for d in _k8s_documents(directory) if d["kind"] == "Service"}
    policies = {d["metadata"]["name"]: d for d in _k8s_documents(directory) if d["kind"] == "NetworkPolicy"}
    for host in _hosts(directory):
        name = host["metadata"]["name"]
        door = next(c for c in host["spec"]["template"]["spec"]["containers"] if c["name"] == "mcp")
        target = _env(door)["MAKA_BROKER_TARGET"]["value"]
        match = re.fullmatch(r"dns:///([a-z0-9-]+):50052", target)
        assert match, target
        pool = services[match.group(1)]
        assert pool["spec"]["selector"] == host["spec"]["selector"]["matchLabels"], "this team's Hosts"
        assert pool["spec"]["publishNotReadyAddresses"] is False, "only Hosts that take new calls"
        # Host pods reach each other's brokers (new calls, Stops, reattaches), within the team only.
        policy = policies[name]
        selector = policy["spec"]["podSelector"]
        assert selector == {"matchLabels": host["spec"]["selector"]["matchLabels"]}
        peers = [{"podSelector": selector}]
        grpc_port = [{"port": 50052, "protocol": "TCP"}]
        assert {"from": peers, "ports": grpc_port} in policy["spec"]["ingress"]
        assert {"to": peers, "ports": grpc_port} in policy["spec"]["egress"]


@pytest.mark.parametrize("directory", TEAMS, ids=lambda p: p.name)
def test_each_hosts_mcp_front_door_names_its_teams_web_page_as_where_to_answer(directory: Path) -> None:
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")
    origin = _env(web)["MAKA_WEB_PUBLIC_ORIGIN"]["value"]
    for _workload, _pod, door in _containers(directory):
        if _module(door) == "surfaces.mcp.main":
            assert _env(door)["MAKA_WEB_URL"]["value"] == origin


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda p: p.name)
def test_every_literal_environment_value_is_valid_for_its_setting(directory: Path) -> None:
    for _workload, _pod, container in _containers(directory):
        module = _module(container)
        if not module:
            continue
        env = _literal_env(container)
        _settings(SETTINGS_CLASS[module], env)  # raises on a bad value
        if module in DIALS_GRPC:
            _settings(ClientTlsSettings, env)


BASE64_KEY = re.compile(rb"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{43}=(?![A-Za-z0-9+/=])")
"""A base64-encoded 32-byte value: what an OAuth key file holds."""


def test_no_key_material_or_placeholder_secret_is_in_the_deployment_files() -> None:
    files = [
        ROOT / "docker-compose.yml",
        ROOT / "Dockerfile",
        README,
        *(p for p in (ROOT / "deploy").rglob("*") if p.is_file() and "secrets" not in p.relative_to(ROOT).parts[:3]),
    ]
    for path in files:
        content = path.read_bytes()
        assert not BASE64_KEY.search(content), path
        assert b"replace-me" not in content, path
        assert not re.search(rb"BEGIN [A-Z ]*PRIVATE KEY", content), path
    for directory in (BASE, TEAM):
        for document in yaml.safe_load_all((directory / "secrets.yaml").read_text()):
            assert document["metadata"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
            assert set(document) == {"apiVersion", "kind", "metadata"}, "declared for kustomize only, no data"


def test_the_readmes_managed_redis_patch_removes_the_bases_redis_and_points_the_tier_elsewhere(tmp_path: Path) -> None:
    overlay = tmp_path / "managed-redis"
    overlay.mkdir()
    kustomization = yaml.safe_load(_readme_block("$patch: delete", "yaml"))
    kustomization["resources"] = [os.path.relpath(BASE, overlay)]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    documents = list(_render(overlay))
    tier = next(
        c
        for d in documents
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
        if _module(c) == "services.interaction.main"
    )
    env = _literal_env(tier)
    settings = _settings(InteractionSettings, env)

    assert not [d for d in documents if d["metadata"]["name"] == "redis"]
    assert settings.redis_mode.value == "sentinel"
    assert settings.redis_url.startswith("sentinel-0.")
    assert env["MAKA_REDIS_PASSWORD_FILE"] == "/etc/maka/redis/password", "the password stays in maka-redis"
    for document in documents:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


# --- Metrics, alerts, dashboard ------------------------------------------------------------------


SERVICE_METRICS = {m._name for m in vars(metrics).values() if hasattr(m, "_name") and hasattr(m, "_type")}
"""Every metric family services/core/metrics.py defines (without the ``_total``/``_bucket`` suffixes)."""
EXPORTER_METRICS = {"redis_up", "redis_memory_used_bytes", "redis_memory_max_bytes", "redis_aof_last_bgrewrite_status"}
"""What the alerts and the dashboard read from redis_exporter (besides ``redis_connected_slaves``)."""


def _metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression selects (identifiers followed by a selector or a range)."""
    return set(re.findall(r"\b((?:maka|redis)_[a-z_]+)\b", expression))


def _known(name: str) -> bool:
    family = re.sub(r"_(total|bucket|count|sum)$", "", name)
    return family in SERVICE_METRICS or name in EXPORTER_METRICS | {"redis_connected_slaves"}


@pytest.mark.parametrize("directory", INSTALLATIONS, ids=lambda p: p.name)
def test_pod_monitors_scrape_every_metrics_port_of_every_workload(directory: Path) -> None:
    documents = list(_k8s_documents(directory))
    monitors = [d for d in documents if d["kind"] == "PodMonitor"]
    assert [d["kind"] for d in documents].count("PrometheusRule") == 1, "the alerts beside the monitors"
    covered = set()
    for workload, _pod, container in _containers(directory):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        metric_ports = [p["name"] for p in container.get("ports", []) if p["name"].startswith("metrics")]
        listen = _literal_env(container).get("MAKA_METRICS_LISTEN")
        if listen:
            port = int(listen.rsplit(":", 1)[1])
            (named,) = [p["name"] for p in container["ports"] if p["containerPort"] == port]
            assert named in metric_ports, (workload["metadata"]["name"], container["name"])
        for port in metric_ports:
            scraping = [
                m
                for m in monitors
                if m["spec"]["selector"]["matchLabels"].items() <= labels.items()
                and port in {e["port"] for e in m["spec"]["podMetricsEndpoints"]}
            ]
            assert len(scraping) == 1, (workload["metadata"]["name"], container["name"], port)
            covered.add((workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"], port))
    assert covered == {
        ("interaction", "metrics"),
        ("maka-host", "metrics"),
        ("maka-host", "metrics-prov"),
        ("redis", "metrics"),
    }
    # Prometheus in the monitoring namespace may reach each of them.
    policies = [d for d in documents if d["kind"] == "NetworkPolicy"]
    for workload, _pod, container in _containers(directory):
        for port in (p["containerPort"] for p in container.get("ports", []) if p["name"].startswith("metrics")):
            labels = workload["spec"]["template"]["metadata"]["labels"]
            assert any(
                p["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()
                and any(
                    peer.get("namespaceSelector", {}).get("matchLabels")
                    == {"kubernetes.io/metadata.name": "monitoring"}
                    and port in {x["port"] for x in rule["ports"]}
                    for rule in p["spec"].get("ingress", [])
                    for peer in rule["from"]
                )
                for p in policies
            ), (workload["metadata"]["name"], port)


def _rule_groups() -> dict[str, Any]:
    (rule,) = [d for d in _k8s_documents() if d["kind"] == "PrometheusRule"]
    spec: dict[str, Any] = rule["spec"]
    return spec


def test_the_alerts_an_on_call_needs_exist_and_read_only_metrics_that_are_exported() -> None:
    rules = [r for group in _rule_groups()["groups"] for r in group["rules"]]
    alerts = {r["alert"]: r for r in rules}

    assert {
        "MakaFormsTimingOut",  # forms waiting too long
        "MakaFormsWaitingTooLong",
        "MakaToolCallsLost",  # calls lost
        "MakaStoreUnavailable",  # Redis fences failing
        "MakaStreamsFailing",  # fan-out
        "MakaCallsFailing",  # calls refused at once
        "MakaSignInRequired",  # AUTH_REQUIRED, by failure code
        "MakaSubscribersOverflowing",  # fan-out overflow
        "MakaRedisDown",
    } <= set(alerts)
    for rule in rules:
        names = _metric_names(rule["expr"])
        assert names, rule["alert"]
        assert all(_known(n) for n in names), (rule["alert"], names)
        assert f"`{rule['alert']}`" in README.read_text(), f"{rule['alert']}: what to do is in deploy/README.md"
    assert 'maka_tool_calls_total{outcome="lost"}' in alerts["MakaToolCallsLost"]["expr"]
    assert "maka_pending_forms" in alerts["MakaFormsWaitingTooLong"]["expr"]
    assert 'maka_call_failures_total{code="auth_required"}' in alerts["MakaSignInRequired"]["expr"]
    assert "maka_subscriber_overflows_total" in alerts["MakaSubscribersOverflowing"]["expr"]


def test_the_alerts_pass_promtool_check_and_its_unit_tests(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `make setup-node` (scripts/setup.sh --test installs it)"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rule_groups()))
    shutil.copy(MONITORING / "rules-test.yaml", tmp_path / "rules-test.yaml")

    checked = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", "rules-test.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    tests = yaml.safe_load((MONITORING / "rules-test.yaml").read_text())["tests"]
    fired = {t["alertname"] for test in tests for t in test["alert_rule_test"] if t.get("exp_alerts")}
    assert {
        "MakaToolCallsLost",
        "MakaStoreUnavailable",
        "MakaFormsTimingOut",
        "MakaCallsFailing",
        "MakaSignInRequired",
        "MakaSubscribersOverflowing",
    } <= fired


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `make setup-node`"
    broken = {"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "sum(rate(maka_tool_calls_total[5m]"}]}]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(broken))

    result = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode != 0


def test_the_grafana_dashboard_is_valid_json_reading_only_exported_metrics() -> None:
    (config_map,) = [d for d in _k8s_documents() if d["kind"] == "ConfigMap"]
    dashboard = json.loads(config_map["data"]["maka-runtime.json"])
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]

    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["uid"] == "maka-runtime"
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    names = set().union(*(_metric_names(e) for e in expressions))
    assert all(_known(n) for n in names), names
    families = {re.sub(r"_(total|bucket)$", "", n) for n in names}
    assert families >= SERVICE_METRICS - {"maka_grpc_messages"}, "a panel for every service metric"


# --- Runbooks ------------------------------------------------------------------------------------


def test_the_rollback_runbook_names_only_objects_the_installation_has_and_every_command_parses() -> None:
    block = _readme_block("rollout undo")
    names = {(d["kind"].lower(), d["metadata"]["name"]) for d in _k8s_documents()}
    kubectl = shutil.which("kubectl")
    assert kubectl
    commands = [shlex.split(line) for line in block.splitlines() if line.startswith("kubectl ")]
    undone = []
    for words in commands:
        assert words[1:3] == ["-n", "maka"], words
        for word in words:
            if "/" in word and "=" not in word and not word.startswith("-"):
                kind, name = word.split("/", 1)
                assert (kind, name) in names, word
                if words[3:5] == ["rollout", "undo"]:
                    undone.append(name)
        verb = [w for w in words[3:] if not w.startswith("-") and "/" not in w and "=" not in w][:2]
        parsed = subprocess.run([kubectl, *verb, "--help"], capture_output=True, text=True, check=False)
        assert parsed.returncode == 0, verb
    # Reverse of the upgrade order: web, then Hosts, then the tier, and every rolled workload is covered.
    assert undone == ["team-a-web", "team-b-web", "team-a-host", "team-b-host", "interaction"]
    workloads = {n for k, n in names if k in ("deployment", "statefulset") and n != "redis"}
    assert set(undone) == workloads


def test_the_test_setup_installs_promtool() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    test_branch = setup[setup.index('if [ "$MODE" = test ]') :]

    assert "if ! command -v promtool >/dev/null 2>&1; then" in test_branch
    assert "apt_install --no-install-recommends prometheus" in test_branch


def test_retiring_a_team_deletes_exactly_its_overlay_its_secrets_and_its_claims() -> None:
    block = _readme_block("delete -k deploy/k8s/overlays/team-b")
    commands = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.startswith("kubectl ")]
    team_b = K8S / "overlays" / "team-b"
    secrets = {r.secret for r in _secret_references(team_b) if not r.secret.endswith("-web-tls")}

    (delete_k,) = [c for c in commands if "-k" in c]
    assert ROOT / delete_k[delete_k.index("-k") + 1] == team_b
    (delete_secrets,) = [c for c in commands if c[3:5] == ["delete", "secret"]]
    assert {w for w in delete_secrets[5:] if not w.startswith("-")} == secrets
    (delete_claims,) = [c for c in commands if c[3:5] == ["delete", "pvc"]]
    assert delete_claims[delete_claims.index("-l") + 1] == "maka.dev/team=team-b"
    (host,) = _hosts(team_b)
    assert all(t["metadata"]["labels"]["maka.dev/team"] == "team-b" for t in host["spec"]["volumeClaimTemplates"])
    # Nothing of another team is touched: its names all carry its own prefix.
    assert not [w for c in commands for w in c if "team-a" in w]


def _installation(tmp_path: Path, teams: list[Path]) -> str:
    """``kubectl kustomize`` of the base with ``teams`` (each its overlay and its tier component), as text."""
    overlay = tmp_path / "-".join(t.name for t in teams)
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": "maka",
        "resources": [os.path.relpath(d, overlay) for d in (BASE, *teams)],
        "components": [os.path.relpath(t / "tier", overlay) for t in teams],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    kubectl = shutil.which("kubectl")
    assert kubectl
    result = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _by_team(text: str, team: str) -> dict[str, str]:
    """The rendered objects labelled ``maka.dev/team: team``, each as its rendered text: kind/name → text."""
    found = {}
    for chunk in text.split("\n---\n"):
        document = yaml.safe_load(chunk)
        if document and document["metadata"].get("labels", {}).get("maka.dev/team") == team:
            found[f"{document['kind']}/{document['metadata']['name']}"] = chunk.rstrip("\n")  # the last has one more
    return found


def test_retiring_a_team_is_removing_it_nothing_of_it_remains_and_the_other_team_is_byte_identical(
    tmp_path: Path,
) -> None:
    team_a, team_b = TEAMS
    both = _installation(tmp_path, [team_a, team_b])
    only_a = _installation(tmp_path, [team_a])

    assert "team-b" in both, "team-b is rendered, its tokens mounted into the tier"
    assert "team-b" not in only_a, "nothing of a removed team remains in any object, the tier's included"
    assert _by_team(both, "team-a"), "team-a's objects"
    assert _by_team(only_a, "team-a") == _by_team(both, "team-a"), "the other team's objects are byte-identical"
    (tier_both,) = [
        d
        for d in yaml.safe_load_all(both)
        if d and d["metadata"]["name"] == "interaction" and d["kind"] == "Deployment"
    ]
    (tier_a,) = [
        d
        for d in yaml.safe_load_all(only_a)
        if d and d["metadata"]["name"] == "interaction" and d["kind"] == "Deployment"
    ]
    assert tier_both["metadata"]["name"] == tier_a["metadata"]["name"] == "interaction"
    assert tier_both["spec"]["template"] != tier_a["spec"]["template"], "the tier rolls without the team's tokens"
    for document in yaml.safe_load_all(only_a):
        if document and document["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)


# --- deploy/README.md: what a configuration or Secret change rolls ---------------------------------


def _team_generic(name: str) -> str:
    """``team-a-host`` → ``<team>-host`` (the README's spelling of a team's objects)."""
    return re.sub(r"^team-[ab]-", "<team>-", name)


def _config_map_references(document: dict[str, Any]) -> set[str]:
    pod = document["spec"]["template"]["spec"]
    names = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                names.add(ref["name"])
        names |= {s["configMapRef"]["name"] for s in container.get("envFrom", []) if "configMapRef" in s}
    return names


@pytest.mark.parametrize("directory", RENDERINGS, ids=lambda d: d.name)
def test_a_configuration_change_rolls_the_pods_because_no_workload_reads_a_hand_named_config_map(
    directory: Path,
) -> None:
    documents = list(_k8s_documents(directory))
    rendered = {d["metadata"]["name"] for d in documents if d["kind"] == "ConfigMap"}
    for document in documents:
        if document["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for name in _config_map_references(document):
            where = f"{document['kind']}/{document['metadata']['name']}"
            assert name in rendered, f"{where} reads ConfigMap {name}, which no kustomization generates"
            assert re.search(r"-[a-z0-9]{10}$", name), f"{where} reads ConfigMap {name} without a content hash"


def test_the_readme_rolls_every_workload_that_reads_a_changed_secret() -> None:
    section = README.read_text().split("### Changing configuration and Secrets", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    rolled: dict[str, set[str]] = {}
    for row in rows:
        secrets_cell, _readers, command = (cell.strip() for cell in row.strip("|").split("|"))
        assert command.startswith("`kubectl -n maka rollout restart "), row
        targets = set(re.findall(r"\b(?:deployment|statefulset)/[a-z<>-]+", command))
        for secret in re.findall(r"`([^`]+)`", secrets_cell):
            rolled.setdefault(secret, set()).update(targets)
    needed: dict[str, set[str]] = {}
    for directory in (EXAMPLE, EXAMPLE_HA):
        for ref in _secret_references(directory):
            kind, name = ref.where.split()[0].split("/")
            if kind == "Ingress":
                continue  # the ingress controller reloads its certificate itself
            needed.setdefault(_team_generic(ref.secret), set()).add(f"{kind.lower()}/{_team_generic(name)}")
    assert needed, "the installations read Secrets"
    for secret, workloads in sorted(needed.items()):
        assert secret in rolled, f"deploy/README.md does not say what to roll when {secret} changes"
        assert workloads <= rolled[secret], f"{secret}: also roll {sorted(workloads - rolled[secret])}"
