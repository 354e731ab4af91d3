"""``McpClientManager``: the manual MRTR loop of one logical MCP ``tools/call`` (MCP 2026-07-28, SEP-2322).

Each call is driven by hand through the SDK's ``ClientSession.call_tool(..., allow_input_required=True)``:

1. send the original call (bound to the Tool's connection and tool generation) and accept a complete
   ``CallToolResult`` (an absent ``resultType`` counts as complete) or a validated ``InputRequiredResult``;
2. a result with only ``requestState`` retries after an abortable pacing delay (50 ms doubling to
   250 ms, like the SDK), without a form;
3. an unsupported embedded request (URL-mode elicitation, ``sampling/createMessage``, ``roots/list``,
   an unknown method), an over-cap round (count, key length, bytes, ``requestState`` size) or an
   exhausted round cap fails the whole round before any form is published: no retry is sent;
4. every form-mode ``elicitation/create`` is decoded into the form contract
   (:func:`services.core.form.decode_requested_schema`, requester = claimed server and Tool) and put to
   the :data:`FormHandler`, one at a time in sorted key order (Unicode code point order);
5. each answer is validated again (:func:`services.core.form.validate_answer`, then ``jsonschema``
   against the server's original ``requestedSchema``) and collected as a bare ``ElicitResult`` under
   the server's exact key;
6. the fences are checked (same Tool binding and connection generation, provider link alive, not
   stopped) and the original method is retried with the unchanged name and arguments, this round's
   ``inputResponses`` only, and the byte-exact ``requestState`` (none if the server sent none), on a
   fresh JSON-RPC id (the SDK mints one per request);
7. this repeats up to ``max_rounds`` retries, then fails with ``ROUNDS_EXHAUSTED``.

``prompts/get`` and ``resources/read`` (:meth:`McpClientManager.get_prompt`, :meth:`~McpClientManager.read_resource`)
never run this loop (RFC criterion 11; MRTR for them is a non-goal): one request, no ``elicitation`` claim,
and an ``input_required`` answer fails ``UNSUPPORTED_METHOD`` with no retry.

Secrecy (docs/design.md#requeststate): ``requestState`` exists only in the local variables of
:func:`drive_input_required` (the loop :meth:`McpClientManager.call_tool` runs) for one continuation; it is
never logged, put in an exception message or returned. SDK exceptions that could quote it (pydantic
``ValidationError`` echoes input) are replaced, not chained.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolResult,
    CreateMessageRequest,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    GetPromptResult,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ReadResourceResult,
)
from pydantic import ValidationError

from services.core import metrics, tracing
from services.core.form import Answer, Form, FormError, FormErrorReason, Requester, decode_requested_schema
from services.core.form import validate_answer as core_validate_answer
from services.core.form.mcp_json import answer_to_elicit_result
from services.core.limits import DEFAULT_LIMITS, Limits
from services.mcp_provider import capabilities
from services.mcp_provider.connection import LocalTimeout, McpConnection, ToolBinding, TransportClosed
from services.mcp_provider.errors import CallErrorCode, McpToolCallError
from services.mcp_provider.stop import Stop, abortable

log = logging.getLogger("maka.mcp_provider.manager")


@functools.lru_cache(maxsize=64)
def _schema_is_valid(schema_json: str) -> bool:
    """Whether ``schema_json`` (canonical JSON text of a ``requestedSchema``) is a valid JSON Schema under the
    metaschema its ``$schema`` names (default 2020-12).

    Memoised on the exact canonical text: a server sends the same ``requestedSchema`` every round and
    call, and the metaschema walk costs milliseconds (2-11 ms for the example forms; profiled as the
    provider's largest CPU cost per round, bench/README.md). Key order never changes validity, so
    ``sort_keys`` text is a sound key; at most 64 entries of at most ``max_request_bytes`` each are kept.
    """
    schema = json.loads(schema_json)
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


@functools.lru_cache(maxsize=64)
def _answer_validator(schema_json: str) -> Validator:
    """A validator (with format checks) of the ``requestedSchema`` whose canonical JSON text is ``schema_json``.

    Memoised like :func:`_schema_is_valid`: building one resolves the dialect's metaschema and vocabulary
    every time, for a schema that is the same every round. Validators are immutable (``iter_errors`` keeps
    no state), so one serves every answer to that schema.
    """
    schema = json.loads(schema_json)
    cls = validator_for(schema, default=Draft202012Validator)
    validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator


@functools.lru_cache(maxsize=64)
def _decoded(schema_json: str, message: str, requester: Requester, limits: Limits) -> Form:
    """:func:`decode_requested_schema` of the ``requestedSchema`` whose JSON text (key order kept: it is the
    fields' order) is ``schema_json``, memoised like :func:`_schema_is_valid`: a server asks the same form
    every call, and decoding re-walks every property and re-measures the request each time. A
    :class:`Form` is immutable, so one serves every call. Raises :class:`FormError` (never cached)."""
    return decode_requested_schema(json.loads(schema_json), message=message, requester=requester, limits=limits)


def _decode(schema: object, message: str, requester: Requester, limits: Limits) -> Form:
    """The round's form through :func:`_decoded` (falls back to an unmemoised decode for a schema that has
    no JSON text, so that one fails exactly as before). Raises :class:`FormError`."""
    try:
        text = json.dumps(schema, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return decode_requested_schema(schema, message=message, requester=requester, limits=limits)
    return _decoded(text, message, requester, limits)


def _canonical(schema: Mapping[str, Any]) -> str:
    """The memo key of a ``requestedSchema``: sorted keys, no spaces (key order never changes meaning)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class RoundSlot:
    """Where the form being asked sits in its MRTR round (read with :func:`current_round`).

    ``position`` is 1-based, ``size`` the round's form count; ``deadline`` (Unix seconds) is the round's
    one deadline — when its ``requestState`` was received plus the server's ``requestStateTtl`` — or
    ``None`` when the server sent no ``requestState`` (nothing expires).
    """

    position: int
    size: int
    deadline: float | None


_CURRENT_ROUND: contextvars.ContextVar[RoundSlot | None] = contextvars.ContextVar("maka_round", default=None)


def current_round() -> RoundSlot | None:
    """The :class:`RoundSlot` of the form a :data:`FormHandler` is asked for (``None`` outside a handler)."""
    return _CURRENT_ROUND.get()


FormHandler = Callable[[Form], Awaitable[Answer]]
"""Asks the Host for one form and returns the user's answer (accept/decline/cancel).

Raises :class:`~services.mcp_provider.errors.InteractionAborted` when the form closed without an
answer (stop, timeout, provider loss, host restart): the call then fails and no retry is sent.
During the call :func:`current_round` gives the form's position in its round and the round's deadline.
"""

ProgressHandler = ProgressFnT
"""Receives MCP ``notifications/progress`` of the in-flight leg: ``(progress, total, message)``."""

T = TypeVar("T")


@dataclass(frozen=True)
class CallOutcome:
    """A complete result: the ``CallToolResult`` JSON object and how many retries it took."""

    result: dict[str, Any]
    retries: int
    forms: int


async def _in_round(slot: RoundSlot, handler: Awaitable[Answer]) -> Answer:
    token = _CURRENT_ROUND.set(slot)
    try:
        return await handler
    finally:
        _CURRENT_ROUND.reset(token)


def _require_complete(result_type: object) -> None:
    """Fail a result the SDK parsed as complete whose ``resultType`` is not ``"complete"``.

    MCP 2026-07-28 ``basic/index`` §ResultType: an absent ``resultType`` is ``"complete"`` (the dispatcher
    fills it in), an unrecognised value MUST be treated as invalid. The SDK's ``CallToolResult`` accepts any
    string, so ``"task"``, ``"foo"`` and an ``input_required`` with neither ``inputRequests`` nor
    ``requestState`` (which fails ``InputRequiredResult``) would otherwise pass as a successful result.
    """
    if result_type == "complete":
        return
    shown = server_message(result_type)[:40] if isinstance(result_type, str) else type(result_type).__name__
    detail = (
        "input_required with neither inputRequests nor requestState"
        if result_type == "input_required"
        else f"unrecognised resultType {shown!r}"
    )
    raise McpToolCallError(CallErrorCode.INVALID_RESULT, f"the server sent an invalid result: {detail}")


MAX_SERVER_MESSAGE_CHARS = 300
"""How much of a server's JSON-RPC error message travels in the call's failure."""


def server_message(message: object, *, secret: str | None = None) -> str:
    """A server's error ``message`` made safe to show: control characters removed, whitespace runs folded,
    at most :data:`MAX_SERVER_MESSAGE_CHARS` characters (``…`` marks a cut), and ``secret`` (the
    ``requestState`` this leg sent, never shown: docs/design.md#requeststate) replaced by ``[requestState]``, also
    where the server quoted it JSON-escaped (``json.dumps`` / ``JSON.stringify`` of a JSON ``requestState``)."""
    if not isinstance(message, str):
        return ""
    text = message
    if secret:
        escaped = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        for form in sorted({secret, *escaped}, key=len, reverse=True):
            text = text.replace(form, "[requestState]")
    text = "".join(" " if ch.isspace() else ch for ch in text if ch.isprintable() or ch.isspace())
    text = " ".join(text.split())
    if len(text) > MAX_SERVER_MESSAGE_CHARS:
        text = text[: MAX_SERVER_MESSAGE_CHARS - 1] + "…"
    return text


class _LegTimer:
    """The read timeout of one ``tools/call`` leg, re-armed by each progress notification
    (docs/operations.md#timers-and-progress) but never past ``maximum`` seconds after the leg started. Expiry raises
    ``SERVER_ERROR`` (outcome unknown); the SDK cancels the request on the wire."""

    def __init__(self, idle: float, maximum: float, progress: ProgressHandler | None) -> None:
        self._idle = idle
        self._maximum = max(maximum, idle)
        self._progress = progress
        self._scope: asyncio.Timeout | None = None
        self._started = 0.0

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        self._started = loop.time()
        self._scope = asyncio.timeout(self._idle)
        await self._scope.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        assert self._scope is not None
        try:
            await self._scope.__aexit__(*exc)
        except TimeoutError:
            raise McpToolCallError(
                CallErrorCode.SERVER_ERROR,
                f"tools/call got no result or progress within {self._idle:g} s; outcome unknown",
            ) from None

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._scope is not None:
            loop = asyncio.get_running_loop()
            self._scope.reschedule(min(loop.time() + self._idle, self._started + self._maximum))
        if self._progress is not None:
            await self._progress(progress, total, message)


def _json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


Leg = Callable[[int, dict[str, InputResponse] | None, str | None], Awaitable[CallToolResult | InputRequiredResult]]
"""Sends leg ``retry`` (0: the original call) with the previous round's responses and ``requestState``."""
AnswerRound = Callable[[InputRequiredResult, float], Awaitable[dict[str, InputResponse] | None]]
"""Checks a whole round (received at the given Unix time) and collects its answers; None for a round that
carried only ``requestState``."""


async def drive_input_required(
    leg: Leg,
    answer_round: AnswerRound,
    pause: Callable[[float], Awaitable[None]],
    *,
    max_rounds: int,
    pacing_initial: float,
    pacing_max: float,
    clock: Callable[[], float] = time.time,
) -> tuple[CallToolResult, int, int]:
    """The ``input_required`` loop of one ``tools/call`` (SEP-2322), with its I/O passed in: returns the
    complete result, the retries it took and the forms answered.

    Each leg's ``InputRequiredResult`` is answered (``answer_round``) and the call retried with this
    round's responses only and the byte-exact ``requestState`` of the round (none if the server sent
    none). A round with only ``requestState`` retries after ``pause`` (``pacing_initial`` doubling to
    ``pacing_max``, reset by a round with forms). Raises ``ROUNDS_EXHAUSTED`` when the server still
    asks after ``max_rounds`` retries. ``requestState`` lives only in this function's locals.
    """
    responses: dict[str, InputResponse] | None = None
    request_state: str | None = None
    retries = forms = 0
    pacing = pacing_initial
    while True:
        result = await leg(retries, responses, request_state)
        if isinstance(result, CallToolResult):
            return result, retries, forms
        received_at = clock()
        if retries >= max_rounds:
            raise McpToolCallError(
                CallErrorCode.ROUNDS_EXHAUSTED, f"no complete result after {retries} retries (cap {max_rounds})"
            )
        responses = await answer_round(result, received_at)
        request_state = result.request_state
        del result
        if responses is None:
            await pause(pacing)
            pacing = min(pacing * 2, pacing_max)
        else:
            pacing = pacing_initial
            forms += len(responses)
        retries += 1


class McpClientManager:
    """Owns the MCP connections of this provider and drives Tool calls through the MRTR loop.

    ``max_rounds`` is the number of retries after the first leg (default 10: at most 11 ``tools/call``
    legs). ``pacing_initial_ms``/``pacing_max_ms`` shape the state-only retry delay.
    ``call_timeout_seconds`` is the read timeout of one leg (a server's ``timeout`` overrides it);
    each progress notification re-arms it, up to ``max_call_seconds`` for the whole leg.
    """

    def __init__(
        self,
        *,
        limits: Limits = DEFAULT_LIMITS,
        max_rounds: int | None = None,
        pacing_initial_ms: int = 50,
        pacing_max_ms: int = 250,
        call_timeout_seconds: float = 300.0,
        max_call_seconds: float = 3600.0,
        provider_id: str = "",
        provider_display_name: str = "",
    ) -> None:
        self._connections: dict[str, McpConnection] = {}
        self.limits = limits
        self.max_rounds = limits.max_rounds if max_rounds is None else max_rounds
        self.pacing_initial = pacing_initial_ms / 1000
        self.pacing_max = pacing_max_ms / 1000
        self.call_timeout_seconds = call_timeout_seconds
        self.max_call_seconds = max_call_seconds
        self.provider_id = provider_id
        self.provider_display_name = provider_display_name

    # --- connections --------------------------------------------------------------------------

    def add(self, connection: McpConnection) -> None:
        """Manage ``connection`` under its server name (replacing any previous one)."""
        self._connections[connection.name] = connection

    def remove(self, server: str) -> None:
        """Stop managing ``server`` (a config reload removed or replaced it; the caller closed it)."""
        self._connections.pop(server, None)

    def connection(self, server: str) -> McpConnection:
        """The connection of ``server``. Raises ``McpToolCallError`` ``UNKNOWN_TOOL`` when not configured."""
        connection = self._connections.get(server)
        if connection is None:
            raise McpToolCallError(CallErrorCode.UNKNOWN_TOOL, "no such MCP server")
        return connection

    @property
    def connections(self) -> Mapping[str, McpConnection]:
        """Every managed connection by server name."""
        return self._connections

    async def start(self) -> None:
        """Start every connection's supervisor."""
        for connection in self._connections.values():
            await connection.start()

    async def close(self) -> None:
        """Close every connection."""
        for connection in self._connections.values():
            await connection.close()

    # --- the loop -----------------------------------------------------------------------------

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        form_handler: FormHandler | None = None,
        progress: ProgressHandler | None = None,
        stop: Stop | None = None,
        link_alive: Callable[[], bool] | None = None,
    ) -> CallOutcome:
        """Run ``server``'s Tool ``tool`` with ``arguments`` to a complete result (see module docstring).

        ``form_handler`` installs the form path: only then, and only on a modern connection, does each
        leg advertise ``{"elicitation": {"form": {}}}``. ``stop`` aborts the call (the in-flight MCP
        request is cancelled and nothing more is sent). ``link_alive`` is the provider-link fence.

        Returns :class:`CallOutcome`. Raises :class:`McpToolCallError` with a stable
        :class:`CallErrorCode`: ``UNKNOWN_TOOL``, ``CONNECTION_LOST``, ``BINDING_CHANGED``,
        ``UNSUPPORTED_INPUT_REQUEST``, ``LIMITS_EXCEEDED``, ``ROUNDS_EXHAUSTED``, ``INVALID_FORM``,
        ``INVALID_ANSWER``, ``SERVER_ERROR``, ``REQUEST_STATE_REJECTED``, ``MISSING_CLIENT_CAPABILITY``,
        ``STOPPED``, or the code of an :class:`InteractionAborted` raised by ``form_handler``.
        """
        stop = stop if stop is not None else Stop()
        connection = self.connection(server)
        binding = connection.binding(tool)
        original_arguments = dict(arguments or {})
        advertise_form = form_handler is not None and binding.modern

        async def leg(
            retry: int, responses: dict[str, InputResponse] | None, request_state: str | None
        ) -> CallToolResult | InputRequiredResult:
            if retry:
                metrics.MRTR_ROUNDS.labels("form" if responses else "state_only").inc()
                log.info(
                    "mcp_call_retry",
                    extra={"server": server, "tool": tool, "retry": retry, "responses": len(responses or {})},
                )
            self._fence(connection, binding, stop, link_alive)
            with tracing.span("mcp.tools_call", tool=tool, round=retry):
                return await self._leg(
                    connection,
                    binding,
                    original_arguments,
                    responses,
                    request_state,
                    advertise_form=advertise_form,
                    progress=progress,
                    stop=stop,
                )

        async def answer_round(result: InputRequiredResult, received_at: float) -> dict[str, InputResponse] | None:
            requests = self._check_round(result, form_handler, binding)
            if not requests:
                return None
            assert form_handler is not None
            ttl = connection.config.request_state_ttl_seconds
            deadline = received_at + ttl if result.request_state is not None else None
            fence = functools.partial(self._fence, connection, binding, stop, link_alive)
            return await self._ask_round(requests, form_handler, fence, stop, deadline, ttl)

        result, retries, forms = await drive_input_required(
            leg,
            answer_round,
            functools.partial(self._pause, stop=stop),
            max_rounds=self.max_rounds,
            pacing_initial=self.pacing_initial,
            pacing_max=self.pacing_max,
        )
        _require_complete(result.result_type)
        log.info("mcp_call_complete", extra={"server": server, "tool": tool, "retries": retries})
        return CallOutcome(result.model_dump(by_alias=True, mode="json", exclude_none=True), retries, forms)

    async def _ask_round(
        self,
        requests: dict[str, tuple[Form, dict[str, Any]]],
        form_handler: FormHandler,
        fence: Callable[[], None],
        stop: Stop,
        deadline: float | None,
        ttl: float,
    ) -> dict[str, InputResponse]:
        """Ask the round's forms one at a time (fenced before each, none past the round's ``deadline``)
        and return the validated answers under the server's keys."""
        responses: dict[str, InputResponse] = {}
        for position, (key, (form, schema)) in enumerate(requests.items(), start=1):
            fence()
            if deadline is not None and time.time() >= deadline:
                raise McpToolCallError(
                    CallErrorCode.ROUND_EXPIRED,
                    f"the round's requestState expired ({ttl:g} s requestStateTtl) before form "
                    f"{position} of {len(requests)} could be asked; no retry sent",
                )
            slot = RoundSlot(position, len(requests), deadline)
            answer = await abortable(_in_round(slot, form_handler(form)), stop)
            responses[key] = self._elicit_result(form, schema, answer)
        if deadline is not None and time.time() >= deadline:
            raise McpToolCallError(
                CallErrorCode.ROUND_EXPIRED,
                f"the round's requestState expired ({ttl:g} s requestStateTtl) before its "
                f"{len(requests)} form(s) were answered; no retry sent",
            )
        return responses

    # --- prompts and resources: one request, never MRTR ---------------------------------------

    async def get_prompt(
        self,
        server: str,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        stop: Stop | None = None,
    ) -> dict[str, Any]:
        """Send exactly one ``prompts/get`` for prompt ``name`` on ``server`` and return its complete result.

        Returns the ``GetPromptResult`` JSON object (``{"messages": [...], "description"?: str, ...}``).
        The request advertises no ``elicitation`` capability (MRTR for prompts is a non-goal). When the
        server answers ``input_required`` (SEP-2322 ``InputRequiredResult``) nothing is published and no
        retry is sent: the call fails with ``UNSUPPORTED_METHOD`` (RFC criterion 11; broker
        ``FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST``). Raises :class:`McpToolCallError` ``UNKNOWN_TOOL`` (no
        such server), ``CONNECTION_LOST``, ``SERVER_ERROR`` (JSON-RPC error, invalid result, timeout after
        ``call_timeout_seconds``), ``STOPPED`` or ``UNSUPPORTED_METHOD``.
        """
        connection = self.connection(server)
        session = connection.live_session()

        async def send() -> GetPromptResult | InputRequiredResult:
            with capabilities.form_call(False):
                return await session.get_prompt(name, dict(arguments or {}) or None, allow_input_required=True)

        with tracing.span("mcp.prompts_get"):
            result = await self._one_request(connection, send(), stop, "prompts/get")
        assert isinstance(result, GetPromptResult)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def read_resource(self, server: str, uri: str, *, stop: Stop | None = None) -> dict[str, Any]:
        """Send exactly one ``resources/read`` for ``uri`` on ``server`` and return its complete result.

        Returns the ``ReadResourceResult`` JSON object (``{"contents": [...]}``). Same rules and errors as
        :meth:`get_prompt`: no ``elicitation`` claim; ``input_required`` fails with ``UNSUPPORTED_METHOD``
        and sends no retry (RFC criterion 11).
        """
        connection = self.connection(server)
        session = connection.live_session()

        async def send() -> ReadResourceResult | InputRequiredResult:
            with capabilities.form_call(False):
                return await session.read_resource(uri, allow_input_required=True)

        with tracing.span("mcp.resources_read"):
            result = await self._one_request(connection, send(), stop, "resources/read")
        assert isinstance(result, ReadResourceResult)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _one_request(
        self,
        connection: McpConnection,
        request: Coroutine[Any, Any, T],
        stop: Stop | None,
        method: str,
    ) -> T:
        """Send one non-MRTR request (bounded by ``call_timeout_seconds``); fail an ``InputRequiredResult``."""
        try:
            async with asyncio.timeout(self.call_timeout_seconds):
                result = await self._guarded(connection, request, stop or Stop(), sent_state=None)
        except TimeoutError:
            raise McpToolCallError(CallErrorCode.SERVER_ERROR, f"{method} timed out; outcome unknown") from None
        if not isinstance(result, InputRequiredResult):
            _require_complete(getattr(result, "result_type", "complete"))
        if isinstance(result, InputRequiredResult):
            del result  # may hold requestState: never kept, logged or echoed
            log.info("mcp_input_required_refused", extra={"server": connection.name, "method": method})
            raise McpToolCallError(
                CallErrorCode.UNSUPPORTED_METHOD,
                f"{method} answered input_required; only tools/call supports it (no retry sent)",
            )
        return result

    # --- one leg ------------------------------------------------------------------------------

    async def _leg(
        self,
        connection: McpConnection,
        binding: ToolBinding,
        arguments: dict[str, Any],
        responses: dict[str, InputResponse] | None,
        request_state: str | None,
        *,
        advertise_form: bool,
        progress: ProgressHandler | None,
        stop: Stop,
    ) -> CallToolResult | InputRequiredResult:
        session = connection.check_binding(binding)
        idle = connection.config.timeout_seconds or self.call_timeout_seconds
        timer = _LegTimer(idle, self.max_call_seconds, progress)

        async def send() -> CallToolResult | InputRequiredResult:
            with capabilities.form_call(advertise_form):
                async with timer:
                    result = await session.call_tool(
                        binding.tool,
                        arguments,
                        progress_callback=timer.on_progress,
                        input_responses=responses,
                        request_state=request_state,
                        allow_input_required=True,
                    )
            return result

        return await self._guarded(connection, send(), stop, sent_state=request_state)

    async def _guarded(
        self,
        connection: McpConnection,
        request: Coroutine[Any, Any, T],
        stop: Stop,
        *,
        sent_state: str | None,
    ) -> T:
        """Await one MCP request (abortable by ``stop``), mapping every failure to a stable ``McpToolCallError``.

        Only a real transport closure (:class:`TransportClosed`, as the SDK reports it) or a transport
        exception marks the connection broken; every JSON-RPC error the server sent, whatever its code,
        is that call's ``SERVER_ERROR`` (or a more specific code) and leaves the connection and every
        other call on it alone.
        """
        try:
            return await abortable(request, stop)
        except McpToolCallError:
            raise
        except TransportClosed:
            connection.mark_broken()
            cause = connection.loss_cause
            lost = (
                f"the MCP connection closed: {cause}; outcome unknown"
                if cause
                else "the MCP connection closed; outcome unknown"
            )
            raise McpToolCallError(CallErrorCode.CONNECTION_LOST, lost) from None
        except LocalTimeout:
            raise McpToolCallError(CallErrorCode.SERVER_ERROR, "the MCP request timed out; outcome unknown") from None
        except MCPError as error:
            raise self._from_mcp_error(connection, error, sent_state=sent_state) from None
        except ValidationError:
            raise McpToolCallError(CallErrorCode.SERVER_ERROR, "the server sent an invalid result") from None
        except RuntimeError:
            raise McpToolCallError(CallErrorCode.SERVER_ERROR, "the server's result failed validation") from None
        except (OSError, httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError) as error:
            connection.mark_broken()
            raise McpToolCallError(
                CallErrorCode.CONNECTION_LOST, f"transport failed ({type(error).__name__}); outcome unknown"
            ) from None

    @staticmethod
    def _from_mcp_error(connection: McpConnection, error: MCPError, *, sent_state: str | None) -> McpToolCallError:
        """A JSON-RPC error the server sent → the call's stable error, carrying the server's own message.

        Server-defined codes (-32000..-32099, JSON-RPC 2.0 §5.1) have no meaning a client may assume:
        they are ``SERVER_ERROR`` like any other code without a specific rule here. ``REQUEST_STATE_REJECTED``
        is decided by the code and the error's structured ``data.reason`` only, never by words in the
        server's message (the server does not pick the class by wording).
        """
        code = error.code
        if code == MISSING_REQUIRED_CLIENT_CAPABILITY:
            return McpToolCallError(
                CallErrorCode.MISSING_CLIENT_CAPABILITY,
                "the server requires a client capability this call did not offer",
                mcp_error_code=code,
            )
        data = error.data if isinstance(error.data, dict) else {}
        if code == INVALID_PARAMS and sent_state is not None and data.get("reason") == "invalid_request_state":
            return McpToolCallError(
                CallErrorCode.REQUEST_STATE_REJECTED,
                "the server rejected or expired its requestState",
                mcp_error_code=code,
            )
        text = server_message(error.message, secret=sent_state)
        message = f"MCP error {code}: {text}" if text else f"MCP error {code}"
        return McpToolCallError(CallErrorCode.SERVER_ERROR, message, mcp_error_code=code)

    # --- checks -------------------------------------------------------------------------------

    def _fence(
        self,
        connection: McpConnection,
        binding: ToolBinding,
        stop: Stop,
        link_alive: Callable[[], bool] | None,
    ) -> None:
        if stop.is_set():
            raise McpToolCallError(CallErrorCode.STOPPED, "the call was stopped")
        if link_alive is not None and not link_alive():
            raise McpToolCallError(CallErrorCode.CONNECTION_LOST, "the provider link to the broker was lost")
        connection.check_binding(binding)

    def _check_round(
        self, result: InputRequiredResult, form_handler: FormHandler | None, binding: ToolBinding
    ) -> dict[str, tuple[Form, dict[str, Any]]]:
        """Validate a whole round before anything is published; return the forms in sorted key order."""
        limits = self.limits
        state = result.request_state
        if state is not None and len(state.encode("utf-8")) > limits.max_request_state_bytes:
            raise McpToolCallError(CallErrorCode.LIMITS_EXCEEDED, "requestState is over the byte cap")
        requests = result.input_requests or {}
        if len(requests) > limits.max_input_requests_per_round:
            raise McpToolCallError(
                CallErrorCode.LIMITS_EXCEEDED,
                f"{len(requests)} input requests in one round (cap {limits.max_input_requests_per_round})",
            )
        if any(len(key) > limits.max_input_key_chars for key in requests):
            raise McpToolCallError(CallErrorCode.LIMITS_EXCEEDED, "an inputRequests key is over the length cap")
        if requests:
            dumped = {k: v.model_dump(by_alias=True, mode="json", exclude_none=True) for k, v in requests.items()}
            if _json_bytes(dumped) > limits.max_total_input_request_bytes:
                raise McpToolCallError(CallErrorCode.LIMITS_EXCEEDED, "inputRequests is over the byte cap")
        ordered = sorted(requests)
        for key in ordered:
            request = requests[key]
            if isinstance(request, CreateMessageRequest):
                raise McpToolCallError(
                    CallErrorCode.UNSUPPORTED_INPUT_REQUEST, "sampling/createMessage is not supported"
                )
            if isinstance(request, ListRootsRequest):
                raise McpToolCallError(CallErrorCode.UNSUPPORTED_INPUT_REQUEST, "roots/list is not supported")
            if not isinstance(request, ElicitRequest) or not isinstance(request.params, ElicitRequestFormParams):
                raise McpToolCallError(
                    CallErrorCode.UNSUPPORTED_INPUT_REQUEST, "only form-mode elicitation/create is supported"
                )
        if requests and form_handler is None:
            raise McpToolCallError(
                CallErrorCode.UNSUPPORTED_INPUT_REQUEST, "form elicitation was requested but this call has no form path"
            )
        forms: dict[str, tuple[Form, dict[str, Any]]] = {}
        for key in ordered:
            request = requests[key]
            assert isinstance(request, ElicitRequest)
            assert isinstance(request.params, ElicitRequestFormParams)
            schema = request.params.requested_schema
            try:
                form = _decode(
                    schema,
                    request.params.message,
                    Requester(
                        provider_id=self.provider_id,
                        provider_display_name=self.provider_display_name,
                        claimed_server=binding.server,
                        claimed_tool=binding.tool,
                    ),
                    limits,
                )
            except FormError as error:
                code = (
                    CallErrorCode.LIMITS_EXCEEDED
                    if error.reason is FormErrorReason.LIMIT_EXCEEDED
                    else CallErrorCode.INVALID_FORM
                )
                raise McpToolCallError(code, f"form rejected: {error.reason.value}") from None
            if not _schema_is_valid(_canonical(schema)):
                raise McpToolCallError(CallErrorCode.INVALID_FORM, "requestedSchema is not a valid JSON Schema")
            forms[key] = (form, dict(schema))
        return forms

    def _elicit_result(self, form: Form, schema: dict[str, Any], answer: Answer) -> ElicitResult:
        """Validate ``answer`` twice (form contract, then the server's own schema); return the bare ElicitResult."""
        try:
            canonical = core_validate_answer(form, answer, limits=self.limits)
            body = answer_to_elicit_result(canonical)
        except FormError as error:
            raise McpToolCallError(CallErrorCode.INVALID_ANSWER, f"answer rejected: {error.reason.value}") from None
        if body["action"] == "accept":
            validator = _answer_validator(_canonical(schema))
            mismatch = jsonschema.exceptions.best_match(validator.iter_errors(body.get("content", {})))
            if mismatch is not None:
                path = "/".join(str(p) for p in mismatch.absolute_path) or "$"
                raise McpToolCallError(
                    CallErrorCode.INVALID_ANSWER,
                    f"answer does not match the server's schema at {path}: {mismatch.validator}",
                )
        return ElicitResult.model_validate(body)

    # --- waiting ------------------------------------------------------------------------------

    @staticmethod
    async def _pause(seconds: float, *, stop: Stop) -> None:
        """The state-only pacing delay; returns early (raising ``STOPPED``) when ``stop`` is set."""
        try:
            async with asyncio.timeout(seconds):
                await stop.wait()
        except TimeoutError:
            return
        raise McpToolCallError(CallErrorCode.STOPPED, "the call was stopped")
