"""The ``mcpServers`` configuration format MCP hosts already use, plus Maka's optional ``era``.

Shape (JSON)::

    {"mcpServers": {
        "<name>": {"command": "python", "args": ["srv.py"], "env": {"K": "V"}, "cwd": "/dir", "era": "auto"},
        "<name>": {"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Key": "v"}, "era": "modern"}
    }}

A server entry is stdio (``command`` with optional ``args``/``env``/``cwd``) or Streamable HTTP
(``url`` with optional ``headers``; ``type`` ``"http"``/``"streamable-http"`` is accepted). ``era`` is
``auto`` (default: ``server/discover`` then fall back to ``initialize``), ``modern`` (2026-07-28
only) or ``legacy`` (``initialize`` handshake only). ``requestStateTtl`` (seconds, a positive number,
default 600: what the official server SDKs give a ``requestState``) is how long after it *receives* a
round's ``requestState`` the Host still collects that round's forms; every form of the round shows that
one deadline, and a round that can no longer finish in time is closed instead of collecting input the
server would reject (docs/acceptance.md, issue 16 finding 2). Unknown keys are rejected: every problem is a
:class:`ConfigError` naming the JSON path (``mcpServers.<name>.<key>``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Era(StrEnum):
    """Which MCP protocol era to speak (MCP 2026-07-28 ``basic/versioning`` "eras")."""

    AUTO = "auto"
    MODERN = "modern"
    LEGACY = "legacy"


class ConfigError(ValueError):
    """The configuration does not have the exact ``mcpServers`` shape; ``path`` names the place."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class StdioServer:
    """An MCP server launched as a subprocess and spoken to over stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    cwd: str | None = None


@dataclass(frozen=True)
class HttpServer:
    """An MCP server reached over Streamable HTTP."""

    url: str
    headers: dict[str, str] = field(default_factory=lambda: dict[str, str]())


@dataclass(frozen=True)
class ServerConfig:
    """One configured MCP server: its name (the ``SERVER`` of ``SERVER:TOOL``), transport and era."""

    name: str
    transport: StdioServer | HttpServer
    era: Era = Era.AUTO
    request_state_ttl_seconds: float = 600.0
    """``requestStateTtl``: the round deadline is this long after the round's ``requestState`` arrived."""


DEFAULT_REQUEST_STATE_TTL_SECONDS = 600.0
MAX_REQUEST_STATE_TTL_SECONDS = 86_400.0


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_STDIO_KEYS = {"command", "args", "env", "cwd", "era", "type", "requestStateTtl"}
_HTTP_KEYS = {"url", "headers", "era", "type", "requestStateTtl"}


def _ttl(entry: dict[str, Any], path: str) -> float:
    value = entry.get("requestStateTtl", DEFAULT_REQUEST_STATE_TTL_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_REQUEST_STATE_TTL_SECONDS:
        raise ConfigError(f"{path}.requestStateTtl", "must be a number of seconds above 0 and at most 86400")
    return float(value)


def _str_map(value: object, path: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(path, "must be an object of strings")
    return dict(value)


def _server(name: str, entry: object) -> ServerConfig:
    path = f"mcpServers.{name}"
    if not _NAME.match(name):
        raise ConfigError(path, "server names are 1-64 characters of A-Z a-z 0-9 _ . -")
    if not isinstance(entry, dict):
        raise ConfigError(path, "must be an object")
    era_value = entry.get("era", "auto")
    try:
        era = Era(era_value)
    except ValueError:
        raise ConfigError(f"{path}.era", "must be one of auto, modern, legacy") from None
    kind = entry.get("type")
    if "command" in entry and "url" in entry:
        raise ConfigError(path, "has both command and url")
    if "command" in entry:
        if kind not in (None, "stdio"):
            raise ConfigError(f"{path}.type", "must be stdio for a command")
        unknown = sorted(set(entry) - _STDIO_KEYS)
        if unknown:
            raise ConfigError(f"{path}.{unknown[0]}", "unknown key")
        command = entry["command"]
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{path}.command", "must be a non-empty string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{path}.args", "must be an array of strings")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError(f"{path}.cwd", "must be a string")
        env = _str_map(entry.get("env", {}), f"{path}.env")
        return ServerConfig(name, StdioServer(command, tuple(args), env, cwd), era, _ttl(entry, path))
    if "url" in entry:
        if kind not in (None, "http", "streamable-http", "streamableHttp"):
            raise ConfigError(f"{path}.type", "must be http or streamable-http for a url")
        unknown = sorted(set(entry) - _HTTP_KEYS)
        if unknown:
            raise ConfigError(f"{path}.{unknown[0]}", "unknown key")
        url = entry["url"]
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{path}.url", "must be an http:// or https:// URL")
        headers = _str_map(entry.get("headers", {}), f"{path}.headers")
        return ServerConfig(name, HttpServer(url, headers), era, _ttl(entry, path))
    raise ConfigError(path, "needs command (stdio) or url (Streamable HTTP)")


def parse_config(document: object) -> list[ServerConfig]:
    """Parse a decoded ``{"mcpServers": {...}}`` document, in file order.

    Raises :class:`ConfigError` on any deviation from the shape above.
    """
    if not isinstance(document, dict):
        raise ConfigError("$", "must be an object")
    unknown = sorted(set(document) - {"mcpServers"})
    if unknown:
        raise ConfigError(unknown[0], "unknown key")
    servers: Any = document.get("mcpServers")
    if not isinstance(servers, dict):
        raise ConfigError("mcpServers", "must be an object")
    return [_server(name, entry) for name, entry in servers.items()]


def load_config(path: Path) -> list[ServerConfig]:
    """Read and parse an ``mcpServers`` JSON file. Raises :class:`ConfigError` (also for bad JSON)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError("$", f"cannot read JSON: {type(error).__name__}") from None
    return parse_config(document)
