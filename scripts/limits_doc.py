"""Print (or check) the table of repository caps, read from the constants that enforce them.

``python -m scripts.limits_doc`` prints the Markdown table that ``docs/limits.md`` carries between the
``<!-- limits:begin -->`` and ``<!-- limits:end -->`` markers; ``--write`` replaces that block in the page;
``--check`` exits 1 when the page is out of date (run by the test suite). Every value comes from the code:
a field of :class:`services.core.limits.Limits`, a module constant next to the code it bounds, or the
default of a setting (then the row names its ``MAKA_*`` variable). Every ``Limits`` field has a row.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic_settings import BaseSettings

from scripts.doc_block import ROOT, DocBlock
from services.broker import arguments, servers, validation
from services.broker.broker import RECENT_CALLS, Broker
from services.broker.settings import Settings as BrokerSettings
from services.core import json_text
from services.core import limits as core_limits
from services.core.limits import DEFAULT_LIMITS, Limits
from services.core.settings import GrpcServerSettings
from services.interaction import presence
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider import causes, config, manager
from services.mcp_provider import status as provider_status
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.web import app as web_app
from surfaces.web.settings import WebSettings


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


def count(value: float) -> str:
    return _number(value)


def chars(value: int) -> str:
    return f"{_number(value)} code points"


def size(value: int) -> str:
    """Bytes as KiB or MiB when they divide evenly."""
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if value % factor == 0:
            return f"{_number(value // factor)} {unit}"
    return f"{_number(value)} bytes"


def seconds(value: float) -> str:
    return f"{_number(value)} s"


Unit = Callable[[Any], str]
"""How a value is written: :func:`count`, :func:`chars`, :func:`size` or :func:`seconds`."""


@dataclass(frozen=True)
class Cap:
    """One row: what is bounded, the bound, the code that defines it, and what checks it."""

    what: str
    value: str
    source: str
    checked_by: str


def _limit(what: str, field: str, unit: Unit, checked_by: str) -> Cap:
    """A field of :class:`Limits`."""
    return Cap(what, unit(getattr(DEFAULT_LIMITS, field)), f"`Limits.{field}`", checked_by)


def _setting(what: str, cls: type[BaseSettings], field: str, unit: Unit, checked_by: str) -> Cap:
    """The default of a setting; the row names its variable."""
    variable = (str(cls.model_config.get("env_prefix", "")) + field).upper()
    return Cap(what, unit(cls.model_fields[field].default), f"`{variable}` (default)", checked_by)


def _constant(what: str, module: ModuleType, name: str, unit: Unit, checked_by: str) -> Cap:
    """A module constant next to the code it bounds."""
    where = Path(inspect.getfile(module)).resolve().relative_to(ROOT).as_posix()
    return Cap(what, unit(getattr(module, name)), f"`{where}` `{name}`", checked_by)


def caps() -> list[Cap]:
    """Every documented cap, in the order of the data path: the form, the answer, the MRTR round, the broker,
    the provider's reports, the Interaction service."""
    recent_limit = inspect.signature(Broker.recent_calls).parameters["limit"].default
    return [
        _limit(
            "`elicitation/create` params (message + `requestedSchema`) as JSON",
            "max_request_bytes",
            size,
            "form decoding",
        ),
        _limit("Fields per form", "max_fields", count, "form decoding"),
        _limit(
            "Options per select field (the TUI and the web page filter as you type)",
            "max_options",
            count,
            "form decoding",
        ),
        _limit("Form message", "max_message_chars", chars, "form decoding"),
        _limit("Field / option label, property name, requester text", "max_label_chars", chars, "form decoding"),
        _limit("Option value", "max_option_value_chars", chars, "form decoding"),
        _limit("Field description", "max_description_chars", chars, "form decoding"),
        _limit("One string answer value (implicit `maxLength`)", "max_string_value_chars", chars, "answer validation"),
        _limit("Answer values as JSON", "max_answer_bytes", size, "answer validation"),
        _constant(
            "Answer request body of the web page (the answer values plus ids and framing)",
            web_app,
            "MAX_ANSWER_BODY_BYTES",
            size,
            "web surface",
        ),
        _constant(
            "Nesting of JSON text users and callers send (answers, Tool arguments)",
            json_text,
            "MAX_DEPTH",
            count,
            "JSON decoding",
        ),
        _limit("`inputRequests` entries per round", "max_input_requests_per_round", count, "MCP provider"),
        _limit("`inputRequests` as JSON per round", "max_total_input_request_bytes", size, "MCP provider"),
        _limit("`inputRequests` key", "max_input_key_chars", chars, "MCP provider"),
        _limit("`requestState`", "max_request_state_bytes", size, "MCP provider"),
        _setting(
            "Retries after the first `tools/call` leg (`Limits.max_rounds` when not configured)",
            ProviderSettings,
            "max_rounds",
            count,
            "MCP provider",
        ),
        _constant(
            "`requestStateTtl` of a server (mcpServers key)",
            config,
            "MAX_REQUEST_STATE_TTL_SECONDS",
            seconds,
            "MCP config",
        ),
        _constant(
            "`timeout` of a server read as seconds (larger values are milliseconds)",
            config,
            "MAX_TIMEOUT_SECONDS",
            seconds,
            "MCP config",
        ),
        _constant(
            "A server's JSON-RPC error message passed on (control characters stripped, `requestState` cut out)",
            manager,
            "MAX_SERVER_MESSAGE_CHARS",
            chars,
            "MCP provider",
        ),
        _constant("Failure cause: exceptions kept from one chain", causes, "MAX_CAUSES", count, "MCP provider"),
        _constant(
            "Failure cause: characters per line (also per stdio stderr line)",
            causes,
            "MAX_LINE_CHARS",
            chars,
            "MCP provider",
        ),
        _constant("Failure cause: stdio stderr lines kept", causes, "MAX_STDERR_LINES", count, "MCP provider"),
        _constant(
            'Problems of a rejected reload reported (then "... and N more problems")',
            provider_status,
            "MAX_RELOAD_PROBLEMS",
            count,
            "MCP provider",
        ),
        _constant("Characters per reload line kept by the broker", servers, "MAX_CONFIG_LINE_CHARS", chars, "broker"),
        _constant("Servers per `ReportServers` snapshot", servers, "MAX_SERVERS_PER_REPORT", count, "broker"),
        _constant(
            "Session / turn / tool-use / provider id, Tool name", core_limits, "MAX_ID_CHARS", chars, "all services"
        ),
        _constant(
            "MCP front door: HTTP request body", core_limits, "MAX_MCP_REQUEST_BODY_BYTES", size, "MCP front door"
        ),
        _constant("Provider failure / progress message", validation, "MAX_MESSAGE_CHARS", chars, "broker"),
        _constant("Provider display name", validation, "MAX_DISPLAY_NAME_CHARS", chars, "broker"),
        _constant(
            '`INVALID_ARGUMENTS` problems listed (then "and N more")', arguments, "MAX_PROBLEMS", count, "broker"
        ),
        _setting(
            "Live invocations per provider registration",
            BrokerSettings,
            "max_invocations_per_provider",
            count,
            "broker",
        ),
        _setting("Per-stream outgoing queue (frames)", BrokerSettings, "stream_queue_size", count, "broker"),
        Cap(
            "Recent calls kept / returned by `GetStatus`",
            f"{count(RECENT_CALLS)} / {count(recent_limit)}",
            "`services/broker/broker.py` `RECENT_CALLS` / `Broker.recent_calls(limit)`",
            "broker",
        ),
        _setting("gRPC message, received or sent", GrpcServerSettings, "max_message_bytes", size, "every gRPC service"),
        _setting(
            "Wait for an `Attach` stream's subscribe frame",
            InteractionSettings,
            "attach_subscribe_timeout_seconds",
            seconds,
            "Interaction service",
        ),
        _setting(
            "Wait for a `HostLink` stream's hello frame",
            InteractionSettings,
            "host_link_hello_timeout_seconds",
            seconds,
            "Interaction service",
        ),
        _setting(
            "Failed `POST /login` / `?token=` attempts per local user (loopback) or client address per minute",
            WebSettings,
            "web_login_attempts_per_minute",
            count,
            "web surface",
        ),
        _setting(
            "Pending form wait (default)", InteractionSettings, "form_wait_seconds", seconds, "Interaction service"
        ),
        _setting(
            "Pending form wait a broker may ask for",
            InteractionSettings,
            "form_wait_max_seconds",
            seconds,
            "Interaction service",
        ),
        _setting(
            "Attached surfaces listed by `ListSurfaces` (the rest counted)",
            InteractionSettings,
            "surfaces_listed_max",
            count,
            "Interaction service",
        ),
        _constant(
            "Session ids listed per attached surface", presence, "MAX_SESSIONS_LISTED", count, "Interaction service"
        ),
        _constant("Surface kind (`Subscribe.surface_kind`)", presence, "MAX_KIND_CHARS", chars, "Interaction service"),
    ]


def uncovered_limits() -> list[str]:
    """The :class:`Limits` fields no row names (a new cap in ``services/core/limits.py`` needs a row)."""
    named = " ".join(f"{cap.what} {cap.source}" for cap in caps())
    return [field.name for field in dataclasses.fields(Limits) if f"`Limits.{field.name}`" not in named]


def render() -> str:
    """The Markdown table (without markers)."""
    lines = ["| Cap | Value | Defined by | Checked by |", "| --- | --- | --- | --- |"]
    lines += [f"| {cap.what} | {cap.value} | {cap.source} | {cap.checked_by} |" for cap in caps()]
    return "\n".join(lines) + "\n"


BLOCK = DocBlock("docs/limits.md", "limits", render, "python -m scripts.limits_doc")
"""The caps' place: ``docs/limits.md``."""


def main(argv: list[str]) -> int:
    """CLI: no args prints, ``--write`` updates docs/limits.md, ``--check`` verifies it."""
    return BLOCK.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
