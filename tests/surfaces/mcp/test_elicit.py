"""Maka's own ``requestState`` (pure logic): sealed, verified, bound to its call, refused when altered or old."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from surfaces.mcp.elicit import State, StateSeal, call_digest, declares_form_elicitation


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
