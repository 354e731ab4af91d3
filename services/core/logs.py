"""Structured (JSON-lines) logging for every service.

Log records carry an event name as the message and context in ``extra``. Never pass form values,
``requestState`` or MCP params in ``extra``: the secrecy suite greps every service's log for canaries.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_DROPPED = {"color_message"}
"""Extras other libraries add for their own console formatters (uvicorn's ANSI-coloured copy of the message)."""


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
    logging.getLogger("maka").info("starting", extra={"service": service})
