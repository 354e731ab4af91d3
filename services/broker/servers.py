"""The MCP servers providers report (``ReportServers``): what ``GetStatus`` and SERVER_UNAVAILABLE read.

Each open ``ReportServers`` stream is one :class:`Report` holding that provider process's latest
snapshot; a closed stream's report is dropped (its servers are no longer known). Messages built here
carry names, states and the provider's already bounded, secret-free causes only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from google.protobuf import timestamp_pb2

from maka.broker.v1 import broker_pb2
from services.core import messages

MAX_SERVERS_PER_REPORT = 1000
"""Servers one report may carry; more are dropped (counted by the caller)."""
MAX_CONFIG_LINES = 21
"""Config reload lines (problems or changes) one report may carry: the provider's 20 and its ``... and N
more`` line (services/mcp_provider/status.py); more are dropped."""
MAX_CONFIG_LINE_CHARS = 300
"""Longest kept config reload line (code points); longer ones are cut."""


@dataclass(eq=False)
class Report:
    """One provider process's latest ``ReportServersRequest`` and when it arrived."""

    request: broker_pb2.ReportServersRequest = field(default_factory=broker_pb2.ReportServersRequest)
    received: float = 0.0


class ServerTable:
    """Latest snapshot per open ``ReportServers`` stream."""

    def __init__(self) -> None:
        self._reports: set[Report] = set()

    def open(self) -> Report:
        """A new stream's (empty) report."""
        report = Report()
        self._reports.add(report)
        return report

    def update(self, report: Report, request: broker_pb2.ReportServersRequest) -> None:
        """Replace ``report``'s snapshot (servers beyond :data:`MAX_SERVERS_PER_REPORT` are dropped, config
        reload lines are cut to :data:`MAX_CONFIG_LINES` of :data:`MAX_CONFIG_LINE_CHARS`)."""
        if len(request.servers) > MAX_SERVERS_PER_REPORT:
            del request.servers[MAX_SERVERS_PER_REPORT:]
        for lines in (request.config_errors, request.config_changes):
            del lines[MAX_CONFIG_LINES:]
            lines[:] = [line[:MAX_CONFIG_LINE_CHARS] for line in lines]
        report.request = request
        report.received = time.time()

    def close(self, report: Report) -> None:
        """The stream ended: forget its servers."""
        self._reports.discard(report)

    def find(self, name: str) -> broker_pb2.ServerStatus | None:
        """The reported status of server ``name`` (a ready one wins when several providers report it)."""
        found: broker_pb2.ServerStatus | None = None
        for report in self._reports:
            for server in report.request.servers:
                if server.name == name and (found is None or server.state == broker_pb2.SERVER_STATE_READY):
                    found = server
        return found

    def servers(self) -> list[broker_pb2.ServerStatus]:
        """Every reported server, sorted by name."""
        return sorted((s for r in self._reports for s in r.request.servers), key=lambda s: s.name)

    def reporters(self) -> list[broker_pb2.ReporterStatus]:
        """One ``ReporterStatus`` per open stream that has sent a snapshot, sorted by id."""
        out = []
        for report in self._reports:
            if not report.received:
                continue
            stamp = timestamp_pb2.Timestamp()
            stamp.FromNanoseconds(int(report.received * 1e9))
            request = report.request
            out.append(
                broker_pb2.ReporterStatus(
                    reporter_id=request.reporter_id,
                    config_generation=request.config_generation,
                    config_errors=request.config_errors,
                    config_changes=request.config_changes,
                    report_time=stamp,
                    config_reload_time=(request.config_reload_time if request.HasField("config_reload_time") else None),
                )
            )
        return sorted(out, key=lambda r: r.reporter_id)


def refused(server: broker_pb2.ServerStatus) -> bool:
    """True when the reporter's registration of ``server`` was refused (another provider holds the name):
    a failed server whose cause starts ``refused by the broker:``."""
    return (
        server.state == broker_pb2.SERVER_STATE_FAILED
        and server.HasField("last_error")
        and messages.is_claim_refused(server.last_error.summary)
    )


def unavailable_message(server: broker_pb2.ServerStatus, now: float | None = None) -> str:
    """The SERVER_UNAVAILABLE text, worded by services/core/messages.py as the provider words it:
    ``MCP server NAME <state>: <cause>; next retry in N s``."""
    state = broker_pb2.ServerState.Name(server.state).removeprefix("SERVER_STATE_").lower()
    cause = server.last_error.summary if server.HasField("last_error") else None
    retry_in = None
    if server.HasField("next_retry_time"):
        retry_in = server.next_retry_time.ToNanoseconds() / 1e9 - (time.time() if now is None else now)
    return messages.server_unavailable(server.name, state, cause, retry_in)
