"""The Python client library on its own: it imports without the services or gen/, and its reattach
rules hold against a scripted broker (a real grpc.aio server on loopback)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka_client import (
    Accepted,
    BrokerClient,
    ClientErrorReason,
    MakaError,
    Reattaching,
    ReattachPolicy,
    Result,
    Status,
    SurfaceClient,
    ToolInfo,
    ToolListing,
)

ROOT = Path(__file__).resolve().parents[2]
Context = grpc.aio.ServicerContext[object, object]


def test_the_client_imports_without_the_services_or_the_repository_gen_package() -> None:
    code = (
        "import sys; import maka_client, maka_client.broker, maka_client.surface; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('services', 'surfaces', 'maka', 'tests')); "
        "assert not bad, bad; print('ok')"
    )
    src = ROOT / "clients" / "python" / "src"
    # -I: isolated (no cwd, no PYTHONPATH); only the client's sources and the installed dependencies.
    run = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(src)!r}); {code}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    assert (run.returncode, run.stdout.strip()) == (0, "ok"), run.stderr
    assert (src / "maka_client" / "py.typed").exists()


class Scripted(broker_pb2_grpc.CapabilityBrokerServiceServicer):
    """CallTool sends ``accepted`` then fails with ``drop_code``; WatchCall replays from the token; WatchTools sends
    a listing then fails with ``drop_code``."""

    def __init__(self, drop_code: grpc.StatusCode, watch_works: bool = True) -> None:
        self.drop_code = drop_code
        self.watch_works = watch_works
        self.watches: list[broker_pb2.WatchCallRequest] = []
        self.tool_watches = 0
        self.log = [
            broker_pb2.CallToolResponse(
                accepted=broker_pb2.CallAccepted(invocation_id="inv-1", provider_id="p"), sequence=1, resume_token="1"
            ),
            broker_pb2.CallToolResponse(
                result=broker_pb2.CallResult(call_tool_result_json='{"content":[{"type":"text","text":"ok"}]}'),
                sequence=2,
                resume_token="2",
            ),
        ]

    async def CallTool(
        self, request: broker_pb2.CallToolRequest, context: Context
    ) -> AsyncIterator[broker_pb2.CallToolResponse]:
        yield self.log[0]
        await context.abort(self.drop_code, "cut")

    async def WatchCall(
        self, request: broker_pb2.WatchCallRequest, context: Context
    ) -> AsyncIterator[broker_pb2.WatchCallResponse]:
        self.watches.append(request)
        if not self.watch_works:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "still down")
        yield broker_pb2.WatchCallResponse(
            event=broker_pb2.CallToolResponse(
                status=broker_pb2.CallStatus(invocation_id="inv-1"), sequence=1, resume_token="1"
            )
        )
        for event in self.log:  # replays everything: the client must skip what it already yielded
            yield broker_pb2.WatchCallResponse(event=event)

    def Connect(
        self, request_iterator: AsyncIterator[broker_pb2.ConnectRequest], context: Context
    ) -> AsyncIterator[broker_pb2.ConnectResponse]:
        raise NotImplementedError

    async def Stop(self, request: broker_pb2.StopRequest, context: Context) -> broker_pb2.StopResponse:
        return broker_pb2.StopResponse()

    async def ListTools(self, request: broker_pb2.ListToolsRequest, context: Context) -> broker_pb2.ListToolsResponse:
        return broker_pb2.ListToolsResponse()

    async def WatchTools(
        self, request: broker_pb2.WatchToolsRequest, context: Context
    ) -> AsyncIterator[broker_pb2.WatchToolsResponse]:
        """Each stream: one listing (its revision counts the streams), then the drop code (a refusal: at once)."""
        self.tool_watches += 1
        if self.drop_code is not grpc.StatusCode.PERMISSION_DENIED:
            tool = broker_pb2.Tool(qualified_name=f"x:y{self.tool_watches}", input_schema_json='{"type":"object"}')
            yield broker_pb2.WatchToolsResponse(revision=self.tool_watches, tools=[tool], host_id="h")
        await context.abort(self.drop_code, "scripted drop")

    async def ListSignIns(
        self, request: broker_pb2.ListSignInsRequest, context: Context
    ) -> broker_pb2.ListSignInsResponse:
        return broker_pb2.ListSignInsResponse()

    async def CompleteSignIn(
        self, request: broker_pb2.CompleteSignInRequest, context: Context
    ) -> broker_pb2.CompleteSignInResponse:
        raise NotImplementedError("no sign-in on the scripted broker")

    async def SignOut(self, request: broker_pb2.SignOutRequest, context: Context) -> broker_pb2.SignOutResponse:
        raise NotImplementedError("no sign-in on the scripted broker")

    async def ReportServers(
        self, request_iterator: AsyncIterator[broker_pb2.ReportServersRequest], context: Context
    ) -> broker_pb2.ReportServersResponse:
        return broker_pb2.ReportServersResponse()

    async def GetStatus(self, request: broker_pb2.GetStatusRequest, context: Context) -> broker_pb2.GetStatusResponse:
        return broker_pb2.GetStatusResponse()


async def _serve(servicer: Scripted) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    broker_pb2_grpc.add_CapabilityBrokerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_a_dropped_stream_is_resumed_with_the_last_token_and_nothing_is_yielded_twice() -> None:
    servicer = Scripted(grpc.StatusCode.UNAVAILABLE)
    server, target = await _serve(servicer)
    try:
        async with BrokerClient(target, reattach=ReattachPolicy(initial_delay=0.01)) as broker:
            call = broker.call_tool("x:y")
            async with asyncio.timeout(10):
                events = [e async for e in call]
    finally:
        await server.stop(None)
    assert [type(e) for e in events] == [Accepted, Reattaching, Status, Result]
    assert [(w.invocation_id, w.resume_token) for w in servicer.watches] == [("inv-1", "1")]
    assert call.reattaches == 1


async def test_a_refusal_is_raised_at_once_and_never_reattached() -> None:
    servicer = Scripted(grpc.StatusCode.PERMISSION_DENIED)
    server, target = await _serve(servicer)
    try:
        async with BrokerClient(target) as broker:
            call = broker.call_tool("x:y")
            with pytest.raises(MakaError) as raised:
                async with asyncio.timeout(10):
                    await call.result()
    finally:
        await server.stop(None)
    assert raised.value.grpc_status_code is grpc.StatusCode.PERMISSION_DENIED
    assert servicer.watches == []


async def test_watch_tools_reconnects_after_a_drop_and_yields_the_whole_listing_again() -> None:
    servicer = Scripted(grpc.StatusCode.UNAVAILABLE)
    server, target = await _serve(servicer)
    try:
        async with BrokerClient(target, reattach=ReattachPolicy(initial_delay=0.01)) as broker:
            feed = broker.watch_tools()
            async with asyncio.timeout(10):
                items = [await anext(feed) for _ in range(3)]
            await feed.aclose()
    finally:
        await server.stop(None)
    first, dropped, again = items
    assert first == ToolListing(1, "h", (ToolInfo("x:y1", "", {"type": "object"}, "", ""),))
    assert isinstance(dropped, Reattaching)
    assert dropped.code == "UNAVAILABLE"
    assert isinstance(again, ToolListing)
    assert (again.revision, [tool.name for tool in again.tools]) == (2, ["x:y2"])


async def test_watch_tools_raises_a_refusal_and_never_reconnects() -> None:
    servicer = Scripted(grpc.StatusCode.PERMISSION_DENIED)
    server, target = await _serve(servicer)
    try:
        async with BrokerClient(target, reattach=ReattachPolicy(initial_delay=0.01)) as broker:
            feed = broker.watch_tools()
            with pytest.raises(MakaError) as raised:
                await asyncio.wait_for(anext(feed), 10)
            await feed.aclose()
    finally:
        await server.stop(None)
    assert raised.value.grpc_status_code is grpc.StatusCode.PERMISSION_DENIED
    assert servicer.tool_watches == 1


async def test_reattaching_gives_up_after_the_policy_bound() -> None:
    servicer = Scripted(grpc.StatusCode.UNAVAILABLE, watch_works=False)
    server, target = await _serve(servicer)
    try:
        policy = ReattachPolicy(initial_delay=0.01, max_delay=0.05, give_up_after=0.5)
        async with BrokerClient(target, reattach=policy) as broker:
            with pytest.raises(MakaError) as raised:
                async with asyncio.timeout(10):
                    await broker.call_tool("x:y").result()
    finally:
        await server.stop(None)
    assert raised.value.reason is ClientErrorReason.REATTACH_FAILED
    assert raised.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE
    assert len(servicer.watches) >= 2


async def test_an_unreachable_broker_fails_at_once_with_unavailable() -> None:
    async with BrokerClient("127.0.0.1:1") as broker:
        with pytest.raises(MakaError) as raised:
            async with asyncio.timeout(10):
                await broker.call_tool("x:y").result()
    assert raised.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE


async def test_a_client_over_a_callers_channel_answers_status_and_sign_ins_and_leaves_the_channel_open() -> None:
    server, target = await _serve(Scripted(grpc.StatusCode.UNAVAILABLE))
    channel = grpc.aio.insecure_channel(target)
    try:
        async with BrokerClient(target, channel=channel) as broker:
            status = await broker.get_status()
            assert list(status.servers) == []
            assert await broker.list_sign_ins() == []
            with pytest.raises(MakaError) as refused:
                await broker.complete_sign_in("code", "state")
            assert refused.value.grpc_status_code is grpc.StatusCode.UNKNOWN
        # the caller's channel outlives the client
        assert list((await BrokerClient(target, channel=channel).get_status()).servers) == []
    finally:
        await channel.close()
        await server.stop(None)


async def test_from_env_finds_the_local_stack_through_the_state_dirs_endpoints_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, address = await _serve(Scripted(grpc.StatusCode.UNAVAILABLE))
    monkeypatch.delenv("MAKA_BROKER_TARGET", raising=False)
    monkeypatch.delenv("MAKA_INTERACTION_TARGET", raising=False)
    monkeypatch.delenv("MAKA_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".state").mkdir()
    endpoints = {"interaction": "127.0.0.1:1", "broker": address}
    (tmp_path / ".state" / "endpoints.json").write_text(json.dumps(endpoints))
    try:
        async with BrokerClient.from_env() as client:
            assert client.target == address
            assert await client.list_tools() == []
        other = tmp_path / "elsewhere"
        other.mkdir()
        (other / "endpoints.json").write_text(json.dumps({"interaction": "127.0.0.1:7", "broker": "127.0.0.1:8"}))
        monkeypatch.setenv("MAKA_STATE_DIR", str(other))
        async with BrokerClient.from_env() as moved, SurfaceClient.from_env() as surface:
            assert (moved.target, surface.target) == ("127.0.0.1:8", "127.0.0.1:7")
        monkeypatch.setenv("MAKA_BROKER_TARGET", "127.0.0.1:9")
        async with BrokerClient.from_env() as explicit:
            assert explicit.target == "127.0.0.1:9"
    finally:
        await server.stop(None)


def test_a_refusal_with_violations_names_each_failing_field_in_its_text() -> None:
    error = MakaError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "the answer does not match the form",
        reason="INVALID_ANSWER",
        violations=(("/email", "must be an email address"), ("/coverage", "must be at most 100")),
    )

    assert str(error) == (
        "INVALID_ANSWER: the answer does not match the form"
        " (/email: must be an email address; /coverage: must be at most 100)"
    )
