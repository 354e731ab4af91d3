"""``maka auth status|login|logout`` against a real stack without a web surface: ``login`` prints the
authorization URL (never opening it), listens on the redirect address itself, and returns once signed in."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.oauth_server import harness_oauth_server
from tests.helpers.stack import ROOT, running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def oauth_server() -> Iterator[str]:
    with harness_oauth_server() as url:
        yield url


async def _maka(state: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "surfaces.cli.main", *args, "--state-dir", str(state),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_login_prints_the_url_completes_on_its_loopback_listener_and_logout_asks_again(
    tmp_path: Path, oauth_server: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"url": oauth_server}}}))
    async with running_stack(tmp_path, config=config, web=False):
        state = tmp_path / "state"
        code, out, _ = await _maka(state, "auth", "status", "--json")
        assert code == 0
        [status] = json.loads(out)
        assert (status["server"], status["state"]) == ("remote", "sign_in_required")

        login = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "surfaces.cli.main", "auth", "login", "remote", "--state-dir", str(state),
            "--timeout", "60", cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert login.stdout is not None
        async with asyncio.timeout(30):
            url = (await login.stdout.readline()).decode().strip()
        assert url == status["authorization_url"]
        # The person's browser: the authorization server redirects to the CLI's loopback listener.
        async with httpx.AsyncClient(follow_redirects=False, timeout=10) as http:
            redirect = await http.get(url)
            assert redirect.is_redirect
            location = redirect.headers["location"]
            assert location.startswith("http://127.0.0.1:")
            assert "/oauth/callback?" in location
            landed = await http.get(location)
        assert landed.status_code == 200
        assert "Signed in to remote" in landed.text
        async with asyncio.timeout(60):
            assert await login.wait() == 0

        code, out, _ = await _maka(state, "auth", "status")
        assert (code, out.split()) == (0, ["remote", "signed_in"])
        assert (await _maka(state, "auth", "logout", "remote"))[0] == 0
        async with asyncio.timeout(30):
            while True:
                code, out, _ = await _maka(state, "auth", "status", "--json")
                if [item["state"] for item in json.loads(out)] == ["sign_in_required"]:
                    break
        code, _, err = await _maka(state, "auth", "login", "nosuch")
        assert (code, err.split(":")[0]) == (3, "NOT_FOUND")
