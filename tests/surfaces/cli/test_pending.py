"""``maka pending`` against the real Interaction service found through endpoints.json."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.main import main
from tests.surfaces.helpers import deploy_form, interaction_service


async def maka(*argv: str) -> int:
    """Run the ``maka`` entry point in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(main, list(argv))


async def test_pending_json_lists_forms_with_fields_requester_and_expiry(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1"))
        opened = await live.link.open(deploy_form(), session_id="s1", wait_seconds=120)
        await live.link.open(deploy_form("elsewhere"), session_id="s2")
        assert await maka("pending", "--session", "s1", "--json", "--state-dir", str(tmp_path)) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in listed] == [opened.interaction_id]
    item = listed[0]
    assert item["session"] == "s1"
    assert item["tool"] == "deployer:deploy"
    assert item["message"] == "Where should build-42 go?"
    assert item["requester"] == {
        "provider_id": "mcp-provider-1",
        "provider_display_name": "Local MCP provider",
        "claimed_server": "deployer",
        "claimed_tool": "deploy",
    }
    assert item["expires_at"].endswith("Z")
    fields = {f["name"]: f for f in item["fields"]}
    assert fields["environment"] == {
        "name": "environment",
        "kind": "single_select",
        "label": "Environment",
        "description": "",
        "required": True,
        "constraints": {},
        "default": "staging",
        "options": [{"value": "staging", "label": "Staging"}, {"value": "production", "label": "Production"}],
    }
    assert fields["replicas"]["kind"] == "integer"
    assert fields["replicas"]["constraints"] == {"minimum": 1, "maximum": 10}
    assert fields["replicas"]["default"] == 2
    assert fields["replicas"]["description"] == "How many copies to run."
    assert fields["dry_run"]["kind"] == "boolean"
    assert fields["regions"]["constraints"] == {"maxItems": 2}


async def test_pending_without_session_lists_every_visible_session_in_text(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        await live.link.open(deploy_form("first"), session_id="s1")
        await live.link.open(deploy_form("second"), session_id="s2")
        assert await maka("pending", "--interaction", live.address, "--state-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "session=s1" in out
    assert "session=s2" in out
    assert "claimed server deployer, Tool deploy" in out
    assert "Environment * [environment] single_select" in out


async def test_pending_without_a_stack_fails_with_no_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await maka("pending", "--json", "--state-dir", str(tmp_path / "nothing")) == 3
    assert capsys.readouterr().err.startswith("NO_STACK: ")


async def test_pending_when_the_service_is_down_fails_with_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_endpoints(tmp_path, Endpoints(interaction="127.0.0.1:1", broker="127.0.0.1:1"))
    assert await maka("pending", "--json", "--state-dir", str(tmp_path)) == 3
    assert capsys.readouterr().err.startswith("UNAVAILABLE: ")
