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

import asyncio
import contextlib
import contextvars
import functools
import logging
import re
import string
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from maka_client import MakaError

log = logging.getLogger("maka.mcp.tools")

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

    :meth:`update` keeps every listing the endpoint serves; :meth:`get` answers from the last one and, once it is
    older than ``max_age`` s (or none was read yet), starts one background re-read (``read``, outside any
    request's context, so under the endpoint's own token) without waiting for it. A Tool that appeared since the
    last read is not found until the re-read lands (None: the SDK serves the call unchecked, as it does when a
    listing fails); the broker still checks every call's arguments against the Tool's current schema.
    """

    def __init__(
        self,
        read: Callable[[], Awaitable[Schemas]],
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.max_age = max_age
        self._clock = clock
        self._schemas: Schemas = {}
        self._read_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    def update(self, schemas: Schemas) -> None:
        """Keep ``schemas`` (a complete listing) as of now."""
        self._schemas = dict(schemas)
        self._read_at = self._clock()

    def get(self, name: str) -> Mapping[str, Any] | None:
        """The ``inputSchema`` of MCP Tool ``name`` in the last listing (None when it was not listed)."""
        if self._read_at is None or self._clock() - self._read_at > self.max_age:
            self.refresh()
        return self._schemas.get(name)

    def refresh(self) -> asyncio.Task[None] | None:
        """Start one background re-read unless one runs; returns the running one (None outside an event loop)."""
        if self._task is not None and not self._task.done():
            return self._task
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        # an empty context: not the bearer token of the request whose lookup started it (surfaces.mcp.auth)
        self._task = loop.create_task(self._reread(), name="maka-mcp-input-schemas", context=contextvars.Context())
        return self._task

    async def _reread(self) -> None:
        try:
            schemas = await self._read()
        except MakaError as error:
            log.info("mcp.input_schemas_unread", extra={"code": error.code})
            self._read_at = self._clock()  # tried: the next attempt waits max_age, not the next call
            return
        self.update(schemas)

    async def close(self) -> None:
        """Stop a running re-read."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
