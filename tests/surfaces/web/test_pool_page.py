"""The web page following a pool of Hosts (``MAKA_HOST_IDS=*``) in real Chromium: one Interaction service serves
two Hosts, each with its own broker link; the page lists the forms of both, each card naming its Host, and an
answer on each card commits on that card's Host (docs/design.md#surfaces-follow-the-pool)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from tests.helpers.loop_thread import LoopThread
from tests.helpers.redis_server import RedisServer
from tests.surfaces.web.stack import PoolStack, running_pool, text_form

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000


@dataclass
class Pool:
    thread: LoopThread
    stack: PoolStack
    hosts: list[str]
    url: str


@pytest.fixture
def pool(redis_server: RedisServer) -> Iterator[Pool]:
    tag = uuid.uuid4().hex[:8]
    hosts = [f"pool-a-{tag}", f"pool-b-{tag}"]
    thread = LoopThread("web-pool-stack")
    thread.start()
    context = running_pool(redis_server.url, hosts)
    try:
        stack = thread.run(context.__aenter__(), 20)
        app, running = thread.run(stack.web(host_ids="*"), 20)
        try:
            yield Pool(thread, stack, hosts, running.url)
        finally:
            thread.run(running.stop(), 20)
            thread.run(app.close(), 20)
            thread.run(context.__aexit__(None, None, None), 20)
    finally:
        thread.stop(10)


def test_the_page_lists_the_forms_of_two_hosts_and_answers_each_on_its_own_host(page: Page, pool: Pool) -> None:
    first, second = pool.hosts
    on_first = pool.thread.run(pool.stack.links[first].open(text_form("deploy on the first Host?")), 20)
    on_second = pool.thread.run(pool.stack.links[second].open(text_form("deploy on the second Host?")), 20)

    page.goto(pool.url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    expect(page.locator("article.card")).to_have_count(2, timeout=TIMEOUT_MS)
    first_card = page.locator(f'article.card[data-id="{on_first.interaction_id}"]')
    second_card = page.locator(f'article.card[data-id="{on_second.interaction_id}"]')
    expect(first_card.locator(".host")).to_have_text(f"on {first}")
    expect(second_card.locator(".host")).to_have_text(f"on {second}")

    first_card.get_by_label(re.compile(r"^Target\b")).fill("eu-1")
    first_card.get_by_role("button", name="Submit").click()
    expect(first_card).to_have_count(0, timeout=TIMEOUT_MS)
    second_card.get_by_role("button", name="Decline").click()
    expect(second_card).to_have_count(0, timeout=TIMEOUT_MS)

    answered_first = pool.thread.run(pool.stack.get(first, on_first.interaction_id), 20)
    answered_second = pool.thread.run(pool.stack.get(second, on_second.interaction_id), 20)
    assert answered_first.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert answered_first.answer.action == form_pb2.ACTION_ACCEPT
    assert answered_second.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert answered_second.answer.action == form_pb2.ACTION_DECLINE
    # each Host's own broker got its form's settlement
    settled_first = pool.thread.run(pool.stack.links[first].next_settled(), 20)
    settled_second = pool.thread.run(pool.stack.links[second].next_settled(), 20)
    assert settled_first.interaction_id == on_first.interaction_id
    assert settled_second.interaction_id == on_second.interaction_id
