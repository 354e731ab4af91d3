"""A form's Host id is server-supplied text: every surface following a pool shows it through the one untrusted-text
rule (surfaces/common/untrusted.py; the page's copy, untrusted.js, runs the same cases): the web page's view, the
CLI's ``host=`` column and the TUI's ``· on HOST`` never carry a control, bidi or zero-width character."""

from __future__ import annotations

from dataclasses import replace

from services.core.form import Form, Requester, StringField
from surfaces.cli.commands.pending import _human
from surfaces.common.interactions import InteractionView
from surfaces.tui.app import MakaTui
from surfaces.web.views import interaction_view
from tests.surfaces.helpers import ScriptedBackend, view_of

HOSTILE = "team-a\x1b[2J\u202eevil\u200b"
FORBIDDEN = ("\x1b", "\u202e", "\u200b")
ESC_PICTURE = "\u241b"


def _view() -> InteractionView:
    form = Form(message="Deploy?", fields=(StringField(name="target", label="Target"),), requester=Requester("p"))
    return replace(view_of(form), host_id=HOSTILE)


def test_every_surface_shows_a_hostile_host_id_with_visible_markers_only() -> None:
    view = _view()
    shown = [
        str(interaction_view(view, pooled=True)["host"]),
        _human([view], show_host=True),
        MakaTui(lambda: ScriptedBackend(), show_hosts=True)._item_text(view),
    ]
    for text in shown:
        assert "team-a" in text, text
        assert "evil" in text, text
        assert ESC_PICTURE in text, text
        assert not any(character in text for character in FORBIDDEN), repr(text)


def test_a_single_host_surface_shows_no_host() -> None:
    view = _view()
    assert interaction_view(view)["host"] == ""
    assert "team-a" not in _human([view])
    assert "team-a" not in MakaTui(lambda: ScriptedBackend())._item_text(view)
