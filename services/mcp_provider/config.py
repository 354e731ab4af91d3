"""The ``mcpServers`` configuration format MCP hosts already use, plus Maka's optional ``era``.

Shape (JSON; docs/configuration.md#your-own-mcp-servers lists every key)::

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
(docs/acceptance.md#protocol-and-form-correctness).

Other hosts' files are read as they are (docs/configuration.md#files-from-other-mcp-hosts): the format is
detected from the document's shape and the file's name (:func:`detect_format`): a top-level ``servers``
is VS Code's ``mcp.json`` (with ``inputs``); ``mcpServers`` with an ``httpUrl`` entry, beside Gemini CLI
settings keys, or in ``.gemini/settings.json`` is Gemini CLI's ``settings.json`` (``url`` without
``type`` is SSE there, ``timeout`` always milliseconds); ``cline_mcp_settings.json`` is Cline's (``url``
without ``type`` is SSE); anything else is the ``mcpServers`` format of Maka, Claude Desktop/Code,
Cursor and Windsurf (``serverUrl`` is read as ``url``).

Variables are expanded in ``command``, ``args``, ``cwd``, ``env`` values, ``envFile``, ``url`` and
``headers`` values: ``${VAR}``, ``${VAR:-default}``, ``${env:VAR}`` (also with ``:-default``),
``${userHome}``, ``${workspaceFolder}`` / ``${workspaceFolderBasename}`` (the folder holding the file, or
the parent of a ``.vscode`` / ``.cursor`` / ``.gemini`` / ``.windsurf`` folder holding it),
``${pathSeparator}`` / ``${/}``, and VS Code's ``${input:ID}`` from ``MAKA_INPUT_<ID>`` (Maka cannot prompt at
start-up). Gemini CLI's bare ``$VAR`` is expanded in Gemini files only; elsewhere a bare ``$VAR`` naming a
set variable is a warning. An unset variable without a default, an ``${input:ID}`` without its
``MAKA_INPUT_`` variable and any other ``${...}`` form are problems naming the reference (never a value).
Each expansion is recorded in :attr:`Config.variables` for ``maka config check``.

Keys other hosts use that Maka does not (``autoApprove``, ``alwaysAllow``, ``trust``, ...) and any
other unknown key are **warnings** (:attr:`Config.warnings`): ignored, named by JSON path. Shape
errors are **problems**: :class:`ConfigError` carries every one, one line each
(``mcpServers.<name>.<key>: <what is wrong>``), never a value.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
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


class HostFormat(StrEnum):
    """Which MCP host's file format a document was read as (:func:`detect_format`)."""

    MCP_SERVERS = "mcpServers"
    """Maka's own, Claude Desktop, Claude Code, Cursor and Windsurf: ``mcpServers``, ``url`` = Streamable HTTP."""
    VSCODE = "vscode"
    """VS Code's ``mcp.json``: ``servers`` and ``inputs``."""
    GEMINI = "gemini"
    """Gemini CLI's ``settings.json``: ``httpUrl`` = Streamable HTTP, ``url`` = SSE, ``timeout`` in ms, ``$VAR``."""
    CLINE = "cline"
    """Cline's ``cline_mcp_settings.json``: ``url`` without ``type`` = SSE."""

    @property
    def label(self) -> str:
        """How ``maka config check`` names the format."""
        return _FORMAT_LABELS[self]


_FORMAT_LABELS = {
    HostFormat.MCP_SERVERS: "mcpServers (Maka, Claude Desktop/Code, Cursor, Windsurf)",
    HostFormat.VSCODE: "VS Code mcp.json (servers, inputs)",
    HostFormat.GEMINI: "Gemini CLI settings.json (httpUrl = Streamable HTTP, url = SSE, timeout in ms)",
    HostFormat.CLINE: "Cline cline_mcp_settings.json (url without type = SSE)",
}


@dataclass(frozen=True)
class Variable:
    """One variable reference and how it expanded: ``path`` (JSON path of the string), ``reference`` (as
    written, a default elided: ``${TOKEN:-…}``) and ``outcome`` (``set``, ``unset, default used``, a
    folder, ...); never the value of an environment variable."""

    path: str
    reference: str
    outcome: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reference} → {self.outcome}"


@dataclass(frozen=True)
class Config:
    """A parsed file: the servers in file order and the warnings (ignored keys), one line each."""

    servers: list[ServerConfig]
    warnings: list[Problem] = field(default_factory=lambda: list[Problem]())
    text: str = ""
    """The file's text as read (``${VAR}`` references unexpanded), kept as the last applied copy."""
    format: HostFormat = HostFormat.MCP_SERVERS
    """Which host's format the file was read as."""
    variables: list[Variable] = field(default_factory=lambda: list[Variable]())
    """Every variable reference of the valid servers and how it expanded, in file order."""

    @property
    def servers_key(self) -> str:
        """The top-level key holding the servers (``servers`` in VS Code's format), the first part of paths."""
        return "servers" if self.format is HostFormat.VSCODE else "mcpServers"


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_REFERENCE = re.compile(r"\$\{([^{}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_ENV_REFERENCE = re.compile(r"^(env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
_COMMON_KEYS = {"era", "type", "transportType", "disabled", "timeout", "requestStateTtl"}
DEFAULT_REQUEST_STATE_TTL_SECONDS = 600.0
MAX_REQUEST_STATE_TTL_SECONDS = 86_400.0
_URL_KEYS = ("url", "serverUrl", "httpUrl")
"""Where a server's URL may be: ``url``, Windsurf's ``serverUrl``, Gemini CLI's ``httpUrl``."""
_STDIO_KEYS = _COMMON_KEYS | {"command", "args", "env", "envFile", "cwd"}
_HTTP_KEYS = _COMMON_KEYS | {*_URL_KEYS, "headers", "oauth"}
_OAUTH_KEYS = {"clientId": "client_id", "clientSecret": "client_secret", "scope": "scope"}
_GEMINI_OAUTH_KEYS = {"enabled", "clientId", "clientSecret", "scopes"}
_HTTP_TYPES = {"http": False, "streamable-http": False, "streamableHttp": False, "streamable_http": False, "sse": True}
OTHER_HOSTS_KEYS = frozenset(
    {
        "autoApprove",
        "alwaysAllow",
        "trust",
        "includeTools",
        "excludeTools",
        "description",
        "name",
        "dev",
        "gallery",
        "version",
        "auth",
        "authProviderType",
        "targetAudience",
        "targetServiceAccount",
        "extensionName",
    }
)
"""Keys other MCP hosts write that Maka does not use: warned about as "used by other MCP hosts"."""
GEMINI_SETTINGS_KEYS = frozenset(
    {
        "general",
        "ui",
        "model",
        "context",
        "tools",
        "security",
        "privacy",
        "telemetry",
        "advanced",
        "experimental",
        "ide",
        "output",
        "extensions",
        "mcp",
        "theme",
        "selectedAuthType",
        "preferredEditor",
        "contextFileName",
        "coreTools",
        "excludeTools",
        "allowMCPServers",
        "excludeMCPServers",
        "checkpointing",
        "autoAccept",
        "sandbox",
        "usageStatisticsEnabled",
        "hideTips",
        "vimMode",
    }
)
"""Top-level keys of Gemini CLI's ``settings.json``: beside ``mcpServers`` they mark the file as Gemini's."""
_GEMINI_SERVER_LISTS = {"mcp", "allowMCPServers", "excludeMCPServers"}
_WORKSPACE_DIRS = {".vscode", ".cursor", ".gemini", ".windsurf"}
_PREDEFINED = {"userHome", "workspaceFolder", "workspaceFolderBasename", "pathSeparator"}
"""VS Code's and Cursor's predefined variables: never read as environment variable names."""
MAX_TIMEOUT_SECONDS = 3600.0
"""Largest ``timeout`` read as seconds; larger values are milliseconds."""
SUPPORTED_VARIABLES = "${VAR}, ${VAR:-default}, ${env:VAR}, ${userHome}, ${workspaceFolder}, ${input:ID}"


def detect_format(document: Mapping[str, Any], source: Path | None = None) -> HostFormat:
    """Which host wrote ``document`` (read from ``source``, when a file), by this rule, first match wins:

    1. a top-level ``servers`` (and no ``mcpServers``): VS Code;
    2. ``mcpServers`` in a file named ``settings.json`` in a ``.gemini`` folder, beside any Gemini CLI
       settings key (:data:`GEMINI_SETTINGS_KEYS`), or with an entry that has ``httpUrl``: Gemini CLI;
    3. a file named ``cline_mcp_settings.json``: Cline;
    4. otherwise the ``mcpServers`` format (Maka, Claude Desktop/Code, Cursor, Windsurf).
    """
    if "servers" in document and "mcpServers" not in document:
        return HostFormat.VSCODE
    entries = document.get("mcpServers")
    has_http_url = isinstance(entries, dict) and any(
        isinstance(entry, dict) and "httpUrl" in entry for entry in entries.values()
    )
    gemini_file = source is not None and source.name == "settings.json" and source.parent.name == ".gemini"
    if gemini_file or has_http_url or GEMINI_SETTINGS_KEYS & set(document):
        return HostFormat.GEMINI
    if source is not None and source.name == "cline_mcp_settings.json":
        return HostFormat.CLINE
    return HostFormat.MCP_SERVERS


def workspace_folder(source: Path) -> Path:
    """``${workspaceFolder}`` of a config file: the folder holding it, or the parent of the ``.vscode`` /
    ``.cursor`` / ``.gemini`` / ``.windsurf`` folder holding it (where the host would have opened it)."""
    folder = source.resolve().parent
    return folder.parent if folder.name in _WORKSPACE_DIRS else folder


def input_variable(input_id: str) -> str:
    """The environment variable that answers VS Code's ``${input:ID}``: ``MAKA_INPUT_`` + ID in capitals,
    every character other than A-Z and 0-9 an underscore (``api-key`` → ``MAKA_INPUT_API_KEY``)."""
    return "MAKA_INPUT_" + re.sub(r"[^A-Z0-9]", "_", input_id.upper())


class _Reader:
    """Collects problems and warnings while reading one document."""

    def __init__(self, environ: Mapping[str, str], host: HostFormat, source: Path | None) -> None:
        self.environ = environ
        self.host = host
        self.source = source
        self.root = "servers" if host is HostFormat.VSCODE else "mcpServers"
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.variables: list[Variable] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn_unknown(self, path: str, keys: set[str]) -> None:
        for key in sorted(keys):
            why = "used by other MCP hosts, not by Maka" if key in OTHER_HOSTS_KEYS else "unknown key"
            self.warnings.append(Problem(f"{path}.{key}", f"ignored ({why})"))

    def expand(self, value: str, path: str) -> str:
        """Every variable reference of ``value`` (see the module docstring); each one is recorded in
        :attr:`variables`, each one that cannot be expanded is a problem naming it."""

        def one(match: re.Match[str]) -> str:
            inner, bare = match.group(1), match.group(2)
            if bare is not None:
                return self.bare(match.group(0), bare, path)
            return self.braced(inner, path)

        return _REFERENCE.sub(one, value)

    def note(self, path: str, reference: str, outcome: str) -> None:
        self.variables.append(Variable(path, reference, outcome))

    def bare(self, text: str, name: str, path: str) -> str:
        """Gemini CLI's ``$VAR``: expanded in Gemini files; elsewhere literal, a warning when ``VAR`` is set."""
        found = self.environ.get(name)
        if self.host is HostFormat.GEMINI:
            if found is None:
                self.problem(path, f"{text} is not set in the environment")
                return ""
            self.note(path, text, "set" if found else "set, empty")
            return found
        if found is not None:
            self.warnings.append(
                Problem(path, f"{text} is not expanded (only Gemini CLI settings expand $VAR): write ${{{name}}}")
            )
        return text

    def braced(self, inner: str, path: str) -> str:
        reference = f"${{{inner}}}"
        env = None if inner in _PREDEFINED else _ENV_REFERENCE.match(inner)
        if env is not None:
            prefix, name, default = env.group(1) or "", env.group(2), env.group(3)
            shown = f"${{{prefix}{name}:-…}}" if default is not None else reference
            found = self.environ.get(name)
            if found is not None and (found or default is None):
                self.note(path, shown, "set" if found else "set, empty")
                return found
            if default is not None:
                self.note(path, shown, ("set, empty" if found is not None else "unset") + ", default used")
                return default
            self.problem(
                path,
                f"{reference} is not set in the environment (write ${{{prefix}{name}:-default}} for a default)",
            )
            return ""
        if inner == "userHome":
            home = self.environ.get("HOME") or str(Path.home())
            self.note(path, reference, home)
            return home
        if inner in ("workspaceFolder", "workspaceFolderBasename"):
            if self.source is None:
                self.problem(path, f"{reference} needs the config file's location (read it from a file)")
                return ""
            folder = workspace_folder(self.source)
            text = str(folder) if inner == "workspaceFolder" else folder.name
            self.note(path, reference, text)
            return text
        if inner in ("pathSeparator", "/"):
            self.note(path, reference, os.sep)
            return os.sep
        if inner.startswith("input:"):
            variable = input_variable(inner.removeprefix("input:"))
            found = self.environ.get(variable)
            if found is None:
                self.problem(
                    path,
                    f"{reference} is a VS Code prompt Maka cannot show at start-up: set {variable} in the environment"
                    " (or write ${env:NAME})",
                )
                return ""
            self.note(path, reference, f"{variable} set")
            return found
        self.problem(path, f"{reference} is not expanded by Maka (it expands {SUPPORTED_VARIABLES})")
        return ""

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
        path = f"{self.root}.{name}"
        before, noted = len(self.problems), len(self.variables)
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
        url_keys = [key for key in _URL_KEYS if key in entry]
        transport: StdioServer | HttpServer | None = None
        if "command" in entry and url_keys:
            self.problem(path, f"has both command and {url_keys[0]}")
        elif len(url_keys) > 1:
            self.problem(path, f"has both {url_keys[0]} and {url_keys[1]}")
        elif "command" in entry:
            transport = self.stdio(entry, path, kind, type_key)
        elif url_keys:
            transport = self.http(entry, path, kind, type_key, url_keys[0])
        else:
            urls = "httpUrl (Streamable HTTP) or url (SSE)" if self.host is HostFormat.GEMINI else "url"
            self.problem(path, f"needs command (stdio) or {urls}")
        ttl = self.ttl(entry.get("requestStateTtl", DEFAULT_REQUEST_STATE_TTL_SECONDS), f"{path}.requestStateTtl")
        if transport is None or len(self.problems) > before:
            del self.variables[noted:]
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
            unit = "milliseconds" if self.host is HostFormat.GEMINI else "seconds"
            self.problem(path, f"must be a positive number of {unit}")
            return None
        if self.host is HostFormat.GEMINI:  # Gemini CLI writes every timeout in milliseconds
            return float(value) / 1000
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
        command = self.expand(command, f"{path}.command")
        args = self.strings(entry.get("args", []), f"{path}.args") or ()
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            self.problem(f"{path}.cwd", "must be a string")
            cwd = None
        if cwd is not None:
            cwd = self.expand(cwd, f"{path}.cwd")
        env = self.env_file(entry.get("envFile"), f"{path}.envFile")
        env.update(self.str_map(entry.get("env", {}), f"{path}.env"))
        return StdioServer(command, args, env, cwd)

    def env_file(self, value: object, path: str) -> dict[str, str]:
        """VS Code's and Cursor's ``envFile``: ``NAME=value`` lines (``#`` comments, ``export``, quotes);
        a relative path is taken from the workspace folder; ``env`` overrides it."""
        if value is None:
            return {}
        if not isinstance(value, str) or not value:
            self.problem(path, "must be a non-empty string")
            return {}
        name = Path(self.expand(value, path))
        if not name.is_absolute() and self.source is not None:
            name = workspace_folder(self.source) / name
        try:
            text = name.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            why = error.strerror if isinstance(error, OSError) and error.strerror else "not readable UTF-8 text"
            self.problem(path, f"cannot read {name}: {why}")
            return {}
        env: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, raw = line.removeprefix("export ").partition("=")
            key, raw = key.strip(), raw.strip()
            if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                self.problem(path, f"{name} line {number}: not NAME=value")
                continue
            if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
                raw = raw[1:-1]
            env[key] = raw
        self.note(path, "envFile", f"{len(env)} variable{'s' if len(env) != 1 else ''} from {name}")
        return env

    def http(
        self, entry: dict[str, Any], path: str, kind: str | None, type_key: str, url_key: str
    ) -> HttpServer | None:
        if kind is not None and kind not in _HTTP_TYPES:
            self.problem(f"{path}.{type_key}", "must be http, streamable-http or sse for a url")
        self.warn_unknown(path, set(entry) - _HTTP_KEYS - {"command", "args", "env", "envFile", "cwd"})
        for key in sorted({"args", "env", "envFile", "cwd"} & set(entry)):
            self.warnings.append(Problem(f"{path}.{key}", "ignored (only for command servers)"))
        raw = entry[url_key]
        url = self.expand(raw, f"{path}.{url_key}") if isinstance(raw, str) else ""
        if not url.startswith(("http://", "https://")):
            self.problem(f"{path}.{url_key}", "must be an http:// or https:// URL")
        headers = self.str_map(entry.get("headers", {}), f"{path}.headers")
        enabled, client = self.oauth(entry.get("oauth", True), f"{path}.oauth")
        enabled = enabled and not any(key.lower() == "authorization" for key in headers)
        if kind is None:  # Gemini CLI's and Cline's `url` is the older HTTP+SSE transport
            sse = url_key == "url" and self.host in (HostFormat.GEMINI, HostFormat.CLINE)
            if not sse and url.split("?", 1)[0].rstrip("/").endswith("/sse"):
                self.warnings.append(
                    Problem(f"{path}.{url_key}", 'read as Streamable HTTP: write "type": "sse" for an SSE server')
                )
        else:
            sse = _HTTP_TYPES.get(kind, False)
        return HttpServer(url, headers, sse, enabled, client)

    def oauth(self, value: object, path: str) -> tuple[bool, OAuthClient | None]:
        if isinstance(value, bool):
            return value, None
        if not isinstance(value, dict):
            self.problem(path, "must be false or an object with clientId (and optional clientSecret, scope)")
            return False, None
        if self.host is HostFormat.GEMINI:
            return self.gemini_oauth(value, path)
        for key in sorted(set(value) - set(_OAUTH_KEYS)):
            self.problem(f"{path}.{key}", "unknown key")
        fields = self.str_map(value, path)
        if not fields.get("clientId"):
            self.problem(f"{path}.clientId", "must be a non-empty string")
            return False, None
        known = {_OAUTH_KEYS[key]: text for key, text in fields.items() if key in _OAUTH_KEYS}
        return True, OAuthClient(**known)

    def gemini_oauth(self, value: dict[str, Any], path: str) -> tuple[bool, OAuthClient | None]:
        """Gemini CLI's ``oauth``: ``enabled``, ``clientId``, ``clientSecret``, ``scopes`` are read; its
        endpoint keys are warned about (Maka discovers the endpoints)."""
        self.warn_unknown(path, set(value) - _GEMINI_OAUTH_KEYS)
        enabled = value.get("enabled", True)
        if not isinstance(enabled, bool):
            self.problem(f"{path}.enabled", "must be true or false")
            enabled = True
        scopes = self.strings(value["scopes"], f"{path}.scopes") if "scopes" in value else None
        fields = self.str_map({k: v for k, v in value.items() if k in ("clientId", "clientSecret")}, path)
        if not enabled:
            return False, None
        if not fields.get("clientId"):
            return True, None  # dynamic registration, as Gemini CLI does without a clientId
        scope = " ".join(scopes) if scopes else None
        return True, OAuthClient(fields["clientId"], fields.get("clientSecret"), scope)

    def inputs(self, value: object) -> None:
        """VS Code's ``inputs``: checked for shape only (``${input:ID}`` reads ``MAKA_INPUT_<ID>``)."""
        if not isinstance(value, list) or not all(isinstance(i, dict) and isinstance(i.get("id"), str) for i in value):
            self.problem("inputs", "must be an array of objects with an id")


def read_config(document: object, environ: Mapping[str, str] | None = None, source: Path | None = None) -> Config:
    """Parse a decoded config document of any supported host: servers in file order plus warnings.

    ``environ`` (default ``os.environ``) feeds variable expansion; ``source`` is the file the document was
    read from (its name and folder pick the format and ``${workspaceFolder}``). Raises :class:`ConfigError`
    carrying every problem found.
    """
    if not isinstance(document, dict):
        raise ConfigError("$", "must be an object")
    host = detect_format(document, source)
    reader = _Reader(os.environ if environ is None else environ, host, source)
    if host is HostFormat.VSCODE:
        reader.warn_unknown("$", set(document) - {"servers", "inputs"})
        if "inputs" in document:
            reader.inputs(document["inputs"])
    elif host is HostFormat.GEMINI:  # the rest of Gemini CLI's settings are its own, not Maka's
        for key in sorted(_GEMINI_SERVER_LISTS & set(document)):
            reader.warnings.append(Problem(key, "ignored (Gemini CLI's server lists; Maka connects every server)"))
    else:
        if "servers" in document:
            reader.problem("$", "has both servers (VS Code) and mcpServers: keep one")
        reader.warn_unknown("$", set(document) - {"mcpServers", "servers"})
    entries: Any = document.get(reader.root)
    if not isinstance(entries, dict):
        hint = "" if host is HostFormat.VSCODE or "mcpServers" in document else " (or servers, as VS Code writes)"
        raise ConfigError.of([*reader.problems, Problem(reader.root, f"must be an object{hint}")])
    servers: list[ServerConfig] = []
    for name, entry in entries.items():
        server = reader.server(name, entry)
        if server is not None:
            servers.append(server)
    warnings = [Problem(w.path.removeprefix("$."), w.message) for w in reader.warnings]
    if reader.problems:
        raise ConfigError.of(reader.problems, warnings)
    return Config(servers, warnings, format=host, variables=reader.variables)


def parse_config(document: object, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of :func:`read_config` (warnings dropped). Raises :class:`ConfigError`."""
    return read_config(document, environ).servers


def jsonc_to_json(text: str) -> str:
    """JSON with comments (``//``, ``/* */``) and trailing commas, as VS Code, Cursor and Gemini CLI accept in
    their settings files, turned into JSON. Comments and trailing commas become spaces, so a decoding error
    still names the file's own line and column; strings are left exactly as written."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # the position of a comma with only blanks and comments after it so far
    while i < n:
        ch = text[i]
        if ch == '"':
            last_comma = None
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
            continue
        if ch == ",":
            last_comma = i
        elif ch in "]}" and last_comma is not None:
            out[last_comma] = " "
            last_comma = None
        elif not ch.isspace():
            last_comma = None
        i += 1
    return "".join(out)


def check_config(path: Path, environ: Mapping[str, str] | None = None, origin: Path | None = None) -> Config:
    """Read and parse a config file of any supported host. Raises :class:`ConfigError` (also for an
    unreadable file or bad JSON, naming the line and column). ``origin`` is where the file came from when
    ``path`` is a copy of it (its name and folder decide the format and ``${workspaceFolder}``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError("$", f"cannot read {path}: {error.strerror or type(error).__name__}") from None
    except UnicodeDecodeError:
        raise ConfigError("$", f"cannot read {path}: not UTF-8 text") from None
    try:
        # Comments and trailing commas are read as the hosts that write them do; otherwise strict: a server
        # name given twice is an error, not the last one wins.
        document = json_text.loads(jsonc_to_json(text))
    except json_text.JsonTextError as error:
        raise ConfigError("$", f"not valid JSON: {error.problem}") from None
    return replace(read_config(document, environ, origin or path), text=text)


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of :func:`check_config`. Raises :class:`ConfigError`."""
    return check_config(path, environ).servers


def missing_commands(config: Config, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """A warning per enabled stdio server whose ``command`` is not found: on ``PATH`` as the provider's
    children see it (this interpreter's folder first, so ``python`` is the stack's own), or, for a path,
    relative to its ``cwd``."""
    environ = os.environ if environ is None else environ
    found: list[Problem] = []
    search = str(Path(sys.executable).parent) + os.pathsep + environ.get("PATH", "")
    for server in config.servers:
        transport = server.transport
        if server.disabled or not isinstance(transport, StdioServer):
            continue
        search_path = transport.env.get("PATH", search)
        command = transport.command
        if os.sep in command or (os.altsep and os.altsep in command):
            program = Path(transport.cwd or ".") / command
            if not (program.is_file() and os.access(program, os.X_OK)):
                found.append(Problem(f"{config.servers_key}.{server.name}.command", f"'{command}' not found"))
        elif shutil.which(command, path=search_path) is None:
            found.append(Problem(f"{config.servers_key}.{server.name}.command", f"'{command}' not found on PATH"))
    return found
