"""The web surface's HTTP API against the real Interaction service (real Redis, real gRPC, real uvicorn)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from surfaces.web.app import MAX_ANSWER_BODY_BYTES, STATIC_DIR
from surfaces.web.security import COOKIE_NAME, CSRF_HEADER
from tests.surfaces.web.stack import WebStack, every_kind_form, running_stack, text_form


@pytest.fixture
async def stack(redis_url: str) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


@dataclass
class Web:
    client: httpx.AsyncClient
    csrf: str
    base: str


@pytest.fixture
async def web(stack: WebStack) -> AsyncIterator[Web]:
    app, running = await stack.web(sessions=["s1"])
    async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
        csrf = (await client.get("/api/session")).json()["csrf"]
        yield Web(client=client, csrf=csrf, base=running.url)
    await running.stop()
    await app.close()


def post_headers(web: Web) -> dict[str, str]:
    return {CSRF_HEADER: web.csrf, "Origin": web.base, "Content-Type": "application/json"}


async def get_interaction(stack: WebStack, interaction_id: str) -> interaction_pb2.Interaction:
    stub = interaction_service_pb2_grpc.InteractionServiceStub(stack.channel)
    response = await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id))
    return response.interaction


async def test_page_is_served_with_a_strict_csp_and_no_inline_script(web: Web) -> None:
    response = await web.client.get("/")
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", response.text, re.DOTALL)
    assert scripts, "the page loads its script"
    for attributes, body in scripts:
        assert 'src="/static/' in attributes
        assert body.strip() == ""
    assert not re.search(r"<[^>]+\son[a-z]+=", response.text), "no inline event handlers"
    # The page's script is ES modules: every module it imports (static and relative only) is served as
    # JavaScript with the same CSP, and none of them parses HTML.
    entry = re.search(r'<script type="module" src="(/static/[^"]+\.js)"></script>', response.text)
    assert entry, "the page loads its script as an ES module"
    # login.html (served only with sign-in on) loads its own entry, login.js, under the same rules.
    sign_in_entries = re.findall(
        r'<script type="module" src="(/static/[^"]+\.js)"></script>', (STATIC_DIR / "login.html").read_text()
    )
    assert sign_in_entries == ["/static/js/login.js"]
    seen: set[str] = set()
    queue = [entry.group(1), *sign_in_entries]
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        js = await web.client.get(path)
        assert js.status_code == 200, path
        assert js.headers["content-type"].startswith("text/javascript"), path
        assert js.text.startswith("// @ts-check"), path
        assert "innerHTML" not in js.text
        assert "insertAdjacentHTML" not in js.text
        assert js.headers["content-security-policy"] == csp
        for module in re.findall(r'^import .* from "([^"]+)";$', js.text, re.MULTILINE):
            assert module.startswith("./"), f"{path} imports only the page's own modules"
            queue.append(path.rsplit("/", 1)[0] + module[1:])
    on_disk = {f"/static/js/{file.name}" for file in (STATIC_DIR / "js").glob("*.js")}
    assert seen == on_disk, "every module is reachable from the entry point"


async def test_pending_lists_only_the_configured_sessions_forms(stack: WebStack, web: Web) -> None:
    mine = await stack.link.open(every_kind_form(), session_id="s1")
    await stack.link.open(text_form("other session"), session_id="s2")
    response = await web.client.get("/api/pending")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    pending = response.json()["pending"]
    assert [p["id"] for p in pending] == [mine.interaction_id]
    view = pending[0]
    assert view["requester"] == {
        "provider_id": "mcp-provider-1",
        "provider_display_name": "Local MCP provider",
        "claimed_server": "deployer",
        "claimed_tool": "deploy",
    }
    kinds = {f["name"]: f["kind"] for f in view["fields"]}
    assert kinds == {
        "environment": "single_select",
        "region": "single_select",
        "channels": "multi_select",
        "replicas": "integer",
        "canary": "number",
        "confirm": "boolean",
        "contact": "email",
        "dashboard": "uri",
        "window_day": "date",
        "window_start": "date-time",
        "note": "string",
    }
    assert view["expires_at"] is not None
    assert view["state"] == "pending"


async def test_history_lists_the_configured_sessions_settled_forms_with_who_answered_and_no_value(
    stack: WebStack, web: Web
) -> None:
    canary = "web-history-canary-3e1f"
    mine = await stack.link.open(text_form("deploy where?"), session_id="s1")
    body = {"session_id": "s1", "submission_id": "sub-h", "action": "accept", "values": {"target": canary}}
    answered = await web.client.post(
        f"/api/interactions/{mine.interaction_id}/answer", json=body, headers=post_headers(web)
    )
    assert answered.status_code == 200, answered.text
    other = await stack.link.open(text_form("other session"), session_id="s2")
    await stack.link.close(other.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    response = await web.client.get("/api/history", params={"limit": "200"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert canary not in response.text
    history = response.json()["history"]  # forms earlier tests left pending may settle meanwhile: find ours
    assert {entry["session"] for entry in history} == {"s1"}
    (entry,) = [e for e in history if e["id"] == mine.interaction_id]
    assert entry["answered_by"] == {
        "principal": "anonymous",
        "principal_kind": "anonymous",
        "surface": "web",
        "issuer": None,
        "via": None,
    }
    assert (entry["action"], entry["tool"]) == ("accept", "deployer:deploy")
    assert (await web.client.get("/api/history", params={"limit": "many"})).status_code == 400


async def test_accept_commits_values_typed_by_field_kind(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(every_kind_form(), session_id="s1")
    body = {
        "session_id": "s1",
        "submission_id": "sub-1",
        "action": "accept",
        "values": {"environment": "production", "region": "mars-base", "replicas": 3, "canary": 0.25, "confirm": True},
    }
    response = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer", json=body, headers=post_headers(web)
    )
    assert response.status_code == 200, response.text
    assert response.json()["interaction"]["state"] == "answered"
    assert response.json()["interaction"]["answer_action"] == "accept"
    assert "values" not in json.dumps(response.json()["interaction"]), "answer values are never echoed to the page"
    stored = await get_interaction(stack, ix.interaction_id)
    assert stored.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    values = stored.answer.values
    assert values["replicas"].WhichOneof("kind") == "integer_value"
    assert values["replicas"].integer_value == 3
    assert values["canary"].WhichOneof("kind") == "number_value"
    assert values["canary"].number_value == 0.25
    assert values["confirm"].boolean_value is True
    assert values["region"].string_value == "mars-base"


async def test_decline_and_cancel_are_distinct_answers(stack: WebStack, web: Web) -> None:
    first = await stack.link.open(text_form("one"), session_id="s1")
    second = await stack.link.open(text_form("two"), session_id="s1")
    for ix, action, expected in (
        (first, "decline", form_pb2.ACTION_DECLINE),
        (second, "cancel", form_pb2.ACTION_CANCEL),
    ):
        response = await web.client.post(
            f"/api/interactions/{ix.interaction_id}/answer",
            json={"session_id": "s1", "action": action},
            headers=post_headers(web),
        )
        assert response.status_code == 200, response.text
        assert (await get_interaction(stack, ix.interaction_id)).answer.action == expected


async def test_invalid_values_get_the_services_field_violations_and_the_form_stays_pending(
    stack: WebStack, web: Web
) -> None:
    ix = await stack.link.open(every_kind_form(), session_id="s1")
    body = {"session_id": "s1", "action": "accept", "values": {"environment": "staging", "replicas": 99}}
    response = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer", json=body, headers=post_headers(web)
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["reason"] == "INVALID_ANSWER"
    paths = {v["path"] for v in error["violations"]}
    assert "/replicas" in paths
    assert "/region" in paths
    assert "99" not in json.dumps(error), "violations never quote the submitted value"
    assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_second_answer_gets_conflict_and_the_settled_interaction(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("race"), session_id="s1")
    url = f"/api/interactions/{ix.interaction_id}/answer"
    first = await web.client.post(url, json={"session_id": "s1", "action": "decline"}, headers=post_headers(web))
    assert first.status_code == 200
    second = await web.client.post(
        url, json={"session_id": "s1", "action": "accept", "values": {"target": "x"}}, headers=post_headers(web)
    )
    assert second.status_code == 409
    assert second.json()["error"]["reason"] == "ALREADY_SETTLED"
    assert second.json()["interaction"]["state"] == "answered"
    assert second.json()["interaction"]["answer_action"] == "decline"


async def test_answer_to_a_closed_form_reports_the_close_reason(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("stop me"), session_id="s1")
    await stack.link.close(ix.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    response = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer",
        json={"session_id": "s1", "action": "accept", "values": {"target": "x"}},
        headers=post_headers(web),
    )
    assert response.status_code == 409
    assert response.json()["error"]["reason"] == "CLOSED"
    assert response.json()["error"]["close_reason"] == "stopped"
    assert response.json()["interaction"]["close_reason"] == "stopped"
    assert response.json()["interaction"]["close_text"] == "the Tool call was stopped"


async def test_answer_for_a_session_the_surface_does_not_show_is_not_found(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("elsewhere"), session_id="s2")
    response = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer",
        json={"session_id": "s2", "action": "decline"},
        headers=post_headers(web),
    )
    assert response.status_code == 404
    assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_malformed_answer_bodies_are_refused_and_lose_nothing(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("shape"), session_id="s1")
    url = f"/api/interactions/{ix.interaction_id}/answer"
    not_json = await web.client.post(url, content=b"{nope", headers=post_headers(web))
    assert not_json.status_code == 400
    assert not_json.json()["error"]["reason"] == "INVALID_REQUEST"
    bad_action = await web.client.post(url, json={"session_id": "s1", "action": "maybe"}, headers=post_headers(web))
    assert bad_action.status_code == 400
    assert bad_action.json()["error"]["violations"][0]["path"] == "/action"
    nested = await web.client.post(
        url, json={"session_id": "s1", "action": "accept", "values": {"target": {"a": 1}}}, headers=post_headers(web)
    )
    assert nested.status_code == 400
    form_encoded = await web.client.post(
        url, content=b"action=decline", headers={**post_headers(web), "Content-Type": "text/plain"}
    )
    assert form_encoded.status_code == 415
    assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_answer_body_over_the_cap_is_refused_before_the_service_sees_it(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("big"), session_id="s1")
    huge = {"session_id": "s1", "action": "accept", "values": {"target": "x" * (MAX_ANSWER_BODY_BYTES + 1)}}
    response = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer", json=huge, headers=post_headers(web)
    )
    assert response.status_code == 413
    assert response.json()["error"]["reason"] == "LIMIT_EXCEEDED"
    assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_posts_without_the_csrf_token_or_from_another_origin_are_refused(stack: WebStack, web: Web) -> None:
    ix = await stack.link.open(text_form("csrf"), session_id="s1")
    url = f"/api/interactions/{ix.interaction_id}/answer"
    body = {"session_id": "s1", "action": "decline"}
    no_token = await web.client.post(url, json=body, headers={"Origin": web.base})
    assert no_token.status_code == 403
    assert no_token.json()["error"]["reason"] == "CSRF_REJECTED"
    cross = await web.client.post(url, json=body, headers={CSRF_HEADER: web.csrf, "Origin": "https://evil.example"})
    assert cross.status_code == 403
    cross_site = await web.client.post(url, json=body, headers={CSRF_HEADER: web.csrf, "Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_a_foreign_host_header_is_refused_on_a_loopback_surface(web: Web) -> None:
    response = await web.client.get("/api/pending", headers={"Host": "attacker.example:8765"})
    assert response.status_code == 400


async def test_a_rebinding_host_is_refused_on_any_loopback_bind_and_the_bound_address_is_served(
    stack: WebStack,
) -> None:
    app, running = await stack.web(sessions=["s1"], listen="127.0.0.2:0")
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            rebound = await client.get("/api/pending", headers={"Host": f"rebind.attacker.example:{running.port}"})
            assert rebound.status_code == 400
            own = await client.get("/api/pending")
            assert own.status_code == 200
            named = await client.get("/api/pending", headers={"Host": f"localhost:{running.port}"})
            assert named.status_code == 200
    finally:
        await running.stop()
        await app.close()


async def test_failed_logins_from_one_local_user_are_rate_limited_with_retry_after(stack: WebStack) -> None:
    app, running = await stack.web(sessions=["s1"], token="t0ken-secret", web_login_attempts_per_minute=2)
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            headers = {"Origin": running.url}
            statuses = [
                (await client.post("/login", data={"token": "nope"}, headers=headers)).status_code for _ in range(2)
            ]
            limited = await client.post("/login", data={"token": "t0ken-secret"}, headers=headers)
            assert statuses == [401, 401]
            assert limited.status_code == 429
            assert limited.json()["error"]["reason"] == "RATE_LIMITED"
            assert int(limited.headers["Retry-After"]) >= 1
            assert COOKIE_NAME not in limited.cookies
    finally:
        await running.stop()
        await app.close()


async def test_surface_token_gates_the_page_and_api_with_login_cookie_or_bearer(stack: WebStack) -> None:
    app, running = await stack.web(sessions=["s1"], token="t0ken-secret")
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            assert (await client.get("/api/pending")).status_code == 401
            page = await client.get("/")
            assert page.status_code == 303
            assert page.headers["location"] == "/login"
            assert (await client.get("/login")).status_code == 200
            wrong = await client.post("/login", data={"token": "nope"}, headers={"Origin": running.url})
            assert wrong.status_code == 401
            assert COOKIE_NAME not in wrong.cookies
            cross = await client.post(
                "/login", data={"token": "t0ken-secret"}, headers={"Origin": "https://evil.example"}
            )
            assert cross.status_code == 403
            login = await client.post("/login", data={"token": "t0ken-secret"}, headers={"Origin": running.url})
            assert login.status_code == 303
            cookie = login.headers["set-cookie"]
            assert "HttpOnly" in cookie
            assert "SameSite=strict" in cookie.replace("Strict", "strict")
            assert "t0ken-secret" not in cookie, "the cookie never holds the token itself"
            assert (await client.get("/api/pending")).status_code == 200
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as bearer:
            ok = await bearer.get("/api/pending", headers={"Authorization": "Bearer t0ken-secret"})
            assert ok.status_code == 200
            bad = await bearer.get("/api/pending", headers={"Authorization": "Bearer wrong"})
            assert bad.status_code == 401
    finally:
        await running.stop()
        await app.close()


@pytest.mark.parametrize(
    ("next_", "location"),
    [
        ("/#/interaction/ix-1", "/#/interaction/ix-1"),
        ("", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example/", "/"),
        ("/\t/evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("evil.example", "/"),
    ],
    ids=["form-link", "none", "scheme-relative", "backslash", "tab", "absolute", "relative"],
)
async def test_a_token_login_returns_to_the_same_origin_path_it_was_given_and_nowhere_else(
    stack: WebStack, next_: str, location: str
) -> None:
    app, running = await stack.web(sessions=["s1"], token="t0ken-secret")
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            login = await client.post(
                "/login", data={"token": "t0ken-secret", "next": next_}, headers={"Origin": running.url}
            )
            assert (login.status_code, login.headers["location"]) == (303, location)
            assert COOKIE_NAME in login.cookies
    finally:
        await running.stop()
        await app.close()


async def test_the_token_in_a_page_url_signs_the_browser_in_and_leaves_the_address_bar(stack: WebStack) -> None:
    app, running = await stack.web(sessions=["s1"], token="t0ken-secret")
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            wrong = await client.get("/?token=nope")
            assert (wrong.status_code, wrong.headers["location"]) == (303, "/login")
            assert COOKIE_NAME not in wrong.cookies
            assert (await client.get("/api/pending?token=t0ken-secret")).status_code == 401  # pages only
            opened = await client.get("/?token=t0ken-secret")
            assert (opened.status_code, opened.headers["location"]) == (303, "/")
            cookie = opened.headers["set-cookie"]
            assert "HttpOnly" in cookie
            assert "SameSite=strict" in cookie.replace("Strict", "strict")
            assert "t0ken-secret" not in cookie
            assert (await client.get("/api/pending")).status_code == 200
            assert (await client.get("/")).status_code == 200
    finally:
        await running.stop()
        await app.close()


# --- server-sent events --------------------------------------------------------------------------


@dataclass
class SseEvent:
    event: str
    data: Any
    id: str | None


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    event, data, event_id = "message", "", None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(event, json.loads(data), event_id)
            event, data, event_id = "message", "", None
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line.startswith("id:"):
            event_id = line[3:].strip()


async def next_event(events: AsyncIterator[SseEvent]) -> SseEvent:
    import asyncio

    async with asyncio.timeout(10):
        return await anext(events)


async def test_events_stream_a_snapshot_then_opened_and_closed_changes(stack: WebStack, web: Web) -> None:
    before = await stack.link.open(text_form("already here"), session_id="s1")
    async with web.client.stream("GET", "/api/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "default-src 'self'" in response.headers["content-security-policy"]
        events = sse_events(response)
        snapshot = await next_event(events)
        assert snapshot.event == "snapshot"
        assert [p["id"] for p in snapshot.data["pending"]] == [before.interaction_id]
        later = await stack.link.open(text_form("new one"), session_id="s1")
        opened = await next_event(events)
        assert opened.event == "opened"
        assert opened.data["interaction"]["id"] == later.interaction_id
        assert opened.id
        await stack.link.close(later.interaction_id, interaction_pb2.CLOSE_REASON_PROVIDER_LOST)
        closed = await next_event(events)
        assert closed.event == "closed"
        assert closed.data["interaction"]["close_reason"] == "provider_lost"
        assert closed.data["interaction"]["close_text"] == "the provider disconnected"


async def test_events_stream_a_committed_answer_recorded_lost_as_a_delivery_event(stack: WebStack, web: Web) -> None:
    form = await stack.link.open(text_form("answered, then lost"), session_id="s1")
    async with web.client.stream("GET", "/api/events") as response:
        events = sse_events(response)
        assert (await next_event(events)).event == "snapshot"
        response = await web.client.post(
            f"/api/interactions/{form.interaction_id}/answer",
            json={"session_id": "s1", "action": "decline"},
            headers=post_headers(web),
        )
        assert response.status_code == 200, response.text
        assert (await next_event(events)).event == "answered"
        await stack.link.deliver(
            form.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_PROVIDER_LOST
        )
        lost = await next_event(events)
        assert lost.event == "delivery"
        assert lost.data["interaction"]["delivery"] == "lost"
        assert lost.data["interaction"]["delivery_lost_text"] == "the provider disconnected"
        assert "answer_values" not in lost.data["interaction"]


async def test_events_resume_from_last_event_id_without_a_new_snapshot(stack: WebStack, web: Web) -> None:
    async with web.client.stream("GET", "/api/events") as response:
        events = sse_events(response)
        snapshot = await next_event(events)
        assert snapshot.event == "snapshot"
        assert snapshot.id
        last_id = snapshot.id
    missed = await stack.link.open(text_form("while away"), session_id="s1")
    async with web.client.stream("GET", "/api/events", headers={"Last-Event-ID": last_id}) as response:
        events = sse_events(response)
        first = await next_event(events)
        assert first.event == "opened", "a valid resume token replays what was missed"
        assert first.data["interaction"]["id"] == missed.interaction_id


async def test_when_the_service_goes_away_answers_get_503_and_events_say_disconnected(
    stack: WebStack, web: Web
) -> None:
    ix = await stack.link.open(text_form("soon unreachable"), session_id="s1")
    async with web.client.stream("GET", "/api/events") as response:
        events = sse_events(response)
        assert (await next_event(events)).event == "snapshot"
        await stack.interaction.server.stop(0)
        disconnected = await next_event(events)
        assert disconnected.event == "disconnected"
        assert disconnected.data["attempt"] == 1
    answer = await web.client.post(
        f"/api/interactions/{ix.interaction_id}/answer",
        json={"session_id": "s1", "action": "decline"},
        headers=post_headers(web),
    )
    assert answer.status_code == 503
    assert answer.json()["error"]["reason"] == "UNAVAILABLE"
    listing = await web.client.get("/api/pending")
    assert listing.status_code == 503
