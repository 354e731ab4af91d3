"""The ``mcpServers`` configuration format MCP hosts already use, plus Maka's optional ``era``.

Shape (JSON; README "Your own MCP servers" lists every key)::

    {"mcpServers": {
        "<name>": {"command": "python", "args": ["srv.py"], "env": {"K": "${K}"}, "cwd": "/dir", "era": "auto"},
        "<name>": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "<name>": {"type": "sse", "url": "https://h/sse", "disabled": true, "timeout": 60},
        "<name>": {"url": "https://mcp.example.com/mcp", "oauth": {"clientId": "id", "clientSecret": "s"}}
    }}

A server entry is stdio (``command`` with optional ``args``/``env``/``cwd``), Streamable HTTP (``url``
with optional ``headers``; ``type`` ``http`` / ``streamable-http`` / ``streamableHttp``) or the older
HTTP+SSE transport (``type: "sse"``). ``transportType`` (Cline) is read as ``type``. Every entry may
also have ``disabled`` (true: configured, shown by ``maka status``, never connected), ``timeout``
(seconds of one ``tools/call`` leg; values above 3600 are read as milliseconds, as Gemini CLI writes
them) and ``era`` (``auto``: ``server/discover`` then fall back to ``initialize``; ``modern``:
2026-07-28 only; ``legacy``: ``initialize`` only).

An HTTP server without an ``Authorization`` header signs in with OAuth when it answers 401
(docs/security.md "OAuth"); ``oauth`` names a pre-registered client (``clientId``, optional
``clientSecret`` and ``scope``), ``"oauth": false`` turns OAuth off.

``requestStateTtl`` (seconds, above 0 and at most 86400, default 600: what the official server SDKs
give a ``requestState``) is how long after it *receives* a round's ``requestState`` the Host still
collects that round's forms; every form of the round shows that one deadline, and a round that can no
longer finish in time is closed instead of collecting input the server would reject
(docs/acceptance.md#protocol-and-form-correctness, finding 2).

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment in ``env`` values, ``headers``
values, ``url`` and ``args``; an unset ``${VAR}`` without a default is a problem.

Keys other hosts use that Maka does not (``autoApprove``, ``alwaysAllow``, ``trust``, ...) and any
other unknown key are **warnings** (:attr:`Config.warnings`): ignored, named by JSON path. Shape
errors are **problems**: :class:`ConfigError` carries every one, one line each
(``mcpServers.<name>.<key>: <what is wrong>``), never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from services.core import json_text


class Era(StrEnum):
    """Which MCP protocol era to speak (MCP 2026-07-28 ``basic/versioning`` "eras")."""

    AUTO = "auto"
    MODERN = "modern"
    LEGACY = "legacy"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config file: its JSON ``path`` and what is wrong (no values)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(ValueError):
    """The configuration is not a valid ``mcpServers`` file. ``problems`` lists every problem found
    (``path``/``problem`` are the first one's); ``str()`` is one line per problem. ``warnings`` are the
    ignored keys found on the way (so a user fixing the file sees them too)."""

    def __init__(
        self, path: str, problem: str, more: tuple[Problem, ...] = (), warnings: tuple[Problem, ...] = ()
    ) -> None:
        self.problems: tuple[Problem, ...] = (Problem(path, problem), *more)
        super().__init__("\n".join(str(p) for p in self.problems))
        self.path = path
        self.problem = problem
        self.warnings = warnings

    @classmethod
    def of(cls, problems: list[Problem], warnings: list[Problem] | None = None) -> ConfigError:
        """A ``ConfigError`` carrying ``problems`` (at least one) and the ``warnings`` found with them."""
        first, *rest = problems
        return cls(first.path, first.message, tuple(rest), tuple(warnings or ()))


@dataclass(frozen=True)
class StdioServer:
    """An MCP server launched as a subprocess and spoken to over stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    cwd: str | None = None


@dataclass(frozen=True)
class OAuthClient:
    """A pre-registered OAuth client of one server (``mcpServers.<name>.oauth``)."""

    client_id: str
    client_secret: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class HttpServer:
    """An MCP server reached over Streamable HTTP (or, with ``sse``, the older HTTP+SSE transport)."""

    url: str
    headers: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    sse: bool = False
    oauth: bool = True
    """Sign in with OAuth on a 401 (off with ``"oauth": false`` or an ``Authorization`` header)."""
    oauth_client: OAuthClient | None = None


@dataclass(frozen=True)
class ServerConfig:
    """One configured MCP server: its name (the ``SERVER`` of ``SERVER:TOOL``), transport and era."""

    name: str
    transport: StdioServer | HttpServer
    era: Era = Era.AUTO
    disabled: bool = False
    timeout_seconds: float | None = None
    """``timeout``: read timeout of one ``tools/call`` leg (None: the provider's ``call_timeout_seconds``)."""
    request_state_ttl_seconds: float = 600.0
    """``requestStateTtl``: the round deadline is this long after the round's ``requestState`` arrived."""

    @property
    def transport_name(self) -> str:
        """``stdio``, ``http`` or ``sse``."""
        if isinstance(self.transport, StdioServer):
            return "stdio"
        return "sse" if self.transport.sse else "http"

    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in a status or log line: env and header values, the URL's
        query string and user info."""
        transport = self.transport
        if isinstance(transport, StdioServer):
            return tuple(transport.env.values())
        values = list(transport.headers.values())
        for header in transport.headers.values():
            values.extend(header.split())  # "Bearer <token>": the token alone too
        match = re.match(r"https?://([^/@]*)@", transport.url)
        if match:
            values.append(match.group(1))
        if "?" in transport.url:
            values.append(transport.url.split("?", 1)[1])
        return tuple(values)


@dataclass(frozen=True)
class Config:
    """A parsed file: the servers in file order and the warnings (ignored keys), one line each."""

    servers: list[ServerConfig]
    warnings: list[Problem] = field(default_factory=lambda: list[Problem]())
    text: str = ""
    """The file's text as read (``${VAR}`` references unexpanded), kept as the last applied copy."""


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_COMMON_KEYS = {"era", "type", "transportType", "disabled", "timeout", "requestStateTtl"}
DEFAULT_REQUEST_STATE_TTL_SECONDS = 600.0
MAX_REQUEST_STATE_TTL_SECONDS = 86_400.0
_STDIO_KEYS = _COMMON_KEYS | {"command", "args", "env", "cwd"}
_HTTP_KEYS = _COMMON_KEYS | {"url", "headers", "oauth"}
_OAUTH_KEYS = {"clientId": "client_id", "clientSecret": "client_secret", "scope": "scope"}
_HTTP_TYPES = {"http": False, "streamable-http": False, "streamableHttp": False, "streamable_http": False, "sse": True}
OTHER_HOSTS_KEYS = frozenset(
    {"autoApprove", "alwaysAllow", "trust", "includeTools", "excludeTools", "description", "name", "envFile"}
)
"""Keys other MCP hosts write that Maka does not use: warned about as "used by other MCP hosts"."""
MAX_TIMEOUT_SECONDS = 3600.0
"""Largest ``timeout`` read as seconds; larger values are milliseconds."""


class _Reader:
    """Collects problems and warnings while reading one document."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn_unknown(self, path: str, keys: set[str]) -> None:
        for key in sorted(keys):
            why = "used by other MCP hosts, not by Maka" if key in OTHER_HOSTS_KEYS else "unknown key"
            self.warnings.append(Problem(f"{path}.{key}", f"ignored ({why})"))

    def expand(self, value: str, path: str) -> str:
        """``${VAR}`` / ``${VAR:-default}`` from the environment; an unset VAR without default is a problem."""

        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = self.environ.get(name)
            if found is not None and (found or default is None):
                return found
            if default is not None:
                return default
            self.problem(path, f"${{{name}}} is not set in the environment (write ${{{name}:-default}} for a default)")
            return ""

        return _VAR.sub(one, value)

    def strings(self, value: object, path: str) -> tuple[str, ...] | None:
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            self.problem(path, "must be an array of strings")
            return None
        return tuple(self.expand(a, f"{path}[{i}]") for i, a in enumerate(value))

    def str_map(self, value: object, path: str) -> dict[str, str]:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            self.problem(path, "must be an object of strings")
            return {}
        return {k: self.expand(v, f"{path}.{k}") for k, v in value.items()}

    def server(self, name: str, entry: object) -> ServerConfig | None:
        path = f"mcpServers.{name}"
        before = len(self.problems)
        if not _NAME.match(name):
            self.problem(path, "server names are 1-64 characters of A-Z a-z 0-9 _ . -")
        if not isinstance(entry, dict):
            self.problem(path, "must be an object")
            return None
        era = Era.AUTO
        try:
            era = Era(entry.get("era", "auto"))
        except ValueError:
            self.problem(f"{path}.era", "must be one of auto, modern, legacy")
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            self.problem(f"{path}.disabled", "must be true or false")
            disabled = False
        timeout = self.timeout(entry.get("timeout"), f"{path}.timeout")
        type_key = "type" if "type" in entry else "transportType"
        kind = entry.get(type_key)
        if kind is not None and not isinstance(kind, str):
            self.problem(f"{path}.{type_key}", "must be a string")
            kind = None
        transport: StdioServer | HttpServer | None = None
        if "command" in entry and "url" in entry:
            self.problem(path, "has both command and url")
        elif "command" in entry:
            transport = self.stdio(entry, path, kind, type_key)
        elif "url" in entry:
            transport = self.http(entry, path, kind, type_key)
        else:
            self.problem(path, "needs command (stdio) or url (Streamable HTTP, SSE)")
        ttl = self.ttl(entry.get("requestStateTtl", DEFAULT_REQUEST_STATE_TTL_SECONDS), f"{path}.requestStateTtl")
        if transport is None or len(self.problems) > before:
            return None
        return ServerConfig(name, transport, era, disabled, timeout, ttl)

    def ttl(self, value: object, path: str) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_REQUEST_STATE_TTL_SECONDS
        ):
            self.problem(path, "must be a number of seconds above 0 and at most 86400")
            return DEFAULT_REQUEST_STATE_TTL_SECONDS
        return float(value)

    def timeout(self, value: object, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
            self.problem(path, "must be a positive number of seconds")
            return None
        if value > MAX_TIMEOUT_SECONDS:
            self.warnings.append(Problem(path, f"read as milliseconds ({value / 1000:g} s)"))
            return float(value) / 1000
        return float(value)

    def stdio(self, entry: dict[str, Any], path: str, kind: str | None, type_key: str) -> StdioServer | None:
        if kind not in (None, "stdio"):
            self.problem(f"{path}.{type_key}", "must be stdio for a command")
        self.warn_unknown(path, set(entry) - _STDIO_KEYS - {"url", "headers"})
        for key in sorted({"headers"} & set(entry)):
            self.warnings.append(Problem(f"{path}.{key}", "ignored (only for url servers)"))
        command = entry["command"]
        if not isinstance(command, str) or not command:
            self.problem(f"{path}.command", "must be a non-empty string")
            command = ""
        args = self.strings(entry.get("args", []), f"{path}.args") or ()
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            self.problem(f"{path}.cwd", "must be a string")
            cwd = None
        env = self.str_map(entry.get("env", {}), f"{path}.env")
        return StdioServer(command, args, env, cwd)

    def http(self, entry: dict[str, Any], path: str, kind: str | None, type_key: str) -> HttpServer | None:
        if kind is not None and kind not in _HTTP_TYPES:
            self.problem(f"{path}.{type_key}", "must be http, streamable-http or sse for a url")
        self.warn_unknown(path, set(entry) - _HTTP_KEYS - {"command", "args", "env", "cwd"})
        for key in sorted({"args", "env", "cwd"} & set(entry)):
            self.warnings.append(Problem(f"{path}.{key}", "ignored (only for command servers)"))
        raw = entry["url"]
        url = self.expand(raw, f"{path}.url") if isinstance(raw, str) else ""
        if not url.startswith(("http://", "https://")):
            self.problem(f"{path}.url", "must be an http:// or https:// URL")
        headers = self.str_map(entry.get("headers", {}), f"{path}.headers")
        enabled, client = self.oauth(entry.get("oauth", True), f"{path}.oauth")
        enabled = enabled and not any(key.lower() == "authorization" for key in headers)
        return HttpServer(url, headers, _HTTP_TYPES.get(kind or "http", False), enabled, client)

    def oauth(self, value: object, path: str) -> tuple[bool, OAuthClient | None]:
        if isinstance(value, bool):
            return value, None
        if not isinstance(value, dict):
            self.problem(path, "must be false or an object with clientId (and optional clientSecret, scope)")
            return False, None
        for key in sorted(set(value) - set(_OAUTH_KEYS)):
            self.problem(f"{path}.{key}", "unknown key")
        fields = self.str_map(value, path)
        if not fields.get("clientId"):
            self.problem(f"{path}.clientId", "must be a non-empty string")
            return False, None
        known = {_OAUTH_KEYS[key]: text for key, text in fields.items() if key in _OAUTH_KEYS}
        return True, OAuthClient(**known)


def read_config(document: object, environ: Mapping[str, str] | None = None) -> Config:
    """Parse a decoded ``{"mcpServers": {...}}`` document: servers in file order plus warnings.

    ``environ`` (default ``os.environ``) feeds ``${VAR}`` expansion. Raises :class:`ConfigError`
    carrying every problem found.
    """
    reader = _Reader(os.environ if environ is None else environ)
    servers: list[ServerConfig] = []
    if not isinstance(document, dict):
        raise ConfigError("$", "must be an object")
    reader.warn_unknown("$", set(document) - {"mcpServers"})
    entries: Any = document.get("mcpServers")
    if not isinstance(entries, dict):
        raise ConfigError("mcpServers", "must be an object")
    for name, entry in entries.items():
        server = reader.server(name, entry)
        if server is not None:
            servers.append(server)
    warnings = [Problem(w.path.removeprefix("$."), w.message) for w in reader.warnings]
    if reader.problems:
        raise ConfigError.of(reader.problems, warnings)
    return Config(servers, warnings)


def parse_config(document: object, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of :func:`read_config` (warnings dropped). Raises :class:`ConfigError`."""
    return read_config(document, environ).servers


def check_config(path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and parse an ``mcpServers`` JSON file. Raises :class:`ConfigError` (also for an unreadable
    file or bad JSON, naming the line and column)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError("$", f"cannot read {path}: {error.strerror or type(error).__name__}") from None
    except UnicodeDecodeError:
        raise ConfigError("$", f"cannot read {path}: not UTF-8 text") from None
    try:
        document = json_text.loads(text)  # strict: a server name given twice is an error, not the last one wins
    except json_text.JsonTextError as error:
        raise ConfigError("$", f"not valid JSON: {error.problem}") from None
    return replace(read_config(document, environ), text=text)


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of :func:`check_config`. Raises :class:`ConfigError`."""
    return check_config(path, environ).servers
