"""services.core.runner: the event loop a service process runs on."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("service", ["services.interaction.main", "services.broker.main", "surfaces.web.main"])
def test_a_group_granted_admin_stops_a_service_at_start_up_with_one_line_naming_the_group(service: str) -> None:
    env = {**os.environ, "MAKA_OIDC_ISSUER": "https://id.example.com", "MAKA_OIDC_ROLES": '{"ops": ["admin"]}'}
    done = subprocess.run(
        [sys.executable, "-m", service], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == runner.SETTINGS_INVALID_EXIT
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("settings_invalid: MAKA_OIDC_ROLES['ops']: a group may not be granted 'admin'")
