"""``WatchTools`` over gRPC (services/broker/servicer.py, registry.py's published listing): the listing first, one
revision per change of the Host's Tools (providers registering, replacing their Tools, leaving), none when nothing
changed, and the stream's end on drain and shutdown. Real broker and Interaction service on loopback, synthetic
providers as real ``Connect`` clients."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from tests.helpers.broker import FRAME_TIMEOUT, BrokerStack, StackFactory, deploy_tool

Listings = grpc.aio.UnaryStreamCall[broker_pb2.WatchToolsRequest, broker_pb2.WatchToolsResponse]


async def _next(stream: Listings) -> broker_pb2.WatchToolsResponse:
    async with asyncio.timeout(FRAME_TIMEOUT):
        listing = await stream.read()
    assert isinstance(listing, broker_pb2.WatchToolsResponse), "the stream ended"
    return listing


async def _ended(stream: Listings) -> grpc.StatusCode:
    async with asyncio.timeout(FRAME_TIMEOUT):
        assert await stream.read() is grpc.aio.EOF
        return await stream.code()


def _names(listing: broker_pb2.WatchToolsResponse) -> list[str]:
    return [tool.qualified_name for tool in listing.tools]


async def test_the_feed_sends_the_listing_then_one_revision_per_change_and_none_for_a_change_that_changes_nothing(
    stack: BrokerStack,
) -> None:
    stream = stack.broker.WatchTools(broker_pb2.WatchToolsRequest())
    first = await _next(stream)
    assert (first.revision, _names(first)) == (1, [])

    provider = await stack.provider("mcp:examples", [deploy_tool()])
    registered = await _next(stream)
    assert (registered.revision, _names(registered)) == (2, ["examples:deploy"])
    assert registered.tools[0].provider_id == "mcp:examples"

    # The same Tools again, then a re-registration with the same Tools: the listing does not change, so no
    # revision is published; the next message is the following real change, exactly one revision on.
    await provider.send(broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=[deploy_tool()])))
    again = await stack.provider("mcp:examples", [deploy_tool()])
    await again.send(
        broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=[deploy_tool(), deploy_tool("ping")]))
    )
    changed = await _next(stream)
    assert (changed.revision, _names(changed)) == (3, ["examples:deploy", "examples:ping"])

    other = await stack.provider("mcp:other", [deploy_tool("ping", "other")])
    added = await _next(stream)
    assert (added.revision, _names(added)) == (4, ["examples:deploy", "examples:ping", "other:ping"])

    other.kill()  # a provider leaving (its process gone)
    left = await _next(stream)
    assert (left.revision, _names(left)) == (5, ["examples:deploy", "examples:ping"])
    assert stack.app.broker.list_tools() == list(left.tools)

    # A reader that joins now gets the latest revision at once.
    late = stack.broker.WatchTools(broker_pb2.WatchToolsRequest())
    assert (await _next(late)) == left
    late.cancel()
    stream.cancel()


async def test_the_feed_names_its_host(make_stack: StackFactory) -> None:
    stack = await make_stack(interaction={"host_id": "team-a-host-1"}, host_id="team-a-host-1")
    stream = stack.broker.WatchTools(broker_pb2.WatchToolsRequest())
    assert (await _next(stream)).host_id == "team-a-host-1"
    stream.cancel()


async def test_a_drain_ends_the_streams_open_before_it_and_shutdown_ends_those_opened_during_it(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(drain_seconds=30)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()  # a live call keeps the drain going until it finishes
    before = stack.broker.WatchTools(broker_pb2.WatchToolsRequest())
    assert _names(await _next(before)) == ["examples:deploy"]

    stopping = asyncio.create_task(stack.broker_server.stop())
    assert await _ended(before) == grpc.StatusCode.OK
    during = stack.broker.WatchTools(broker_pb2.WatchToolsRequest())
    assert _names(await _next(during)) == ["examples:deploy"]
    assert not stopping.done()

    await provider.finish(invoke.invocation_id)
    assert (await call.terminal()).HasField("result")
    assert await _ended(during) == grpc.StatusCode.OK
    async with asyncio.timeout(FRAME_TIMEOUT):
        await stopping


async def test_only_a_caller_may_watch_the_listing(make_stack: StackFactory, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": "caller-a-token-1", "name": "caller-a", "roles": ["caller"], "sessions": ["s-a"]},
                    {"token": "surface-token-1", "name": "surface", "roles": ["surface"]},
                    {"token": "broker-token-123", "name": "broker", "roles": ["broker"]},
                ]
            }
        )
    )
    stack = await make_stack(
        auth_tokens_file=tokens, interaction_token="broker-token-123", interaction={"auth_tokens_file": tokens}
    )
    caller = broker_pb2_grpc.CapabilityBrokerServiceStub(stack.channel(stack.broker_target, "caller-a-token-1"))
    stream = caller.WatchTools(broker_pb2.WatchToolsRequest())
    assert (await _next(stream)).revision == 1
    stream.cancel()

    surface = broker_pb2_grpc.CapabilityBrokerServiceStub(stack.channel(stack.broker_target, "surface-token-1"))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async with asyncio.timeout(FRAME_TIMEOUT):
            await surface.WatchTools(broker_pb2.WatchToolsRequest()).read()
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
