"""The Python and the TypeScript clients pass the same fixture through the real nginx proxy: accept,
decline, cancel, stop and an unknown Tool, each against the real stack (docs/clients.md)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest

from tests.clients.conftest import Proxied
from tests.clients.nginx import Nginx
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
