"""Hostile but realistic input through the real stack (as ``maka up`` runs it, with the web surface): JSON that
Python's lenient decoder would take (a repeated name, ``NaN``, an unpaired surrogate escape, deep nesting) in
``maka answer --values``, the web page's answer body and Tool arguments, and ids and field names far past
every cap. Each gets one clear, stable error code and no traceback, nothing is stored, the form stays
answerable and the MCP connection stays up (docs/security.md#threats-and-what-stops-them).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from tests.helpers.cli import MAKA, maka
from tests.helpers.stack import ROOT, RunningStack, call_tool, result_text, running_stack, wait_for_pending

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

DEEP = "[" * 5000 + "]" * 5000
"""Nested far past any form answer or argument object (and past Python's recursion limit)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningStack]:
    async with running_stack(tmp_path_factory.mktemp("hostile"), web=True) as live:
        yield live


def state_dir(running: RunningStack) -> Path:
    return running.stack.state_dir


@dataclass
class OpenForm:
    """A ``examples:deploy`` call waiting on its form."""

    call: asyncio.Task[list[broker_pb2.CallToolResponse]]
    form: interaction_pb2.Interaction


async def open_deploy_form(running: RunningStack, session: str) -> OpenForm:
    call = asyncio.create_task(
        call_tool(running.endpoints.broker, "examples:deploy", {"artifact": "build-42"}, session=session)
    )
    form = await wait_for_pending(running.endpoints.interaction, session)
    return OpenForm(call, form)


async def still_answerable_then_staging(running: RunningStack, opened: OpenForm) -> None:
    """The form is still pending with no answer stored; a proper answer then completes the call with it."""
    async with grpc.aio.insecure_channel(running.endpoints.interaction) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        got = await stub.GetInteraction(
            interaction_service_pb2.GetInteractionRequest(interaction_id=opened.form.interaction_id), timeout=10
        )
    assert got.interaction.state == interaction_pb2.INTERACTION_STATE_PENDING
    assert not got.interaction.HasField("answer")
    ran = await maka(
        "answer",
        opened.form.interaction_id,
        "accept",
        "--values",
        '{"environment": "staging", "confirm": true}',
        state_dir=state_dir(running),
    )
    assert ran.code == 0, ran.err
    assert result_text(await asyncio.wait_for(opened.call, 60)) == "Deployed build-42 to staging."


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ('{"environment": "staging", "confirm": true, "environment": "production"}', "appears twice"),
        ('{"environment": "staging", "confirm": NaN}', "NaN is not a JSON number"),
        ('{"environment": "staging\\ud800", "confirm": true}', "unpaired surrogate"),
        (f'{{"environment": {DEEP}}}', "nested deeper than 64 levels"),
    ],
    ids=["repeated-name", "nan", "unpaired-surrogate", "deep-nesting"],
)
async def test_cli_values_that_are_not_strict_json_are_a_usage_error_and_the_form_stays_answerable(
    running: RunningStack, values: str, problem: str
) -> None:
    opened = await open_deploy_form(running, "cli-strict")
    ran = await maka("answer", opened.form.interaction_id, "accept", "--values", values, state_dir=state_dir(running))
    assert ran.code == 2, ran.err
    assert ran.err.startswith("INVALID_VALUES: --values "), ran.err
    assert problem in ran.err
    assert "Traceback" not in ran.err
    await still_answerable_then_staging(running, opened)


@pytest.mark.parametrize(
    "body",
    [
        '{"session_id": "web-strict", "action": "accept", "values": {"environment": "staging", "confirm": true},'
        ' "values": {"environment": "production", "confirm": true}}',
        '{"session_id": "web-strict", "action": "accept", "values": {"environment": "staging", "confirm": NaN}}',
        '{"session_id": "web-strict", "action": "accept",'
        ' "values": {"environment": "staging\\ud800", "confirm": true}}',
        f'{{"session_id": "web-strict", "action": "accept", "values": {{"environment": {DEEP}}}}}',
    ],
    ids=["repeated-name", "nan", "unpaired-surrogate", "deep-nesting"],
)
async def test_web_answer_bodies_that_are_not_strict_json_are_400_invalid_request_and_the_form_stays_answerable(
    running: RunningStack, body: str
) -> None:
    opened = await open_deploy_form(running, "web-strict")
    web = running.endpoints.web
    async with httpx.AsyncClient(base_url=web, timeout=30) as client:
        csrf = (await client.get("/api/session")).json()["csrf"]
        response = await client.post(
            f"/api/interactions/{opened.form.interaction_id}/answer",
            content=body.encode(),
            headers={"Content-Type": "application/json", "Origin": web, "X-Maka-CSRF": csrf},
        )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["reason"] == "INVALID_REQUEST"
    await still_answerable_then_staging(running, opened)
    assert "Exception in ASGI application" not in running.log("web")


async def test_a_web_answer_body_with_a_key_the_page_never_sends_is_400_and_nothing_is_committed(
    running: RunningStack,
) -> None:
    opened = await open_deploy_form(running, "web-keys")
    web = running.endpoints.web
    body = {"session_id": "web-keys", "action": "accept", "value": {"environment": "production", "confirm": True}}
    async with httpx.AsyncClient(base_url=web, timeout=30) as client:
        csrf = (await client.get("/api/session")).json()["csrf"]
        response = await client.post(
            f"/api/interactions/{opened.form.interaction_id}/answer",
            json=body,
            headers={"Origin": web, "X-Maka-CSRF": csrf},
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["reason"] == "INVALID_REQUEST"
    assert error["violations"] == [
        {"path": "/value", "reason": "ANSWER_UNKNOWN_FIELD", "description": "is not a key of an answer body"}
    ]
    await still_answerable_then_staging(running, opened)


@pytest.mark.parametrize(
    "arguments_json",
    [
        '{"artifact": "build\\ud800"}',
        '{"artifact": "build-1", "artifact": "build-2"}',
        '{"artifact": NaN}',
        f'{{"artifact": {DEEP}}}',
    ],
    ids=["unpaired-surrogate", "repeated-name", "nan", "deep-nesting"],
)
async def test_tool_arguments_that_are_not_strict_json_fail_invalid_request_and_the_mcp_connection_stays_up(
    running: RunningStack, arguments_json: str
) -> None:
    request = broker_pb2.CallToolRequest(
        session_id="args-strict",
        turn_id="turn-strict",
        tool_use_id="use-strict",
        tool_name="examples:ping",
        arguments_json=arguments_json,
    )
    async with grpc.aio.insecure_channel(running.endpoints.broker) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        events = [event async for event in stub.CallTool(request, timeout=60)]
    last = events[-1]
    assert last.WhichOneof("event") == "failure", last
    assert last.failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST
    ran = await maka("call", "examples:ping", state_dir=state_dir(running))
    assert (ran.code, ran.out.strip()) == (0, "pong"), ran.err
    assert "mcp_connection_lost" not in running.log("provider")


@pytest.mark.parametrize(
    "args",
    ['{"artifact": "build\\ud800"}', '{"artifact": "build-1", "artifact": "build-2"}', f'{{"artifact": {DEEP}}}'],
    ids=["unpaired-surrogate", "repeated-name", "deep-nesting"],
)
async def test_cli_call_arguments_that_are_not_strict_json_are_a_usage_error(running: RunningStack, args: str) -> None:
    ran = await maka("call", "examples:deploy", "--args", args, state_dir=state_dir(running))
    assert ran.code == 2, ran.err
    assert ran.err.startswith("USAGE: --args "), ran.err
    assert "Traceback" not in ran.err


async def test_an_overlong_interaction_id_or_field_name_gets_its_stable_reason_not_a_transport_error(
    running: RunningStack,
) -> None:
    opened = await open_deploy_form(running, "long-names")
    long_name = "k" * 100_000
    requests = {
        InteractionErrorReason.NOT_FOUND: interaction_service_pb2.AnswerRequest(
            interaction_id="ix_" + "a" * 100_000, answer=form_pb2.Answer(action=form_pb2.ACTION_DECLINE)
        ),
        InteractionErrorReason.INVALID_ANSWER: interaction_service_pb2.AnswerRequest(
            interaction_id=opened.form.interaction_id,
            answer=form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values={long_name: form_pb2.Value(string_value="x")}),
        ),
    }
    async with grpc.aio.insecure_channel(running.endpoints.interaction) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        for reason, request in requests.items():
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Answer(request, timeout=10)
            detail = error_from_rpc(refused.value)
            assert detail.reason is reason, (refused.value.code(), refused.value.details())
            assert len(detail.message) <= 1000
            assert all(len(path) <= 300 for path, _ in detail.violations)
    await still_answerable_then_staging(running, opened)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            '{"mcpServers": {"x": {"command": "python"}, "x": {"url": "http://127.0.0.1:9/mcp"}}}',
            'not valid JSON: the name "x" appears twice in one object',
        ),
        ("[" * 100_000, "not valid JSON: nested deeper than 64 levels"),
        ('{"mcpServers": {"x": {"command": "python", "timeout": NaN}}}', "not valid JSON: NaN is not a JSON number"),
    ],
    ids=["server-named-twice", "deep-nesting", "nan"],
)
async def test_a_config_file_that_is_not_strict_json_is_config_invalid_in_check_and_up(
    tmp_path: Path, document: str, problem: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(document, encoding="utf-8")
    checked = await maka("config", "check", str(config), state_dir=None)
    assert checked.code == 2, checked.err
    assert checked.err.strip() == f"CONFIG_INVALID: {config}: $: {problem}"
    up = await maka("up", "--config", str(config), "--ports", "ephemeral", state_dir=tmp_path / "state")
    assert up.code == 3, up.err
    assert f"CONFIG_INVALID: {config}: $: {problem}" in up.err
    assert "Traceback" not in up.err + checked.err


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def test_answers_with_long_unknown_field_names_are_refused_without_the_service_keeping_the_names(
    running: RunningStack,
) -> None:
    opened = await open_deploy_form(running, "long-keys")
    interaction_pid = running.endpoints.pids["interaction"]

    async def hostile_answers(count: int, offset: int) -> None:
        async with grpc.aio.insecure_channel(running.endpoints.interaction) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            for i in range(offset, offset + count):
                answer = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT)
                answer.values[f"{i:06d}" + "k" * 100_000].CopyFrom(form_pb2.Value(string_value="x"))
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Answer(
                        interaction_service_pb2.AnswerRequest(interaction_id=opened.form.interaction_id, answer=answer),
                        timeout=10,
                    )
                assert error_from_rpc(refused.value).reason is InteractionErrorReason.INVALID_ANSWER

    await hostile_answers(30, 0)  # warm up the service's buffers
    before = rss_bytes(interaction_pid)
    await hostile_answers(300, 30)
    grown = rss_bytes(interaction_pid) - before
    assert grown < 25 * 1024 * 1024, f"the Interaction service grew {grown // 1024} KiB over 300 refused answers"
    await still_answerable_then_staging(running, opened)


@pytest.mark.parametrize(
    "argv",
    [
        ["tools", "--broker", "127.0.0.1:99999"],
        ["call", "examples:ping", "--broker", "127.0.0.1:65536"],
        ["stop", "--all", "--broker", "localhost:0"],
        ["pending", "--interaction", "127.0.0.1:123456"],
        ["answer", "ix_1", "decline", "--interaction", "[::1]:70000"],
    ],
    ids=["tools", "call", "stop", "pending", "answer"],
)
async def test_an_address_whose_port_is_out_of_range_is_a_usage_error_not_a_dial_to_another_port(
    tmp_path: Path, argv: list[str]
) -> None:
    ran = await maka(*argv, state_dir=tmp_path)
    assert ran.code == 2, ran.err
    assert "port must be 1-65535" in ran.err
    assert "Traceback" not in ran.err


async def test_an_interactive_answer_whose_input_ends_says_nothing_was_sent_and_the_form_stays_answerable(
    running: RunningStack,
) -> None:
    opened = await open_deploy_form(running, "walk-eof")
    process = await asyncio.create_subprocess_exec(
        *MAKA, "answer", opened.form.interaction_id, "--state-dir", str(state_dir(running)),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    async with asyncio.timeout(60):
        _out, err = await process.communicate()
    assert (process.returncode, err.decode()) == (3, "NOT_ANSWERED: the input ended; nothing was sent\n")
    await still_answerable_then_staging(running, opened)
