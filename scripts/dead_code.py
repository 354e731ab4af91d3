"""The dead-code check of ``make lint``: names the runtime and the client library define and nothing uses.

Every folder of the checkout is read (tests, bench, scripts and examples use names too), and only what the
product defines is reported: ``services/``, ``stack/``, ``surfaces/``, ``clients/python/src/maka_client``.
A name that a framework calls by convention (gRPC interceptors, Textual handlers, pydantic validators, the
MCP SDK's storage protocol) or that mirrors a wire enum is listed in :data:`FRAMEWORK` with the reason; every
other finding is code to delete. ``python -m scripts.dead_code`` exits 1 when it finds any.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["services", "stack", "surfaces", "clients/python/src/maka_client", "tests", "bench", "scripts", "examples"]
REPORTED = ("services/", "stack/", "surfaces/", "clients/python/src/maka_client/")
EXCLUDED = ["*/_gen/*", "*/node_modules/*", "gen/*"]
MIN_CONFIDENCE = 60

FRAMEWORK: dict[tuple[str, str], str] = {
    # gRPC calls these by name on the interceptor objects it is given.
    ("services/core/interceptors.py", "intercept_service"): "grpc.aio server interceptor",
    # Generated stubs ask their channel for each kind of multi-callable (grpc.aio.Channel's abstract methods).
    ("services/core/channels.py", "unary_stream"): "grpc.aio.Channel method, called by generated stubs",
    ("services/core/channels.py", "stream_unary"): "grpc.aio.Channel method, called by generated stubs",
    ("services/core/channels.py", "stream_stream"): "grpc.aio.Channel method, called by generated stubs",
    ("clients/python/src/maka_client/_channel.py", "unary_stream"): "grpc.aio.Channel method, called by stubs",
    ("clients/python/src/maka_client/_channel.py", "stream_unary"): "grpc.aio.Channel method, called by stubs",
    ("clients/python/src/maka_client/_channel.py", "stream_stream"): "grpc.aio.Channel method, called by stubs",
    # logging.Formatter reads a record's cached traceback text; the filter clears it with exc_info.
    ("surfaces/mcp/guards.py", "exc_text"): "logging.LogRecord attribute read by logging.Formatter",
    # sse_starlette's EventSourceResponse reads its ping interval from this class attribute.
    ("surfaces/mcp/keepalive.py", "DEFAULT_PING_INTERVAL"): "sse_starlette EventSourceResponse class attribute",
    # The MCP SDK's TokenStorage protocol (mcp.client.auth) calls it.
    ("services/mcp_provider/oauth.py", "set_client_info"): "mcp.client.auth TokenStorage",
    # pydantic runs validators by decorator; Textual reads class variables and calls handlers by name.
    ("services/interaction/settings.py", "_wait_within_max"): "pydantic validator",
    ("surfaces/web/settings.py", "_check_origin"): "pydantic validator",
    ("surfaces/web/settings.py", "_split_sessions"): "pydantic validator",
    ("services/core/settings.py", "_split_audiences"): "pydantic validator",
    ("services/core/settings.py", "_check_issuer"): "pydantic validator",
    ("services/core/settings.py", "_check_roles"): "pydantic validator",
    ("surfaces/common/asgi_server.py", "capture_signals"): "uvicorn.Server override",
    ("surfaces/mcp/settings.py", "_split_list"): "pydantic validator",
    ("surfaces/web/main.py", "should_exit"): "uvicorn.Server attribute",
    ("surfaces/mcp/main.py", "should_exit"): "uvicorn.Server attribute",
    ("surfaces/tui/app.py", "TITLE"): "Textual App class variable",
    ("surfaces/tui/app.py", "CSS_PATH"): "Textual App class variable",
    ("surfaces/tui/app.py", "BINDINGS"): "Textual key bindings",
    ("surfaces/tui/app.py", "on_mount"): "Textual handler",
    ("surfaces/tui/app.py", "on_unmount"): "Textual handler",
    ("surfaces/tui/widgets.py", "BINDINGS"): "Textual key bindings",
    ("surfaces/tui/widgets.py", "_button"): "Textual RadioButton override",
    ("surfaces/tui/widgets.py", "action_clear_filter"): "Textual action, bound by BINDINGS",
    # Values the Lua scripts return, decoded by value.
    ("services/interaction/store.py", "NOT_DUE"): "a Lua script's result code",
    ("services/interaction/store.py", "COLLISION"): "a Lua script's result code",
    # Mirrors of the protos' ErrorReason enums, tested equal member for member.
    ("services/core/reasons.py", "NOT_REGISTERED"): "mirror of a proto enum",
    ("clients/python/src/maka_client/_codes.py", "INCONSISTENT_PROVIDER"): "mirror of a proto enum",
    ("clients/python/src/maka_client/_codes.py", "PROVIDER_ERROR"): "mirror of a proto enum",
    ("clients/python/src/maka_client/_codes.py", "INVALID_ARGUMENTS"): "mirror of a proto enum",
    ("clients/python/src/maka_client/_codes.py", "NOT_REGISTERED"): "mirror of a proto enum",
}
"""(file, name) → why the name is used although no code of the checkout names it."""

TEXTUAL_HANDLER_PREFIXES = ("_on_", "_pressed_")
"""Textual ``@on(...)`` handlers of surfaces/tui (called by the decorator's registration, by name prefix)."""


def findings(root: Path = ROOT) -> list[str]:
    """One line per unused name the product defines (file:line name, vulture's confidence)."""
    vulture = Vulture()
    vulture.scavenge([str(root / path) for path in SCANNED if (root / path).exists()], exclude=EXCLUDED)
    out: list[str] = []
    for item in vulture.get_unused_code(min_confidence=MIN_CONFIDENCE):
        path = Path(item.filename).resolve().relative_to(root).as_posix()
        if not path.startswith(REPORTED) or (path, item.name) in FRAMEWORK:
            continue
        if path.startswith("surfaces/tui/") and item.name.startswith(TEXTUAL_HANDLER_PREFIXES):
            continue
        out.append(f"{path}:{item.first_lineno}: unused {item.typ} {item.name!r} ({item.confidence}% confidence)")
    return out


def main() -> int:
    found = findings()
    for line in found:
        print(line)
    if found:
        hint = "delete them, or list a framework callback in scripts/dead_code.py"
        print(f"dead code: {len(found)} unused name(s); {hint}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
