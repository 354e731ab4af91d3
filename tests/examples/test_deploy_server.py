"""The example MCP server's Tools, driven by the official SDK ``Client`` and its MRTR auto-loop.

No Maka service is involved: the SDK client answers the forms through ``elicitation_callback``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from mcp.client import Client, ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitRequestFormParams, ElicitRequestParams, ElicitResult, ErrorData, TextContent

from examples.deploy_server import (
    DEPLOY_SCHEMA,
    DETAILS_SCHEMA,
    NO_ELICITATION_TEXT,
    SIGNOFF_SCHEMA,
    mcp,
)
from tests.helpers.waiting import eventually

DETAILS_ANSWER: dict[str, Any] = {
    "owner_email": "ada@example.com",
    "changelog_url": "https://example.com/changes",
    "release_date": "2026-08-01",
    "freeze_at": "2026-07-30T12:00:00Z",
    "version": "2.1.0",
    "coverage": 91.5,
    "reviewers": 3,
    "breaking": False,
    "channel": "beta",
    "risk": "medium",
}
SIGNOFF_ANSWER: dict[str, Any] = {
    "region": "eu",
    "platforms": ["linux", "windows"],
    "checks": ["tests", "security"],
    "notes": "ship it",
    "approve": True,
}


@dataclass
class Asked:
    """What the server asked: the input key (or legacy request id), message and requested schema."""

    key: str
    message: str
    schema: dict[str, Any]


@dataclass
class User:
    """A scripted user: answers each form with the next queued ``ElicitResult`` and records the forms."""

    answers: list[ElicitResult]
    asked: list[Asked] = field(default_factory=lambda: list[Asked]())

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        assert isinstance(params, ElicitRequestFormParams)
        self.asked.append(Asked(str(context.request_id), params.message, params.requested_schema))
        return self.answers.pop(0)


def _text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


Call = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]


async def _call(user: User | None, tool: str, arguments: dict[str, Any], *, mode: str = "auto") -> CallToolResult:
    async with Client(mcp, elicitation_callback=user, mode=mode) as client:
        return await client.call_tool(tool, arguments)


async def test_deploy_accepted_with_confirmation_deploys_to_the_chosen_environment() -> None:
    user = User([ElicitResult(action="accept", content={"environment": "staging", "confirm": True})])

    result = await _call(user, "deploy", {"artifact": "build-42"})

    assert result.is_error is False
    assert _text(result) == "Deployed build-42 to staging."
    assert [(a.key, a.message) for a in user.asked] == [("target", "Choose the deployment target")]
    assert user.asked[0].schema == DEPLOY_SCHEMA


async def test_deploy_asks_with_exactly_the_rfc_schema() -> None:
    assert DEPLOY_SCHEMA == {
        "type": "object",
        "properties": {
            "environment": {"type": "string", "enum": ["staging", "production"]},
            "confirm": {"type": "boolean"},
        },
        "required": ["environment", "confirm"],
    }


async def test_deploy_declined_says_nothing_was_deployed() -> None:
    result = await _call(User([ElicitResult(action="decline")]), "deploy", {"artifact": "build-42"})

    assert result.is_error is False
    assert _text(result) == "Deployment of build-42 was declined by the user; nothing was deployed."


async def test_deploy_cancelled_is_distinct_from_declined() -> None:
    result = await _call(User([ElicitResult(action="cancel")]), "deploy", {"artifact": "build-7"})

    assert _text(result) == "Deployment of build-7 was cancelled by the user; nothing was deployed."


async def test_deploy_accepted_without_confirmation_deploys_nothing() -> None:
    user = User([ElicitResult(action="accept", content={"environment": "production", "confirm": False})])

    result = await _call(user, "deploy", {"artifact": "build-42"})

    assert _text(result) == "Deployment of build-42 to production was not confirmed; nothing was deployed."


async def test_deploy_rejects_an_answer_outside_the_schema_with_invalid_params() -> None:
    user = User([ElicitResult(action="accept", content={"environment": "moon", "confirm": True})])

    server = StdioServerParameters(command=sys.executable, args=["-m", "examples.deploy_server"])

    async with Client(server, elicitation_callback=user) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("deploy", {"artifact": "build-42"})

    assert raised.value.code == -32602
    assert "$.environment" in raised.value.message


async def test_deploy_without_declared_elicitation_returns_an_error_result_and_asks_nothing() -> None:
    result = await _call(None, "deploy", {"artifact": "build-42"})

    assert result.is_error is True
    assert _text(result) == NO_ELICITATION_TEXT


async def test_deploy_on_a_legacy_connection_pushes_elicitation_and_completes() -> None:
    user = User([ElicitResult(action="accept", content={"environment": "production", "confirm": True})])

    result = await _call(user, "deploy", {"artifact": "build-9"}, mode="legacy")

    assert _text(result) == "Deployed build-9 to production."
    assert user.asked[0].schema == DEPLOY_SCHEMA


async def test_release_checklist_takes_two_rounds_with_different_keys() -> None:
    user = User(
        [ElicitResult(action="accept", content=DETAILS_ANSWER), ElicitResult(action="accept", content=SIGNOFF_ANSWER)]
    )

    result = await _call(user, "release_checklist", {"release": "orion"})

    assert [a.key for a in user.asked] == ["details", "signoff"]
    assert [a.schema for a in user.asked] == [DETAILS_SCHEMA, SIGNOFF_SCHEMA]
    assert _text(result) == (
        "Release orion 2.1.0 approved: owner ada@example.com, date 2026-08-01, channel beta, risk medium, "
        "reviewers 3, region eu, platforms linux,windows."
    )


async def test_release_checklist_forms_use_every_field_kind() -> None:
    properties = {**DETAILS_SCHEMA["properties"], **SIGNOFF_SCHEMA["properties"]}
    formats = {p.get("format") for p in properties.values()}
    types = {p["type"] for p in properties.values()}
    shapes = {key for p in properties.values() for key in p if key in {"enum", "oneOf", "enumNames", "default"}}
    item_shapes = {key for p in properties.values() for key in p.get("items", {})}

    assert {"email", "uri", "date", "date-time"} <= formats
    assert {"string", "number", "integer", "boolean", "array"} <= types
    assert {"enum", "oneOf", "enumNames", "default"} <= shapes
    assert {"enum", "anyOf"} <= item_shapes


async def test_release_checklist_declined_in_the_second_round_records_nothing() -> None:
    user = User([ElicitResult(action="accept", content=DETAILS_ANSWER), ElicitResult(action="decline")])

    result = await _call(user, "release_checklist", {"release": "orion"})

    assert _text(result) == "Release checklist for orion was declined in round 2; nothing was recorded."


async def test_release_checklist_cancelled_in_the_first_round_asks_no_second_form() -> None:
    user = User([ElicitResult(action="cancel")])

    result = await _call(user, "release_checklist", {"release": "orion"})

    assert len(user.asked) == 1
    assert _text(result) == "Release checklist for orion was cancelled in round 1; nothing was recorded."


async def test_release_checklist_on_a_legacy_connection_asks_both_forms_in_one_call() -> None:
    user = User(
        [ElicitResult(action="accept", content=DETAILS_ANSWER), ElicitResult(action="accept", content=SIGNOFF_ANSWER)]
    )

    result = await _call(user, "release_checklist", {"release": "vega"}, mode="legacy")

    assert [a.schema for a in user.asked] == [DETAILS_SCHEMA, SIGNOFF_SCHEMA]
    assert "Release vega 2.1.0 approved" in _text(result)


async def test_ping_needs_no_input_and_no_capability() -> None:
    result = await _call(None, "ping", {})

    assert _text(result) == "pong"


async def test_the_server_runs_over_stdio_as_a_module() -> None:
    user = User([ElicitResult(action="accept", content={"environment": "staging", "confirm": True})])
    server = StdioServerParameters(command=sys.executable, args=["-m", "examples.deploy_server"])

    async with Client(server, elicitation_callback=user) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("deploy", {"artifact": "build-42"})

    assert _text(result) == "Deployed build-42 to staging."


@pytest.fixture
def http_server() -> Iterator[str]:
    """The example server as a Streamable HTTP process on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.deploy_server", "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
async def test_the_server_runs_over_streamable_http(http_server: str) -> None:
    def listening() -> bool:
        try:
            httpx.get(http_server, timeout=1)
        except httpx.TransportError:
            return False
        return True

    await eventually(listening, timeout=90, what="the HTTP server to listen")
    user = User([ElicitResult(action="accept", content={"environment": "production", "confirm": True})])

    async with Client(http_server, elicitation_callback=user) as client:
        result = await client.call_tool("deploy", {"artifact": "build-77"})

    assert _text(result) == "Deployed build-77 to production."
