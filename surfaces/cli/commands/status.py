"""``maka status``: what runs and what does not, with the real cause (docs/operations.md#status).

``maka status [--json] [--state-dir DIR]`` shows, for the stack found in ``DIR/endpoints.json``:

- each service's health (``grpc.health.v1`` of the Interaction service, broker and MCP provider; an
  HTTP answer from the web surface and the MCP front door);
- each configured MCP server (from the broker's ``GetStatus``, reported by the provider): state
  (connecting, ready, failed, waiting for sign-in, disabled, draining), transport, negotiated protocol
  version (or the configured era), Tool count, calls in flight, failed attempts and the next retry; for a
  server that is not ready, the last error's real cause (the flattened exception chain, the HTTP status,
  the stdio child's last stderr lines), bounded and secret-free;
- the config each MCP provider runs (its generation) and its last reload: when, applied (its changes)
  or rejected (one line per problem, bounded and secret-free: paths and messages, never a value; the
  previous config keeps running);
- the number of pending forms (``maka pending`` lists them) and the forms the broker waits on;
- the attached surfaces (the Interaction service's ``ListSurfaces``, every replica's Attach streams):
  per surface its kind (``web``, ``tui``, ... as the surface says), its token's name (never the token),
  the sessions it watches (or all), when it attached and its replica;
- form notifications when they are on (docs/operations.md#notifications): sent, failed and dropped counts, and
  each failing target (kind, scheme and host only, never the URL's secret path), since when and its last error.
- who you are signed in as (``maka login``): the person at ``MAKA_OIDC_ISSUER`` whose token this and every
  other command present, until when, and whether it renews (or the sign-ins stored for other issuers, unused).

Exit codes: 0 every service serves, every enabled server is ready, the last reload (if any) was
applied and no notification target is failing; 1 something is not (the output says what; a rejected reload
counts: the file on disk is not what runs); 3 no stack runs there or the broker cannot be asked (``NO_STACK`` /
gRPC status name first on stderr).

``maka status --broker TARGET [--json]`` shows the Hosts of ``TARGET`` instead, each asked on its own: every
Host of a team's pool (``dns:///team-a-host:50052``, ``ipv4:A,B``; docs/clients.md "Pools of Hosts"), or the
one Host a ``host:port`` names: its id, address, state (``serving``: takes new calls; ``DRAINING``: takes no new
calls while its running calls and their forms finish; ``not ready``: no provider registered yet, or shutting
down; ``unreachable``), calls running and the forms they wait on. Exit codes: 0 every Host answered and one at
least takes new calls; 1 a Host did not answer or none takes new calls; 3 none answered (or the name did not
resolve).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from maka.broker.v1 import broker_pb2
from maka_client import BrokerClient, HostStatus, MakaError
from services.core import healthcheck
from stack.probes import http_ok
from stack.state_dir import Endpoints, read_endpoints, read_notify_status
from surfaces.common import target as cli_target
from surfaces.common.interactions import Interactions, surface_json
from surfaces.common.login import Credentials, LoginSettings
from surfaces.common.server_status import fetch_status, server_lines, status_json
from surfaces.common.target import add_state_dir_argument
from surfaces.common.untrusted import display_text

NAME = "status"
HELP = "show services, MCP servers (state, cause, next retry), config reloads, pending forms and attached surfaces"

EXIT_OK = 0
EXIT_DEGRADED = 1
EXIT_FAILED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--json``, ``--broker`` and ``--state-dir``."""
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--broker",
        default=None,
        type=cli_target.address,
        metavar="TARGET",
        help="show every Host of this pool (dns:///NAME:PORT, ipv4:A,B) or this one Host (HOST:PORT) instead of "
        "the local stack",
    )
    add_state_dir_argument(parser)


async def _health(endpoints: Endpoints) -> dict[str, dict[str, Any]]:
    async def grpc_state(address: str) -> str:
        if not address:
            return "unknown"
        return "serving" if await healthcheck.serving(address, "", timeout=2.0) else "not serving"

    services: dict[str, dict[str, Any]] = {}
    for name, address in (
        ("interaction", endpoints.interaction),
        ("broker", endpoints.broker),
        ("provider", endpoints.provider),
    ):
        services[name] = {"address": address, "state": await grpc_state(address)}
    if endpoints.web:
        services["web"] = {"address": endpoints.web, "state": "serving" if await http_ok(endpoints.web) else "down"}
    if endpoints.mcp:  # the MCP front door answers its health path beside /mcp
        healthy = await http_ok(urljoin(endpoints.mcp, "/healthz"))
        services["mcp"] = {"address": endpoints.mcp, "state": "serving" if healthy else "down"}
    return services


async def _pending(endpoints: Endpoints) -> int | None:
    try:
        async with Interactions.connect(endpoints.interaction) as client:
            return len(await client.pending())
    except MakaError:
        return None


async def _surfaces(endpoints: Endpoints) -> dict[str, Any] | None:
    """The attached surfaces the caller may see (``ListSurfaces``), or None when it cannot be asked."""
    try:
        async with Interactions.connect(endpoints.interaction) as client:
            surfaces, omitted = await client.list_surfaces()
    except MakaError:
        return None
    return {"attached": [surface_json(s) for s in surfaces], "omitted": omitted}


async def collect(
    endpoints: Endpoints, state_dir: Path | None = None
) -> tuple[dict[str, Any], broker_pb2.GetStatusResponse]:
    """Everything ``maka status`` shows, as JSON, and the broker's raw answer (notifications from ``state_dir``'s
    status file). Raises :class:`maka_client.MakaError` when the broker cannot be asked."""
    status = await fetch_status(endpoints.broker)
    services, pending, surfaces = await asyncio.gather(_health(endpoints), _pending(endpoints), _surfaces(endpoints))
    data = {
        "host": endpoints.host_id,
        "services": services,
        **status_json(status),
        "pendingForms": pending,
        "surfaces": surfaces,
        "notifications": read_notify_status(state_dir) if state_dir is not None else None,
    }
    return data, status


def healthy(data: dict[str, Any]) -> bool:
    """Every service serving, every enabled MCP server ready and no reload rejected (the file on disk
    is what runs)."""
    services_ok = all(s["state"] in ("serving", "unknown") for s in data["services"].values())
    servers_ok = all(s["state"] in ("ready", "disabled") for s in data["servers"])
    config_ok = not any(c["lastReload"] and c["lastReload"]["outcome"] == "rejected" for c in data["config"])
    notify = data.get("notifications")
    notify_ok = notify is None or not any(t["failingSince"] for t in notify["targets"])
    return services_ok and servers_ok and config_ok and notify_ok


def render(data: dict[str, Any], status: broker_pb2.GetStatusResponse, now: float | None = None) -> str:
    """The human rendering (see the module docstring)."""
    lines = [f"Host {data['host']}"]
    lines.append("services:")
    for name, service in data["services"].items():
        lines.append(f"  {name:<12} {service['state']:<12} {service['address']}")
    lines.append("MCP servers:" if status.servers else "MCP servers: none reported (is the MCP provider running?)")
    for server in status.servers:
        lines.extend("  " + line for line in server_lines(server, now))
    lines.extend(config_lines(data["config"], now))
    pending = data["pendingForms"]
    lines.append(
        f"pending forms: {pending if pending is not None else 'unknown'}"
        f" (the broker waits on {data['broker']['pendingForms']}; `maka pending` lists them)"
    )
    lines.append(f"calls in flight: {data['broker']['liveInvocations']}")
    lines.extend(surface_lines(data["surfaces"]))
    lines.extend(notification_lines(data.get("notifications"), now))
    if "signedIn" in data:
        lines.extend(sign_in_lines(data["signedIn"]))
    return "\n".join(lines)


def _when(stamp: float, now: float | None) -> str:
    text = datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if now is not None:
        text += f" ({max(0.0, now - stamp):.0f} s ago)"
    return text


def config_lines(configs: list[dict[str, Any]], now: float | None = None) -> list[str]:
    """The config each MCP provider runs and its last reload: when, applied (its changes) or rejected
    (one line per problem; the previous config keeps running)."""
    lines = []
    for config in configs:
        who = f" ({config['reporter']})" if len(configs) > 1 else ""
        last = config["lastReload"]
        if last is None:
            lines.append(f"config{who}: generation {config['generation']}, as started (no reload since)")
        elif last["outcome"] == "rejected":
            lines.append(
                f"config{who}: last reload REJECTED at {_when(last['time'], now)}; still running generation"
                f" {config['generation']}, the previous config (the file differs from what runs):"
            )
            lines.extend(f"  problem: {problem}" for problem in last["problems"])
        else:
            changes = "; ".join(last["changes"]) if last["changes"] else "no changes"
            lines.append(
                f"config{who}: generation {config['generation']}, last reload applied at"
                f" {_when(last['time'], now)}: {changes}"
            )
    return lines


def surface_lines(surfaces: dict[str, Any] | None) -> list[str]:
    """``attached surfaces: N`` then one line per surface: kind, token name, sessions, since, replica."""
    if surfaces is None:
        return ["attached surfaces: unknown (the Interaction service did not answer)"]
    attached = surfaces["attached"]
    more = f" (+{surfaces['omitted']} not listed)" if surfaces["omitted"] else ""
    lines = [f"attached surfaces: {len(attached)}{more}"]
    for surface in attached:
        sessions = surface["sessions"]
        watched = "all sessions" if sessions == "all" else "sessions " + ", ".join(sessions)
        if sessions != "all" and surface["sessionCount"] > len(sessions):
            watched += f" (+{surface['sessionCount'] - len(sessions)} more)"
        lines.append(
            f"  {surface['kind']:<10} {surface['principal']:<16} {watched}; since {surface['attachedAt']}"
            f" (replica {surface['replica']})"
        )
    return lines


def notification_lines(notify: dict[str, Any] | None, now: float | None = None) -> list[str]:
    """``notifications: N sent, F failed, D dropped, K failing`` then one line per failing target: since when,
    kind, scheme and host (the status file holds nothing else of a URL) and the last error. Nothing when
    notifications are off."""
    if notify is None:
        return []
    targets = notify["targets"]
    failing = [t for t in targets if t["failingSince"]]
    total = {key: sum(int(t[key]) for t in targets) for key in ("sent", "failed", "dropped")}
    lines = [
        f"notifications: {total['sent']} sent, {total['failed']} failed, {total['dropped']} dropped,"
        f" {len(failing)} of {len(targets)} target(s) failing"
    ]
    for target in failing:
        lines.append(
            f"  failing since {_when(float(target['failingSince']), now)}: {target['kind']} {target['target']}"
            f" {target['lastError'] or ''}".rstrip()
        )
    return lines


HOSTS_TIMEOUT_SECONDS = 5.0
TOKEN_ENV = "MAKA_CALLER_TOKEN"


async def collect_hosts(target: str) -> dict[str, Any]:
    """Every Host of ``target`` (a pool, or one Host) as JSON: ``target``, ``pool`` and ``hosts``, each
    ``{hostId, address, state, callsRunning, pendingForms, error}``. Raises :class:`maka_client.MakaError` when a
    ``dns:`` pool does not resolve."""
    token = os.environ.get(TOKEN_ENV) or os.environ.get("MAKA_SURFACE_TOKEN") or None
    async with BrokerClient.from_env(target, token=token) as client:
        hosts = await client.hosts(timeout=HOSTS_TIMEOUT_SECONDS)
        pool = client.pool
    return {"target": target, "pool": pool, "hosts": [host_json(host) for host in hosts]}


def host_json(host: HostStatus) -> dict[str, Any]:
    """One Host of ``maka status --broker``'s JSON."""
    return {
        "hostId": host.host_id or None,
        "address": host.address,
        "state": host.state,
        "callsRunning": host.live_invocations,
        "pendingForms": host.pending_forms,
        "error": host.error or None,
    }


def hosts_exit_code(data: dict[str, Any]) -> int:
    """0 every Host answered and one takes new calls; 1 a Host did not answer or none takes new calls; 3 none
    answered."""
    states = [host["state"] for host in data["hosts"]]
    if all(state == "unreachable" for state in states):
        return EXIT_FAILED
    if "unreachable" in states or "serving" not in states:
        return EXIT_DEGRADED
    return EXIT_OK


def render_hosts(data: dict[str, Any]) -> str:
    """``maka status --broker``'s human rendering: one line per Host."""
    hosts = data["hosts"]
    serving = sum(host["state"] == "serving" for host in hosts)
    kind = "pool" if data["pool"] else "Host"
    lines = [f"{kind} {data['target']}: {len(hosts)} Host(s), {serving} taking new calls"]
    for host in hosts:
        state = "DRAINING" if host["state"] == "draining" else host["state"]
        line = f"  {host['hostId'] or '?':<20} {state:<11} {host['address']}"
        if host["state"] == "unreachable":
            lines.append(f"{line}  did not answer ({host['error']})")
            continue
        line += f"  calls running: {host['callsRunning']}, pending forms: {host['pendingForms']}"
        if host["state"] == "draining":
            line += " (no new calls; its running calls and their forms are still served)"
        lines.append(line)
    return "\n".join(lines)


def run_hosts(args: argparse.Namespace, target: str) -> int:
    """``maka status --broker TARGET``: every Host of the pool (see the module docstring)."""
    try:
        data = asyncio.run(collect_hosts(target))
    except MakaError as error:
        print(f"{error.code}: {error.message}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(display_text(render_hosts(data), multiline=True))  # Host ids are the Hosts' own text
    return hosts_exit_code(data)


def signed_in(now: float | None = None) -> dict[str, Any]:
    """Who ``maka`` commands act as (``maka login``): ``{"issuer", "person"}`` (the person is None when nobody signed
    in at ``MAKA_OIDC_ISSUER``, whose sign-in is used), plus ``"others"``: sign-ins stored for other issuers."""
    try:
        settings = LoginSettings()
    except ValueError:
        settings = LoginSettings.model_construct()
    stored = Credentials.from_settings(settings).load()
    issuer = settings.oidc_issuer
    used = stored.pop(issuer, None) if issuer else None
    return {
        "issuer": issuer or None,
        "person": used.describe(now) if used is not None else None,
        "others": [entry.describe(now) for entry in stored.values()],
    }


def sign_in_lines(data: dict[str, Any]) -> list[str]:
    """``signed in as NAME at ISSUER (until …)``, or who is not, without ever showing a token."""
    lines = []
    person = data["person"]
    if person is not None:
        until = "expired, renews on use" if person["expired"] and person["renewable"] else _until(person)
        lines.append(f"signed in as {person['person']} at {person['issuer']} ({until})")
    elif data["issuer"]:
        lines.append(f"signed in: nobody at {data['issuer']} (`maka login` signs you in)")
    for other in data["others"]:
        hint = f"not used: MAKA_OIDC_ISSUER={other['issuer']} acts as them"
        lines.append(f"signed in as {other['person']} at {other['issuer']} ({hint})")
    return lines


def _until(person: dict[str, Any]) -> str:
    if person["expired"]:
        return "expired: run `maka login`"
    return f"until {_when(person['expiresAt'], None)}" + (", renews" if person["renewable"] else "")


def run(args: argparse.Namespace) -> int:
    """Print the status; see the module docstring for output and exit codes."""
    if args.broker:
        return run_hosts(args, args.broker)
    try:
        endpoints = read_endpoints(args.state_dir)
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return EXIT_FAILED
    try:
        data, status = asyncio.run(collect(endpoints, args.state_dir))
    except MakaError as error:
        print(f"{error.code}: the broker at {endpoints.broker} did not answer GetStatus", file=sys.stderr)
        return EXIT_FAILED
    data["signedIn"] = signed_in()
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(display_text(render(data, status, time.time()), multiline=True))  # causes quote servers
    return EXIT_OK if healthy(data) else EXIT_DEGRADED
