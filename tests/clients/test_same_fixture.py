"""The Python and the TypeScript clients pass the same fixture through the real nginx proxy: accept,
decline, cancel, stop and an unknown Tool, each against the real stack (docs/clients.md)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest

from maka_client import SurfaceClient
from tests.helpers.nginx import Nginx
from tests.helpers.proxied import Proxied
from tests.reliability.counting_server import digest

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="package")]

ROOT = Path(__file__).resolve().parents[2]
TS_CLIENT = ROOT / "clients" / "typescript"
NODE = ROOT / ".tools" / "bin" / "node22"

EXPECTED: dict[str, tuple[list[str], dict[str, object]]] = {
    "accept": (
        ["accepted", "awaiting_interaction", "interaction_settled", "result"],
        {"kind": "result", "isError": False, "payload": {"action": "accept"}},
    ),
    "decline": (
        ["accepted", "awaiting_interaction", "interaction_settled", "result"],
        {"kind": "result", "isError": False, "payload": {"action": "decline", "digest": None}},
    ),
    "cancel": (
        ["accepted", "awaiting_interaction", "interaction_settled", "result"],
        {"kind": "result", "isError": False, "payload": {"action": "cancel", "digest": None}},
    ),
    "stop": (["accepted", "awaiting_interaction", "stopped"], {"kind": "stopped"}),
    "unknown": (["failure"], {"kind": "failure", "code": "UNKNOWN_TOOL"}),
}
LEGS = {"accept": ["first", "retry"], "decline": ["first", "retry"], "cancel": ["first", "retry"], "stop": ["first"]}


def _command(language: str, scenario: str, broker: str, interaction: str, tag: str) -> list[str]:
    argv = [scenario, "--broker", broker, "--interaction", interaction, "--tag", tag]
    if language == "python":
        return [sys.executable, "-m", "tests.clients.driver", *argv]
    return [str(NODE), str(TS_CLIENT / "dist" / "test" / "driver.js"), *argv]


@pytest.mark.parametrize("scenario", list(EXPECTED))
@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_both_clients_pass_the_same_fixture(proxied: Proxied, nginx: Nginx, language: str, scenario: str) -> None:
    tag = f"{language[:2]}-{scenario}-{uuid.uuid4().hex[:6]}"
    process = await asyncio.create_subprocess_exec(
        *_command(language, scenario, nginx.address, proxied.interaction, tag),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    kinds, outcome = EXPECTED[scenario]
    assert report["kinds"] == kinds
    assert report["sequences"] == list(range(1, len(kinds) + 1))
    assert "counter:ask" in report["tools"]
    got = report["outcome"]
    if outcome["kind"] == "result":
        payload = dict(outcome["payload"])  # type: ignore[call-overload]
        payload["tag"] = tag
        if scenario == "accept":
            payload["digest"] = digest(f"v-{tag}")
        outcome = {**outcome, "payload": payload}
    assert got == outcome
    assert [c["leg"] for c in proxied.calls_of(tag)] == LEGS.get(scenario, [])


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_both_clients_reattach_after_the_proxy_is_restarted_mid_form_and_lose_no_event(
    proxied: Proxied, nginx: Nginx, language: str
) -> None:
    tag = f"{language[:2]}-reattach-{uuid.uuid4().hex[:6]}"
    process = await asyncio.create_subprocess_exec(
        *_command(language, "reattach", nginx.address, proxied.interaction, tag),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):
        first = json.loads(await process.stdout.readline())
        await nginx.stop()  # the caller's connection is cut mid-form
        async with SurfaceClient(proxied.interaction) as surface:
            await surface.answer(first["awaiting"], "accept", {"value": "cut"})
        await nginx.start()
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["kinds"] == ["accepted", "awaiting_interaction", "interaction_settled", "result"]
    assert report["sequences"] == [1, 2, 3, 4]
    assert report["reattaches"] >= 1
    assert report["outcome"] == {
        "kind": "result",
        "isError": False,
        "payload": {"tag": tag, "action": "accept", "digest": digest("cut")},
    }
    assert [c["leg"] for c in proxied.calls_of(tag)] == ["first", "retry"]
