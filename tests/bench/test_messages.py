"""bench.messages: the gRPC messages and Redis commands one one-form ``examples:deploy`` call moves per hop
(counts, not times), on the stack as ``maka up`` runs it with an answering ``Attach`` surface."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.callers import StackCaller
from bench.messages import count_messages
from bench.servers import example_server
from stack.ports import METRICS_SERVICES, Ports
from stack.topology import Stack
from tests.helpers.stack import START_TIMEOUT, STOP_TIMEOUT

CALLS = 5
DEPLOY = {"artifact": "web-1.4.2"}


@pytest.mark.e2e
@pytest.mark.serial  # exact Redis command counts: on a loaded machine background commands (the reaper) join in
@pytest.mark.timeout(240)
async def test_one_form_call_moves_one_message_per_step_on_each_hop_and_three_scripts_in_redis(
    tmp_path: Path,
) -> None:
    async with example_server(tmp_path / "example.log") as server:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"examples": {"url": server.url}}}))
        stack = Stack(
            config, tmp_path / "s", ports=Ports.ephemeral(), metrics=dict.fromkeys(METRICS_SERVICES, 0), stop_grace=5
        )
        async with asyncio.timeout(START_TIMEOUT):
            endpoints = await stack.start()
        try:
            async with StackCaller(endpoints.broker, endpoints.interaction) as caller:

                async def one() -> None:
                    sample = await caller.call("deploy", DEPLOY)
                    assert sample.ok, sample.error

                await one()  # warm: connections, the provider's session, the tool list
                trace: list[str] = []
                counts = await count_messages(stack.metrics_urls(), stack.redis_url, one, CALLS, trace)
        finally:
            async with asyncio.timeout(STOP_TIMEOUT):
                await stack.stop()
    (tmp_path / "messages.json").write_text(json.dumps({**counts.as_json(), "redis_trace": trace}, indent=1))
    per_call = {
        f"{method.rsplit('/', 1)[-1]} {direction} {kind}": n for (_, method, direction, kind), n in counts.grpc.items()
    }
    # the caller's stream: the request, accepted, awaiting_interaction, interaction_settled, result
    assert [per_call.get(f"CallTool sent {kind}") for kind in ("accepted", "awaiting_interaction", "result")] == [
        1,
        1,
        1,
    ]
    # the provider's stream: invoke, the form, its answer, the delivery confirmation, the result
    for kind in ("sent invoke", "received interaction_request", "sent interaction_result", "received result"):
        assert per_call.get(f"Connect {kind}") == 1, (kind, per_call)
    # the HostLink: open/opened, the settled push, one delivery report and its reply
    for kind in ("received open", "sent opened", "sent settled", "received delivery", "sent delivery_recorded"):
        assert per_call.get(f"HostLink {kind}") == 1, (kind, per_call)
    assert per_call.get("Answer received AnswerRequest") == 1
    # Redis round trips: three scripts (open, answer, delivery) and no read of the record: the Answer
    # validates against the form this replica opened, the delivery report reuses the answer the HostLink pushed
    assert counts.redis.get("evalsha") == 3, counts.redis
    assert "hgetall" not in counts.redis, counts.redis
