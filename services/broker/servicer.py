"""Thin gRPC adapter of :class:`services.broker.broker.Broker` (``maka.broker.v1.CapabilityBrokerService``).

Roles (``services.core.auth``): ``Connect`` and ``ReportServers`` admit ``provider``; ``GetStatus``
and the OAuth sign-in RPCs (``ListSignIns``, ``CompleteSignIn``, ``SignOut``) admit ``caller`` and
``surface``; ``CallTool``, ``Stop``, ``ListTools`` and ``WatchTools`` admit ``caller``, and a
caller scoped to sessions may only call and stop in its own
sessions (``all`` stops those of its sessions). Refusals are PERMISSION_DENIED / ``PERMISSION_DENIED``.
Which calls a principal sees (``GetStatus``) and acts on (``Stop``, ``WatchCall``) is the one rule of
:mod:`services.broker.access`: a person acts only on the calls made for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.broker.access import made_for, may_act_on, sees_call
from services.broker.broker import Broker
from services.broker.errors import NotPermitted
from services.broker.model import ProviderStream
from services.core.auth import Role, current_principal
from services.core.status import ServiceError, abort

log = logging.getLogger("maka.broker.servicer")

Context = grpc.aio.ServicerContext[object, object]


def _require_any(*roles: Role) -> None:
    principal = current_principal()
    if not any(principal.has_role(role) for role in roles):
        raise NotPermitted(f"the caller lacks the {' or '.join(role.value for role in roles)} role")


def _require(role: Role, session_id: str | None = None) -> None:
    principal = current_principal()
    if not principal.has_role(role):
        raise NotPermitted(f"the caller lacks the {role.value} role")
    if session_id is not None and not principal.may_see(session_id):
        raise NotPermitted("the caller may not act in this session")


class BrokerServicer(broker_pb2_grpc.CapabilityBrokerServiceServicer):
    """``CapabilityBrokerService`` over a :class:`Broker`."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def Connect(
        self, request_iterator: AsyncIterator[broker_pb2.ConnectRequest], context: Context
    ) -> AsyncIterator[broker_pb2.ConnectResponse]:
        """A provider's stream: registration, invocations and their nested forms (docs/design.md#capability-broker).

        ``register`` first (answered ``registered`` with minted registration/connection ids and the
        heartbeat interval), then provider frames in order; refused frames are answered with
        ``FrameRejected`` and never end the stream. The stream ends when the provider half-closes,
        is replaced by a re-registration, misses three heartbeats, overflows its bounded queue, or
        the broker shuts down. PERMISSION_DENIED without the ``provider`` role.
        """
        try:
            _require(Role.PROVIDER)
        except ServiceError as error:
            await abort(context, error)
        stream = self._broker.open_provider_stream()
        reader = asyncio.create_task(self._pump(request_iterator, stream))
        try:
            async for frame in stream.frames():
                yield frame
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            self._broker.provider_stream_lost(stream)

    async def _pump(self, requests: AsyncIterator[broker_pb2.ConnectRequest], stream: ProviderStream) -> None:
        try:
            async for request in requests:
                self._broker.handle_frame(stream, request)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the transport failed: the provider is gone
            log.info("provider_stream_failed", extra={"error_type": type(error).__name__})
        finally:
            self._broker.provider_stream_lost(stream)

    async def CallTool(
        self, request: broker_pb2.CallToolRequest, context: Context
    ) -> AsyncIterator[broker_pb2.CallToolResponse]:
        """Start one logical Tool invocation and stream its events (docs/clients.md).

        Events: ``accepted`` → (``progress`` | ``awaiting_interaction`` | ``interaction_settled`` |
        ``status``)* → exactly one of ``result``, ``failure`` (stable ``FailureCode``), ``lost``,
        ``stopped``; each logged one with a ``sequence`` and ``resume_token``. A malformed request or
        unknown Tool is a single ``failure`` event (INVALID_REQUEST / UNKNOWN_TOOL). A ``call_id`` of
        an existing invocation of this principal attaches to it (its events replayed). The caller
        disconnecting detaches: the invocation is stopped only when nobody reattaches (WatchCall)
        within the grace. PERMISSION_DENIED without the ``caller`` role or for a session the caller
        may not see.
        """
        try:
            _require(Role.CALLER, request.session_id)
        except ServiceError as error:
            await abort(context, error)
        caller = current_principal()
        invocation = self._broker.call_tool(
            request, caller.name, made_for(caller), lambda existing: may_act_on(caller, existing)
        )
        async with contextlib.aclosing(self._broker.follow(invocation)) as events:
            async for event in events:
                yield event

    async def WatchCall(
        self, request: broker_pb2.WatchCallRequest, context: Context
    ) -> AsyncIterator[broker_pb2.WatchCallResponse]:
        """Reattach to an invocation this principal started: replay the events after
        ``resume_token``, a ``status`` event when it is still live, then follow it like CallTool.

        NOT_FOUND / ``CALL_NOT_FOUND`` for an unknown or no longer retained invocation, and alike for another
        principal's or one the caller may not act on (:func:`~services.broker.access.may_act_on`);
        INVALID_ARGUMENT / ``INVALID_REQUEST`` for a malformed resume token.
        """
        try:
            _require(Role.CALLER)
            principal = current_principal()
            invocation, after = self._broker.watch(
                request.invocation_id,
                request.resume_token,
                principal.name,
                lambda invocation: may_act_on(principal, invocation),
            )
        except ServiceError as error:
            await abort(context, error)
        async with contextlib.aclosing(self._broker.follow(invocation, after, status_first=True)) as events:
            async for event in events:
                yield broker_pb2.WatchCallResponse(event=event)

    async def Stop(self, request: broker_pb2.StopRequest, context: Context) -> broker_pb2.StopResponse:
        """Stop a turn, a session, or (``all``) every live invocation of the Host, or one invocation
        (``invocation_id``), of the calls the caller may act on (:func:`~services.broker.access.may_act_on`: a
        person's own, a token's of its sessions); the others count as absent, so stopping another person's
        answers 0 stopped, exactly as an unknown session or call does (a pool's Hosts answer alike but for its
        owner) (RFC criterion 7). ``all`` from a person stops all of theirs.

        Returns the number stopped once their pending forms are closed ``stopped``.
        INVALID_ARGUMENT / INVALID_REQUEST for ``all`` with ids or no session without ``all``;
        PERMISSION_DENIED for a session outside the token's ``sessions`` (``all`` from a scoped token stops the calls
        of its sessions).
        """
        try:
            if request.all or request.invocation_id:
                _require(Role.CALLER)
            else:
                _require(Role.CALLER, request.session_id)
            principal = current_principal()
            stopped = await self._broker.stop(
                request.session_id,
                request.turn_id,
                all_sessions=request.all,
                invocation_id=request.invocation_id,
                may_act=lambda invocation: may_act_on(principal, invocation),
            )
        except ServiceError as error:
            await abort(context, error)
        return broker_pb2.StopResponse(stopped_invocations=stopped)

    async def ReportServers(
        self, request_iterator: AsyncIterator[broker_pb2.ReportServersRequest], context: Context
    ) -> broker_pb2.ReportServersResponse:
        """A provider process's server status stream (:mod:`services.broker.servers`): each request
        replaces its snapshot; the snapshot is dropped when the stream ends. PERMISSION_DENIED without
        the ``provider`` role."""
        try:
            _require(Role.PROVIDER)
        except ServiceError as error:
            await abort(context, error)
        report = self._broker.servers.open()
        try:
            async for request in request_iterator:
                self._broker.servers.update(report, request)
        finally:
            self._broker.servers.close(report)
        return broker_pb2.ReportServersResponse()

    async def GetStatus(self, request: broker_pb2.GetStatusRequest, context: Context) -> broker_pb2.GetStatusResponse:
        """Every reported MCP server (state, cause, next retry), the reporters and the broker's gauges.

        PERMISSION_DENIED without the ``caller`` or ``surface`` role (status carries no session data). The recent
        calls are those of the sessions the caller sees; a person (``x-maka-acts-for``, or their own token) sees
        only calls made for them or for no person (:func:`~services.broker.access.sees_call`).
        """
        principal = current_principal()
        if not (principal.has_role(Role.CALLER) or principal.has_role(Role.SURFACE)):
            await abort(context, NotPermitted("the caller lacks the caller or surface role"))
        return self._broker.status(lambda invocation: sees_call(principal, invocation))

    async def ListTools(self, request: broker_pb2.ListToolsRequest, context: Context) -> broker_pb2.ListToolsResponse:
        """Every Tool of every live registration, qualified ``SERVER:TOOL``, sorted by name.

        PERMISSION_DENIED without the ``caller`` role.
        """
        try:
            _require(Role.CALLER)
        except ServiceError as error:
            await abort(context, error)
        return broker_pb2.ListToolsResponse(tools=self._broker.list_tools())

    async def WatchTools(
        self, request: broker_pb2.WatchToolsRequest, context: Context
    ) -> AsyncIterator[broker_pb2.WatchToolsResponse]:
        """The listing of ListTools with its revision, then the listing again each time it changes; ends (OK) when
        the broker starts to drain or shuts down (docs/clients.md).

        PERMISSION_DENIED without the ``caller`` role.
        """
        try:
            _require(Role.CALLER)
        except ServiceError as error:
            await abort(context, error)
        async with contextlib.aclosing(self._broker.watch_tools()) as listings:
            async for listing in listings:
                yield listing

    async def ListSignIns(
        self, request: broker_pb2.ListSignInsRequest, context: Context
    ) -> broker_pb2.ListSignInsResponse:
        """The OAuth sign-in status of every server a live provider reported one for, sorted by server.

        PERMISSION_DENIED without the ``caller`` or ``surface`` role.
        """
        try:
            _require_any(Role.CALLER, Role.SURFACE)
        except ServiceError as error:
            await abort(context, error)
        return broker_pb2.ListSignInsResponse(sign_ins=self._broker.list_sign_ins())

    async def CompleteSignIn(
        self, request: broker_pb2.CompleteSignInRequest, context: Context
    ) -> broker_pb2.CompleteSignInResponse:
        """Deliver an OAuth redirect to the provider whose pending sign-in minted ``state``.

        NOT_FOUND / ``NOT_FOUND`` when no pending sign-in has that state; PERMISSION_DENIED without the
        ``caller`` or ``surface`` role.
        """
        try:
            _require_any(Role.CALLER, Role.SURFACE)
            server = self._broker.complete_sign_in(request)
        except ServiceError as error:
            await abort(context, error)
        return broker_pb2.CompleteSignInResponse(server=server)

    async def SignOut(self, request: broker_pb2.SignOutRequest, context: Context) -> broker_pb2.SignOutResponse:
        """Ask the provider of ``server`` to forget its tokens (it then needs a new sign-in).

        NOT_FOUND / ``NOT_FOUND`` when no live provider reported a sign-in for it; PERMISSION_DENIED
        without the ``caller`` or ``surface`` role.
        """
        try:
            _require_any(Role.CALLER, Role.SURFACE)
            self._broker.sign_out(request.server)
        except ServiceError as error:
            await abort(context, error)
        return broker_pb2.SignOutResponse()
