"""What one form notification says (docs/operations.md#notifications): allowlisted fields only, every
server- or caller-supplied string cleaned to one line and sent as plain text in every target format.

A form made for a person (``binding.made_for``) is notified with its details withheld: shared channels get its
deadline and the link only, never its Tool, server, session or message (docs/security.md#notifications)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from maka.interaction.v1 import interaction_pb2

MESSAGE_CHARS = 300
"""Most characters of the server's message a notification carries (then ``…``)."""
NAME_CHARS = 120
"""Most characters of a server-supplied name (server, Tool) a notification carries."""
MARKER = "\ufffd"


class EventKind(StrEnum):
    """Why a notification is sent."""

    OPENED = "form_opened"
    EXPIRING = "form_expiring"


def clean_text(text: str, cap: int) -> str:
    """Untrusted server text on one line: C0/C1 controls, line breaks and tabs become spaces; bidi, zero-width and
    other format characters and lone surrogates become ``�`` (the rule of ``surfaces/common/untrusted.py``, one
    line); at most ``cap`` characters (then ``…``)."""
    out: list[str] = []
    for char in text:
        category = unicodedata.category(char)
        if char in "\t\n\r" or category in ("Zl", "Zp"):
            out.append(" ")
        elif category == "Cc":
            out.append(" " if ord(char) < 0x80 else MARKER)
        elif category in ("Cf", "Cs"):
            out.append(MARKER)
        else:
            out.append(char)
    shown = " ".join("".join(out).split())
    return shown if len(shown) <= cap else shown[: cap - 1] + "…"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def form_link(web_public_url: str, interaction_id: str) -> str:
    """The form on the web page (``<public url>/#/interaction/<id>``); empty without a public URL."""
    if not web_public_url:
        return ""
    return f"{web_public_url.rstrip('/')}/#/interaction/{quote(interaction_id, safe='')}"


@dataclass(frozen=True, slots=True)
class Notice:
    """What a notification says: allowlisted fields only, every server-supplied string cleaned."""

    kind: EventKind
    interaction_id: str
    tool: str
    server: str
    host_id: str
    session_id: str
    deadline: str
    link: str
    message: str
    withheld: bool
    """The form is made for a person: only the event, the Host, the deadline and the link are sent."""

    @staticmethod
    def of(kind: EventKind, interaction: interaction_pb2.Interaction, host_id: str, web_public_url: str) -> Notice:
        """The notice of ``interaction`` (reads ids, Tool and server names, the message and the deadline only)."""
        requester = interaction.form.requester
        withheld = bool(interaction.binding.made_for.principal)
        tool = interaction.binding.tool_name or requester.claimed_tool
        server = requester.claimed_server or requester.provider_display_name or requester.provider_id
        return Notice(
            kind=kind,
            interaction_id="" if withheld else interaction.interaction_id,
            tool="" if withheld else clean_text(tool, NAME_CHARS),
            server="" if withheld else clean_text(server, NAME_CHARS),
            host_id=host_id,
            session_id="" if withheld else clean_text(interaction.binding.session_id, NAME_CHARS),
            deadline=_iso(interaction.expires_at.ToMilliseconds()),
            link=form_link(web_public_url, interaction.interaction_id),
            message="" if withheld else clean_text(interaction.form.message, MESSAGE_CHARS),
            withheld=withheld,
        )

    def webhook_json(self) -> dict[str, Any]:
        """The generic webhook body (withheld details are ``null``)."""
        shown = None if self.withheld else self
        return {
            "event": self.kind.value,
            "interactionId": shown and shown.interaction_id,
            "tool": shown and shown.tool,
            "server": shown and shown.server,
            "host": self.host_id,
            "session": shown and shown.session_id,
            "deadline": self.deadline,
            "link": self.link or None,
            "message": shown and shown.message,
            "withheld": self.withheld,
        }

    def slack_json(self) -> dict[str, Any]:
        """A Slack incoming-webhook body: ``text`` (the fallback) and ``blocks``, every supplied string in a
        ``plain_text`` object (Slack parses no mention, link or markup in it); the fallback names no supplied
        string."""
        what = "A form waits" if self.kind is EventKind.OPENED else "A form expires soon"
        if self.withheld:
            headline = f"{what} for a person (Host {self.host_id}), answer by {self.deadline}"
        else:
            server = f" on {self.server}" if self.server else ""
            headline = f"{what}: {self.tool or 'a Tool'}{server} (Host {self.host_id}), answer by {self.deadline}"
        fallback = f"{what}, answer by {self.deadline}"
        text = f"{fallback}: {self.link}" if self.link else fallback
        blocks: list[dict[str, Any]] = [{"type": "section", "text": _plain(headline)}]
        if self.message:
            blocks.append({"type": "section", "text": _plain(self.message)})
        if not self.withheld:
            context = f"session {self.session_id} · {self.interaction_id}"
            blocks.append({"type": "context", "elements": [_plain(context)]})
        if self.link:
            button = {"type": "button", "text": _plain("Open the form"), "url": self.link}
            blocks.append({"type": "actions", "elements": [button]})
        return {"text": text, "blocks": blocks}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}
