"""The web surface as a process: ``maka web`` and ``python -m surfaces.web.main`` (port 0 reported in a file)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from surfaces.web.settings import WebSettings
from tests.helpers.waiting import eventually
from tests.surfaces.web.stack import running_stack, text_form

pytestmark = pytest.mark.slow

MAKA = str(Path(sys.executable).with_name("maka"))


async def _serve_as_process(argv: list[str], env: dict[str, str], port_file: Path, target_session: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        port_text = await eventually(
            lambda: (port_file.read_text() or None) if port_file.exists() else None, what="the port file"
        )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_text}", timeout=5) as client:
            pending = (await client.get("/api/pending")).json()["pending"]
            assert [p["session_id"] for p in pending] == [target_session]
            page = await client.get("/")
            assert "default-src 'self'" in page.headers["content-security-policy"]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()


async def test_maka_web_serves_the_stacks_forms_on_a_free_port_and_stops_on_sigterm(
    redis_url: str, tmp_path: Path
) -> None:
    async with running_stack(redis_url) as stack:
        await stack.link.open(text_form("from maka web"), session_id="cli-s1")
        await stack.link.open(text_form("another session"), session_id="cli-s2")
        port_file = tmp_path / "web.port"
        env = {**os.environ, "MAKA_WEB_PORT_FILE": str(port_file)}
        argv = [MAKA, "web", "--interaction", stack.target, "--listen", "127.0.0.1:0", "--session", "cli-s1"]
        await _serve_as_process(argv, env, port_file, "cli-s1")


async def test_python_m_surfaces_web_main_reads_its_settings_from_maka_variables(
    redis_url: str, tmp_path: Path
) -> None:
    async with running_stack(redis_url) as stack:
        await stack.link.open(text_form("from env"), session_id="env-s1")
        await stack.link.open(text_form("hidden"), session_id="env-s2")
        port_file = tmp_path / "web.port"
        env = {
            **os.environ,
            "MAKA_INTERACTION_TARGET": stack.target,
            "MAKA_WEB_LISTEN": "127.0.0.1:0",
            "MAKA_WEB_PORT_FILE": str(port_file),
            "MAKA_SESSIONS": "env-s1",
        }
        await _serve_as_process([sys.executable, "-m", "surfaces.web.main"], env, port_file, "env-s1")


def test_sessions_setting_accepts_a_comma_list_or_a_json_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_SESSIONS", "a, b,,c")
    assert WebSettings().sessions == ["a", "b", "c"]
    monkeypatch.setenv("MAKA_SESSIONS", '["x", "y"]')
    assert WebSettings().sessions == ["x", "y"]
    monkeypatch.delenv("MAKA_SESSIONS")
    settings = WebSettings()
    assert settings.sessions == []
    assert settings.listen_host_port() == ("127.0.0.1", 8765)


def test_a_listen_address_without_a_port_is_refused() -> None:
    with pytest.raises(ValueError, match="host:port"):
        WebSettings(web_listen="localhost").listen_host_port()
