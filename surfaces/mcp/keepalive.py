"""Keepalives on the front door's SSE response streams (docs/mcp-front-door.md "Waiting calls and client
timeouts").

While a form waits, nothing else is written on a ``tools/call``'s response stream, and clients give up on a
silent stream: the Python SDK's HTTP client (``httpx``) reads with a 5 s timeout by default, then reports ``SSE
stream ended without a response`` (2026-07-28) or reconnects (2025-11-25), and the closed stream stops the call.
The SDK's transports already write SSE comment lines (``: ping``) on a silent stream, every 15 s: too rarely for
such a client. :func:`install` makes both write one every ``MAKA_MCP_KEEPALIVE_SECONDS`` (2.5 s) instead:

- 2026-07-28 (``mcp.server._streamable_http_modern``): a ``tools/call`` silent for that long commits
  ``text/event-stream`` and then pings at that interval (a handler that answers sooner still answers with
  ``application/json``);
- 2025-11-25 (``mcp.server.streamable_http``, through ``sse_starlette``): every response stream (a ``POST``'s and
  the ``GET`` that resumes one) pings at that interval.

A comment line carries no JSON-RPC message: clients skip it, and it is never stored for resumption.
"""

from __future__ import annotations

import logging

from mcp.server import _streamable_http_modern as modern
from mcp.server import streamable_http as legacy
from sse_starlette import EventSourceResponse

log = logging.getLogger("maka.mcp.keepalive")


class KeepaliveEventSourceResponse(EventSourceResponse):
    """``sse_starlette``'s response with the front door's ping interval (set by :func:`install`)."""

    DEFAULT_PING_INTERVAL = 15


def install(seconds: float) -> None:
    """Make the SDK's SSE streams of both eras write a keepalive comment every ``seconds`` (see the module
    docstring). Idempotent; the last call's interval holds (one front door per process)."""
    if not hasattr(modern, "_SSE_PING_INTERVAL") or getattr(legacy, "EventSourceResponse", None) not in (
        EventSourceResponse,
        KeepaliveEventSourceResponse,
    ):
        raise RuntimeError("the mcp SDK's SSE keepalive hooks moved: surfaces/mcp/keepalive.py needs updating")
    modern._SSE_PING_INTERVAL = seconds
    KeepaliveEventSourceResponse.DEFAULT_PING_INTERVAL = seconds  # type: ignore[assignment]
    setattr(legacy, "EventSourceResponse", KeepaliveEventSourceResponse)  # noqa: B010 (not re-exported)
    log.debug("mcp.keepalive", extra={"seconds": seconds})
