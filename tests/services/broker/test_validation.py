"""Unit tests of the broker's shape checks (`services/broker/validation.py`): pure functions, no broker state."""

from __future__ import annotations

import pytest

from maka.broker.v1 import broker_pb2
from services.broker.validation import (
    MAX_AUTHORIZATION_URL_CHARS,
    check_call_request,
    check_id,
    check_sign_in_status,
    check_tools,
)
from services.core.limits import MAX_ID_CHARS


def _request(**overrides: str) -> broker_pb2.CallToolRequest:
    request = broker_pb2.CallToolRequest(session_id="s1", turn_id="t1", tool_use_id="u1", tool_name="srv:tool")
    for name, value in overrides.items():
        setattr(request, name, value)
    return request


def test_an_id_is_refused_when_empty_too_long_or_not_printable_and_accepted_at_the_cap() -> None:
    assert check_id("provider_id", "") == "provider_id is required"
    assert check_id("provider_id", "x" * (MAX_ID_CHARS + 1)) == f"provider_id is longer than {MAX_ID_CHARS} characters"
    assert check_id("provider_id", "a\nb") == "provider_id has control characters"
    assert check_id("provider_id", "é" * MAX_ID_CHARS) is None


def test_tools_are_keyed_by_their_qualified_name() -> None:
    first = broker_pb2.ToolDescriptor(name="a", claimed_server="srv", input_schema_json='{"type": "object"}')
    second = broker_pb2.ToolDescriptor(name="b", claimed_server="other")
    tools, problem = check_tools([first, second])
    assert problem is None
    assert tools == {"srv:a": first, "other:b": second}


@pytest.mark.parametrize(
    ("descriptor", "problem"),
    [
        (broker_pb2.ToolDescriptor(name="", claimed_server="srv"), "tool name is required"),
        (broker_pb2.ToolDescriptor(name="a", claimed_server="s:v"), "claimed_server must not contain ':'"),
        (
            broker_pb2.ToolDescriptor(name="a", claimed_server="srv", input_schema_json="[1]"),
            "input_schema_json of a is not a JSON object",
        ),
        (
            broker_pb2.ToolDescriptor(name="a", claimed_server="srv", output_schema_json="{"),
            "output_schema_json of a is not a JSON object",
        ),
        (
            broker_pb2.ToolDescriptor(name="a", claimed_server="srv", annotations_json="[true]"),
            "annotations_json of a is not a JSON object",
        ),
    ],
)
def test_a_bad_tool_descriptor_refuses_the_whole_list(descriptor: broker_pb2.ToolDescriptor, problem: str) -> None:
    good = broker_pb2.ToolDescriptor(name="ok", claimed_server="srv")
    assert check_tools([good, descriptor]) == ({}, problem)


def test_the_same_qualified_tool_twice_is_refused() -> None:
    tool = broker_pb2.ToolDescriptor(name="a", claimed_server="srv")
    assert check_tools([tool, tool]) == ({}, "duplicate Tool srv:a")


def test_a_sign_in_status_needs_its_url_exactly_when_sign_in_is_required() -> None:
    required = broker_pb2.SIGN_IN_STATE_REQUIRED
    url = "https://auth.example/authorize?state=abc"
    assert check_sign_in_status(broker_pb2.SignInStatus(server="srv", state=required, authorization_url=url)) is None
    assert check_sign_in_status(broker_pb2.SignInStatus(server="srv", state=broker_pb2.SIGN_IN_STATE_SIGNED_IN)) is None
    only_then = "authorization_url is required with SIGN_IN_STATE_REQUIRED and only then"
    assert check_sign_in_status(broker_pb2.SignInStatus(server="srv", state=required)) == only_then
    signed_in_with_url = broker_pb2.SignInStatus(
        server="srv", state=broker_pb2.SIGN_IN_STATE_SIGNED_IN, authorization_url=url
    )
    assert check_sign_in_status(signed_in_with_url) == only_then


def test_a_sign_in_status_is_refused_for_a_bad_server_or_an_overlong_url() -> None:
    required = broker_pb2.SIGN_IN_STATE_REQUIRED
    assert check_sign_in_status(broker_pb2.SignInStatus(server="", state=required)) == "server is required"
    assert check_sign_in_status(broker_pb2.SignInStatus(server="a:b")) == "server must not contain ':'"
    long_url = "https://auth.example/" + "x" * MAX_AUTHORIZATION_URL_CHARS
    status = broker_pb2.SignInStatus(server="srv", state=required, authorization_url=long_url)
    assert check_sign_in_status(status) == "authorization_url is too long"


def test_a_well_formed_call_request_gives_its_arguments() -> None:
    assert check_call_request(_request(), '{"n": 1}') == ({"n": 1}, None)
    assert check_call_request(_request(call_id="c1"), "{}") == ({}, None)


@pytest.mark.parametrize(
    ("request_", "arguments_json", "problem"),
    [
        (_request(session_id=""), "{}", "session_id is required"),
        (_request(turn_id="t\x00"), "{}", "turn_id has control characters"),
        (_request(tool_use_id="u" * (MAX_ID_CHARS + 1)), "{}", f"tool_use_id is longer than {MAX_ID_CHARS} characters"),
        (_request(call_id="c\n"), "{}", "call_id has control characters"),
        (_request(tool_name="tool"), "{}", "tool_name must be qualified as SERVER:TOOL"),
        (_request(tool_name="srv:"), "{}", "tool_name must be qualified as SERVER:TOOL"),
        (_request(), "[1, 2]", "arguments_json must be a JSON object"),
        (
            _request(),
            "{not json",
            "arguments_json is not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        (_request(), '{"a": 1, "a": 2}', 'arguments_json is not strict JSON: the name "a" appears twice in one object'),
    ],
)
def test_a_malformed_call_request_names_its_first_problem(
    request_: broker_pb2.CallToolRequest, arguments_json: str, problem: str
) -> None:
    assert check_call_request(request_, arguments_json) == ({}, problem)
