"""``python -m services.broker.main`` as a real process next to a real Interaction service process:
health/reflection, a Tool call through a synthetic provider, and graceful SIGTERM shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from tests.helpers.broker import Call, Provider, accept_staging, deploy_tool
from tests.helpers.waiting import eventually

NEW_CALLS = "maka.broker.v1.CapabilityBrokerService"

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


async def _spawn(module: str, env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=out
        )


async def _port(path: Path) -> int:
    def read() -> str | None:
        return (path.read_text() or None) if path.exists() else None

    return int(await eventually(read, timeout=30, what=path.name))


@contextlib.asynccontextmanager
async def _processes(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, int, int]]:
    interaction = await _spawn(
        "services.interaction.main",
        {"MAKA_REDIS_URL": redis_url, "MAKA_PORT_FILE": str(tmp_path / "interaction.port")},
        tmp_path / "interaction.log",
    )
    broker: asyncio.subprocess.Process | None = None
    try:
        interaction_port = await _port(tmp_path / "interaction.port")
        broker = await _spawn(
            "services.broker.main",
            {
                "MAKA_INTERACTION_TARGET": f"127.0.0.1:{interaction_port}",
                "MAKA_PORT_FILE": str(tmp_path / "broker.port"),
                "MAKA_GRACE_SECONDS": "2",
            },
            tmp_path / "broker.log",
        )
        yield broker, await _port(tmp_path / "broker.port"), interaction_port
    finally:
        for process in (broker, interaction):
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(20):
                        await process.wait()
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def test_broker_process_serves_a_form_call_and_shuts_down_gracefully_on_sigterm(
    tmp_path: Path, redis_url: str
) -> None:
    async with _processes(tmp_path, redis_url) as (broker, broker_port, interaction_port):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{broker_port}")
        surface_channel = grpc.aio.insecure_channel(f"127.0.0.1:{interaction_port}")
        try:
            health = health_pb2_grpc.HealthStub(channel)

            async def status(service: str) -> int:
                request = health_pb2.HealthCheckRequest(service=service)
                return int((await health.Check(request, timeout=10)).status)  # type: ignore[attr-defined]

            # Live, but not ready for new calls until a provider registered (nothing could be routed).
            assert await status("") == health_pb2.HealthCheckResponse.SERVING
            assert await status(NEW_CALLS) == health_pb2.HealthCheckResponse.NOT_SERVING

            provider = Provider(channel, "mcp:examples", [deploy_tool()])
            await provider.connect()

            async def ready() -> bool:
                return await status(NEW_CALLS) == health_pb2.HealthCheckResponse.SERVING

            await eventually(ready, what="the broker ready for new calls once a provider registered")
            stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            call = Call(
                stub,
                broker_pb2.CallToolRequest(
                    session_id="s1", turn_id="t1", tool_use_id="u1", tool_name="examples:deploy"
                ),
            )
            invoke = await provider.invoked()
            await provider.ask(invoke.invocation_id)
            awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
            surface = interaction_service_pb2_grpc.InteractionServiceStub(surface_channel)
            await surface.Answer(
                interaction_service_pb2.AnswerRequest(
                    interaction_id=awaiting.interaction_id, session_id="s1", submission_id="x", answer=accept_staging()
                )
            )
            await provider.next("interaction_result")
            await provider.finish(invoke.invocation_id)
            assert (await call.terminal()).HasField("result")

            # A second call is live (with a pending form) when SIGTERM arrives.
            second = Call(
                stub,
                broker_pb2.CallToolRequest(
                    session_id="s1", turn_id="t1", tool_use_id="u2", tool_name="examples:deploy"
                ),
            )
            live = await provider.invoked()
            await provider.ask(live.invocation_id)
            pending = (await second.next("awaiting_interaction")).awaiting_interaction
            broker.send_signal(signal.SIGTERM)
            assert (await second.terminal()).HasField("lost")
            async with asyncio.timeout(20):
                assert await broker.wait() == 0
            await eventually(lambda: provider.ended.is_set(), what="provider stream ended")
            record = await surface.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=pending.interaction_id, session_id="s1")
            )
            assert record.interaction.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
            log = (tmp_path / "broker.log").read_text()
            assert '"event": "shutting down"' in log
            await provider.close()
        finally:
            await channel.close()
            await surface_channel.close()
