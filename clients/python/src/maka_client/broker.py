"""The caller's client of the Capability broker: ``CallTool`` with automatic reattach, ``WatchCall``,
``Stop``, ``ListTools`` and ``WatchTools`` (docs/clients.md).

Every call gets a caller-chosen call id (a fresh UUID unless given), so a start that failed before
``accepted`` is retried safely: the broker attaches the retry to the invocation it already started.
Once ``accepted`` is seen, a dropped stream (proxy restart, network error, an L7 proxy's idle timeout)
is resumed with ``WatchCall(invocation_id, resume_token)``: the broker replays exactly the events
after the last one this client saw, so none is lost or repeated. The broker keeps a call with nobody
attached for its reattach grace (default 30 s) and then stops it as Stop would; the client gives up
reattaching after :attr:`ReattachPolicy.give_up_after` seconds (default 25 s, inside that grace).

A target may name a team's pool of Hosts (``dns:///team-a-hosts:50052``, ``ipv4:10.0.0.1:50052,10.0.0.2:50052``;
docs/clients.md "Pools of Hosts"): new calls are balanced ``round_robin`` over the Hosts whose new-calls
health service is SERVING (standard client-side health checking), a start a draining Host still refused
``HOST_UNAVAILABLE`` is retried with the same call id, and once ``accepted`` names the owning Host every
reattach goes to that Host (``host_address``), also while it drains.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio

from maka_client._channel import (
    BROKER_NEW_CALLS_SERVICE,
    PoolMember,
    TlsOptions,
    bearer,
    is_pool_target,
    open_channel,
    pool_members,
    pool_service_config,
    state_dir_address,
    state_dir_token,
)
from maka_client._codes import ClientErrorReason, FailureCode
from maka_client._errors import ATTACH_FATAL, RETRYABLE, MakaError
from maka_client._gen.maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka_client._resume import resumable
from maka_client._retry import Backoff
from maka_client.events import OUTCOMES, Accepted, CallEvent, Failure, Outcome, Reattaching, decode

DEFAULT_TARGET = "127.0.0.1:50052"
TARGET_ENV = "MAKA_BROKER_TARGET"
TOKEN_ENV = "MAKA_CALLER_TOKEN"
Response = TypeVar("Response")
WATCH_READY_TIMEOUT = 2.0
"""Seconds a :meth:`BrokerClient.watch_tools` (re)connect waits for a ready Host before it tries again later."""


@dataclass(frozen=True)
class ReattachPolicy:
    """How a dropped stream is resumed: jittered exponential backoff (:class:`maka_client._retry.Backoff`
    from ``initial_delay`` doubling to ``max_delay``), bounded in time for calls.

    ``give_up_after`` counts from the first failure since the last event received; 0 disables
    reattaching (a dropped stream raises at once). A call whose first stream failed before any
    event arrived (broker unreachable, refused) raises at once too: start it again with the same
    ``call_id`` to retry safely. A surface's ``attach`` never gives up (it is the surface's feed).
    """

    initial_delay: float = 0.2
    max_delay: float = 3.0
    give_up_after: float = 25.0

    @property
    def backoff(self) -> Backoff:
        """The delays as a :class:`~maka_client._retry.Backoff`."""
        return Backoff(initial=self.initial_delay, maximum=self.max_delay, multiplier=2.0)

    def delay(self, attempt: int) -> float:
        """The wait before reattach ``attempt`` (1-based)."""
        return self.backoff.delay(attempt)


@dataclass(frozen=True)
class ToolInfo:
    """One Tool the broker knows (``ListTools``)."""

    name: str
    """Qualified ``SERVER:TOOL``: what :meth:`BrokerClient.call_tool` takes."""
    description: str
    input_schema: dict[str, Any]
    provider_id: str
    provider_display_name: str
    output_schema: dict[str, Any] | None = None
    """The Tool's ``outputSchema`` exactly as the server listed it (``None`` when it has none)."""
    title: str = ""
    """The Tool's ``title`` as the server listed it (empty when none)."""
    annotations: dict[str, Any] | None = None
    """The Tool's ``annotations`` (``readOnlyHint``, ``destructiveHint``, ...) as the server listed them: hints
    from an untrusted server (``None`` when none)."""


@dataclass(frozen=True)
class ToolListing:
    """The broker's whole Tool listing at one revision (:meth:`BrokerClient.watch_tools`)."""

    revision: int
    """The listing's revision on the broker that sent it (1 for its first; comparable only with the same
    ``host_id`` and broker process: a reconnect may reach another)."""
    host_id: str
    """The Host whose broker sent it."""
    tools: tuple[ToolInfo, ...]
    """Every Tool, sorted by qualified name (what :meth:`BrokerClient.list_tools` returns)."""


def _tool_info(tool: broker_pb2.Tool) -> ToolInfo:
    try:
        schema = json.loads(tool.input_schema_json or "{}")
    except ValueError:
        schema = {}
    return ToolInfo(
        name=tool.qualified_name,
        description=tool.description,
        input_schema=schema if isinstance(schema, dict) else {},
        provider_id=tool.provider_id,
        provider_display_name=tool.provider_display_name,
        output_schema=_schema_or_none(tool.output_schema_json),
        title=tool.title,
        annotations=_schema_or_none(tool.annotations_json),
    )


def _schema_or_none(text: str) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        schema = json.loads(text)
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


@dataclass(frozen=True)
class HostStatus:
    """One Host of a pool as its broker's ``GetStatus`` describes it (:meth:`BrokerClient.hosts`)."""

    address: str
    """Where it was reached (an address of the pool target)."""
    host_id: str = ""
    state: str = "unreachable"
    """``serving`` (takes new calls), ``draining`` (no new calls; its running calls and forms still served),
    ``not ready`` (no provider registered yet, or shutting down) or ``unreachable`` (``error`` says why)."""
    live_invocations: int = 0
    """Calls running on it."""
    pending_forms: int = 0
    """Forms its calls wait on."""
    error: str = ""
    """The gRPC status name when it did not answer."""


def _host_state(status: broker_pb2.GetStatusResponse) -> str:
    if status.draining:
        return "draining"
    return "serving" if status.takes_new_calls else "not ready"


class ToolCall:
    """One Tool call: ``async for event in call`` yields typed events; ``await call.result()`` the outcome.

    Attributes:
        call_id: the idempotency key sent with ``CallTool``.
        invocation_id: set once ``accepted`` was seen (or given to :meth:`BrokerClient.watch_call`).
        resume_token: the token of the last logged event seen (what a reattach resumes after).
        host_id: the Host that owns the call, once ``accepted`` was seen.
        host_address: where that Host is reachable (``CallAccepted.host_address``); every reattach goes
            there. Empty: the client's own target.
        reattaches: how many times the stream was resumed.
        refused_starts: how many starts a pool's Host refused ``HOST_UNAVAILABLE`` (draining) before one
            was accepted; each was retried with the same call id.
        outcome: the terminal event once seen.
    """

    def __init__(
        self,
        client: BrokerClient,
        request: broker_pb2.CallToolRequest,
        *,
        invocation_id: str = "",
        resume_token: str = "",
        host_address: str = "",
    ) -> None:
        self._client = client
        self.host_id = ""
        self.host_address = host_address
        self.refused_starts = 0
        self.request = request
        self.call_id = request.call_id
        self.session_id = request.session_id
        self.turn_id = request.turn_id
        self.invocation_id = invocation_id
        self.resume_token = resume_token
        self.sequence = int(resume_token) if resume_token.isdigit() else 0
        self.reattaches = 0
        self.outcome: Outcome | None = None
        self._received = bool(invocation_id)
        self._iterator: AsyncGenerator[CallEvent, None] | None = None

    def __aiter__(self) -> AsyncIterator[CallEvent]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    async def result(self) -> Outcome:
        """Read the remaining events and return the outcome (:class:`Result`, :class:`Failure`,
        :class:`Lost` or :class:`Stopped`). Raises :class:`MakaError` when the call cannot be followed."""
        async for _ in self:
            pass
        if self.outcome is None:
            raise MakaError(
                grpc.StatusCode.UNKNOWN, "the call ended without an outcome", reason=ClientErrorReason.NO_RESULT
            )
        return self.outcome

    async def stop(self) -> int:
        """Stop this call's turn (broker ``Stop``): the form closes ``stopped``, no retry is sent."""
        if not self.session_id:
            raise MakaError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "a watched call does not know its session and turn",
                reason=ClientErrorReason.INVALID_ARGUMENT,
            )
        return await self._client.stop(self.session_id, self.turn_id, host_address=self.host_address)

    async def aclose(self) -> None:
        """Stop following (the broker keeps the call for its reattach grace; see :meth:`stop`)."""
        if self._iterator is not None:
            await self._iterator.aclose()

    def _open(self, token: str) -> AsyncIterator[broker_pb2.CallToolResponse]:
        if self.invocation_id:
            # A reattach goes to the Host that owns the call, never to another Host of a pool.
            owner = self._client.owner_stub(self.host_address)
            request = broker_pb2.WatchCallRequest(invocation_id=self.invocation_id, resume_token=token)
            return _watched(owner.WatchCall(request, metadata=self._client.metadata))
        # A pool's start waits for a Host that takes new calls (wait_for_a_ready_host bounded the wait).
        client = self._client
        return _cancelling(client.stub.CallTool(self.request, metadata=client.metadata, wait_for_ready=client.pool))

    def _retryable(self, failure: grpc.aio.AioRpcError | None) -> bool:
        # A refusal, or a first stream that failed before any event, is the server's answer.
        return failure is None or (failure.code() in RETRYABLE and self._received)

    def _refused_by_a_draining_host(self, event: CallEvent) -> bool:
        """A pool's start that a Host refused ``HOST_UNAVAILABLE`` before ``accepted``: that Host drains (its
        health had not reached this client yet). Nothing started there, so the same call id may go to
        another Host."""
        return (
            self._client.pool
            and not self.invocation_id
            and isinstance(event, Failure)
            and event.code == FailureCode.HOST_UNAVAILABLE
        )

    async def _events(self) -> AsyncGenerator[CallEvent, None]:
        policy = self._client.reattach
        retry = policy.backoff.attempts()
        first_refusal: float | None = None
        while True:
            refusal: Failure | None = None
            if self._client.pool and not self.invocation_id:
                await self._client.wait_for_a_ready_host(policy.give_up_after)
            async with contextlib.aclosing(self._follow()) as events:
                async for event in events:
                    if isinstance(event, Failure) and self._refused_by_a_draining_host(event):
                        refusal = event
                        break
                    yield event
            if refusal is None:
                return
            self.refused_starts += 1
            now = time.monotonic()
            first_refusal = first_refusal if first_refusal is not None else now
            if now - first_refusal >= policy.give_up_after:  # every Host of the pool kept refusing
                self.outcome = refusal
                yield refusal
                return
            await asyncio.sleep(retry.next_delay())  # retry backoff, not synchronisation

    async def _follow(self) -> AsyncGenerator[CallEvent, None]:
        """One start (or watch) of the call, reattaching as it drops, until its outcome."""
        policy = self._client.reattach
        self._received = bool(self.invocation_id)
        stream = resumable(
            self._open,
            token_of=_token_of,
            backoff=policy.backoff,
            retryable=self._retryable,
            resume_token=self.resume_token,
            give_up_after=policy.give_up_after,
        )
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, Reattaching):
                    self.reattaches += 1
                    yield item
                    continue
                self._received = True
                is_status = item.WhichOneof("event") == "status"
                if not is_status and item.sequence and item.sequence <= self.sequence:
                    continue  # replayed by an idempotent CallTool retry: already yielded
                event = decode(item)
                if not is_status and item.sequence:
                    self.sequence, self.resume_token = item.sequence, item.resume_token
                if isinstance(event, Accepted):
                    self.invocation_id = event.invocation_id
                    self.host_id = event.host_id
                    self.host_address = event.host_address
                if event is None:
                    continue
                if self._refused_by_a_draining_host(event):
                    self.sequence, self.resume_token = 0, ""  # another Host's log starts again at 1
                    yield event
                    return
                yield event
                if isinstance(event, OUTCOMES):
                    self.outcome = event
                    return


def _token_of(event: broker_pb2.CallToolResponse) -> str:
    """A logged event's resume token (a ``status`` keepalive repeats the last sequence: it moves nothing)."""
    return "" if event.WhichOneof("event") == "status" else event.resume_token


async def _cancelling(call: grpc.aio.UnaryStreamCall[Any, Response]) -> AsyncGenerator[Response, None]:
    try:
        async for event in call:
            yield event
    finally:
        call.cancel()


async def _watched(
    call: grpc.aio.UnaryStreamCall[broker_pb2.WatchCallRequest, broker_pb2.WatchCallResponse],
) -> AsyncGenerator[broker_pb2.CallToolResponse, None]:
    try:
        async for item in call:
            yield item.event
    finally:
        call.cancel()


class BrokerClient:
    """Client of ``maka.broker.v1.CapabilityBrokerService`` for callers (agent runtimes, the CLI).

    Args:
        target: ``host:port`` (or a gRPC target URI) of the broker, or of a proxy in front of it.
        token: bearer token of the ``caller`` role (``authorization: Bearer``); None sends none.
        tls: TLS / mutual TLS options; None is plaintext (loopback, or h2c behind a proxy).
        reattach: how dropped call streams are resumed (and how long a pool's refusing Hosts are retried).
        channel: an open channel to use instead of opening one to ``target`` (e.g. the runtime's own
            channel with its balancing and retry policy); ``close()`` leaves it open for its owner.
        pool: whether ``target`` names a pool of Hosts (default: :func:`~maka_client._channel.is_pool_target`,
            a ``dns:`` name or several addresses). A pool's channel balances new calls ``round_robin`` over
            the Hosts whose ``maka.broker.v1.CapabilityBrokerService`` health is SERVING, and a start refused
            ``HOST_UNAVAILABLE`` (a draining Host) is retried with the same call id; one Host keeps
            gRPC's default channel and reports the refusal.

    Once a call is accepted, its reattaches (``WatchCall``) and ``ToolCall.stop`` go to the Host that owns
    it: a channel to its ``host_address`` (one per address, ``pick_first``, no health check, because a
    draining Host still serves the calls it owns), or this client's channel when the Host advertised none.

    Create it inside the event loop that uses it; ``async with`` closes the channels.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: TlsOptions | None = None,
        reattach: ReattachPolicy | None = None,
        channel: grpc.aio.Channel | None = None,
        pool: bool | None = None,
    ) -> None:
        self.target = target
        self.reattach = reattach or ReattachPolicy()
        self.metadata = bearer(token)
        self.pool = is_pool_target(target) if pool is None else pool
        self._tls = tls
        self._owns_channel = channel is None
        if channel is None:
            config = pool_service_config(BROKER_NEW_CALLS_SERVICE) if self.pool else None
            channel = open_channel(target, tls, service_config=config)
        self._channel = channel
        self.stub = broker_pb2_grpc.CapabilityBrokerServiceStub(self._channel)
        self._owners: dict[str, tuple[grpc.aio.Channel, broker_pb2_grpc.CapabilityBrokerServiceAsyncStub]] = {}

    async def wait_for_a_ready_host(self, timeout: float) -> None:
        """Until the pool's channel has a Host that takes new calls (its health SERVING); raises
        :class:`MakaError` ``UNAVAILABLE`` after ``timeout`` s (every Host drains, none is up yet)."""
        try:
            async with asyncio.timeout(timeout):
                await self._channel.channel_ready()
        except TimeoutError:
            raise MakaError(grpc.StatusCode.UNAVAILABLE, f"no Host of the pool {self.target} takes new calls") from None

    def owner_stub(self, host_address: str, authority: str = "") -> broker_pb2_grpc.CapabilityBrokerServiceAsyncStub:
        """The stub that reaches the Host at ``host_address`` (a call's owner, or one Host of the pool; ``authority``
        for an address a ``dns:`` pool resolved to); this client's own for ``""``."""
        if not host_address:
            return self.stub
        if host_address not in self._owners:
            channel = open_channel(host_address, self._tls, authority=authority)
            self._owners[host_address] = (channel, broker_pb2_grpc.CapabilityBrokerServiceStub(channel))
        return self._owners[host_address][1]

    async def members(self) -> list[PoolMember]:
        """Every Host of the pool now (:func:`~maka_client._channel.pool_members`), else this client's one target.
        Raises :class:`MakaError` ``UNAVAILABLE`` when a ``dns:`` name does not resolve."""
        if not self.pool:
            return [PoolMember("")]
        try:
            return await pool_members(self.target)
        except OSError as error:
            raise MakaError(grpc.StatusCode.UNAVAILABLE, f"the pool {self.target} did not resolve: {error}") from None

    async def hosts(self, *, timeout: float = 5.0) -> list[HostStatus]:
        """Every Host of the pool (each asked on its own, draining ones included), or this client's one Host: its
        id, whether it takes new calls or drains, its calls running and the forms they wait on."""

        async def one(member: PoolMember) -> HostStatus:
            address = member.address or self.target
            try:
                status = await self.owner_stub(member.address, member.authority).GetStatus(
                    broker_pb2.GetStatusRequest(), metadata=self.metadata, timeout=timeout
                )
            except grpc.aio.AioRpcError as error:
                return HostStatus(address, error=error.code().name)
            return HostStatus(
                address,
                host_id=status.host_id,
                state=_host_state(status),
                live_invocations=status.live_invocations,
                pending_forms=status.pending_forms,
            )

        return list(await asyncio.gather(*(one(member) for member in await self.members())))

    @classmethod
    def from_env(cls, target: str | None = None, **kwargs: Any) -> BrokerClient:
        """``target``, else ``$MAKA_BROKER_TARGET``, else the broker of the local stack's ``endpoints.json``
        (in ``$MAKA_STATE_DIR``, default ``./.state``: what ``maka up`` wrote), else ``127.0.0.1:50052``;
        token ``$MAKA_CALLER_TOKEN`` (else, for the broker of ``endpoints.json``, the owner's token it names),
        TLS from ``$MAKA_TLS_*``."""
        local = None if target or os.environ.get(TARGET_ENV) else state_dir_address("broker")
        kwargs.setdefault("token", os.environ.get(TOKEN_ENV) or (state_dir_token() if local else None))
        kwargs.setdefault("tls", TlsOptions.from_env())
        return cls(target or os.environ.get(TARGET_ENV) or local or DEFAULT_TARGET, **kwargs)

    async def close(self) -> None:
        """Close the channels to owning Hosts, and the client's channel when this client opened it."""
        owners, self._owners = list(self._owners.values()), {}
        for channel, _ in owners:
            await channel.close()
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> BrokerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        session_id: str = "default",
        turn_id: str | None = None,
        tool_use_id: str | None = None,
        call_id: str | None = None,
        skip_argument_validation: bool = False,
    ) -> ToolCall:
        """Call ``SERVER:TOOL`` with ``arguments``; iterate the returned :class:`ToolCall` for events.

        ``turn_id`` / ``tool_use_id`` / ``call_id`` default to fresh ids. Nothing is sent until the
        call is iterated (or :meth:`ToolCall.result` awaited). The broker checks ``arguments`` against
        the Tool's ``inputSchema`` first (``INVALID_ARGUMENTS``) unless ``skip_argument_validation``.
        """
        suffix = uuid.uuid4().hex[:12]
        request = broker_pb2.CallToolRequest(
            session_id=session_id,
            turn_id=turn_id or f"turn-{suffix}",
            tool_use_id=tool_use_id or f"call-{suffix}",
            tool_name=tool,
            arguments_json=json.dumps(dict(arguments or {})),
            call_id=call_id or f"cid-{uuid.uuid4().hex}",
            skip_argument_validation=skip_argument_validation,
        )
        return ToolCall(self, request)

    def watch_call(self, invocation_id: str, resume_token: str = "", *, host_address: str = "") -> ToolCall:
        """Follow a call started earlier (by this principal), replaying the events after ``resume_token``;
        ``host_address`` is the owning Host's (``ToolCall.host_address``; empty: this client's target)."""
        return ToolCall(
            self,
            broker_pb2.CallToolRequest(),
            invocation_id=invocation_id,
            resume_token=resume_token,
            host_address=host_address,
        )

    async def stop(
        self,
        session_id: str = "default",
        turn_id: str = "",
        *,
        all_sessions: bool = False,
        invocation_id: str = "",
        timeout: float = 10.0,
        host_address: str = "",
    ) -> int:
        """Stop a turn, a session, (``all_sessions``) every live call, or the one call ``invocation_id``; returns
        how many stopped. ``host_address`` names the Host (a call's owner, ``ToolCall.host_address``); without it a
        pool's Hosts are each asked (:meth:`members`, draining ones included: a draining Host still stops the calls
        it owns; only the owner of ``invocation_id`` stops it), else this client's target. Raises
        :class:`MakaError` when a Host asked did not answer (the others' calls are stopped all the same)."""
        if invocation_id:
            request = broker_pb2.StopRequest(invocation_id=invocation_id)
        elif all_sessions:
            request = broker_pb2.StopRequest(all=True)
        else:
            request = broker_pb2.StopRequest(session_id=session_id, turn_id=turn_id)
        members = [PoolMember(host_address)] if host_address else await self.members()

        async def one(member: PoolMember) -> int:
            stub = self.owner_stub(member.address, member.authority)
            response = await stub.Stop(request, metadata=self.metadata, timeout=timeout)
            return response.stopped_invocations

        answers = await asyncio.gather(*(one(member) for member in members), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, grpc.aio.AioRpcError):
                raise MakaError.from_rpc(answer) from None
            if isinstance(answer, BaseException):
                raise answer
        return sum(answer for answer in answers if isinstance(answer, int))

    async def list_tools(self, *, timeout: float = 10.0) -> list[ToolInfo]:
        """Every Tool of every live provider registration, sorted by qualified name."""
        try:
            response = await self.stub.ListTools(broker_pb2.ListToolsRequest(), metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return sorted((_tool_info(tool) for tool in response.tools), key=lambda t: t.name)

    async def watch_tools(self) -> AsyncGenerator[ToolListing | Reattaching, None]:
        """``WatchTools``: the whole listing, then the whole listing again each time it changes (a provider
        registers or leaves, a server's Tools change, a config reload), as :class:`ToolListing`.

        The stream ends when its broker drains or shuts down, or drops: the client yields :class:`Reattaching`,
        waits the reattach backoff (:attr:`ReattachPolicy.backoff`; up to :data:`WATCH_READY_TIMEOUT` s for a
        ready Host first: on a pool, any Host that takes new calls) and opens it again, whose first listing is
        the whole listing once more, so a consumer that compares listings misses no change. Never gives up;
        ``UNAUTHENTICATED``, ``PERMISSION_DENIED``, ``INVALID_ARGUMENT``, ``NOT_FOUND``, ``FAILED_PRECONDITION``
        and ``UNIMPLEMENTED`` (an older broker) raise :class:`MakaError`. Runs until the consumer stops."""

        def open_stream(_token: str) -> AsyncIterator[broker_pb2.WatchToolsResponse]:
            return _cancelling(self.stub.WatchTools(broker_pb2.WatchToolsRequest(), metadata=self.metadata))

        stream = resumable(
            open_stream,
            token_of=lambda _listing: "",
            backoff=self.reattach.backoff,
            retryable=lambda failure: failure is None or failure.code() not in ATTACH_FATAL,
            ready=self._ready,
        )
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, Reattaching):
                    yield item
                    continue
                tools = tuple(sorted((_tool_info(tool) for tool in item.tools), key=lambda t: t.name))
                yield ToolListing(revision=item.revision, host_id=item.host_id, tools=tools)

    async def _ready(self) -> bool:
        """Whether the channel has a ready Host within :data:`WATCH_READY_TIMEOUT` s (a pool's: one whose new-calls
        health is SERVING)."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), WATCH_READY_TIMEOUT)
        except TimeoutError:
            return False
        return True

    async def get_status(self, *, timeout: float = 5.0) -> broker_pb2.GetStatusResponse:
        """``GetStatus``: the MCP servers the providers report, their config reloads, the broker's gauges."""
        try:
            return await self.stub.GetStatus(broker_pb2.GetStatusRequest(), metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None

    async def list_sign_ins(self, *, timeout: float = 5.0) -> list[broker_pb2.SignInStatus]:
        """``ListSignIns``: every OAuth server's sign-in status (never a token)."""
        try:
            response = await self.stub.ListSignIns(
                broker_pb2.ListSignInsRequest(), metadata=self.metadata, timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return list(response.sign_ins)

    async def complete_sign_in(
        self, code: str, state: str, iss: str = "", error: str = "", *, timeout: float = 10.0
    ) -> str:
        """``CompleteSignIn``: deliver an authorization response (``code``, ``state``, ``iss`` or ``error``);
        returns the server it signed in. ``NOT_FOUND`` for a ``state`` no sign-in is waiting for."""
        request = broker_pb2.CompleteSignInRequest(code=code, state=state, iss=iss, error=error)
        try:
            response = await self.stub.CompleteSignIn(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as failure:
            raise MakaError.from_rpc(failure) from None
        return response.server

    async def sign_out(self, server: str, *, timeout: float = 5.0) -> None:
        """``SignOut``: forget ``server``'s tokens (it asks for a new sign-in)."""
        try:
            await self.stub.SignOut(broker_pb2.SignOutRequest(server=server), metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
