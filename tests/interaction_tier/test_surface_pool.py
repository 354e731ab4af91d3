"""Surfaces follow a whole pool of Hosts (docs/design.md#surfaces-follow-the-pool).

One real Interaction replica serves Hosts ``h00``, ``h01`` and ``h02``; each Host's broker is this test over a real
``HostLink`` (hello, open, the ``settled`` pushes). ``ListHosts`` tells a surface the Hosts its token may use and
nothing else; a :class:`maka_client.SurfaceClient` following the pool (``*``) sees the forms opened on every Host,
each with its Host, answers each on the right Host (the Host's own broker gets the settlement), resumes every Host
from one composite token, and sees a Host's broker restart close only that Host's forms ``host_restarted``; the
``maka`` CLI (a child process) lists and answers the forms of two Hosts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio
import pytest

from bench.fanout import binding, replica_env, small_form, write_tokens
from bench.processes import InteractionProcess
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from maka_client import (
    ALL_HOSTS,
    FormClosed,
    FormEvent,
    FormOpened,
    FormSnapshot,
    MakaError,
    SurfaceClient,
)
from maka_client.surface import decode_pool_token
from services.core.auth import bearer_metadata
from tests.helpers.cli import maka_on_tier

pytestmark = [pytest.mark.e2e]

HOSTS = ["h00", "h01", "h02"]
WAIT = 30.0


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


@dataclass
class HostBroker:
    """One Host's broker as the Interaction service sees it: a HostLink stream (hello, then opens)."""

    host_id: str
    channel: grpc.aio.Channel
    token: str
    requests: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None] = field(default_factory=asyncio.Queue)
    frames: asyncio.Queue[interaction_service_pb2.HostLinkResponse] = field(default_factory=asyncio.Queue)
    call: (
        grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse]
        | None
    ) = None
    reader: asyncio.Task[None] | None = None
    opened: int = 0

    async def link(self) -> int:
        """Open the HostLink with ``hello{begin_new_epoch}`` (a broker (re)starting); returns the epoch."""
        await self.unlink()
        self.requests = asyncio.Queue()
        self.frames = asyncio.Queue()
        requests = self.requests

        async def outgoing() -> AsyncIterator[interaction_service_pb2.HostLinkRequest]:
            while (request := await requests.get()) is not None:
                yield request

        stub = interaction_service_pb2_grpc.InteractionServiceStub(self.channel)
        self.call = stub.HostLink(outgoing(), metadata=bearer_metadata(self.token))
        call = self.call

        async def read() -> None:
            async for frame in call:
                await self.frames.put(frame)

        self.reader = asyncio.create_task(read())
        await requests.put(
            interaction_service_pb2.HostLinkRequest(
                hello=interaction_service_pb2.Hello(begin_new_epoch=True, host_id=self.host_id)
            )
        )
        epoch = await self.next_frame("epoch")
        return epoch.epoch.host_epoch

    async def next_frame(self, kind: str) -> interaction_service_pb2.HostLinkResponse:
        """The next frame of ``kind`` (others, e.g. heartbeat acks, are skipped)."""
        async with asyncio.timeout(WAIT):
            while True:
                frame = await self.frames.get()
                if frame.WhichOneof("frame") == kind:
                    return frame

    async def open(self, session: str) -> str:
        """Open one form in ``session``; returns its interaction id."""
        self.opened += 1
        ref = f"{self.host_id}-r{self.opened}"
        await self.requests.put(
            interaction_service_pb2.HostLinkRequest(
                open=interaction_service_pb2.OpenInteraction(
                    request_ref=ref, binding=binding(session, f"{self.host_id}-inv-{self.opened}"), form=small_form()
                )
            )
        )
        reply = await self.next_frame("opened")
        assert reply.opened.request_ref == ref
        return reply.opened.interaction.interaction_id

    async def unlink(self) -> None:
        if self.call is None:
            return
        await self.requests.put(None)
        self.call.cancel()
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)
        self.call = None


@pytest.fixture
async def brokers(tier: Tier) -> AsyncIterator[dict[str, HostBroker]]:
    async with grpc.aio.insecure_channel(tier.target) as channel:
        linked = {h: HostBroker(h, channel, tier.tokens[h]) for h in HOSTS}
        for broker in linked.values():
            await broker.link()
        try:
            yield linked
        finally:
            for broker in linked.values():
                await broker.unlink()


async def _next(stream: AsyncIterator[FormEvent], *kinds: type) -> FormEvent:
    """The next event of one of ``kinds`` (reattach notices and other kinds skipped), within :data:`WAIT`."""
    async with asyncio.timeout(WAIT):
        async for event in stream:
            if isinstance(event, kinds):
                return event
    raise AssertionError("the attach stream ended")


async def _list_hosts(tier: Tier, token: str) -> list[str]:
    async with SurfaceClient(tier.target, token=token) as client:
        return await client.list_hosts()


async def test_list_hosts_returns_only_the_hosts_the_token_may_use(tier: Tier) -> None:
    assert await _list_hosts(tier, tier.tokens["surface"]) == HOSTS
    assert await _list_hosts(tier, tier.tokens["surface-h00"]) == ["h00"]
    with pytest.raises(MakaError) as refused:
        await _list_hosts(tier, tier.tokens["h00"])  # a broker's token is not a surface's
    assert refused.value.grpc_status_code == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(MakaError) as anonymous:
        await _list_hosts(tier, "not-a-token-at-all")
    assert anonymous.value.grpc_status_code == grpc.StatusCode.UNAUTHENTICATED


async def test_a_pool_surface_sees_every_hosts_forms_and_answers_each_on_its_own_host(
    tier: Tier, brokers: dict[str, HostBroker]
) -> None:
    async with SurfaceClient(tier.target, token=tier.tokens["surface"], pool=[ALL_HOSTS]) as client:
        async with aclosing(client.attach()) as stream:
            snapshots = [await _next(stream, FormSnapshot) for _ in HOSTS]
            assert sorted(s.host_id for s in snapshots if isinstance(s, FormSnapshot)) == HOSTS

            opened = {h: await brokers[h].open(f"s-{h}") for h in HOSTS}
            seen: dict[str, str] = {}
            token = ""
            for _ in HOSTS:
                event = await _next(stream, FormOpened)
                assert isinstance(event, FormOpened)
                seen[event.form.interaction_id] = event.form.host_id
                token = event.resume_token
            assert seen == {ix: h for h, ix in opened.items()}

        hosts_in_token = decode_pool_token(token)
        assert sorted(hosts_in_token) == HOSTS

        pending = await client.pending()
        assert {f.interaction_id: f.host_id for f in pending} == seen

        for host, interaction_id in opened.items():
            settled = await client.answer(interaction_id, "decline")  # no Host named: the form's own
            assert (settled.host_id, settled.state) == (host, "answered")
            pushed = await brokers[host].next_frame("settled")
            assert pushed.settled.interaction.interaction_id == interaction_id

        # one composite token resumes every Host: no snapshot, the next form opened is the next event
        async with aclosing(client.attach(resume_token=token)) as resumed:
            later = await brokers["h01"].open("s-h01")
            first = await _next(resumed, FormSnapshot, FormOpened)
            assert isinstance(first, FormOpened), first
            assert (first.form.interaction_id, first.form.host_id) == (later, "h01")


async def test_a_token_scoped_to_one_host_follows_only_that_host_of_the_pool(
    tier: Tier, brokers: dict[str, HostBroker]
) -> None:
    theirs = await brokers["h01"].open("s-theirs")
    ours = await brokers["h00"].open("s-ours")
    async with SurfaceClient(tier.target, token=tier.tokens["surface-h00"], pool=[ALL_HOSTS]) as client:
        assert await client.hosts() == ["h00"]
        assert [f.interaction_id for f in await client.pending()] == [ours]
        with pytest.raises(MakaError) as missing:
            await client.get(theirs)
        assert missing.value.grpc_status_code == grpc.StatusCode.NOT_FOUND


async def test_a_host_restarting_closes_only_its_own_forms_and_nothing_is_shown_twice(
    tier: Tier, brokers: dict[str, HostBroker]
) -> None:
    stays = await brokers["h00"].open("s-a")
    restarts = await brokers["h02"].open("s-b")
    async with SurfaceClient(tier.target, token=tier.tokens["surface"], pool=["h00", "h02"]) as client:
        async with aclosing(client.attach()) as stream:
            shown: list[tuple[str, str]] = []
            for _ in range(2):
                snapshot = await _next(stream, FormSnapshot)
                assert isinstance(snapshot, FormSnapshot)
                shown.extend((f.interaction_id, f.host_id) for f in snapshot.pending)
            assert sorted(shown) == sorted([(stays, "h00"), (restarts, "h02")])

            await brokers["h02"].link()  # the Host's broker restarts: a new epoch
            closed = await _next(stream, FormClosed)
            assert isinstance(closed, FormClosed)
            assert (closed.form.interaction_id, closed.form.host_id) == (restarts, "h02")
            assert closed.form.close_reason == "host_restarted"
            # the other Host's form is untouched: still pending there, and the next event is a new form
            fresh = await brokers["h02"].open("s-b")
            event = await _next(stream, FormOpened)
            assert isinstance(event, FormOpened)
            assert (event.form.interaction_id, event.form.host_id) == (fresh, "h02")
        assert sorted(f.interaction_id for f in await client.pending()) == sorted([stays, fresh])
        assert (await client.get(stays)).host_id == "h00"


async def _maka(tier: Tier, *args: str) -> tuple[int, str, str]:
    return await maka_on_tier(tier.target, tier.tokens["surface"], *args)


async def test_the_cli_lists_the_forms_of_two_hosts_with_their_host_and_answers_each_there(
    tier: Tier, brokers: dict[str, HostBroker]
) -> None:
    on_h00 = await brokers["h00"].open("s-1")
    on_h01 = await brokers["h01"].open("s-2")

    code, out, err = await _maka(tier, "pending", "--json", "--hosts", "*")
    assert code == 0, err
    assert {form["id"]: form["host"] for form in json.loads(out)} == {on_h00: "h00", on_h01: "h01"}

    code, out, err = await _maka(tier, "pending", "--hosts", "h00,h01")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("ix_")]
    assert len(lines) == 2, out
    assert any(line.startswith(f"{on_h00}  host=h00  session=s-1") for line in lines), out
    assert any(line.startswith(f"{on_h01}  host=h01  session=s-2") for line in lines), out

    code, out, err = await _maka(tier, "answer", on_h01, "decline", "--hosts", "*", "--json")
    assert code == 0, err
    assert json.loads(out)["host"] == "h01"
    pushed = await brokers["h01"].next_frame("settled")
    assert pushed.settled.interaction.interaction_id == on_h01
    assert pushed.settled.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED


async def test_history_of_a_pool_lists_every_hosts_settled_forms_newest_first_and_pages_without_repeats(
    tier: Tier, brokers: dict[str, HostBroker]
) -> None:
    answered: dict[str, str] = {}
    async with SurfaceClient(tier.target, token=tier.tokens["surface"], pool=[ALL_HOSTS]) as client:
        for round_ in range(2):
            for host in HOSTS:
                interaction_id = await brokers[host].open(f"s-{host}-{round_}")
                await client.answer(interaction_id, "decline")
                answered[interaction_id] = host
        first = await client.list_history(page_size=1)
        assert first.next_page_token, "each Host has an older entry left"
        second = await client.list_history(page_size=1, page_token=first.next_page_token)
        with pytest.raises(MakaError) as forged:
            await client.list_history(page_token="not a token of ours")
        assert forged.value.grpc_status_code == grpc.StatusCode.INVALID_ARGUMENT
    assert len(first.entries) == len(HOSTS)
    assert len(second.entries) == len(HOSTS)
    listed = [*first.entries, *second.entries]
    assert {e.interaction_id: e.host_id for e in listed} == answered, "every form once, with its own Host"
    newer = [e.settled_at.timestamp() for e in first.entries if e.settled_at is not None]
    older = [e.settled_at.timestamp() for e in second.entries if e.settled_at is not None]
    assert newer == sorted(newer, reverse=True)
    assert len(newer) == len(older) == len(HOSTS)
    assert min(newer) >= max(older), "a page holds every Host's newest; the next page each Host's older"
