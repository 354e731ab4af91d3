"""The web surface's event stream and answer route following a pool of Hosts (``MAKA_HOST_IDS=*``), against one
real Interaction service serving two Hosts with a broker link each (docs/design.md#surfaces-follow-the-pool):
one ``snapshot`` per Host naming it, events naming their form's Host, one ``Last-Event-ID`` resuming both Hosts,
and an answer posted to a replica that never streamed the form committing on the form's own Host."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from maka.interaction.v1 import interaction_pb2
from surfaces.web.security import CSRF_HEADER
from tests.surfaces.web.stack import PoolStack, running_pool, text_form
from tests.surfaces.web.test_app import next_event, sse_events


@pytest.fixture
async def pool(redis_url: str) -> AsyncIterator[PoolStack]:
    tag = uuid.uuid4().hex[:8]
    async with running_pool(redis_url, [f"ev-a-{tag}", f"ev-b-{tag}"]) as stack:
        yield stack


async def test_one_last_event_id_resumes_every_host_and_an_answer_lands_on_the_forms_host(pool: PoolStack) -> None:
    first, second = pool.links
    app, running = await pool.web(host_ids="*")
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            async with client.stream("GET", "/api/events") as response:
                events = sse_events(response)
                snapshots = [await next_event(events), await next_event(events)]
                assert [s.event for s in snapshots] == ["snapshot", "snapshot"]
                assert sorted(s.data["host"] for s in snapshots) == sorted([first, second])
                seen = await pool.links[second].open(text_form("seen live"), session_id="s1")
                opened = await next_event(events)
                assert (opened.event, opened.data["interaction"]["id"]) == ("opened", seen.interaction_id)
                assert opened.data["interaction"]["host"] == second
                assert opened.id
                last_id = opened.id

            missed_first = await pool.links[first].open(text_form("missed on the first"), session_id="s1")
            missed_second = await pool.links[second].open(text_form("missed on the second"), session_id="s1")
            async with client.stream("GET", "/api/events", headers={"Last-Event-ID": last_id}) as response:
                events = sse_events(response)
                replayed = [await next_event(events), await next_event(events)]
            assert [e.event for e in replayed] == ["opened", "opened"], "resumed on both Hosts: no snapshot"
            assert {e.data["interaction"]["id"]: e.data["interaction"]["host"] for e in replayed} == {
                missed_first.interaction_id: first,
                missed_second.interaction_id: second,
            }

        # another replica (nothing streamed there): the answer still goes to the form's Host
        other_app, other = await pool.web(host_ids="*")
        try:
            async with httpx.AsyncClient(base_url=other.url, timeout=10) as fresh:
                csrf = (await fresh.get("/api/session")).json()["csrf"]
                answered = await fresh.post(
                    f"/api/interactions/{missed_first.interaction_id}/answer",
                    json={"session_id": "s1", "action": "decline"},
                    headers={CSRF_HEADER: csrf, "Origin": other.url, "Content-Type": "application/json"},
                )
            assert answered.status_code == 200, answered.text
            assert answered.json()["interaction"]["host"] == first
        finally:
            await other.stop()
            await other_app.close()
        stored = await pool.get(first, missed_first.interaction_id)
        assert stored.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert (await pool.links[first].next_settled()).interaction_id == missed_first.interaction_id
    finally:
        await running.stop()
        await app.close()
