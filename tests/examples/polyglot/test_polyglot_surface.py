"""The polyglot proof: a Node.js surface (``examples/polyglot/surface.mjs``, @grpc/grpc-js loading ``protos/``
directly) lists and answers forms on the real Interaction service."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from tests.surfaces.web.stack import WebStack, every_kind_form, running_stack, text_form

pytestmark = pytest.mark.slow

POLYGLOT = Path(__file__).resolve().parents[3] / "examples" / "polyglot"
NODE = shutil.which("node") or "node"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """``npm ci`` into examples/polyglot/node_modules when it is missing (git-ignored); the TypeScript
    client it links (``@maka/client``) is installed and built by ``make setup-node``."""
    modules = POLYGLOT / "node_modules"
    if not (modules / "@maka" / "client").exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed for the polyglot surface (Node 20+)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=POLYGLOT, check=True, timeout=300)
    return modules


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


async def surface(target: str, *args: str) -> Run:
    process = await asyncio.create_subprocess_exec(
        NODE,
        str(POLYGLOT / "surface.mjs"),
        "--target",
        target,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


@pytest.fixture
async def stack(redis_url: str, node_modules: Path) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


async def stored(stack: WebStack, interaction_id: str) -> interaction_pb2.Interaction:
    stub = interaction_service_pb2_grpc.InteractionServiceStub(stack.channel)
    request = interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id)
    return (await stub.GetInteraction(request)).interaction


async def test_node_surface_lists_pending_forms_with_provenance_and_field_kinds(stack: WebStack) -> None:
    ix = await stack.link.open(every_kind_form(), session_id="node-s1")
    await stack.link.open(text_form("other"), session_id="node-s2")
    run = await surface(stack.target, "list", "--session", "node-s1")
    assert run.code == 0, run.stderr
    pending = json.loads(run.stdout)["pending"]
    assert [p["interaction_id"] for p in pending] == [ix.interaction_id]
    item = pending[0]
    assert item["requester"]["claimed_tool"] == "deploy"
    assert item["requester"]["provider_display_name"] == "Local MCP provider"
    assert item["message"] == "Where should build-42 go?"
    kinds = {f["name"]: f["kind"] for f in item["fields"]}
    assert kinds["replicas"] == "integer"
    assert kinds["canary"] == "number"
    assert kinds["channels"] == "multi_select"
    assert kinds["window_start"] == "date-time"
    assert kinds["contact"] == "email"


async def test_node_surface_answers_a_form_with_values_typed_by_field_kind(stack: WebStack) -> None:
    ix = await stack.link.open(every_kind_form(), session_id="node-s1")
    values = {"environment": "production", "region": "region-03", "replicas": 5, "canary": 1, "channels": ["email"]}
    run = await surface(stack.target, "answer", ix.interaction_id, "accept", json.dumps(values))
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout) == {"interaction_id": ix.interaction_id, "state": "answered", "action": "accept"}
    answer = (await stored(stack, ix.interaction_id)).answer
    assert answer.action == form_pb2.ACTION_ACCEPT
    assert answer.values["replicas"].WhichOneof("kind") == "integer_value"
    assert answer.values["replicas"].integer_value == 5
    assert answer.values["canary"].WhichOneof("kind") == "number_value"
    assert list(answer.values["channels"].string_list_value.values) == ["email"]
    assert "note" not in answer.values, "a field left out stays out: the service never refills a default"


async def test_node_surface_reports_the_stable_reason_and_violations_of_a_refused_answer(stack: WebStack) -> None:
    ix = await stack.link.open(every_kind_form(), session_id="node-s1")
    refused = await surface(stack.target, "answer", ix.interaction_id, "accept", '{"replicas": 99}')
    assert refused.code == 3
    assert refused.stderr.startswith("INVALID_ANSWER: ")
    assert "  /replicas: " in refused.stderr
    assert (await stored(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING
    declined = await surface(stack.target, "answer", ix.interaction_id, "decline")
    assert declined.code == 0, declined.stderr
    again = await surface(stack.target, "answer", ix.interaction_id, "cancel")
    assert again.code == 3
    assert again.stderr.startswith("ALREADY_SETTLED: ")
    assert (await stored(stack, ix.interaction_id)).answer.action == form_pb2.ACTION_DECLINE


async def test_node_surface_refuses_bad_usage_without_calling_the_service(stack: WebStack) -> None:
    ix = await stack.link.open(text_form("usage"), session_id="node-s1")
    assert (await surface(stack.target, "answer", ix.interaction_id, "maybe")).code == 2
    assert (await surface(stack.target, "answer", ix.interaction_id, "accept", "[1]")).code == 2
    assert (await surface(stack.target, "answer", ix.interaction_id, "decline", "{}")).code == 2
    assert (await surface(stack.target, "frobnicate")).code == 2
    assert (await stored(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING
