"""The web page (``surfaces/web/static``) in real Debian Chromium through Playwright, against the real
Interaction service; forms are opened through a real HostLink stream (the broker's side)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Locator, Page, Route, expect

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from tests.surfaces.web.stack import WebStackThread, every_kind_form, text_form

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000


def card_of(page: Page, interaction_id: str) -> Locator:
    return page.locator(f'article.card[data-id="{interaction_id}"]')


def field_of(card: Locator, name: str) -> Locator:
    return card.locator(f'.field[data-name="{name}"]')


def labelled(card: Locator, text: str) -> Locator:
    """The control whose accessible name starts with ``text`` as a whole word (required marks follow it)."""
    return card.get_by_label(re.compile(rf"^{re.escape(text)}\b"))


def open_page(page: Page, url: str) -> list[str]:
    """Load the page; returns a live list of console errors (CSP violations land there)."""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    return errors


def test_every_field_kind_renders_with_provenance_defaults_help_and_time_left(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    ix = stack_thread.open(every_kind_form(), session_id, wait_seconds=300)
    errors = open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    expect(card.locator(".provider-name")).to_have_text("Local MCP provider")
    expect(card.locator(".provider-id")).to_have_text("(mcp-provider-1)")
    expect(card.locator(".claimed")).to_contain_text("Claimed")
    expect(card.locator(".claimed-server")).to_have_text("deployer")
    expect(card.locator(".claimed-tool")).to_have_text("deploy")
    expect(card.locator(".claimed-note")).to_contain_text("display only")
    expect(card.locator(".message")).to_have_text("Where should build-42 go?")
    expect(card.locator(".warning")).to_contain_text("passwords, API keys, access tokens or payment details")
    expect(card.locator(".timer")).to_have_text(re.compile(r"^[45]m \d\ds left$"))
    # Defaults are pre-filled, per kind.
    expect(labelled(card, "Environment")).to_have_value("staging")
    expect(labelled(card, "Replicas")).to_have_value("2")
    expect(labelled(card, "Release note")).to_have_value("Routine deploy")
    expect(labelled(card, "Window day")).to_have_value("2026-12-01")
    expect(labelled(card, "Chat")).to_be_checked()
    expect(labelled(card, "Email")).not_to_be_checked()
    expect(field_of(card, "confirm").get_by_role("radio", name="Yes")).not_to_be_checked()
    expect(field_of(card, "confirm").get_by_role("radio", name="No")).not_to_be_checked()
    # Widgets per kind (numbers are text inputs so the typed digits are kept exactly).
    expect(labelled(card, "Replicas")).to_have_attribute("type", "text")
    expect(labelled(card, "Replicas")).to_have_attribute("inputmode", "numeric")
    expect(labelled(card, "Canary share")).to_have_attribute("inputmode", "decimal")
    expect(labelled(card, "Contact email")).to_have_attribute("type", "email")
    expect(labelled(card, "Dashboard URL")).to_have_attribute("type", "url")
    expect(labelled(card, "Window day")).to_have_attribute("type", "date")
    expect(labelled(card, "Window start")).to_have_attribute("type", "datetime-local")
    expect(card.get_by_role("radiogroup", name=re.compile("^I have read the release notes"))).to_be_visible()
    # Required marks, descriptions as help, constraint hints.
    expect(field_of(card, "environment").locator(".required")).to_have_count(1)
    expect(field_of(card, "canary").locator(".required")).to_have_count(0)
    expect(field_of(card, "environment").locator(".help")).to_have_text("Where the artifact is deployed.")
    expect(field_of(card, "channels").locator(".hint")).to_have_text("Pick 1 to 2")
    expect(field_of(card, "replicas").locator(".hint")).to_have_text("A whole number between 1 and 10")
    expect(field_of(card, "note").locator(".hint")).to_have_text("3 to 80 characters")
    # The long option list is filterable; labels are shown, values submitted.
    region = labelled(card, "Region")
    expect(region.locator("option")).to_have_count(22)
    field_of(card, "region").get_by_role("searchbox").fill("mars")
    expect(region.locator("option:not([hidden])")).to_have_count(2)  # the "Choose…" placeholder + Mars
    expect(region.locator("option:not([hidden])").last).to_have_text("Mars Base Alpha")
    field_of(card, "region").get_by_role("searchbox").fill("")
    expect(region.locator("option:not([hidden])")).to_have_count(22)
    expect(card).not_to_contain_text("null")
    expect(card).not_to_contain_text("undefined")
    expect(card.get_by_role("button", name="Submit")).to_be_visible()
    expect(card.get_by_role("button", name="Decline")).to_be_visible()
    expect(card.get_by_role("button", name="Dismiss")).to_be_visible()
    page.screenshot(path=str(artifacts / "every-kind.png"), full_page=True)
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_submit_sends_typed_values_for_every_field_kind(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    ix = stack_thread.open(every_kind_form(), session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    labelled(card, "Environment").select_option(label="Production")
    labelled(card, "Region").select_option("region-07")
    labelled(card, "Email").check()
    labelled(card, "Replicas").fill("4")
    labelled(card, "Canary share").fill("0.5")
    field_of(card, "confirm").get_by_role("radio", name="Yes").check()
    labelled(card, "Contact email").fill("oncall@example.com")
    labelled(card, "Dashboard URL").fill("https://grafana.example.com/d/1")
    labelled(card, "Window day").fill("2026-12-24")
    labelled(card, "Window start").fill("2026-12-24T08:30:00")
    labelled(card, "Release note").fill("Holiday hotfix")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.own")).to_contain_text("Sent to the Tool.")
    page.screenshot(path=str(artifacts / "submitted.png"), full_page=True)
    stored = stack_thread.get(ix.interaction_id)
    assert stored.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert stored.answer.action == form_pb2.ACTION_ACCEPT
    values = stored.answer.values
    assert values["environment"].string_value == "production"
    assert values["region"].string_value == "region-07"
    assert list(values["channels"].string_list_value.values) == ["email", "chat"]
    assert values["replicas"].integer_value == 4
    assert values["canary"].number_value == 0.5
    assert values["confirm"].boolean_value is True
    assert values["contact"].string_value == "oncall@example.com"
    assert values["dashboard"].string_value == "https://grafana.example.com/d/1"
    assert values["window_day"].string_value == "2026-12-24"
    assert re.fullmatch(r"2026-12-24T\d\d:30:00Z", values["window_start"].string_value)
    assert values["note"].string_value == "Holiday hotfix"


def test_decline_and_dismiss_send_distinct_answers(page: Page, stack_thread: WebStackThread, session_id: str) -> None:
    first = stack_thread.open(text_form("decline me"), session_id)
    second = stack_thread.open(text_form("dismiss me"), session_id)
    open_page(page, stack_thread.web([session_id]))
    expect(page.locator("article.card")).to_have_count(2, timeout=TIMEOUT_MS)
    card_of(page, first.interaction_id).get_by_role("button", name="Decline").click()
    expect(card_of(page, first.interaction_id)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.own").first).to_contain_text("Declined; the Tool was told.")
    card_of(page, second.interaction_id).get_by_role("button", name="Dismiss").click()
    expect(card_of(page, second.interaction_id)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.own").first.locator(".notice-text")).to_have_text("Dismissed.")
    assert stack_thread.get(first.interaction_id).answer.action == form_pb2.ACTION_DECLINE
    assert stack_thread.get(second.interaction_id).answer.action == form_pb2.ACTION_CANCEL
    assert not stack_thread.get(first.interaction_id).answer.values


def test_inline_validation_blocks_submit_until_the_fields_are_fixed(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    ix = stack_thread.open(every_kind_form(), session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    labelled(card, "Replicas").fill("11")
    labelled(card, "Release note").fill("no")
    labelled(card, "Chat").uncheck()
    labelled(card, "Contact email").fill("not-an-email")
    card.get_by_role("button", name="Submit").click()
    expect(field_of(card, "region").locator(".field-error")).to_have_text("Required")
    expect(field_of(card, "replicas").locator(".field-error")).to_have_text("Must be at most 10")
    expect(field_of(card, "note").locator(".field-error")).to_have_text("Use at least 3 characters")
    expect(field_of(card, "channels").locator(".field-error")).to_have_text("Pick at least 1")
    expect(field_of(card, "contact").locator(".field-error")).to_contain_text("email address")
    expect(card.locator(".form-error")).to_have_text("Fix the highlighted fields to submit.")
    expect(labelled(card, "Replicas")).to_have_attribute("aria-invalid", "true")
    page.screenshot(path=str(artifacts / "inline-validation.png"), full_page=True)
    assert stack_thread.get(ix.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING
    # Fixing a field clears its message as the user types.
    labelled(card, "Replicas").fill("3")
    expect(field_of(card, "replicas").locator(".field-error")).to_be_hidden()
    labelled(card, "Region").select_option("region-01")
    labelled(card, "Release note").fill("fine now")
    labelled(card, "Pager").check()
    labelled(card, "Contact email").fill("")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    stored = stack_thread.get(ix.interaction_id)
    assert stored.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert "contact" not in stored.answer.values, "an emptied optional field is left out"


def test_the_services_field_violations_are_shown_inline(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(every_kind_form(), session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    labelled(card, "Region").select_option("region-02")
    labelled(card, "Contact email").fill("a..b@example.com")  # passes the page's check, not the service's
    card.get_by_role("button", name="Submit").click()
    expect(field_of(card, "contact").locator(".field-error")).to_have_text("must be a valid email", timeout=TIMEOUT_MS)
    expect(card.locator(".form-error")).to_contain_text("The host did not accept these values.")
    assert stack_thread.get(ix.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING
    labelled(card, "Contact email").fill("a.b@example.com")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    assert stack_thread.get(ix.interaction_id).answer.values["contact"].string_value == "a.b@example.com"


def test_an_answer_recorded_lost_shows_a_notice_that_it_never_reached_the_tool(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("answered, then lost", claimed_tool="migrate"), session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    card.get_by_role("button", name="Decline").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    stack_thread.deliver(ix.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_STOPPED)
    notice = page.locator(".notice.closed").first
    expect(notice.locator(".notice-title")).to_have_text("migrate", timeout=TIMEOUT_MS)
    expect(notice.locator(".notice-text")).to_have_text(
        "Your answer was recorded but never reached the Tool: the Tool call was stopped first (nothing was retried)."
    )


def test_dismiss_waits_with_undo_and_undo_brings_the_form_back_with_its_draft_sending_nothing(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("dismiss, then undo"), session_id)
    open_page(page, stack_thread.web([session_id], undo_seconds=60))
    card = card_of(page, ix.interaction_id)
    labelled(card, "Target").fill("eu-west")
    card.get_by_role("button", name="Dismiss").click()
    bar = card.locator(".undo-bar")
    expect(bar).to_contain_text("Dismissed — sending in ", timeout=TIMEOUT_MS)
    expect(labelled(card, "Target")).to_be_hidden()
    assert stack_thread.get(ix.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING
    bar.get_by_role("button", name="Undo").click()
    expect(bar).to_have_count(0)
    expect(labelled(card, "Target")).to_have_value("eu-west")
    expect(card.get_by_role("button", name="Dismiss")).to_be_focused()
    assert stack_thread.get(ix.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    assert stack_thread.get(ix.interaction_id).answer.action == form_pb2.ACTION_ACCEPT


def test_a_dismissal_sends_cancel_when_its_countdown_ends_and_says_only_dismissed(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("let it go"), session_id)
    open_page(page, stack_thread.web([session_id], undo_seconds=1))
    card = card_of(page, ix.interaction_id)
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.own").first.locator(".notice-text")).to_have_text("Dismissed.")
    assert stack_thread.get(ix.interaction_id).answer.action == form_pb2.ACTION_CANCEL


def test_a_form_closed_elsewhere_during_its_countdown_is_never_answered(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("stopped while dismissing", claimed_tool="migrate"), session_id)
    open_page(page, stack_thread.web([session_id], undo_seconds=60))
    card = card_of(page, ix.interaction_id)
    card.get_by_role("button", name="Dismiss").click()
    expect(card.locator(".undo-bar")).to_be_visible(timeout=TIMEOUT_MS)
    stack_thread.close(ix.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.closed").first.locator(".notice-text")).to_have_text(
        "Closed: the Tool call was stopped."
    )
    assert not stack_thread.get(ix.interaction_id).HasField("answer")


def test_a_submitted_form_says_sent_and_then_that_the_tool_received_it(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("submit and follow"), session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    labelled(card, "Target").fill("eu-west")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    mine = page.locator(f'.notice.own[data-interaction="{ix.interaction_id}"] .notice-text')
    expect(mine).to_have_text("Sent to the Tool.")
    stack_thread.deliver(ix.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED)
    expect(mine).to_have_text("Sent; the Tool received your answer.", timeout=TIMEOUT_MS)


def test_a_form_closed_elsewhere_disappears_with_its_reason(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    ix = stack_thread.open(text_form("about to be stopped", claimed_tool="migrate"), session_id)
    open_page(page, stack_thread.web([session_id]))
    expect(card_of(page, ix.interaction_id)).to_be_visible(timeout=TIMEOUT_MS)
    stack_thread.close(ix.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    expect(card_of(page, ix.interaction_id)).to_have_count(0, timeout=TIMEOUT_MS)
    notice = page.locator(".notice.closed").first
    expect(notice.locator(".notice-title")).to_have_text("migrate")
    expect(notice.locator(".notice-text")).to_have_text("Closed: the Tool call was stopped.")
    expect(page.locator("#empty")).to_be_visible()
    page.screenshot(path=str(artifacts / "closed-elsewhere.png"), full_page=True)


def test_new_forms_appear_live_and_reload_rehydrates_several_sessions_and_rounds(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    other_session = session_id + "-b"
    url = stack_thread.web([session_id, other_session])
    open_page(page, url)
    expect(page.locator("#empty")).to_be_visible()
    round_one = stack_thread.open(text_form("round one"), session_id)
    expect(card_of(page, round_one.interaction_id)).to_be_visible(timeout=TIMEOUT_MS)
    round_two = stack_thread.open(text_form("round two"), session_id)
    elsewhere = stack_thread.open(text_form("other session", claimed_tool="backup"), other_session)
    hidden = stack_thread.open(text_form("not shown here"), session_id + "-c")
    expect(page.locator("article.card")).to_have_count(3, timeout=TIMEOUT_MS)
    expect(page.locator("#pending-count")).to_have_text("3 waiting")
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    expect(page.locator("article.card")).to_have_count(3)
    for ix in (round_one, round_two, elsewhere):
        expect(card_of(page, ix.interaction_id)).to_be_visible()
    expect(card_of(page, hidden.interaction_id)).to_have_count(0)
    expect(card_of(page, elsewhere.interaction_id).locator(".session")).to_contain_text(other_session)
    expect(page.locator("article.card .message")).to_have_text(["round one", "round two", "other session"])
    page.screenshot(path=str(artifacts / "several-sessions.png"), full_page=True)


def test_two_tabs_racing_one_form_have_one_winner_and_the_other_sees_it_settled(
    context: BrowserContext, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("who wins?", required=False), session_id)
    url = stack_thread.web([session_id])
    tab_a, tab_b = context.new_page(), context.new_page()
    open_page(tab_a, url)
    open_page(tab_b, url)
    card_a, card_b = card_of(tab_a, ix.interaction_id), card_of(tab_b, ix.interaction_id)
    expect(card_a).to_be_visible(timeout=TIMEOUT_MS)
    expect(card_b).to_be_visible(timeout=TIMEOUT_MS)
    # Hold both answers in the browsers' network layers, then release them together: neither tab can
    # learn of the other's answer first, so the service alone picks the winner.
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    for tab in (tab_a, tab_b):
        tab.route("**/api/interactions/*/answer", hold)
    with tab_a.expect_request("**/answer"):
        card_a.get_by_role("button", name="Decline").click()
    with tab_b.expect_request("**/answer"):
        card_b.get_by_role("button", name="Dismiss").click()
    assert len(held) == 2
    for route in held:
        route.continue_()
    expect(card_a).to_have_count(0, timeout=TIMEOUT_MS)
    expect(card_b).to_have_count(0, timeout=TIMEOUT_MS)
    stored = stack_thread.get(ix.interaction_id)
    assert stored.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    winner, loser = (tab_a, tab_b) if stored.answer.action == form_pb2.ACTION_DECLINE else (tab_b, tab_a)
    expect(winner.locator(".notice.own")).to_have_count(1)
    expect(loser.locator(".notice.own")).to_have_count(0)
    expect(loser.locator(".notice.elsewhere").first).to_have_text(
        re.compile("Already answered on another surface; your answer was not sent.")
    )


def test_server_text_with_markup_is_shown_as_text_and_never_runs(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>'
    form = text_form(payload, claimed_tool='<svg onload="window.__pwned=3">')
    form.fields[0].label = '<i onmouseover="window.__pwned=4">Target</i>'
    form.fields[0].description = "</p><script>window.__pwned=5</script>"
    form.requester.provider_display_name = "<u>Provider</u>"
    ix = stack_thread.open(form, session_id)
    errors = open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    expect(card.locator(".message")).to_have_text(payload, timeout=TIMEOUT_MS)
    expect(card.locator(".claimed-tool")).to_have_text('<svg onload="window.__pwned=3">')
    expect(card.locator(".label-text")).to_have_text('<i onmouseover="window.__pwned=4">Target</i>')
    expect(card.locator(".help")).to_have_text("</p><script>window.__pwned=5</script>")
    expect(card.locator(".provider-name")).to_have_text("<u>Provider</u>")
    card.locator(".label-text").hover()
    assert card.locator("img, script, svg, b, i, u").count() == 0, "no element was made from server text"
    assert page.evaluate("() => window.__pwned") is None
    page.screenshot(path=str(artifacts / "markup-as-text.png"), full_page=True)
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_the_time_left_counts_down(page: Page, stack_thread: WebStackThread, session_id: str) -> None:
    ix = stack_thread.open(text_form("hurry"), session_id, wait_seconds=45)
    open_page(page, stack_thread.web([session_id]))
    timer = card_of(page, ix.interaction_id).locator(".timer")
    expect(timer).to_have_text(re.compile(r"^[34]\ds left$"), timeout=TIMEOUT_MS)
    expect(timer).to_have_class(re.compile(r"\burgent\b"))
    first = timer.text_content()
    expect(timer).not_to_have_text(first or "", timeout=3_000)


def test_with_a_surface_token_the_page_needs_a_login(page: Page, stack_thread: WebStackThread, session_id: str) -> None:
    ix = stack_thread.open(text_form("behind a login"), session_id)
    url = stack_thread.web([session_id], token="browser-t0ken")
    page.goto(url)
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("Surface token").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".login-error")).to_be_visible()
    page.get_by_label("Surface token").fill("browser-t0ken")
    page.get_by_role("button", name="Sign in").click()
    expect(card_of(page, ix.interaction_id)).to_be_visible(timeout=TIMEOUT_MS)
    assert all(c["httpOnly"] and c["sameSite"] == "Strict" for c in page.context.cookies())
    assert page.evaluate("() => document.cookie") == "", "the login cookie is HttpOnly"


def test_a_form_whose_time_runs_out_is_closed_as_timed_out(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("quick"), session_id, wait_seconds=4)
    open_page(page, stack_thread.web([session_id]))
    expect(card_of(page, ix.interaction_id).locator(".timer")).to_have_text(re.compile(r"^\ds left$"))
    expect(card_of(page, ix.interaction_id)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator(".notice.closed").first.locator(".notice-text")).to_have_text("Closed: it timed out.")
    assert stack_thread.get(ix.interaction_id).close_reason == interaction_pb2.CLOSE_REASON_TIMED_OUT


def test_a_long_multi_select_is_filterable_and_keeps_picks_while_filtered(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    options = [form_pb2.Option(value=f"svc-{i}", label=f"Service {i:02d}") for i in range(1, 13)]
    form = form_pb2.Form(
        message="Which services restart?",
        requester=form_pb2.Requester(
            provider_id="p", provider_display_name="P", claimed_server="ops", claimed_tool="restart"
        ),
        fields=[
            form_pb2.Field(
                name="services",
                label="Services",
                required=True,
                multi_select=form_pb2.MultiSelectField(options=options, max_items=3),
            )
        ],
    )
    ix = stack_thread.open(form, session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    checks = field_of(card, "services").locator("label.check")
    expect(checks).to_have_count(12, timeout=TIMEOUT_MS)
    card.get_by_label("Service 02", exact=True).check()
    field_of(card, "services").get_by_role("searchbox").fill("1")
    expect(field_of(card, "services").locator("label.check:visible")).to_have_count(4)  # 01, 10, 11, 12
    card.get_by_label("Service 11", exact=True).check()
    field_of(card, "services").get_by_role("searchbox").fill("")
    expect(field_of(card, "services").locator("label.check:visible")).to_have_count(12)
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    picked = stack_thread.get(ix.interaction_id).answer.values["services"].string_list_value.values
    assert list(picked) == ["svc-2", "svc-11"]


def test_a_select_with_a_thousand_options_filters_as_you_type(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    options = [form_pb2.Option(value=f"Zone/City_{i:04d}", label=f"City {i:04d}") for i in range(1000)]
    form = form_pb2.Form(
        message="Which time zone?",
        requester=form_pb2.Requester(provider_id="p", provider_display_name="P", claimed_server="t", claimed_tool="tz"),
        fields=[
            form_pb2.Field(
                name="tz", label="Time zone", required=True, single_select=form_pb2.SingleSelectField(options=options)
            )
        ],
    )
    ix = stack_thread.open(form, session_id)
    open_page(page, stack_thread.web([session_id]))
    card = card_of(page, ix.interaction_id)
    select = field_of(card, "tz").locator("select")
    expect(select.locator("option")).to_have_count(1001, timeout=TIMEOUT_MS)  # with "Choose…"
    field_of(card, "tz").get_by_role("searchbox").fill("City 0777")
    expect(select.locator("option:not([hidden])")).to_have_count(2)  # "Choose…" and City 0777
    select.select_option("Zone/City_0777")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    assert stack_thread.get(ix.interaction_id).answer.values["tz"].string_value == "Zone/City_0777"
