"""RFC acceptance criteria about the MCP wire and one logical Tool call, through the whole stack.

One stack (``Stack``: embedded Redis, Interaction service, broker and MCP provider as processes, the
way ``maka up`` starts them) serves four real MCP servers built with the official ``mcp`` SDK, each
with its JSON-RPC traffic captured:

- ``fx``: the low-level fixture server (plaintext ``requestState``) over stdio behind the tee proxy;
- ``hx``: the high-level fixture server (``MCPServer``, sealed ``requestState``) over Streamable HTTP
  with the ASGI body logger;
- ``examples``: the bundled example server (``deploy``, the RFC's user scenario) over stdio;
- ``legacy``: the low-level server made legacy-only (``server/discover`` answered ``-32601``), ``era: auto``.

Each test uses its own session, so the shared stack's tests never see each other's forms.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from tests.acceptance.harness import (
    acceptance_stack,
    claimed_capabilities,
    http_entry,
    http_fixture_server,
    legacy_only_stdio,
    tee_stdio,
    write_config,
)
from tests.fixtures.mcp_servers.scenarios import MULTI_KEYS
from tests.helpers.stack import RunningStack, answer, pending_forms
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire
from tests.reliability.harness import ToolCall, get_interaction, redis_dump, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

FORM_CLAIM: dict[str, Any] = {"elicitation": {"form": {}}}
"""What a modern ``tools/call`` with the whole form path installed declares in ``_meta`` (RFC criterion 15)."""

LOW = ("tests.fixtures.mcp_servers.mrtr_server", "--kind", "low")


@dataclass
class Shared:
    """The shared stack and the captured wire of each MCP server."""

    running: RunningStack
    fx: Wire
    hx: Wire
    examples: Wire
    legacy: Wire

    @property
    def broker(self) -> str:
        return self.running.endpoints.broker

    @property
    def interaction(self) -> str:
        return self.running.endpoints.interaction


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    """One stack with ``fx``, ``hx``, ``examples`` and ``legacy`` (see the module docstring)."""
    root = tmp_path_factory.mktemp("acceptance-wire")
    fx, examples, legacy = Wire(root / "fx.log"), Wire(root / "examples.log"), Wire(root / "legacy.log")
    async with http_fixture_server(root / "hx", "high") as (url, hx):
        config = write_config(
            root,
            {
                "fx": tee_stdio(fx.path, *LOW),
                "hx": http_entry(url),
                "examples": tee_stdio(examples.path, "examples.deploy_server"),
                "legacy": legacy_only_stdio(legacy.path, *LOW),
            },
        )
        async with acceptance_stack(root, config) as running:
            yield Shared(running, fx, hx, examples, legacy)


def terminal_count(call: ToolCall) -> int:
    """How many events ended the call (exactly one, always)."""
    return sum(kind in ("result", "failure", "lost", "stopped") for kind in call.kinds())


async def nth_awaiting(call: ToolCall, n: int) -> str:
    """The interaction id of the call's ``n``-th ``awaiting_interaction`` event (bounded wait)."""

    def ids() -> list[str]:
        return [
            e.awaiting_interaction.interaction_id
            for e in call.events
            if e.WhichOneof("event") == "awaiting_interaction"
        ]

    await eventually(lambda: len(ids()) >= n or terminal_count(call) > 0, what=f"awaiting #{n}", timeout=60)
    assert len(ids()) >= n, call.kinds()
    return ids()[n - 1]


def payload(event: broker_pb2.CallToolResponse) -> dict[str, Any]:
    """The JSON the fixture server put in its complete result's text (what it saw on the last leg)."""
    result = json.loads(event.result.call_tool_result_json)
    seen: dict[str, Any] = json.loads(result["content"][0]["text"])
    return seen


def text_of(event: broker_pb2.CallToolResponse) -> str:
    assert event.WhichOneof("event") == "result", event
    result = json.loads(event.result.call_tool_result_json)
    return "\n".join(block["text"] for block in result["content"] if block.get("type") == "text")


async def form_of(shared: Shared, call: ToolCall) -> interaction_pb2.Interaction:
    """The Interaction record the call is waiting on (``GetInteraction``)."""
    return await get_interaction(shared.interaction, await call.awaiting(timeout=60))


PROFILE = {"name": form_pb2.Value(string_value="Ada"), "age": form_pb2.Value(integer_value=36)}
PROFILE_CONTENT = {"name": "Ada", "age": 36}
"""What the server receives for :data:`PROFILE`: exactly the typed values. ``color`` (default ``red``) was left
out of the answer and stays out: the Host never refills a default
(docs/acceptance.md#protocol-and-form-correctness)."""


async def test_c01_a_modern_tool_asks_one_form_gets_a_typed_accept_and_completes_on_a_second_call(
    shared: Shared,
) -> None:
    async with ToolCall(shared.broker, "examples:deploy", {"artifact": "build-42"}, session="c01") as call:
        form = await form_of(shared, call)
        assert form.state == interaction_pb2.INTERACTION_STATE_PENDING
        assert form.form.message == "Choose the deployment target"
        environment, confirm = form.form.fields
        assert (environment.name, environment.required, environment.WhichOneof("kind")) == (
            "environment",
            True,
            "single_select",
        )
        assert [o.value for o in environment.single_select.options] == ["staging", "production"]
        assert (confirm.name, confirm.WhichOneof("kind")) == ("confirm", "boolean")
        assert form.form.requester.claimed_server == "examples"
        assert form.form.requester.claimed_tool == "deploy"
        values = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}
        await answer(shared.interaction, form, form_pb2.ACTION_ACCEPT, values, submission_id="c01")
        final = await call.terminal(timeout=60)

    assert text_of(final) == "Deployed build-42 to staging."
    first, retry = shared.examples.tool_calls("deploy", where={"artifact": "build-42"})
    assert "inputResponses" not in first["params"]
    assert retry["params"]["inputResponses"] == {
        "target": {"action": "accept", "content": {"environment": "staging", "confirm": True}}
    }


@pytest.mark.parametrize("server", ["fx", "hx"], ids=["stdio", "streamable-http"])
async def test_c02_the_retry_has_a_fresh_id_the_original_params_bare_responses_and_the_exact_request_state(
    shared: Shared, server: str
) -> None:
    wire: Wire = getattr(shared, server)
    state = f'opaque ✓ state\u2028with "quotes" and a NUL-free \\ tail for {server}'
    arguments = {"state": state, "note": f"c02-{server}"}
    async with ToolCall(shared.broker, f"{server}:ask", arguments, session=f"c02-{server}") as call:
        form = await form_of(shared, call)
        await answer(shared.interaction, form, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c02")
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "result", final

    first, retry = wire.tool_calls("ask", where={"note": f"c02-{server}"})
    # Fresh JSON-RPC id: a new request, not a continuation of the first leg.
    assert retry["id"] != first["id"]
    assert [m["id"] for m in wire.requests("tools/call")].count(retry["id"]) == 1
    # Deep-equal original Tool name and arguments.
    assert retry["params"]["name"] == first["params"]["name"] == "ask"
    assert retry["params"]["arguments"] == first["params"]["arguments"] == arguments
    # Bare inputResponses under the server's key: exactly the ElicitResult, nothing wrapped around it.
    assert retry["params"]["inputResponses"] == {"profile": {"action": "accept", "content": PROFILE_CONTENT}}
    # Byte-identical requestState: what the server sent is exactly what came back.
    sent = wire.response(first["id"])["result"]["requestState"]
    assert isinstance(sent, str)
    assert sent
    assert retry["params"]["requestState"].encode("utf-8") == sent.encode("utf-8")
    if server == "hx":
        assert sent.startswith("v1.")  # MCPServer sealed it: opaque to Maka
    else:
        assert sent == state
    assert payload(final)["state"] == state  # the server accepted the echo and saw its own state


async def test_c03_a_two_round_tool_is_one_logical_call_with_one_final_result(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:two_rounds", {"tag": "c03"}, session="c03") as call:
        first = await form_of(shared, call)
        await answer(shared.interaction, first, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c03-1")
        second = await get_interaction(shared.interaction, await nth_awaiting(call, 2))
        await answer(
            shared.interaction,
            second,
            form_pb2.ACTION_ACCEPT,
            {"count": form_pb2.Value(integer_value=3)},
            submission_id="c03-2",
        )
        final = await call.terminal(timeout=60)

    assert [k for k in call.kinds() if k != "progress"] == [
        "accepted",
        "awaiting_interaction",
        "interaction_settled",
        "awaiting_interaction",
        "interaction_settled",
        "result",
    ]
    assert first.interaction_id != second.interaction_id
    assert first.binding.invocation_id == second.binding.invocation_id == call.events[0].accepted.invocation_id
    assert first.binding.tool_use_id == second.binding.tool_use_id
    legs = shared.fx.tool_calls("two_rounds", where={"tag": "c03"})
    assert len(legs) == 3
    assert len({leg["id"] for leg in legs}) == 3
    # Each retry carries only the current round's responses.
    assert list(legs[1]["params"]["inputResponses"]) == ["first"]
    assert legs[2]["params"]["inputResponses"] == {"second": {"action": "accept", "content": {"count": 3}}}
    assert payload(final)["responses"] == {"second": {"action": "accept", "content": {"count": 3}}}


@pytest.mark.parametrize(
    ("action", "expected_text", "expected_response"),
    [
        (
            form_pb2.ACTION_ACCEPT,
            "Deployed build-9 to production.",
            {"action": "accept", "content": {"environment": "production", "confirm": True}},
        ),
        (
            form_pb2.ACTION_DECLINE,
            "Deployment of build-9 was declined by the user; nothing was deployed.",
            {"action": "decline"},
        ),
        (
            form_pb2.ACTION_CANCEL,
            "Deployment of build-9 was cancelled by the user; nothing was deployed.",
            {"action": "cancel"},
        ),
    ],
    ids=["accept", "decline", "cancel"],
)
async def test_c04_accept_decline_and_cancel_stay_distinct_from_the_form_to_the_server(
    shared: Shared, action: form_pb2.Action.ValueType, expected_text: str, expected_response: dict[str, Any]
) -> None:
    name = form_pb2.Action.Name(action)
    session = f"c04-{name}"
    values = (
        {"environment": form_pb2.Value(string_value="production"), "confirm": form_pb2.Value(boolean_value=True)}
        if action == form_pb2.ACTION_ACCEPT
        else {}
    )
    artifact = f"build-9-{name}"
    async with ToolCall(shared.broker, "examples:deploy", {"artifact": artifact}, session=session) as call:
        form = await form_of(shared, call)
        settled = await answer(shared.interaction, form, action, values, submission_id=session)
        final = await call.terminal(timeout=60)

    assert settled.answer.action == action
    settled_event = await call.wait_for("interaction_settled")
    assert settled_event.interaction_settled.action == action
    assert text_of(final) == expected_text.replace("build-9", artifact)
    first, retry = shared.examples.tool_calls("deploy", where={"artifact": artifact})
    assert "inputResponses" not in first["params"]
    assert retry["params"]["inputResponses"] == {"target": expected_response}


async def test_c05_several_forms_of_one_round_are_answered_under_the_exact_server_keys_in_one_retry(
    shared: Shared,
) -> None:
    async with ToolCall(shared.broker, "fx:multi", {"tag": "c05"}, session="c05") as call:
        messages = []
        for n in range(1, len(MULTI_KEYS) + 1):
            form = await get_interaction(shared.interaction, await nth_awaiting(call, n))
            messages.append(form.form.message)
            # Legs so far: only the first; nothing is retried before every form of the round is answered.
            assert len(shared.fx.tool_calls("multi", where={"tag": "c05"})) == 1
            await answer(
                shared.interaction,
                form,
                form_pb2.ACTION_ACCEPT,
                {"ok": form_pb2.Value(boolean_value=n % 2 == 1)},
                submission_id=f"c05-{n}",
            )
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "result", final
    assert messages == [f"Confirm {key}" for key in sorted(MULTI_KEYS)]  # deterministic key order
    first, retry = shared.fx.tool_calls("multi", where={"tag": "c05"})
    expected = {key: {"action": "accept", "content": {"ok": n % 2 == 1}} for n, key in enumerate(sorted(MULTI_KEYS), 1)}
    assert retry["params"]["inputResponses"] == expected
    assert list(first["params"]["arguments"]) == ["tag"]


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("fx:nested", {"tag": "c05-nested"}, broker_pb2.FAILURE_CODE_INVALID_FORM),
        ("fx:many", {"tag": "c05-many", "n": 9}, broker_pb2.FAILURE_CODE_LIMITS_EXCEEDED),
    ],
    ids=["malformed-nested-schema", "over-the-per-round-cap"],
)
async def test_c05_a_malformed_or_over_limit_round_fails_before_any_form_or_retry(
    shared: Shared, tool: str, arguments: dict[str, Any], code: broker_pb2.FailureCode.ValueType
) -> None:
    session = f"c05-{arguments['tag']}"
    async with ToolCall(shared.broker, tool, arguments, session=session) as call:
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "failure", final
    assert final.failure.code == code
    assert "awaiting_interaction" not in call.kinds()
    assert terminal_count(call) == 1
    assert len(shared.fx.tool_calls(tool.split(":")[1], where={"tag": arguments["tag"]})) == 1
    assert await pending_forms(shared.interaction, [session]) == []


async def test_c05_an_answer_that_breaks_the_schema_is_refused_and_the_form_stays_answerable(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:ask", {"note": "c05-invalid"}, session="c05-invalid") as call:
        form = await form_of(shared, call)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await answer(
                shared.interaction,
                form,
                form_pb2.ACTION_ACCEPT,
                {"name": form_pb2.Value(string_value="Ada"), "age": form_pb2.Value(integer_value=151)},
                submission_id="c05-bad",
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert len(shared.fx.tool_calls("ask", where={"note": "c05-invalid"})) == 1
        still = await get_interaction(shared.interaction, form.interaction_id)
        assert still.state == interaction_pb2.INTERACTION_STATE_PENDING
        await answer(shared.interaction, form, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c05-good")
        final = await call.terminal(timeout=60)

    assert payload(final)["responses"] == {"profile": {"action": "accept", "content": PROFILE_CONTENT}}


async def test_c06_state_only_results_are_retried_without_a_form_until_the_server_asks(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:state_only", {"tag": "c06", "n": 2}, session="c06") as call:
        form = await form_of(shared, call)
        legs = shared.fx.tool_calls("state_only", where={"tag": "c06"})
        assert [leg["params"].get("requestState") for leg in legs] == [None, "s:1", "s:2"]
        assert all("inputResponses" not in leg["params"] for leg in legs)
        await answer(shared.interaction, form, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c06")
        final = await call.terminal(timeout=60)

    assert call.kinds().count("awaiting_interaction") == 1
    assert payload(final)["state"] == "s:2"
    assert len(shared.fx.tool_calls("state_only", where={"tag": "c06"})) == 4


async def test_c06_the_round_cap_ends_a_server_that_never_progresses(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:forever_state", {"tag": "c06-cap"}, session="c06-cap") as call:
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "failure", final
    assert final.failure.code == broker_pb2.FAILURE_CODE_ROUNDS_EXHAUSTED
    assert terminal_count(call) == 1
    legs = shared.fx.tool_calls("forever_state", where={"tag": "c06-cap"})
    assert len(legs) == 11  # the first leg + the default cap of 10 retries, then nothing more
    assert all(leg["params"]["requestState"] == "forever" for leg in legs[1:])


@pytest.mark.parametrize("tool", ["url_mode", "mixed", "roots"], ids=["url-elicitation", "sampling", "roots"])
async def test_c11_unsupported_input_requests_fail_with_a_stable_error_and_no_partial_retry(
    shared: Shared, tool: str
) -> None:
    session = f"c11-{tool}"
    async with ToolCall(shared.broker, f"fx:{tool}", {"tag": session}, session=session) as call:
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "failure", final
    assert final.failure.code == broker_pb2.FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST
    assert "awaiting_interaction" not in call.kinds()  # not even the form sibling of "mixed" is shown
    assert len(shared.fx.tool_calls(tool, where={"tag": session})) == 1
    assert await pending_forms(shared.interaction, [session]) == []


async def test_c12_request_state_never_reaches_events_records_redis_or_logs(shared: Shared) -> None:
    async with ToolCall(shared.broker, "hx:two_rounds", {}, session="c12") as call:
        first = await form_of(shared, call)
        await answer(shared.interaction, first, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c12-1")
        second = await get_interaction(shared.interaction, await nth_awaiting(call, 2))
        await answer(
            shared.interaction,
            second,
            form_pb2.ACTION_ACCEPT,
            {"count": form_pb2.Value(integer_value=7)},
            submission_id="c12-2",
        )
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "result", final

    legs = shared.hx.tool_calls("two_rounds")
    tokens = {shared.hx.response(leg["id"])["result"].get("requestState") for leg in legs[-3:]} - {None}
    assert len(tokens) == 2
    assert all(token.startswith("v1.") for token in tokens)
    records = [await get_interaction(shared.interaction, ix.interaction_id) for ix in (first, second)]
    places = {
        "CallTool events": b"".join(event.SerializeToString() for event in call.events)
        + str(list(call.events)).encode(),
        "Interaction records": b"".join(r.SerializeToString() for r in records) + str(records).encode(),
        "Redis": await redis_dump(shared.running.endpoints.redis_url),
        "service logs": shared.running.all_logs().encode(),
    }
    for token in tokens:
        for place, content in places.items():
            assert token.encode() not in content, f"requestState leaked into {place}"
            assert token[:40].encode() not in content, f"a requestState prefix leaked into {place}"


@pytest.mark.parametrize("server", ["fx", "legacy"], ids=["modern", "legacy"])
async def test_c13_a_complete_result_passes_through_unchanged_after_exactly_one_call(
    shared: Shared, server: str
) -> None:
    wire: Wire = getattr(shared, server)
    arguments = {"text": f"c13 ✓ {server}", "tag": f"c13-{server}"}
    async with ToolCall(shared.broker, f"{server}:echo", arguments, session=f"c13-{server}") as call:
        final = await call.terminal(timeout=60)

    assert [k for k in call.kinds() if k != "progress"] == ["accepted", "result"]
    [leg] = wire.tool_calls("echo", where={"tag": f"c13-{server}"})
    sent = wire.response(leg["id"])["result"]
    got = json.loads(final.result.call_tool_result_json)
    assert got["content"] == sent["content"]
    assert got.get("isError", False) is sent.get("isError", False) is False
    assert payload(final)["arguments"] == arguments


async def test_c13_a_server_error_is_one_stable_failure_with_no_retry(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:fail", {"tag": "c13-fail"}, session="c13-fail") as call:
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "failure", final
    assert final.failure.code == broker_pb2.FAILURE_CODE_SERVER_ERROR
    assert terminal_count(call) == 1
    assert len(shared.fx.tool_calls("fail", where={"tag": "c13-fail"})) == 1


@pytest.mark.parametrize("server", ["fx", "hx"], ids=["stdio", "streamable-http"])
async def test_c15_auto_against_a_modern_server_advertises_form_elicitation_on_every_leg_of_an_eligible_call(
    shared: Shared, server: str
) -> None:
    wire: Wire = getattr(shared, server)
    note = f"c15-{server}"
    async with ToolCall(shared.broker, f"{server}:ask", {"note": note}, session=note) as call:
        form = await form_of(shared, call)
        await answer(shared.interaction, form, form_pb2.ACTION_DECLINE, submission_id=note)
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "result", final

    assert wire.requests("initialize") == []  # negotiated modern: no legacy handshake at all
    discover = wire.requests("server/discover")
    assert discover
    assert all("elicitation" not in json.dumps(claimed_capabilities(d)) for d in discover)
    legs = wire.tool_calls("ask", where={"note": note})
    assert len(legs) == 2
    assert [claimed_capabilities(leg) for leg in legs] == [FORM_CLAIM, FORM_CLAIM]
    assert payload(final)["capabilities"] == FORM_CLAIM


async def test_c15_auto_against_a_legacy_only_server_falls_back_and_never_advertises_elicitation(
    shared: Shared,
) -> None:
    async with ToolCall(shared.broker, "legacy:caps", {"tag": "c15-legacy"}, session="c15-legacy") as caps:
        seen = await caps.terminal(timeout=60)
    async with ToolCall(shared.broker, "legacy:needs_ui", {"tag": "c15-legacy-ui"}, session="c15-legacy") as needs:
        refused = await needs.terminal(timeout=60)

    messages = shared.legacy.messages()
    [probe] = shared.legacy.requests("server/discover")
    [probe_answer] = [m for d, m in messages if d == "S->C" and m.get("id") == probe["id"]]
    assert probe_answer["error"]["code"] == -32601  # the legacy-only server: fall back
    [initialize] = shared.legacy.requests("initialize")
    assert initialize["params"]["protocolVersion"] != "2026-07-28"
    assert "elicitation" not in initialize["params"]["capabilities"]
    for direction, message in messages:
        if direction == "C->S" and message.get("method") == "tools/call":
            assert "elicitation" not in json.dumps(claimed_capabilities(message)), message
    assert payload(seen)["capabilities"] in (None, {})
    assert refused.WhichOneof("event") == "failure", refused
    assert refused.failure.code == broker_pb2.FAILURE_CODE_MISSING_CLIENT_CAPABILITY
    assert await pending_forms(shared.interaction, ["c15-legacy"]) == []


async def test_c16_final_result_and_failure_paths_leave_no_pending_form(shared: Shared) -> None:
    async with ToolCall(shared.broker, "fx:bad_state", {"tag": "c16"}, session="c16") as failing:
        form = await form_of(shared, failing)
        await answer(shared.interaction, form, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="c16")
        failed = await failing.terminal(timeout=60)

    assert failed.WhichOneof("event") == "failure", failed
    assert failed.failure.code == broker_pb2.FAILURE_CODE_REQUEST_STATE_REJECTED
    assert terminal_count(failing) == 1
    record = await wait_settled(shared.interaction, form.interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert len(shared.fx.tool_calls("bad_state", where={"tag": "c16"})) == 2  # no second retry
    # Every session of this module: nothing left pending after final results and failures.
    sessions = ["c01", "c03", "c05", "c06", "c12", "c16", "c02-fx", "c02-hx", "c15-fx", "c15-hx", "c05-invalid"]
    assert await pending_forms(shared.interaction, sessions) == []
