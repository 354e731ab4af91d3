"""Offline validation of the deployment files: Compose against the compose-spec schema, Kubernetes
manifests against the bundled Kubernetes 1.33 OpenAPI schemas (strict), plus the rules a platform team relies on
(non-root, read-only root FS, native gRPC probes, h2c ports, AOF Redis with a PVC, env names that the
Settings classes read, shutdown budgets), and deploy/README.md's walk from an empty cluster: its Secret
commands run (``kubectl create --dry-run=client``) and create exactly the Secrets and keys the rendered
manifests reference. Nothing here needs a Docker engine or a cluster.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import ValidationError
from pydantic_settings import BaseSettings

from services.broker.settings import Settings as BrokerSettings
from services.core.auth import Role, TokenTable
from services.core.settings import ClientTlsSettings
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider.config import check_config
from services.mcp_provider.oauth import read_key_file
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.web.main import SHUTDOWN_GRACE_SECONDS as WEB_SHUTDOWN_GRACE_SECONDS
from surfaces.web.settings import WebSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
OVERLAYS = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
K8S_VERSION = "1.33.0"
"""Native gRPC probes are GA since 1.27; the ``sleep`` preStop action validates from 1.30."""

README = ROOT / "deploy" / "README.md"
SETTINGS_CLASS: dict[str, type[InteractionSettings | BrokerSettings | ProviderSettings | WebSettings]] = {
    "services.interaction.main": InteractionSettings,
    "services.broker.main": BrokerSettings,
    "services.mcp_provider.main": ProviderSettings,
    "surfaces.web.main": WebSettings,
}
DIALS_GRPC = {"services.broker.main", "services.mcp_provider.main", "surfaces.web.main"}
"""Entry points that open gRPC channels, so they also read ``ClientTlsSettings`` (``MAKA_TLS_CA_FILE`` ...)."""
SETTINGS_BY_MODULE: dict[str, set[str]] = {
    module: {f"MAKA_{name.upper()}" for name in settings.model_fields}
    | ({f"MAKA_{name.upper()}" for name in ClientTlsSettings.model_fields} if module in DIALS_GRPC else set())
    for module, settings in SETTINGS_CLASS.items()
}
"""The environment names each entry point's Settings classes read (env prefix ``MAKA_``)."""

S = TypeVar("S", bound=BaseSettings)

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

    assert web["MAKA_BROKER_TARGET"] == f"{web['MAKA_HOST_ID']}:50052"
    for provider in _compose_providers().values():
        assert provider["environment"]["MAKA_OAUTH_REDIRECT_URI"] == f"{web['MAKA_WEB_PUBLIC_ORIGIN']}/oauth/callback"


def test_compose_shutdown_budgets_fit_each_stop_grace_period() -> None:
    for name, service in _ours().items():
        module = _module(service)
        period = float(service["stop_grace_period"].removesuffix("s"))
        env = {k: str(v) for k, v in service["environment"].items()}
        assert _shutdown_seconds(module, env) + 5 <= period, (name, _shutdown_seconds(module, env), period)


def test_the_compose_secret_files_the_readme_makes_are_the_ones_compose_reads() -> None:
    files = {Path(s["file"]).name for s in _compose()["secrets"].values()}
    files |= {Path(v.split(":")[0]).name for v in _compose()["services"]["proxy"]["volumes"] if "/secrets/" in v}
    block = _readme_block("cd deploy/compose/secrets")
    header = (ROOT / "docker-compose.yml").read_text()

    for file in files:
        assert re.search(rf"(>|-keyout|-out) {re.escape(file)}\b", block), file
        assert re.search(rf"(>|-keyout|-out) {re.escape(file)}\b", header), file


def test_dockerfile_is_slim_non_root_and_installs_the_package() -> None:
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]

    assert "FROM python:3.11-slim AS build" in lines
    assert "FROM python:3.11-slim" in lines
    assert "RUN pip install --prefix=/install ." in lines
    assert "RUN pip install --prefix=/install ./clients/python" in lines  # the CLI's maka_client
    assert "USER 10001:10001" in lines
    # A named volume mounted on the token directory starts with the image's owner: the non-root provider.
    assert (
        "RUN mkdir -p /var/lib/maka/oauth && chown 10001:10001 /var/lib/maka/oauth && chmod 0700 /var/lib/maka/oauth"
        in lines
    )
    assert lines.index("USER 10001:10001") > lines.index("FROM python:3.11-slim")
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


SHUTDOWN_PHASES: dict[str, tuple[str, ...]] = {
    # BrokerApp.stop: broker.drain(drain_seconds), broker.shutdown(timeout=grace_seconds) settles what is
    # left (calls lost, forms closed stopped), then serving's server.stop(grace_seconds).
    "services.broker.main": ("drain_seconds", "grace_seconds", "grace_seconds"),
    # ProviderApp.stop: provider.drain(drain_seconds), then server.stop(grace_seconds).
    "services.mcp_provider.main": ("drain_seconds", "grace_seconds"),
    # The Interaction app's stop: servicer.drain(grace_seconds) ends every stream, then server.stop(grace_seconds).
    "services.interaction.main": ("grace_seconds", "grace_seconds"),
    "surfaces.web.main": (),  # uvicorn's graceful shutdown: WEB_SHUTDOWN_GRACE_SECONDS
}
"""What each entry point may spend after SIGTERM, phase by phase, by the setting that bounds the phase."""


def _shutdown_seconds(module: str, env: dict[str, str]) -> float:
    """The worst-case time from SIGTERM to exit of ``module`` with literal environment ``env``."""
    if module == "surfaces.web.main":
        return WEB_SHUTDOWN_GRACE_SECONDS
    settings = SETTINGS_CLASS[module]
    values = {
        name: float(env.get(f"MAKA_{name.upper()}", settings.model_fields[name].default))
        for name in {"drain_seconds", "grace_seconds"} & set(settings.model_fields)
    }
    return sum(values[phase] for phase in SHUTDOWN_PHASES[module])


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {name: env["value"] for name, env in _env(container).items() if "value" in env}


def _settings(settings: type[S], env: dict[str, str]) -> S:
    """``settings`` from the ``MAKA_*`` values in ``env`` that it declares (the process environment aside)."""
    names = {f"MAKA_{name.upper()}": name for name in settings.model_fields}
    return settings.model_validate({names[k]: v for k, v in env.items() if k in names})


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_each_pods_shutdown_budget_fits_its_termination_grace(directory: Path) -> None:
    checked = set()
    for workload, pod, container in _containers(directory):
        module = _module(container)
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        budget = pre_stop + (_shutdown_seconds(module, _literal_env(container)) if module else 0)
        name = (workload["metadata"]["name"], container["name"])
        assert budget + 5 <= pod["terminationGracePeriodSeconds"], (name, budget, pod["terminationGracePeriodSeconds"])
        checked.add(module)
    assert set(SHUTDOWN_PHASES) <= checked


def test_the_readmes_upgrade_budget_is_the_host_pods_own_figures() -> None:
    host = _one(BASE, "StatefulSet", "maka-host")
    pod = host["spec"]["template"]["spec"]
    broker = next(c for c in pod["containers"] if c["name"] == "broker")
    env = _literal_env(broker)
    pre_stop = broker["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain, grace = int(env["MAKA_DRAIN_SECONDS"]), int(env["MAKA_GRACE_SECONDS"])
    total = pre_stop + drain + 2 * grace
    sentence = (
        f"{pre_stop} + {drain} + {grace} + {grace} = {total} s fits `terminationGracePeriodSeconds: "
        f"{pod['terminationGracePeriodSeconds']}`"
    )
    text = " ".join(README.read_text().split())

    assert sentence in text
    assert f"`MAKA_DRAIN_SECONDS` ({drain} s)" in text
    assert f"`MAKA_GRACE_SECONDS` ({grace} s)" in text
    assert f"{pre_stop} s `preStop`" in text
    assert total == _shutdown_seconds("services.broker.main", env) + pre_stop


def test_rollouts_surge_before_they_remove_and_hosts_roll_one_at_a_time() -> None:
    for name in ("interaction", "web"):
        strategy = _one(BASE, "Deployment", name)["spec"]["strategy"]
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}, name
    host = _one(BASE, "StatefulSet", "maka-host")
    assert host["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert "partition" not in host["spec"]["updateStrategy"].get("rollingUpdate", {})
    # The budgets bound evictions (node drains), not rollouts: the README says which is which.
    assert _one(BASE, "PodDisruptionBudget", "maka-host")["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "maka-host"}},
    }
    for name in ("interaction", "web"):
        assert _one(BASE, "PodDisruptionBudget", name)["spec"]["minAvailable"] == 1, name


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


def test_the_three_host_overlay_runs_three_hosts_and_the_readmes_broker_token_names_each(
    readme_secrets: dict[str, dict[str, str]], readme_tokens: TokenTable
) -> None:
    (overlay,) = OVERLAYS
    host = _one(overlay, "StatefulSet", "maka-host")
    broker = readme_tokens.lookup(readme_secrets["maka-tokens"]["broker-token"])

    count = host["spec"]["replicas"]
    assert count == 3
    assert broker is not None
    assert broker.roles == {Role.BROKER}
    assert broker.hosts == {f"maka-host-{i}" for i in range(count)}
    assert {c["image"] for _w, _p, c in _containers(overlay) if _module(c)} == {
        "registry.example.com/maka-runtime:0.1.0"
    }


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_the_interaction_tier_serves_exactly_the_statefulsets_host_ids_and_the_web_names_one(
    directory: Path,
) -> None:
    host = _one(directory, "StatefulSet", "maka-host")
    tier = next(c for _w, _p, c in _containers(directory) if _module(c) == "services.interaction.main")
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")

    pods = [f"maka-host-{i}" for i in range(host["spec"].get("replicas", 1))]
    assert _env(tier)["MAKA_HOST_IDS"]["value"].split(",") == pods
    assert _env(web)["MAKA_HOST_ID"]["value"] in pods
    # The web surface reads its own Host's broker (status, sign-in prompts, /oauth/callback).
    host_id = _env(web)["MAKA_HOST_ID"]["value"]
    assert _env(web)["MAKA_BROKER_TARGET"]["value"] == f"{host_id}.maka-host.maka.svc.cluster.local:50052"


def test_the_readmes_surface_token_reads_only_the_host_the_web_shows(
    readme_secrets: dict[str, dict[str, str]], readme_tokens: TokenTable
) -> None:
    (overlay,) = OVERLAYS
    web = next(c for _w, _p, c in _containers(overlay) if _module(c) == "surfaces.web.main")
    table = readme_tokens
    tokens = readme_secrets["maka-tokens"]

    surface = table.lookup(tokens["surface-token"])
    provider = table.lookup(tokens["provider-token"])
    caller = table.lookup(tokens["caller-token"])
    assert surface is not None
    assert surface.roles == {Role.SURFACE}
    assert surface.hosts == {_env(web)["MAKA_HOST_ID"]["value"]}, "least privilege"
    assert provider is not None
    assert provider.roles == {Role.PROVIDER}
    assert caller is not None
    assert caller.roles == {Role.CALLER}
    assert len(set(tokens.values())) == len(tokens), "every role its own token"


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


def test_mcp_servers_tokens_and_the_web_secret_come_from_secrets_that_no_manifest_carries() -> None:
    for rendering, document in _every_rendering():
        assert document["kind"] not in ("Secret", "ConfigMap"), (rendering, document["metadata"]["name"])
    references = _secret_references(BASE)
    assert {(r.secret, r.key) for r in references if not r.optional} >= {
        ("maka-mcp-servers", None),
        ("maka-tokens", "tokens.json"),
        ("maka-tokens", "broker-token"),
        ("maka-tokens", "provider-token"),
        ("maka-tokens", "surface-token"),
        ("maka-redis", "password"),
        ("maka-answer-key", "answer.key"),
        ("maka-web", "secret"),
    }
    assert {r.secret for r in references if r.optional} == {"maka-mcp-env", "maka-oauth-key"}
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
    bin_dir = work / "bin"
    bin_dir.mkdir()
    out = work / "created.yaml"
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: run `make setup-node`"
    wrapper = bin_dir / "kubectl"
    wrapper.write_text(f'#!/bin/sh\necho --- >> "{out}"\nexec "{kubectl}" "$@" --dry-run=client -o yaml >> "{out}"\n')
    wrapper.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GITHUB_TOKEN": "canary-gh"}
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
def readme_tokens(readme_secrets: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> TokenTable:
    """The README's ``tokens.json``, loaded by the services' own loader (``MAKA_AUTH_TOKENS_FILE``)."""
    path = tmp_path_factory.mktemp("readme-tokens") / "tokens.json"
    path.write_text(readme_secrets["maka-tokens"]["tokens.json"])
    return TokenTable.from_file(path)


KEYS_FOR_CALLERS = {("maka-tokens", "caller-token")}
"""Keys the README creates that no manifest reads: the callers' token (``MAKA_CALLER_TOKEN``)."""


@pytest.mark.parametrize("directory", OVERLAYS, ids=lambda p: p.name)
def test_the_readme_creates_every_secret_and_key_the_rendered_manifests_read_and_nothing_else(
    directory: Path, readme_secrets: dict[str, dict[str, str]]
) -> None:
    references = {r for r in _secret_references(directory) if r.secret != "maka-web-tls"}  # step 4: cert-manager

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
    key_file = tmp_path / "oauth.key"
    key_file.write_text(readme_secrets["maka-oauth-key"]["oauth.key"])
    assert len(read_key_file(key_file)) == 32
    answer_key = tmp_path / "answer.key"
    answer_key.write_text(readme_secrets["maka-answer-key"]["answer.key"])
    assert len(read_key_file(answer_key)) == 32
    secret_file = tmp_path / "web-secret"
    secret_file.write_text(readme_secrets["maka-web"]["secret"])
    assert WebSettings(web_secret_file=secret_file).shared_secret()
    assert len(readme_secrets["maka-redis"]["password"]) >= 32
    servers = tmp_path / "mcp.json"
    servers.write_text(readme_secrets["maka-mcp-servers"]["mcp.json"])
    assert [server.name for server in check_config(servers).servers] == ["examples"]
    for name, value in readme_secrets["maka-tokens"].items():
        if name.endswith("-token"):
            assert value == value.strip(), f"{name}: a newline would end up in the bearer header"


def test_the_readme_creates_the_namespace_before_its_secrets() -> None:
    text = README.read_text()
    command = "kubectl apply -f deploy/k8s/base/namespace.yaml"
    assert command in _readme_block(command)
    (document,) = list(yaml.safe_load_all((BASE / "namespace.yaml").read_text()))

    assert document["kind"] == "Namespace"
    assert document["metadata"]["name"] == "maka"
    assert text.index(command) < text.index("create secret generic maka-tokens")
    assert {d["metadata"].get("namespace", "maka") for d in _k8s_documents(OVERLAYS[0])} == {"maka"}


# --- OAuth: the provider's token key and token store -------------------------------------------


def _provider(directory: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return next((w, p, c) for w, p, c in _containers(directory) if _module(c) == "services.mcp_provider.main")


def _mount_of(container: dict[str, Any], path: str) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [m for m in container["volumeMounts"] if Path(path).is_relative_to(m["mountPath"])]
    (mount,) = mounts
    return mount


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_the_provider_reads_its_oauth_key_from_an_optional_secret_mounted_read_only_at_the_setting(
    directory: Path,
) -> None:
    _workload, pod, provider = _provider(directory)
    settings = _settings(ProviderSettings, _literal_env(provider))
    assert settings.oauth_key_file is not None

    mount = _mount_of(provider, str(settings.oauth_key_file))
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    source = volume["secret"]
    assert source["secretName"] == "maka-oauth-key"
    assert source["optional"] is True, "a cluster without the Secret still starts"
    assert settings.oauth_key_optional is True, "...and the provider then keeps tokens in memory"
    relative = settings.oauth_key_file.relative_to(mount["mountPath"]).as_posix()
    assert [(item["key"], item["path"]) for item in source["items"]] == [("oauth.key", relative)]
    assert source["defaultMode"] & 0o007 == 0, "no other user reads the key"


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
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


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
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


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_the_ingress_the_web_origin_and_the_oauth_redirect_name_one_public_host(directory: Path) -> None:
    ingress = _one(directory, "Ingress", "web")
    web = next(c for _w, _p, c in _containers(directory) if _module(c) == "surfaces.web.main")
    _workload, _pod, provider = _provider(directory)
    origin = _env(web)["MAKA_WEB_PUBLIC_ORIGIN"]["value"]

    (rule,) = ingress["spec"]["rules"]
    assert origin == f"https://{rule['host']}"
    assert [t["hosts"] for t in ingress["spec"]["tls"]] == [[rule["host"]]]
    assert _env(provider)["MAKA_OAUTH_REDIRECT_URI"]["value"] == f"{origin}/oauth/callback"


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda p: p.name)
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
