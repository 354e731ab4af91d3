"""MCP server status as every surface shows it (``maka status``, the web page, the TUI).

The data is the broker's ``GetStatus`` (filled by the providers' ``ReportServers`` streams; see
:mod:`services.mcp_provider.status`). :func:`server_json` is the one JSON shape (``maka status
--json``, the web page's ``/api/status``); :func:`server_lines` the one human rendering.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from maka.broker.v1 import broker_pb2
from maka_client import BrokerClient
from services.core.channels import open_channel
from surfaces.common.wire import same

STATUS_TIMEOUT_SECONDS = 5.0

STATE_NAMES: dict[int, str] = {
    broker_pb2.SERVER_STATE_CONNECTING: "connecting",
    broker_pb2.SERVER_STATE_READY: "ready",
    broker_pb2.SERVER_STATE_FAILED: "failed",
    broker_pb2.SERVER_STATE_WAITING_FOR_SIGN_IN: "waiting for sign-in",
    broker_pb2.SERVER_STATE_DISABLED: "disabled",
    broker_pb2.SERVER_STATE_DRAINING: "draining",
}


async def fetch_status(
    broker: str, *, token: str | None = None, metadata: Sequence[tuple[str, str]] = ()
) -> broker_pb2.GetStatusResponse:
    """The broker's ``GetStatus``. ``token`` defaults to ``MAKA_CALLER_TOKEN`` or ``MAKA_SURFACE_TOKEN``;
    ``metadata`` is added to the call (the web page's ``x-maka-acts-for``: the broker then lists only the calls
    that person may see).

    Raises :class:`maka_client.MakaError`."""
    token = token or os.environ.get("MAKA_CALLER_TOKEN") or os.environ.get("MAKA_SURFACE_TOKEN") or None
    async with open_channel(broker, token=token) as channel:
        client = BrokerClient(broker, channel=channel)
        client.metadata = (*client.metadata, *metadata)
        status = await client.get_status(timeout=STATUS_TIMEOUT_SECONDS)
    return same(broker_pb2.GetStatusResponse, status)


def _seconds(stamp: Any) -> float:
    return float(stamp.ToNanoseconds()) / 1e9


def server_json(server: broker_pb2.ServerStatus, now: float | None = None) -> dict[str, Any]:
    """One server as JSON: name, state, transport, era, protocolVersion, tools, liveCalls, failures,
    lastError {summary, causes, httpStatus, stderrTail, time} | null, nextRetryInSeconds | null."""
    now = time.time() if now is None else now
    error: dict[str, Any] | None = None
    if server.HasField("last_error"):
        last = server.last_error
        error = {
            "summary": last.summary,
            "causes": list(last.causes),
            "httpStatus": last.http_status or None,
            "stderrTail": list(last.stderr_tail),
            "time": _seconds(last.time),
        }
    retry = None
    if server.HasField("next_retry_time") and server.state == broker_pb2.SERVER_STATE_FAILED:
        retry = round(max(0.0, _seconds(server.next_retry_time) - now), 1)
    return {
        "name": server.name,
        "state": STATE_NAMES.get(server.state, "unknown"),
        "transport": server.transport,
        "era": server.era,
        "protocolVersion": server.protocol_version or None,
        "tools": server.tool_count,
        "liveCalls": server.live_calls,
        "failures": server.failures,
        "lastError": error,
        "nextRetryInSeconds": retry,
    }


def call_json(call: broker_pb2.CallSummary) -> dict[str, Any]:
    """One call of an activity list: ids, Tool, state, failure code (``SERVER_ERROR`` ...) or
    ``isError``, its form ids and times. Never arguments, results or form values."""
    failure = (
        broker_pb2.FailureCode.Name(call.failure_code).removeprefix("FAILURE_CODE_")
        if call.failure_code != broker_pb2.FAILURE_CODE_UNSPECIFIED
        else None
    )
    return {
        "invocationId": call.invocation_id,
        "sessionId": call.session_id,
        "turnId": call.turn_id,
        "tool": call.tool_name,
        "state": call.state,
        "failureCode": failure,
        "isError": call.is_error,
        "interactionIds": list(call.interaction_ids),
        "startTime": _seconds(call.start_time),
        "endTime": _seconds(call.end_time) if call.HasField("end_time") else None,
    }


def config_json(reporter: broker_pb2.ReporterStatus) -> dict[str, Any]:
    """One provider's config: the ``generation`` it runs, ``errors`` / ``changes`` of its last reload
    (as reported), and ``lastReload`` {time, outcome ``applied`` | ``rejected``, problems, changes} or
    null when no reload happened since it started. A rejected reload changed nothing: ``generation`` is
    still the config that runs, and the file on disk differs from it."""
    last: dict[str, Any] | None = None
    if reporter.HasField("config_reload_time"):
        rejected = bool(reporter.config_errors)
        last = {
            "time": _seconds(reporter.config_reload_time),
            "outcome": "rejected" if rejected else "applied",
            "problems": list(reporter.config_errors),
            "changes": [] if rejected else list(reporter.config_changes),
        }
    return {
        "reporter": reporter.reporter_id,
        "generation": reporter.config_generation,
        "errors": list(reporter.config_errors),
        "changes": list(reporter.config_changes),
        "lastReload": last,
    }


def status_json(response: broker_pb2.GetStatusResponse, now: float | None = None) -> dict[str, Any]:
    """The broker part of ``maka status --json``: servers, config reloads, broker gauges."""
    return {
        "servers": [server_json(s, now) for s in response.servers],
        "config": [config_json(r) for r in response.reporters],
        "broker": {
            "liveInvocations": response.live_invocations,
            "liveRegistrations": response.live_registrations,
            "pendingForms": response.pending_forms,
        },
    }


def server_lines(server: broker_pb2.ServerStatus, now: float | None = None) -> list[str]:
    """A server in human lines: a summary line, then the cause, the exception chain and the child's
    stderr (indented) when it failed."""
    data = server_json(server, now)
    parts = [data["state"], data["transport"]]
    parts.append(data["protocolVersion"] or f"era {data['era']}")
    parts.append(f"{data['tools']} Tool{'s' if data['tools'] != 1 else ''}")
    if data["liveCalls"]:
        parts.append(f"{data['liveCalls']} call{'s' if data['liveCalls'] != 1 else ''} in flight")
    if data["failures"]:
        parts.append(f"{data['failures']} failed attempt{'s' if data['failures'] != 1 else ''}")
    if data["nextRetryInSeconds"] is not None:
        parts.append(f"next retry in {data['nextRetryInSeconds']:.0f} s")
    lines = [f"{data['name']}: " + ", ".join(parts)]
    error = data["lastError"]
    if error is not None and data["state"] != "ready":
        lines.append(f"    cause: {error['summary']}")
        if error["httpStatus"]:
            lines.append(f"    HTTP status: {error['httpStatus']}")
        for cause in error["causes"]:
            if cause != error["summary"]:
                lines.append(f"    chain: {cause}")
        for line in error["stderrTail"]:
            lines.append(f"    stderr: {line}")
    elif error is not None:
        lines.append(f"    last error (recovered): {error['summary']}")
    return lines
