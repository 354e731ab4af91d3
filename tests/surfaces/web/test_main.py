"""The web surface as a process: ``maka web`` and ``python -m surfaces.web.main`` (port 0 reported in a file)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

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


async def test_sigterm_with_a_page_attached_ends_its_event_stream_and_logs_no_error(
    redis_url: str, tmp_path: Path
) -> None:
    async with running_stack(redis_url) as stack:
        port_file = tmp_path / "web.port"
        env = {
            **os.environ,
            "MAKA_INTERACTION_TARGET": stack.target,
            "MAKA_WEB_LISTEN": "127.0.0.1:0",
            "MAKA_WEB_PORT_FILE": str(port_file),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "surfaces.web.main", env=env, stderr=asyncio.subprocess.PIPE
        )
        try:
            port = await eventually(
                lambda: (port_file.read_text() or None) if port_file.exists() else None, what="the port file"
            )
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client,
                client.stream("GET", "/api/events") as response,
            ):
                lines = response.aiter_lines()
                async with asyncio.timeout(10):
                    while not (await anext(lines)).startswith("event: snapshot"):
                        pass
                process.send_signal(signal.SIGTERM)
                # The server ends the stream (the page's EventSource then reconnects, to another replica).
                with contextlib.suppress(httpx.RemoteProtocolError):
                    async with asyncio.timeout(10):
                        async for _ in lines:
                            pass
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(15):
                _, stderr = await process.communicate()
    assert process.returncode == 0
    log = stderr.decode()
    assert "graceful shutdown exceeded" not in log
    assert '"level": "error"' not in log.replace('"level":"error"', '"level": "error"').lower(), log


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


def test_a_non_loopback_bind_without_a_surface_token_is_refused_unless_explicitly_allowed() -> None:
    with pytest.raises(ValueError, match=r"refusing to serve the web page on 0\.0\.0\.0:8765") as refused:
        WebSettings(web_listen="0.0.0.0:8765").listen_host_port()
    assert "MAKA_SURFACE_TOKEN" in str(refused.value)

    assert WebSettings(web_listen="0.0.0.0:8765", surface_token=SecretStr("t0ken")).listen_host_port() == (
        "0.0.0.0",
        8765,
    )
    allowed = WebSettings(web_listen="0.0.0.0:8765", web_allow_unauthenticated_remote=True)
    assert allowed.listen_host_port() == ("0.0.0.0", 8765)
    assert WebSettings(web_listen="127.0.0.2:8765").listen_host_port() == ("127.0.0.2", 8765)
    assert WebSettings(web_listen="[::1]:8765").listen_host_port() == ("::1", 8765)
