"""Offline validation of the deployment files: Compose against the compose-spec schema, Kubernetes
manifests against the bundled Kubernetes 1.33 OpenAPI schemas (strict), plus the rules the issue sets
(non-root, read-only root FS, native gRPC probes, h2c ports, AOF Redis with a PVC, env names that the
Settings classes read). Nothing here needs a Docker engine or a cluster.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import ValidationError

from services.broker.settings import Settings as BrokerSettings
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.web.settings import WebSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
K8S_VERSION = "1.33.0"
"""Native gRPC probes are GA since 1.27; the ``sleep`` preStop action validates from 1.30."""

SETTINGS_BY_MODULE: dict[str, set[str]] = {
    "services.interaction.main": {f"MAKA_{name.upper()}" for name in InteractionSettings.model_fields},
    "services.broker.main": {f"MAKA_{name.upper()}" for name in BrokerSettings.model_fields},
    "services.mcp_provider.main": {f"MAKA_{name.upper()}" for name in ProviderSettings.model_fields},
    "surfaces.web.main": {f"MAKA_{name.upper()}" for name in WebSettings.model_fields},
}
"""The environment names each entry point's Settings class reads (env prefix ``MAKA_``)."""

GRPC_MODULES = {"services.interaction.main", "services.broker.main", "services.mcp_provider.main"}


def _k8s_documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield path, document


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def _containers(kind: str | None = None) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec, container) for every Deployment/StatefulSet container."""
    for _path, document in _k8s_documents():
        if document["kind"] in ("Deployment", "StatefulSet") and kind in (None, document["kind"]):
            pod = document["spec"]["template"]["spec"]
            for container in pod["containers"]:
                yield document, pod, container


def _module(container: dict[str, Any]) -> str:
    command: list[str] = container.get("command", [])
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


def test_compose_runs_redis_with_aof_a_volume_and_a_health_check() -> None:
    redis = _compose()["services"]["redis"]

    assert redis["image"].startswith("redis:7.0")
    assert "--appendonly" in redis["command"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert "redis-data:/data" in redis["volumes"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_compose_has_one_service_per_authority_built_from_the_one_dockerfile() -> None:
    services = _compose()["services"]
    built = {name: s for name, s in services.items() if name != "redis"}

    assert {(_module({"command": s["command"]})) for s in built.values()} == set(SETTINGS_BY_MODULE)
    for service in built.values():
        assert service["build"]["dockerfile"] == "Dockerfile"
        assert service["read_only"] is True
        assert "no-new-privileges:true" in service["security_opt"]


def test_compose_services_use_only_environment_names_their_settings_read() -> None:
    for name, service in _compose()["services"].items():
        if name == "redis":
            continue
        module = _module({"command": service["command"]})
        unknown = set(service["environment"]) - SETTINGS_BY_MODULE[module]
        assert not unknown, f"{name}: {unknown}"


def test_compose_grpc_services_have_grpc_health_checks_on_their_listen_port() -> None:
    for name, service in _compose()["services"].items():
        if name == "redis" or _module({"command": service["command"]}) not in GRPC_MODULES:
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


def test_dockerfile_is_slim_non_root_and_installs_the_package() -> None:
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]

    assert "FROM python:3.11-slim AS build" in lines
    assert "FROM python:3.11-slim" in lines
    assert "RUN pip install --prefix=/install ." in lines
    assert "RUN pip install --prefix=/install ./clients/python" in lines  # the CLI's maka_client
    assert "USER 10001:10001" in lines
    assert (ROOT / ".dockerignore").read_text().count(".venv") == 1


# --- Kubernetes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "document"),
    [pytest.param(p, d, id=f"{p.name}:{d['kind']}/{d['metadata']['name']}") for p, d in _k8s_documents()],
)
def test_k8s_manifest_is_valid_for_the_pinned_kubernetes_version(path: Path, document: dict[str, Any]) -> None:
    kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_k8s_validation_rejects_an_unknown_field() -> None:
    _path, document = next((p, d) for p, d in _k8s_documents() if d["kind"] == "Deployment")
    document["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpcc"] = {"port": 1}

    with pytest.raises(ValidationError):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]

    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def test_every_k8s_container_is_non_root_read_only_and_without_privilege_escalation() -> None:
    for workload, pod, container in _containers():
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
        assert container["resources"]["requests"].keys() == {"cpu", "memory"}, name
        assert pod["terminationGracePeriodSeconds"] >= 20, name


def test_grpc_services_use_native_grpc_probes_and_a_pre_stop_pause() -> None:
    modules = set()
    for workload, pod, container in _containers("Deployment"):
        module = _module(container)
        if module not in GRPC_MODULES:
            continue
        modules.add(module)
        port = container["ports"][0]["containerPort"]
        assert container["ports"][0]["name"] == "grpc"
        for probe in ("startupProbe", "livenessProbe"):  # liveness: the overall "" status (the process)
            assert container[probe]["grpc"] == {"port": port}, (workload["metadata"]["name"], probe)
        readiness = {"port": port}
        if module == "services.interaction.main":  # readiness: the named service (Redis reachable)
            readiness["service"] = "maka.interaction.v1.InteractionService"
        assert container["readinessProbe"]["grpc"] == readiness, workload["metadata"]["name"]
        pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert pod["terminationGracePeriodSeconds"] > pre_stop
    assert modules == GRPC_MODULES


def test_k8s_services_name_grpc_ports_with_h2c_app_protocol() -> None:
    services = [d for _p, d in _k8s_documents() if d["kind"] == "Service"]
    grpc_ports = [port for s in services for port in s["spec"]["ports"] if port["name"] == "grpc"]

    assert {s["metadata"]["name"] for s in services} >= {"interaction", "broker", "web", "redis"}
    assert len(grpc_ports) == 2
    assert all(port["appProtocol"] == "kubernetes.io/h2c" for port in grpc_ports)


def test_k8s_containers_use_only_environment_names_their_settings_read() -> None:
    for workload, _pod, container in _containers("Deployment"):
        module = _module(container)
        unknown = {env["name"] for env in container["env"]} - SETTINGS_BY_MODULE[module]
        assert not unknown, (workload["metadata"]["name"], unknown)


def test_k8s_redis_is_a_statefulset_with_a_pvc_and_aof() -> None:
    (statefulset,) = [d for _p, d in _k8s_documents() if d["kind"] == "StatefulSet"]
    container = statefulset["spec"]["template"]["spec"]["containers"][0]

    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert container["args"][container["args"].index("--appendonly") + 1] == "yes"
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]


def test_k8s_mcp_config_and_tokens_come_from_a_configmap_and_a_secret() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for _p, d in _k8s_documents()}
    assert {("ConfigMap", "maka-mcp-config"), ("Secret", "maka-tokens")} <= kinds
    (configmap,) = [d for _p, d in _k8s_documents() if d["kind"] == "ConfigMap"]
    assert yaml.safe_load(configmap["data"]["mcp.json"])["mcpServers"]["examples"]["args"] == [
        "-m",
        "examples.deploy_server",
    ]
