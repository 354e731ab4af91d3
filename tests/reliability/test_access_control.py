"""Access control on the real services: bearer tokens by role, session-scoped surfaces, TLS and mTLS.

A stack of real processes is started with a tokens file (``MAKA_AUTH_TOKENS_FILE``); the broker
presents ``MAKA_INTERACTION_TOKEN`` on HostLink, the provider ``MAKA_BROKER_TOKEN`` on Connect, the
test plays the Tool caller (``MAKA_CALLER_TOKEN``) and surfaces (``MAKA_SURFACE_TOKEN``).
Unauthenticated → UNAUTHENTICATED; wrong role → PERMISSION_DENIED; a foreign session's form is
NOT_FOUND by id and PERMISSION_DENIED when asked for by session (without revealing existence).
TLS/mTLS on the real services: ``test_tls.py``. Sources: docs/design.md#tokens.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core.channels import open_channel
from services.core.reasons import AuthErrorReason, ErrorReason, InteractionErrorReason
from services.core.status import error_from_rpc
from stack.topology import Stack
from tests.helpers.stack import RunningStack
from tests.reliability.counting_server import digest
from tests.reliability.harness import (
    ToolCall,
    answer,
    get_interaction,
    interaction_stub,
    reliability_stack,
    result_payload,
    tools_ready,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150), pytest.mark.asyncio(loop_scope="module")]

TOKENS = {
    "broker": ("broker-secret-1", ["broker"], ["*"]),
    "provider": ("provider-secret-1", ["provider"], ["*"]),
    "caller": ("caller-secret-1", ["caller"], ["*"]),
    "surface_a": ("surface-a-secret-1", ["surface"], ["sa"]),
    "surface_b": ("surface-b-secret-1", ["surface"], ["sb"]),
}
BROKER, PROVIDER, CALLER, SURFACE_A, SURFACE_B = (TOKENS[name][0] for name in TOKENS)
UNKNOWN = "not-a-configured-token"


def write_tokens(path: Path) -> Path:
    """The tokens file of this suite (``services.core.auth`` format)."""
    entries = [
        {"name": name, "token": token, "roles": roles, "sessions": sessions}
        for name, (token, roles, sessions) in TOKENS.items()
    ]
    path.write_text(json.dumps({"tokens": entries}))
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningStack]:
    """A stack with authentication on; each service gets the token of its role for the next hop."""
    directory = tmp_path_factory.mktemp("auth")
    tokens = write_tokens(directory / "tokens.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAKA_CALLER_TOKEN", CALLER)  # the supervisor's ListTools readiness check is a caller
        async with reliability_stack(
            directory,
            env={"MAKA_AUTH_TOKENS_FILE": str(tokens)},
            child_env={"broker": {"MAKA_INTERACTION_TOKEN": BROKER}, "provider": {"MAKA_BROKER_TOKEN": PROVIDER}},
        ) as (running, _log):
            await tools_ready(running, token=CALLER)
            yield running


def _targets(running: RunningStack) -> tuple[str, str]:
    return running.stack.address(Stack.INTERACTION), running.stack.address(Stack.BROKER)


Probe = Callable[[grpc.aio.Channel], Awaitable[Any]]


async def _first_reply(call: Any, request: Any) -> Any:
    """Write ``request`` then read the first reply (for streams the handler admits and then judges)."""
    await call.write(request)
    reply = await call.read()
    call.cancel()
    return reply


async def _refused_at_start(call: Any) -> Any:
    """Read a bidi stream without writing: the auth interceptor refuses a call from its headers alone.

    (Writing first would race the refusal: grpcio then reports a client-side INTERNAL for the write.)
    """
    reply = await call.read()
    call.cancel()
    return reply


INTERACTION_PROBES: dict[str, Probe] = {
    "HostLink": lambda ch: _refused_at_start(interaction_stub(ch).HostLink(timeout=10)),
    "Attach": lambda ch: _refused_at_start(interaction_stub(ch).Attach(timeout=10)),
    "Answer": lambda ch: interaction_stub(ch).Answer(
        interaction_service_pb2.AnswerRequest(interaction_id="ix_nothing", submission_id="s"), timeout=10
    ),
    "ListPending": lambda ch: interaction_stub(ch).ListPending(
        interaction_service_pb2.ListPendingRequest(session_ids=["sa"]), timeout=10
    ),
    "GetInteraction": lambda ch: interaction_stub(ch).GetInteraction(
        interaction_service_pb2.GetInteractionRequest(interaction_id="ix_nothing"), timeout=10
    ),
}
BROKER_PROBES: dict[str, Probe] = {
    "Connect": lambda ch: _refused_at_start(broker_pb2_grpc.CapabilityBrokerServiceStub(ch).Connect(timeout=10)),
    "CallTool": lambda ch: _first_reply_unary_stream(
        broker_pb2_grpc.CapabilityBrokerServiceStub(ch).CallTool(
            broker_pb2.CallToolRequest(session_id="sa", turn_id="t", tool_use_id="u", tool_name="counter:echo"),
            timeout=10,
        )
    ),
    "Stop": lambda ch: broker_pb2_grpc.CapabilityBrokerServiceStub(ch).Stop(
        broker_pb2.StopRequest(session_id="nobody"), timeout=10
    ),
    "ListTools": lambda ch: broker_pb2_grpc.CapabilityBrokerServiceStub(ch).ListTools(
        broker_pb2.ListToolsRequest(), timeout=10
    ),
    "WatchTools": lambda ch: _first_reply_unary_stream(
        broker_pb2_grpc.CapabilityBrokerServiceStub(ch).WatchTools(broker_pb2.WatchToolsRequest(), timeout=10)
    ),
}


async def _first_reply_unary_stream(call: Any) -> Any:
    reply = await call.read()
    call.cancel()
    return reply


async def _refusal(target: str, token: str | None, probe: Probe) -> tuple[grpc.StatusCode, ErrorReason | str]:
    """``(status code, ErrorInfo reason)`` of ``probe`` with ``token``; ``(OK, "")`` when admitted."""
    async with open_channel(target, token=token) as channel:
        try:
            await probe(channel)
        except grpc.aio.AioRpcError as error:
            detail = error_from_rpc(error)
            return detail.code, detail.reason
    return grpc.StatusCode.OK, ""


async def test_a_form_round_runs_end_to_end_with_a_token_per_role(secured: RunningStack) -> None:
    interaction, broker = _targets(secured)
    async with ToolCall(broker, "counter:ask", {"tag": "auth-round"}, session="sa", token=CALLER) as call:
        interaction_id = await call.awaiting()
        await answer(interaction, interaction_id, "with-tokens", token=SURFACE_A)
        done = await call.terminal()
    assert result_payload(done) == {"tag": "auth-round", "action": "accept", "digest": digest("with-tokens")}


@pytest.mark.parametrize("token", [None, UNKNOWN], ids=["no-token", "unknown-token"])
async def test_every_rpc_refuses_an_unauthenticated_caller(secured: RunningStack, token: str | None) -> None:
    interaction, broker = _targets(secured)
    refusals = {name: await _refusal(interaction, token, probe) for name, probe in INTERACTION_PROBES.items()}
    refusals |= {name: await _refusal(broker, token, probe) for name, probe in BROKER_PROBES.items()}
    assert refusals == dict.fromkeys(refusals, (grpc.StatusCode.UNAUTHENTICATED, AuthErrorReason.UNAUTHENTICATED))


async def test_every_rpc_refuses_a_token_of_the_wrong_role(secured: RunningStack) -> None:
    interaction, broker = _targets(secured)
    wrong = {
        "HostLink": SURFACE_A,
        "Attach": BROKER,
        "Answer": CALLER,
        "ListPending": PROVIDER,
        "GetInteraction": BROKER,
    }
    refusals = {name: await _refusal(interaction, wrong[name], probe) for name, probe in INTERACTION_PROBES.items()}
    wrong_broker = {
        "Connect": CALLER,
        "CallTool": SURFACE_A,
        "Stop": PROVIDER,
        "ListTools": BROKER,
        "WatchTools": SURFACE_A,
    }
    refusals |= {name: await _refusal(broker, wrong_broker[name], probe) for name, probe in BROKER_PROBES.items()}
    assert refusals == dict.fromkeys(refusals, (grpc.StatusCode.PERMISSION_DENIED, AuthErrorReason.PERMISSION_DENIED))


async def test_health_checks_need_no_token(secured: RunningStack) -> None:
    for target in _targets(secured):
        async with open_channel(target) as channel:
            health: Any = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_surface_token_cannot_see_or_answer_another_sessions_form(secured: RunningStack) -> None:
    interaction, broker = _targets(secured)
    async with ToolCall(broker, "counter:ask", {"tag": "auth-foreign"}, session="sa", token=CALLER) as call:
        interaction_id = await call.awaiting()
        async with open_channel(interaction, token=SURFACE_B) as channel:
            stub = interaction_stub(channel)
            # By id: indistinguishable from a form that does not exist.
            for attempt in (
                stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id)),
                stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id="ix_never_made")),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as by_id:
                    await attempt
                assert (error_from_rpc(by_id.value).code, error_from_rpc(by_id.value).reason) == (
                    grpc.StatusCode.NOT_FOUND,
                    "NOT_FOUND",
                )
            with pytest.raises(grpc.aio.AioRpcError) as answered:
                await answer(interaction, interaction_id, "hijack", channel=channel)
            assert error_from_rpc(answered.value).reason == InteractionErrorReason.NOT_FOUND
            # Asking for the session explicitly is refused; listing what it may see leaves the form out.
            with pytest.raises(grpc.aio.AioRpcError) as by_session:
                await stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["sa"]), timeout=10)
            refused = error_from_rpc(by_session.value)
            assert (refused.code, refused.reason) == (
                grpc.StatusCode.PERMISSION_DENIED,
                InteractionErrorReason.PERMISSION_DENIED,
            )
            visible = await stub.ListPending(interaction_service_pb2.ListPendingRequest(), timeout=10)
            assert interaction_id not in [i.interaction_id for i in visible.pending]
            attach = await _refusal(
                interaction,
                SURFACE_B,
                lambda ch: _first_reply(
                    interaction_stub(ch).Attach(timeout=10),
                    interaction_service_pb2.AttachRequest(
                        subscribe=interaction_service_pb2.Subscribe(session_ids=["sa"])
                    ),
                ),
            )
            assert attach[0] == grpc.StatusCode.PERMISSION_DENIED
        # Nothing changed: the owner still sees it pending and can answer it.
        record = await get_interaction(interaction, interaction_id, token=SURFACE_A)
        assert record.state == interaction_pb2.INTERACTION_STATE_PENDING
        await answer(interaction, interaction_id, "owner", token=SURFACE_A)
        done = await call.terminal()
        assert result_payload(done)["digest"] == digest("owner")
