"""A scripted "agent loop" on the Python client (no model needed): list the Tools, call each step of a
plan through the broker, show progress and waiting forms, and handle every outcome and failure code
the way an agent runtime would (docs/clients.md).

    python examples/agent_loop.py [--broker HOST:PORT] [--plan JSON]

``--broker`` defaults to ``$MAKA_BROKER_TARGET`` or ``127.0.0.1:50052`` (a proxy works too); ``--plan``
is a JSON list of ``[SERVER:TOOL, {arguments}]`` (default: ping, deploy build-42, a Tool that does not
exist). Forms are answered by the user in any surface (``maka tui``, the web page, ``maka answer``).
The last line is a JSON summary ``{"outcomes": [...]}``; exit 0 when the loop ran to its end, 3 when the
broker could not be reached.
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
    Failure,
    InteractionSettled,
    Lost,
    MakaError,
    Outcome,
    Progress,
    Reattaching,
    Result,
    Status,
    Stopped,
)

DEFAULT_PLAN: list[tuple[str, dict[str, Any]]] = [
    ("examples:ping", {}),
    ("examples:deploy", {"artifact": "build-42"}),
    ("examples:does_not_exist", {}),
]

ADVICE = {
    "UNKNOWN_TOOL": "pick another Tool from the list (the model would re-plan)",
    "INVALID_REQUEST": "fix the arguments against the Tool's input schema",
    "INTERACTION_TIMED_OUT": "the user did not answer in time: ask again later",
    "INTERACTION_CLOSED": "the form was closed (Host restart, superseded): call again if still needed",
    "EXECUTION_TIMEOUT": "the Tool took too long: report it, do not retry blindly",
    "HOST_UNAVAILABLE": "the Interaction service is down: retry after a pause",
    "RESOURCE_EXHAUSTED": "the provider is busy: retry after a pause",
    "ROUNDS_EXHAUSTED": "the Tool kept asking: report it to the user",
    "CONNECTION_LOST": "the MCP server went away mid-call: report it",
}


def say(text: str) -> None:
    print(text, flush=True)


def describe(outcome: Outcome) -> dict[str, Any]:
    """One outcome as the model would see it (and the summary line records)."""
    if isinstance(outcome, Result):
        return {"kind": "result", "isError": outcome.is_error, "text": outcome.text}
    if isinstance(outcome, Failure):
        return {"kind": "failure", "code": outcome.code, "message": outcome.message}
    if isinstance(outcome, Lost):
        return {"kind": "lost", "reason": outcome.reason}
    return {"kind": "stopped"}


async def run_step(broker: BrokerClient, tool: str, arguments: dict[str, Any], known: list[str]) -> dict[str, Any]:
    say(f"-> {tool} {json.dumps(arguments)}")
    call = broker.call_tool(tool, arguments)
    async for event in call:
        if isinstance(event, Accepted):
            say(f"   accepted (invocation {event.invocation_id})")
        elif isinstance(event, Progress):
            total = f"/{event.total:g}" if event.total is not None else ""
            say(f"   progress {event.progress:g}{total} {event.message}".rstrip())
        elif isinstance(event, AwaitingInteraction):
            expires = event.expires_at.isoformat() if event.expires_at else "no expiry"
            say(f"   waiting for the user: form {event.interaction_id} {event.message!r} (until {expires})")
        elif isinstance(event, Status):
            say(f"   still {event.phase.value}")
        elif isinstance(event, InteractionSettled):
            say(f"   form settled: {event.action.value if event.action else event.close_reason}")
        elif isinstance(event, Reattaching):
            say(f"   connection dropped ({event.code}); reattaching")
    outcome = call.outcome
    assert outcome is not None
    if isinstance(outcome, Result):
        say(f"   {'tool error' if outcome.is_error else 'result'}: {outcome.text}")
    elif isinstance(outcome, Failure):
        say(f"   {outcome.code}: {outcome.message} -> {ADVICE.get(outcome.code, 'report the failure')}")
        if outcome.code == "UNKNOWN_TOOL":
            say(f"   known Tools: {', '.join(known)}")
    elif isinstance(outcome, Lost):
        say(f"   lost: {outcome.reason} -> the outcome is unknown; do not replay it blindly")
    elif isinstance(outcome, Stopped):
        say("   stopped by the user -> end the turn")
    return {"tool": tool, **describe(outcome)}


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--broker", default=None, metavar="HOST:PORT")
    parser.add_argument("--plan", default=None, metavar="JSON", help='[["SERVER:TOOL", {...}], ...]')
    args = parser.parse_args(argv)
    plan = [(str(tool), dict(arguments)) for tool, arguments in json.loads(args.plan)] if args.plan else DEFAULT_PLAN
    outcomes: list[dict[str, Any]] = []
    async with BrokerClient.from_env(args.broker) as broker:
        try:
            known = [tool.name for tool in await broker.list_tools()]
            say(f"tools: {', '.join(known) or '(none)'}")
            for tool, arguments in plan:
                outcomes.append(await run_step(broker, tool, arguments, known))
        except MakaError as error:
            say(f"{error.code}: {error.message} (is the broker reachable?)")
            return 3
    say(json.dumps({"outcomes": outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
