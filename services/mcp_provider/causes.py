"""The real cause of an MCP connection failure, bounded and secret-free (``maka status``, docs/operations.md#status).

A failed connect surfaces as an ``ExceptionGroup`` from the SDK's task groups, wrapping the error that
mattered (``httpx2.ConnectError``, ``httpx2.HTTPStatusError`` for a 401, ``MCPError: Connection closed``
from a stdio child that died). :func:`describe` flattens the chain (groups, ``__cause__``,
``__context__``) into one line per distinct exception, finds the HTTP status, and redacts:

- the configured secret values (header values, env values, the URL's query string and user info);
- any URL's query string and user info;
- control characters.

Every line is cut to :data:`MAX_LINE_CHARS` and at most :data:`MAX_CAUSES` lines are kept;
:class:`StderrTail` keeps the last :data:`MAX_STDERR_LINES` lines a stdio child wrote to stderr.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, TextIO

import httpx2

MAX_LINE_CHARS = 300
"""Longest kept line of a cause or of the child's stderr (code points)."""
MAX_CAUSES = 6
"""Most exceptions kept from one flattened chain."""
MAX_STDERR_LINES = 10
"""Most stderr lines kept from a stdio child."""
MIN_SECRET_CHARS = 4
"""Shorter configured values are not redacted (they would mangle ordinary words)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_URL = re.compile(r"(https?://)([^/\s'\"@]*@)?([^\s'\"?#]*)(\?[^\s'\"#]*)?")


def _redact_url(match: re.Match[str]) -> str:
    user = "***@" if match.group(2) else ""
    query = "?***" if match.group(4) else ""
    return f"{match.group(1)}{user}{match.group(3)}{query}"


def clean_line(text: str, secrets: Iterable[str] = (), *, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` on one line: secrets and URL query strings / user info redacted, control characters
    removed, cut to ``limit`` code points (with ``…``)."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _URL.sub(_redact_url, text)
    text = _CONTROL.sub(" ", text.replace("\r", " ").replace("\n", " ")).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class FailureCause:
    """What :func:`describe` found: ``summary`` (one line), ``causes`` (outermost first), ``http_status``."""

    summary: str
    causes: tuple[str, ...] = ()
    http_status: int = 0
    stderr_tail: tuple[str, ...] = field(default=())


def _walk(error: BaseException, seen: set[int], out: list[BaseException]) -> None:
    if id(error) in seen:
        return
    seen.add(id(error))
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            _walk(inner, seen, out)
    else:
        out.append(error)
    inner_cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if inner_cause is not None:
        _walk(inner_cause, seen, out)


def _line(error: BaseException) -> str:
    if isinstance(error, httpx2.HTTPStatusError):
        response = error.response
        return f"HTTP {response.status_code} {response.reason_phrase} from {error.request.method} {error.request.url}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class HttpTrace:
    """The last failed HTTP response of one connection attempt, recorded by an ``httpx2`` response
    hook: the SDK's Streamable HTTP client turns a 401 into ``MCPError: Server returned an error
    response`` and drops the status, so the hook keeps it for :func:`describe`."""

    def __init__(self) -> None:
        self.line = ""
        self.status = 0

    async def hook(self, response: httpx2.Response) -> None:
        """``httpx2`` ``event_hooks["response"]``: remember a 4xx/5xx answer."""
        if response.status_code >= 400:
            self.status = response.status_code
            request = response.request
            self.line = f"HTTP {response.status_code} {response.reason_phrase} from {request.method} {request.url}"


def describe(
    error: BaseException,
    secrets: Iterable[str] = (),
    stderr_tail: Iterable[str] = (),
    http: HttpTrace | None = None,
    target: str = "",
) -> FailureCause:
    """Flatten ``error`` into a :class:`FailureCause` (see the module docstring); ``http`` adds the
    status of the attempt's last failed HTTP response; ``target`` (``command 'npx'``, ``URL https://…``,
    redacted like every line) leads the summary."""
    leaves: list[BaseException] = []
    _walk(error, set(), leaves)
    secrets = tuple(secrets)
    lines: list[str] = []
    http_status = 0
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError) and not http_status:
            http_status = leaf.response.status_code
        line = clean_line(_line(leaf), secrets)
        if line and line not in lines:
            lines.append(line)
    if http is not None and http.status and not http_status:
        http_status = http.status
        lines.insert(0, clean_line(http.line, secrets))
    lines = lines[:MAX_CAUSES] or [clean_line(type(error).__name__)]
    tail = tuple(clean_line(line, secrets) for line in stderr_tail if line.strip())[-MAX_STDERR_LINES:]
    summary = next((line for line in lines if line.startswith("HTTP ")), None) or _innermost(lines)
    if tail and lines and _is_generic(summary):
        summary = f"{summary}; the server's stderr said: {_telling(tail)}"
    summary = clean_line(summary)
    where = clean_line(target, secrets)
    if where:  # both parts are clean; cleaning again would read the ':' as part of a redacted query
        summary = f"{where}: {summary}"
        summary = summary if len(summary) <= MAX_LINE_CHARS else summary[: MAX_LINE_CHARS - 1] + "…"
    return FailureCause(summary, tuple(lines), http_status, tail)


_GENERIC = ("McpError", "MCPError", "ClosedResourceError", "BrokenResourceError", "EndOfStream", "CancelledError")


def _is_generic(line: str) -> bool:
    return line.startswith(_GENERIC) or "Connection closed" in line


_ERROR_LINE = re.compile(r"^\s*(?:\w+\s)?[\w.\[]*(?:error|fatal)\b", re.IGNORECASE)
_HINT_LINE = re.compile(r"^\s*(?:hint|note|help|tip|info)\b", re.IGNORECASE)


def _telling(tail: tuple[str, ...]) -> str:
    """The stderr line that says what went wrong: the last ``error:`` line, else the last line that is not a
    ``hint:``/``note:``, else the last line (tools often print the error, then a hint to fix it)."""
    for pattern, wanted in ((_ERROR_LINE, True), (_HINT_LINE, False)):
        for line in reversed(tail):
            if bool(pattern.match(line)) is wanted:
                return line
    return tail[-1]


def _innermost(lines: list[str]) -> str:
    """The most telling line: the first that is not a generic wrapper (groups are already flattened)."""
    for line in lines:
        if not _is_generic(line):
            return line
    return lines[0]


class StderrTail:
    """A pipe for a stdio child's stderr: every line is copied to ``sink`` (the provider's stderr) and
    the last :data:`MAX_STDERR_LINES` are kept for :func:`describe`.

    ``writer`` is the file to hand to the child (the SDK's ``errlog``); call :meth:`spawned` once the
    child is running (closes this process's copy so EOF arrives when the child exits) and
    :meth:`wait_eof` before reading :meth:`lines` after a failure.
    """

    def __init__(self, sink: IO[str] | None = None) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w", closefd=True)
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace", closefd=True)
        self._sink = sink if sink is not None else sys.stderr
        self._lines: deque[str] = deque(maxlen=MAX_STDERR_LINES)
        self._eof = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for line in self._reader:
                self._lines.append(line.rstrip("\n")[: MAX_LINE_CHARS * 2])
                try:
                    self._sink.write(line if line.endswith("\n") else line + "\n")
                    self._sink.flush()
                except (OSError, ValueError):
                    pass
        except (OSError, ValueError):
            pass
        finally:
            self._eof.set()
            self._reader.close()

    def spawned(self) -> None:
        """Close this process's write end (the child holds its own copy)."""
        if not self.writer.closed:
            self.writer.close()

    def wait_eof(self, timeout: float) -> bool:
        """Block (at most ``timeout`` s) until the child closed its stderr; True when it did."""
        self.spawned()
        return self._eof.wait(timeout)

    def lines(self) -> tuple[str, ...]:
        """The last lines read so far."""
        return tuple(self._lines)
