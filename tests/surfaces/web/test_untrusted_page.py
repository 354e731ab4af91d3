"""The web page in real Chromium with the hostile server's form (:mod:`tests.fixtures.mcp_servers.hostile_server`:
ESC, BEL, C1, bidi and zero-width characters, 60 newlines before fake provenance lines, a long unbroken claimed
server name, an option titled ``""``): the provenance and the secrets warning come before the server's copy and
are in view on first paint, no control character reaches the page's text, long text wraps inside the screen
and an empty option title shows its value (docs/security.md#threats-and-what-stops-them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from maka.form.v1 import form_pb2
from services.core.form import Requester, decode_requested_schema, form_to_proto
from tests.fixtures.mcp_servers.hostile_server import FORBIDDEN, FORM_MESSAGE, FORM_SCHEMA, LONG_WORD, TRICKS
from tests.surfaces.web.stack import WebStackThread

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000


def hostile_form() -> form_pb2.Form:
    form = decode_requested_schema(
        FORM_SCHEMA,
        message=FORM_MESSAGE,
        requester=Requester(
            provider_id="mcp:hostile",
            provider_display_name="MCP server hostile",
            claimed_server=LONG_WORD,
            claimed_tool=f"paint{TRICKS}",
        ),
    )
    return form_to_proto(form)


def test_a_hostile_form_keeps_provenance_and_warning_in_view_and_shows_no_control_character(
    page: Page, stack_thread: WebStackThread, session_id: str, artifacts: Path
) -> None:
    page.set_viewport_size({"width": 800, "height": 600})
    ix = stack_thread.open(hostile_form(), session_id, wait_seconds=300)
    page.goto(stack_thread.web([session_id]))
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    card = page.locator(f'article.card[data-id="{ix.interaction_id}"]')
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    page.screenshot(path=str(artifacts / "untrusted-first-paint.png"))
    # Provenance, then the warning, then the server's message - and the warning is in view on first paint.
    order = card.evaluate(
        "card => [...card.querySelectorAll('.provenance, .warning, .message')].map(node => node.className)"
    )
    assert order == ["provenance", "warning", "message"]
    expect(card.locator(".warning")).to_be_in_viewport()
    expect(card.locator(".provenance")).to_be_in_viewport()
    # No control, C1, bidi or zero-width character in any text of the card; the markers show instead.
    text = card.evaluate("card => card.textContent")
    assert sorted({f"U+{ord(c):04X}" for c in text if c in FORBIDDEN and c != "\n"}) == []
    message = card.locator(".message").text_content() or ""
    assert "\u241b[2J\u241b[H\u241b[42;30m VERIFIED" in message
    assert "\n\n\n" not in message
    # Long unbroken text wraps: nothing is wider than the screen; the timer and Dismiss stay in view.
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    expect(card.locator(".timer")).to_be_in_viewport()
    dismiss = card.locator('button[data-action="cancel"]')
    dismiss.scroll_into_view_if_needed()
    box = dismiss.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= widths[1]
    # A server's default shows its sequences as markers.
    expect(card.locator('.field[data-name="target"] input')).to_have_value(
        "\u241b[2J\u241b[Hstaging\u241b[2J\u241b[H\u241b[42;30m VERIFIED by Maka \u241b[0m"
        "\u2407\ufffd31m\ufffdevil\ufffd\ufffd\ufffd\ufffd"
    )
    # An option titled "" shows its value, never a blank choice.
    region = card.locator('.field[data-name="region"] select')
    assert region.locator("option").all_text_contents()[1:] == [
        "Europe\u241b[2J\u241b[H\u241b[42;30m VERIFIED by Maka \u241b[0m"
        "\u2407\ufffd31m\ufffdevil\ufffd\ufffd\ufffd\ufffd",
        "us",
        LONG_WORD,
    ]
