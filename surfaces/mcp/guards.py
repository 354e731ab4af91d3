"""Guards around a race in the SDK's Streamable HTTP transport (``mcp.server.streamable_http``).

A 2025-11-25 client that leaves while a request of its session runs (a cancelled call whose
``elicitation/create`` is outstanding: the client answers or cancels with one POST and closes the session with
``DELETE`` at once) can have that POST answered ``202`` and then find the session's stream closed by the
``DELETE``. The SDK then logs ``Error handling POST request`` (``ClosedResourceError``) at ERROR, starts a second
response on the finished one and sends the error into the closed stream, which uvicorn logs as ``Exception in ASGI
application``. Nothing is wrong: the session is gone, as its client asked. So:

- :class:`LateFailures` (ASGI middleware) drops response messages sent after a request's response completed and
  takes an exception raised after it completed as the end of that request (logged at INFO, by type only);
- :class:`ClosedSessionFilter` logs the SDK's record of a closed session stream at INFO instead of ERROR.

Any other failure is logged as before.
"""

from __future__ import annotations

import logging

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("maka.mcp.guards")

SDK_TRANSPORT_LOGGER = "mcp.server.streamable_http"
CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError)
"""What the SDK raises into a session stream that its ``DELETE`` (or end) closed."""


class LateFailures:
    """ASGI middleware: after a request's response completed, later response messages are dropped and an
    exception is logged at INFO instead of escaping to the server (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        completed = False

        async def once(message: Message) -> None:
            nonlocal completed
            if completed:
                log.info("mcp.late_response_dropped", extra={"message": message["type"]})
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        try:
            await self.app(scope, receive, once)
        except Exception as error:
            if not completed:
                raise
            log.info("mcp.late_failure", extra={"error": type(error).__name__})


class ClosedSessionFilter(logging.Filter):
    """Logs the SDK transport's ERROR records caused by a closed session stream (:data:`CLOSED`) at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.levelno >= logging.ERROR and isinstance(error, CLOSED):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


def install() -> None:
    """Put :class:`ClosedSessionFilter` on the SDK transport's logger (once)."""
    logger = logging.getLogger(SDK_TRANSPORT_LOGGER)
    if not any(isinstance(f, ClosedSessionFilter) for f in logger.filters):
        logger.addFilter(ClosedSessionFilter())
