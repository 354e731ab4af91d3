"""The guards around the SDK transport's closed-session race: a late response or failure after a completed
response ends the request quietly; the SDK's record of a closed session stream is INFO, any other stays ERROR."""

from __future__ import annotations

import logging

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from surfaces.mcp.guards import ClosedSessionFilter, LateFailures

SCOPE: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _accepted_then_closed(scope: Scope, receive: Receive, send: Send) -> None:
    """What the SDK does when a notification's session closes between its 202 and its hand-off."""
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    await send({"type": "http.response.start", "status": 500, "headers": []})
    await send({"type": "http.response.body", "body": b"error", "more_body": False})
    raise anyio.ClosedResourceError


async def test_a_failure_after_the_response_completed_ends_the_request_with_only_the_first_response() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await LateFailures(_accepted_then_closed)(SCOPE, _receive, send)

    assert [(m["type"], m.get("status")) for m in sent] == [("http.response.start", 202), ("http.response.body", None)]


async def test_a_failure_before_the_response_completed_still_escapes() -> None:
    async def fails(scope: Scope, receive: Receive, send: Send) -> None:
        raise anyio.ClosedResourceError

    async def send(message: Message) -> None:
        raise AssertionError("nothing is sent")

    with pytest.raises(anyio.ClosedResourceError):
        await LateFailures(fails)(SCOPE, _receive, send)


def _record(error: BaseException) -> logging.LogRecord:
    return logging.LogRecord(
        "mcp.server.streamable_http",
        logging.ERROR,
        __file__,
        1,
        "Error handling POST request",
        None,
        (type(error), error, None),
    )


def test_the_sdks_record_of_a_closed_session_stream_is_info() -> None:
    record = _record(anyio.ClosedResourceError())
    assert ClosedSessionFilter().filter(record)
    assert (record.levelno, record.levelname, record.exc_info) == (logging.INFO, "INFO", None)


def test_any_other_sdk_error_record_stays_error() -> None:
    record = _record(ValueError("boom"))
    assert ClosedSessionFilter().filter(record)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
