"""McpClientManager's manual MRTR loop against real SDK servers, with the JSON-RPC traffic captured."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from maka.broker.v1 import broker_pb2
from services.core.form import Action, Answer, Form
from services.mcp_provider import capabilities
from services.mcp_provider.errors import CallErrorCode, InteractionAborted, McpToolCallError
from services.mcp_provider.manager import McpClientManager
from services.mcp_provider.stop import Stop
from tests.fixtures.mcp_servers.scenarios import MULTI_KEYS, PROMPT_STATE
from tests.helpers.mcp_servers import ALL_SERVERS, LOW_SERVERS, ScriptedForms, Served, accept, serve_mcp
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.slow

ADA = {"action": "accept", "content": {"name": "Ada"}}
"""The bare ElicitResult of ``accept(name="Ada")`` on the profile form: exactly what was answered (``color``,
left out, is never refilled with its default: docs/acceptance.md#protocol-and-form-correctness)."""


def _text(result: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(result["content"][0]["text"])
    return seen


@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_accepted_form_retries_with_fresh_id_same_params_bare_response_and_exact_state(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(accept(name="Ada", age=36, color="blue"))
        arguments = {"state": "s-1", "note": "héllo"}
        outcome = await served.manager.call_tool("fx", "ask", arguments, form_handler=forms)

        seen = _text(outcome.result)
        assert seen["responses"] == {
            "profile": {"action": "accept", "content": {"name": "Ada", "age": 36, "color": "blue"}}
        }
        assert seen["state"] == "s-1"
        assert outcome.retries == 1
        assert [f.requester.claimed_server for f in forms.forms] == ["fx"]
        assert [f.requester.claimed_tool for f in forms.forms] == ["ask"]

        first, retry = served.wire.tool_calls("ask")
        assert first["id"] != retry["id"]
        assert retry["params"]["name"] == first["params"]["name"] == "ask"
        assert retry["params"]["arguments"] == first["params"]["arguments"] == arguments
        assert "inputResponses" not in first["params"]
        assert "requestState" not in first["params"]
        assert retry["params"]["inputResponses"] == {
            "profile": {"action": "accept", "content": {"name": "Ada", "age": 36, "color": "blue"}}
        }
        sent_state = served.wire.response(first["id"])["result"]["requestState"]
        assert retry["params"]["requestState"] == sent_state
        if kind == "high":
            assert sent_state.startswith("v1."), "MCPServer seals requestState"


@pytest.mark.parametrize("server", ALL_SERVERS)
@pytest.mark.parametrize("action", [Action.DECLINE, Action.CANCEL])
async def test_decline_and_cancel_are_sent_as_distinct_bare_actions(
    server: tuple[str, str], action: Action, tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(lambda form, index: Answer(action))
        outcome = await served.manager.call_tool("fx", "ask", {}, form_handler=forms)

        assert _text(outcome.result)["responses"] == {"profile": {"action": action.value}}
        retry = served.wire.tool_calls("ask")[1]
        assert retry["params"]["inputResponses"] == {"profile": {"action": action.value}}


@pytest.mark.parametrize("server", LOW_SERVERS)
@pytest.mark.parametrize(
    "state",
    [
        pytest.param("état ✓ 状態 🔑 \u0000 \u2028", id="non-ascii"),
        pytest.param('{ "a" :1,  "b":[ "x\\"y" , "\\u00e9" ]\t}\n', id="json-looking"),
        pytest.param("", id="empty"),
        pytest.param("x" * (256 * 1024 - 1024), id="large-near-cap"),
    ],
)
async def test_request_state_is_echoed_byte_identical(server: tuple[str, str], state: str, tmp_path: Path) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(accept(name="Ada"))
        outcome = await served.manager.call_tool("fx", "ask", {"state": state}, form_handler=forms)

        assert _text(outcome.result)["state"] == state
        first, retry = served.wire.tool_calls("ask")
        assert served.wire.response(first["id"])["result"]["requestState"] == state
        assert retry["params"]["requestState"] == state


@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_no_request_state_key_is_sent_when_the_server_sent_none(server: tuple[str, str], tmp_path: Path) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(accept(name="Ada"))
        outcome = await served.manager.call_tool("fx", "ask", {"omit_state": True}, form_handler=forms)

        assert _text(outcome.result)["state"] is None
        first, retry = served.wire.tool_calls("ask")
        assert "requestState" not in served.wire.response(first["id"])["result"]
        assert "requestState" not in retry["params"]
        assert "profile" in retry["params"]["inputResponses"]


@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_two_rounds_ask_different_keys_and_responses_are_replaced_not_accumulated(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:

        def answer(form: Form, index: int) -> Answer:
            return Answer(Action.ACCEPT, {"name": "Ada"} if index == 0 else {"count": 3})

        forms = ScriptedForms(answer)
        outcome = await served.manager.call_tool("fx", "two_rounds", {}, form_handler=forms)

        assert outcome.retries == 2
        assert [f.message for f in forms.forms] == ["First question", "Second question"]
        first, second, third = served.wire.tool_calls("two_rounds")
        assert len({first["id"], second["id"], third["id"]}) == 3
        assert second["params"]["inputResponses"] == {"first": {"action": "accept", "content": {"name": "Ada"}}}
        assert third["params"]["inputResponses"] == {"second": {"action": "accept", "content": {"count": 3}}}
        assert third["params"]["requestState"] == served.wire.response(second["id"])["result"]["requestState"]


@pytest.mark.parametrize("server", LOW_SERVERS)
async def test_multiple_forms_in_one_round_are_asked_in_sorted_key_order_under_exact_keys(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(lambda form, index: Answer(Action.ACCEPT, {"ok": index % 2 == 0}))
        outcome = await served.manager.call_tool("fx", "multi", {}, form_handler=forms)

        ordered = sorted(MULTI_KEYS)
        assert [f.message for f in forms.forms] == [f"Confirm {key}" for key in ordered]
        expected = {key: {"action": "accept", "content": {"ok": index % 2 == 0}} for index, key in enumerate(ordered)}
        assert _text(outcome.result)["responses"] == expected
        assert served.wire.tool_calls("multi")[1]["params"]["inputResponses"] == expected


@pytest.mark.parametrize("server", LOW_SERVERS)
async def test_server_that_reasks_after_decline_gets_a_second_form(server: tuple[str, str], tmp_path: Path) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:

        def answer(form: Form, index: int) -> Answer:
            return Answer(Action.DECLINE) if index == 0 else Answer(Action.ACCEPT, {"ok": True})

        forms = ScriptedForms(answer)
        outcome = await served.manager.call_tool("fx", "reask", {}, form_handler=forms)

        assert [f.message for f in forms.forms] == ["Confirm (ask 1)", "Confirm (ask 2)"]
        calls = served.wire.tool_calls("reask")
        assert [c["params"].get("inputResponses") for c in calls] == [
            None,
            {"confirm": {"action": "decline"}},
            {"confirm": {"action": "accept", "content": {"ok": True}}},
        ]
        assert _text(outcome.result)["state"] == "2"


@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_state_only_rounds_retry_without_a_form_then_ask(server: tuple[str, str], tmp_path: Path) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(accept(name="Ada"))
        outcome = await served.manager.call_tool("fx", "state_only", {"n": 3}, form_handler=forms)

        assert len(forms.forms) == 1
        calls = served.wire.tool_calls("state_only")
        assert len(calls) == 5
        for earlier, later in itertools.pairwise(calls[:4]):
            assert "inputResponses" not in later["params"]
            assert later["params"]["requestState"] == served.wire.response(earlier["id"])["result"]["requestState"]
        assert calls[4]["params"]["inputResponses"] == {"profile": {"action": "accept", "content": {"name": "Ada"}}}
        assert outcome.retries == 4


@pytest.mark.parametrize("tool", ["forever", "forever_state"])
async def test_round_cap_stops_a_never_finishing_server_with_one_stable_error(tool: str, tmp_path: Path) -> None:
    manager = McpClientManager(max_rounds=3, pacing_initial_ms=1, pacing_max_ms=2)
    async with serve_mcp(tmp_path, manager=manager) as served:
        forms = ScriptedForms(lambda form, index: Answer(Action.ACCEPT, {"ok": True}))
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", tool, {}, form_handler=forms)

        assert caught.value.code is CallErrorCode.ROUNDS_EXHAUSTED
        assert len(served.wire.tool_calls(tool)) == 4
        assert len(forms.forms) == (3 if tool == "forever" else 0)


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        ("mixed", CallErrorCode.UNSUPPORTED_INPUT_REQUEST),
        ("url_mode", CallErrorCode.UNSUPPORTED_INPUT_REQUEST),
        ("roots", CallErrorCode.UNSUPPORTED_INPUT_REQUEST),
    ],
)
async def test_unsupported_input_request_fails_the_round_before_any_form_and_sends_no_retry(
    tool: str, code: CallErrorCode, tmp_path: Path
) -> None:
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept(ok=True))
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", tool, {}, form_handler=forms)

        assert caught.value.code is code
        assert forms.forms == []
        assert len(served.wire.tool_calls(tool)) == 1


@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_two_concurrent_invocations_on_one_connection_do_not_leak_into_each_other(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        both_asked = asyncio.Event()
        asked: list[str] = []

        async def call(name: str) -> dict[str, Any]:
            async def form_handler(form: Form) -> Answer:
                asked.append(name)
                if len(asked) == 2:
                    both_asked.set()
                async with asyncio.timeout(10):
                    await both_asked.wait()
                return Answer(Action.ACCEPT, {"name": name})

            outcome = await served.manager.call_tool("fx", "ask", {"state": f"state-{name}"}, form_handler=form_handler)
            return _text(outcome.result)

        alice, bob = await asyncio.gather(call("alice"), call("bob"))

        assert alice["state"] == "state-alice"
        assert alice["responses"] == {"profile": {"action": "accept", "content": {"name": "alice"}}}
        assert bob["state"] == "state-bob"
        assert bob["responses"] == {"profile": {"action": "accept", "content": {"name": "bob"}}}
        calls = served.wire.tool_calls("ask")
        firsts = {c["params"]["arguments"]["state"]: c for c in calls if "inputResponses" not in c["params"]}
        retries = [c for c in calls if "inputResponses" in c["params"]]
        assert len(firsts) == len(retries) == 2
        for retry in retries:
            who = retry["params"]["inputResponses"]["profile"]["content"]["name"]
            first = firsts[f"state-{who}"]
            assert retry["params"]["arguments"] == first["params"]["arguments"]
            assert retry["params"]["requestState"] == served.wire.response(first["id"])["result"]["requestState"]
        states = {served.wire.response(c["id"])["result"]["requestState"] for c in firsts.values()}
        assert len(states) == 2


async def test_result_without_result_type_is_treated_as_complete(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, drop_result_type=True) as served:
        outcome = await served.manager.call_tool("fx", "echo", {"x": 1})

        assert _text(outcome.result)["arguments"] == {"x": 1}
        raw = served.wire.response(served.wire.tool_calls("echo")[0]["id"])
        assert "resultType" not in raw["result"]


async def test_rejected_request_state_fails_with_its_stable_code(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "bad_state", {}, form_handler=ScriptedForms(accept(name="Ada")))

        assert caught.value.code is CallErrorCode.REQUEST_STATE_REJECTED
        assert "will-be-rejected" not in str(caught.value)


@pytest.mark.parametrize(
    ("message", "data", "expected"),
    [
        ("Invalid or expired requestState", None, CallErrorCode.SERVER_ERROR),
        ("bad requeststate, says the server", {"reason": "other"}, CallErrorCode.SERVER_ERROR),
        ("rejected", {"reason": "invalid_request_state"}, CallErrorCode.REQUEST_STATE_REJECTED),
    ],
)
def test_the_request_state_class_is_decided_by_the_code_and_data_not_the_servers_words(
    message: str, data: dict[str, str] | None, expected: CallErrorCode
) -> None:
    error = MCPError(-32602, message, data)

    classified = McpClientManager._from_mcp_error(Any, error, sent_state="st-1")  # type: ignore[arg-type]

    assert classified.code is expected


async def test_missing_client_capability_without_a_form_handler_fails_with_its_stable_code(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "needs_ui", {})

        assert caught.value.code is CallErrorCode.MISSING_CLIENT_CAPABILITY
        assert caught.value.mcp_error_code == -32021


async def test_server_json_rpc_error_is_a_server_error(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "fail", {})

        assert caught.value.code is CallErrorCode.SERVER_ERROR


async def test_form_closed_without_answer_aborts_and_sends_no_retry(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:

        async def closed(form: Form) -> Answer:
            raise InteractionAborted(CallErrorCode.INTERACTION_CLOSED, "host restarted")

        with pytest.raises(InteractionAborted):
            await served.manager.call_tool("fx", "ask", {}, form_handler=closed)

        assert len(served.wire.tool_calls("ask")) == 1


async def test_stop_while_a_form_is_pending_sends_no_retry(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        stop = Stop()
        pending = asyncio.Event()

        async def never_answered(form: Form) -> Answer:
            pending.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        call = asyncio.create_task(served.manager.call_tool("fx", "ask", {}, form_handler=never_answered, stop=stop))
        async with asyncio.timeout(10):
            await pending.wait()
        stop.set()
        with pytest.raises(McpToolCallError) as caught:
            async with asyncio.timeout(10):
                await call

        assert caught.value.code is CallErrorCode.STOPPED
        assert len(served.wire.tool_calls("ask")) == 1


async def test_invalid_answer_against_the_servers_schema_sends_no_retry(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept(name="Ada", age=900))
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "ask", {}, form_handler=forms)

        assert caught.value.code is CallErrorCode.INVALID_ANSWER
        assert "900" not in str(caught.value)
        assert len(served.wire.tool_calls("ask")) == 1


@pytest.mark.parametrize("tool", ["ask", "bad_state"])
async def test_request_state_and_form_values_never_reach_logs_or_errors(
    tool: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = "CANARY-STATE-7f3a"
    value = "CANARY-VALUE-91c2"
    caplog.set_level(logging.DEBUG, logger="maka")
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept(name=value))
        failure: McpToolCallError | None = None
        try:
            await served.manager.call_tool("fx", tool, {"state": state}, form_handler=forms)
        except McpToolCallError as error:
            failure = error

    assert (failure is not None) is (tool == "bad_state")
    if failure is not None:
        assert state not in str(failure)
        assert value not in str(failure)
        assert failure.__cause__ is None

    assert caplog.records, "the manager logged its events"
    for record in caplog.records:
        text = record.getMessage() + repr(record.__dict__)
        assert state not in text
        assert value not in text


async def test_unknown_input_request_method_is_unsupported_not_a_server_error(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, unknown_input_method=True) as served:
        forms = ScriptedForms(accept(ok=True))
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "roots", {}, form_handler=forms)

        assert caught.value.code is CallErrorCode.UNSUPPORTED_INPUT_REQUEST
        assert "unknown method" in caught.value.message
        assert forms.forms == []
        assert len(served.wire.tool_calls("roots")) == 1


@pytest.mark.parametrize(
    ("arguments", "tool"),
    [
        pytest.param({"n": 9}, "many", id="too-many-requests-per-round"),
        pytest.param({"key": "k" * 201}, "ask", id="key-over-length-cap"),
        pytest.param({"state": "x" * (256 * 1024 + 1)}, "ask", id="request-state-over-byte-cap"),
    ],
)
async def test_over_cap_round_fails_with_limits_exceeded_before_any_form_and_no_retry(
    arguments: dict[str, Any], tool: str, tmp_path: Path
) -> None:
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept(ok=True))
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", tool, arguments, form_handler=forms)

        assert caught.value.code is CallErrorCode.LIMITS_EXCEEDED
        assert forms.forms == []
        assert len(served.wire.tool_calls(tool)) == 1


async def test_exactly_at_the_per_round_cap_is_accepted(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept(ok=True))
        await served.manager.call_tool("fx", "many", {"n": 8}, form_handler=forms)

        assert len(forms.forms) == 8


async def test_nested_form_schema_is_an_invalid_form_and_nothing_is_published(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        forms = ScriptedForms(accept())
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "nested", {}, form_handler=forms)

        assert caught.value.code is CallErrorCode.INVALID_FORM
        assert forms.forms == []
        assert len(served.wire.tool_calls("nested")) == 1


async def test_stop_during_state_only_pacing_ends_the_call_without_another_leg(tmp_path: Path) -> None:
    manager = McpClientManager(pacing_initial_ms=60_000, pacing_max_ms=60_000)
    async with serve_mcp(tmp_path, manager=manager) as served:
        stop = Stop()
        call = asyncio.create_task(served.manager.call_tool("fx", "forever_state", {}, stop=stop))

        def first_leg_answered() -> bool:
            legs = served.wire.tool_calls("forever_state")
            return bool(legs) and served.wire.responded(legs[0]["id"])

        await eventually(first_leg_answered, what="first state-only result")
        stop.set()
        with pytest.raises(McpToolCallError) as caught:
            async with asyncio.timeout(10):
                await call

        assert caught.value.code is CallErrorCode.STOPPED
        assert len(served.wire.tool_calls("forever_state")) == 1


async def test_a_form_request_without_a_form_handler_is_unsupported_and_not_retried(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "ask", {})

        assert caught.value.code is CallErrorCode.UNSUPPORTED_INPUT_REQUEST
        assert len(served.wire.tool_calls("ask")) == 1


async def test_sdk_loggers_stay_above_debug_so_raw_messages_are_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from services.mcp_provider.main import quiet_sdk_loggers

    state = "CANARY-HTTP-STATE-55aa"
    caplog.set_level(logging.DEBUG)
    quiet_sdk_loggers()
    async with serve_mcp(tmp_path, transport="http") as served:
        await served.manager.call_tool("fx", "ask", {"state": state}, form_handler=ScriptedForms(accept(name="A")))

    assert not [r for r in caplog.records if state in r.getMessage()]


async def test_state_only_retries_are_paced_with_a_doubling_capped_delay(tmp_path: Path) -> None:
    manager = McpClientManager(pacing_initial_ms=40, pacing_max_ms=80)
    async with serve_mcp(tmp_path, manager=manager) as served:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await served.manager.call_tool("fx", "state_only", {"n": 3}, form_handler=ScriptedForms(accept(name="A")))
        elapsed = loop.time() - started

        # 40 ms, then 80 ms, then capped at 80 ms: at least 200 ms before the form round.
        assert elapsed >= 0.2
        assert len(served.wire.tool_calls("state_only")) == 5


# --- prompts/get and resources/read: one request, never MRTR (RFC criterion 11) ------------------------


def _claimed_capabilities(request: dict[str, Any]) -> dict[str, Any]:
    """The per-request client capabilities the request carried in ``_meta`` (modern stamp)."""
    claimed: dict[str, Any] = request["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]
    return claimed


def _assert_single_unanswered_request(served: Served, method: str) -> dict[str, Any]:
    """Exactly one ``method`` request went out, the server answered it ``input_required``, and it carried
    neither an answer nor state nor an elicitation claim; returns it."""
    (request,) = served.wire.requests(method)
    answered = served.wire.response(request["id"])["result"]
    assert answered["resultType"] == "input_required"
    assert answered["requestState"] == PROMPT_STATE
    assert "inputResponses" not in request["params"]
    assert "requestState" not in request["params"]
    assert "elicitation" not in _claimed_capabilities(request)
    return request


@pytest.mark.parametrize("server", LOW_SERVERS)
async def test_complete_prompt_and_resource_results_pass_through_from_one_request_without_an_elicitation_claim(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        prompt = await served.manager.get_prompt("fx", "plain", {"topic": "tea"})
        resource = await served.manager.read_resource("fx", "fx://plain")

        assert prompt["description"] == "plain"
        (message,) = prompt["messages"]
        assert message["role"] == "user"
        seen = json.loads(message["content"]["text"])
        assert seen["arguments"] == {"topic": "tea"}
        assert "elicitation" not in seen["capabilities"]
        (contents,) = resource["contents"]
        assert contents["uri"] == "fx://plain"
        assert "elicitation" not in json.loads(contents["text"])["capabilities"]
        (prompt_request,) = served.wire.requests("prompts/get")
        (resource_request,) = served.wire.requests("resources/read")
        for request in (prompt_request, resource_request):
            assert "elicitation" not in _claimed_capabilities(request)


@pytest.mark.parametrize("server", LOW_SERVERS)
@pytest.mark.parametrize("prompt", ["ask", "url_mode", "sampling"])
async def test_prompt_answering_input_required_fails_unsupported_method_after_one_request_and_no_retry(
    server: tuple[str, str], prompt: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kind, transport = server
    caplog.set_level(logging.DEBUG, logger="maka")
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.get_prompt("fx", prompt)

        assert caught.value.code is CallErrorCode.UNSUPPORTED_METHOD
        assert broker_pb2.FailureCode.Name(caught.value.failure_code) == "FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST"
        assert caught.value.__cause__ is None
        assert PROMPT_STATE not in str(caught.value)
        request = _assert_single_unanswered_request(served, "prompts/get")
        assert request["params"]["name"] == prompt
        # The connection is still usable: the failure was local, not a broken session.
        assert (await served.manager.get_prompt("fx", "plain"))["description"] == "plain"

    assert caplog.records
    assert not [r for r in caplog.records if PROMPT_STATE in r.getMessage() + repr(r.__dict__)]


@pytest.mark.parametrize("server", LOW_SERVERS)
@pytest.mark.parametrize("uri", ["fx://ask", "fx://roots"])
async def test_resource_answering_input_required_fails_unsupported_method_after_one_request_and_no_retry(
    server: tuple[str, str], uri: str, tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.read_resource("fx", uri)

        assert caught.value.code is CallErrorCode.UNSUPPORTED_METHOD
        assert PROMPT_STATE not in str(caught.value)
        request = _assert_single_unanswered_request(served, "resources/read")
        assert request["params"]["uri"] == uri


async def test_resource_input_request_with_an_unknown_method_is_unsupported_method_not_a_server_error(
    tmp_path: Path,
) -> None:
    async with serve_mcp(tmp_path, unknown_input_method=True) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.read_resource("fx", "fx://roots")

        assert caught.value.code is CallErrorCode.UNSUPPORTED_METHOD
        assert "unknown method" in caught.value.message
        (request,) = served.wire.requests("resources/read")
        assert served.wire.response(request["id"])["result"]["inputRequests"]["roots"]["method"] == "custom/unknown"


async def test_prompt_sent_from_inside_a_form_enabled_tool_call_context_still_claims_no_elicitation(
    tmp_path: Path,
) -> None:
    async with serve_mcp(tmp_path) as served:
        with capabilities.form_call(True):
            with pytest.raises(McpToolCallError) as caught:
                await served.manager.get_prompt("fx", "ask")
            await served.manager.read_resource("fx", "fx://plain")

        assert caught.value.code is CallErrorCode.UNSUPPORTED_METHOD
        _assert_single_unanswered_request(served, "prompts/get")
        (resource_request,) = served.wire.requests("resources/read")
        assert "elicitation" not in _claimed_capabilities(resource_request)


async def test_prompt_and_resource_errors_map_to_stable_codes(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as unknown_prompt:
            await served.manager.get_prompt("fx", "no-such-prompt")
        with pytest.raises(McpToolCallError) as unknown_resource:
            await served.manager.read_resource("fx", "fx://missing")
        with pytest.raises(McpToolCallError) as unknown_server:
            await served.manager.get_prompt("nope", "plain")

        assert unknown_prompt.value.code is CallErrorCode.SERVER_ERROR
        assert unknown_prompt.value.mcp_error_code == -32602
        assert unknown_resource.value.code is CallErrorCode.SERVER_ERROR
        assert unknown_server.value.code is CallErrorCode.UNKNOWN_TOOL
        assert len(served.wire.requests("prompts/get")) == 1
        assert len(served.wire.requests("resources/read")) == 1


async def test_a_prompt_request_with_stop_already_set_sends_nothing_and_fails_stopped(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        stop = Stop()
        stop.set()
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.get_prompt("fx", "plain", stop=stop)

        assert caught.value.code is CallErrorCode.STOPPED
        assert served.wire.requests("prompts/get") == []
