"""One rule for form answers and schemas in every surface: the CLI, the TUI and the web page, against the
authority (docs/acceptance.md#protocol-and-form-correctness).

One real stack (:class:`tests.surfaces.fixture_server_stack.FixtureServerStack`) asks the low-level SDK fixture
server's ``ask_schema`` Tool for each schema, and the test reads the ``content`` the server received on the retry
from its wire:

- defaults are pre-filled and sent as left; a field the user clears is sent cleared, never refilled;
- a required yes/no question without a default needs an explicit choice; an optional one is left out;
- ``[]`` answers a required multi-select without ``minItems``; an internal-domain email is a valid address;
- wide bounds, an invalid default (dropped) and harmless root annotations still publish the form, and an
  unsupported ``$schema`` dialect fails ``INVALID_FORM`` before any form or retry;
- the web page keeps any field name, exact integers and an untouched ``date-time`` default.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from textual.widgets import Button, Input

from maka.broker.v1 import broker_pb2
from surfaces.common.interactions import Interactions
from surfaces.tui.app import MakaTui
from tests.helpers.stack import call_tool
from tests.helpers.tui import settle
from tests.surfaces.acceptance_stack import TIMEOUT_MS, first_pending, run_maka
from tests.surfaces.fixture_server_stack import FixtureServerStack

# --- the CLI and the authority -------------------------------------------------------------------------


def _ask(fx_stack: FixtureServerStack, tag: str, schema: dict[str, Any], session: str) -> Any:
    """Start ``fx:ask_schema`` with ``schema`` on the stack's loop; the future gives every CallTool event."""
    return fx_stack.submit(
        call_tool(fx_stack.endpoints.broker, "fx:ask_schema", {"tag": tag, "schema": schema}, session=session)
    )


def _content(fx_stack: FixtureServerStack, tag: str) -> dict[str, Any]:
    """The ``content`` the server received on the retry of ``ask_schema`` call ``tag`` (exactly two legs)."""
    first, retry = fx_stack.fx.tool_calls("ask_schema", where={"tag": tag})
    assert "inputResponses" not in first["params"]
    response = retry["params"]["inputResponses"]["form"]
    assert response["action"] == "accept"
    content: dict[str, Any] = response.get("content", {})
    return content


CLEARABLE = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "default": "Routine deploy"},
        "count": {"type": "integer", "default": 2},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["a"]},
        "region": {"type": "string", "enum": ["eu", "us"], "default": "eu"},
    },
}
"""Optional fields with defaults (a cleared field is sent cleared, never refilled)."""

BOOLEANS = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Proceed"}, "opt": {"type": "boolean", "title": "Notify"}},
    "required": ["ok"],
}
"""A required and an optional boolean without default (the one boolean rule)."""

PICKS = {
    "type": "object",
    "properties": {"picks": {"type": "array", "title": "Picks", "items": {"type": "string", "enum": ["a", "b"]}}},
    "required": ["picks"],
}
"""A required multi select without minItems (``[]`` is an answer everywhere)."""

INTERNAL_EMAIL = {
    "type": "object",
    "properties": {"mail": {"type": "string", "format": "email", "title": "Mail", "default": "ops@corp.local"}},
    "required": ["mail"],
}
"""An internal-domain email default (email is checked for syntax only)."""

REASONABLE = {
    "$id": "https://example.com/forms/wide",
    "$comment": "harmless root annotations",
    "examples": [{"n": 1}],
    "type": "object",
    "properties": {
        "n": {"type": "integer", "title": "N", "minimum": 0, "maximum": 9223372036854775807},
        "name": {"type": "string", "title": "Name", "minLength": 1, "default": ""},
    },
    "required": ["n", "name"],
}
"""Wide bounds, an invalid default (dropped, the form still published), root annotations."""

WEB_EXACT = {
    "type": "object",
    "properties": {
        "__proto__": {"type": "string", "title": "Proto"},
        "big": {"type": "integer", "title": "Big"},
        "when": {"type": "string", "format": "date-time", "title": "When", "default": "2026-12-24T08:30:00.123+02:00"},
    },
    "required": ["__proto__", "big"],
}
"""Any field name, exact integers, an untouched date-time default kept verbatim (the web page)."""


@pytest.mark.e2e
async def test_cli_a_field_given_as_null_is_cleared_and_untouched_defaults_are_sent(
    fx_stack: FixtureServerStack,
) -> None:
    session, tag, state = "cli-clear", "cli-clear", str(fx_stack.state_dir)
    call = asyncio.create_task(_events(fx_stack, tag, CLEARABLE, session))
    form_id = await first_pending(fx_stack, session)
    values = json.dumps({"note": None, "count": None, "tags": []})
    code, out, err = await run_maka(
        "answer", form_id, "accept", "--values", values, "--session", session, "--state-dir", state
    )
    assert code == 0, (out, err)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == {"tags": [], "region": "eu"}


@pytest.mark.e2e
async def test_cli_one_boolean_rule_a_required_boolean_must_be_given_and_an_optional_one_is_omitted(
    fx_stack: FixtureServerStack,
) -> None:
    session, tag, state = "cli-bool", "cli-bool", str(fx_stack.state_dir)
    call = asyncio.create_task(_events(fx_stack, tag, BOOLEANS, session))
    form_id = await first_pending(fx_stack, session)
    argv = ["answer", form_id, "accept", "--session", session, "--state-dir", state]
    code, out, err = await run_maka(*argv, "--values", "{}")
    assert code == 3, (out, err)
    assert err.startswith("INVALID_ANSWER")
    assert "/ok" in err
    code, out, err = await run_maka(*argv, "--values", json.dumps({"ok": False}))
    assert code == 0, (out, err)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == {"ok": False}


@pytest.mark.e2e
@pytest.mark.parametrize(("tag", "values"), [("cli-picks", {"picks": []}), ("cli-mail", {"mail": "a@localhost"})])
async def test_cli_an_empty_required_multi_select_and_an_internal_email_are_accepted(
    fx_stack: FixtureServerStack, tag: str, values: dict[str, Any]
) -> None:
    schema = PICKS if "picks" in values else INTERNAL_EMAIL
    call = asyncio.create_task(_events(fx_stack, tag, schema, tag))
    form_id = await first_pending(fx_stack, tag)
    argv = ["answer", form_id, "accept", "--values", json.dumps(values), "--session", tag]
    code, out, err = await run_maka(*argv, "--state-dir", str(fx_stack.state_dir))
    assert code == 0, (out, err)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == values


@pytest.mark.e2e
async def test_reasonable_schemas_are_published_with_an_invalid_default_dropped(fx_stack: FixtureServerStack) -> None:
    session, tag, state = "wide", "wide", str(fx_stack.state_dir)
    call = asyncio.create_task(_events(fx_stack, tag, REASONABLE, session))
    form_id = await first_pending(fx_stack, session)
    code, out, err = await run_maka("pending", "--session", session, "--json", "--state-dir", state)
    assert code == 0, err
    [listed] = json.loads(out)
    fields = {f["name"]: f for f in listed["fields"]}
    assert fields["name"]["default"] is None  # "" breaks minLength 1: dropped, the field still asked
    assert fields["n"]["constraints"]["maximum"] == 2.0**63  # the nearest double; the server's schema is exact
    argv = ["answer", form_id, "accept", "--values", json.dumps({"n": 2**53, "name": "Ada"}), "--session", session]
    code, out, err = await run_maka(*argv, "--state-dir", state)
    assert code == 0, (out, err)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == {"n": 2**53, "name": "Ada"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "dialect",
    ["http://json-schema.org/draft-04/schema#", "https://example.com/not-a-dialect"],
    ids=["draft-04", "custom"],
)
async def test_an_unsupported_schema_dialect_fails_invalid_form_before_any_form_or_retry(
    fx_stack: FixtureServerStack, dialect: str
) -> None:
    tag = f"dialect-{dialect[-9:]}"
    schema = {"$schema": dialect, "type": "object", "properties": {"s": {"type": "string"}}}
    events = await _events(fx_stack, tag, schema, tag)
    assert events[-1].HasField("failure"), events[-1]
    assert events[-1].failure.code == broker_pb2.FAILURE_CODE_INVALID_FORM
    assert not [e for e in events if e.HasField("awaiting_interaction")]
    assert len(fx_stack.fx.tool_calls("ask_schema", where={"tag": tag})) == 1


async def _events(fx_stack: FixtureServerStack, tag: str, schema: dict[str, Any], session: str) -> list[Any]:
    return await call_tool(fx_stack.endpoints.broker, "fx:ask_schema", {"tag": tag, "schema": schema}, session=session)


@pytest.mark.e2e
async def test_tui_cleared_defaults_stay_cleared_and_an_empty_required_multi_select_is_sent(
    fx_stack: FixtureServerStack,
) -> None:
    interaction = fx_stack.endpoints.interaction
    schema = {
        "type": "object",
        "properties": {**CLEARABLE["properties"], **PICKS["properties"]},  # type: ignore[dict-item]
        "required": ["picks"],
    }
    session = tag = "tui-clear"
    call = asyncio.create_task(_events(fx_stack, tag, schema, session))
    form_id = await first_pending(fx_stack, session)
    app = MakaTui(lambda: Interactions.connect(interaction), session_ids=[session])
    async with app.run_test(size=(140, 70)) as pilot:
        await settle(pilot, lambda: app.selected_id == form_id, "the form", timeout=30)
        app.query_one("#field-0", Input).value = ""  # note: cleared
        await pilot.pause()
        await pilot.click("#submit")
        await settle(pilot, lambda: form_id not in app.pending, "the answered form to leave", timeout=30)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == {"count": 2, "tags": ["a"], "region": "eu", "picks": []}


@pytest.mark.e2e
async def test_tui_a_required_boolean_without_default_needs_a_choice(fx_stack: FixtureServerStack) -> None:
    interaction = fx_stack.endpoints.interaction
    session = tag = "tui-bool"
    call = asyncio.create_task(_events(fx_stack, tag, BOOLEANS, session))
    form_id = await first_pending(fx_stack, session)
    app = MakaTui(lambda: Interactions.connect(interaction), session_ids=[session])
    async with app.run_test(size=(140, 60)) as pilot:
        await settle(pilot, lambda: app.selected_id == form_id, "the form", timeout=30)
        assert app.query_one("#submit", Button).disabled  # nothing chosen for the required boolean
        app.action_submit_form()
        await settle(pilot, lambda: app.field_error(0) == "required", "required on the boolean", timeout=30)
        assert app.field_error(1) == ""  # the optional one may stay unset
        assert form_id in app.pending
        await pilot.click("#field-0-no")
        await pilot.pause()
        await pilot.click("#submit")
        await settle(pilot, lambda: form_id not in app.pending, "the answered form to leave", timeout=30)
    assert (await asyncio.wait_for(call, 90))[-1].HasField("result")
    assert _content(fx_stack, tag) == {"ok": False}


# --- web page -------------------------------------------------------------------------------------------


def _web_card(page: Page, fx_stack: FixtureServerStack, tag: str, schema: dict[str, Any]) -> tuple[Any, Any]:
    future = _ask(fx_stack, tag, schema, tag)
    form_id = fx_stack.run(first_pending(fx_stack, tag))
    page.goto(fx_stack.endpoints.web)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    card = page.locator(f'article.card[data-id="{form_id}"]')
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    return future, card


def _submitted(card: Any, future: Any) -> None:
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    events = future.result(90)
    assert events[-1].HasField("result"), events[-1]


def _field(card: Any, name: str) -> Any:
    return card.locator(f'.field[data-name="{name}"]')


@pytest.mark.browser
def test_web_cleared_defaults_are_sent_cleared_never_refilled(page: Page, fx_stack: FixtureServerStack) -> None:
    future, card = _web_card(page, fx_stack, "web-clear", CLEARABLE)
    _field(card, "note").locator("input").fill("")
    _field(card, "count").locator("input").fill("")
    _field(card, "tags").get_by_label("a", exact=True).uncheck()
    _field(card, "region").locator("select").select_option("")
    _submitted(card, future)
    assert _content(fx_stack, "web-clear") == {"tags": []}


@pytest.mark.browser
def test_web_one_boolean_rule_required_needs_a_choice_optional_is_omitted(
    page: Page, fx_stack: FixtureServerStack
) -> None:
    future, card = _web_card(page, fx_stack, "web-bool", BOOLEANS)
    card.get_by_role("button", name="Submit").click()
    expect(_field(card, "ok").locator(".field-error")).to_have_text("Required")
    expect(_field(card, "opt").locator(".field-error")).to_be_hidden()
    _field(card, "ok").get_by_role("radio", name="No").check()
    _submitted(card, future)
    assert _content(fx_stack, "web-bool") == {"ok": False}


@pytest.mark.browser
def test_web_an_empty_required_multi_select_and_an_internal_email_default_are_sent(
    page: Page, fx_stack: FixtureServerStack
) -> None:
    future, card = _web_card(page, fx_stack, "web-picks", PICKS)
    _submitted(card, future)
    assert _content(fx_stack, "web-picks") == {"picks": []}
    future, card = _web_card(page, fx_stack, "web-mail", INTERNAL_EMAIL)
    expect(_field(card, "mail").locator("input")).to_have_value("ops@corp.local")
    _submitted(card, future)
    assert _content(fx_stack, "web-mail") == {"mail": "ops@corp.local"}


@pytest.mark.browser
def test_web_keeps_any_field_name_exact_integers_and_an_untouched_date_time_default(
    page: Page, fx_stack: FixtureServerStack
) -> None:
    future, card = _web_card(page, fx_stack, "web-exact", WEB_EXACT)
    _field(card, "__proto__").locator("input").fill("kept")
    big = _field(card, "big").locator("input")
    for bad in ("9007199254740993", "0x10", "1e3"):
        big.fill(bad)
        card.get_by_role("button", name="Submit").click()
        expect(_field(card, "big").locator(".field-error")).not_to_be_empty()
    big.fill("9007199254740991")
    _submitted(card, future)
    assert _content(fx_stack, "web-exact") == {
        "__proto__": "kept",
        "big": 9007199254740991,
        "when": "2026-12-24T08:30:00.123+02:00",
    }
