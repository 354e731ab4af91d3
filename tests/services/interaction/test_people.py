"""People on the real Interaction service (docs/security.md, "Sign-in for people"): a person's ID token from a
real OpenID provider reads the forms its groups' role allows, and an answer names the person it was made
for only when the token that sends it may act for people."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from maka_client import MakaError
from services.core.form import Action, Answer
from services.interaction.settings import Settings
from surfaces.common.interactions import Interactions
from tests.helpers.oidc import ALICE, Provider, id_token, oidc_provider
from tests.helpers.tokens import write_tokens_file
from tests.services.interaction.harness import BROKER_TOKEN, Link, Service, channel, start_service

WEB_TOKEN = "web-acts-for-people"
TUI_TOKEN = "tui-only-itself-1"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE]) as running:
        yield running


@pytest.fixture
async def service(redis_url: str, tmp_path: Path, provider: Provider) -> AsyncIterator[Service]:
    tokens = write_tokens_file(
        tmp_path / "tokens.json",
        [
            {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
            {"token": WEB_TOKEN, "name": "web", "roles": ["surface"], "acts_for": True},
            {"token": TUI_TOKEN, "name": "tui", "roles": ["surface"]},
        ],
    )
    settings = Settings(
        redis_url=redis_url,
        grace_seconds=0.5,
        auth_tokens_file=tokens,
        oidc_issuer=provider.issuer,
        oidc_audiences=["maka-cli"],
        oidc_roles={"approvers": ["surface"]},
    )
    svc = await start_service(settings)
    try:
        yield svc
    finally:
        await svc.running.stop()


async def test_a_person_s_id_token_reads_the_pending_forms_through_the_surface_client(
    service: Service, provider: Provider
) -> None:
    token = await asyncio.to_thread(id_token, provider, ALICE, "maka-cli")
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        opened = await link.open("s-1", "inv-1")
        async with Interactions.connect(service.target, token=token) as person:
            assert [ix.interaction_id for ix in await person.pending()] == [opened.interaction_id]


async def test_an_answer_sent_for_a_person_by_a_token_that_may_act_for_people_is_committed_as_that_person(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="maka.interaction.authority")
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        first = await link.open("s-1", "inv-1")
        second = await link.open("s-1", "inv-2")
        async with (
            Interactions.connect(service.target, token=TUI_TOKEN) as tui,
            Interactions.connect(service.target, token=WEB_TOKEN) as web,
        ):
            with pytest.raises(MakaError) as refused:
                await tui.answer(second.interaction_id, Answer(Action.DECLINE), acting_for="alice@example.com")
            assert refused.value.grpc_status_code == grpc.StatusCode.PERMISSION_DENIED
            assert refused.value.message == "tui may not act for people"
            await web.answer(first.interaction_id, Answer(Action.DECLINE), acting_for="alice@example.com")
            await tui.answer(second.interaction_id, Answer(Action.DECLINE))
    by = {
        r.__dict__["interaction_id"]: (r.__dict__["by"], r.__dict__["via"])
        for r in caplog.records
        if r.getMessage() == "answered"
    }
    assert by == {first.interaction_id: ("alice@example.com", "web"), second.interaction_id: ("tui", "")}


async def test_the_record_names_the_person_who_answered_with_the_issuer_or_the_surface_that_answered_for_them(
    service: Service, provider: Provider
) -> None:
    token = await asyncio.to_thread(id_token, provider, ALICE, "maka-cli")
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        own = await link.open("s-1", "inv-1")
        vouched = await link.open("s-1", "inv-2")
        by_token = await link.open("s-1", "inv-3")
        named = await link.open("s-1", "inv-4")
        async with (
            Interactions.connect(service.target, token=token) as person,
            Interactions.connect(service.target, token=WEB_TOKEN) as web,
            Interactions.connect(service.target, token=TUI_TOKEN) as tui,
        ):
            await person.answer(own.interaction_id, Answer(Action.DECLINE))
            signed_in = web.for_person("alice@example.com", issuer=provider.issuer)
            await signed_in.answer(vouched.interaction_id, Answer(Action.DECLINE))
            await tui.answer(by_token.interaction_id, Answer(Action.DECLINE))
            # a static token's principal the web names without an issuer (as the MCP front door does) is a token's
            await web.answer(named.interaction_id, Answer(Action.DECLINE), acting_for="bob")
            records = [await tui.get(ix.interaction_id) for ix in (own, vouched, by_token, named)]
    who = [
        (r.answered_by.principal, r.answered_by.principal_kind, r.answered_by.issuer, r.answered_by.via)
        for r in records
        if r.answered_by is not None
    ]
    assert who == [
        ("alice@example.com", "oidc", provider.issuer, ""),
        ("alice@example.com", "oidc", provider.issuer, "web"),
        ("tui", "token", "", ""),
        ("bob", "token", "", "web"),
    ]
