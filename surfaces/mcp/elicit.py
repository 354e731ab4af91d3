"""The downstream MCP client as one more surface of a call's forms (docs/mcp-front-door.md "Answering in the
client").

When the client declares form elicitation, the Host-owned form (the broker's Interaction) is also asked of it:

- **2026-07-28**: the call runs detached from the HTTP request (:class:`DetachedCall`, kept in :class:`Calls`);
  the request returns ``input_required`` with one ``elicitation/create`` per pending form (keyed by the
  Interaction id) and Maka's own ``requestState`` (:class:`StateSeal`: HMAC-SHA256 over the call id, the
  Interaction ids, a digest of the Tool name and arguments, and an expiry). The retry's ``inputResponses`` answer
  the Interactions like any surface's answer; the retry then waits for the next round or the result.
- **2025-11-25**: :func:`ask_legacy` sends ``elicitation/create`` on the request's session while the form waits
  on the other surfaces; whichever answers first wins, the other is cancelled or its late answer ignored. A reply
  that does not fit the form is asked again (:data:`LEGACY_ASKS` in all), as a 2026-07-28 client is.

The door reads and answers the forms acting for the request's principal (:func:`acting_view`: its name, and a
verified person's groups and issuer), so history names the person (or machine caller) ``via`` the door's surface token.

An answer that arrives after the form settled (another surface was first) changes nothing: the Interaction
service refuses it (``ALREADY_SETTLED``/``CLOSED``) and the client gets the settled outcome. The upstream server's
``requestState`` never reaches the client: the provider keeps it and this module never sees it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from maka_client import Accepted, AwaitingInteraction, InteractionSettled, MakaError
from services.core.auth import Principal
from services.core.form import FormError
from services.core.form.mcp_json import answer_from_elicit_result, form_to_requested_schema
from surfaces.common.interactions import Interactions
from surfaces.mcp.calls import error_result
from surfaces.mcp.drain import stopped_result
from surfaces.mcp.refusals import asked_again, refusal

log = logging.getLogger("maka.mcp.elicit")

INVALID_REQUEST_STATE = "invalid_request_state"
"""``data.reason`` of the ``-32602`` error for a ``requestState`` this endpoint cannot use (the field's term)."""
SETTLED_REASONS = frozenset({"ALREADY_SETTLED", "CLOSED", "NOT_FOUND"})
"""Interaction errors that mean "another surface (or the call's end) settled the form first"."""
LEGACY_ASKS = 3
"""How many times a 2025-11-25 client is asked one form (``elicitation/create``) while its replies do not fit the
form; after that the form stays for the other surfaces."""
DID_NOT_FIT = frozenset({"INVALID_ANSWER", "LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED"})
"""Interaction refusals that mean "the answer does not fit the form" (invalid, or larger than the tier's cap):
the form stays pending and is asked again."""


def acting_view(interactions: Interactions, principal: Principal | None) -> Interactions:
    """``interactions`` acting for ``principal`` (the request's, :func:`surfaces.mcp.auth.request_principal`): its
    name and, for a verified person, its groups and issuer (``x-maka-acts-for``, ``-groups``, ``-issuer``), so the
    forms of a call made for that person are visible and its answers name it (an OpenID Connect person's with the
    issuer; a static token's principal as a token's); ``interactions`` itself on an open endpoint (no principal)."""
    if principal is None:
        return interactions
    return interactions.for_person(principal.name, sorted(principal.groups), principal.issuer)


def did_not_fit(error: MakaError) -> bool:
    """Whether the Interaction service refused an answer because it does not fit the form (:data:`DID_NOT_FIT`)."""
    return str(error.reason) in DID_NOT_FIT or error.code == "RESOURCE_EXHAUSTED"


def invalid_state(why: str) -> MCPError:
    """JSON-RPC ``-32602`` with ``data.reason`` ``invalid_request_state``."""
    return MCPError(INVALID_PARAMS, f"Invalid requestState: {why}", {"reason": INVALID_REQUEST_STATE})


def call_digest(name: str, arguments: Mapping[str, Any]) -> str:
    """A digest of the Tool name and arguments a ``requestState`` is bound to (the retry must repeat them)."""
    canonical = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def form_host(interactions: Interactions, owner: str) -> str | None:
    """The Host to read and answer a call's forms on: ``owner``, the Host that accepted the call (through a pool
    of Hosts it may be another than this endpoint's own, e.g. while that one drains), when this endpoint names
    its Host on a tier serving several (``MAKA_HOST_ID``); None (the tier's only Host) otherwise."""
    return owner if owner and interactions.client.host_id else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class State:
    """What a verified ``requestState`` names."""

    call_id: str
    interaction_ids: tuple[str, ...]
    digest: str
    session_id: str = ""
    """The Maka session of the client it was issued to (:func:`surfaces.mcp.server.client_session`): another
    client's retry with it is refused."""
    principal: str = ""
    """The identity of the principal it was issued to (:func:`surfaces.mcp.auth.principal_identity`): another
    principal's retry with it is refused, even in the same Maka session (two tokens scoped to one session)."""


class StateSeal:
    """Maka's ``requestState``: ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))``.

    The key is ``MAKA_MCP_STATE_KEY`` when set (so several front-door replicas accept each other's states), else
    random per process (a retry reaching another process, or one after a restart, gets ``invalid_request_state``).
    """

    def __init__(self, key: bytes | None, ttl_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self._key = key or secrets.token_bytes(32)
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def seal(self, state: State) -> str:
        body = {
            "c": state.call_id,
            "i": list(state.interaction_ids),
            "d": state.digest,
            "s": state.session_id,
            "p": state.principal,
            "e": int(self._clock() + self.ttl_seconds),
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def open(self, token: str) -> State:
        """The :class:`State` of ``token``; raises :func:`invalid_state` when it was altered or expired."""
        try:
            raw_payload, raw_mac = token.split(".")
            payload, mac = _unb64(raw_payload), _unb64(raw_mac)
        except ValueError:
            raise invalid_state("it is not one this endpoint issued") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise invalid_state("it is not one this endpoint issued (altered, or issued by another process)")
        try:
            body = json.loads(payload)
            expiry, state = body["e"], State(str(body["c"]), tuple(str(i) for i in body["i"]), str(body["d"]))
            session_id = str(body.get("s", ""))  # a state of an older endpoint names none: no client takes it
            principal = str(body.get("p", ""))  # likewise: no principal takes one naming none
        except (ValueError, KeyError, TypeError):
            raise invalid_state("it is not one this endpoint issued") from None
        if expiry < self._clock():
            raise invalid_state("it expired")
        return State(state.call_id, state.interaction_ids, state.digest, session_id, principal)


@dataclass
class DetachedCall:
    """A 2026-07-28 call that outlives the HTTP requests (rounds) that drive it."""

    call_id: str
    digest: str
    session_id: str
    """The Maka session the call runs in (its client's)."""
    principal: str = ""
    """The identity of the principal that started it (:func:`surfaces.mcp.auth.principal_identity`)."""
    task: asyncio.Task[CallToolResult] | None = None
    pending: dict[str, AwaitingInteraction] = field(default_factory=dict)
    """The call's forms that wait for an answer, by Interaction id."""
    answered_here: set[str] = field(default_factory=set)
    """Forms this client already answered (not asked again)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Why this client's last answer to a form did not fit it (:func:`refusal`), by Interaction id: its re-ask says."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    attached: int = 0
    notify: Callable[[str], Awaitable[None]] | None = None
    expiry: asyncio.TimerHandle | None = None
    issued: bool = False
    """Whether the client holds a ``requestState`` of this call (so it can come back to it)."""
    interactions: Interactions | None = None
    """The Interaction service as the client's principal (:func:`acting_view`); None: the endpoint's own."""
    owner: str = ""
    """The Host that accepted the call (its forms are that Host's)."""
    delivered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a request returned the call's outcome to its client (what a draining endpoint waits for)."""

    def observe(self, event: object) -> None:
        """Track the broker's form events (run_call's observer)."""
        if isinstance(event, Accepted):
            self.owner = event.host_id
            return
        if isinstance(event, AwaitingInteraction):
            self.pending[event.interaction_id] = event
        elif isinstance(event, InteractionSettled):
            self.pending.pop(event.interaction_id, None)
        else:
            return
        self.changed.set()

    def to_ask(self) -> list[AwaitingInteraction]:
        return [event for key, event in self.pending.items() if key not in self.answered_here]


class Calls:
    """The running detached calls of this process, by call id: the endpoint owns them (:meth:`close` stops
    every one).

    A request attached to a call whose HTTP stream closes (the SDK cancels it) does not stop the call at once
    when the client holds a ``requestState`` of it: the call waits ``grace_seconds`` for the client's retry
    (the same ``tools/call`` with that state) and is stopped when none comes (nothing stays pending).
    """

    def __init__(
        self,
        seal: StateSeal,
        interactions: Interactions,
        grace_seconds: float = 0.0,
        stopping: asyncio.Event | None = None,
    ) -> None:
        self.seal = seal
        self.stopping = stopping
        """Set when the endpoint stops (:class:`surfaces.mcp.drain.Flights`): a call cancelled then is ``LOST``."""
        self.interactions = interactions
        self.grace_seconds = grace_seconds
        self._calls: dict[str, DetachedCall] = {}

    def running(self) -> int:
        """How many detached calls have not ended."""
        return sum(1 for call in self._calls.values() if call.task is not None and not call.task.done())

    def start(
        self,
        digest: str,
        session_id: str,
        run: Callable[[DetachedCall], Awaitable[CallToolResult]],
        interactions: Interactions | None = None,
        principal: str = "",
    ) -> DetachedCall:
        """Run ``run`` detached for ``principal`` (its identity); its forms are read (and answered) through
        ``interactions`` (the client's principal's view, :func:`acting_view`), else the endpoint's own."""
        call = DetachedCall(
            call_id=uuid.uuid4().hex,
            digest=digest,
            session_id=session_id,
            principal=principal,
            interactions=interactions,
        )
        self._calls[call.call_id] = call

        async def body() -> CallToolResult:
            try:
                return await run(call)
            finally:
                self._settled(call)

        call.task = asyncio.create_task(body(), name=f"maka-mcp-call-{call.call_id[:8]}")
        return call

    def _settled(self, call: DetachedCall) -> None:
        """Keep a finished call's outcome for the state's lifetime: a retry arriving after another surface
        answered (and the call ended) gets that outcome."""
        if call.expiry is not None:
            call.expiry.cancel()
        call.expiry = asyncio.get_running_loop().call_later(self.seal.ttl_seconds, self._calls.pop, call.call_id, None)
        call.changed.set()

    def resume(
        self, request_state: str, digest: str, session_id: str, principal: str = ""
    ) -> tuple[DetachedCall, State]:
        """The call a retry's ``requestState`` names; raises :func:`invalid_state` when there is none, or when
        the retry comes from another client (Maka session, or principal: its identity) than the one the state
        was issued to."""
        state = self.seal.open(request_state)
        if (state.session_id, state.principal) != (session_id, principal):
            raise invalid_state("it was issued to another client")
        if state.digest != digest:
            raise invalid_state("the retry names another Tool or other arguments than the call it continues")
        call = self._calls.get(state.call_id)
        if call is None:
            raise invalid_state("the call it continues is no longer running on this endpoint")
        return call, state

    def _of(self, call: DetachedCall) -> Interactions:
        return call.interactions or self.interactions

    async def answer(
        self,
        call: DetachedCall,
        state: State,
        responses: Mapping[str, Any],
        interactions: Interactions | None = None,
    ) -> None:
        """Answer each named Interaction with the client's ``ElicitResult`` through ``interactions`` (the retry's
        principal's view, else the call's); a form another surface settled first is left as it is. An invalid
        answer, or one larger than the tier's cap, leaves the form pending (asked again)."""
        answering = interactions or self._of(call)
        for interaction_id in state.interaction_ids:
            response = responses.get(interaction_id)
            if response is None:
                continue
            raw = response.model_dump(by_alias=True, exclude_none=True) if isinstance(response, ElicitResult) else None
            if raw is None:
                continue
            raw.pop("_meta", None)
            raw.pop("resultType", None)
            try:
                answer = answer_from_elicit_result(raw)
                host = form_host(answering, call.owner)
                await answering.answer(interaction_id, answer, session_id=call.session_id, host_id=host)
            except FormError as error:
                log.info("mcp.elicit_answer_invalid", extra={"interaction": interaction_id})
                call.refused[interaction_id] = refusal(error)
                continue
            except MakaError as error:
                if str(error.reason) in SETTLED_REASONS:
                    call.answered_here.add(interaction_id)
                    continue
                if did_not_fit(error):
                    log.info("mcp.elicit_answer_invalid", extra={"interaction": interaction_id, "code": error.code})
                    call.refused[interaction_id] = refusal(error)
                    continue
                raise MCPError(INVALID_PARAMS, f"the answer was not taken: {error.code}") from None
            call.answered_here.add(interaction_id)
        call.changed.set()

    async def wait(self, call: DetachedCall) -> CallToolResult | InputRequiredResult:
        """Wait until the call ends (its result) or a form waits that this client was not asked yet
        (``input_required``). Cancelling this wait (the client's stream closed, or it cancelled) stops the call,
        after the reattach grace when the client holds a ``requestState`` to come back with."""
        assert call.task is not None
        if call.expiry is not None and not call.task.done():
            call.expiry.cancel()
            call.expiry = None
        call.attached += 1
        cancelled = False
        try:
            while True:
                if call.task.done():
                    call.delivered.set()
                    if call.task.cancelled():
                        if self.stopping is not None and self.stopping.is_set():
                            return stopped_result()
                        return error_result("STOPPED: no retry came in time; the call was stopped")
                    return call.task.result()
                asking = call.to_ask()
                if asking:
                    return await self._input_required(call, asking)
                call.changed.clear()
                finished: asyncio.Future[Any] = asyncio.ensure_future(asyncio.shield(call.task))
                changed: asyncio.Future[Any] = asyncio.ensure_future(call.changed.wait())
                try:
                    await asyncio.wait({finished, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    finished.cancel()
                    changed.cancel()
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            call.attached -= 1
            if cancelled and call.attached == 0 and not call.task.done():
                self._detached(call)

    async def _input_required(
        self, call: DetachedCall, asking: list[AwaitingInteraction]
    ) -> CallToolResult | InputRequiredResult:
        requests: dict[str, Any] = {}
        for event in asking:
            try:
                host = form_host(self._of(call), call.owner)
                view = await self._of(call).get(event.interaction_id, session_id=call.session_id, host_id=host)
            except MakaError:
                continue
            if not view.pending:
                continue
            schema = form_to_requested_schema(view.form)
            message = view.form.message
            if event.interaction_id in call.refused:
                message = asked_again(message, call.refused.pop(event.interaction_id))
            requests[event.interaction_id] = ElicitRequest(
                params=ElicitRequestFormParams(message=message, requested_schema=schema)
            )
        if not requests:  # settled meanwhile: wait on
            for event in asking:
                call.pending.pop(event.interaction_id, None)
            return await self.wait(call)
        state = self.seal.seal(State(call.call_id, tuple(requests), call.digest, call.session_id, call.principal))
        call.issued = True
        loop = asyncio.get_running_loop()
        if call.expiry is not None:  # a concurrent retry's round: only the newest state's lifetime counts
            call.expiry.cancel()
        call.expiry = loop.call_later(self.seal.ttl_seconds, self._expire, call)
        log.info("mcp.input_required", extra={"forms": len(requests)})
        return InputRequiredResult(input_requests=requests, request_state=state)

    def _detached(self, call: DetachedCall) -> None:
        """The last request attached to ``call`` went away: stop it, at once when its client cannot come back,
        else when no retry comes within the grace."""
        if not call.issued or self.grace_seconds <= 0:
            log.info("mcp.call_detached_stopped")
            assert call.task is not None
            call.task.cancel()  # run_call stops the turn
            return
        log.info("mcp.call_detached", extra={"grace_seconds": self.grace_seconds})
        if call.expiry is not None:
            call.expiry.cancel()
        call.expiry = asyncio.get_running_loop().call_later(self.grace_seconds, self._expire, call)

    def _expire(self, call: DetachedCall) -> None:
        """No retry came within the state's lifetime (or the reattach grace): stop the call (nothing stays
        pending)."""
        if call.attached == 0 and call.task is not None and not call.task.done():
            log.info("mcp.input_required_expired")
            call.task.cancel()

    async def close(self) -> None:
        """Stop every detached call (the endpoint is stopping)."""
        tasks = [call.task for call in self._calls.values() if call.task is not None and not call.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


class CallCap:
    """How many calls each principal (its identity, :func:`surfaces.mcp.auth.principal_identity`) has running on
    this endpoint, attached or detached, of both protocol eras; a call past ``limit`` starts nothing (so one
    client cannot fill the provider's live-invocation slots that every caller shares)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running: dict[str, int] = {}

    def running(self, identity: str) -> int:
        """How many calls of ``identity`` are running."""
        return self._running.get(identity, 0)

    def refused(self, identity: str) -> CallToolResult | None:
        """The Tool error for a call of ``identity`` past the cap, or None when it may start."""
        running = self.running(identity)
        if running < self.limit:
            return None
        log.info("mcp.calls_per_client_exhausted", extra={"running": running, "limit": self.limit})
        return error_result(
            f"RESOURCE_EXHAUSTED: {running} calls of this client are running (at most {self.limit}); "
            "wait for one to end, or cancel one, and call again"
        )

    def take(self, identity: str) -> Callable[[], None]:
        """Count one call of ``identity``; the returned function (idempotent) counts it out."""
        self._running[identity] = self.running(identity) + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self.running(identity) - 1
            if left > 0:
                self._running[identity] = left
            else:
                self._running.pop(identity, None)

        return release

    @contextlib.contextmanager
    def held(self, identity: str) -> Iterator[None]:
        """Count one call of ``identity`` while the block runs."""
        release = self.take(identity)
        try:
            yield
        finally:
            release()


def declares_form_elicitation(capabilities: Any) -> bool:
    """Whether client ``capabilities`` declare form elicitation (``elicitation: {}`` means form)."""
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


async def ask_legacy(
    interactions: Interactions,
    session_id: str,
    event: AwaitingInteraction,
    elicit: Callable[[str, dict[str, Any]], Awaitable[ElicitResult]],
    owner: str = "",
) -> None:
    """Ask a 2025-11-25 client form ``event`` with ``elicitation/create`` and answer it with the reply; a form
    settled elsewhere first keeps that answer (the late reply is refused by the Interaction service). A reply that
    does not fit the form (``FormError``, :func:`did_not_fit`: invalid or over the tier's cap) is asked again, its
    message prefixed with the fields and rules it broke (:func:`~surfaces.mcp.refusals.asked_again`), up to
    :data:`LEGACY_ASKS` asks in all; then the form stays for the
    other surfaces.
    ``owner``: the Host that accepted the call (:func:`form_host`)."""
    host = form_host(interactions, owner)
    try:
        view = await interactions.get(event.interaction_id, session_id=session_id, host_id=host)
    except MakaError:
        return
    if not view.pending:
        return
    schema = form_to_requested_schema(view.form)
    message = view.form.message
    for attempt in range(1, LEGACY_ASKS + 1):
        try:
            reply = await elicit(message, schema)
        except Exception as error:  # the client refused or failed the request: the other surfaces still can answer
            log.info("mcp.elicit_failed", extra={"interaction": event.interaction_id, "error": type(error).__name__})
            return
        raw = reply.model_dump(by_alias=True, exclude_none=True)
        raw.pop("_meta", None)
        raw.pop("resultType", None)
        try:
            await interactions.answer(
                event.interaction_id, answer_from_elicit_result(raw), session_id=session_id, host_id=host
            )
            return
        except FormError as error:
            problem = refusal(error)
        except MakaError as error:
            if not did_not_fit(error):
                log.info(
                    "mcp.elicit_answer_not_taken", extra={"interaction": event.interaction_id, "reason": error.reason}
                )
                return
            problem = refusal(error)
        log.info("mcp.elicit_answer_invalid", extra={"interaction": event.interaction_id, "attempt": attempt})
        message = asked_again(view.form.message, problem)
    log.info("mcp.elicit_gave_up", extra={"interaction": event.interaction_id, "attempts": LEGACY_ASKS})
