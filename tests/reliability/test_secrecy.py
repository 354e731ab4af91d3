"""Secrecy suite: ``requestState`` never leaves the MCP provider's memory; form values go only where they must.

One Tool call on the shared stack of real processes (tracing to the console, metrics on) uses a
``requestState`` canary minted by the MCP server (never a Tool argument) and a form-value canary
typed by the surface. Then every place the system writes is searched: every process's captured
stdout/stderr (logs and console-exported spans), every Redis key and value (SCAN over strings,
hashes, lists, sets, zsets, streams), the surface's Attach stream, the caller's ``CallTool`` events
and each service's ``/metrics``. Sources: docs/design.md#canaries, docs/design.md#requeststate, RFC criterion 12.
"""

from __future__ import annotations

import asyncio
import json
import secrets

import pytest

from surfaces.common.interactions import FormAnswered, FormSnapshot, Interactions, history_json
from tests.helpers.observed import SERVICES, Observed
from tests.helpers.waiting import eventually
from tests.reliability.counting_server import digest
from tests.reliability.harness import ToolCall, answer, redis_dump, result_payload, scrape

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="package")]


async def test_request_state_and_form_value_canaries_appear_only_where_they_must(observed: Observed) -> None:
    form_canary = f"fv-canary-{secrecy_token()}"
    tag = f"secret-{secrecy_token()}"
    surface_frames: list[bytes] = []
    async with Interactions.connect(observed.interaction) as client:
        feed = client.attach(["secrets"])
        snapshot = await anext(feed)
        assert isinstance(snapshot, FormSnapshot)
        surface_frames.append(snapshot_bytes(snapshot))
        async with ToolCall(observed.broker, "counter:ask", {"tag": tag, "mint": True}, session="secrets") as call:
            interaction_id = await call.awaiting()
            await answer(observed.interaction, interaction_id, form_canary)
            done = await call.terminal()
            async with asyncio.timeout(30):
                async for event in feed:
                    surface_frames.append(event_bytes(event))
                    if isinstance(event, FormAnswered) and event.interaction.interaction_id == interaction_id:
                        break
        call_events = b"".join(event.SerializeToString() for event in call.events)
        page = await client.history(["secrets"], page_size=500)
    # History (docs/security.md "History and audit"): the answered form is listed, who answered it, never a value.
    (listed,) = [history_json(e) for e in page.entries if e.interaction_id == interaction_id]
    assert listed["action"] == "accept"
    assert listed["answered_by"] is not None
    history = json.dumps([history_json(e) for e in page.entries]).encode()

    legs = observed.calls_of(tag)
    state_canary = str(legs[0]["minted"])
    assert state_canary.startswith("rs-canary-")
    # The MCP server got the exact requestState back and the form value in the retry (where they must be).
    assert [(leg["leg"], leg.get("state_ok"), leg.get("value")) for leg in legs] == [
        ("first", None, None),
        ("retry", True, form_canary),
    ]
    # The model-visible result we produce identifies the answer without carrying it.
    assert result_payload(done) == {"tag": tag, "action": "accept", "digest": digest(form_canary)}

    # Spans are printed when each RPC ends (the CallTool stream closes after its terminal event), then
    # relayed by the supervisor: wait, bounded, until both are in the logs before reading them.
    span_markers = (
        b'"name": "/maka.interaction.v1.InteractionService/Answer"',
        b'"name": "/maka.broker.v1.CapabilityBrokerService/CallTool"',
    )
    await eventually(
        lambda: all(marker in observed.running.all_logs().encode() for marker in span_markers),
        timeout=30,
        what="the Answer and CallTool spans in the service logs",
    )
    await eventually(  # the delivery is recorded after the Answer RPC: its audit line is relayed on its own
        lambda: any(
            '"form_delivery"' in line and interaction_id in line for line in observed.running.all_logs().splitlines()
        ),
        timeout=30,
        what="the delivery's audit event in the Interaction service's log",
    )
    logs = observed.running.all_logs().encode()
    redis = await redis_dump(observed.redis_url)
    metrics = "\n".join([await scrape(observed.metrics[name]) for name in SERVICES]).encode()
    attach = b"".join(surface_frames)
    assert all(marker in logs for marker in span_markers)  # spans were exported
    assert b"maka_grpc_requests_total" in metrics
    audit = [
        json.loads(line)
        for line in logs.decode().splitlines()
        if '"maka.audit"' in line and interaction_id in line and line.startswith("{")
    ]
    assert {event["event"] for event in audit} >= {"form_opened", "form_answered", "form_delivery"}

    state = state_canary.encode()
    for where, blob in {
        "logs and traces": logs,
        "redis": redis,
        "metrics": metrics,
        "attach stream": attach,
        "CallTool events": call_events,
        "history": history,
    }.items():
        assert state not in blob, f"requestState canary found in {where}"

    form = form_canary.encode()
    assert form in attach  # surfaces read the canonical answer back (unsealed by the Interaction service)
    blobs = {
        "logs and traces": logs,
        "redis": redis,
        "metrics": metrics,
        "CallTool events": call_events,
        "history": history,
    }
    for where, blob in blobs.items():  # Redis holds the answer sealed (docs/security.md "Answer values at rest")
        assert form not in blob, f"form value canary found in {where}"


def secrecy_token() -> str:
    """A fresh random suffix for a canary."""
    return secrets.token_hex(8)


def snapshot_bytes(snapshot: FormSnapshot) -> bytes:
    """The wire bytes of every record in an Attach snapshot."""
    return b"".join(view.proto.SerializeToString() for view in snapshot.pending)


def event_bytes(event: object) -> bytes:
    """The wire bytes of the record an Attach event carries (nothing for Disconnected)."""
    view = getattr(event, "interaction", None)
    if view is not None:
        return bytes(view.proto.SerializeToString())
    if isinstance(event, FormSnapshot):
        return snapshot_bytes(event)
    return b""
