"""services.core.runner: the event loop a service process runs on."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from services.core import runner
from services.core.settings import GrpcServerSettings, LoopSettings


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_a_service_runs_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAKA_EVENT_LOOP", raising=False)
    assert issubclass(runner.run(_loop_type()), uvloop.Loop)


def test_maka_event_loop_asyncio_selects_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_EVENT_LOOP", "asyncio")
    assert runner.loop_factory() is None
    assert not issubclass(runner.run(_loop_type()), uvloop.Loop)


def test_an_unknown_event_loop_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_EVENT_LOOP", "trio")
    with pytest.raises(ValueError, match="event_loop"):
        LoopSettings()


def test_every_grpc_service_documents_the_event_loop_setting() -> None:
    assert "event_loop" in GrpcServerSettings.model_fields
