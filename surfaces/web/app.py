"""The web surface: a Starlette app over the Interaction service (rendering and gestures only).

Routes (JSON shapes in :mod:`surfaces.web.views`; access rules in :mod:`surfaces.web.security`):

- ``GET /`` — the page (``static/index.html`` + the ES modules ``static/js/*.js``, from ``main.js``);
  ``GET /login``, ``POST /login`` (form fields ``token`` and ``next``, the same-origin path to return to),
  ``POST /logout`` when a surface token is configured; the sign-in page (``static/js/login.js``) hands on the
  link target it was opened on (``#/interaction/<id>``) as ``next``, to the token form and to ``/oidc/login``;
  with OpenID Connect, ``GET /oidc/login``, ``/oidc/callback``, ``/oidc/signed-out`` (:mod:`surfaces.web.oidc`),
  and an answer names the signed-in person to the Interaction service (``x-maka-acts-for``).
- ``GET /api/session`` → ``{"csrf": str, "person": str | null, "sessions": [str], "auth_required": bool,
  "undo_seconds": float, "sign_in": {"token", "tokens_file"}, "server_time": ISO}`` (``person``: who signed in with
  OpenID Connect; ``undo_seconds``: how long Dismiss waits, with Undo, before it sends ``cancel``; ``sign_in``:
  which token signs the page in again, :func:`surfaces.web.sign_in.sign_in_hint`).
- ``GET /api/pending`` → ``{"pending": [Interaction view], "server_time": ISO}`` (``ListPending``).
- ``GET /api/status`` → ``{"servers": [server], "calls": [call], "surfaces": int | null, "available": bool,
  "server_time": ISO}``: the MCP servers' status and the recent calls of the visible sessions (the broker's
  ``GetStatus``; :mod:`surfaces.common.server_status` shapes, plus ``formOutcome``, :mod:`surfaces.web.call_outcomes`:
  a call that succeeded after its form was declined or cancelled; status only, never arguments, results or
  values; asked as the signed-in person, whom the broker shows only calls made for them or for no person, never
  another person's), and how many surfaces are attached to the Host (``ListSurfaces``; null when unknown).
- ``GET /api/history?limit=N&page_token=T`` → ``{"history": [entry], "next_page_token": str, "server_time": ISO}``:
  settled forms of the visible sessions, newest first (``ListHistory``; entries as
  :func:`surfaces.common.interactions.history_json`: Tool, provenance, outcome, who answered, when, delivery,
  ``made_for``, the person the call was made for (the page shows it as the cards do); never a value).
  ``limit`` 1..200, default 20.
- ``GET /api/interactions/{id}?session_id=S`` → ``{"interaction": view}`` (``GetInteraction``).
- ``POST /api/interactions/{id}/answer`` with ``{"session_id", "submission_id", "action", "values"}`` →
  200 ``{"interaction": view}`` (``Answer``), or an error body ``{"error": {"reason", "message",
  "violations": [{"path", "reason", "description"}], "close_reason"?}, "interaction"?: view}`` with
  400 (``INVALID_REQUEST``: not strict JSON, not the shape, or a key outside those four), 413
  (``LIMIT_EXCEEDED``), 415, 422 (``INVALID_ANSWER``: the service's field violations), 404 (``NOT_FOUND``),
  409 (``CLOSED`` / ``ALREADY_SETTLED``, with the Interaction as it now stands), 503 (``UNAVAILABLE``),
  502 (any other service failure).
- ``GET /api/sign-ins`` → ``{"sign_ins": [{"server", "state", "authorization_url"}]}`` (broker ``ListSignIns``),
  shown as "Sign in to SERVER" with the full URL, never opened automatically; ``GET /oauth/callback?code&state&iss``
  delivers the redirect with ``CompleteSignIn`` (400 when no pending sign-in has that ``state``; never logged).
- ``GET /api/events`` — server-sent events from one ``Attach`` stream (following a pool, ``MAKA_HOST_IDS``: one per
  Host, merged; each view's ``host`` names its Host and the event id is the pool's composite resume token):
  ``snapshot`` (``{"pending", "host", "server_time"}``; it replaces the forms of ``host``, every form when
  empty), then ``opened`` / ``answered`` / ``closed`` (``{"interaction", "server_time"}``);
  each event id is the service's resume token, so ``Last-Event-ID`` resumes. A lost stream ends with a
  ``failure`` event (``{"reason", "message"}``) and the browser reconnects.

Answers are capped before anything is sent on (``Limits.max_answer_bytes``), never logged or echoed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import grpc
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from maka_client import MakaError, Reattaching
from services.core import json_text
from services.core.auth import acts_for_metadata
from services.core.limits import DEFAULT_LIMITS
from surfaces.common.interactions import (
    AttachEvent,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormOpened,
    FormSnapshot,
    Interactions,
    InteractionView,
    history_json,
)
from surfaces.common.server_status import call_json, fetch_status, server_json
from surfaces.common.sign_in import SignIns
from surfaces.web.call_outcomes import FormOutcomes
from surfaces.web.oidc import CALLBACK_PATH, OidcSignIn, return_to
from surfaces.web.oidc import SESSION_COOKIE as PERSON_COOKIE
from surfaces.web.security import COOKIE_NAME, GuardMiddleware, allowed_hosts, error_json
from surfaces.web.settings import WebSettings, is_loopback
from surfaces.web.sign_in import build_guard, login_response, message_page, sign_in_hint
from surfaces.web.views import AnswerShapeError, answer_from_json, error_body, host_text, interaction_view, now_iso

log = logging.getLogger("maka.web.app")

STATIC_DIR = Path(__file__).parent / "static"
mimetypes.add_type("text/javascript", ".js")  # module scripts need a JavaScript type (nosniff), whatever the OS maps
MAX_ANSWER_BODY_BYTES = DEFAULT_LIMITS.max_answer_bytes + 16 * 1024
"""Cap on one answer request body: the answer-values cap plus room for ids and JSON framing."""
SSE_PING_SECONDS = 15
HISTORY_LIMIT = 200
"""Most entries one ``GET /api/history`` returns."""
SSE_RETRY_MS = 1500
SSE_SHUTDOWN_GRACE_SECONDS = 0.5
"""How long a stopping server lets an event stream end by itself before cutting it."""

_HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 422,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 413,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.PERMISSION_DENIED: 403,
}


class WebSurface:
    """The routes' state: settings, the Interaction-service backend, and the access guard."""

    def __init__(self, settings: WebSettings, backend: Interactions, sign_ins: SignIns | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self.sign_ins = sign_ins
        self.shutting_down = anyio.Event()
        """Set by sse-starlette when the server process stops: event streams then end by themselves, cleanly."""
        secret = settings.shared_secret()
        self.people = OidcSignIn(settings, secret or secrets.token_bytes(32)) if settings.oidc_sign_in else None
        """People signing in with OpenID Connect (:mod:`surfaces.web.oidc`), when configured."""
        self.guard = build_guard(settings, secret, self.people)
        self.sessions: list[str] = list(settings.sessions)
        self.form_outcomes = FormOutcomes()
        """What recent calls' forms came to (``formOutcome`` in ``GET /api/status``: declined, cancelled)."""

    def view(self, ix: InteractionView) -> dict[str, Any]:
        """The page's JSON of ``ix`` (with its Host when this surface follows a pool)."""
        return interaction_view(ix, pooled=self.backend.pooled)

    def backend_for(self, request: Request) -> Interactions:
        """The backend as the person signed in on ``request`` (their name, groups and issuer on every call, so the
        Interaction service shows only their forms and those they approve), or as this page's token."""
        person = self.guard.person(request)
        return (
            self.backend.for_person(person.name, person.groups, person.issuer) if person is not None else self.backend
        )

    def visible(self, session_id: str) -> bool:
        """True when this surface is configured to show ``session_id``."""
        return not self.sessions or session_id in self.sessions

    # --- pages ---------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def login_page(self, request: Request) -> Response:
        if not self.guard.enabled:
            return RedirectResponse("/", status_code=303)
        return login_response(self.settings, token=bool(self.guard.token), oidc=self.people is not None)

    async def login(self, request: Request) -> Response:
        if not self.guard.token:
            return RedirectResponse("/", status_code=303)
        if int(request.headers.get("content-length") or 0) > 4096:
            return error_json(413, "LIMIT_EXCEEDED", "login body too large")
        limited = self.guard.limiter.refusal(request)  # per local user on loopback (surfaces/web/peer.py)
        if limited is not None:
            log.info("web.login_rate_limited")
            return limited
        async with request.form(max_files=0, max_fields=4) as form:
            token, target = form.get("token"), form.get("next")
        if not isinstance(token, str) or not self.guard.check_token(token):
            self.guard.limiter.failed_request(request)
            log.info("web.login_failed")
            return login_response(self.settings, token=True, oidc=self.people is not None, error=True)
        back = return_to(target if isinstance(target, str) else None)
        return self.guard.signed_in(RedirectResponse(back, status_code=303), request)

    async def logout(self, request: Request) -> Response:
        response: Response = RedirectResponse("/login" if self.guard.enabled else "/", status_code=303)
        if self.people is not None and self.guard.person(request) is not None:
            response = await self.people.logout(request)  # RP-initiated at the issuer where it supports it
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
        response.delete_cookie(PERSON_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # --- JSON API --------------------------------------------------------------------------------

    async def session(self, request: Request) -> Response:
        return JSONResponse(
            {
                "csrf": self.guard.csrf_for(request),
                "person": person.name if (person := self.guard.person(request)) is not None else None,
                "sessions": self.sessions,
                "auth_required": self.guard.enabled,
                "undo_seconds": self.settings.web_undo_seconds,
                "sign_in": sign_in_hint(self.settings),
                "server_time": now_iso(),
            }
        )

    async def sign_in_list(self, request: Request) -> Response:
        if self.sign_ins is None:
            return JSONResponse({"sign_ins": []})
        try:
            views = await self.sign_ins.list()
        except MakaError as error:
            return error_json(503, "UNAVAILABLE", f"the broker did not answer ({error.code})")
        return JSONResponse({"sign_ins": [item.to_json() for item in views]})

    async def oauth_callback(self, request: Request) -> Response:
        query = request.query_params
        if self.sign_ins is None:
            return message_page(503, "Sign-in is not available", "This web surface is not connected to a broker.")
        try:
            server = await self.sign_ins.complete(
                query.get("code", ""), query.get("state", ""), query.get("iss", ""), query.get("error", "")
            )
        except MakaError as error:
            log.info("web.sign_in_refused", extra={"code": error.code})
            if error.grpc_status_code == grpc.StatusCode.NOT_FOUND:
                return message_page(400, "This sign-in is not pending", "Start the sign-in again from the Maka page.")
            return message_page(503, "Sign-in could not be completed", "The broker did not answer; try again.")
        log.info("web.sign_in_completed", extra={"server": server})
        if query.get("error"):
            refused = "The authorization server refused the sign-in."
            return message_page(200, f"Sign-in to {server} was refused", refused)
        return message_page(200, f"Signed in to {server}", "You can close this tab and return to Maka.")

    async def pending(self, request: Request) -> Response:
        try:
            items = await self.backend_for(request).pending(self.sessions)
        except MakaError as error:
            return self._backend_error(error)
        views = [self.view(ix) for ix in items if self.visible(ix.session_id)]
        return JSONResponse({"pending": views, "server_time": now_iso()})

    async def status(self, request: Request) -> Response:
        """Server status and the recent calls of the visible sessions (status only, never values): for a signed-in
        person only the calls made for them or for no person (the broker decides, as the person)."""
        if not self.settings.broker_target:
            return JSONResponse({"servers": [], "calls": [], "available": False, "server_time": now_iso()})
        person = self.guard.person(request)
        try:
            status = await fetch_status(
                self.settings.broker_target,
                token=self.settings.surface_token.get_secret_value() or None,
                metadata=acts_for_metadata(person.name, person.groups) if person is not None else (),
            )
        except MakaError as error:
            return error_json(503, "UNAVAILABLE", f"the broker did not answer ({error.code})")
        calls = [call_json(call) for call in status.recent_calls if self.visible(call.session_id)]
        await self.form_outcomes.add_to(calls, self.backend_for(request))
        servers = [server_json(server) for server in status.servers]
        surfaces: int | None = None
        with contextlib.suppress(MakaError):  # the count is extra: the status shows without it
            attached, omitted = await self.backend.list_surfaces()
            surfaces = len(attached) + omitted
        return JSONResponse(
            {"servers": servers, "calls": calls, "surfaces": surfaces, "available": True, "server_time": now_iso()}
        )

    async def history(self, request: Request) -> Response:
        """Settled forms of the visible sessions, newest first (never a value)."""
        try:
            limit = min(max(int(request.query_params.get("limit", "20")), 1), HISTORY_LIMIT)
        except ValueError:
            return error_json(400, "INVALID_REQUEST", "limit must be a number")
        try:
            page = await self.backend_for(request).history(
                self.sessions, page_size=limit, page_token=request.query_params.get("page_token", "")
            )
        except MakaError as error:
            return self._backend_error(error)
        entries = [history_json(entry) for entry in page.entries if self.visible(entry.session_id)]
        return JSONResponse({"history": entries, "next_page_token": page.next_page_token, "server_time": now_iso()})

    async def get_interaction(self, request: Request) -> Response:
        interaction_id = request.path_params["interaction_id"]
        session_id = request.query_params.get("session_id", "")
        if not self.visible(session_id):
            return error_json(404, "NOT_FOUND", "no such interaction")
        try:
            ix = await self.backend_for(request).get(interaction_id, session_id=session_id)
        except MakaError as error:
            return self._backend_error(error)
        return JSONResponse({"interaction": self.view(ix), "server_time": now_iso()})

    async def answer(self, request: Request) -> Response:
        interaction_id: str = request.path_params["interaction_id"]
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return error_json(415, "INVALID_REQUEST", "send the answer as application/json")
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_ANSWER_BODY_BYTES):
            return error_json(413, "LIMIT_EXCEEDED", f"answer body larger than {MAX_ANSWER_BODY_BYTES} bytes")
        raw = bytearray()
        async for chunk in request.stream():
            raw.extend(chunk)
            if len(raw) > MAX_ANSWER_BODY_BYTES:
                return error_json(413, "LIMIT_EXCEEDED", f"answer body larger than {MAX_ANSWER_BODY_BYTES} bytes")
        try:
            body: object = json_text.loads(raw)
        except json_text.JsonTextError as error:
            return error_json(400, "INVALID_REQUEST", f"the answer body is {error}")
        session_id = body.get("session_id") if isinstance(body, dict) else None
        if not isinstance(session_id, str) or not session_id:
            return error_json(400, "INVALID_REQUEST", "session_id is required")
        if not self.visible(session_id):
            return error_json(404, "NOT_FOUND", "no such interaction")
        try:
            backend = self.backend_for(request)
            current = await backend.get(interaction_id, session_id=session_id)
            answer, submission_id = answer_from_json(body, current)
            settled = await backend.answer(
                interaction_id,
                answer,
                submission_id=submission_id or None,
                session_id=session_id,
                host_id=current.host_id if self.backend.pooled else None,
            )
        except AnswerShapeError as error:
            violations = [
                {"path": v.path, "reason": v.reason.value, "description": v.description} for v in error.violations
            ]
            return JSONResponse(
                {"error": {"reason": "INVALID_REQUEST", "message": "malformed answer", "violations": violations}},
                status_code=400,
            )
        except MakaError as error:
            return await self._answer_error(error, self.backend_for(request), interaction_id, session_id)
        log.info(
            "web.answered",
            extra={"interaction_id": interaction_id, "action": body.get("action") if isinstance(body, dict) else ""},
        )
        return JSONResponse({"interaction": self.view(settled), "server_time": now_iso()})

    async def _answer_error(
        self, error: MakaError, backend: Interactions, interaction_id: str, session_id: str
    ) -> Response:
        response: dict[str, Any] = {"error": error_body(error)}
        if error.grpc_status_code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED):
            with contextlib.suppress(MakaError):
                response["interaction"] = self.view(await backend.get(interaction_id, session_id=session_id))
        log.info("web.answer_rejected", extra={"interaction_id": interaction_id, "reason": error.reason})
        return JSONResponse(response, status_code=_HTTP_STATUS.get(error.grpc_status_code, 502))

    def _backend_error(self, error: MakaError) -> Response:
        return JSONResponse({"error": error_body(error)}, status_code=_HTTP_STATUS.get(error.grpc_status_code, 502))

    async def events(self, request: Request) -> Response:
        resume_token = request.headers.get("last-event-id", "")
        return EventSourceResponse(
            self._event_stream(self.backend_for(request), resume_token),
            ping=SSE_PING_SECONDS,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            shutdown_event=self.shutting_down,
            shutdown_grace_period=SSE_SHUTDOWN_GRACE_SECONDS,
        )

    async def _until_shutdown(self, events: AsyncGenerator[AttachEvent, None]) -> AsyncIterator[AttachEvent]:
        """``events`` until the server stops: the stream then ends by itself, so the response completes and the
        page's EventSource reconnects (to another replica), instead of the stream being cut at the grace's end.
        However this generator ends (the page went away: it is cancelled), the Attach stream is closed."""
        stopping = asyncio.ensure_future(self.shutting_down.wait())
        following: asyncio.Future[AttachEvent] | None = None
        try:
            while True:
                following = asyncio.ensure_future(anext(events))
                await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    return
                try:
                    event = following.result()
                except StopAsyncIteration:
                    return
                following = None
                yield event
        finally:
            stopping.cancel()
            if following is not None and not following.done():
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await following
            await events.aclose()

    async def _event_stream(self, backend: Interactions, resume_token: str) -> AsyncIterator[ServerSentEvent]:
        try:
            async for event in self._until_shutdown(backend.attach(self.sessions, resume_token)):
                if isinstance(event, FormSnapshot):
                    views = [self.view(ix) for ix in event.pending if self.visible(ix.session_id)]
                    host = host_text(event.host_id) if self.backend.pooled else ""
                    yield ServerSentEvent(
                        json.dumps({"pending": views, "host": host, "server_time": now_iso()}),
                        event="snapshot",
                        id=event.resume_token or None,
                        retry=SSE_RETRY_MS,
                    )
                elif isinstance(event, FormOpened | FormAnswered | FormClosed | FormDeliveryRecorded):
                    if not self.visible(event.interaction.session_id):
                        continue
                    name = (
                        "opened"
                        if isinstance(event, FormOpened)
                        else "answered"
                        if isinstance(event, FormAnswered)
                        else "delivery"
                        if isinstance(event, FormDeliveryRecorded)
                        else "closed"
                    )
                    yield ServerSentEvent(
                        json.dumps({"interaction": self.view(event.interaction), "server_time": now_iso()}),
                        event=name,
                        id=event.resume_token or None,
                    )
                elif isinstance(event, Reattaching):
                    yield ServerSentEvent(
                        json.dumps({"retry_in": event.delay, "attempt": event.attempt}), event="disconnected"
                    )
        except MakaError as error:
            log.info("web.attach_failed", extra={"code": error.code, "reason": error.reason})
            yield ServerSentEvent(
                json.dumps({"reason": error.reason, "message": error.message}),
                event="failure",
                retry=SSE_RETRY_MS,
            )
        except Exception:
            # Never let one undecodable frame kill the page silently: report it; the browser reconnects.
            log.exception("web.attach_crashed")
            yield ServerSentEvent(
                json.dumps({"reason": "INTERNAL", "message": "the surface could not read the Host's projection"}),
                event="failure",
                retry=SSE_RETRY_MS,
            )


def create_app(settings: WebSettings, backend: Interactions, sign_ins: SignIns | None = None) -> Starlette:
    """The Starlette app of the web surface over ``backend``.

    When ``web_listen`` is any loopback address, only loopback ``Host`` headers (and the bound address and the
    public origin's host) are served (a DNS rebinding defence); otherwise any host name is accepted and the
    surface token is required (``WebSettings.listen_host_port``).
    """
    surface = WebSurface(settings, backend, sign_ins)
    host, _ = settings.listen_host_port()
    hosts = allowed_hosts(host, settings.web_public_origin, loopback=is_loopback(host))
    routes = [
        Route("/", surface.index, methods=["GET"]),
        Route("/login", surface.login_page, methods=["GET"]),
        Route("/login", surface.login, methods=["POST"]),
        Route("/logout", surface.logout, methods=["POST"]),
        Route("/api/session", surface.session, methods=["GET"]),
        Route("/api/pending", surface.pending, methods=["GET"]),
        Route("/api/status", surface.status, methods=["GET"]),
        Route("/api/history", surface.history, methods=["GET"]),
        Route("/api/events", surface.events, methods=["GET"]),
        Route("/api/sign-ins", surface.sign_in_list, methods=["GET"]),
        Route("/oauth/callback", surface.oauth_callback, methods=["GET"]),
        Route("/api/interactions/{interaction_id}", surface.get_interaction, methods=["GET"]),
        Route("/api/interactions/{interaction_id}/answer", surface.answer, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    if surface.people is not None:
        routes[-1:-1] = [
            Route("/oidc/login", surface.people.login, methods=["GET"]),
            Route(CALLBACK_PATH, surface.people.callback, methods=["GET"]),
            Route("/oidc/signed-out", surface.people.signed_out, methods=["GET"]),
        ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
        Middleware(GuardMiddleware, guard=surface.guard),
    ]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.surface = surface
    return app
