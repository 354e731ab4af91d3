"""``make compose-smoke``: the Dockerfile and docker-compose.yml run for real, under Podman, on this machine.

Installs what it needs (``deploy/compose/podman-setup.sh``: apt podman, runc, debootstrap; podman-compose into
the tool venv ``.tools/podman-compose``), builds a Debian trixie base without an image registry
(``deploy/compose/base-image.sh``), the Maka image on it and local Redis and nginx images from Debian's packages
(``deploy/compose/local-images.sh``), writes the secrets (``deploy/compose/secrets.sh``), brings the whole compose
file up with podman-compose, waits for every health check (``podman healthcheck run``: there is no systemd to
run them) and then checks it from outside, through the published loopback ports. One line per check, then
``N passed, N failed``; the exit status is 1 on any failure. deploy/README.md "What the smoke proves".

    python -m scripts.compose_smoke [--project P] [--keep] [--no-kube]

``MAKA_SMOKE_BASE=python:3.13-slim@sha256:...`` builds on a pulled base instead of the debootstrapped one.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from scripts.smoke_report import Report, log

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = ROOT / "docker-compose.yml"
SECRETS_DIR = COMPOSE_DIR / "secrets"
TOOL_VENV = ROOT / ".tools" / "podman-compose"
PODMAN_COMPOSE = ("podman-compose==1.6.0", "python-dotenv==1.2.4", "pyyaml==6.0.4")
MAKA = ROOT / ".venv" / "bin" / "maka"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

BASE_IMAGE = "localhost/maka-base:trixie"
IMAGE = "localhost/maka-runtime:smoke"
REDIS_IMAGE = "localhost/maka-redis:local"
NGINX_IMAGE = "localhost/maka-nginx:local"

HOSTS = {"host-0": "127.0.0.1:50052", "host-1": "127.0.0.1:50062", "host-2": "127.0.0.1:50072"}
POOL = "ipv4:" + ",".join(HOSTS.values())
FRONT_DOOR_HOST_1 = "http://127.0.0.1:8776/mcp"
WEB = "https://127.0.0.1:8443"
STAGING = json.dumps({"environment": "staging", "confirm": True})
FORM_ID = re.compile(r"\(([^()\s]+)\): answer it")
MAKA_UID = 10001
REDIS_UID = 999
WAIT = 180.0
"""A generous upper bound of every wait (this machine is shared): never a measurement to pass."""


def run(
    argv: Sequence[str | Path], *, timeout: float = 600, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False
    )
    if check and done.returncode != 0:
        command = shlex.join(str(a) for a in argv)
        raise RuntimeError(f"{command} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-1500:]}")
    return done


def podman(*argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["podman", *argv], timeout=timeout, check=check)


def eventually(what: str, probe: Callable[[], Any], within: float = WAIT, every: float = 1.0) -> Any:
    """``probe()``'s first truthy result, retried until ``within`` seconds passed (its last error is reported)."""
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            result = probe()
            if result:
                return result
            last = result
        except Exception as error:
            last = error
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {within:.0f} s (last: {last!r})")
        time.sleep(every)


class Smoke:
    def __init__(self, project: str) -> None:
        self.project = project
        self.network = f"{project}_default"
        self.env = {
            **os.environ,
            "MAKA_IMAGE": IMAGE,
            "MAKA_REDIS_IMAGE": REDIS_IMAGE,
            "MAKA_NGINX_IMAGE": NGINX_IMAGE,
        }

    # --- the tools ------------------------------------------------------------------------------------

    def compose(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        tool = TOOL_VENV / "bin" / "podman-compose"
        return run([tool, "-p", self.project, "-f", COMPOSE_FILE, *argv], timeout=timeout, env=self.env)

    def containers(self, *, running: bool = True) -> dict[str, dict[str, Any]]:
        """Container name → ``podman inspect`` of every container of the project."""
        listed = podman(
            "ps", *([] if running else ["-a"]), "--filter", f"label=io.podman.compose.project={self.project}",
            "--format", "{{.Names}}",
        ).stdout.split()  # fmt: skip
        if not listed:
            return {}
        return {c["Name"]: c for c in json.loads(podman("inspect", *listed).stdout)}

    def container(self, service: str, number: int = 1) -> str:
        return f"{self.project}_{service}_{number}"

    def maka_call(self, tool: str, args: dict[str, Any] | None, *, broker: str, session: str) -> subprocess.Popen[str]:
        argv = [str(MAKA), "call", tool, "--broker", broker, "--session", session]
        if args is not None:
            argv += ["--args", json.dumps(args)]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)

    def tier(self, *argv: str, timeout: float = 90) -> str:
        """``maka ARGV`` against the Interaction tier, from a throwaway container on the project's network (the
        tier's port is not published: two replicas, as in Kubernetes, where only pods reach it)."""
        return podman(
            "run", "--rm", "--network", self.network, "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", IMAGE,
            "maka", *argv, "--interaction", "dns:///interaction:50051", timeout=timeout,
        ).stdout  # fmt: skip

    def pending(self, session: str, host: str) -> list[dict[str, Any]]:
        out = self.tier("pending", "--json", "--session", session, "--host-id", host)
        forms: list[dict[str, Any]] = json.loads(out or "[]")
        return forms

    def one_form(self, session: str, host: str) -> str:
        forms = eventually(f"a form of {session} pending on {host}", lambda: self.pending(session, host), every=2)
        form_id: str = forms[0]["id"]
        return form_id

    def answer_staging(self, form_id: str, host: str) -> None:
        self.tier("answer", form_id, "accept", "--values", STAGING, "--host-id", host)

    def healthy(self) -> bool:
        """Runs every container's health check once (no systemd timers here); True when all pass."""
        unhealthy = [name for name, c in self.containers(running=False).items() if not c["State"]["Running"]]

        def passes(name: str) -> bool:
            done = podman("healthcheck", "run", name, check=False, timeout=60)
            return done.returncode == 0 or "no defined healthcheck" in done.stderr

        names = list(self.containers())
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            unhealthy += [name for name, ok in zip(names, pool.map(passes, names), strict=True) if not ok]
        return not unhealthy

    def wait_healthy(self, within: float = WAIT) -> None:
        eventually("every health check passing", self.healthy, within=within, every=2)

    def ping(self, broker: str) -> str:
        call = self.maka_call("examples:ping", None, broker=broker, session=f"smoke-ping-{uuid.uuid4().hex[:6]}")
        out, err = call.communicate(timeout=60)
        if out.strip() != "pong":
            raise RuntimeError(f"ping via {broker}: {err.strip()[-300:]}")
        return err

    def wait_serving(self, hosts: Sequence[str] = tuple(HOSTS)) -> None:
        for host in hosts:
            eventually(f"{host} answering examples:ping", functools.partial(self.ping, HOSTS[host]), every=2)

    def grace(self) -> dict[str, float]:
        """Service → its ``stop_grace_period`` in seconds, as podman-compose resolves the file."""
        config = yaml.safe_load(self.compose("config").stdout)
        graces: dict[str, float] = {}
        for name, service in config["services"].items():
            value = str(service.get("stop_grace_period", "10s"))
            graces[name] = float(value.removesuffix("s"))
        return graces


# --- preparing ----------------------------------------------------------------------------------------


def prepare(smoke: Smoke, report: Report, base: str | None) -> None:
    run([COMPOSE_DIR / "podman-setup.sh"], timeout=900)
    if not (TOOL_VENV / "bin" / "podman-compose").exists():
        run([sys.executable, "-m", "venv", TOOL_VENV])
        run([TOOL_VENV / "bin" / "pip", "install", "-q", *PODMAN_COMPOSE], timeout=600)
    started = time.monotonic()
    if base is None:
        run([COMPOSE_DIR / "base-image.sh", BASE_IMAGE], timeout=900)
        base = BASE_IMAGE
        report.measured["base_image_seconds"] = round(time.monotonic() - started, 1)
    mount = ["-v", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"] if CA_BUNDLE.exists() else []
    started = time.monotonic()
    podman("build", "-q", *mount, "--build-arg", f"PYTHON_IMAGE={base}", "-t", IMAGE, str(ROOT), timeout=1200)
    report.measured["image_build_seconds"] = round(time.monotonic() - started, 1)
    size = int(podman("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip())
    report.measured["image_bytes"] = size
    run([COMPOSE_DIR / "local-images.sh", base], timeout=900)
    run([COMPOSE_DIR / "secrets.sh", SECRETS_DIR])
    log(f"prepared: base {base}, image {IMAGE} {size / 1e6:.0f} MB built in {report.measured['image_build_seconds']} s")


# --- the checks ---------------------------------------------------------------------------------------


def spki_hash(certificate: Path) -> str:
    """base64 SHA-256 of the certificate's public key, for Chromium's ``--ignore-certificate-errors-spki-list``."""
    key = run(["openssl", "x509", "-in", certificate, "-pubkey", "-noout"]).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"], input=key.encode(), capture_output=True, check=True
    ).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def check_web_deploy(smoke: Smoke, details: list[str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    certificate = SECRETS_DIR / "tls.crt"
    context = ssl.create_default_context(cafile=str(certificate))
    with (
        socket.create_connection(("127.0.0.1", 8443), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        details.append(f"nginx serves the smoke's certificate ({tls.version()})")
    session = f"smoke-web-{uuid.uuid4().hex[:8]}"
    call = smoke.maka_call("examples:deploy", {"artifact": "smoke-web"}, broker=HOSTS["host-0"], session=session)
    try:
        with sync_playwright() as playwright:
            # Chromium trusts exactly the smoke's certificate (its public key), nothing else.
            args = [*CHROMIUM_ARGS, f"--ignore-certificate-errors-spki-list={spki_hash(certificate)}"]
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
            try:
                page = browser.new_page()
                page.goto(WEB + "/")
                card = page.locator(f'article.card[data-session="{session}"]')
                expect(card).to_have_count(1, timeout=90_000)
                card.get_by_label("environment").select_option("staging")
                card.get_by_label("confirm").get_by_role("radio", name="Yes").check()
                card.get_by_role("button", name="Submit").click()
                out, err = call.communicate(timeout=90)
            finally:
                browser.close()
    finally:
        if call.returncode is None:
            call.kill()
            call.communicate()
    if out.strip() != "Deployed smoke-web to staging.":
        raise AssertionError(f"the call printed {out.strip()!r}: {err.strip()[-300:]}")
    details.append(out.strip())


def check_pool(smoke: Smoke, details: list[str]) -> None:
    for host, broker in HOSTS.items():
        smoke.ping(broker)
        details.append(f"{host} pong")
    seen = set()
    for _ in range(6):
        err = smoke.ping(POOL)
        seen.update(re.findall(r"Host (host-\d)", err))
    if not seen:
        raise AssertionError("the pool's calls named no Host")
    details.append(f"the pool of 3 answered pong, from {', '.join(sorted(seen))}")


async def _front_door_deploy(smoke: Smoke) -> str:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    form: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        found = FORM_ID.search(message or "")
        if found and not form.done():
            form.set_result(found.group(1))

    http = httpx2.AsyncClient(timeout=120)
    transport = streamable_http_client(FRONT_DOOR_HOST_1, http_client=http)
    async with http, Client(transport, mode="auto") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        if "examples.deploy" not in tools:
            raise AssertionError(f"host-1's front door lists {sorted(tools)}")
        call = asyncio.ensure_future(
            client.call_tool("examples.deploy", {"artifact": "smoke-mcp"}, progress_callback=progress)
        )
        waited: set[asyncio.Future[Any]] = {call, form}
        async with asyncio.timeout(WAIT):
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if not form.done():
            raise AssertionError(f"the call ended before its form was pending: {call.result()}")
        await asyncio.to_thread(smoke.answer_staging, form.result(), "host-1")
        async with asyncio.timeout(WAIT):
            result = await call
    if result.is_error:
        raise AssertionError(f"the call failed: {result}")
    return "\n".join(block.text for block in result.content if block.type == "text")


def check_front_door(smoke: Smoke, details: list[str]) -> None:
    text = asyncio.run(_front_door_deploy(smoke))
    if text.strip() != "Deployed smoke-mcp to staging.":
        raise AssertionError(f"the front door returned {text!r}")
    details.append(f"mcp SDK client on {FRONT_DOOR_HOST_1}, form answered with maka answer: {text.strip()}")


def _stop_in_background(smoke: Smoke, services: Sequence[str]) -> threading.Thread:
    def stop() -> None:
        smoke.compose("stop", *services, timeout=WAIT)

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    return thread


def check_host_drain(smoke: Smoke, details: list[str]) -> None:
    session = f"smoke-drain-{uuid.uuid4().hex[:8]}"
    call = smoke.maka_call("examples:deploy", {"artifact": "smoke-drain"}, broker=HOSTS["host-2"], session=session)
    try:
        form_id = smoke.one_form(session, "host-2")
        services = ("host-2-mcp", "host-2-provider", "host-2")
        started = time.monotonic()
        stopping = _stop_in_background(smoke, services)
        broker = smoke.container("host-2")
        eventually(
            "host-2's broker draining", lambda: "broker_draining" in podman("logs", "--tail", "40", broker).stderr
        )
        smoke.answer_staging(form_id, "host-2")
        out, err = call.communicate(timeout=WAIT)
        answered = time.monotonic() - started
        stopping.join(WAIT)
        stopped = time.monotonic() - started
    finally:
        if call.returncode is None:
            call.kill()
            call.communicate()
    if out.strip() != "Deployed smoke-drain to staging.":
        raise AssertionError(f"the call printed {out.strip()!r}: {err.strip()[-400:]}")
    states = smoke.containers(running=False)
    for service in services:
        state = states[smoke.container(service)]["State"]
        if state["Running"] or state["ExitCode"] != 0:
            raise AssertionError(f"{service} after stop: running={state['Running']} exit {state['ExitCode']}")
    details.append(f"answered during the drain, the call completed {answered:.1f} s after stop began")
    details.append(f"host-2 stopped cleanly in {stopped:.1f} s (grace 55 s)")
    started = time.monotonic()
    # One container at a time: Podman 4.3's `start A B C` (podman-compose start's) refuses containers whose
    # running dependencies (here Redis, the tier) are not in the same list.
    for service in reversed(services):
        podman("start", smoke.container(service))
    smoke.wait_healthy()
    smoke.wait_serving(["host-2"])
    details.append(f"started again and serving in {time.monotonic() - started:.1f} s")


def check_redis_restart(smoke: Smoke, details: list[str]) -> None:
    session = f"smoke-redis-{uuid.uuid4().hex[:8]}"
    call = smoke.maka_call("examples:deploy", {"artifact": "smoke-redis"}, broker=HOSTS["host-0"], session=session)
    try:
        form_id = smoke.one_form(session, "host-0")
        time.sleep(2)  # past AOF's everysec fsync
        podman("restart", smoke.container("redis"), timeout=WAIT)
        smoke.wait_healthy()
        after = eventually("the form pending after the restart", lambda: smoke.pending(session, "host-0"), every=2)
        if [form["id"] for form in after] != [form_id]:
            raise AssertionError(f"after the restart the session has {after}, not {form_id}")
        details.append(f"form {form_id} still pending after the restart")

        def answer() -> bool:
            smoke.answer_staging(form_id, "host-0")
            return True

        eventually("the form answered", answer, every=3, within=90)
        out, err = call.communicate(timeout=WAIT)
    finally:
        if call.returncode is None:
            call.kill()
            call.communicate()
    if out.strip() != "Deployed smoke-redis to staging.":
        raise AssertionError(f"the call printed {out.strip()!r}: {err.strip()[-400:]}")
    details.append(out.strip())


def _processes(pid: int) -> list[int]:
    """``pid`` and all its descendants (the host's view of a container's processes)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo.extend(int(child) for child in (task / "children").read_text().split())
    return found


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _locked() -> dict[str, str]:
    """Name → version of every requirements/run.lock entry whose marker holds on this image (Linux, 3.13)."""
    from packaging.markers import Marker

    environment = {"python_version": "3.13", "python_full_version": "3.13.5", "sys_platform": "linux"}
    environment |= {"platform_system": "Linux", "os_name": "posix", "platform_python_implementation": "CPython"}
    environment |= {"implementation_name": "cpython", "platform_machine": os.uname().machine}
    locked = {}
    for line in (ROOT / "requirements" / "run.lock").read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)\s*(?:;\s*([^\\]+))?", line)
        if found and (not found.group(3) or Marker(found.group(3).strip()).evaluate(environment)):
            locked[re.sub(r"[-_.]+", "-", found.group(1)).lower()] = found.group(2)
    return locked


def check_facts(smoke: Smoke, details: list[str]) -> None:
    containers = smoke.containers()
    secrets = [
        value
        for path in SECRETS_DIR.iterdir()
        if path.name != "tls.crt"
        for value in [path.read_text().strip(), *path.read_text().splitlines()[1:-1]]
        if len(value) >= 16
    ]
    problems: list[str] = []
    maka = [name for name, c in containers.items() if c["ImageName"] == IMAGE]
    for name, inspected in containers.items():
        if any(secret in json.dumps(inspected) for secret in secrets):
            problems.append(f"{name}: a secret in podman inspect")
        pid = int(inspected["State"]["Pid"])
        for process in _processes(pid):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                seen = Path(f"/proc/{process}/environ").read_bytes() + Path(f"/proc/{process}/cmdline").read_bytes()
                if any(secret.encode() in seen for secret in secrets):
                    problems.append(f"{name}: a secret in the environment or command line of pid {process}")
        if name not in maka and not name.startswith(smoke.container("redis")[:-1]):
            continue
        uid = MAKA_UID if name in maka else REDIS_UID
        if name in maka and Path(f"/proc/{pid}/comm").read_text().strip() != "tini":
            problems.append(f"{name}: PID 1 is {Path(f'/proc/{pid}/comm').read_text().strip()}")
        for process in _processes(pid):
            with contextlib.suppress(FileNotFoundError):
                status = _status(process)
                if {int(u) for u in status["Uid"].split()} != {uid}:
                    problems.append(f"{name}: pid {process} runs as uid {status['Uid']}")
                for capability in ("CapEff", "CapPrm", "CapBnd"):
                    if int(status[capability], 16):
                        problems.append(f"{name}: pid {process} has {capability} {status[capability]}")
        if not inspected["HostConfig"]["ReadonlyRootfs"]:
            problems.append(f"{name}: its root filesystem is writable")
        probe = podman("exec", name, "sh", "-c", "echo x > /smoke-probe", check=False)
        if probe.returncode == 0 or "Read-only" not in probe.stderr:
            problems.append(f"{name}: writing / gave {probe.returncode} {probe.stderr.strip()}")
    sbom = json.loads(podman("exec", maka[0], "cat", "/usr/share/maka/sbom.pip-inspect.json").stdout)
    installed = {
        re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item["metadata"]["version"]
        for item in sbom["installed"]
    }
    for name, version in _locked().items():
        if installed.get(name) != version:
            problems.append(f"SBOM: {name} {installed.get(name)} (locked {version})")
    for tool in ("pip", "hatchling"):
        if tool in installed:
            problems.append(f"SBOM: the runtime venv carries {tool}")
    # Nothing of the build stage: no build venv, wheels, pip cache or configuration, no installer in /opt/maka.
    leftovers = podman(
        "run", "--rm", "--user", "0", "--entrypoint", "sh", IMAGE, "-c",
        "for p in /opt/build /wheels /src /root/.cache/pip /etc/pip.conf /root/.config/pip /root/.netrc "
        "/opt/maka/bin/pip /opt/maka/bin/hatchling; do [ -e $p ] && echo $p; done; true",
    ).stdout.split()  # fmt: skip
    if leftovers:
        problems.append(f"the image carries {leftovers}")
    debian = podman("exec", maka[0], "cat", "/usr/share/maka/sbom.debian-packages.txt").stdout
    if not re.search(r"^tini ", debian, re.MULTILINE):
        problems.append("SBOM: the Debian package list has no tini")
    if problems:
        raise AssertionError("; ".join(problems[:12]) + (f" (+{len(problems) - 12})" if len(problems) > 12 else ""))
    details.append(f"{len(maka)} Maka containers: PID 1 tini, uid {MAKA_UID}, read-only root, no capabilities")
    details.append(f"Redis as uid {REDIS_UID}, read-only, no capabilities")
    details.append(f"SBOM lists the {len(_locked())} locked versions; no secret in inspect, environ or cmdline")
    details.append("no build venv, wheels, pip, pip cache or configuration in the image")


def check_stop(smoke: Smoke, details: list[str]) -> None:
    """Every container stopped at once, each with its own grace (podman-compose's `stop` does them one by one)."""
    graces = smoke.grace()
    containers = smoke.containers()
    took: dict[str, float] = {}

    def stop(name: str, grace: float) -> None:
        started = time.monotonic()
        podman("stop", "-t", str(int(grace)), name, timeout=grace + 60)
        took[name] = time.monotonic() - started

    threads = []
    for name, inspected in containers.items():
        service = inspected["Config"]["Labels"]["com.docker.compose.service"]
        thread = threading.Thread(target=stop, args=(name, graces[service]), daemon=True)
        thread.start()
        threads.append((name, graces[service], thread))
    for _, grace, thread in threads:
        thread.join(grace + 90)
    after = smoke.containers(running=False)
    problems = []
    for name, grace, _ in threads:
        state = after[name]["State"]
        if name not in took or took[name] >= grace or state["Running"] or state["ExitCode"] != 0:
            problems.append(f"{name}: exit {state['ExitCode']} after {took.get(name, -1):.1f} s (grace {grace:.0f} s)")
    if problems:
        raise AssertionError("; ".join(problems))
    slowest = max(took, key=lambda name: took[name])
    details.append(f"{len(took)} containers exited 0 within their grace; slowest {slowest} {took[slowest]:.1f} s")


def check_down(smoke: Smoke, details: list[str]) -> None:
    smoke.compose("down", "-v", timeout=WAIT)
    left = smoke.containers(running=False)
    label = f"label=io.podman.compose.project={smoke.project}"
    networks = [n for n in podman("network", "ls", "--format", "{{.Name}}").stdout.split() if n == smoke.network]
    volumes = podman("volume", "ls", "--filter", label, "--format", "{{.Name}}").stdout.split()
    volumes += [
        v for v in podman("volume", "ls", "--format", "{{.Name}}").stdout.split() if v.startswith(smoke.project)
    ]
    if left or networks or volumes:
        raise AssertionError(
            f"left behind: containers {sorted(left)}, networks {networks}, volumes {sorted(set(volumes))}"
        )
    details.append("no container, network or volume of the project left")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--project", default="makasmoke", help="the compose project name (default makasmoke)")
    parser.add_argument("--keep", action="store_true", help="leave the project running (no stop, no down)")
    parser.add_argument("--no-kube", action="store_true", help="skip the podman kube play part")
    options = parser.parse_args(argv)
    report = Report()
    smoke = Smoke(options.project)
    started = time.monotonic()
    try:
        prepare(smoke, report, os.environ.get("MAKA_SMOKE_BASE") or None)
    except Exception as error:
        log(f"FAIL prepare: {error}")
        log("0 passed, 1 failed")
        return 1
    with contextlib.suppress(Exception):
        smoke.compose("down", "-v", timeout=WAIT)  # a previous run's leftovers
    # SIGTERM (a test's timeout, CI's cancel) unwinds like an error, so the project still comes down.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    down = False
    try:
        up = time.monotonic()
        with report.check("up: every container healthy and every Host serving") as details:
            smoke.compose("up", "-d", timeout=WAIT)
            smoke.wait_healthy()
            healthy = time.monotonic() - up
            smoke.wait_serving()
            serving = time.monotonic() - up
            report.measured |= {"healthy_seconds": round(healthy, 1), "serving_seconds": round(serving, 1)}
            details.append(
                f"{len(smoke.containers())} containers healthy in {healthy:.1f} s, serving in {serving:.1f} s"
            )
        checks: list[tuple[str, Callable[[Smoke, list[str]], None]]] = [
            ("1 examples:deploy on host-0 answered in Chromium on the nginx TLS page", check_web_deploy),
            ("2 examples:ping across the pool of three Hosts", check_pool),
            ("3 host-1's MCP front door with the mcp SDK client, answered with maka answer", check_front_door),
            ("4 a form answered while host-2 drains; host-2 back", check_host_drain),
            ("5 a form pending across a Redis restart (AOF)", check_redis_restart),
            ("6 container facts: tini, uid, read-only, capabilities, SBOM, secrets", check_facts),
        ]
        for name, function in checks:
            with report.check(name) as details:
                function(smoke, details)
        if not options.keep:
            with report.check("6 stop: every container exits 0 within its grace period") as details:
                check_stop(smoke, details)
            with report.check("7 down -v leaves nothing behind") as details:
                check_down(smoke, details)
            down = True
    finally:
        if not down and not options.keep:
            with contextlib.suppress(Exception):
                smoke.compose("down", "-v", timeout=WAIT)
    if not options.no_kube and not options.keep:
        from scripts.kube_smoke import kube_checks

        started_kube = time.monotonic()
        kube_checks(report, IMAGE, REDIS_IMAGE)
        report.measured["kube_seconds"] = round(time.monotonic() - started_kube, 1)
    report.measured["smoke_seconds"] = round(time.monotonic() - started, 1)
    log("measured: " + json.dumps(report.measured))
    log(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
