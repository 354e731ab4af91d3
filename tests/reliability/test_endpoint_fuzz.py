"""Property-based fuzzing (hypothesis) of every gRPC endpoint of the real, running services.

Random, oversized and malformed messages go to the Interaction service (HostLink, Attach, Answer, ListPending,
GetInteraction) and the broker (Connect, CallTool, WatchCall, Stop, ListTools) of a stack of processes of this module's
own (no other suite shares what the fuzzer touched). Each call either succeeds or fails with a status code
from a small set and - for every error the services raise themselves - a ``google.rpc.ErrorInfo`` reason from
a closed set; nothing ends as ``UNKNOWN``/``INTERNAL`` (an unhandled exception). Afterwards every service
still reports SERVING and a normal form round completes. Generated values stay away from the names the stack
really uses (the ``counter`` provider, new Host epochs) so the fuzzer cannot legitimately replace them.
Sources: docs/design.md#untrusted-form-copy, ``services/core/status.py``, docs/security.md#threats-and-what-stops-them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core import healthcheck
from services.core.channels import open_channel
from services.core.status import error_from_rpc
from tests.helpers.observed import SERVICES, Observed
from tests.reliability.counting_server import digest
from tests.reliability.harness import (
    ToolCall,
    answer,
    interaction_stub,
    reliability_stack,
    result_payload,
    tools_ready,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]

UNARY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
STREAMS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))

CLOSED_REASONS = frozenset(
    {name.removeprefix("ERROR_REASON_") for name, _value in interaction_pb2.ErrorReason.items()}
    | {
        "INVALID_REQUEST",
        "PERMISSION_DENIED",
        "NOT_REGISTERED",
        "HOST_UNAVAILABLE",
        "UNAUTHENTICATED",
        "CALL_NOT_FOUND",
    }
) - {"UNSPECIFIED"}
"""Every ErrorInfo reason the services may send (interaction ``ErrorReason`` + broker errors)."""
DOMAIN_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
    }
)
"""Codes the services raise themselves (always with an ErrorInfo reason)."""
TRANSPORT_CODES = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED})
"""Codes gRPC itself may answer without ErrorInfo: message over the size cap, our own short stream deadline."""
CLIENT_SEND_RACE = "Internal error from Core"
"""What grpcio's *client* reports when it writes to a stream the server has already finished (a failed
``SendMessageOperation``); a handler crash on the server shows as UNKNOWN ``Unexpected <class ...>`` instead."""

texts = st.one_of(
    st.text(max_size=40),
    st.just(""),
    st.sampled_from(["*", "default", "ix_", "../..", "\x00", "é" * 3, "\ud7ff", "a" * 300]),
    st.text(min_size=1000, max_size=3000),
)
sessions = st.text(max_size=20).map(lambda s: f"fuzz-{s}") | st.sampled_from(["", "*", "default"])
values = st.one_of(
    st.builds(lambda s: form_pb2.Value(string_value=s), texts),
    st.builds(lambda n: form_pb2.Value(integer_value=n), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda x: form_pb2.Value(number_value=x), st.floats()),
    st.builds(lambda b: form_pb2.Value(boolean_value=b), st.booleans()),
    st.just(form_pb2.Value()),
)
answers = st.builds(
    lambda action, vals: form_pb2.Answer(action=action, values=vals),
    st.integers(min_value=-3, max_value=6),
    st.dictionaries(texts, values, max_size=4),
)
fields = st.builds(
    lambda name, label, required, kind: form_pb2.Field(name=name, label=label, required=required, **kind),
    texts,
    texts,
    st.booleans(),
    st.sampled_from(
        [
            {"string": form_pb2.StringField(min_length=5, max_length=2)},
            {"integer": form_pb2.NumberField(minimum=10, maximum=1)},
            {"boolean": form_pb2.BooleanField()},
            {"single_select": form_pb2.SingleSelectField()},
            {},
        ]
    ),
)
forms = st.builds(lambda message, fs: form_pb2.Form(message=message, fields=fs), texts, st.lists(fields, max_size=40))
bindings = st.builds(
    lambda s, inv: interaction_pb2.Binding(session_id=s, turn_id="t", invocation_id=inv, tool_name="x:y"),
    sessions,
    texts,
)
host_frames = st.one_of(
    st.builds(
        lambda e: interaction_service_pb2.HostLinkRequest(hello=interaction_service_pb2.Hello(resume_epoch=e)),
        st.integers(10_000, 2**64 - 1),
    ),
    st.builds(
        lambda ref, b, f: interaction_service_pb2.HostLinkRequest(
            open=interaction_service_pb2.OpenInteraction(request_ref=ref, binding=b, form=f)
        ),
        texts,
        bindings,
        forms,
    ),
    st.builds(
        lambda i, r: interaction_service_pb2.HostLinkRequest(
            close=interaction_service_pb2.CloseInteraction(interaction_id=i, reason=r)
        ),
        texts,
        st.integers(min_value=-1, max_value=12),
    ),
    st.just(interaction_service_pb2.HostLinkRequest(heartbeat=interaction_service_pb2.Heartbeat())),
    st.just(interaction_service_pb2.HostLinkRequest()),
)
attach_frames = st.one_of(
    st.builds(
        lambda ss, token: interaction_service_pb2.AttachRequest(
            subscribe=interaction_service_pb2.Subscribe(session_ids=ss, resume_token=token)
        ),
        st.lists(sessions, max_size=3),
        texts,
    ),
    st.builds(
        lambda sub, i, a: interaction_service_pb2.AttachRequest(
            answer=interaction_service_pb2.SubmitAnswer(submission_id=sub, interaction_id=i, answer=a)
        ),
        texts,
        texts,
        answers,
    ),
    st.just(interaction_service_pb2.AttachRequest()),
)
descriptors = st.builds(
    lambda name, schema: broker_pb2.ToolDescriptor(name=name, input_schema_json=schema), texts, texts
)
provider_frames = st.one_of(
    st.builds(
        lambda pid, tools: broker_pb2.ConnectRequest(
            register=broker_pb2.Register(provider_id=pid, display_name="fuzz", tools=tools)
        ),
        st.text(max_size=30).map(lambda s: f"fuzz-{s}") | st.just(""),
        st.lists(descriptors, max_size=4),
    ),
    st.just(broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat())),
    st.builds(lambda i: broker_pb2.ConnectRequest(progress=broker_pb2.InvocationProgress(invocation_id=i)), texts),
    st.builds(
        lambda i, f: broker_pb2.ConnectRequest(
            interaction_request=broker_pb2.InteractionRequest(invocation_id=i, correlation_id="c", form=f)
        ),
        texts,
        forms,
    ),
    st.builds(
        lambda i, r: broker_pb2.ConnectRequest(
            result=broker_pb2.InvocationResult(invocation_id=i, call_tool_result_json=r)
        ),
        texts,
        texts,
    ),
    st.builds(
        lambda i, c: broker_pb2.ConnectRequest(failure=broker_pb2.InvocationFailure(invocation_id=i, code=c)),
        texts,
        st.integers(min_value=-1, max_value=30),
    ),
    st.builds(
        lambda t: broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=t)),
        st.lists(descriptors, max_size=3),
    ),
    st.just(broker_pb2.ConnectRequest()),
)
call_requests = st.builds(
    lambda s, turn, use, name, args, call_id: broker_pb2.CallToolRequest(
        session_id=s, turn_id=turn, tool_use_id=use, tool_name=name, arguments_json=args, call_id=call_id
    ),
    sessions,
    texts,
    texts,
    texts | st.sampled_from(["counter:echo", "counter:", ":echo", "nobody:tool"]),
    texts | st.sampled_from(["{}", "[]", "null", '{"tag": 1}', "{" * 500]),
    st.just("") | texts,
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def observed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Observed]:
    """This module's own stack (the fuzzer gets processes no other suite shares)."""
    async with reliability_stack(tmp_path_factory.mktemp("fuzzed"), echo=False) as (running, log):
        await tools_ready(running)
        yield Observed(running, log, {})


def check(outcome: grpc.aio.AioRpcError | None, *, stream: bool = False) -> None:
    """An RPC outcome is OK, a domain error with a reason from the closed set, or a transport refusal."""
    if outcome is None:
        return
    detail = error_from_rpc(outcome)
    if detail.reason:
        assert detail.code in DOMAIN_CODES, detail
        assert detail.reason in CLOSED_REASONS, detail
        return
    if stream and detail.code == grpc.StatusCode.INTERNAL and detail.message == CLIENT_SEND_RACE:
        return  # the server ended the stream while the client was still writing; its own status was lost
    allowed = TRANSPORT_CODES | ({grpc.StatusCode.CANCELLED} if stream else frozenset())
    assert detail.code in allowed, detail


async def outcome_of(make: Callable[[], Awaitable[Any]]) -> grpc.aio.AioRpcError | None:
    try:
        await make()
    except grpc.aio.AioRpcError as error:
        return error
    return None


async def drive(call: Any, frames: list[Any], *, reads: int = 3) -> grpc.aio.AioRpcError | None:
    """Write ``frames`` on a bidi stream, then read up to ``reads`` replies; the RPC's final error, if any."""

    async def run() -> None:
        for frame in frames:
            try:
                await call.write(frame)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                break  # the server already ended the stream; its status is read below, not the write's
        for _ in range(reads):
            if await call.read() is grpc.aio.EOF:
                break

    try:
        await run()
    except grpc.aio.AioRpcError as error:
        return error
    except asyncio.InvalidStateError:
        pass
    finally:
        call.cancel()
    return None


async def still_healthy(observed: Observed) -> None:
    """Every service SERVING and a normal form round completing, after the fuzzing."""
    for name in SERVICES:
        assert await healthcheck.serving(observed.running.stack.address(name), "", timeout=5), name
    tag = f"after-fuzz-{id(observed)}"
    async with ToolCall(observed.broker, "counter:ask", {"tag": tag}, session="after-fuzz") as call:
        interaction_id = await call.awaiting()
        await answer(observed.interaction, interaction_id, "still-works")
        done = await call.terminal()
    assert result_payload(done) == {"tag": tag, "action": "accept", "digest": digest("still-works")}


@UNARY
@given(
    answer_request=st.builds(
        lambda i, s, sub, a: interaction_service_pb2.AnswerRequest(
            interaction_id=i, session_id=s, submission_id=sub, answer=a
        ),
        texts,
        sessions,
        texts,
        answers,
    ),
    listing=st.lists(sessions, max_size=5),
    get=st.builds(
        lambda i, s: interaction_service_pb2.GetInteractionRequest(interaction_id=i, session_id=s), texts, sessions
    ),
)
async def test_interaction_unary_endpoints_answer_random_requests_with_stable_errors(
    observed: Observed, answer_request: Any, listing: list[str], get: Any
) -> None:
    async with open_channel(observed.interaction) as channel:
        stub = interaction_stub(channel)
        check(await outcome_of(lambda: stub.Answer(answer_request, timeout=10)))
        check(
            await outcome_of(
                lambda: stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=listing), timeout=10)
            )
        )
        check(await outcome_of(lambda: stub.GetInteraction(get, timeout=10)))


@STREAMS
@given(host=st.lists(host_frames, min_size=1, max_size=4), attach=st.lists(attach_frames, min_size=1, max_size=4))
async def test_interaction_streams_survive_random_frames(
    observed: Observed, host: list[Any], attach: list[Any]
) -> None:
    async with open_channel(observed.interaction) as channel:
        stub = interaction_stub(channel)
        check(await drive(stub.HostLink(timeout=2), host), stream=True)
        check(await drive(stub.Attach(timeout=2), attach), stream=True)


@UNARY
@given(
    stop=st.builds(lambda s, t: broker_pb2.StopRequest(session_id=s, turn_id=t), sessions, texts),
    call=call_requests,
    watch=st.builds(
        lambda i, t: broker_pb2.WatchCallRequest(invocation_id=i, resume_token=t),
        texts | st.just("inv_nothing"),
        st.just("") | texts | st.integers(0, 2**70).map(str),
    ),
)
async def test_broker_unary_endpoints_and_calltool_answer_random_requests_with_stable_errors(
    observed: Observed, stop: Any, call: Any, watch: Any
) -> None:
    async with open_channel(observed.broker) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        check(await outcome_of(lambda: stub.Stop(stop, timeout=10)))
        check(await outcome_of(lambda: stub.ListTools(broker_pb2.ListToolsRequest(), timeout=10)))

        async def read_all() -> None:
            async for event in stub.CallTool(call, timeout=10):
                assert event.WhichOneof("event") is not None

        check(await outcome_of(read_all))

        async def watch_all() -> None:
            async for item in stub.WatchCall(watch, timeout=10):
                assert item.event.WhichOneof("event") is not None

        check(await outcome_of(watch_all))


@STREAMS
@given(frames=st.lists(provider_frames, min_size=1, max_size=6))
async def test_broker_connect_survives_random_provider_frames(observed: Observed, frames: list[Any]) -> None:
    async with open_channel(observed.broker) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        check(await drive(stub.Connect(timeout=2), frames, reads=len(frames)), stream=True)


@UNARY
@given(payload=st.binary(max_size=2000))
async def test_undecodable_bytes_on_every_unary_method_are_refused_without_crashing(
    observed: Observed, payload: bytes
) -> None:
    targets = {
        observed.interaction: ["Answer", "ListPending", "GetInteraction"],
        observed.broker: ["Stop", "ListTools"],
    }
    for target, methods in targets.items():
        service = "maka.interaction.v1.InteractionService" if target == observed.interaction else None
        service = service or "maka.broker.v1.CapabilityBrokerService"
        async with open_channel(target) as channel:
            for method in methods:
                raw: Any = channel.unary_unary(f"/{service}/{method}")
                error = await outcome_of(lambda raw=raw: raw(payload, timeout=10))  # type: ignore[misc]
                if error is not None and not error_from_rpc(error).reason:
                    # grpcio refuses bytes that do not parse as the request message before any handler runs.
                    assert error.code() in {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}, error
                    assert "error parsing message" in (error.details() or "").lower(), error
                else:
                    check(error)


async def test_oversized_messages_are_refused_and_the_services_stay_up(observed: Observed) -> None:
    big = "x" * (5 * 1024 * 1024)
    options = [("grpc.max_send_message_length", 16 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(observed.interaction, options=options) as channel:
        stub = interaction_stub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as too_big:
            await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=big), timeout=10)
        assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Under the transport cap but over the domain caps: refused with a stable reason, nothing stored.
    async with open_channel(observed.interaction) as channel:
        stub = interaction_stub(channel)
        near = "y" * (3 * 1024 * 1024)
        answer = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values={"v": form_pb2.Value(string_value=near)})
        error = await outcome_of(
            lambda: stub.Answer(
                interaction_service_pb2.AnswerRequest(interaction_id="ix_none", submission_id="s", answer=answer),
                timeout=10,
            )
        )
        assert error is not None
        check(error)
    async with open_channel(observed.broker) as channel:
        broker = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        events = [
            event
            async for event in broker.CallTool(
                broker_pb2.CallToolRequest(
                    session_id="fuzz", turn_id="t", tool_use_id="u", tool_name="counter:echo", arguments_json=near
                ),
                timeout=10,
            )
        ]
    assert events[-1].WhichOneof("event") == "failure"
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST  # 3 MiB that is not a JSON object


async def test_after_the_fuzzing_every_service_is_serving_and_a_form_round_completes(observed: Observed) -> None:
    pids = observed.running.stack.supervisor.pids()
    await still_healthy(observed)
    assert observed.running.stack.supervisor.pids() == pids  # nothing crashed and was restarted
    assert [e for e in observed.running.stack.history if e.kind == "exited"] == []
