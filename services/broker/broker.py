"""The Capability broker's coordinator: one Runtime Host's calls, over the parts that each own one concern.

A plain async class with no gRPC in it; :mod:`services.broker.servicer` adapts it. Its parts:
:mod:`services.broker.provider_link` (the provider ``Connect`` streams, one ``_apply_<frame>`` per frame),
:mod:`services.broker.forms` (nested forms and how they settle), :mod:`services.broker.settlement` (the
terminal barrier), :mod:`services.broker.invocation` (the state machine's one table of moves, the live
invocations), :mod:`services.broker.registry` (registrations, routing, sign-in), :mod:`services.broker.timers`
and :mod:`services.broker.attachments` (caller streams). Rules (docs/design.md#capability-broker,
docs/clients.md):

- A call starts with ``accepted`` and ends with exactly one of result, failure, lost, stopped; a malformed or
  unroutable one has ``failure`` as its only event. A ``call_id`` seen before returns the same invocation.
- Every event goes to the invocation's sequenced :class:`~services.broker.call_log.CallLog`, which any number of
  caller streams follow with ``status`` keepalives; when the last one ends without the outcome, the reattach
  grace starts, and a call nobody reattached to is stopped as Stop stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from typing import Any

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.attachments import CallerAttachments
from services.broker.call_log import CallLog, parse_resume_token
from services.broker.errors import CallNotFound, CallRefused, InvalidRequest
from services.broker.forms import Forms
from services.broker.invocation import Invocation, InvocationState, LiveInvocations
from services.broker.model import ProviderStream, Registration, mint_id
from services.broker.provider_link import ProviderLink
from services.broker.registry import ProviderRegistry
from services.broker.servers import ServerTable
from services.broker.settlement import InteractionHost, Settlement, failure_event
from services.broker.timers import ExecutionTimers, run_every
from services.broker.validation import check_call_request
from services.core.limits import MAX_ID_CHARS

log = logging.getLogger("maka.broker.broker")


RECENT_CALLS = 200
"""Settled invocations kept for activity lists (``GetStatus.recent_calls``)."""
SETTLED_MEMORY = 4096
"""How many settled invocation ids are remembered to tell late frames from unknown ones."""


class Broker:
    """The invocation state machine of one Runtime Host, over its provider registry, timers and callers.

    Args:
        host: the Interaction service link (``HostLink``) used to open and close forms.
        execution_timeout: provider execution budget of one leg, seconds; progress re-arms it.
        max_execution_seconds: most provider execution (outside forms) of one invocation, however
            often progress re-arms the timer; 0 = progress does not re-arm.
        heartbeat_seconds: provider heartbeat interval; a provider silent for 3x is lost.
        form_wait_seconds: bounded wait asked for each form (0 = Interaction service default).
        max_invocations_per_provider: live invocations per registration before RESOURCE_EXHAUSTED.
        queue_size: bound of each provider stream queue, and of the progress events each invocation's
            event log retains.
        call_keepalive_seconds: a caller stream silent this long gets a ``status`` event.
        reattach_grace_seconds: how long an invocation with no caller attached keeps running before
            it is stopped exactly as Stop; also how long a settled one stays reattachable.
        host_id: this Host's id, and host_address: where callers reach it for ``WatchCall`` (empty: the
            target they used); both go into every ``CallAccepted`` (docs/design.md#hosts-pools-and-teams).
    """

    def __init__(
        self,
        host: InteractionHost,
        *,
        execution_timeout: float = 120.0,
        max_execution_seconds: float = 0.0,
        heartbeat_seconds: float = 5.0,
        form_wait_seconds: float = 0.0,
        max_invocations_per_provider: int = 256,
        queue_size: int = 256,
        call_keepalive_seconds: float = 15.0,
        reattach_grace_seconds: float = 30.0,
        host_id: str = "",
        host_address: str = "",
    ) -> None:
        self._host_id = host_id
        self._host_address = host_address
        self.servers = ServerTable()
        """What providers report of their MCP servers (``ReportServers``)."""
        self._queue_size = queue_size
        self._counters: Counter[str] = Counter()
        self._live = LiveInvocations(recent_limit=RECENT_CALLS, settled_memory=SETTLED_MEMORY)
        self._registry = ProviderRegistry(
            ProviderStream.send, self.servers, max_invocations=max_invocations_per_provider
        )
        self._timers = ExecutionTimers(execution_timeout, max_execution_seconds, self._execution_timed_out)
        self._callers = CallerAttachments(
            keepalive_seconds=call_keepalive_seconds,
            grace_seconds=reattach_grace_seconds,
            retained_limit=SETTLED_MEMORY,
            counters=self._counters,
            on_abandoned=lambda invocation: self.stop_invocation(invocation, "caller did not reattach"),
        )
        self._settlement = Settlement(host, self._live, self._timers, self._callers, self._counters)
        self._forms = Forms(
            host,
            self._live,
            self._timers,
            self._settlement,
            self._counters,
            form_wait_seconds=form_wait_seconds,
            settled_memory=SETTLED_MEMORY,
        )
        self._link = ProviderLink(
            self._registry,
            self._live,
            self._settlement,
            self._forms,
            self._timers,
            self._counters,
            heartbeat_seconds=heartbeat_seconds,
            queue_size=queue_size,
            on_registrations=self._readiness_changed,
            shutting_down=lambda: self._shutting_down,
        )
        self._liveness: asyncio.Task[None] | None = None
        self._shutting_down = False
        self.on_readiness: Callable[[bool], None] | None = None
        """Called with :meth:`takes_new_calls` whenever it changes (the app flips its named health service)."""
        self._ready = False
        self._draining = False
        self._tool_watch_cut = 0
        """Bumped when the listing streams open now must end (drain, shutdown)."""

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the provider liveness sweep."""
        self._liveness = asyncio.create_task(
            run_every(self._link.heartbeat_seconds, self._link.retire_silent_providers), name="maka-broker-liveness"
        )

    def takes_new_calls(self) -> bool:
        """Readiness: a provider is registered (a new call can be routed) and the broker is neither draining
        nor shutting down. A Host's new-calls health service follows it, so a balancer or a pool client
        sends no call to a Host that just restarted and whose provider has not registered yet."""
        return not (self._draining or self._shutting_down) and bool(self._registry.registrations())

    def _readiness_changed(self) -> None:
        ready = self.takes_new_calls()
        if ready != self._ready:
            self._ready = ready
            log.info("broker_readiness", extra={"takes_new_calls": ready})
            if self.on_readiness is not None:
                self.on_readiness(ready)

    async def drain(self, timeout: float) -> int:
        """Stop accepting calls and give the live ones up to ``timeout`` s to finish.

        From now on every new ``CallTool`` fails ``HOST_UNAVAILABLE`` ("draining"); calls in flight,
        their forms and their provider legs go on untouched. Once none is live, the drain also waits
        for the callers of settled calls that have not received their outcome yet (a caller whose stream
        dropped is reattaching with ``WatchCall``), each at most its reattach grace. Returns how many
        invocations are still live when the wait ends (:meth:`shutdown` then settles them by the usual
        rules). A rolling update calls this between NOT_SERVING and :meth:`shutdown`
        (docs/design.md#drain-vs-crash).
        """
        self._draining = True
        self._readiness_changed()
        self._end_tool_watches()
        live = len(self._live)
        if timeout > 0 and (live or self._callers.undelivered_deadline() is not None):
            log.info("broker_draining", extra={"live_invocations": live, "drain_seconds": timeout})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._live.idle.wait()
                    await self._callers.outcomes_delivered()
        left = len(self._live)
        log.info("broker_drained", extra={"finished": live - left, "live_invocations": left})
        return left

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Graceful stop of the Host: live invocations settle ``lost``, pending forms close ``host_restarted``
        (docs/design.md#restart-and-reconnect: a Host that stops closes its forms and never replays a Tool),
        providers get ``cancel`` and their streams end; waits up to ``timeout`` s for the closes."""
        self._shutting_down = True
        self._readiness_changed()
        self._end_tool_watches()
        if self._liveness is not None:
            self._liveness.cancel()
        for invocation in self._live.all():
            self._settlement.lose(
                invocation,
                "the broker is shutting down",
                interaction_pb2.CLOSE_REASON_HOST_RESTARTED,
                cancel_reason="broker shutting down",
            )
        self._link.end_streams()
        await self._wait(self._settlement.tasks, timeout)

    # --- stats ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters (monotonic) and gauges: ``rejected_frames``, ``rejected_frames.<REASON>``,
        ``invocations_started``, ``invocations.<outcome>``, ``registrations``, ``replacements``,
        ``interactions_opened``, ``live_invocations``, ``live_registrations``, ``pending_forms``."""
        out = dict(self._counters)
        out["live_invocations"] = len(self._live)
        out["live_registrations"] = len(self._registry)
        out["pending_forms"] = len(self._live.pending_forms())
        return out

    def recent_calls(self, visible: Callable[[Invocation], bool], limit: int = 50) -> list[broker_pb2.CallSummary]:
        """Live then recently settled invocations ``visible`` accepts, newest first."""
        return self._live.summaries(visible, limit)

    def status(self, visible: Callable[[Invocation], bool] = lambda _invocation: True) -> broker_pb2.GetStatusResponse:
        """Every reported MCP server, the reporters, the broker's own gauges and the recent calls ``visible``
        accepts (``GetStatus``: :func:`services.broker.access.sees_call` of the caller)."""
        return broker_pb2.GetStatusResponse(
            recent_calls=self.recent_calls(visible),
            servers=self.servers.servers(),
            reporters=self.servers.reporters(),
            live_invocations=len(self._live),
            live_registrations=len(self._registry),
            pending_forms=len(self._live.pending_forms()),
            host_id=self._host_id,
            takes_new_calls=self.takes_new_calls(),
            draining=self._draining,
        )

    def live_invocations(self) -> list[Invocation]:
        """The live (not terminal) invocations."""
        return self._live.all()

    def awaiting_interaction_ids(self) -> list[str]:
        """Canonical ids of the forms the broker waits on (HostLink resume ``watched`` ids)."""
        return self._live.pending_forms()

    # --- the registry's side (services.broker.registry) ---------------------------------------------

    def list_tools(self) -> list[broker_pb2.Tool]:
        """Every Tool of every live registration (the routed one per qualified name)."""
        return self._registry.list_tools()

    async def watch_tools(self) -> AsyncGenerator[broker_pb2.WatchToolsResponse, None]:
        """The Tool listing now, then once per published change (``WatchTools``; coalesced: a reader that falls
        behind gets the latest revision). Ends when the broker starts to drain or shuts down: a stream opened
        before the drain ends then (a pool's reader moves to a Host that takes new calls), one opened during
        it at shutdown."""
        cut = self._tool_watch_cut

        def ended() -> bool:
            return self._shutting_down or self._tool_watch_cut != cut

        sent = 0
        while True:
            changed = self._registry.changed()
            if self._registry.revision != sent:
                sent = self._registry.revision
                yield broker_pb2.WatchToolsResponse(revision=sent, tools=self._registry.listing, host_id=self._host_id)
            if ended():
                return
            await changed.wait()
            if ended():  # not the providers leaving with a stopping broker: the reader reconnects for what follows
                return

    def _end_tool_watches(self) -> None:
        self._tool_watch_cut += 1
        self._registry.wake()

    def list_sign_ins(self) -> list[broker_pb2.SignInStatus]:
        """The sign-in status every live registration published, sorted by server (never a token)."""
        return self._registry.list_sign_ins()

    def complete_sign_in(self, request: broker_pb2.CompleteSignInRequest) -> str:
        """Forward an OAuth redirect to the provider whose pending sign-in minted ``request.state``
        (:meth:`ProviderRegistry.complete_sign_in`); returns the server name."""
        return self._registry.complete_sign_in(request)

    def sign_out(self, server: str) -> None:
        """Ask the provider of ``server`` to forget its tokens (:meth:`ProviderRegistry.sign_out`)."""
        self._registry.sign_out(server)

    # --- provider connections (services.broker.provider_link) ------------------------------------

    def open_provider_stream(self) -> ProviderStream:
        """A new provider stream; the broker mints its connection id."""
        return self._link.open_stream()

    def provider_stream_lost(self, stream: ProviderStream) -> None:
        """The provider's stream ended: its registration is retired, its invocations settle ``lost``."""
        self._link.stream_lost(stream)

    def handle_frame(self, stream: ProviderStream, request: broker_pb2.ConnectRequest) -> None:
        """Apply one provider frame (:meth:`ProviderLink.handle_frame`: a refused one is answered ``FrameRejected``)."""
        self._link.handle_frame(stream, request)

    # --- the Interaction service's side (services.broker.forms) ----------------------------------

    def interaction_settled(self, interaction: interaction_pb2.Interaction) -> None:
        """A form stopped being pending (HostLink ``settled``): :meth:`Forms.form_settled` delivers it."""
        self._forms.form_settled(interaction)

    def host_stale(self) -> None:
        """The HostLink resume was refused as stale: fail every form-bound invocation closed."""
        self._forms.host_stale()

    # --- the caller's side ----------------------------------------------------------------------

    def call_tool(
        self,
        request: broker_pb2.CallToolRequest,
        owner: str = "",
        made_for: interaction_pb2.Person | None = None,
        may_act: Callable[[Invocation], bool] = lambda _invocation: True,
    ) -> Invocation:
        """Start one invocation for principal ``owner`` and return it (follow it with :meth:`follow`).

        ``made_for``: the person the call is made for (:func:`made_for` of the caller's principal, never a
        message field); its forms carry it and reach only that person and the approvers a policy names.

        A malformed request (ids empty or over 256 code points, arguments not a JSON object, a live duplicate
        tool-use id in the session among the calls ``may_act`` accepts, a ``call_id`` reused for a different
        request) or an unknown Tool yields an invocation whose only event is ``failure`` (FAILURE_CODE_INVALID_REQUEST
        / UNKNOWN_TOOL / RESOURCE_EXHAUSTED / HOST_UNAVAILABLE when shutting down). A ``call_id``
        that names a live or retained invocation of ``owner`` in the session that ``may_act`` accepts
        (:func:`services.broker.access.may_act_on`) returns that one (idempotent start). Otherwise events
        start with ``accepted`` and end with exactly one of result, failure, lost, stopped.
        """
        invocation = Invocation(
            invocation_id=mint_id("inv"),
            session_id=request.session_id,
            turn_id=request.turn_id,
            tool_use_id=request.tool_use_id,
            qualified_name=request.tool_name,
            arguments_json=request.arguments_json or "{}",
            registration=None,
            log=CallLog(self._queue_size),
            owner=owner,
            made_for=made_for,
            call_id=request.call_id,
        )
        self._callers.prune()
        existing = self._callers.by_call_id(owner, request.session_id, request.call_id)
        if existing is not None and may_act(existing):
            return self._call_again(existing, invocation)
        self._counters["invocations_started"] += 1
        try:
            registration = self._admit(request, invocation.arguments_json, may_act)
        except InvalidRequest as error:
            event = failure_event(broker_pb2.FAILURE_CODE_INVALID_REQUEST, error.message)
            self._settlement.settle(invocation, InvocationState.FAILED, event)
            return invocation
        except CallRefused as refused:
            self._settlement.settle(invocation, InvocationState.FAILED, failure_event(refused.code, refused.message))
            return invocation
        self._invoke(invocation, registration)
        return invocation

    def _call_again(self, existing: Invocation, invocation: Invocation) -> Invocation:
        """A ``call_id`` already names ``existing``: the same request returns it, a different one fails."""
        if (
            existing.qualified_name != invocation.qualified_name
            or existing.arguments_json != invocation.arguments_json
            or existing.turn_id != invocation.turn_id
        ):
            event = failure_event(
                broker_pb2.FAILURE_CODE_INVALID_REQUEST, "call_id was already used for a different request"
            )
            self._settlement.settle(invocation, InvocationState.FAILED, event)
            return invocation
        self._counters["calls_reattached_by_call_id"] += 1
        return existing

    def _admit(
        self, request: broker_pb2.CallToolRequest, arguments_json: str, may_act: Callable[[Invocation], bool]
    ) -> Registration:
        """The registration a new call goes to. Raises InvalidRequest or CallRefused.

        A live tool-use id in the session counts only among the calls the caller may act on: another person's
        call with the same ids neither blocks this one nor is revealed by a refusal.
        """
        arguments, problem = check_call_request(request, arguments_json)
        if problem is not None:
            raise InvalidRequest(problem)
        for other in self._live.all():
            if other.session_id == request.session_id and other.tool_use_id == request.tool_use_id and may_act(other):
                raise InvalidRequest("a live invocation already has this tool_use_id in the session")
        if self._shutting_down:
            raise CallRefused(broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is shutting down")
        if self._draining:
            raise CallRefused(
                broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is draining for a restart: retry shortly"
            )
        return self._registry.route(request, arguments)

    def _invoke(self, invocation: Invocation, registration: Registration) -> None:
        """The invocation is live: the caller hears ``accepted``, the timer runs, the provider gets ``invoke``."""
        self._live.bind(invocation, registration)
        self._callers.remember_call_id(invocation)
        invocation.emit(
            broker_pb2.CallToolResponse(
                accepted=broker_pb2.CallAccepted(
                    invocation_id=invocation.invocation_id,
                    provider_id=registration.provider_id,
                    host_id=self._host_id,
                    host_address=self._host_address,
                )
            )
        )
        self._link.invoke(invocation, registration)

    async def stop(
        self,
        session_id: str = "",
        turn_id: str = "",
        *,
        all_sessions: bool = False,
        invocation_id: str = "",
        may_act: Callable[[Invocation], bool] = lambda _invocation: True,
    ) -> int:
        """Stop the live invocations of a turn, a session, or (``all_sessions``) the Host, or the one live
        invocation ``invocation_id``, each only when ``may_act`` accepts it (:func:`services.broker.access.may_act_on`
        of the caller: one it may not act on counts as absent; none stopped when this Host runs no such call: in a
        pool only its owner does). A draining Host stops its calls the same way.

        Each one ends ``stopped``; its pending form closes ``stopped`` (awaited, bounded) and the
        provider gets ``cancel``; no interaction result is delivered to it afterwards, so no retry
        can follow (RFC criterion 7). Returns how many invocations were stopped.

        Raises:
            InvalidRequest: ``all_sessions`` together with ids, ``invocation_id`` together with a scope,
                or none of them (INVALID_ARGUMENT).
        """
        if invocation_id and (session_id or turn_id or all_sessions):
            raise InvalidRequest("a stop of one invocation takes no session_id, turn_id or all")
        if all_sessions and (session_id or turn_id):
            raise InvalidRequest("a global stop takes no session_id or turn_id")
        if not all_sessions and not session_id and not invocation_id:
            raise InvalidRequest("session_id is required unless all or invocation_id is set")
        named = self._live.named(session_id, turn_id, all_sessions=all_sessions, invocation_id=invocation_id)
        targets = [invocation for invocation in named if may_act(invocation)]
        work: set[asyncio.Task[Any]] = set()
        for invocation in targets:
            self.stop_invocation(invocation, "stopped")
            work |= invocation.tasks
        await self._wait(work, 10.0)
        return len(targets)

    def stop_invocation(self, invocation: Invocation, reason: str) -> None:
        """Stop one invocation now (also used when no caller reattached within the grace)."""
        self._settlement.stop(invocation, reason)

    def watch(
        self, invocation_id: str, token: str, owner: str, may_act: Callable[[Invocation], bool] = lambda _i: True
    ) -> tuple[Invocation, int]:
        """The live or retained invocation ``invocation_id`` of ``owner`` and the sequence its events
        are replayed after (``token`` = the resume token of the last event seen; empty = all).

        Raises:
            InvalidRequest: a malformed resume token (INVALID_ARGUMENT).
            CallNotFound: no such invocation, it settled longer ago than the retention, another principal started
                it or ``may_act`` refuses it (:func:`services.broker.access.may_act_on`): the same NOT_FOUND.
        """
        after = parse_resume_token(token)
        if after is None:
            raise InvalidRequest("resume_token is malformed")
        self._callers.prune()
        invocation = self._live.get(invocation_id) or self._callers.retained(invocation_id)
        if invocation is None or invocation.owner != owner or not may_act(invocation):
            raise CallNotFound(f"no live or retained invocation {invocation_id[:MAX_ID_CHARS]!r}")
        if after > invocation.log.last_sequence:
            raise InvalidRequest("resume_token is ahead of the invocation's events")
        return invocation, after

    def follow(
        self, invocation: Invocation, after: int = 0, *, status_first: bool = False
    ) -> AsyncGenerator[broker_pb2.CallToolResponse, None]:
        """One caller stream of ``invocation``: its events after sequence ``after``, then live ones,
        with ``status`` keepalives (:meth:`CallerAttachments.follow`: the last stream ending before the
        terminal event starts the reattach grace; docs/clients.md)."""
        return self._callers.follow(invocation, after, status_first=status_first)

    def _execution_timed_out(self, invocation: Invocation, message: str) -> None:
        self._settlement.fail(invocation, broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT, message)

    @staticmethod
    async def _wait(tasks: set[asyncio.Task[Any]], timeout: float) -> None:
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*tasks, return_exceptions=True)
