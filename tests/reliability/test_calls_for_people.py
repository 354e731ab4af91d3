"""People's calls stay apart at the broker through real processes (docs/security.md "Who may see and do what"): a
stack with a tokens file and a real OpenID provider; alice's call waits on its form while carol, signed in as
another person, names it by session, by turn, by id, with ``all`` and with ``maka stop --all``: each answers 0
stopped and alice's call stays pending; ``WatchCall`` of it is the ``NOT_FOUND`` of an unknown id. alice's own
Stop and the admin token's stop her calls."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.channels import open_channel
from tests.helpers.cli import maka
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.helpers.stack import RunningStack
from tests.reliability.harness import ToolCall, reliability_stack, tools_ready

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="module")]

AUDIENCE = "maka-cli"
ALICE = Person("alice", "alice@example.com", ("staff",))
CAROL = Person("carol", "carol@example.com", ("staff",))
TOKENS = {
    "broker": ("broker-secret-1", ["broker"]),
    "provider": ("provider-secret-1", ["provider"]),
    "caller": ("caller-secret-1", ["caller"]),
    "admin": ("admin-secret-1", ["admin"]),
}
BROKER, PROVIDER, CALLER, ADMIN = (TOKENS[name][0] for name in TOKENS)


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, CAROL]) as running:
        yield running


@pytest.fixture(scope="module")
def people(provider: Provider) -> dict[str, str]:
    return {person.sub: id_token(provider, person, AUDIENCE) for person in (ALICE, CAROL)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, provider: Provider) -> AsyncIterator[RunningStack]:
    directory = tmp_path_factory.mktemp("calls-people")
    tokens = directory / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": n, "token": t, "roles": r} for n, (t, r) in TOKENS.items()]}))
    env = {
        "MAKA_AUTH_TOKENS_FILE": str(tokens),
        "MAKA_OIDC_ISSUER": provider.issuer,
        "MAKA_OIDC_AUDIENCES": json.dumps([AUDIENCE]),
        "MAKA_OIDC_ROLES": json.dumps({"staff": ["caller", "surface"]}),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAKA_CALLER_TOKEN", CALLER)
        async with reliability_stack(
            directory,
            env=env,
            child_env={"broker": {"MAKA_INTERACTION_TOKEN": BROKER}, "provider": {"MAKA_BROKER_TOKEN": PROVIDER}},
        ) as (running, _log):
            await tools_ready(running, token=CALLER)
            yield running


async def _stop(broker: str, token: str, request: broker_pb2.StopRequest) -> int:
    async with open_channel(broker, token=token) as channel:
        reply = await broker_pb2_grpc.CapabilityBrokerServiceStub(channel).Stop(request, timeout=20)
    return reply.stopped_invocations


async def _watch_code(broker: str, token: str, invocation_id: str) -> tuple[grpc.StatusCode, str]:
    async with open_channel(broker, token=token) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        try:
            async for _event in stub.WatchCall(broker_pb2.WatchCallRequest(invocation_id=invocation_id), timeout=20):
                break
        except grpc.aio.AioRpcError as error:
            return error.code(), (error.details() or "").replace(invocation_id, "ID")
    return grpc.StatusCode.OK, ""


ROUTES = ["session", "turn", "invocation", "all", "maka-stop-all"]


@pytest.mark.parametrize("route", ROUTES)
async def test_another_person_stops_nothing_of_alices_by_any_route_and_her_call_stays_pending(
    stack: RunningStack, people: dict[str, str], route: str
) -> None:
    broker = stack.endpoints.broker
    turn = f"t-{route}"
    async with ToolCall(broker, "counter:ask", {"tag": route}, turn=turn, token=people["alice"]) as alices:
        await alices.awaiting()
        invocation_id = alices.events[0].accepted.invocation_id
        if route == "maka-stop-all":
            ran = await maka(
                "stop",
                "--all",
                "--broker",
                broker,
                state_dir=None,
                env={**os.environ, "MAKA_CALLER_TOKEN": people["carol"]},
            )
            assert ran.code == 0, ran.err
            assert "stopped 0 invocation(s)" in ran.out
        else:
            request = {
                "session": broker_pb2.StopRequest(session_id="default"),
                "turn": broker_pb2.StopRequest(session_id="default", turn_id=turn),
                "invocation": broker_pb2.StopRequest(invocation_id=invocation_id),
                "all": broker_pb2.StopRequest(all=True),
            }[route]
            assert await _stop(broker, people["carol"], request) == 0
        assert "stopped" not in alices.kinds()
        assert await _watch_code(broker, people["carol"], invocation_id) == await _watch_code(
            broker, people["carol"], "inv_" + "A" * 16
        )
        assert (await _watch_code(broker, people["carol"], invocation_id))[0] == grpc.StatusCode.NOT_FOUND
        assert await _stop(broker, people["alice"], broker_pb2.StopRequest(session_id="default", turn_id=turn)) == 1
        assert (await alices.terminal()).WhichOneof("event") == "stopped"


async def test_the_admin_token_stops_a_persons_call(stack: RunningStack, people: dict[str, str]) -> None:
    broker = stack.endpoints.broker
    async with ToolCall(broker, "counter:ask", {"tag": "admin"}, turn="t-admin", token=people["alice"]) as alices:
        await alices.awaiting()
        assert await _stop(broker, ADMIN, broker_pb2.StopRequest(session_id="default", turn_id="t-admin")) == 1
        assert (await alices.terminal()).WhichOneof("event") == "stopped"


async def test_another_persons_live_tool_use_id_neither_blocks_a_call_nor_is_revealed_and_ones_own_still_is(
    stack: RunningStack, people: dict[str, str]
) -> None:
    broker = stack.endpoints.broker
    turn = "t-same-ids"
    async with ToolCall(broker, "counter:ask", {"tag": "alice"}, turn=turn, token=people["alice"]) as alices:
        await alices.awaiting()
        async with ToolCall(broker, "counter:ask", {"tag": "carol"}, turn=turn, token=people["carol"]) as carols:
            await carols.awaiting()
            assert carols.events[0].WhichOneof("event") == "accepted"
            async with ToolCall(broker, "counter:ask", {"tag": "again"}, turn=turn, token=people["alice"]) as again:
                refused = await again.terminal()
            assert refused.failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST
            assert "tool_use_id" in refused.failure.message
            assert "stopped" not in alices.kinds()
            assert "stopped" not in carols.kinds()
            assert await _stop(broker, people["carol"], broker_pb2.StopRequest(session_id="default", turn_id=turn)) == 1
            assert (await carols.terminal()).WhichOneof("event") == "stopped"
        assert "stopped" not in alices.kinds()
        assert await _stop(broker, people["alice"], broker_pb2.StopRequest(session_id="default", turn_id=turn)) == 1
        assert (await alices.terminal()).WhichOneof("event") == "stopped"
