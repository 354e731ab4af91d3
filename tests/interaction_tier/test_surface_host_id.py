"""Surfaces address one Host of a tier that serves several (docs/design.md#many-hosts).

One real Interaction replica serves Hosts ``h00`` and ``h01``; a broker (this test, over HostLink) opens a
form on ``h01``; the ``maka`` CLI, run as a child process with a surface token that sees both Hosts,
finds it only with ``--host-id h01``, and a token scoped to ``h00`` is refused without learning anything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import pytest

from bench.fanout import binding, replica_env, small_form, write_tokens
from bench.processes import InteractionProcess
from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import bearer_metadata
from tests.helpers.cli import maka_on_tier

pytestmark = [pytest.mark.e2e]

HOSTS = ["h00", "h01"]


@dataclass
class Tier:
    target: str
    tokens: dict[str, str]


@pytest.fixture
async def tier(redis_url: str, tmp_path: Path) -> AsyncIterator[Tier]:
    tokens = write_tokens(tmp_path / "tokens.json", HOSTS)
    process = InteractionProcess(
        tmp_path / "replica", replica_env(redis_url, HOSTS, tmp_path / "tokens.json", pool_size=8, followers=1)
    )
    port = await process.start()
    try:
        yield Tier(f"127.0.0.1:{port}", tokens)
    finally:
        process.stop()


@pytest.fixture
async def form_on_h01(tier: Tier) -> AsyncIterator[str]:
    """A broker of ``h01`` holds its HostLink open with one pending form; yields the form's id."""
    requests: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None] = asyncio.Queue()

    async def outgoing() -> AsyncIterator[interaction_service_pb2.HostLinkRequest]:
        while (request := await requests.get()) is not None:
            yield request

    async with grpc.aio.insecure_channel(tier.target) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        call = stub.HostLink(outgoing(), metadata=bearer_metadata(tier.tokens["h01"]))
        await requests.put(
            interaction_service_pb2.HostLinkRequest(
                hello=interaction_service_pb2.Hello(begin_new_epoch=True, host_id="h01")
            )
        )
        async with asyncio.timeout(20):
            first = await call.read()
            assert isinstance(first, interaction_service_pb2.HostLinkResponse), first
            assert first.WhichOneof("frame") == "epoch", first
            await requests.put(
                interaction_service_pb2.HostLinkRequest(
                    open=interaction_service_pb2.OpenInteraction(
                        request_ref="r1", binding=binding("s1", "inv-1"), form=small_form()
                    )
                )
            )
            reply = await call.read()
            assert isinstance(reply, interaction_service_pb2.HostLinkResponse), reply
        assert reply.WhichOneof("frame") == "opened", reply
        yield reply.opened.interaction.interaction_id
        await requests.put(None)
        call.cancel()


async def _maka(tier: Tier, token: str, *args: str) -> tuple[int, str, str]:
    return await maka_on_tier(tier.target, token, *args)


async def test_the_cli_finds_a_form_only_on_the_host_it_names_and_answers_it_there(
    tier: Tier, form_on_h01: str
) -> None:
    surface = tier.tokens["surface"]
    code, out, err = await _maka(tier, surface, "pending", "--json", "--host-id", "h01")
    assert code == 0, err
    assert [form["id"] for form in json.loads(out)] == [form_on_h01]

    code, out, err = await _maka(tier, surface, "pending", "--json", "--host-id", "h00")
    assert code == 0, err
    assert json.loads(out) == []

    code, out, err = await _maka(tier, surface, "pending", "--json")
    assert code == 3
    assert err.startswith("INVALID_REQUEST"), err
    assert "host_id is required" in err
    assert "Traceback" not in err

    code, out, err = await _maka(tier, surface, "answer", form_on_h01, "decline", "--host-id", "h01", "--json")
    assert code == 0, err
    assert json.loads(out)["state"] == "answered"


async def test_a_surface_token_scoped_to_one_host_cannot_see_another_hosts_form(tier: Tier, form_on_h01: str) -> None:
    scoped = tier.tokens["surface-h00"]
    code, out, err = await _maka(tier, scoped, "pending", "--json")  # its only Host by default
    assert code == 0, err
    assert json.loads(out) == []
    code, _out, err = await _maka(tier, scoped, "pending", "--id", form_on_h01, "--host-id", "h01")
    assert code == 3
    assert err.startswith("PERMISSION_DENIED"), err
    assert form_on_h01 not in err
    assert "h01" not in err.split(":", 1)[1]
