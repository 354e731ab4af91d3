"""The shared client fixture's Python driver (twin of clients/typescript/test/driver.ts): one scenario, one JSON line.

    python -m tests.clients.driver SCENARIO --broker HOST:PORT --interaction HOST:PORT --tag TAG

SCENARIO: accept | decline | cancel | stop | unknown | reattach. ``reattach`` prints
``{"awaiting": ID}`` when the form is pending and leaves it to the test (which cuts the proxy and
answers it) while the client reattaches. Then prints
``{"kinds": [...logged event kinds], "outcome": {...}, "sequences": [...], "tools": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from maka_client import (
    Accepted,
    AwaitingInteraction,
    BrokerClient,
    CallEvent,
    Failure,
    InteractionSettled,
    Lost,
    Progress,
    Result,
    Stopped,
    SurfaceClient,
    ToolCall,
)

KINDS: dict[type, str] = {
    Accepted: "accepted",
    Progress: "progress",
    AwaitingInteraction: "awaiting_interaction",
    InteractionSettled: "interaction_settled",
    Result: "result",
    Failure: "failure",
    Lost: "lost",
    Stopped: "stopped",
}


async def drive(call: ToolCall, surface: SurfaceClient, scenario: str, tag: str) -> list[CallEvent]:
    events: list[CallEvent] = []
    async for event in call:
        events.append(event)
        if not isinstance(event, AwaitingInteraction):
            continue
        pending = await surface.pending([call.session_id])
        form = next(f for f in pending if f.interaction_id == event.interaction_id)
        assert form.invocation_id == call.invocation_id, "the pending form is not this call's"
        if scenario == "reattach":
            sys.stdout.write(json.dumps({"awaiting": event.interaction_id}) + "\n")
            sys.stdout.flush()
            continue
        if scenario == "stop":
            await call.stop()
        elif scenario == "accept":
            await surface.answer(event.interaction_id, "accept", {"value": f"v-{tag}"})
        else:
            await surface.answer(event.interaction_id, scenario)
    return events


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["accept", "decline", "cancel", "stop", "unknown", "reattach"])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--interaction", required=True)
    parser.add_argument("--tag", default="tag")
    args = parser.parse_args()
    async with BrokerClient(args.broker) as broker, SurfaceClient(args.interaction) as surface:
        tools = [tool.name for tool in await broker.list_tools()]
        tool = "counter:nope" if args.scenario == "unknown" else "counter:ask"
        call = broker.call_tool(tool, {"tag": args.tag}, session_id=f"fixture-{args.tag}")
        events = await drive(call, surface, args.scenario, args.tag)
    logged = [e for e in events if type(e) in KINDS]
    outcome = call.outcome
    summary: dict[str, Any] = {"kind": KINDS[type(outcome)] if outcome is not None else None}
    if isinstance(outcome, Result):
        summary |= {"isError": outcome.is_error, "payload": json.loads(outcome.text)}
    if isinstance(outcome, Failure):
        summary |= {"code": outcome.code}
    report = {
        "kinds": [KINDS[type(e)] for e in logged],
        "sequences": [getattr(e, "sequence", 0) for e in logged],
        "reattaches": call.reattaches,
        "outcome": summary,
        "tools": tools,
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
