"""OAuth sign-in through the broker: provider-published status, AUTH_REQUIRED, CompleteSignIn by state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from maka.broker.v1 import broker_pb2
from services.broker.broker import Broker
from services.broker.model import ProviderStream
from services.core.status import NotFound
from tests.services.broker.harness import (
    RecordingHost,
    all_events,
    provider_frames,
    register_provider,
    start_call,
    tool_descriptor,
)

URL = "https://as.example.com/authorize?response_type=code&client_id=c&state=STATE-1&code_challenge=x"


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(RecordingHost(), execution_timeout=5, heartbeat_seconds=30, queue_size=16)
    await b.start()
    yield b
    await b.shutdown(timeout=1)


def _status(broker: Broker, stream: ProviderStream, state: int, url: str = "", server: str = "remote") -> None:
    broker.handle_frame(
        stream,
        broker_pb2.ConnectRequest(
            sign_in_status=broker_pb2.SignInStatus(server=server, state=state, authorization_url=url)  # type: ignore[arg-type]
        ),
    )


def _sign_in_only(broker: Broker) -> ProviderStream:
    stream = broker.open_provider_stream()
    broker.handle_frame(
        stream, broker_pb2.ConnectRequest(register=broker_pb2.Register(provider_id="mcp:remote", tools=[]))
    )
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_REQUIRED, URL)
    provider_frames(stream)
    return stream


async def test_a_call_on_a_server_waiting_for_sign_in_fails_at_once_with_the_hint(broker: Broker) -> None:
    stream = _sign_in_only(broker)

    events = await all_events(start_call(broker, tool="remote:search"))

    assert [e.failure.code for e in events] == [broker_pb2.FAILURE_CODE_AUTH_REQUIRED]
    assert URL in events[0].failure.message
    assert "maka auth login remote" in events[0].failure.message
    assert provider_frames(stream) == []  # nothing reached the provider


async def test_a_step_up_on_a_registered_server_also_fails_new_calls_with_auth_required(broker: Broker) -> None:
    stream = register_provider(broker, "mcp:remote", tool_descriptor("search", "remote"))
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_REQUIRED, URL)
    provider_frames(stream)

    events = await all_events(start_call(broker, tool="remote:search"))
    assert [e.failure.code for e in events] == [broker_pb2.FAILURE_CODE_AUTH_REQUIRED]

    _status(broker, stream, broker_pb2.SIGN_IN_STATE_SIGNED_IN)
    accepted = start_call(broker, tool="remote:search", tool_use="tu2")
    assert provider_frames(stream)[0].invoke.invocation_id == accepted.invocation_id


async def test_sign_ins_are_listed_and_a_redirect_is_forwarded_only_for_the_pending_state(broker: Broker) -> None:
    stream = _sign_in_only(broker)
    [listed] = broker.list_sign_ins()
    assert (listed.server, listed.state, listed.authorization_url) == ("remote", broker_pb2.SIGN_IN_STATE_REQUIRED, URL)

    with pytest.raises(NotFound):
        broker.complete_sign_in(broker_pb2.CompleteSignInRequest(code="c", state="FORGED"))
    assert provider_frames(stream) == []

    server = broker.complete_sign_in(
        broker_pb2.CompleteSignInRequest(code="the-code", state="STATE-1", iss="https://as")
    )
    assert server == "remote"
    [frame] = provider_frames(stream)
    assert (frame.sign_in_callback.code, frame.sign_in_callback.state, frame.sign_in_callback.iss) == (
        "the-code",
        "STATE-1",
        "https://as",
    )


async def test_sign_out_reaches_the_provider_and_an_unknown_server_is_not_found(broker: Broker) -> None:
    stream = register_provider(broker, "mcp:remote", tool_descriptor("search", "remote"))
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_SIGNED_IN)
    provider_frames(stream)

    broker.sign_out("remote")
    assert provider_frames(stream)[0].sign_out.server == "remote"
    with pytest.raises(NotFound):
        broker.sign_out("other")


async def test_malformed_sign_in_status_frames_are_rejected_and_change_nothing(broker: Broker) -> None:
    stream = register_provider(broker, "mcp:remote", tool_descriptor("search", "remote"))
    provider_frames(stream)
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_REQUIRED, "")  # REQUIRED needs its URL
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_SIGNED_IN, URL)  # a URL only while REQUIRED
    _status(broker, stream, broker_pb2.SIGN_IN_STATE_REQUIRED, URL, server="a:b")

    assert [f.rejected.reason for f in provider_frames(stream)] == [broker_pb2.REJECT_REASON_INVALID_FRAME] * 3
    assert broker.list_sign_ins() == []


async def test_a_retired_registration_takes_its_sign_in_prompt_with_it(broker: Broker) -> None:
    stream = _sign_in_only(broker)
    broker.provider_stream_lost(stream)
    assert broker.list_sign_ins() == []


async def test_list_tools_carries_input_and_output_schemas_byte_for_byte(broker: Broker) -> None:
    inputs = '{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"p":{"$ref":"https://x/s.json"}}}'
    outputs = '{"type":"object","properties":{"time":{"type":"string"}},"required":["time"]}'
    descriptor = broker_pb2.ToolDescriptor(
        name="now", input_schema_json=inputs, output_schema_json=outputs, claimed_server="time"
    )
    register_provider(broker, "mcp:time", descriptor)

    [tool] = broker.list_tools()
    assert (tool.qualified_name, tool.input_schema_json, tool.output_schema_json) == ("time:now", inputs, outputs)


async def test_list_tools_carries_the_tools_title_and_annotations_as_the_provider_sent_them(broker: Broker) -> None:
    annotations = '{"readOnlyHint":true,"destructiveHint":false}'
    descriptor = broker_pb2.ToolDescriptor(
        name="now", claimed_server="time", title="What time is it", annotations_json=annotations
    )
    register_provider(broker, "mcp:time", descriptor)

    [tool] = broker.list_tools()
    assert (tool.title, tool.annotations_json) == ("What time is it", annotations)
