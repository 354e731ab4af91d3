"""Maka's own ``requestState`` (pure logic): sealed, verified, bound to its call and its client, refused when altered
or old; detached calls kept through a closed stream for the reattach grace, stopped after it or on close."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent

from surfaces.common.interactions import Interactions
from surfaces.mcp.elicit import CallCap, Calls, DetachedCall, State, StateSeal, call_digest, declares_form_elicitation


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


STATE = State("call-1", ("int-1", "int-2"), call_digest("examples.deploy", {"artifact": "a"}))


def _refused(seal: StateSeal, token: str) -> MCPError:
    with pytest.raises(MCPError) as raised:
        seal.open(token)
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.error.data == {"reason": "invalid_request_state"}
    return raised.value


def test_a_sealed_state_opens_to_the_call_and_interactions_it_names() -> None:
    seal = StateSeal(b"k" * 32, 60)
    assert seal.open(seal.seal(STATE)) == STATE


def test_an_altered_payload_or_mac_is_refused() -> None:
    seal = StateSeal(b"k" * 32, 60)
    payload, mac = seal.seal(STATE).split(".")
    other_payload, _ = seal.seal(State("call-2", ("int-1",), STATE.digest)).split(".")
    _refused(seal, f"{other_payload}.{mac}")
    _refused(seal, f"{payload}.{mac[:-3]}AAA")
    _refused(seal, "not a state")


def test_a_state_from_another_key_is_refused() -> None:
    _refused(StateSeal(b"a" * 32, 60), StateSeal(b"b" * 32, 60).seal(STATE))
    _refused(StateSeal(None, 60), StateSeal(None, 60).seal(STATE))  # random per-process keys differ


def test_an_expired_state_is_refused() -> None:
    clock = _Clock()
    seal = StateSeal(b"k" * 32, 60, clock)
    token = seal.seal(STATE)
    clock.now += 61
    assert "expired" in _refused(seal, token).error.message


def test_the_digest_binds_the_tool_name_and_arguments() -> None:
    assert call_digest("t", {"a": 1, "b": 2}) == call_digest("t", {"b": 2, "a": 1})
    assert call_digest("t", {"a": 1}) != call_digest("t", {"a": 2})
    assert call_digest("t", {"a": 1}) != call_digest("u", {"a": 1})


def test_an_empty_elicitation_capability_means_form() -> None:
    from mcp_types import ClientCapabilities

    assert declares_form_elicitation(ClientCapabilities.model_validate({"elicitation": {}}))
    assert declares_form_elicitation(ClientCapabilities.model_validate({"elicitation": {"form": {}}}))
    assert not declares_form_elicitation(ClientCapabilities.model_validate({"elicitation": {"url": {}}}))
    assert not declares_form_elicitation(ClientCapabilities.model_validate({}))
    assert not declares_form_elicitation(None)


# --------------------------------------------------------------------------- detached calls: owner, grace, client


class _Gate:
    """A detached call's body that runs until released (or cancelled)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, call: DetachedCall) -> CallToolResult:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return CallToolResult(content=[TextContent(type="text", text="done")])


def _calls(grace: float) -> Calls:
    return Calls(StateSeal(b"k" * 32, 60), cast(Interactions, None), grace)


async def _attach_then_close_the_stream(calls: Calls, call: DetachedCall) -> None:
    waiting = asyncio.ensure_future(calls.wait(call))
    for _ in range(100):  # yield to the loop until the wait attached (no time passes)
        if call.attached:
            break
        await asyncio.sleep(0)
    assert call.attached == 1
    waiting.cancel()  # what the SDK does when the request's stream closes
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_call_whose_client_holds_a_state_keeps_running_after_its_stream_closes_and_a_retry_finds_it() -> None:
    calls, gate = _calls(grace=600), _Gate()
    call = calls.start(STATE.digest, "default.alice", gate)
    call.issued = True
    await _attach_then_close_the_stream(calls, call)
    assert calls.running() == 1
    token = calls.seal.seal(State(call.call_id, (), STATE.digest, "default.alice"))
    again, _state = calls.resume(token, STATE.digest, "default.alice")
    assert again is call
    retry = asyncio.ensure_future(calls.wait(again))
    gate.release.set()
    async with asyncio.timeout(10):
        result = await retry
    assert isinstance(result, CallToolResult)
    assert result.content[0].text == "done"  # type: ignore[union-attr]
    assert not gate.cancelled.is_set()


async def test_a_detached_call_is_stopped_when_no_retry_comes_within_the_grace() -> None:
    calls, gate = _calls(grace=0.05), _Gate()
    call = calls.start(STATE.digest, "default.alice", gate)
    call.issued = True
    await _attach_then_close_the_stream(calls, call)
    async with asyncio.timeout(10):
        await gate.cancelled.wait()
    assert calls.running() == 0


async def test_a_call_whose_client_holds_no_state_is_stopped_as_soon_as_its_stream_closes() -> None:
    calls, gate = _calls(grace=600), _Gate()
    call = calls.start(STATE.digest, "default.alice", gate)
    await _attach_then_close_the_stream(calls, call)
    async with asyncio.timeout(10):
        await gate.cancelled.wait()


async def test_closing_the_endpoint_stops_every_detached_call() -> None:
    calls, gate = _calls(grace=600), _Gate()
    call = calls.start(STATE.digest, "default.alice", gate)
    call.issued = True
    await _attach_then_close_the_stream(calls, call)
    await calls.close()
    assert gate.cancelled.is_set()
    assert calls.running() == 0


async def test_a_state_issued_to_one_client_is_refused_to_another() -> None:
    calls, gate = _calls(grace=600), _Gate()
    call = calls.start(STATE.digest, "default.alice", gate)
    token = calls.seal.seal(State(call.call_id, ("int-1",), STATE.digest, "default.alice"))
    with pytest.raises(MCPError) as raised:
        calls.resume(token, STATE.digest, "default.bob")
    assert raised.value.error.data == {"reason": "invalid_request_state"}
    assert "another client" in raised.value.error.message
    assert calls.resume(token, STATE.digest, "default.alice")[0] is call
    await calls.close()


async def test_a_state_issued_to_one_principal_is_refused_to_another_in_the_same_session() -> None:
    calls, gate = _calls(grace=600), _Gate()
    call = calls.start(STATE.digest, "default", gate, principal="carol")
    token = calls.seal.seal(State(call.call_id, ("int-1",), STATE.digest, "default", "carol"))
    assert calls.seal.open(token).principal == "carol"
    with pytest.raises(MCPError) as raised:
        calls.resume(token, STATE.digest, "default", "dave")
    assert raised.value.error.data == {"reason": "invalid_request_state"}
    assert calls.resume(token, STATE.digest, "default", "carol")[0] is call
    await calls.close()


def test_a_call_past_the_cap_of_its_principal_is_refused_and_others_are_not() -> None:
    cap = CallCap(2)
    first, _second = cap.take("erin"), cap.take("erin")
    refused = cap.refused("erin")
    assert refused is not None
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]
    assert text.startswith("RESOURCE_EXHAUSTED:")
    assert "2 calls" in text
    assert cap.refused("frank") is None
    first()
    first()  # counted out once only
    assert cap.running("erin") == 1
    assert cap.refused("erin") is None
