"""The service as a real process (``python -m services.interaction.main``): restart without loss."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.channels import open_channel
from services.core.settings import ClientTlsSettings
from services.interaction.main import InteractionApp, build
from services.interaction.settings import Settings
from tests.helpers.waiting import eventually
from tests.services.interaction.harness import Link, Surface

ROOT = Path(__file__).resolve().parents[3]


def _start(redis_url: str, port_file: Path) -> subprocess.Popen[bytes]:
    port_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "MAKA_LISTEN": "127.0.0.1:0",
        "MAKA_PORT_FILE": str(port_file),
        "MAKA_REDIS_URL": redis_url,
        "MAKA_REAPER_INTERVAL_SECONDS": "0.1",
        "MAKA_GRACE_SECONDS": "0.5",
    }
    env.pop("MAKA_AUTH_TOKENS_FILE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "services.interaction.main"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL
    )


async def _port(port_file: Path, process: subprocess.Popen[bytes]) -> int:
    def ready() -> str | None:
        assert process.poll() is None, "service exited"
        return (port_file.read_text() or None) if port_file.exists() else None

    return int(await eventually(ready, timeout=30, what="port file"))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow
async def test_a_restarted_service_process_resumes_the_link_and_the_surface_without_loss(
    redis_url: str, tmp_path: Path
) -> None:
    port_file = tmp_path / "port"
    process = _start(redis_url, port_file)
    try:
        port = await _port(port_file, process)
        bch = open_channel(f"127.0.0.1:{port}", tls=ClientTlsSettings())
        sch = open_channel(f"127.0.0.1:{port}", tls=ClientTlsSettings())
        link = await Link.connect(bch)
        first = await link.open("s-a", "inv-1")
        surface = await Surface.attach(sch, ("s-a",))
        assert [i.interaction_id for i in (await surface.next("snapshot")).snapshot.pending] == [first.interaction_id]
        token = surface.token
        await surface.close()
        await link.close()
        await bch.close()
        await sch.close()
    finally:
        _stop(process)
    assert process.returncode == 0

    process = _start(redis_url, port_file)
    try:
        port = await _port(port_file, process)
        bch = open_channel(f"127.0.0.1:{port}", tls=ClientTlsSettings())
        sch = open_channel(f"127.0.0.1:{port}", tls=ClientTlsSettings())
        link = await Link.connect(bch, resume_epoch=link.epoch)
        second = await link.open("s-a", "inv-2")
        resumed = await Surface.attach(sch, ("s-a",), token=token)
        event = (await resumed.next("event")).event.event
        assert (event.kind, event.interaction.interaction_id) == (
            interaction_pb2.EVENT_KIND_OPENED,
            second.interaction_id,
        )
        stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
            interaction_service_pb2_grpc.InteractionServiceStub(sch)
        )
        listed = await stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["s-a"]))
        assert [i.interaction_id for i in listed.pending] == [first.interaction_id, second.interaction_id]
        await resumed.close()
        await link.close()
        async with asyncio.timeout(10):
            await bch.close()
            await sch.close()
    finally:
        _stop(process)


async def test_the_service_lifts_grpcs_pending_call_limits_so_a_burst_of_streams_is_not_cancelled(
    redis_url: str,
) -> None:
    settings = Settings(redis_url=redis_url, max_pending_calls=12_345)
    app = await build(settings)
    try:
        assert dict(getattr(app, "server_options", ())) == {
            "grpc.server.max_pending_requests": 12_345,
            "grpc.server.max_pending_requests_hard_limit": 12_345,
        }
    finally:
        assert isinstance(app, InteractionApp)
        await app.close()
