"""One live MCP connection through the official ``mcp`` SDK: era, Tools, generations, reconnect.

A :class:`McpConnection` owns a supervisor task that connects (stdio or Streamable HTTP), negotiates
the era (``auto``: the SDK's ``server/discover``-then-``initialize`` policy; ``modern``: discover
only; ``legacy``: ``initialize`` only), lists Tools, and waits until the connection is lost, then
reconnects with exponential backoff. Every successful connect is a new **connection generation**;
every Tool has a **tool generation** that changes when ``tools/list_changed`` changes its definition.
A :class:`ToolBinding` captures both at the start of a call; :meth:`McpConnection.check_binding`
is the fence the manager checks before every retry (RFC criterion 8).

SDK workarounds, both in :class:`MakaDispatcher` (a ``JSONRPCDispatcher`` subclass the session is
built over, overriding only the public ``send_raw_request`` and ``run``):

1. **Absent ``resultType``.** MCP 2026-07-28 ``basic/index`` §ResultType: a client MUST treat an absent
   ``resultType`` as ``"complete"``. SDK 2.3.0 ``ClientSession.send_request`` validates a modern
   result against the wire model (``mcp_types.methods.validate_server_result`` with the
   ``_v2026_07_28`` surface), where ``resultType`` is required, and raises ``ValidationError``.
   :func:`normalize_result` fills in ``"complete"`` for results of modern requests that lack it,
   before the SDK sees them. Nothing else is changed.
2. **Per-call capabilities** — see :mod:`services.mcp_provider.capabilities`.
3. **Local closure and timeout versus server errors.** The SDK reports its own "connection closed"
   and "request timed out" as ``MCPError`` with codes ``-32000`` / ``-32001``, which are also
   server-defined codes a server may send for anything (JSON-RPC 2.0 §5.1: ``-32000..-32099`` are
   reserved for implementation-defined server errors; the receiver must not assume a meaning). The SDK
   itself tells its closure apart by identity: it raises the closure error only after setting its
   dispatcher's closed flag (or from a failed transport write), and the timeout from its own
   ``TimeoutError``. :meth:`MakaDispatcher.send_raw_request` turns exactly those into
   :class:`TransportClosed` / :class:`LocalTimeout`; every ``MCPError`` that came from the server stays
   an ``MCPError`` (a server error whose message reaches the caller).
4. **Undecodable stdio output.** The SDK's stdio reader decodes the child's stdout strictly; one byte that
   is not UTF-8 raises inside its reader task, which then drains stdout forever and never closes the read
   stream, so every call on the connection hangs. The connection opens stdio with the error handler
   :data:`UNDECODABLE_HANDLER` instead (registered with :mod:`codecs`, chosen through the SDK's own
   ``encoding_error_handler`` field): it replaces the bad bytes with NUL, which no JSON line may contain, so
   the line never parses into a message, and it tells the connection (through a context variable the
   reader task inherits), which drops the session with the stated cause: calls in flight end
   ``CONNECTION_LOST`` naming it, ``maka status`` shows it, and the supervisor reconnects.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import hashlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anyio
import httpx2
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost, ToolsListChanged, listen
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import (
    CONNECTION_CLOSED,
    PROTOCOL_VERSION_META_KEY,
    REQUEST_TIMEOUT,
    Implementation,
    PaginatedRequestParams,
    Tool,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from services.core import messages
from services.core.backoff import BackoffAttempts
from services.mcp_provider import capabilities
from services.mcp_provider.causes import FailureCause, HttpTrace, StderrTail, describe
from services.mcp_provider.config import Era, HttpServer, ServerConfig
from services.mcp_provider.errors import CallErrorCode, McpToolCallError
from services.mcp_provider.oauth import OAuthSettings, PreRegisteredClient, ServerAuth
from services.mcp_provider.settings import reconnect_backoff

log = logging.getLogger("maka.mcp_provider.connection")

UNDECODABLE_HANDLER = "maka-undecodable-stdio"
"""The codec error handler of stdio connections (workaround 4 of the module docstring)."""

_undecodable_sink: contextvars.ContextVar[Callable[[UnicodeDecodeError], None] | None] = contextvars.ContextVar(
    "maka_undecodable_sink", default=None
)


def _undecodable(error: UnicodeError) -> tuple[str, int]:
    """Replace undecodable bytes with NUL (the line then fails to parse) and tell the connection."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    sink = _undecodable_sink.get()
    if sink is not None:
        sink(error)
    return "\x00", error.end


codecs.register_error(UNDECODABLE_HANDLER, _undecodable)


class UndecodableOutput(ConnectionError):
    """A stdio server wrote bytes that are not valid UTF-8 on its stdout: the connection is broken."""


CLIENT_INFO = Implementation(name="maka-runtime", version="0.1.0")
"""How the provider identifies itself to MCP servers."""


def normalize_result(params: Mapping[str, Any] | None, raw: dict[str, Any]) -> dict[str, Any]:
    """Treat an absent ``resultType`` on a modern result as ``"complete"`` (workaround 1 above).

    ``params`` are the request's params: only requests stamped with a modern
    ``io.modelcontextprotocol/protocolVersion`` are normalized (legacy results have no
    ``resultType``, and the SDK drops later-revision fields for them itself).
    """
    meta = (params or {}).get("_meta")
    if not isinstance(meta, Mapping) or meta.get(PROTOCOL_VERSION_META_KEY) not in MODERN_PROTOCOL_VERSIONS:
        return raw
    if "resultType" in raw:
        return raw
    return {**raw, "resultType": "complete"}


KNOWN_INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""The methods an MCP 2026-07-28 ``InputRequest`` may carry (``schema.ts`` ``InputRequest``)."""

MRTR_METHODS: dict[str, CallErrorCode] = {
    "tools/call": CallErrorCode.UNSUPPORTED_INPUT_REQUEST,
    "prompts/get": CallErrorCode.UNSUPPORTED_METHOD,
    "resources/read": CallErrorCode.UNSUPPORTED_METHOD,
}
"""The requests whose result may be ``input_required`` (SEP-2322), with the code an unknown embedded
method or elicitation mode fails with (prompts/resources never run MRTR here: RFC criterion 11)."""


def reject_unknown_input_requests(method: str, raw: Mapping[str, Any]) -> None:
    """Fail an ``input_required`` result that embeds an unknown method or elicitation mode.

    Applies to ``tools/call``, ``prompts/get`` and ``resources/read`` (:data:`MRTR_METHODS`). The SDK
    would reject such a result as a whole with a pydantic ``ValidationError`` (the ``InputRequest``
    union has no arm for it); the RFC wants a stable local error instead (criterion 11), raised before
    anything is published. Raises :class:`McpToolCallError` ``UNSUPPORTED_INPUT_REQUEST`` (``tools/call``)
    or ``UNSUPPORTED_METHOD`` (``prompts/get``, ``resources/read``).
    """
    code = MRTR_METHODS.get(method)
    if code is None or raw.get("resultType") != "input_required":
        return
    requests = raw.get("inputRequests")
    if not isinstance(requests, Mapping):
        return
    for request in requests.values():
        kind = request.get("method") if isinstance(request, Mapping) else None
        if kind not in KNOWN_INPUT_METHODS:
            raise McpToolCallError(code, "an input request has an unknown method")
        params = request.get("params")
        mode = params.get("mode") if isinstance(params, Mapping) else None
        if kind == "elicitation/create" and mode not in (None, "form", "url"):
            raise McpToolCallError(code, "an elicitation has an unknown mode")


class TransportClosed(MCPError):
    """The MCP transport closed under a request (the SDK's own ``CONNECTION_CLOSED``, not a server's -32000).

    Still an ``MCPError`` with the SDK's code and message, so SDK code that catches ``MCPError`` (the
    ``subscriptions/listen`` driver, the era probe) behaves as before.
    """


class LocalTimeout(MCPError):
    """The request's read timeout ran out here (the SDK's own ``REQUEST_TIMEOUT``, not a server's -32001)."""


_TRANSPORT_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError)


class MakaDispatcher(JSONRPCDispatcher[Any]):
    """The SDK's JSON-RPC dispatcher plus the two documented workarounds and a ``closed`` event."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closed = asyncio.Event()
        """Set when the receive loop ends (the transport closed)."""

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
        *,
        _related_request_id: Any = None,
    ) -> dict[str, Any]:
        """Send with this call's capabilities stamped; normalize an absent modern ``resultType``."""
        params = capabilities.apply_call_capabilities(method, params)
        try:
            raw = await super().send_raw_request(method, params, opts, _related_request_id=_related_request_id)
        except MCPError as error:
            local = self._local_failure(error)
            if local is not None:
                raise local from None
            raise
        raw = normalize_result(params, raw)
        reject_unknown_input_requests(method, raw)
        return raw

    def _local_failure(self, error: MCPError) -> MCPError | None:
        """:class:`TransportClosed` / :class:`LocalTimeout` when the SDK raised ``error`` itself (workaround 3).

        The SDK sets ``_closed`` before it fans its closure outcome out to waiters, and raises its
        write-failure closure and its timeout from inside the handler of the original exception, so
        ``__context__`` names it; a peer's error response has neither.
        """
        context = error.__context__
        if error.code == CONNECTION_CLOSED and (self._closed or isinstance(context, _TRANSPORT_ERRORS)):
            return TransportClosed(error.code, error.message, error.data)
        if error.code == REQUEST_TIMEOUT and isinstance(context, TimeoutError):
            return LocalTimeout(error.code, error.message, error.data)
        return None

    async def run(self, *args: Any, **kwargs: Any) -> None:
        """Run the SDK receive loop; set :attr:`closed` when it ends for any reason."""
        try:
            await super().run(*args, **kwargs)
        finally:
            self.closed.set()


@dataclass(frozen=True)
class ToolInfo:
    """One Tool as listed by the server, with its tool generation. Schemas are kept exactly as listed
    (a ``$ref`` is never resolved or fetched: SEP-2106)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    generation: int
    digest: str
    output_schema: dict[str, Any] | None = None
    title: str = ""
    """The Tool's ``title`` (empty when none)."""
    annotations: dict[str, Any] | None = None
    """The Tool's ``annotations`` as listed (hints from an untrusted server; None when none)."""


@dataclass(frozen=True)
class ToolBinding:
    """What a call is bound to: server, Tool, connection generation and tool generation."""

    server: str
    tool: str
    connection_generation: int
    tool_generation: int
    modern: bool


class SignIn(StrEnum):
    """Where this server's OAuth sign-in stands (``maka.broker.v1.SignInState``)."""

    NONE = "none"
    """No OAuth in use (not an HTTP server, or it never asked)."""
    REQUIRED = "required"
    """A person must open :attr:`ConnectionSnapshot.authorization_url`; calls fail ``AUTH_REQUIRED``."""
    SIGNED_IN = "signed_in"


@dataclass(frozen=True)
class ConnectionSnapshot:
    """What the provider registers: the connection generation (0 = not connected), its Tools and the
    OAuth sign-in state (with the authorization URL while a sign-in is pending)."""

    server: str
    generation: int
    connected: bool
    tools: tuple[ToolInfo, ...]
    sign_in: SignIn = SignIn.NONE
    authorization_url: str = ""


class ServerState(StrEnum):
    """Where a configured server's connection is (``maka status``; ``maka.broker.v1.ServerState``)."""

    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"
    WAITING_FOR_SIGN_IN = "waiting_for_sign_in"
    """Set by the sign-in (OAuth) flow while it waits for the user."""
    DISABLED = "disabled"
    DRAINING = "draining"


@dataclass(frozen=True)
class ServerHealth:
    """A connection's status for ``maka status``: state (since ``state_time``, wall clock), the last
    failure's real cause (bounded, secret-free), consecutive ``failures`` and ``next_retry_time``."""

    state: ServerState
    state_time: float
    last_error: FailureCause | None
    last_error_time: float
    failures: int
    next_retry_time: float | None


def unavailable_reason(server: str, health: ServerHealth, now: float | None = None) -> str:
    """``MCP server <name> <state>[: <cause>][; next retry in N s]`` (the SERVER_UNAVAILABLE message)."""
    cause = health.last_error.summary if health.last_error is not None else None
    retry_in = None
    if health.next_retry_time is not None:
        retry_in = health.next_retry_time - (time.time() if now is None else now)
    return messages.server_unavailable(server, health.state.value, cause, retry_in)


def _digest(tool: Tool) -> str:
    body = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


ChangeCallback = Callable[[ConnectionSnapshot], Awaitable[None]]


class McpConnection:
    """One configured MCP server's live connection (see module docstring).

    ``on_change`` is awaited after every connect, loss and Tool refresh with a fresh snapshot.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        on_change: ChangeCallback | None = None,
        reconnect_initial_seconds: float = 0.5,
        reconnect_max_seconds: float = 30.0,
        oauth: OAuthSettings | None = None,
    ) -> None:
        self.config = config
        transport = config.transport
        self.auth: ServerAuth | None = None
        """OAuth of this server (HTTP servers with OAuth on and a Host OAuth configuration)."""
        if oauth is not None and isinstance(transport, HttpServer) and transport.oauth:
            client = transport.oauth_client
            self.auth = ServerAuth(
                config.name,
                transport.url,
                oauth,
                self._notify,
                client=PreRegisteredClient(client.client_id, client.client_secret, client.scope) if client else None,
            )
        self._listeners: list[ChangeCallback] = [on_change] if on_change is not None else []
        self._backoff = reconnect_backoff(reconnect_initial_seconds, reconnect_max_seconds)
        self.generation = 0
        """Connection generation: incremented on every successful connect."""
        self._tool_generation = 0
        self._tools: dict[str, ToolInfo] = {}
        self._session: ClientSession | None = None
        self._modern = False
        self._broken = asyncio.Event()
        self._closing = asyncio.Event()
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._refresh: asyncio.Task[None] | None = None
        self.connects = 0
        """How many times a connection was established (tests read it)."""
        self._state = ServerState.DISABLED if config.disabled else ServerState.CONNECTING
        self._state_time = time.time()
        self._last_error: FailureCause | None = None
        self._last_error_time = 0.0
        self._failures = 0
        self._next_retry: float | None = None
        self._status_listeners: list[Callable[[], None]] = []
        self._loss_cause: str | None = None

    # --- status -----------------------------------------------------------------------------

    def health(self) -> ServerHealth:
        """The current :class:`ServerHealth`."""
        return ServerHealth(
            self._state, self._state_time, self._last_error, self._last_error_time, self._failures, self._next_retry
        )

    def set_state(self, state: ServerState) -> None:
        """Move to ``state`` and tell the status listeners (the sign-in flow sets ``WAITING_FOR_SIGN_IN``)."""
        if state is not self._state:
            self._state = state
            self._state_time = time.time()
        if state is not ServerState.FAILED:
            self._next_retry = None
        for listener in list(self._status_listeners):
            listener()

    def on_status(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (synchronously) after every state change and failure."""
        self._status_listeners.append(listener)

    def _record_failure(
        self, error: BaseException, stderr: StderrTail | None, http: HttpTrace | None, delay: float
    ) -> None:
        tail = stderr.lines() if stderr is not None else ()
        self._last_error = describe(error, self.config.secrets(), tail, http, target=self._target())
        self._last_error_time = time.time()
        self._failures += 1
        self._state = ServerState.FAILED
        self._state_time = self._last_error_time
        self._next_retry = self._last_error_time + delay if math.isfinite(delay) else None
        log.warning(
            "mcp_connect_failed",
            extra={
                "server": self.name,
                "error_type": type(error).__name__,
                "cause": self._last_error.summary,
                "http_status": self._last_error.http_status or None,
                "failures": self._failures,
                "retry_in_seconds": round(delay, 3) if math.isfinite(delay) else None,
            },
        )
        for listener in list(self._status_listeners):
            listener()

    def _target(self) -> str:
        """What this connection reaches, as a failure cause names it: the command or the URL."""
        transport = self.config.transport
        if isinstance(transport, HttpServer):
            return f"URL {transport.url}"
        return f"command {transport.command!r}"

    @property
    def name(self) -> str:
        """The configured server name."""
        return self.config.name

    @property
    def connected(self) -> bool:
        """True while a negotiated session is live."""
        return self._session is not None

    @property
    def modern(self) -> bool:
        """True when the live session speaks a modern (2026-07-28) protocol version."""
        return self._modern

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version of the live session, or None."""
        return self._session.protocol_version if self._session is not None else None

    def snapshot(self) -> ConnectionSnapshot:
        """The current generation, Tools (sorted by name) and sign-in state."""
        tools = tuple(sorted(self._tools.values(), key=lambda t: t.name)) if self.connected else ()
        return ConnectionSnapshot(self.name, self.generation, self.connected, tools, *self.sign_in_state())

    def sign_in_state(self) -> tuple[SignIn, str]:
        """``(state, authorization URL)``: REQUIRED while a sign-in prompt is pending, SIGNED_IN once
        tokens are stored, NONE when this server uses no OAuth."""
        if self.auth is None:
            return SignIn.NONE, ""
        url = self.auth.flow.authorization_url
        if url is not None:
            return SignIn.REQUIRED, url
        return (SignIn.SIGNED_IN, "") if self.auth.storage.signed_in else (SignIn.NONE, "")

    def complete_sign_in(self, code: str, state: str, iss: str = "", error: str = "") -> bool:
        """Deliver an OAuth redirect to the pending sign-in; False unless ``state`` is the pending one."""
        return self.auth is not None and self.auth.flow.complete(code, state, iss, error)

    async def sign_out(self) -> None:
        """Forget the stored tokens and reconnect (the server then asks for a new sign-in)."""
        if self.auth is None:
            return
        self.auth.sign_out()
        log.info("oauth_signed_out", extra={"server": self.name})
        self.mark_broken()
        await self._notify()

    async def start(self) -> None:
        """Start the supervisor (connect, then reconnect with backoff). Returns at once.

        A ``disabled`` server never starts: it stays :attr:`ServerState.DISABLED`."""
        if self._task is None and not self.config.disabled:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-connection-{self.name}")

    async def wait_connected(self, timeout: float = 30.0) -> None:
        """Wait until a session is live. Raises ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            await self._connected.wait()

    async def close(self) -> None:
        """Stop the supervisor and close the connection (terminates a stdio subprocess)."""
        self._closing.set()
        self._broken.set()
        for task in (self._refresh, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def mark_broken(self) -> None:
        """Drop the live session (a transport failure was seen); the supervisor reconnects."""
        self._broken.set()

    @property
    def loss_cause(self) -> str | None:
        """Why this connection dropped its live session, when it decided so itself (undecodable output)."""
        return self._loss_cause

    def binding(self, tool: str) -> ToolBinding:
        """Bind a call to ``tool`` on the live session.

        Raises :class:`McpToolCallError` ``SERVER_UNAVAILABLE`` when not connected or draining (naming
        the state and the last failure's cause), ``UNKNOWN_TOOL`` when the server does not list ``tool``.
        """
        if self._session is None:
            state, url = self.sign_in_state()
            if state is SignIn.REQUIRED:
                raise McpToolCallError(CallErrorCode.AUTH_REQUIRED, messages.sign_in_hint(self.name, url))
        if self._session is None or self._state is ServerState.DRAINING:
            raise McpToolCallError(CallErrorCode.SERVER_UNAVAILABLE, self.unavailable_reason())
        info = self._tools.get(tool)
        if info is None:
            raise McpToolCallError(CallErrorCode.UNKNOWN_TOOL, f"server {self.name} has no such Tool")
        return ToolBinding(self.name, tool, self.generation, info.generation, self._modern)

    def unavailable_reason(self) -> str:
        """One secret-free line: why this server serves no calls now (state, cause, next retry)."""
        return unavailable_reason(self.name, self.health())

    def live_session(self) -> ClientSession:
        """The live session, for requests not bound to a Tool (``prompts/get``, ``resources/read``).

        Raises :class:`McpToolCallError` ``CONNECTION_LOST`` when no session is live.
        """
        session = self._session
        if session is None or self._broken.is_set():
            raise McpToolCallError(CallErrorCode.CONNECTION_LOST, f"server {self.name} is not connected")
        return session

    def check_binding(self, binding: ToolBinding) -> ClientSession:
        """The fence: return the session iff ``binding`` is still current.

        Raises :class:`McpToolCallError` ``CONNECTION_LOST`` (no live session or a new connection
        generation) or ``BINDING_CHANGED`` (the Tool was removed or its definition changed).
        """
        session = self._session
        if session is None or self._broken.is_set():
            raise McpToolCallError(CallErrorCode.CONNECTION_LOST, "the MCP connection was lost")
        if binding.connection_generation != self.generation:
            raise McpToolCallError(CallErrorCode.CONNECTION_LOST, "the MCP connection was replaced")
        info = self._tools.get(binding.tool)
        if info is None or info.generation != binding.tool_generation:
            raise McpToolCallError(CallErrorCode.BINDING_CHANGED, "the Tool definition changed")
        return session

    # --- supervisor -------------------------------------------------------------------------

    def _transport(self, stderr: StderrTail | None, http: HttpTrace) -> AbstractAsyncContextManager[Any]:
        transport = self.config.transport
        if isinstance(transport, HttpServer):
            auth = self.auth.provider if self.auth is not None else None
            return _sse_transport(transport, auth) if transport.sse else _http_transport(transport, auth, http)
        params = StdioServerParameters(
            command=transport.command, args=list(transport.args), env=transport.env or None, cwd=transport.cwd
        )
        # The SDK types the field as the three stdlib names; model_copy keeps our registered handler.
        params = params.model_copy(update={"encoding_error_handler": UNDECODABLE_HANDLER})
        return stdio_client(params, errlog=stderr.writer) if stderr is not None else stdio_client(params)

    async def _negotiate(self, session: ClientSession) -> None:
        if self.config.era is Era.LEGACY:
            await session.initialize()
        elif self.config.era is Era.MODERN:
            await session.discover()
        else:
            await negotiate_auto(session)
        self._modern = session.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification) and self._refresh is None:
            self._refresh = asyncio.create_task(self._refresh_tools())
        elif isinstance(message, Exception):
            log.info("mcp_transport_error", extra={"server": self.name, "error_type": type(message).__name__})

    async def _list_tools(self, session: ClientSession) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(100):
            result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(result.tools)
            cursor = result.next_cursor
            if cursor is None:
                break
        return tools

    def _absorb(self, tools: list[Tool], *, fresh: bool) -> bool:
        """Install a listing; bump the tool generation of every changed Tool. True if anything changed."""
        changed = fresh
        listed: dict[str, ToolInfo] = {}
        for tool in tools:
            digest = _digest(tool)
            old = None if fresh else self._tools.get(tool.name)
            if old is not None and old.digest == digest:
                listed[tool.name] = old
                continue
            self._tool_generation += 1
            changed = True
            output = dict(tool.output_schema) if tool.output_schema is not None else None
            annotations = (
                tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
                if tool.annotations is not None
                else None
            )
            listed[tool.name] = ToolInfo(
                tool.name,
                tool.description or "",
                dict(tool.input_schema),
                self._tool_generation,
                digest,
                output,
                tool.title or "",
                annotations,
            )
        if set(listed) != set(self._tools):
            changed = True
        self._tools = listed
        return changed

    async def _refresh_tools(self) -> None:
        try:
            session = self._session
            if session is None:
                return
            tools = await self._list_tools(session)
            if self._session is session and self._absorb(tools, fresh=False):
                log.info("mcp_tools_changed", extra={"server": self.name, "tools": len(self._tools)})
                await self._notify()
        except Exception as error:
            log.warning("mcp_tools_refresh_failed", extra={"server": self.name, "error_type": type(error).__name__})
        finally:
            if self._refresh is asyncio.current_task():
                self._refresh = None

    def _wants_listen(self, session: ClientSession) -> bool:
        capabilities = session.server_capabilities
        return bool(self._modern and capabilities and capabilities.tools and capabilities.tools.list_changed)

    async def _listen(self, session: ClientSession) -> None:
        """Modern sessions: follow ``tools/list_changed`` through ``subscriptions/listen`` (SEP-2575)."""
        try:
            async with listen(session, tools_list_changed=True) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        await self._refresh_tools()
        except asyncio.CancelledError:
            raise
        except SubscriptionLost:
            # The stream dropped abruptly: on HTTP this is the only sign of a dead server between calls.
            log.info("mcp_listen_lost", extra={"server": self.name})
            self.mark_broken()
        except Exception as error:
            log.info("mcp_listen_ended", extra={"server": self.name, "error_type": type(error).__name__})

    def subscribe(self, callback: ChangeCallback) -> None:
        """Also await ``callback`` with a fresh snapshot after every connect, loss and Tool refresh."""
        self._listeners.append(callback)

    async def _notify(self) -> None:
        sign_in, _ = self.sign_in_state()
        if sign_in is SignIn.REQUIRED and self._state is ServerState.CONNECTING:
            self.set_state(ServerState.WAITING_FOR_SIGN_IN)  # the status report's "waiting for sign-in"
        elif sign_in is not SignIn.REQUIRED and self._state is ServerState.WAITING_FOR_SIGN_IN:
            self.set_state(ServerState.CONNECTING)
        snapshot = self.snapshot()
        for callback in list(self._listeners):
            try:
                await callback(snapshot)
            except Exception as error:
                log.warning("mcp_change_callback_failed", extra={"server": self.name, "error": type(error).__name__})

    async def _supervise(self) -> None:
        retry = self._backoff.attempts()
        while not self._closing.is_set():
            stderr = StderrTail() if not isinstance(self.config.transport, HttpServer) else None
            http = HttpTrace()
            failure: BaseException | None = None
            if self._state is not ServerState.CONNECTING:
                self.set_state(ServerState.CONNECTING)
            try:
                await self._session_lifetime(stderr, http, retry)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                failure = error
            finally:
                was_connected = self._drop_session()
            if was_connected and not self._closing.is_set():
                await self._notify()
            if self._closing.is_set():
                break
            delay = retry.next_delay()
            if failure is not None:
                if stderr is not None:  # the child's last words explain most stdio failures
                    await asyncio.to_thread(stderr.wait_eof, 1.0)
                self._record_failure(failure, stderr, http, delay)
            elif was_connected:
                self.set_state(ServerState.CONNECTING)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._closing.wait()

    async def _session_lifetime(self, stderr: StderrTail | None, http: HttpTrace, retry: BackoffAttempts) -> None:
        """Connect, negotiate and list Tools (a new generation), then wait until the session is lost."""
        undecodable = asyncio.Event()
        self._loss_cause = None

        def on_undecodable(error: UnicodeDecodeError) -> None:
            if undecodable.is_set():
                return
            bad = error.object[error.start : error.end].hex(" ")
            self._loss_cause = f"the server wrote bytes that are not UTF-8 on stdout (0x{bad})"
            log.warning("mcp_stdout_undecodable", extra={"server": self.name, "bytes": bad[:32]})
            undecodable.set()

        _undecodable_sink.set(on_undecodable)  # the transport's reader task inherits it
        async with AsyncExitStack() as stack:
            if stderr is not None:
                stack.callback(stderr.spawned)
            read, write = await stack.enter_async_context(self._transport(stderr, http))
            if stderr is not None:
                stderr.spawned()
            dispatcher = MakaDispatcher(read, write)
            session = await stack.enter_async_context(
                ClientSession(dispatcher=dispatcher, message_handler=self._on_message, client_info=CLIENT_INFO)
            )
            tools: list[Tool] = []
            connecting = asyncio.ensure_future(self._connect(session, tools))
            await _first(connecting, undecodable.wait())
            if undecodable.is_set():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await connecting
                raise UndecodableOutput(self._loss_cause)
            connecting.result()
            self._broken = asyncio.Event()
            self.generation += 1
            self.connects += 1
            self._absorb(tools, fresh=True)
            self._session = session
            self._connected.set()
            self._failures = 0
            self.set_state(ServerState.READY)
            log.info(
                "mcp_connected",
                extra={
                    "server": self.name,
                    "generation": self.generation,
                    "protocol_version": session.protocol_version,
                    "tools": len(tools),
                },
            )
            await self._notify()
            retry.reset()
            listener = asyncio.create_task(self._listen(session)) if self._wants_listen(session) else None
            try:
                await _first(dispatcher.closed.wait(), self._broken.wait(), undecodable.wait())
            finally:
                if listener is not None:
                    listener.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await listener
            if undecodable.is_set():
                raise UndecodableOutput(self._loss_cause)

    async def _connect(self, session: ClientSession, tools: list[Tool]) -> None:
        """Negotiate and list Tools into ``tools``."""
        await self._negotiate(session)
        tools.extend(await self._list_tools(session))

    def _drop_session(self) -> bool:
        """Forget the live session (the transport is closing); True when there was one."""
        was_connected = self._session is not None
        self._session = None
        self._connected.clear()
        if was_connected:
            log.info("mcp_disconnected", extra={"server": self.name, "generation": self.generation})
        return was_connected


@contextlib.asynccontextmanager
async def _sse_transport(server: HttpServer, auth: httpx2.Auth | None = None) -> AsyncIterator[Any]:
    async with sse_client(server.url, headers=server.headers, auth=auth) as streams:
        yield streams


async def _first(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


@contextlib.asynccontextmanager
async def _http_transport(
    server: HttpServer, auth: httpx2.Auth | None, http: HttpTrace | None = None
) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks: dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]] = {
        "response": [http.hook] if http is not None else []
    }
    async with (
        httpx2.AsyncClient(headers=server.headers, timeout=timeout, auth=auth, event_hooks=hooks) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams


__all__ = [
    "ConnectionSnapshot",
    "LocalTimeout",
    "MakaDispatcher",
    "McpConnection",
    "ServerHealth",
    "ServerState",
    "SignIn",
    "ToolBinding",
    "ToolInfo",
    "TransportClosed",
    "normalize_result",
]
