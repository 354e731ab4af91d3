"""The Kubernetes pods as written, under ``podman kube play`` (part of ``make compose-smoke``; deploy/README.md
"The compose smoke").

Renders ``deploy/k8s/overlays/example`` with ``kubectl kustomize`` and turns the pod templates of Redis (the
``redis`` StatefulSet), the Interaction tier (the ``interaction`` Deployment) and one Host (team-a's ``host``
StatefulSet, ordinal 0) into ``Pod`` documents; the Secrets are the ones deploy/README.md's step 3 creates (its
commands, run with ``kubectl create --dry-run=client``). It plays them on the smoke's images and checks that
every startup, readiness and liveness probe passes as specified, that ``args:`` reach the image's tini, that the
security context holds, and that a call goes through with team-a's caller token.

What ``podman kube play`` (Podman 4.3) cannot express is rewritten, and the smoke prints each rewrite:
:data:`REWRITES`.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from scripts.smoke_report import Report

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "deploy" / "k8s" / "overlays" / "example"
README = ROOT / "deploy" / "README.md"
NETWORK = "makakube"
SUBNET = "10.89.77.0/24"
ADDRESSES = {"redis-0": "10.89.77.10", "interaction": "10.89.77.11", "team-a-host-0": "10.89.77.12"}
NAMES = {
    "redis-0": ["redis-0.redis", "redis"],
    "interaction": ["interaction"],
    "team-a-host-0": ["team-a-host-0.team-a-host", "team-a-hosts"],
}
"""The Service names each pod answers to in a cluster (no Services under kube play: ``hostAliases`` instead)."""
WORKLOADS = {("StatefulSet", "redis"): "redis-0", ("Deployment", "interaction"): "interaction"}
WORKLOADS |= {("StatefulSet", "team-a-host"): "team-a-host-0"}
DROPPED_CONTAINERS = {"exporter"}
WAIT = 180.0

REWRITES = (
    "StatefulSet/Deployment → Pod: the pod template as a Pod named as its first replica (kube play runs Pods)",
    "Secret volumes → hostPath directories holding the README's Secrets (kube play 4.3 mounts no Secret)",
    "secretKeyRef / secretRef environment → literal values from the same Secrets",
    "volumeClaimTemplates → persistentVolumeClaim volumes (<template>-<pod>: a Podman volume each)",
    "Services → hostAliases on one Podman network with fixed addresses (kube play has no Service kind)",
    "gRPC and httpGet probes run by the smoke inside the container (Podman 4.3 turns only liveness into a "
    "health check and has no grpc probe)",
    "containerPorts left out: kube play 4.3 publishes each on the host (the probes' named ports are resolved "
    "from the manifests first)",
    "init containers of type always (io.podman.annotations.init.container.type): Podman 4.3 fails removing "
    "a `once` init container that it still sees running",
    "Redis's exporter sidecar left out (its image cannot be pulled here; no local stand-in is built)",
    "$(VAR) references in env values stay unexpanded (MAKA_ADVERTISE_ADDRESS): no reattach through it here",
)


def _run(
    argv: list[str], *, timeout: float = 300, check: bool = True, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT, **kwargs)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-1200:]}")
    return done


def _readme_block(containing: str) -> str:
    for block in README.read_text().split("```sh\n")[1:]:
        body = block.split("```", 1)[0]
        if containing in body:
            lines = body.splitlines()
            indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
            return "\n".join(line[indent:] for line in lines) + "\n"
    raise LookupError(f"no sh block of deploy/README.md contains {containing!r}")


def readme_secrets(work: Path) -> dict[str, dict[str, str]]:
    """Every Secret deploy/README.md's step 3 creates: name → key → value (``kubectl create --dry-run=client``)."""
    (work / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "mcp.json", work / "examples" / "mcp.json")
    for team in ("team-a", "team-b"):
        (work / f"{team}.mcp.env").write_text("EXAMPLE_KEY=unused\n")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    out = work / "created.yaml"
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise RuntimeError("kubectl is missing: run `make setup-node`")
    wrapper = bin_dir / "kubectl"
    wrapper.write_text(f'#!/bin/sh\necho --- >> "{out}"\nexec "{kubectl}" "$@" --dry-run=client -o yaml >> "{out}"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    script = _readme_block("create secret generic maka-tokens")
    subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env, check=True, capture_output=True)
    secrets: dict[str, dict[str, str]] = {}
    for document in (d for d in yaml.safe_load_all(out.read_text()) if d):
        data = {k: base64.b64decode(v).decode() for k, v in document.get("data", {}).items()}
        secrets[document["metadata"]["name"]] = data
    return secrets


def as_pod(
    workload: dict[str, Any], name: str, secrets: dict[str, dict[str, str]], work: Path, images: dict[str, str]
) -> dict[str, Any]:
    """``workload``'s pod template as a Pod that kube play runs (:data:`REWRITES`)."""
    template = copy.deepcopy(workload["spec"]["template"])
    spec: dict[str, Any] = template["spec"]
    for key in ("topologySpreadConstraints", "affinity"):
        spec.pop(key, None)
    spec["containers"] = [c for c in spec["containers"] if c["name"] not in DROPPED_CONTAINERS]
    volumes = []
    for volume in spec.get("volumes", []):
        secret = volume.get("secret")
        if secret is None:
            volumes.append(volume)
            continue
        directory = work / "secrets" / name / volume["name"]
        directory.mkdir(parents=True)
        data = secrets.get(secret["secretName"], {})
        items = secret.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            if item["key"] in data:
                (directory / item["path"]).write_text(data[item["key"]])
                # Rootful Podman keeps host owners: readable by the pod's user, in a directory only root lists.
                (directory / item["path"]).chmod(0o644)
        volumes.append({"name": volume["name"], "hostPath": {"path": str(directory), "type": "Directory"}})
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        volumes.append(
            {
                "name": claim["metadata"]["name"],
                "persistentVolumeClaim": {"claimName": f"{claim['metadata']['name']}-{name}"},
            }
        )
    spec["volumes"] = volumes
    spec["hostAliases"] = [{"ip": ADDRESSES[pod], "hostnames": NAMES[pod]} for pod in ADDRESSES]
    for container in spec.get("initContainers", []) + spec["containers"]:
        # Podman 4.3 publishes every containerPort on the host (a hostPort of the same number): none here.
        container.pop("ports", None)
        base = container["image"].split("@")[0].rsplit(":", 1)[0]
        container["image"] = images.get(base.rsplit("/", 1)[-1], container["image"])
        env = []
        for variable in container.get("env", []):
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                value = secrets.get(ref["name"], {}).get(ref["key"])
                if value is not None:
                    env.append({"name": variable["name"], "value": value})
            elif variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env.append({"name": variable["name"], "value": name})
            else:
                env.append(variable)
        for source in container.pop("envFrom", []):
            ref = source.get("secretRef")
            env += [{"name": k, "value": v} for k, v in secrets.get(ref["name"], {}).items()] if ref else []
        container["env"] = env
    metadata: dict[str, Any] = {"name": name, "labels": template["metadata"].get("labels", {})}
    if spec.get("initContainers"):
        metadata["annotations"] = {"io.podman.annotations.init.container.type": "always"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _probe_command(probe: dict[str, Any], ports: dict[str, int]) -> list[str]:
    if "exec" in probe:
        return list(probe["exec"]["command"])
    if "grpc" in probe:
        command = ["python", "-m", "services.core.healthcheck", f"127.0.0.1:{probe['grpc']['port']}"]
        return command + ([probe["grpc"]["service"]] if probe["grpc"].get("service") else [])
    if "httpGet" in probe:
        port = probe["httpGet"]["port"]
        url = f"http://127.0.0.1:{ports.get(port, port)}{probe['httpGet'].get('path', '/')}"
        return ["python3", "-c", f"import urllib.request; urllib.request.urlopen({url!r}, timeout=3)"]
    if "tcpSocket" in probe:
        port = probe["tcpSocket"]["port"]
        port = ports.get(port, port)
        return ["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 3).close()"]
    raise ValueError(f"an unknown probe {probe}")


def _probes(workloads: dict[str, dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """(container, probe kind, command) for every probe of every played container, as the manifests write them."""
    found = []
    for name, workload in workloads.items():
        for container in workload["spec"]["template"]["spec"]["containers"]:
            if container["name"] in DROPPED_CONTAINERS:
                continue
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                if kind in container:
                    found.append((f"{name}-{container['name']}", kind, _probe_command(container[kind], ports)))
    return found


def _probe_passes(container: str, command: list[str]) -> bool:
    return _run(["podman", "exec", container, *command], check=False, timeout=30).returncode == 0


def _eventually(what: str, probe: Callable[[], Any], within: float = WAIT) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {within:.0f} s (last: {result!r})")
        time.sleep(2)


@contextlib.contextmanager
def played(pods: dict[str, dict[str, Any]], work: Path) -> Iterator[None]:
    _run(["podman", "network", "rm", "-f", NETWORK], check=False)
    _run(["podman", "network", "create", "--subnet", SUBNET, NETWORK])
    files = []
    try:
        for name, pod in pods.items():
            file = work / f"{name}.yaml"
            file.write_text(yaml.safe_dump(pod, sort_keys=False))
            files.append(file)
            _run(["podman", "kube", "play", "--network", NETWORK, "--ip", ADDRESSES[name], str(file)], timeout=300)
        yield
    finally:
        for file in reversed(files):
            _run(["podman", "kube", "down", str(file)], check=False, timeout=300)
        for pod in pods.values():
            for volume in pod["spec"]["volumes"]:
                if "persistentVolumeClaim" in volume:
                    _run(["podman", "volume", "rm", "-f", volume["persistentVolumeClaim"]["claimName"]], check=False)
        _run(["podman", "network", "rm", "-f", NETWORK], check=False)


def kube_checks(report: Report, image: str, redis_image: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="maka-kube-"))
    work.chmod(0o700)
    try:
        _kube_checks(report, image, redis_image, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kube_checks(report: Report, image: str, redis_image: str, work: Path) -> None:
    pods: dict[str, dict[str, Any]] = {}
    workloads: dict[str, dict[str, Any]] = {}
    with report.check("8 kube: the pods of deploy/k8s rendered for podman kube play") as details:
        rendered = _run(["kubectl", "kustomize", str(OVERLAY)]).stdout
        secrets = readme_secrets(work / "readme")
        images = {"maka-runtime": image, "redis": redis_image}
        for document in (d for d in yaml.safe_load_all(rendered) if d):
            key = (document["kind"], document["metadata"]["name"])
            if key in WORKLOADS:
                workloads[WORKLOADS[key]] = document
                pods[WORKLOADS[key]] = as_pod(document, WORKLOADS[key], secrets, work, images)
        if sorted(pods) != sorted(ADDRESSES):
            raise AssertionError(f"rendered {sorted(pods)}")
        details.append(f"{', '.join(sorted(pods))} from {len(secrets)} README Secrets")
        for rewrite in REWRITES:
            print(f"     kube play cannot express it as written: {rewrite}", flush=True)
    if len(pods) != len(ADDRESSES):
        return
    caller = secrets["team-a-tokens"]["caller-token"]
    with played(pods, work):
        with report.check("8 kube: every startup, readiness and liveness probe passes as specified") as details:
            probes = _probes(workloads)

            last: list[str] = []

            def all_pass() -> bool:
                last[:] = [f"{c} {kind}" for c, kind, command in probes if not _probe_passes(c, command)]
                return not last

            try:
                _eventually("every probe passing", all_pass, within=300)
            except TimeoutError as error:
                raise AssertionError(f"{error}; failing: {last}") from None
            details.append(
                f"{len(probes)} probes of {sum(len(p['spec']['containers']) for p in pods.values())} containers"
            )
        with report.check("8 kube: args reach tini; securityContext, volume mounts accepted") as details:
            problems = []
            for name, pod in pods.items():
                for container in pod["spec"]["containers"]:
                    inspected = json.loads(_run(["podman", "inspect", f"{name}-{container['name']}"]).stdout)[0]
                    pid = inspected["State"]["Pid"]
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                    if container["image"] == image:
                        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                        argv = Path(f"/proc/{children[0]}/cmdline").read_text().split("\0")[:-1] if children else []
                        if comm != "tini" or argv != container["args"]:
                            problems.append(f"{name}/{container['name']}: PID 1 {comm}, child {argv}")
                    status = dict(
                        line.split(":\t", 1)
                        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if ":\t" in line
                    )
                    user = pod["spec"]["securityContext"]["runAsUser"]
                    if (
                        status["Uid"].split()[0] != str(user)
                        or int(status["CapEff"], 16)
                        or not inspected["HostConfig"]["ReadonlyRootfs"]
                    ):
                        read_only = inspected["HostConfig"]["ReadonlyRootfs"]
                        problems.append(
                            f"{name}/{container['name']}: uid {status['Uid']} CapEff {status['CapEff']} ro {read_only}"
                        )
                    wanted = {m["mountPath"] for m in container.get("volumeMounts", [])}
                    mounted = {m["Destination"] for m in inspected["Mounts"]}
                    if wanted - mounted:
                        problems.append(f"{name}/{container['name']}: not mounted {sorted(wanted - mounted)}")
            if problems:
                raise AssertionError("; ".join(problems))
            details.append("tini runs each container's args; runAsUser, no capabilities, read-only root, every mount")
        with report.check("8 kube: a call through team-a-host-0 with team-a's caller token") as details:

            def ping() -> str | None:
                done = _run(
                    ["podman", "run", "--rm", "--network", NETWORK, "-e", f"MAKA_CALLER_TOKEN={caller}", image,
                     "maka", "call", "examples:ping", "--broker", f"{ADDRESSES['team-a-host-0']}:50052"],
                    check=False, timeout=90,
                )  # fmt: skip
                return done.stdout.strip() if done.stdout.strip() == "pong" else None

            _eventually("examples:ping through the Host pod", ping)
            details.append("examples:ping → pong")
