"""Offline validation of the deployment files: Compose against the compose-spec schema, Kubernetes
manifests against the bundled Kubernetes 1.33 OpenAPI schemas (strict), plus the rules a platform team relies on
(non-root, read-only root FS, native gRPC probes, h2c ports, AOF Redis with a PVC, env names that the
Settings classes read). Nothing here needs a Docker engine or a cluster.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
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
BASE = K8S / "base"
OVERLAYS = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
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


@functools.cache
def _render(directory: Path) -> tuple[dict[str, Any], ...]:
    """``kubectl kustomize DIR``: the documents a cluster would receive."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: run `make setup-node`"
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return tuple(d for d in yaml.safe_load_all(result.stdout) if d)


def _k8s_documents(directory: Path = BASE) -> Iterator[dict[str, Any]]:
    yield from copy.deepcopy(_render(directory))


def _every_rendering() -> list[tuple[str, dict[str, Any]]]:
    return [(d.name, doc) for d in (BASE, *OVERLAYS) for doc in _k8s_documents(d)]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


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


IMAGES_NOT_OURS = {"redis", "proxy"}


def _ours() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _compose()["services"].items() if name not in IMAGES_NOT_OURS}


def test_compose_runs_redis_with_auth_aof_a_memory_cap_a_volume_and_a_health_check() -> None:
    redis = _compose()["services"]["redis"]
    command = " ".join(redis["command"])

    assert redis["image"].startswith("redis:7.0")
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command
    assert '--requirepass "$$(cat /run/secrets/redis_password)"' in command  # $$: Compose's escape
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
    assert services["web"]["environment"]["MAKA_HOST_ID"] in brokers
    for broker, provider in ((s["network_mode"].removeprefix("service:"), s) for s in providers.values()):
        assert provider["environment"]["MAKA_DRAIN_SECONDS"] == services[broker]["environment"]["MAKA_DRAIN_SECONDS"]


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


def _containers(
    directory: Path = BASE, kind: str | None = None
) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec, container) for every Deployment/StatefulSet container."""
    for document in _k8s_documents(directory):
        if document["kind"] in ("Deployment", "StatefulSet") and kind in (None, document["kind"]):
            pod = document["spec"]["template"]["spec"]
            for container in pod["containers"]:
                yield document, pod, container


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {env["name"]: env for env in container.get("env", [])}


def _one(directory: Path, kind: str, name: str) -> dict[str, Any]:
    (document,) = [d for d in _k8s_documents(directory) if d["kind"] == kind and d["metadata"]["name"] == name]
    return document


def test_there_is_a_base_and_at_least_one_overlay() -> None:
    assert (BASE / "kustomization.yaml").exists()
    assert [p.name for p in OVERLAYS] == ["three-hosts"]


@pytest.mark.parametrize(
    ("rendering", "document"),
    [pytest.param(r, d, id=f"{r}:{d['kind']}/{d['metadata']['name']}") for r, d in _every_rendering()],
)
def test_every_rendered_k8s_document_is_valid_for_the_pinned_kubernetes_version(
    rendering: str, document: dict[str, Any]
) -> None:
    kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_k8s_validation_rejects_an_unknown_field() -> None:
    document = next(d for d in _k8s_documents() if d["kind"] == "Deployment")
    document["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpcc"] = {"port": 1}

    with pytest.raises(ValidationError):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_base_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]

    assert sorted(listed) == sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_every_k8s_container_is_non_root_read_only_and_without_privilege_escalation(directory: Path) -> None:
    for workload, pod, container in _containers(directory):
        name = f"{workload['metadata']['name']}/{container['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
        assert container["resources"]["requests"].keys() == {"cpu", "memory"}, name
        assert "memory" in container["resources"]["limits"], name


def test_grpc_services_use_native_grpc_probes_with_liveness_apart_from_readiness() -> None:
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
        ready = {"port": port}
        if module == "services.interaction.main":
            ready["service"] = "maka.interaction.v1.InteractionService"
        assert container["readinessProbe"]["grpc"] == ready, name
    assert modules == GRPC_MODULES


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_each_pods_shutdown_budget_fits_its_termination_grace(directory: Path) -> None:
    for workload, pod, container in _containers(directory):
        env = _env(container)
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        drain = float(env.get("MAKA_DRAIN_SECONDS", {}).get("value", 0))
        grace = float(env.get("MAKA_GRACE_SECONDS", {}).get("value", 0))
        budget = pre_stop + drain + grace
        name = (workload["metadata"]["name"], container["name"])
        assert budget + 5 <= pod["terminationGracePeriodSeconds"], (name, budget, pod["terminationGracePeriodSeconds"])


def test_k8s_services_name_grpc_ports_with_h2c_app_protocol() -> None:
    services = [d for d in _k8s_documents() if d["kind"] == "Service"]
    grpc_ports = [port for s in services for port in s["spec"]["ports"] if port["name"] == "grpc"]

    assert {s["metadata"]["name"] for s in services} == {"interaction", "maka-host", "web", "redis"}
    assert len(grpc_ports) == 2
    assert all(port["appProtocol"] == "kubernetes.io/h2c" for port in grpc_ports)


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_k8s_containers_use_only_environment_names_their_settings_read(directory: Path) -> None:
    for workload, _pod, container in _containers(directory):
        module = _module(container)
        if not module:
            continue
        unknown = set(_env(container)) - SETTINGS_BY_MODULE[module]
        assert not unknown, (workload["metadata"]["name"], container["name"], unknown)


def test_a_host_is_one_statefulset_pod_with_its_broker_and_provider_on_localhost() -> None:
    host = _one(BASE, "StatefulSet", "maka-host")
    service = _one(BASE, "Service", "maka-host")
    containers = {c["name"]: c for c in host["spec"]["template"]["spec"]["containers"]}

    assert service["spec"]["clusterIP"] == "None"
    assert host["spec"]["serviceName"] == "maka-host"
    assert {_module(c) for c in containers.values()} == {"services.broker.main", "services.mcp_provider.main"}
    broker_env, provider_env = _env(containers["broker"]), _env(containers["provider"])
    assert broker_env["MAKA_HOST_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert provider_env["MAKA_BROKER_TARGET"]["value"] == "127.0.0.1:50052"
    # The provider's port serves only its health (the kubelet probes the pod IP, so it cannot be loopback);
    # neither the Service nor the NetworkPolicy exposes it.
    provider_port = int(provider_env["MAKA_LISTEN"]["value"].rsplit(":", 1)[1])
    assert provider_port not in {p["port"] for p in service["spec"]["ports"]}
    policy = _one(BASE, "NetworkPolicy", "maka-host")
    assert provider_port not in {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    # Both get SIGTERM together: the provider keeps the MCP connections for as long as the broker drains.
    assert provider_env["MAKA_DRAIN_SECONDS"] == broker_env["MAKA_DRAIN_SECONDS"]
    assert float(broker_env["MAKA_DRAIN_SECONDS"]["value"]) > 0
    for env in (broker_env, _env(next(c for _w, _p, c in _containers() if _module(c) == "surfaces.web.main"))):
        assert env["MAKA_INTERACTION_TARGET"]["value"].startswith("dns:///"), "round_robin over every replica"


def test_the_three_host_overlay_runs_three_hosts_and_the_broker_token_names_each() -> None:
    (overlay,) = OVERLAYS
    host = _one(overlay, "StatefulSet", "maka-host")
    tokens = json.loads(_one(overlay, "Secret", "maka-tokens")["stringData"]["tokens.json"])

    count = host["spec"]["replicas"]
    assert count == 3
    (broker,) = [t for t in tokens["tokens"] if t["roles"] == ["broker"]]
    assert broker["hosts"] == [f"maka-host-{i}" for i in range(count)]
    assert {c["image"] for _w, _p, c in _containers(overlay) if _module(c)} == {
        "registry.example.com/maka-runtime:0.1.0"
    }


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_the_interaction_tier_serves_exactly_the_statefulsets_host_ids_and_the_web_names_one(
    directory: Path,
) -> None:
    host = _one(directory, "StatefulSet", "maka-host")
    tier = next(c for _w, _p, c in _containers(directory) if _module(c) == "services.interaction.main")
    tokens = json.loads(_one(directory, "Secret", "maka-tokens")["stringData"]["tokens.json"])["tokens"]

    pods = [f"maka-host-{i}" for i in range(host["spec"].get("replicas", 1))]
    assert _env(tier)["MAKA_HOST_IDS"]["value"].split(",") == pods
    (broker,) = [t for t in tokens if t["roles"] == ["broker"]]
    assert broker["hosts"] == pods
    # The web surface names its Host, one the tier serves, and its token may read no other.
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")
    (surface,) = [t for t in tokens if t["roles"] == ["surface"]]
    assert _env(web)["MAKA_HOST_ID"]["value"] in pods
    assert surface.get("hosts", ["*"]) in (["*"], [_env(web)["MAKA_HOST_ID"]["value"]])
    assert len(pods) == 1 or surface["hosts"] == [_env(web)["MAKA_HOST_ID"]["value"]], "least privilege"


def test_the_interaction_tier_is_headless_autoscaled_and_disruption_budgeted() -> None:
    service = _one(BASE, "Service", "interaction")
    hpa = _one(BASE, "HorizontalPodAutoscaler", "interaction")
    pdbs = {d["metadata"]["name"] for d in _k8s_documents() if d["kind"] == "PodDisruptionBudget"}

    assert service["spec"]["clusterIP"] == "None"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "interaction"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert pdbs == {"interaction", "maka-host", "web"}


def test_k8s_redis_needs_auth_caps_memory_without_eviction_and_keeps_an_aof_on_a_pvc() -> None:
    statefulset = _one(BASE, "StatefulSet", "redis")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]

    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    assert "--maxmemory" in args
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    assert _env(container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "maka-redis"
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]


def test_only_the_interaction_tier_reaches_redis_and_only_hosts_and_surfaces_reach_the_tier() -> None:
    policies = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "NetworkPolicy"}

    assert policies["default-deny-ingress"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    (redis_rule,) = policies["redis"]["spec"]["ingress"]
    assert redis_rule["from"] == [{"podSelector": {"matchLabels": {"maka.dev/role": "interaction"}}}]
    tier_sources = policies["interaction"]["spec"]["ingress"][0]["from"]
    assert {s["podSelector"]["matchLabels"]["maka.dev/role"] for s in tier_sources} == {"host", "surface"}
    roles = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"].get("maka.dev/role")
        for w, _p, _c in _containers()
    }
    assert roles == {"interaction": "interaction", "maka-host": "host", "web": "surface", "redis": "redis"}


def test_mcp_servers_tokens_and_the_web_secret_come_from_secrets() -> None:
    secrets = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "Secret"}
    assert set(secrets) == {"maka-mcp-servers", "maka-mcp-env", "maka-tokens", "maka-redis", "maka-web"}
    assert not [d for d in _k8s_documents() if d["kind"] == "ConfigMap"], "no secret-bearing file in a ConfigMap"
    servers = json.loads(secrets["maka-mcp-servers"]["stringData"]["mcp.json"])
    assert servers["mcpServers"]["examples"]["args"] == ["-m", "examples.deploy_server"]
    web = next(c for _w, _p, c in _containers() if _module(c) == "surfaces.web.main")
    assert _env(web)["MAKA_WEB_SECRET_FILE"]["value"] == "/etc/maka/web/secret"
    assert _env(web)["MAKA_WEB_PUBLIC_ORIGIN"]["value"].startswith("https://")


def test_every_maka_pod_is_scraped_on_its_metrics_port() -> None:
    for workload, _pod, container in _containers():
        if _module(container) not in GRPC_MODULES:
            continue
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", workload["metadata"]["name"]
        assert "MAKA_METRICS_LISTEN" in _env(container), (workload["metadata"]["name"], container["name"])


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    return float(quantity[:-2]) * units[quantity[-2:]]


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
        role = role_of.get(_module(container)) or ("redis" if workload["metadata"]["name"] == "redis" else "")
        if not role:
            continue
        peak = resources[role]["peak_rss_mib"]
        name = (workload["metadata"]["name"], container["name"])
        assert _mebibytes(container["resources"]["requests"]["memory"]) >= 1.5 * peak, (name, peak)
        assert _mebibytes(container["resources"]["limits"]["memory"]) >= 3 * peak, (name, peak)
        checked.add(role)
    assert checked == {"broker", "provider", "interaction", "web", "redis"}
