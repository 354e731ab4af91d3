"""The SDK server of the MCP front door: a low-level ``mcp.server.lowlevel.Server`` over Streamable HTTP.

One server object answers both eras: 2026-07-28 requests (``server/discover``, per-request ``_meta``) and
2025-11-25 sessions (``initialize``), through the SDK's ``StreamableHTTPSessionManager``. ``tools/list`` is the
broker's ``ListTools`` under MCP names (:mod:`surfaces.mcp.tools`); ``tools/call`` runs one broker call
(:mod:`surfaces.mcp.calls`). :class:`ToolWatch` follows the broker's listing feed (``WatchTools``: config reloads,
servers coming and going) and sends ``notifications/tools/list_changed`` to every 2025-11-25 session that listed or
called Tools and on every 2026-07-28 ``subscriptions/listen`` stream (the SDK's ``ListenHandler``). Tools keep the
upstream server's ``title`` and ``annotations`` (hints). The endpoint checks ``Host`` and ``Origin`` against
:mod:`surfaces.mcp.hosts` (DNS rebinding protection).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from maka_client import Accepted, AwaitingInteraction, BrokerClient, InteractionSettled, MakaError, Reattaching
from services.core.backoff import Backoff
from services.core.limits import MAX_MCP_REQUEST_BODY_BYTES
from surfaces.common.interactions import Interactions
from surfaces.mcp import auth, guards, hosts, keepalive, tools
from surfaces.mcp.calls import UnknownTool, error_result, run_call
from surfaces.mcp.drain import READY_PATH, Flights
from surfaces.mcp.elicit import (
    CallCap,
    Calls,
    DetachedCall,
    StateSeal,
    acting_view,
    ask_legacy,
    call_digest,
    declares_form_elicitation,
)
from surfaces.mcp.resume import SessionEventStore, TagRequests, request_tag
from surfaces.mcp.session_key import opaque_name
from surfaces.mcp.settings import McpSettings

log = logging.getLogger("maka.mcp.server")

SERVER_NAME = "maka"
DISTRIBUTION = "maka-runtime"
"""The installed project whose version ``serverInfo`` reports (as ``maka --version``)."""
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
DISCONNECT_POLL_SECONDS = 0.5
"""How often a 2025-11-25 call checks whether its HTTP response stream is still open."""
RETRY_INTERVAL_MS = 500
"""The SSE ``retry`` a 2025-11-25 client waits before it resumes a closed stream."""
FEED_BACKOFF = Backoff(initial=1.0, maximum=30.0)
"""How long :class:`ToolWatch` waits before it opens the broker's listing feed again after a refusal."""


def server_version() -> str:
    """The installed project's version (``serverInfo.version``), or ``unknown`` when it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def mcp_tool(info: Any) -> Tool | None:
    """The MCP ``Tool`` of one broker :class:`maka_client.ToolInfo` (None when it has no MCP name)."""
    name = tools.encode(info.name)
    if name is None:
        log.warning("mcp.tool_unlisted", extra={"chars": len(info.name)})
        return None
    return Tool(
        name=name,
        title=info.title or None,
        description=info.description or None,
        input_schema=input_schema(info),
        output_schema=info.output_schema,
        annotations=tool_annotations(info.annotations),
    )


def input_schema(info: Any) -> dict[str, Any]:
    """The MCP ``inputSchema`` of one broker :class:`maka_client.ToolInfo` (an object schema, as MCP requires)."""
    schema: dict[str, Any] = info.input_schema if info.input_schema.get("type") == "object" else {"type": "object"}
    return schema


def input_schemas(infos: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Every listed Tool's ``inputSchema`` by MCP name (:class:`surfaces.mcp.tools.InputSchemas`)."""
    return {name: input_schema(info) for info in infos if (name := tools.encode(info.name)) is not None}


def tool_annotations(listed: dict[str, Any] | None) -> ToolAnnotations | None:
    """The upstream server's Tool ``annotations`` as MCP ``ToolAnnotations`` (hints, passed through as listed);
    None when it listed none or none MCP defines (a value of the wrong type drops them, logged)."""
    if not listed:
        return None
    try:
        return ToolAnnotations.model_validate(listed)
    except ValidationError:
        log.warning("mcp.tool_annotations_dropped", extra={"keys": len(listed)})
        return None


Listing = tuple[tuple[str, ...], ...]


def _listing(infos: Sequence[Any]) -> Listing:
    """What a client sees of the broker's listing: each Tool's name, title, description, schemas and
    annotations."""
    return tuple(
        sorted(
            (i.name, i.title, i.description, repr(i.input_schema), repr(i.output_schema), repr(i.annotations))
            for i in infos
        )
    )


class ToolWatch:
    """Tells clients when the broker's Tool listing changes (``notifications/tools/list_changed``): every
    2025-11-25 session that listed or called Tools, and every 2026-07-28 ``subscriptions/listen`` stream that asked
    for ``toolsListChanged`` (through :attr:`bus`, served by the SDK's ``ListenHandler``).

    :meth:`run` follows the broker's ``WatchTools`` feed (:meth:`maka_client.BrokerClient.watch_tools`): each
    listing it sends is compared with the last one seen, as a client sees it (:func:`_listing`), so a reconnect's
    whole listing tells clients only when something changed meanwhile (and always then).
    """

    def __init__(
        self, broker: BrokerClient, schemas: tools.InputSchemas | None = None, backoff: Backoff = FEED_BACKOFF
    ) -> None:
        self.broker = broker
        self.schemas = schemas if schemas is not None else tools.InputSchemas()
        """The input schemas each listing of the feed refreshes (the SDK's ``Mcp-Param-*`` header check)."""
        self.backoff = backoff
        self.bus = InMemorySubscriptionBus()
        self._sessions: dict[int, Connection] = {}
        self._last: Listing | None = None
        self.listings = 0
        """How many listings the feed delivered (each stream's first one included)."""

    def follow(self, connection: Connection) -> None:
        """Remember a handshake-era session (until it closes) to tell it about listing changes."""
        key = id(connection)
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS or key in self._sessions:
            return
        self._sessions[key] = connection
        connection.exit_stack.callback(self._sessions.pop, key, None)

    async def seen(self, infos: Sequence[Any]) -> bool:
        """Take one listing of the broker; when it differs from the last one, tell every followed session.
        True when it changed (the first listing changes nothing)."""
        listing = _listing(infos)
        self.listings += 1
        self.schemas.update(input_schemas(infos))
        changed = self._last is not None and listing != self._last
        self._last = listing
        if changed:
            log.info("mcp.tools_changed", extra={"tools": len(listing), "sessions": len(self._sessions)})
            await self.bus.publish(ToolsListChanged())
            for connection in list(self._sessions.values()):
                try:
                    await connection.send_tool_list_changed()
                except Exception:  # a session that just went away: it no longer needs telling
                    self._sessions.pop(id(connection), None)
        return changed

    async def run(self) -> None:
        """Follow the broker's listing feed until cancelled. The feed reconnects on its own; a refusal it cannot
        fix (e.g. a token without the ``caller`` role) is logged and the feed opened again after a backoff."""
        attempts = self.backoff.attempts()
        while True:
            try:
                async with contextlib.aclosing(self.broker.watch_tools()) as feed:
                    async for item in feed:
                        if isinstance(item, Reattaching):
                            log.info("mcp.tools_feed_reconnecting", extra={"code": item.code, "attempt": item.attempt})
                            continue
                        attempts.reset()
                        await self.seen(item.tools)
            except MakaError as error:
                log.warning("mcp.tools_feed_refused", extra={"code": error.code, "reason": str(error.reason)})
            await attempts.sleep()


class FrontDoorServer(Server[dict[str, Any]]):
    """The low-level server, advertising ``tools.listChanged`` to 2025-11-25 sessions (:class:`ToolWatch`), with
    the event store its 2025-11-25 streams resume from (:mod:`surfaces.mcp.resume`)."""

    events: SessionEventStore | None = None
    flights: Flights | None = None
    """The calls in flight, what a drain waits for (:mod:`surfaces.mcp.drain`)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


async def _until_disconnected(request: Request) -> None:
    """Return once the client closed ``request``'s HTTP stream."""
    while True:
        if await request.is_disconnected():
            return
        await anyio.sleep(DISCONNECT_POLL_SECONDS)  # ASGI has no disconnect event besides receive()


async def stop_on_disconnect(
    ctx: ServerRequestContext[Any],
    call: Awaitable[CallToolResult],
    events: SessionEventStore | None = None,
    grace_seconds: float = 0.0,
) -> CallToolResult:
    """Run ``call``; on a 2025-11-25 session, cancel it (which stops the turn) when the client is gone: its POST's
    response stream closed and no ``GET`` with ``Last-Event-ID`` resumed it within ``grace_seconds`` (with
    ``events``, :mod:`surfaces.mcp.resume`; without, at once). The handshake-era transport keeps serving a
    request whose stream closed; at 2026-07-28 the SDK cancels the handler itself (closing the stream is the
    cancellation, MCP specification basic/patterns/cancellation)."""
    request = ctx.request
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not isinstance(request, Request):
        return await call
    outcome: list[CallToolResult] = []
    failed: list[Exception] = []

    async def run() -> None:
        try:
            outcome.append(await call)
        except Exception as error:  # raised as itself below, not inside the task group's ExceptionGroup
            failed.append(error)
        group.cancel_scope.cancel()

    async def watch() -> None:
        tag = request_tag(request)
        if events is not None and tag is not None:
            await events.until_gone(tag, str(ctx.request_id), grace_seconds)
        else:
            await _until_disconnected(request)
        log.info("mcp.client_disconnected")
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(watch)
    if failed:
        raise failed[0]
    if outcome:
        return outcome[0]
    return error_result("STOPPED: the client closed the stream; the call was stopped")


_CLIENT_NAME = re.compile(r"[A-Za-z0-9_@-]{1,64}")
MCP_SESSION_ID_CHARS = 16
"""How much of a 2025-11-25 ``Mcp-Session-Id`` names its Maka session (the SDK's are 32 random hex digits)."""


def client_session(base: str, ctx: ServerRequestContext[Any], key: bytes | None = None) -> str:
    """The Maka session of the client that sent ``ctx``'s request: ``BASE.WHO`` at 2026-07-28 (``WHO`` the
    principal of its bearer token, ``local`` on an open endpoint) and ``BASE.WHO.SESSION`` for a 2025-11-25
    session (the start of its ``Mcp-Session-Id``). A principal scoped to named sessions runs in ``BASE`` (its
    scope decides whether the broker takes the call). So two clients never share a call, a form or a
    ``requestState`` (:meth:`surfaces.mcp.elicit.Calls.resume` refuses another's); names keyed: ``session_key``."""
    request = ctx.request
    principal = auth.request_principal(request)
    if principal is not None and not principal.all_sessions:
        return base
    who = "local" if principal is None else principal.name
    if (principal is not None and principal.person) or not _CLIENT_NAME.fullmatch(who):
        who = opaque_name(who, key)
    parts = [base, who]
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and isinstance(request, Request):
        session = request.headers.get("mcp-session-id", "")
        if session:
            parts.append(session[:MCP_SESSION_ID_CHARS])
    return ".".join(parts)


def _connection(ctx: ServerRequestContext[Any]) -> Connection:
    return ctx.session._connection  # the SDK's own Context.connection reads the same attribute


def build_server(settings: McpSettings, broker: BrokerClient, interactions: Interactions | None = None) -> Server[Any]:
    """The SDK server whose handlers list and call the broker's Tools; its lifespan runs the :class:`ToolWatch`.

    With ``interactions``, a client that declares form elicitation is asked the call's forms itself
    (:mod:`surfaces.mcp.elicit`)."""
    schemas = tools.InputSchemas()
    watch = ToolWatch(broker, schemas)
    listen = ListenHandler(watch.bus)
    events = SessionEventStore()
    flights = Flights()
    grace = settings.mcp_reattach_grace_seconds

    key = settings.mcp_state_key.get_secret_value().encode() or None
    cap = CallCap(settings.mcp_max_calls_per_client)
    calls = (
        Calls(
            StateSeal(key, settings.mcp_state_ttl_seconds),
            interactions,
            settings.mcp_reattach_grace_seconds,
            flights.stopping,
        )
        if interactions
        else None
    )

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        task = asyncio.create_task(watch.run(), name="maka-mcp-tool-watch")
        try:
            yield {}
        finally:
            listen.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if calls is not None:
                await calls.close()

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        auth.forward_caller(ctx.request)
        watch.follow(_connection(ctx))
        try:
            infos = await broker.list_tools()
        except MakaError as error:
            raise MCPError(INTERNAL_ERROR, f"the broker is unavailable: {error.code}") from None
        listed = [tool for tool in (mcp_tool(info) for info in infos) if tool is not None]
        schemas.update({tool.name: tool.input_schema for tool in listed})
        return ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        with flights.request():  # a drain waits for it; a stop answers it LOST (surfaces.mcp.drain)
            return await flights.answered(handle_call(ctx, params))

    async def handle_call(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        auth.forward_caller(ctx.request)
        watch.follow(_connection(ctx))
        qualified = tools.decode(params.name)
        if qualified is None:
            raise UnknownTool(params.name, schemas.names())
        arguments = dict(params.arguments or {})
        session_id = client_session(settings.mcp_session, ctx, key)
        sent = 0

        async def notify(message: str) -> None:
            nonlocal sent
            sent += 1  # progress MUST increase (MCP specification basic/utilities/progress)
            await ctx.session.report_progress(sent, None, message)

        def call(notify: Callable[[str], Awaitable[None]], observe: Callable[[object], None] | None) -> Any:
            return run_call(
                broker,
                mcp_name=params.name,
                qualified=qualified,
                arguments=arguments,
                session_id=session_id,
                web_url=settings.web_url,
                notify=notify,
                observe=observe,
                listed=schemas.names(),
            )

        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        identity = auth.request_identity(ctx.request)
        if not (modern and calls is not None and params.request_state is not None):  # a retry starts nothing
            refused = cap.refused(identity)
            if refused is not None:
                return refused
        if calls is None:
            with cap.held(identity):
                return await stop_on_disconnect(ctx, call(notify, None), events, grace)
        acting = acting_view(calls.interactions, auth.request_principal(ctx.request))
        if modern and params.request_state is not None:
            digest = call_digest(params.name, arguments)
            detached, state = calls.resume(params.request_state, digest, session_id, identity)
            detached.notify = notify
            await calls.answer(detached, state, params.input_responses or {}, acting)
            return await calls.wait(detached)
        if not declares_form_elicitation(ctx.session.client_capabilities):
            with cap.held(identity):
                return await stop_on_disconnect(ctx, call(notify, None), events, grace)
        if modern:

            async def run(detached: DetachedCall) -> CallToolResult:
                async def forward(message: str) -> None:
                    if detached.notify is not None and detached.attached:
                        with contextlib.suppress(Exception):  # the request that would carry it has ended
                            await detached.notify(message)

                with flights.detached_call():  # also between its rounds: a drain waits for it
                    result: CallToolResult = await call(forward, detached.observe)
                if detached.issued and not detached.attached:  # its client comes back for the outcome
                    flights.hold(detached.delivered, grace)
                return result

            detached = calls.start(call_digest(params.name, arguments), session_id, run, acting, identity)
            release = cap.take(identity)  # counted until the detached call ends, however many rounds it takes
            assert detached.task is not None
            detached.task.add_done_callback(lambda _task: release())
            detached.notify = notify
            return await calls.wait(detached)
        with cap.held(identity):
            legacy = _with_legacy_elicitation(ctx, acting, session_id, call, notify)
            return await stop_on_disconnect(ctx, legacy, events, grace)

    server = FrontDoorServer(
        SERVER_NAME,
        version=server_version(),
        lifespan=lifespan,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=listen,
    )
    server.events = events
    server.flights = flights
    return server


async def _with_legacy_elicitation(
    ctx: ServerRequestContext[Any],
    interactions: Interactions,
    session_id: str,
    call: Callable[[Callable[[str], Awaitable[None]], Callable[[object], None] | None], Any],
    notify: Callable[[str], Awaitable[None]],
) -> CallToolResult:
    """Run a 2025-11-25 call whose client declared form elicitation: each form is also sent to the client as
    ``elicitation/create`` (answered through ``interactions``, the client's principal's view); a form settled on
    another surface first has its request cancelled."""
    asking: dict[str, asyncio.Task[None]] = {}
    owner = ""

    async def elicit(message: str, schema: dict[str, Any]) -> Any:
        return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)

    def observe(event: object) -> None:
        nonlocal owner
        if isinstance(event, Accepted):
            owner = event.host_id  # the Host whose forms these are (through a pool, maybe not this door's)
        elif isinstance(event, AwaitingInteraction) and event.interaction_id not in asking:
            ask = ask_legacy(interactions, session_id, event, elicit, owner)
            asking[event.interaction_id] = asyncio.create_task(ask, name="maka-mcp-elicit")
        elif isinstance(event, InteractionSettled) and event.interaction_id in asking:
            asking[event.interaction_id].cancel()

    try:
        result: CallToolResult = await call(notify, observe)
        return result
    finally:
        for task in asking.values():
            task.cancel()
        for task in asking.values():
            with contextlib.suppress(BaseException):
                await task


async def _health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    """An unknown path (``/``, ``/sse``): ``404`` naming the MCP endpoint, so an SDK's error says where to go."""
    body = {"error": "not_found", "error_description": f"the MCP endpoint is {MCP_PATH} (Streamable HTTP)"}
    return JSONResponse(body, status_code=404)


OPENING_WAIT_SECONDS = 10.0
"""How long a request opening a 2025-11-25 session waits for its principal's other openings (:class:`SessionCap`)."""


async def _buffered(receive: Receive, limit: int) -> Receive:
    """Read a request's body messages until its end (or past ``limit`` bytes, which the SDK then refuses with
    ``413``); returns a ``receive`` that hands them on first, then whatever ``receive`` gives."""
    read: list[Message] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break  # the client went away
        size += len(message.get("body", b""))
        if not message.get("more_body", False) or size > limit:
            break

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return replay


class SessionCap:
    """ASGI middleware (inside :class:`surfaces.mcp.auth.BearerGate`): at most ``limit`` 2025-11-25 sessions per
    principal. Every session is bound to its principal (the ASGI ``user``, :func:`surfaces.mcp.auth.session_owner`:
    the SDK's session manager refuses its id to anyone else, ``local`` on an open endpoint). A request that would
    open one more closes the principal's oldest idle session (no request in flight: nothing is lost, and a
    client that leaks sessions keeps working) or, when every one is busy, is refused with ``429`` and a JSON-RPC
    error body saying so (a client that holds that many busy sessions is told, not silently cut off).

    An opening request's body is read whole (up to :data:`MAX_MCP_REQUEST_BODY_BYTES`) before it waits its turn,
    so a client sending its body slowly holds only its own request, never the principal's other openings; the
    turn itself is waited for at most :data:`OPENING_WAIT_SECONDS` (then ``503``)."""

    def __init__(self, app: ASGIApp, server: Server[Any], limit: int) -> None:
        self.app = app
        self.server = server
        self.limit = limit
        self._closing: set[asyncio.Task[None]] = set()
        self._opening: dict[str, asyncio.Lock] = {}
        """One principal's opening requests go one at a time, so parallel ones cannot all fit under the cap."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            user = scope["user"] = auth.session_owner(auth.LOCAL)
        headers = Request(scope).headers
        version = headers.get("mcp-protocol-version")
        opening = scope["method"] == "POST" and "mcp-session-id" not in headers
        if not opening or (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            await self.app(scope, receive, send)
            return
        receive = await _buffered(receive, MAX_MCP_REQUEST_BODY_BYTES)
        lock = self._opening.setdefault(authorization_context(user)["client_id"], asyncio.Lock())
        try:
            async with asyncio.timeout(OPENING_WAIT_SECONDS):
                await lock.acquire()
        except TimeoutError:
            log.info("mcp.session_opening_busy", extra={"waited_seconds": OPENING_WAIT_SECONDS})
            message = "This client's other new sessions are still being opened; try again"
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": message}}
            await JSONResponse(body, status_code=503, headers={"Retry-After": "1"})(scope, receive, send)
            return
        held = True

        def release() -> None:  # once: by then another request may hold the lock
            nonlocal held
            if held:
                held = False
                lock.release()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()  # the session it opens (if any) is registered by now
            await send(message)

        try:
            if not self._room(user):
                log.info("mcp.sessions_per_client_exhausted", extra={"limit": self.limit})
                message = f"Too many open sessions for this client ({self.limit}, all busy); close one (DELETE) first"
                body = {"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": message}}
                await JSONResponse(body, status_code=429)(scope, receive, send)
                return
            await self.app(scope, receive, sending)
        finally:
            release()

    def _room(self, user: AuthenticatedUser) -> bool:
        """Whether ``user`` may open one more session, after closing its oldest idle one if need be."""
        manager = getattr(self.server, "_session_manager", None)
        if manager is None:
            return True
        owner = authorization_context(user)
        owned = [sid for sid, other in manager._session_owners.items() if other == owner]
        if len(owned) < self.limit:
            return True
        for sid in owned:  # oldest first (the manager's dicts keep the order sessions were opened in)
            transport = manager._server_instances.get(sid)
            if transport is not None and transport._requests_in_flight == 0:
                log.info("mcp.idle_session_closed", extra={"limit": self.limit})
                # forgotten at once (its id answers 404); the transport ends in the background
                manager._server_instances.pop(sid, None)
                manager._session_owners.pop(sid, None)
                closing = asyncio.create_task(transport.terminate(), name="maka-mcp-session-close")
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
                return True
        return False


def build_asgi(settings: McpSettings, server: Server[Any]) -> Starlette:
    """The Starlette app: the MCP endpoint at ``/mcp`` (its lifespan runs the session manager), ``/healthz``
    (liveness) and ``/readyz`` (503 ``draining`` while the process drains, :mod:`surfaces.mcp.drain`)."""
    host, _port = settings.listen_host_port()
    events = server.events if isinstance(server, FrontDoorServer) else None
    flights = server.flights if isinstance(server, FrontDoorServer) else None
    routes = [Route(HEALTH_PATH, _health)]
    if flights is not None:
        routes.append(Route(READY_PATH, flights.readyz))
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=hosts.security_settings(settings),
        host=host,
        custom_starlette_routes=routes,
        event_store=events,
        retry_interval=RETRY_INTERVAL_MS if events is not None else None,
        max_request_body_size=MAX_MCP_REQUEST_BODY_BYTES,
        session_idle_timeout=settings.mcp_session_idle_seconds,
    )
    app.add_exception_handler(404, _not_found)
    app.add_middleware(SessionCap, server=server, limit=settings.mcp_max_sessions_per_client)
    auth.protect(app, settings, MCP_PATH)
    app.add_middleware(TagRequests)
    app.add_middleware(guards.LateFailures)  # the SDK's closed-session race (surfaces/mcp/guards.py)
    guards.install()
    keepalive.install(settings.mcp_keepalive_seconds)
    return app
