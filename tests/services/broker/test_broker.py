"""Unit tests of the broker's pure state machine (`services/broker/broker.py` and the parts it coordinates).

The Interaction service is replaced by an in-memory recorder of opens and closes (pure logic only);
the same rules are exercised end to end over gRPC with the real Interaction service and Redis in
`test_servicer.py`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.broker import Broker
from services.broker.errors import InvalidRequest, OpenRefused
from services.broker.invocation import Invocation, InvocationState
from services.broker.model import ProviderStream
from tests.helpers.waiting import eventually
from tests.services.broker.harness import (
    RecordingHost,
    all_events,
    provider_frames,
    register_provider,
    start_call,
    tool_descriptor,
)


def _form() -> form_pb2.Form:
    return form_pb2.Form(
        message="Choose the deployment target",
        fields=[form_pb2.Field(name="environment", label="Environment", required=True, string=form_pb2.StringField())],
        requester=form_pb2.Requester(provider_id="forged", provider_display_name="Forged", claimed_server="srv"),
    )


def _kinds(stream: ProviderStream) -> list[str]:
    return [str(f.WhichOneof("frame")) for f in provider_frames(stream)]


_SEEN: weakref.WeakKeyDictionary[Invocation, int] = weakref.WeakKeyDictionary()
"""How far each invocation's event log was read by :func:`_events`."""


def _events(invocation: Invocation) -> list[broker_pb2.CallToolResponse]:
    """The events logged since the last call (for this invocation)."""
    items = invocation.log.after(_SEEN.get(invocation, 0))
    if items:
        _SEEN[invocation] = items[-1].sequence
    return items


@pytest.fixture
async def host() -> RecordingHost:
    return RecordingHost()


@pytest.fixture
async def broker(host: RecordingHost) -> AsyncIterator[Broker]:
    b = Broker(host, execution_timeout=0.3, heartbeat_seconds=30, queue_size=16)
    await b.start()
    yield b
    await b.shutdown(timeout=1)


BrokerFactory = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def make_broker(host: RecordingHost) -> AsyncIterator[BrokerFactory]:
    """A broker with other settings over the same recorder: ``await make_broker(start=False, **settings)``;
    shut down when the test ends."""
    made: list[Broker] = []

    async def factory(*, start: bool = False, **settings: Any) -> Broker:
        broker = Broker(host, **settings)
        made.append(broker)
        if start:
            await broker.start()
        return broker

    yield factory
    for broker in made:
        await broker.shutdown(timeout=1)


@pytest.fixture
def provider(broker: Broker) -> ProviderStream:
    """The ``mcp:examples`` provider registered on ``broker``, offering ``examples:deploy``."""
    return register_provider(broker)


@dataclass
class AwaitingForm:
    """A broker with a registered provider and an invocation waiting on its form (``ix_1``, correlation
    ``corr-1``)."""

    broker: Broker
    host: RecordingHost
    stream: ProviderStream
    invocation: Invocation

    def answered(self) -> interaction_pb2.Interaction:
        """The form as the Interaction service reports it answered."""
        return _answered(self.host)

    def closed(self, reason: interaction_pb2.CloseReason.ValueType) -> interaction_pb2.Interaction:
        """The form as the Interaction service reports it closed unanswered with ``reason``."""
        binding, _ = self.host.opened[0]
        return interaction_pb2.Interaction(
            interaction_id="ix_1", binding=binding, state=interaction_pb2.INTERACTION_STATE_CLOSED, close_reason=reason
        )


@pytest.fixture
async def awaiting(broker: Broker, host: RecordingHost, provider: ProviderStream) -> AwaitingForm:
    invocation = start_call(broker)
    _ask(broker, provider, invocation.invocation_id)
    await _until_awaiting(invocation)
    return AwaitingForm(broker, host, provider, invocation)


async def _until_awaiting(invocation: Invocation) -> None:
    await eventually(lambda: invocation.state is InvocationState.AWAITING, what="awaiting")


def _ask(broker: Broker, stream: ProviderStream, invocation_id: str, correlation: str = "corr-1") -> None:
    broker.handle_frame(
        stream,
        broker_pb2.ConnectRequest(
            interaction_request=broker_pb2.InteractionRequest(
                invocation_id=invocation_id, correlation_id=correlation, form=_form()
            )
        ),
    )


def _result(invocation_id: str, call_tool_result_json: str = "{}") -> broker_pb2.ConnectRequest:
    return broker_pb2.ConnectRequest(
        result=broker_pb2.InvocationResult(invocation_id=invocation_id, call_tool_result_json=call_tool_result_json)
    )


def _progress(invocation_id: str, progress: float) -> broker_pb2.ConnectRequest:
    return broker_pb2.ConnectRequest(
        progress=broker_pb2.InvocationProgress(invocation_id=invocation_id, progress=progress)
    )


def _received(invocation_id: str, interaction_id: str, correlation_id: str = "") -> broker_pb2.ConnectRequest:
    return broker_pb2.ConnectRequest(
        interaction_received=broker_pb2.InteractionReceived(
            invocation_id=invocation_id, correlation_id=correlation_id, interaction_id=interaction_id
        )
    )


def _answered(host: RecordingHost, index: int = 0) -> interaction_pb2.Interaction:
    binding, form = host.opened[index]
    return interaction_pb2.Interaction(
        interaction_id=f"ix_{index + 1}",
        binding=binding,
        form=form,
        state=interaction_pb2.INTERACTION_STATE_ANSWERED,
        answer=form_pb2.Answer(
            action=form_pb2.ACTION_ACCEPT, values={"environment": form_pb2.Value(string_value="staging")}
        ),
        close_reason=interaction_pb2.CLOSE_REASON_ANSWERED,
    )


async def test_register_mints_ids_and_invoke_reaches_the_provider(broker: Broker, provider: ProviderStream) -> None:
    registered = provider_frames(provider)[0].registered
    assert registered.registration_id.startswith("reg_")
    assert registered.connection_id == provider.connection_id
    assert registered.heartbeat_interval.seconds == 30

    invocation = start_call(broker)
    invoke = provider_frames(provider)[0].invoke
    assert invoke.invocation_id == invocation.invocation_id
    assert invoke.tool_name == "deploy"
    assert invoke.arguments_json == '{"artifact":"build-42"}'
    assert _events(invocation)[0].accepted.provider_id == "mcp:examples"


@pytest.mark.usefixtures("provider")
async def test_unknown_tool_and_malformed_calls_fail_with_stable_codes(broker: Broker) -> None:
    unknown = await all_events(start_call(broker, tool="examples:nope"))
    assert [e.failure.code for e in unknown] == [broker_pb2.FAILURE_CODE_UNKNOWN_TOOL]
    not_object = await all_events(start_call(broker, args="[1]"))
    assert [e.failure.code for e in not_object] == [broker_pb2.FAILURE_CODE_INVALID_REQUEST]
    unqualified = await all_events(start_call(broker, tool="deploy"))
    assert [e.failure.code for e in unqualified] == [broker_pb2.FAILURE_CODE_INVALID_REQUEST]
    assert broker.stats()["live_invocations"] == 0


@pytest.mark.usefixtures("provider")
async def test_duplicate_tool_use_id_in_a_session_is_refused_while_the_first_is_live(broker: Broker) -> None:
    first = start_call(broker)
    second = await all_events(start_call(broker))
    assert second[0].failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST
    assert not first.is_terminal


async def test_result_settles_once_and_a_second_result_is_rejected_as_settled(
    broker: Broker, provider: ProviderStream
) -> None:
    invocation = start_call(broker)
    provider_frames(provider)
    result = _result(invocation.invocation_id, '{"content":[],"isError":true}')
    broker.handle_frame(provider, result)
    broker.handle_frame(provider, result)
    events = await all_events(invocation)
    assert events[-1].result.is_error is True
    assert [e.WhichOneof("event") for e in events] == ["accepted", "result"]
    rejected = provider_frames(provider)[0].rejected
    assert rejected.reason == broker_pb2.REJECT_REASON_INVOCATION_SETTLED
    assert broker.stats()["rejected_frames.INVOCATION_SETTLED"] == 1


async def test_frames_for_unknown_or_another_connections_invocations_are_rejected(
    broker: Broker, provider: ProviderStream
) -> None:
    intruder = register_provider(broker, "mcp:other", tool_descriptor("other", server="other"))
    invocation = start_call(broker)
    provider_frames(provider)
    provider_frames(intruder)
    for frame in (
        _result(invocation.invocation_id),
        broker_pb2.ConnectRequest(failure=broker_pb2.InvocationFailure(invocation_id=invocation.invocation_id)),
        broker_pb2.ConnectRequest(progress=broker_pb2.InvocationProgress(invocation_id=invocation.invocation_id)),
    ):
        broker.handle_frame(intruder, frame)
    _ask(broker, intruder, invocation.invocation_id)
    broker.handle_frame(
        intruder, broker_pb2.ConnectRequest(failure=broker_pb2.InvocationFailure(invocation_id="inv_unknown"))
    )
    reasons = [f.rejected.reason for f in provider_frames(intruder)]
    assert reasons == [broker_pb2.REJECT_REASON_CROSS_CONNECTION] * 4 + [broker_pb2.REJECT_REASON_UNKNOWN_INVOCATION]
    assert invocation.state is InvocationState.RUNNING
    assert [e.WhichOneof("event") for e in _events(invocation)] == ["accepted"]


async def test_interaction_request_binds_trusted_provenance_and_suspends_the_timer(awaiting: AwaitingForm) -> None:
    invocation, stream = awaiting.invocation, awaiting.stream
    binding, form = awaiting.host.opened[0]
    assert binding.invocation_id == invocation.invocation_id
    assert binding.connection_id == stream.connection_id
    assert binding.provider_correlation_id == "corr-1"
    assert binding.tool_name == "examples:deploy"
    assert form.requester.provider_id == "mcp:examples"
    assert form.requester.provider_display_name == "Examples"
    assert form.requester.claimed_server == "srv"
    assert form.requester.claimed_tool == "deploy"
    assert invocation.timer is None
    awaiting_event = _events(invocation)[-1].awaiting_interaction
    assert awaiting_event.interaction_id == "ix_1"
    assert awaiting_event.field_count == 1


async def test_a_second_interaction_request_while_one_is_pending_is_rejected(
    broker: Broker, host: RecordingHost, provider: ProviderStream
) -> None:
    invocation = start_call(broker)
    _ask(broker, provider, invocation.invocation_id)
    _ask(broker, provider, invocation.invocation_id, "corr-2")
    await _until_awaiting(invocation)
    rejected = [f.rejected.reason for f in provider_frames(provider) if f.HasField("rejected")]
    assert rejected == [broker_pb2.REJECT_REASON_INTERACTION_ALREADY_PENDING]
    assert len(host.opened) == 1


async def test_answer_is_delivered_with_the_echoed_correlation_and_the_timer_rearms(awaiting: AwaitingForm) -> None:
    broker, stream, invocation = awaiting.broker, awaiting.stream, awaiting.invocation
    provider_frames(stream)
    broker.interaction_settled(awaiting.answered())
    result = provider_frames(stream)[0].interaction_result
    assert result.correlation_id == "corr-1"
    assert result.interaction_id == "ix_1"
    assert result.answer.values["environment"].string_value == "staging"
    assert invocation.state is InvocationState.RUNNING
    assert invocation.timer is not None
    settled = _events(invocation)[-1].interaction_settled
    assert settled.action == form_pb2.ACTION_ACCEPT
    # The re-armed timer fires after a fresh leg.
    events = await all_events(invocation)
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    assert provider_frames(stream)[-1].cancel.invocation_id == invocation.invocation_id


async def test_a_settlement_for_another_connection_is_never_delivered(awaiting: AwaitingForm) -> None:
    provider_frames(awaiting.stream)
    forged = awaiting.answered()
    forged.binding.connection_id = "conn_other"
    awaiting.broker.interaction_settled(forged)
    assert provider_frames(awaiting.stream) == []
    assert awaiting.invocation.state is InvocationState.AWAITING


async def test_final_result_while_form_pending_fails_inconsistent_and_closes_the_form(awaiting: AwaitingForm) -> None:
    broker, host, stream, invocation = awaiting.broker, awaiting.host, awaiting.stream, awaiting.invocation
    broker.handle_frame(stream, _result(invocation.invocation_id))
    events = await all_events(invocation)
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_INCONSISTENT_PROVIDER
    assert not any(e.HasField("result") for e in events)
    await eventually(lambda: host.closed == [("ix_1", interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED)], what="close")
    # A late answer changes nothing.
    provider_frames(stream)
    broker.interaction_settled(awaiting.answered())
    assert provider_frames(stream) == []


async def test_a_form_opened_after_the_invocation_settled_is_closed_not_orphaned(
    broker: Broker, host: RecordingHost, provider: ProviderStream
) -> None:
    invocation = start_call(broker)
    host.gate = asyncio.Event()
    _ask(broker, provider, invocation.invocation_id)
    stopping = asyncio.create_task(broker.stop("s1"))
    await eventually(lambda: invocation.is_terminal, what="stopped")
    assert not stopping.done()  # Stop waits for the in-flight open so it can close it
    host.gate.set()
    assert await stopping == 1
    assert host.closed == [("ix_1", interaction_pb2.CLOSE_REASON_STOPPED)]
    assert (await all_events(invocation))[-1].HasField("stopped")


async def test_an_invalid_form_refused_by_the_host_is_rejected_and_the_invocation_keeps_running(
    broker: Broker, host: RecordingHost, provider: ProviderStream
) -> None:
    invocation = start_call(broker)
    host.refuse = OpenRefused("INVALID_FORM", "bad schema")
    _ask(broker, provider, invocation.invocation_id)
    await eventually(
        lambda: invocation.state is InvocationState.RUNNING and bool(broker.stats().get("rejected_frames")),
        what="the frame rejected",
    )
    rejected = [f.rejected for f in provider_frames(provider) if f.HasField("rejected")]
    assert rejected[0].reason == broker_pb2.REJECT_REASON_INVALID_FORM
    assert "bad schema" in rejected[0].message


@pytest.mark.parametrize("reason", [interaction_pb2.CLOSE_REASON_TIMED_OUT, interaction_pb2.CLOSE_REASON_LEASE_EXPIRED])
async def test_timed_out_or_lease_expired_form_fails_the_invocation_and_cancels_the_provider(
    awaiting: AwaitingForm, reason: interaction_pb2.CloseReason.ValueType
) -> None:
    provider_frames(awaiting.stream)
    awaiting.broker.interaction_settled(awaiting.closed(reason))
    events = await all_events(awaiting.invocation)
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
    assert _kinds(awaiting.stream) == ["interaction_result", "cancel"]


async def test_host_restarted_close_fails_interaction_closed(awaiting: AwaitingForm) -> None:
    awaiting.broker.interaction_settled(awaiting.closed(interaction_pb2.CLOSE_REASON_HOST_RESTARTED))
    assert (await all_events(awaiting.invocation))[-1].failure.code == broker_pb2.FAILURE_CODE_INTERACTION_CLOSED


async def test_stale_host_fails_awaiting_invocations_closed_but_not_running_ones(broker: Broker) -> None:
    stream = register_provider(broker, "mcp:examples", tool_descriptor(), tool_descriptor("other"))
    awaiting = start_call(broker)
    running = start_call(broker, tool="examples:other", tool_use="tu2")
    _ask(broker, stream, awaiting.invocation_id)
    await _until_awaiting(awaiting)
    broker.host_stale()
    assert (await all_events(awaiting))[-1].failure.code == broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
    assert running.state is InvocationState.RUNNING


async def test_reregistration_settles_old_invocations_lost_and_routes_new_calls_to_the_new_one(
    awaiting: AwaitingForm,
) -> None:
    broker, host, old, invocation = awaiting.broker, awaiting.host, awaiting.stream, awaiting.invocation
    new = register_provider(broker)
    assert (await all_events(invocation))[-1].HasField("lost")
    await eventually(lambda: host.closed == [("ix_1", interaction_pb2.CLOSE_REASON_PROVIDER_LOST)], what="close")
    assert old.outbox.closed
    provider_frames(new)
    second = start_call(broker, tool_use="tu2")
    assert provider_frames(new)[0].invoke.invocation_id == second.invocation_id
    # The old connection's late frames are refused.
    broker.handle_frame(old, _result(second.invocation_id))
    assert not second.is_terminal


async def test_stop_scopes_turn_session_and_all(broker: Broker) -> None:
    register_provider(broker, "mcp:examples", tool_descriptor(), tool_descriptor("other"), tool_descriptor("third"))
    a = start_call(broker, session="s1", turn="t1", tool_use="a")
    b = start_call(broker, session="s1", turn="t2", tool_use="b")
    c = start_call(broker, session="s2", turn="t1", tool_use="c")
    assert await broker.stop("s1", "t1") == 1
    assert a.is_terminal
    assert not b.is_terminal
    assert await broker.stop("s1") == 1
    assert await broker.stop(all_sessions=True) == 1
    assert c.state is InvocationState.STOPPED
    with pytest.raises(InvalidRequest):
        await broker.stop("s1", all_sessions=True)
    with pytest.raises(InvalidRequest):
        await broker.stop()


async def test_too_many_invocations_for_a_provider_fail_resource_exhausted(make_broker: BrokerFactory) -> None:
    broker = await make_broker(execution_timeout=5, max_invocations_per_provider=1)
    register_provider(broker)
    start_call(broker)
    second = await all_events(start_call(broker, tool_use="tu2"))
    assert second[0].failure.code == broker_pb2.FAILURE_CODE_RESOURCE_EXHAUSTED


async def test_frames_before_register_and_a_second_register_are_rejected(broker: Broker) -> None:
    stream = broker.open_provider_stream()
    broker.handle_frame(stream, broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat()))
    broker.handle_frame(
        stream, broker_pb2.ConnectRequest(register=broker_pb2.Register(provider_id="", tools=[tool_descriptor()]))
    )
    broker.handle_frame(
        stream, broker_pb2.ConnectRequest(register=broker_pb2.Register(provider_id="p", tools=[tool_descriptor()]))
    )
    broker.handle_frame(
        stream, broker_pb2.ConnectRequest(register=broker_pb2.Register(provider_id="p", tools=[tool_descriptor()]))
    )
    frames = provider_frames(stream)
    assert [f.WhichOneof("frame") for f in frames] == ["rejected", "rejected", "registered", "rejected"]
    assert [f.rejected.reason for f in frames if f.HasField("rejected")] == [
        broker_pb2.REJECT_REASON_NOT_REGISTERED,
        broker_pb2.REJECT_REASON_INVALID_FRAME,
        broker_pb2.REJECT_REASON_ALREADY_REGISTERED,
    ]


async def test_a_second_provider_cannot_take_a_server_name_another_registration_holds(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    owner = register_provider(broker, "mcp:examples")
    rogue = register_provider(broker, "mcp:rogue", tool_descriptor("deploy"))
    [refused] = provider_frames(rogue)
    assert refused.rejected.reason == broker_pb2.REJECT_REASON_ALREADY_REGISTERED
    assert refused.rejected.message == "server examples is already registered by provider mcp:examples"
    assert "provider_claim_refused" in caplog.messages

    # Claiming it later through a Tool change or a sign-in prompt is refused too.
    elsewhere = register_provider(broker, "mcp:other", tool_descriptor("x", server="other"))
    provider_frames(elsewhere)
    broker.handle_frame(
        elsewhere, broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=[tool_descriptor("deploy")]))
    )
    status = broker_pb2.SignInStatus(
        server="examples", state=broker_pb2.SIGN_IN_STATE_REQUIRED, authorization_url="https://as.example/a?state=s"
    )
    broker.handle_frame(elsewhere, broker_pb2.ConnectRequest(sign_in_status=status))
    assert [f.rejected.reason for f in provider_frames(elsewhere)] == [broker_pb2.REJECT_REASON_ALREADY_REGISTERED] * 2
    assert broker.list_sign_ins() == []
    provider_frames(owner)
    call = start_call(broker)
    assert provider_frames(owner)[0].invoke.invocation_id == call.invocation_id

    # The same provider id reconnecting replaces its own registration.
    again = register_provider(broker, "mcp:examples")
    assert [f.WhichOneof("frame") for f in provider_frames(again)] == ["registered"]


@pytest.mark.parametrize(
    ("provider_id", "display_name", "problem"),
    [
        ("mcp:ex\u0430mples", "Examples", "provider_id may only contain A-Z a-z 0-9 . _ : -"),
        ("mcp:examples two", "Examples", "provider_id may only contain A-Z a-z 0-9 . _ : -"),
        ("mcp:lookalike", "Ex\u0430mples", "display_name may only contain A-Z a-z 0-9, spaces and . _ : ( ) / -"),
        ("mcp:long", "x" * 129, "display_name is longer than 128 characters"),
    ],
)
async def test_provider_ids_and_display_names_outside_the_safe_characters_are_refused(
    broker: Broker, provider_id: str, display_name: str, problem: str
) -> None:
    stream = broker.open_provider_stream()
    register = broker_pb2.Register(provider_id=provider_id, display_name=display_name, tools=[tool_descriptor()])
    broker.handle_frame(stream, broker_pb2.ConnectRequest(register=register))

    [frame] = provider_frames(stream)
    assert frame.rejected.reason == broker_pb2.REJECT_REASON_INVALID_FRAME
    assert frame.rejected.message == problem


async def test_tools_changed_settles_invocations_of_changed_tools_lost(broker: Broker, host: RecordingHost) -> None:
    stream = register_provider(broker, "mcp:examples", tool_descriptor(), tool_descriptor("other"))
    changed = start_call(broker)
    kept = start_call(broker, tool="examples:other", tool_use="tu2")
    _ask(broker, stream, changed.invocation_id)
    await _until_awaiting(changed)
    broker.handle_frame(
        stream, broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=[tool_descriptor("other")]))
    )
    assert (await all_events(changed))[-1].HasField("lost")
    await eventually(lambda: host.closed == [("ix_1", interaction_pb2.CLOSE_REASON_SUPERSEDED)], what="close")
    assert not kept.is_terminal
    assert [t.qualified_name for t in broker.list_tools()] == ["examples:other"]


async def test_shutdown_settles_live_invocations_lost_and_closes_forms_host_restarted(awaiting: AwaitingForm) -> None:
    await awaiting.broker.shutdown(timeout=1)
    assert (await all_events(awaiting.invocation))[-1].HasField("lost")
    assert awaiting.host.closed == [("ix_1", interaction_pb2.CLOSE_REASON_HOST_RESTARTED)]
    assert awaiting.stream.outbox.closed


async def test_a_provider_that_does_not_read_its_bounded_queue_is_retired_and_its_calls_lost(
    make_broker: BrokerFactory,
) -> None:
    broker = await make_broker(execution_timeout=5, queue_size=2)
    stream = register_provider(broker)  # queue: registered
    first = start_call(broker)  # queue: registered, invoke
    second = start_call(broker, tool_use="tu2")  # overflow
    assert (await all_events(first))[-1].HasField("lost")
    assert (await all_events(second))[-1].HasField("lost")
    assert stream.outbox.closed
    assert broker.stats()["provider_queue_overflows"] == 1
    assert broker.stats()["live_registrations"] == 0


async def test_the_event_log_keeps_the_newest_progress_up_to_its_bound_and_every_lifecycle_event(
    make_broker: BrokerFactory,
) -> None:
    broker = await make_broker(execution_timeout=5, queue_size=3)
    stream = register_provider(broker)
    invocation = start_call(broker)  # events: accepted
    provider_frames(stream)
    for step in range(5):
        broker.handle_frame(stream, _progress(invocation.invocation_id, step))
    _ask(broker, stream, invocation.invocation_id)
    await _until_awaiting(invocation)
    events = _events(invocation)
    assert [e.WhichOneof("event") for e in events] == [
        "accepted",
        "progress",
        "progress",
        "progress",
        "awaiting_interaction",
    ]
    assert [e.progress.progress for e in events if e.HasField("progress")] == [2, 3, 4]
    assert [e.sequence for e in events] == [1, 4, 5, 6, 7]
    assert broker.stats()["progress_dropped"] == 2


async def test_a_reported_but_unconnected_server_fails_server_unavailable_with_its_cause(broker: Broker) -> None:
    report = broker.servers.open()
    broker.servers.update(
        report,
        broker_pb2.ReportServersRequest(
            reporter_id="p1",
            servers=[
                broker_pb2.ServerStatus(
                    name="remote",
                    state=broker_pb2.SERVER_STATE_FAILED,
                    last_error=broker_pb2.ServerError(summary="HTTP 401 Unauthorized from POST http://h/mcp"),
                ),
                broker_pb2.ServerStatus(name="examples", state=broker_pb2.SERVER_STATE_READY),
            ],
        ),
    )
    register_provider(broker)

    [down] = await all_events(start_call(broker, tool="remote:anything"))
    assert down.failure.code == broker_pb2.FAILURE_CODE_SERVER_UNAVAILABLE
    assert down.failure.message.startswith("MCP server remote failed to connect: HTTP 401 Unauthorized")
    [unknown] = await all_events(start_call(broker, tool="examples:nope", tool_use="tu2"))
    assert unknown.failure.code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL
    [never] = await all_events(start_call(broker, tool="nosuch:tool", tool_use="tu3"))
    assert never.failure.code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL
    assert [s.name for s in broker.status().servers] == ["examples", "remote"]

    broker.servers.close(report)  # the provider's stream ended: its servers are forgotten
    [gone] = await all_events(start_call(broker, tool="remote:anything", tool_use="tu4"))
    assert gone.failure.code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL


async def test_arguments_are_checked_against_the_input_schema_unless_skipped(broker: Broker) -> None:
    schema = '{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}'
    tool = broker_pb2.ToolDescriptor(name="count", input_schema_json=schema, claimed_server="examples")
    stream = register_provider(broker, "mcp:examples", tool)
    provider_frames(stream)

    [bad] = await all_events(start_call(broker, tool="examples:count", args='{"n":"x"}'))
    assert bad.failure.code == broker_pb2.FAILURE_CODE_INVALID_ARGUMENTS
    assert bad.failure.message.endswith('/n: must be of type "integer"')
    assert _kinds(stream) == []  # nothing reached the provider
    skipped = broker.call_tool(
        broker_pb2.CallToolRequest(
            session_id="s1",
            turn_id="t1",
            tool_use_id="tu2",
            tool_name="examples:count",
            arguments_json='{"n":"x"}',
            skip_argument_validation=True,
        )
    )
    assert _kinds(stream) == ["invoke"]
    broker.stop_invocation(skipped, "test over")


async def test_progress_re_arms_the_execution_timer_but_never_past_the_maximum(make_broker: BrokerFactory) -> None:
    broker = await make_broker(
        start=True, execution_timeout=0.3, max_execution_seconds=1.0, heartbeat_seconds=30, queue_size=64
    )
    stream = register_provider(broker)
    invocation = start_call(broker)
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not invocation.is_terminal:
        broker.handle_frame(stream, _progress(invocation.invocation_id, 1))
        await asyncio.sleep(0.1)  # the provider's progress cadence, not synchronisation
        assert loop.time() - started < 5, "the maximum must end the call"
    elapsed = loop.time() - started
    events = await all_events(invocation)
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    assert "maximum execution time" in events[-1].failure.message
    assert elapsed >= 0.9  # progress kept it alive past three execution timeouts


async def test_an_open_whose_reply_was_lost_fences_the_invocation_before_the_failure_is_reported(
    broker: Broker, host: RecordingHost, provider: ProviderStream
) -> None:
    invocation = start_call(broker)
    host.unavailable = True
    _ask(broker, provider, invocation.invocation_id)
    events = await all_events(invocation)
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
    # The form may exist in Redis: it is closed and the invocation fenced before the terminal event.
    assert host.fenced == [(invocation.invocation_id, interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED)]


async def test_stop_while_a_form_is_pending_reports_stopped_only_after_the_close_returned(
    awaiting: AwaitingForm,
) -> None:
    broker, host, invocation = awaiting.broker, awaiting.host, awaiting.invocation
    host.close_gate = asyncio.Event()
    stopping = asyncio.create_task(broker.stop("s1"))
    await eventually(lambda: invocation.is_terminal, what="stopped inside the broker")
    assert not invocation.log.closed  # the caller has not been told yet
    host.close_gate.set()
    assert await stopping == 1
    assert (await all_events(invocation))[-1].HasField("stopped")
    assert host.deliveries == []


async def test_an_answer_that_beat_the_stop_is_recorded_lost_before_stopped_is_reported(
    awaiting: AwaitingForm,
) -> None:
    awaiting.host.answered_first = True
    assert await awaiting.broker.stop("s1") == 1
    assert (await all_events(awaiting.invocation))[-1].HasField("stopped")
    assert awaiting.host.deliveries == [
        ("ix_1", interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_STOPPED)
    ]
    assert not any(f.HasField("interaction_result") for f in provider_frames(awaiting.stream))


async def test_a_provider_confirmation_records_the_answer_delivered(awaiting: AwaitingForm) -> None:
    broker, host, stream, invocation = awaiting.broker, awaiting.host, awaiting.stream, awaiting.invocation
    broker.interaction_settled(awaiting.answered())
    broker.handle_frame(stream, _received(invocation.invocation_id, "ix_1", correlation_id="corr-1"))
    await eventually(lambda: host.deliveries == [("ix_1", interaction_pb2.DELIVERY_STATE_DELIVERED, 0)], what="ack")
    # A second confirmation is refused and records nothing more.
    provider_frames(stream)
    broker.handle_frame(stream, _received(invocation.invocation_id, "ix_1"))
    assert [f.rejected.reason for f in provider_frames(stream)] == [broker_pb2.REJECT_REASON_NO_INTERACTION_PENDING]
    assert len(host.deliveries) == 1


async def test_a_provider_lost_after_an_answer_it_never_confirmed_records_it_lost(awaiting: AwaitingForm) -> None:
    awaiting.broker.interaction_settled(awaiting.answered())
    awaiting.broker.provider_stream_lost(awaiting.stream)
    assert (await all_events(awaiting.invocation))[-1].HasField("lost")
    assert awaiting.host.deliveries == [
        ("ix_1", interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_PROVIDER_LOST)
    ]


async def test_the_broker_takes_new_calls_only_while_a_provider_is_registered_and_not_once_it_drains(
    broker: Broker,
) -> None:
    flips: list[bool] = []
    broker.on_readiness = flips.append
    assert broker.takes_new_calls() is False, "nothing to route a call to"
    first = register_provider(broker)
    second = register_provider(broker, "mcp:other", tool_descriptor(name="other", server="other"))
    broker.provider_stream_lost(first)
    assert broker.takes_new_calls() is True, "another provider is still registered"
    broker.provider_stream_lost(second)
    assert broker.takes_new_calls() is False
    register_provider(broker)
    assert await broker.drain(0) == 0
    assert broker.takes_new_calls() is False
    assert flips == [True, False, True, False], "each change reported once"


async def test_every_form_of_a_call_made_for_a_person_carries_that_person_on_its_binding(
    broker: Broker, host: RecordingHost, provider: ProviderStream
) -> None:
    alice = interaction_pb2.Person(principal="alice@example.com", issuer="https://id.example.com")
    theirs = broker.call_tool(
        broker_pb2.CallToolRequest(session_id="s1", turn_id="t1", tool_use_id="tu-a", tool_name="examples:deploy"),
        "alice@example.com",
        alice,
    )
    machine = start_call(broker, tool_use="tu-m")
    _ask(broker, provider, theirs.invocation_id)
    _ask(broker, provider, machine.invocation_id)
    await _until_awaiting(theirs)
    await _until_awaiting(machine)
    made = {binding.invocation_id: binding.made_for for binding, _ in host.opened}
    assert made == {theirs.invocation_id: alice, machine.invocation_id: interaction_pb2.Person()}
