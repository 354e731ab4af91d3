"""The two callers compared side by side, with one interface (:class:`Caller`).

- :class:`AnchorCaller` - the official SDK's auto-loop: ``mcp.client.Client(url, elicitation_callback=...)``
  and ``client.call_tool``; the callback accepts at once (MCP 2026-07-28 ``input_required``, SEP-2322:
  the SDK dispatches ``inputRequests`` to the callback and retries ``tools/call`` with ``inputResponses``).
  Pointed at Maka's MCP front door (``surfaces.mcp``, Tools named ``examples.<tool>``) it is the front door
  caller: the same client code, the form answered by the stack's :class:`AnsweringSurface` instead.
- :class:`StackCaller` - the broker's ``CallTool`` stream of a running Maka stack (``maka up``), with an
  :class:`AnsweringSurface` (an ``Attach`` client) that answers each form as soon as it appears.

Both answer the example ``deploy`` form with the same values (:data:`DEPLOY_ANSWER`). Every call returns a
:class:`CallSample`: wall latency at the caller and, for calls that asked a form, the time from the answer
leaving the answering side to the final result arriving at the caller (answer-to-result).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mcp.client import Client, ClientRequestContext
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, TextContent

from maka_client import BrokerClient, Failure, InteractionSettled, Lost, Result, Stopped
from services.core.form import Action, Answer
from surfaces.common.interactions import Interactions, InteractionView
from tests.conformance.client.auto_answer import AutoAnswerer

log = logging.getLogger("maka.bench.callers")

SERVER_NAME: Final = "examples"
"""The ``mcpServers`` name of the example server in the stack's config (Tools are ``examples:<tool>``)."""
FRONT_DOOR_PREFIX: Final = f"{SERVER_NAME}."
"""What the MCP front door puts before a bare Tool name (``examples.deploy``, surfaces/mcp/tools.py)."""
SESSION: Final = "bench"
"""The session every benchmark call runs in (the answering surface attaches to it)."""
FRONT_DOOR_SESSION: Final = f"{SESSION}.local"
"""The session the MCP front door runs the benchmark's calls in (``MAKA_MCP_SESSION=bench``, a tokenless
2026-07-28 client: docs/mcp-front-door.md "Sessions"); the answering surface attaches to it too."""
DEPLOY_ANSWER: Final[dict[str, str | bool]] = {"environment": "staging", "confirm": True}
"""What both answering sides submit for the ``deploy`` form."""
CALL_TIMEOUT: Final = 60.0
"""Seconds one call may take before it counts as an error."""
STACK_PHASES: Final = (
    "call_to_form_at_surface",
    "form_at_surface_to_answer",
    "answer_to_settled_at_caller",
    "settled_at_caller_to_result",
)
"""The consecutive parts of a stack one-form call: ``CallTool`` sent -> the surface receives the form (first
``tools/call`` leg, provider, broker, Interaction service open, ``Attach`` delivery) -> the surface sends
``Answer`` (decode, scheduling) -> the caller sees ``interaction_settled`` (answer committed, HostLink
``settled``, broker) -> the caller has the final result (provider, retried ``tools/call``, broker)."""


@dataclass(frozen=True)
class CallSample:
    """One call: ``latency`` (s, caller's start to final result), ``answer_to_result`` (s, None without a
    form), ``ok`` (a complete, non-error result with the expected text), ``error`` (why not, if not ok)."""

    latency: float
    answer_to_result: float | None
    ok: bool
    error: str = ""
    phases: dict[str, float] = field(default_factory=lambda: dict[str, float]())
    """Where the time went (s), for the stack's one-form calls: see :data:`STACK_PHASES`."""


class Caller(Protocol):
    """Something that calls a bare Tool name of the example server and times it."""

    name: str

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallSample:
        """Call ``tool`` with ``arguments``; never raises for a failed call (``ok`` is False)."""
        ...


_EXPECTED_PREFIX: Final = {"deploy": "Deployed ", "ping": "pong"}


def _check_text(tool: str, text: str) -> str:
    """Empty when ``text`` is the expected final result of ``tool``; otherwise a short reason."""
    expected = _EXPECTED_PREFIX.get(tool, "")
    return "" if text.startswith(expected) else f"unexpected result text {text[:80]!r}"


# --- anchor: the official SDK auto-loop ----------------------------------------------------------------

_answered_at: contextvars.ContextVar[list[float]] = contextvars.ContextVar("bench_answered_at")


async def _accept_at_once(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    """The anchor's elicitation callback: accept with :data:`DEPLOY_ANSWER` and note the time."""
    stamps = _answered_at.get(None)
    result = ElicitResult(action="accept", content=dict(DEPLOY_ANSWER))
    if stamps is not None:
        stamps.append(time.perf_counter())
    return result


class AnchorCaller:
    """The official SDK ``Client`` over Streamable HTTP; one session shared by all concurrent calls.

    Open a fresh one per measurement: the SDK's HTTP transport fails the whole ``Client`` when it reuses
    a pooled connection the server's keep-alive timer just closed (``httpx2.ReadError`` raised from its
    task group). Such a failure on exit is kept in :attr:`transport_error` instead of raised.
    """

    def __init__(self, url: str, *, name: str = "anchor", tool_prefix: str = "") -> None:
        self.url = url
        self.name = name
        self.tool_prefix = tool_prefix
        """Put before the bare Tool name: ``examples.`` when ``url`` is Maka's MCP front door."""
        self._client: Client | None = None
        self._stack = contextlib.AsyncExitStack()
        self.transport_error = ""

    async def __aenter__(self) -> AnchorCaller:
        client = Client(self.url, elicitation_callback=_accept_at_once)
        self._client = await self._stack.enter_async_context(client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stack.aclose()
        except Exception as error:  # the SDK transport's task group failed (see the class docstring)
            self.transport_error = f"{type(error).__name__}: {error}"[:200]
            log.warning("bench_anchor_transport_error", extra={"error": self.transport_error})

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallSample:
        """``client.call_tool(tool_prefix + tool, arguments)``; the callback's return time starts
        answer-to-result."""
        assert self._client is not None, "use AnchorCaller as an async context manager"
        stamps: list[float] = []
        token = _answered_at.set(stamps)  # child tasks of the SDK's dispatcher share this list
        start = time.perf_counter()
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                result: CallToolResult = await self._client.call_tool(self.tool_prefix + tool, dict(arguments))
        except Exception as error:  # a failed call is a data point, not a crash
            return CallSample(time.perf_counter() - start, None, False, f"{type(error).__name__}: {error}"[:200])
        finally:
            _answered_at.reset(token)
        end = time.perf_counter()
        text = "".join(block.text for block in result.content if isinstance(block, TextContent))
        problem = "tool reported isError" if result.is_error else _check_text(tool, text)
        return CallSample(end - start, end - stamps[-1] if stamps else None, not problem, problem)


# --- stack: maka up + an automatic answering surface ----------------------------------------------------


class AnsweringSurface(AutoAnswerer):
    """The conformance client's :class:`AutoAnswerer` answering every form with :data:`DEPLOY_ANSWER`, stamping
    ``seen_at[tool_use_id]`` when a form first reaches the surface and ``answered_at[tool_use_id]`` just before
    its ``Answer`` RPC (perf_counter seconds)."""

    def __init__(self, client: Interactions, session_ids: tuple[str, ...] = (SESSION,)) -> None:
        super().__init__(
            client,
            session_ids,
            gate=self._stamp_answer,
            answer_for=lambda _form: Answer(Action.ACCEPT, dict(DEPLOY_ANSWER)),
            on_seen=self._stamp_seen,
        )
        self.seen_at: dict[str, float] = {}
        self.answered_at: dict[str, float] = {}

    def _stamp_seen(self, view: InteractionView) -> None:
        self.seen_at[view.tool_use_id] = time.perf_counter()

    async def _stamp_answer(self, view: InteractionView) -> None:
        self.answered_at[view.tool_use_id] = time.perf_counter()


class StackCaller:
    """The broker's ``CallTool`` stream through :class:`maka_client.BrokerClient` (what ``maka call`` uses),
    on one channel, with an :class:`AnsweringSurface`."""

    name = "stack"

    def __init__(self, broker: str, interaction: str) -> None:
        self.broker = broker
        self.interaction = interaction
        self._stack = contextlib.AsyncExitStack()
        self._client: BrokerClient | None = None
        self.surface: AnsweringSurface | None = None
        self._surface_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StackCaller:
        self._client = await self._stack.enter_async_context(BrokerClient(self.broker))
        client = await self._stack.enter_async_context(Interactions.connect(self.interaction))
        self.surface = AnsweringSurface(client, (SESSION, FRONT_DOOR_SESSION))
        self._surface_task = asyncio.create_task(self.surface.run())
        async with asyncio.timeout(CALL_TIMEOUT):
            await self.surface.wait_subscribed()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._surface_task is not None:
            self._surface_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._surface_task
        await self._stack.aclose()

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallSample:
        """``CallTool(examples:<tool>)`` until its last event; the surface's answer time starts answer-to-result."""
        assert self._client is not None, "use StackCaller as an async context manager"
        assert self.surface is not None
        tool_use_id = uuid.uuid4().hex
        start = time.perf_counter()
        problem = "no final event"
        end = start
        settled = 0.0
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                call = self._client.call_tool(
                    f"{SERVER_NAME}:{tool}",
                    arguments,
                    session_id=SESSION,
                    turn_id=tool_use_id,
                    tool_use_id=tool_use_id,
                )
                async for event in call:
                    if isinstance(event, InteractionSettled):
                        settled = time.perf_counter()
                    elif isinstance(event, Result):
                        end = time.perf_counter()
                        problem = "tool reported isError" if event.is_error else _check_text(tool, event.text)
                    elif isinstance(event, Failure):
                        end = time.perf_counter()
                        problem = f"failure: FAILURE_CODE_{event.code}"
                    elif isinstance(event, Lost | Stopped):
                        end = time.perf_counter()
                        problem = f"{type(event).__name__.lower()}: {type(event).__name__.lower()}"
        except Exception as error:  # a failed call is a data point, not a crash
            problem = f"{type(error).__name__}: {error}"[:200]
            end = time.perf_counter()
        answered = self.surface.answered_at.pop(tool_use_id, None)
        seen = self.surface.seen_at.pop(tool_use_id, None)
        phases: dict[str, float] = {}
        if answered is not None and seen is not None and settled:
            marks = (start, seen, answered, settled, end)
            phases = {name: marks[i + 1] - marks[i] for i, name in enumerate(STACK_PHASES)}
        answer_to_result = end - answered if answered is not None else None
        return CallSample(end - start, answer_to_result, not problem, problem, phases)
