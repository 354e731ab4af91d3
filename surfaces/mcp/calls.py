"""One MCP ``tools/call`` as one broker call, exactly like ``maka call`` (docs/mcp-front-door.md).

The call runs through :class:`maka_client.BrokerClient` under its own turn: its forms open on Maka's surfaces
(web, TUI, CLI, gRPC clients) and the first answer wins. While a form waits, ``notify`` (the request's
``notifications/progress`` when the client sent a progress token) names the form and where to answer it. The
MCP client receives one complete ``CallToolResult``. A cancelled request (``notifications/cancelled``, or the
HTTP response stream closing) stops the turn (broker ``Stop``: no retry is sent, nothing stays pending).

Errors map to MCP: an unknown Tool is JSON-RPC ``-32602``; invalid arguments, an unavailable server (with its
cause) and every other broker failure are a Tool execution error (``isError``, the code and message as text,
so a model can correct itself); a Tool's own ``isError`` result passes through unchanged. Only the result's
``content``, ``structuredContent`` and ``isError`` are passed on: nothing else of the upstream result (its
``_meta``, and never a ``requestState``, which the provider keeps) reaches the MCP client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError

from maka_client import (
    AwaitingInteraction,
    BrokerClient,
    BrokerErrorReason,
    Failure,
    FailureCode,
    Lost,
    MakaError,
    Progress,
    Reattaching,
    Result,
    Stopped,
)
from services.core.messages import BROKER_FORGOT_CALL, lost_call
from surfaces.common.names import closest_name

log = logging.getLogger("maka.mcp.calls")

STOP_TIMEOUT_SECONDS = 5.0
PASSED_KEYS = ("content", "structuredContent", "isError")
"""The only keys of the upstream ``CallToolResult`` the MCP client receives."""

Notify = Callable[[str], Awaitable[None]]
"""Sends one progress message to the MCP client (a no-op without a progress token)."""


def error_result(text: str) -> CallToolResult:
    """A Tool execution error (``isError``) with ``text``."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def passed_result(result: Mapping[str, Any]) -> CallToolResult:
    """The upstream ``CallToolResult`` as the MCP client receives it (see the module docstring)."""
    kept = {key: result[key] for key in PASSED_KEYS if key in result}
    kept.setdefault("content", [])
    try:
        return CallToolResult.model_validate(kept)
    except ValidationError:
        return error_result("INVALID_RESULT: the Tool returned a result this endpoint cannot pass on")


def where_to_answer(web_url: str, interaction_id: str) -> str:
    """Where a person answers form ``interaction_id``: the web page when one runs, else the CLI."""
    cli = f"`maka answer {interaction_id}`"
    return f"{web_url} (or {cli})" if web_url else f"{cli} (or `maka tui`)"


UNKNOWN_TOOL_REASON = "unknown_tool"
"""``data.reason`` of the ``-32602`` error for a Tool this endpoint does not list."""
NAME_HINT = "front-door Tool names are SERVER.TOOL, e.g."
"""What the unknown-Tool error adds: how the endpoint names Tools (:mod:`surfaces.mcp.tools`), then an example."""


def name_hint(name: str, listed: Iterable[str] = ()) -> str:
    """How front-door Tools are named, with the listed Tool most like ``name`` (``did you mean X``, as ``maka
    call`` says: :func:`surfaces.common.names.closest_name`), or a listed name as the example."""
    names = sorted(listed)
    close = closest_name(name, names)
    if close is not None:
        return f"did you mean {close}? {NAME_HINT} {close} (tools/list lists them)"
    example = names[0] if names else "examples.deploy"
    return f"{NAME_HINT} {example} (tools/list lists them)"


class UnknownTool(MCPError):
    """``tools/call`` named a Tool this endpoint does not list: JSON-RPC ``-32602`` with ``data.reason``
    ``unknown_tool`` and a hint at the naming (the closest listed Tool when one is close: ``listed``)."""

    def __init__(self, name: str, listed: Iterable[str] = ()) -> None:
        message = f"Unknown tool: {name} ({name_hint(name, listed)})"
        super().__init__(INVALID_PARAMS, message, {"reason": UNKNOWN_TOOL_REASON})


def in_mcp_terms(text: str, qualified: str, mcp_name: str) -> str:
    """``text`` (a broker message) naming the Tool by its MCP name: the broker's ``SERVER:TOOL`` replaced."""
    return text.replace(qualified, mcp_name) if qualified != mcp_name else text


async def run_call(
    broker: BrokerClient,
    *,
    mcp_name: str,
    qualified: str,
    arguments: Mapping[str, Any],
    session_id: str,
    web_url: str,
    notify: Notify,
    observe: Callable[[object], None] | None = None,
    listed: Iterable[str] = (),
) -> CallToolResult:
    """Run broker Tool ``qualified`` with ``arguments``; returns the MCP result (see the module docstring).

    Raises :class:`UnknownTool` when the broker knows no such Tool (suggesting the closest of ``listed``).
    Cancelling the caller stops the turn first.
    ``observe`` (optional) sees every broker event first (the forms asked of the client itself,
    :mod:`surfaces.mcp.elicit`).
    """
    turn = f"mcp-{uuid.uuid4().hex[:16]}"
    call = broker.call_tool(qualified, arguments, session_id=session_id, turn_id=turn, tool_use_id=turn)
    ended = False
    stream_broke = False
    try:
        async for event in call:
            ended = isinstance(event, (Result, Failure, Lost, Stopped))
            if isinstance(event, Reattaching):
                stream_broke = stream_broke or event.code != "EOF"
            if observe is not None:
                observe(event)
            if isinstance(event, AwaitingInteraction):
                await notify(
                    f"Waiting for your answer to the form “{event.message}” ({event.interaction_id}): answer it"
                    f" in {where_to_answer(web_url, event.interaction_id)}"
                )
            elif isinstance(event, Progress) and event.message:
                await notify(event.message)
            elif isinstance(event, Result):
                return passed_result(event.result)
            elif isinstance(event, Failure):
                if event.code == FailureCode.UNKNOWN_TOOL:
                    raise UnknownTool(mcp_name, listed)
                message = in_mcp_terms(event.message or "the call failed", qualified, mcp_name)
                return error_result(f"{event.code}: {message}")
            elif isinstance(event, Lost):
                return error_result(f"LOST: {lost_call(event.reason or 'the provider went away')}")
            elif isinstance(event, Stopped):
                return error_result("STOPPED: the call was stopped")
    except MakaError as error:
        if error.reason in (BrokerErrorReason.CALL_NOT_FOUND, BrokerErrorReason.NOT_FOUND):
            # as `maka call`: a broker that restarted knows none of its previous Host epoch's calls
            if stream_broke:
                return error_result(f"LOST: {lost_call(BROKER_FORGOT_CALL)}")
            return error_result("NO_RESULT: the broker ended the call without a result")
        message = in_mcp_terms(error.message or "the broker refused the call", qualified, mcp_name)
        return error_result(f"{error.code}: {message}")
    except BaseException:
        if not ended:
            await _stop(broker, session_id, turn, call.host_address)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await call.aclose()
    return error_result("NO_RESULT: the broker ended the call without a result")


async def _stop(broker: BrokerClient, session_id: str, turn: str, host_address: str) -> None:
    """Stop the turn, on the Host that owns its call (a pool's, docs/clients.md "Pools of Hosts"), even though
    the caller's scope is cancelled (bounded)."""
    with anyio.move_on_after(STOP_TIMEOUT_SECONDS, shield=True):
        try:
            stopped = await broker.stop(session_id, turn, timeout=STOP_TIMEOUT_SECONDS, host_address=host_address)
        except MakaError as error:
            log.warning("mcp.stop_failed", extra={"turn": turn, "code": error.code})
            return
        log.info("mcp.call_stopped", extra={"turn": turn, "stopped": stopped})
