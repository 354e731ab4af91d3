"""Broker Tool names (``SERVER:TOOL``) as MCP Tool names, and back.

MCP Tool names are 1-128 characters of ``A-Z a-z 0-9 _ - .`` (MCP specification, server/tools "Tool names").
Server names (``[A-Za-z0-9_.-]{1,64}``) are escaped so that the first ``.`` that is not escaped ends them;
the escape character is ``_``:

- in the server part ``_`` is ``__`` and ``.`` is ``_d``; the Tool part follows after ``.`` verbatim when it
  only holds allowed characters (``examples:deploy`` → ``examples.deploy``);
- a Tool name with other characters follows after ``_t`` instead, escaped (``_`` → ``__``, ``.`` → ``_d``,
  any other character → ``_x`` + its UTF-8 bytes as two lowercase hex digits each).

The mapping is injective (two broker names never share an MCP name) and :func:`decode` inverts it exactly.
A name longer than 128 characters has no MCP name (:func:`encode` returns None; the Tool is not listed).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from typing import Any

MAX_NAME_CHARS = 128
"""The longest MCP Tool name (MCP specification, server/tools "Tool names")."""

_ALLOWED = frozenset(string.ascii_letters + string.digits + "_-.")
_VERBATIM = re.compile(r"^[A-Za-z0-9_.-]+$")
_HEX = re.compile(r"^[0-9a-f]{2}$")


def _escape(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char == "_":
            out.append("__")
        elif char == ".":
            out.append("_d")
        elif char in _ALLOWED:
            out.append(char)
        else:
            out.extend(f"_x{byte:02x}" for byte in char.encode("utf-8"))
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def encode(qualified: str) -> str | None:
    """The MCP Tool name of broker Tool ``SERVER:TOOL``; None when it would exceed 128 characters or the
    name has no ``:``."""
    server, sep, tool = qualified.partition(":")
    if not sep or not server or not tool:
        return None
    name = f"{_escape(server)}.{tool}" if _VERBATIM.match(tool) else f"{_escape(server)}_t{_escape(tool)}"
    return name if len(name) <= MAX_NAME_CHARS else None


def _unescape(text: str) -> str | None:
    """The inverse of :func:`_escape`; None when ``text`` is not an escaped string."""
    raw = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char != "_":
            raw.extend(char.encode("ascii"))
            i += 1
            continue
        mark = text[i + 1 : i + 2]
        if mark == "_":
            raw.extend(b"_")
            i += 2
        elif mark == "d":
            raw.extend(b".")
            i += 2
        elif mark == "x" and _HEX.match(text[i + 2 : i + 4]):
            raw.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            return None
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return decoded if _escape(decoded) == text else None


@functools.lru_cache(maxsize=4096)
def decode(name: str) -> str | None:
    """The broker name ``SERVER:TOOL`` of MCP Tool name ``name``; None when ``name`` is no encoded name."""
    if not name or len(name) > MAX_NAME_CHARS or not set(name) <= _ALLOWED:
        return None
    i = 0
    while i < len(name):
        char = name[i]
        if char == ".":
            server, tool = _unescape(name[:i]), name[i + 1 :]
            if not server or not tool:
                return None
            return f"{server}:{tool}"
        if char == "_":
            mark = name[i + 1 : i + 2]
            if mark == "t":
                prefix, escaped = _unescape(name[:i]), _unescape(name[i + 2 :])
                if not prefix or not escaped or _VERBATIM.match(escaped):
                    return None  # a verbatim Tool name is always encoded after "."
                return f"{prefix}:{escaped}"
            i += 4 if mark == "x" else 2
            continue
        i += 1
    return None


Schemas = Mapping[str, Mapping[str, Any]]
"""Each listed Tool's ``inputSchema`` by MCP name."""


class InputSchemas:
    """The ``inputSchema`` of every listed Tool by MCP name, for the SDK's 2026-07-28 ``Mcp-Param-*`` header check
    (``Server.get_tool_input_schema``, called before each ``tools/call`` with arguments or ``Mcp-Param-*``
    headers). Without it the SDK runs the ``tools/list`` handler, a broker ``ListTools`` round trip, for every
    such call.

    :meth:`update` keeps each listing the endpoint sees: every one of the broker's ``WatchTools`` feed
    (:class:`surfaces.mcp.server.ToolWatch`) and every ``tools/list`` it serves; :meth:`get` answers from the last
    one, with no broker call. Before the feed's first listing a Tool is not found (None: the SDK serves the call
    unchecked, as it does when a listing fails); the broker still checks every call's arguments against the
    Tool's current schema.
    """

    def __init__(self) -> None:
        self._schemas: Schemas = {}

    def update(self, schemas: Schemas) -> None:
        """Keep ``schemas`` (a complete listing)."""
        self._schemas = dict(schemas)

    def names(self) -> list[str]:
        """The MCP names of the last listing's Tools."""
        return list(self._schemas)

    def get(self, name: str) -> Mapping[str, Any] | None:
        """The ``inputSchema`` of MCP Tool ``name`` in the last listing (None when it was not listed)."""
        return self._schemas.get(name)
