"""Structured (JSON-lines) logging for every service.

Log records carry an event name as the message and context in ``extra``. Never pass form values,
``requestState`` or MCP params in ``extra``: the secrecy suite greps every service's log for canaries.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_DROPPED = {"color_message"}
"""Extras other libraries add for their own console formatters (uvicorn's ANSI-coloured copy of the message)."""


QUIET_LOGGERS = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager")
"""The MCP SDK's Streamable HTTP loggers: at INFO they name every session id in full ("Created new transport with
session ID ..."), and an ``Mcp-Session-Id`` is all a client needs besides its token. Kept at WARNING, with any
session id that still reaches a record cut to its first 8 digits (:class:`RedactSessionIds`)."""
_SESSION_ID = re.compile(r"\b([0-9a-f]{8})[0-9a-f]{24}\b")


class RedactSessionIds(logging.Filter):
    """Cut every 32-hex-digit id (the SDK's session ids) in a record's message to its first 8 digits."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _SESSION_ID.sub(r"\1…", message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, event, and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in _DROPPED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            entry["exc_type"] = record.exc_info[0].__name__
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(service: str, level: str = "INFO") -> None:
    """Send JSON lines to stderr for ``service`` at ``level`` (replaces existing handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        quiet = logging.getLogger(name)
        quiet.setLevel(max(logging.WARNING, root.level))
        if not any(isinstance(f, RedactSessionIds) for f in quiet.filters):
            quiet.addFilter(RedactSessionIds())
    logging.getLogger("maka").info("starting", extra={"service": service})
