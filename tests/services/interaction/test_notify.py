"""Form notifications (services/interaction/notify.py): authorities over the session's real redis-server send to a
real HTTP receiver on loopback; retries, a dead receiver, the bounded queue, the expiry-soon nudge and what a
notification never carries."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core import metrics
from services.core.auth import ANONYMOUS
from services.core.backoff import Backoff
from services.interaction.authority import InteractionAuthority
from services.interaction.keys import Keys
from services.interaction.main import notifier
from services.interaction.notice import clean_text
from services.interaction.notify import (
    Notifier,
    Target,
    TargetKind,
    TargetsInvalid,
    parse_targets,
    redact_url,
)
from services.interaction.redis_client import redis_client
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore
from stack.ports import free_port
from tests.helpers.waiting import eventually
from tests.helpers.webhook import Receiver
from tests.services.interaction.harness import accept, binding, make_form

FAST = Backoff(initial=0.01, maximum=0.02)
WEB = "https://maka.example.com/"
SECRET_PATH = "/services/T000/B000/slack-secret-canary"

Authorities = Callable[..., AbstractAsyncContextManager[list[InteractionAuthority]]]


@pytest.fixture
def authorities(redis_url: str) -> Authorities:
    """``authorities(notifier, notifier, ...)``: one authority (replica) per notifier over one Host's keys in the
    real Redis, each notifier started; all closed after the block."""

    @asynccontextmanager
    async def make(*notifiers: Notifier) -> AsyncIterator[list[InteractionAuthority]]:
        settings = Settings(redis_url=redis_url)
        client = redis_client(settings)
        keys = Keys(f"notify-{secrets.token_hex(4)}")
        store = InteractionStore(client, keys, retention_ms=60_000, events_maxlen=100)
        made = [InteractionAuthority(store, settings, notifier=n) for n in notifiers]
        for n in notifiers:
            n.start()
        try:
            yield made
        finally:
            for n in notifiers:
                await n.aclose()
            await client.aclose()

    return make


def hostile_form(message: str) -> form_pb2.Form:
    form = make_form()
    form.message = message
    form.requester.claimed_server = "ops\x1b]8;;evil\x07server"
    return form


async def test_a_form_opened_by_either_of_two_replicas_is_notified_once_even_when_its_open_is_replayed(
    authorities: Authorities,
) -> None:
    with Receiver() as receiver:
        first = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], web_public_url=WEB, expiry_lead=0)
        second = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], web_public_url=WEB, expiry_lead=0)
        async with authorities(first, second) as (a, b):
            epoch, _ = await a.begin_epoch()
            opened = await a.open(epoch, binding("s-a", "inv-1"), make_form())
            replayed = await b.open(epoch, binding("s-a", "inv-1"), make_form(), replay=True)
            assert replayed.interaction_id == opened.interaction_id
            other = await b.open(epoch, binding("s-a", "inv-2"), make_form())
            # b's queue is in order: a notification of the replay would arrive before the one of its own open
            await eventually(
                lambda: other.interaction_id in [x["interactionId"] for x in receiver.bodies()],
                what="the second form's notification",
            )
            await eventually(lambda: len(receiver.bodies()) == 2, what="the first form's notification")
            ids = sorted(x["interactionId"] for x in receiver.bodies())
            assert ids == sorted([opened.interaction_id, other.interaction_id])


async def test_a_notification_carries_ids_tool_server_deadline_and_a_link_never_a_value_and_cleans_server_text(
    authorities: Authorities, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    value_canary = f"fv-canary-{secrets.token_hex(6)}"
    message = "Deploy \x1b[31mnow\u202e" + "x" * 1000
    with Receiver() as receiver:
        webhook, slack = receiver.url("/hook"), receiver.url(SECRET_PATH)
        notify = Notifier(
            [Target(TargetKind.WEBHOOK, webhook), Target(TargetKind.SLACK, slack)], web_public_url=WEB, expiry_lead=0
        )
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            opened = await authority.open(epoch, binding("s-a", "inv-1"), hostile_form(message), wait_seconds=120)
            await authority.answer(ANONYMOUS, opened.interaction_id, accept(value_canary), submission_id="s1")
            await eventually(lambda: len(receiver.bodies()) == 2, what="both notifications")
        (body,) = receiver.bodies("/hook")
        assert set(body) == {
            *("event", "interactionId", "tool", "server", "host", "session", "deadline", "link", "message", "withheld")
        }
        assert body["withheld"] is False
        assert body["event"] == "form_opened"
        assert body["interactionId"] == opened.interaction_id
        assert body["tool"] == "deploy:deploy"
        assert body["server"] == "ops ]8;;evil server"  # ESC and BEL replaced: nothing drives a terminal
        assert body["host"] == authority.host_id
        assert body["session"] == "s-a"
        assert body["deadline"].endswith("Z")
        assert body["link"] == f"https://maka.example.com/#/interaction/{opened.interaction_id}"
        assert body["message"].startswith("Deploy [31mnow\ufffdxxx")  # the bidi override is a visible marker
        assert len(body["message"]) == 300
        assert body["message"].endswith("…")
        (slack_body,) = receiver.bodies(SECRET_PATH)
        assert set(slack_body) == {"text", "blocks"}
        assert body["link"] in slack_body["text"]
        assert [b["type"] for b in slack_body["blocks"]] == ["section", "section", "context", "actions"]
        assert slack_body["blocks"][-1]["elements"][0]["url"] == body["link"]
        everything = receiver.raw().decode() + caplog.text
        assert value_canary not in everything
        assert "\x1b" not in receiver.raw().decode()
        assert "\u202e" not in receiver.raw().decode()
        assert "slack-secret-canary" not in caplog.text  # logs name a target by scheme and host only


async def test_a_receiver_answering_500_then_200_gets_the_notification_again_and_it_counts_as_sent(
    authorities: Authorities,
) -> None:
    sent_before = (
        metrics.REGISTRY.get_sample_value("maka_notifications_total", {"target": "webhook", "outcome": "sent"}) or 0.0
    )
    with Receiver(statuses=[500]) as receiver:
        notify = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], expiry_lead=0, backoff=FAST)
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            opened = await authority.open(epoch, binding(), make_form())
            (status,) = notify.status()
            await eventually(lambda: status.sent == 1, what="the notification sent on its second attempt")
        assert [(s, json.loads(b)["interactionId"]) for _, b, s in receiver.requests] == [
            (500, opened.interaction_id),
            (200, opened.interaction_id),
        ]
        assert (status.retried, status.failed, status.failing_since, status.last_error) == (1, 0, None, "")
        assert (
            metrics.REGISTRY.get_sample_value("maka_notifications_total", {"target": "webhook", "outcome": "sent"})
            == sent_before + 1
        )


async def test_a_receiver_answering_404_is_not_retried_and_stops_failing_with_its_next_delivered_notification(
    authorities: Authorities,
) -> None:
    with Receiver(statuses=[404]) as receiver:
        notify = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], expiry_lead=0, backoff=FAST)
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            await authority.open(epoch, binding("s-a", "inv-1"), make_form())
            (status,) = notify.status()
            await eventually(lambda: status.failed == 1, what="the refused notification")
            assert (status.retried, status.last_error) == (0, "HTTP 404")
            assert status.failing_since is not None
            await authority.open(epoch, binding("s-a", "inv-2"), make_form())
            await eventually(lambda: status.sent == 1, what="the next notification delivered")
        assert [s for _, _, s in receiver.requests] == [404, 200]
        (after,) = notify.status()
        assert (after.failing_since, after.last_error) == (None, "")


async def test_a_dead_receiver_is_failing_in_the_status_file_by_scheme_and_host_only(
    authorities: Authorities, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()  # nothing listens there
    status_file = tmp_path / "notify.json"
    notify = Notifier(
        [Target(TargetKind.SLACK, f"http://127.0.0.1:{port}{SECRET_PATH}?token=query-canary")],
        expiry_lead=0,
        attempts=2,
        backoff=FAST,
        status_file=status_file,
    )
    async with authorities(notify) as (authority,):
        epoch, _ = await authority.begin_epoch()
        await authority.open(epoch, binding(), make_form())
        (status,) = notify.status()
        await eventually(lambda: status.failed == 1, what="both attempts failed")
    written = json.loads(status_file.read_text())
    (target,) = written["targets"]
    assert target["kind"] == "slack"
    assert target["target"] == f"http://127.0.0.1:{port}/..."
    assert (target["sent"], target["failed"], target["retried"]) == (0, 1, 1)
    assert target["failingSince"] is not None
    assert target["lastError"] == "ConnectError"
    assert status_file.stat().st_mode & 0o777 == 0o600
    for text in (status_file.read_text(), caplog.text):
        assert "slack-secret-canary" not in text
        assert "query-canary" not in text
    assert "notification_failed" in caplog.text


async def test_a_full_queue_drops_its_oldest_notification_and_counts_it() -> None:
    with Receiver() as receiver:
        notify = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], expiry_lead=0, queue_size=2)
        # Not started yet: nothing is sent, so the third open finds the queue full.
        opened = [make_interaction(f"ix_{n}") for n in range(3)]
        for interaction in opened:
            notify.form_opened(interaction, "h", never_pending)
        (status,) = notify.status()
        assert status.dropped == 1
        notify.start()
        try:
            await eventually(lambda: len(receiver.bodies()) == 2, what="the two queued notifications")
        finally:
            await notify.aclose()
        assert [b["interactionId"] for b in receiver.bodies()] == ["ix_1", "ix_2"]


async def test_a_form_still_pending_at_the_lead_gets_one_expiring_nudge_and_an_answered_one_none(
    authorities: Authorities,
) -> None:
    with Receiver() as receiver:
        notify = Notifier([Target(TargetKind.WEBHOOK, receiver.url())], expiry_lead=119.5)
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            answered = await authority.open(epoch, binding("s-a", "inv-1"), make_form(), wait_seconds=120)
            await authority.answer(ANONYMOUS, answered.interaction_id, accept(), submission_id="s1")
            waiting = await authority.open(epoch, binding("s-a", "inv-2"), make_form(), wait_seconds=120.2)
            # the answered form's nudge is due first: had it been sent, it would arrive before this one
            await eventually(
                lambda: [b for b in receiver.bodies() if b["event"] == "form_expiring"] or None,
                timeout=10,
                what="a nudge",
            )
        events = [(b["event"], b["interactionId"]) for b in receiver.bodies()]
        assert events == [
            ("form_opened", answered.interaction_id),
            ("form_opened", waiting.interaction_id),
            ("form_expiring", waiting.interaction_id),
        ]


def test_targets_come_from_both_lists_and_a_file_and_a_bad_one_is_refused_without_its_secret(tmp_path: Path) -> None:
    listed = tmp_path / "targets"
    listed.write_text(
        "# team channels\nslack https://hooks.slack.com/services/T/B/file-secret\n\nwebhook http://h:81/x\n"
    )
    targets = parse_targets("http://a/hook, https://b/h2", "https://hooks.slack.com/services/T/B/env-secret", listed)
    assert [t.shown for t in targets] == [
        "webhook http://a/...",
        "webhook https://b/...",
        "slack https://hooks.slack.com/...",
        "slack https://hooks.slack.com/...",
        "webhook http://h:81/...",
    ]
    with pytest.raises(TargetsInvalid) as refused:
        parse_targets("ftp://host/secret-path", "", None)
    assert "secret-path" not in str(refused.value)
    listed.write_text("teams https://x/secret\n")
    with pytest.raises(TargetsInvalid, match="line 1"):
        parse_targets("", "", listed)
    assert notifier(Settings()) is None  # no target: notifications off


def test_a_redacted_url_keeps_scheme_and_host_and_cleaned_text_is_one_capped_line() -> None:
    assert redact_url("https://user:pw@hooks.example.com:8443/a/b?t=1#f") == "https://hooks.example.com:8443/..."
    assert redact_url("http://receiver") == "http://receiver"
    assert clean_text("a\nb\tc\u200bd\x9b", 100) == "a b c\ufffdd\ufffd"
    assert clean_text("x" * 10, 5) == "xxxx…"


async def never_pending(interaction_id: str) -> bool:
    return False


def make_interaction(interaction_id: str) -> interaction_pb2.Interaction:
    interaction = interaction_pb2.Interaction(interaction_id=interaction_id, binding=binding(), form=make_form())
    interaction.expires_at.FromMilliseconds(0)
    return interaction


async def test_a_receiver_that_drips_its_answer_is_abandoned_at_the_attempt_bound_and_counted_failed(
    authorities: Authorities,
) -> None:
    with Receiver(drip=True) as receiver:
        notify = Notifier(
            [Target(TargetKind.WEBHOOK, receiver.url())], expiry_lead=0, attempts=1, timeout=1.0, backoff=FAST
        )
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            await authority.open(epoch, binding(), make_form())
            (status,) = notify.status()
            # The drip would take 200 s, each byte well inside httpx's 1 s read timeout: only a bound on the whole
            # attempt ends it.
            await eventually(lambda: status.failed == 1, what="the dripping attempt abandoned")
            assert (status.sent, status.last_error) == (0, "timed out after 1 s")
            await eventually(receiver.hung_up.is_set, what="the receiver seeing the attempt hang up")


async def test_a_slack_target_gets_every_supplied_string_as_plain_text_never_as_markup_or_a_mention(
    authorities: Authorities,
) -> None:
    session = "@here *PWNED* https://evil.example/s"
    form = make_form()
    form.message = "<!channel> _look_ `here` ~now~ <https://evil.example|click>"
    form.requester.claimed_server = "<@U123>"
    with Receiver() as receiver:
        notify = Notifier([Target(TargetKind.SLACK, receiver.url(SECRET_PATH))], expiry_lead=0)
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            opened = await authority.open(epoch, binding(session, "inv-1"), form)
            (body,) = await eventually(lambda: receiver.bodies() or None, what="the Slack notification")
    deadline = json.dumps(body).split("answer by ")[1].split('"')[0]
    link = ""  # no public web URL: no button
    assert body == {
        "text": f"A form waits, answer by {deadline}{link}",
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "plain_text",
                    "text": f"A form waits: deploy:deploy on <@U123> (Host {authority.host_id}), answer by {deadline}",
                    "emoji": False,
                },
            },
            {"type": "section", "text": {"type": "plain_text", "text": form.message, "emoji": False}},
            {
                "type": "context",
                "elements": [
                    {"type": "plain_text", "text": f"session {session} · {opened.interaction_id}", "emoji": False}
                ],
            },
        ],
    }
    assert "mrkdwn" not in json.dumps(body)


async def test_a_form_made_for_a_person_is_notified_with_its_details_withheld_the_link_only(
    authorities: Authorities,
) -> None:
    alice = interaction_pb2.Person(principal="alice@example.com", issuer="https://issuer.example")
    form = make_form()
    form.message = "Deploy alice's secret-project-canary"
    with Receiver() as receiver:
        webhook, slack = receiver.url("/hook"), receiver.url(SECRET_PATH)
        notify = Notifier(
            [Target(TargetKind.WEBHOOK, webhook), Target(TargetKind.SLACK, slack)], web_public_url=WEB, expiry_lead=0
        )
        async with authorities(notify) as (authority,):
            epoch, _ = await authority.begin_epoch()
            opened = await authority.open(epoch, binding("alice-session-canary", "inv-1", made_for=alice), form)
            await eventually(lambda: len(receiver.bodies()) == 2, what="both notifications")
    link = f"https://maka.example.com/#/interaction/{opened.interaction_id}"
    (body,) = receiver.bodies("/hook")
    assert body == {
        "event": "form_opened",
        "interactionId": None,
        "tool": None,
        "server": None,
        "host": authority.host_id,
        "session": None,
        "deadline": body["deadline"],
        "link": link,
        "message": None,
        "withheld": True,
    }
    (slack_body,) = receiver.bodies(SECRET_PATH)
    assert [b["type"] for b in slack_body["blocks"]] == ["section", "actions"]
    assert slack_body["blocks"][0]["text"]["text"].startswith("A form waits for a person (Host ")
    everything = receiver.raw().decode()
    for secret in ("secret-project-canary", "alice-session-canary", "alice@example.com", "deploy:deploy"):
        assert secret not in everything
