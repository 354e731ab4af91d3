"""Forms reach the right person (docs/security.md "Who sees a form") on the real Interaction service, with ID tokens
of a real OpenID provider: a form made for alice is seen and answerable by alice and by the approvers of the
policy file (bob, in group release-managers), by nobody else (carol, machine tokens, the web page acting for
carol), in ListPending, GetInteraction, Answer, Attach (snapshot and live events) and ListHistory; another
person's form id is NOT_FOUND exactly like an unknown id; the policy file is re-read when it changes. ListSurfaces
shows a person only their own attachments (an admin token all)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path

import grpc
import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from maka_client import MakaError
from services.core.form import Action, Answer
from services.interaction.settings import Settings
from surfaces.common.interactions import Interactions
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.helpers.waiting import eventually
from tests.reliability.harness import redis_dump
from tests.services.interaction.harness import BROKER_TOKEN, Link, Service, Surface, channel, start_service

WEB_TOKEN = "web-acts-for-people"
TUI_TOKEN = "tui-only-itself-1"
ADMIN_TOKEN = "root-admin-token-1"
AUDIENCE = "maka-cli"
ALICE = Person("alice", "alice@example.com", ("staff",))
BOB = Person("bob", "bob@example.com", ("staff", "release-managers"))
CAROL = Person("carol", "carol@example.com", ("staff",))
POLICY = {"policies": [{"server": "deploy", "tool": "deploy", "approvers": {"groups": ["release-managers"]}}]}
"""The harness's forms are of Tool ``deploy:deploy``."""


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, CAROL]) as running:
        yield running


@pytest.fixture(scope="module")
def tokens(provider: Provider) -> dict[str, str]:
    return {person.sub: id_token(provider, person, AUDIENCE) for person in (ALICE, BOB, CAROL)}


def write_policies(path: Path, data: object) -> Path:
    """Replace ``path`` with ``data`` (a new file renamed over the old one, as a mounted ConfigMap changes)."""
    staged = path.with_suffix(".new")
    staged.write_text(json.dumps(data))
    os.replace(staged, path)
    return path


@pytest.fixture
async def service(redis_url: str, tmp_path: Path, provider: Provider) -> AsyncIterator[Service]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
                    {"token": WEB_TOKEN, "name": "web", "roles": ["surface"], "acts_for": True},
                    {"token": TUI_TOKEN, "name": "tui", "roles": ["surface"]},
                    {"token": ADMIN_TOKEN, "name": "root", "roles": ["admin"]},
                ]
            }
        )
    )
    settings = Settings(
        redis_url=redis_url,
        grace_seconds=0.5,
        auth_tokens_file=tokens,
        oidc_issuer=provider.issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"staff": ["surface"]},
        approver_policies_file=write_policies(tmp_path / "policies.json", POLICY),
    )
    svc = await start_service(settings)
    try:
        yield svc
    finally:
        await svc.running.stop()


def alice_of(provider: Provider) -> interaction_pb2.Person:
    """What the broker puts on alice's call's binding when her own token called."""
    return interaction_pb2.Person(principal=ALICE.email, issuer=provider.issuer)


async def _refusal(call: Awaitable[object]) -> tuple[grpc.StatusCode | None, str, str]:
    with pytest.raises(MakaError) as refused:
        await call
    return refused.value.grpc_status_code, refused.value.reason, refused.value.message


async def test_a_person_s_form_is_listed_read_and_answered_by_that_person_and_the_policy_s_approvers_only(
    service: Service, provider: Provider, tokens: dict[str, str]
) -> None:
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        machine = await link.open("s-1", "inv-machine")
        alice_s = await link.open("s-1", "inv-alice", made_for=alice_of(provider))
        async with (
            Interactions.connect(service.target, token=tokens["alice"]) as alice,
            Interactions.connect(service.target, token=tokens["bob"]) as bob,
            Interactions.connect(service.target, token=tokens["carol"]) as carol,
            Interactions.connect(service.target, token=TUI_TOKEN) as tui,
            Interactions.connect(service.target, token=WEB_TOKEN) as web,
        ):
            both = {machine.interaction_id, alice_s.interaction_id}
            assert {ix.interaction_id for ix in await alice.pending()} == both
            assert {ix.interaction_id for ix in await bob.pending()} == both
            assert {
                ix.interaction_id for ix in await web.for_person("dave@example.com", ["release-managers"]).pending()
            } == both
            assert [ix.interaction_id for ix in await carol.pending()] == [machine.interaction_id]
            assert [ix.interaction_id for ix in await tui.pending()] == [machine.interaction_id]
            assert [ix.interaction_id for ix in await web.for_person(CAROL.email).pending()] == [machine.interaction_id]
            assert [ix.interaction_id for ix in await web.pending()] == [machine.interaction_id]

            assert (await alice.get(alice_s.interaction_id)).proto.binding.made_for.principal == ALICE.email
            unknown = "ix_" + "A" * 22
            for outsider in (carol, tui, web.for_person(CAROL.email)):
                hidden = await _refusal(outsider.get(alice_s.interaction_id))
                missing = await _refusal(outsider.get(unknown))
                assert hidden[:2] == missing[:2] == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
                assert hidden[2].replace(alice_s.interaction_id, unknown) == missing[2]
                refused = await _refusal(outsider.answer(alice_s.interaction_id, Answer(Action.DECLINE)))
                assert refused[:2] == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")

            settled = await bob.answer(alice_s.interaction_id, Answer(Action.DECLINE))
            assert settled.answered_by is not None
            assert (settled.answered_by.principal, settled.answered_by.issuer) == (BOB.email, provider.issuer)
            assert (await link.next_settled()).interaction_id == alice_s.interaction_id


async def test_attach_snapshots_and_live_events_reach_only_the_person_and_the_approvers(
    service: Service, provider: Provider, tokens: dict[str, str]
) -> None:
    async with (
        channel(service, BROKER_TOKEN) as broker,
        channel(service, tokens["bob"]) as bob_channel,
        channel(service, tokens["carol"]) as carol_channel,
    ):
        link = await Link.connect(broker)
        before = await link.open("s-1", "inv-before", made_for=alice_of(provider))
        bob = await Surface.attach(bob_channel, ("s-1",))
        carol = await Surface.attach(carol_channel, ("s-1",))
        try:
            bob_snapshot = (await bob.next("snapshot")).snapshot
            carol_snapshot = (await carol.next("snapshot")).snapshot
            assert [ix.interaction_id for ix in bob_snapshot.pending] == [before.interaction_id]
            assert list(carol_snapshot.pending) == []

            hers = await link.open("s-1", "inv-live", made_for=alice_of(provider))
            machine = await link.open("s-1", "inv-machine")
            bob_events = await bob.events(2)
            assert [e.interaction.interaction_id for e in bob_events] == [hers.interaction_id, machine.interaction_id]
            # carol's stream carries the machine form's event, and nothing of alice's before it (one ordered Stream)
            [carol_event] = await carol.events(1)
            assert carol_event.interaction.interaction_id == machine.interaction_id

            await carol.answer("sub-carol", hers.interaction_id, form_pb2.Answer(action=form_pb2.ACTION_DECLINE))
            outcome = (await carol.next("answer_outcome")).answer_outcome
            assert (outcome.accepted, outcome.reason, outcome.HasField("interaction")) == (
                False,
                interaction_pb2.ERROR_REASON_NOT_FOUND,
                False,
            )
        finally:
            await bob.close()
            await carol.close()


async def test_history_lists_a_person_s_settled_forms_only_to_the_person_and_the_approvers(
    service: Service, provider: Provider, tokens: dict[str, str]
) -> None:
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        hers = await link.open("s-1", "inv-alice", made_for=alice_of(provider))
        machine = await link.open("s-1", "inv-machine")
        async with (
            Interactions.connect(service.target, token=tokens["alice"]) as alice,
            Interactions.connect(service.target, token=tokens["bob"]) as bob,
            Interactions.connect(service.target, token=tokens["carol"]) as carol,
        ):
            await bob.answer(hers.interaction_id, Answer(Action.DECLINE))
            await carol.answer(machine.interaction_id, Answer(Action.DECLINE))
            seen = {
                name: [(e.interaction_id, e.made_for) for e in (await client.history()).entries]
                for name, client in (("alice", alice), ("bob", bob), ("carol", carol))
            }
    both = [(machine.interaction_id, ""), (hers.interaction_id, ALICE.email)]
    assert seen == {"alice": both, "bob": both, "carol": [(machine.interaction_id, "")]}


async def test_a_changed_policy_file_applies_to_the_next_read_without_a_restart(
    service: Service, provider: Provider, tokens: dict[str, str]
) -> None:
    policies = service.settings.approver_policies_file
    assert policies is not None
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        hers = await link.open("s-1", "inv-alice", made_for=alice_of(provider))
        async with (
            Interactions.connect(service.target, token=tokens["bob"]) as bob,
            Interactions.connect(service.target, token=tokens["carol"]) as carol,
        ):
            assert [ix.interaction_id for ix in await bob.pending()] == [hers.interaction_id]
            write_policies(policies, {"policies": [{"approvers": {"principals": [CAROL.email]}}]})
            assert [ix.interaction_id for ix in await bob.pending()] == []
            assert [ix.interaction_id for ix in await carol.pending()] == [hers.interaction_id]


async def test_deleting_the_policy_file_revokes_its_approvers_and_the_person_still_sees_her_form(
    service: Service, provider: Provider, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="maka.interaction.policy")
    policies = service.settings.approver_policies_file
    assert policies is not None
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        hers = await link.open("s-1", "inv-alice", made_for=alice_of(provider))
        async with (
            Interactions.connect(service.target, token=tokens["alice"]) as alice,
            Interactions.connect(service.target, token=tokens["bob"]) as bob,
        ):
            assert [ix.interaction_id for ix in await bob.pending()] == [hers.interaction_id]
            policies.unlink()
            assert [ix.interaction_id for ix in await bob.pending()] == []
            assert [ix.interaction_id for ix in await alice.pending()] == [hers.interaction_id]
    assert "approver_policies_removed" in [r.getMessage() for r in caplog.records]


async def test_the_audit_names_the_person_and_their_token_and_groups_never_reach_redis_or_the_logs(
    service: Service, provider: Provider, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with channel(service, BROKER_TOKEN) as broker:
        link = await Link.connect(broker)
        hers = await link.open("s-1", "inv-alice", made_for=alice_of(provider))
        async with (
            Interactions.connect(service.target, token=tokens["alice"]) as alice,
            Interactions.connect(service.target, token=WEB_TOKEN) as web,
        ):
            bob_via_web = web.for_person(BOB.email, ["release-managers"])
            assert [ix.interaction_id for ix in await bob_via_web.pending()] == [hers.interaction_id]
            await alice.answer(hers.interaction_id, Answer(Action.DECLINE))
            history = (await alice.history()).entries
    stored = await redis_dump(service.settings.redis_url)
    secrets = [tokens["alice"].encode(), tokens["alice"].rsplit(".", 1)[-1].encode(), b"release-managers"]
    assert ALICE.email.encode() in stored  # the record names her (so the search below looks at the right bytes)
    assert not [s for s in secrets if s in stored]
    assert tokens["alice"] not in caplog.text
    assert tokens["alice"] not in repr(history)
    opened = [r.__dict__ for r in caplog.records if r.name == "maka.audit" and r.getMessage() == "form_opened"]
    assert [(r["interaction_id"], r["made_for"]) for r in opened] == [(hers.interaction_id, ALICE.email)]


async def test_a_person_lists_only_their_own_attached_surfaces_and_an_admin_token_lists_every_one(
    service: Service, tokens: dict[str, str]
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for token, kind in ((tokens["alice"], "web"), (tokens["carol"], "tui"), (TUI_TOKEN, "tui")):
            ch = await stack.enter_async_context(channel(service, token))
            stack.push_async_callback((await Surface.attach(ch, ("s-1",), surface_kind=kind)).close)
        async with (
            Interactions.connect(service.target, token=ADMIN_TOKEN) as admin,
            Interactions.connect(service.target, token=tokens["alice"]) as alice,
            Interactions.connect(service.target, token=tokens["carol"]) as carol,
            Interactions.connect(service.target, token=WEB_TOKEN) as web,
        ):

            async def every() -> list[str] | None:
                names = sorted(s.principal for s in (await admin.list_surfaces())[0])
                return names if len(names) == 3 else None

            assert await eventually(every, timeout=10, what="three attachments") == sorted(
                [ALICE.email, CAROL.email, "tui"]
            )
            assert [s.principal for s in (await alice.list_surfaces())[0]] == [ALICE.email]
            assert [s.principal for s in (await carol.list_surfaces())[0]] == [CAROL.email]
            assert [s.principal for s in (await web.for_person(CAROL.email).list_surfaces())[0]] == [CAROL.email]
            assert [s.principal for s in (await web.for_person("dave@example.com").list_surfaces())[0]] == []
