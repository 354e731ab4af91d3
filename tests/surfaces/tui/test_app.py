"""surfaces.tui.app.MakaTui driven by Textual's pilot over a scripted feed (rendering, editing, actions)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from textual.pilot import Pilot
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Select, SelectionList, Static

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2
from maka_client import AttachedSurface, InteractionErrorReason, MakaError, Reattaching, ReattachPolicy
from services.core.form import (
    Action,
    Answer,
    BooleanField,
    Form,
    MultiSelectField,
    NumberField,
    Option,
    Requester,
    SingleSelectField,
    StringField,
    StringFormat,
)
from stack.state_dir import Endpoints, read_endpoints, write_endpoints
from surfaces.common.interactions import (
    CloseReason,
    Delivery,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormOpened,
    FormSnapshot,
    Interactions,
    InteractionState,
)
from surfaces.common.server_status import server_json
from surfaces.common.sign_in import SignInView
from surfaces.tui.app import MakaTui
from surfaces.tui.backend import FollowingBackend
from surfaces.tui.widgets import WARNING_TEXT
from tests.helpers.tui import settle
from tests.surfaces.helpers import (
    BrokerLink,
    ScriptedBackend,
    deploy_form,
    free_port,
    interaction_service,
    screen_text,
    view_of,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ENVS = (Option("prod", "Production"), Option("stage", "Staging"), Option("dev", "Development"))
REQUESTER = Requester(
    provider_id="mcp-provider-1",
    provider_display_name="Maka MCP provider",
    claimed_server="deployer",
    claimed_tool="deploy",
)


def every_kind_form() -> Form:
    return Form(
        message="Deploy [bold red]now[/]? \x1b[31m\u202eall",
        requester=REQUESTER,
        fields=(
            StringField(name="note", label="Note", description="Why [i]deploy[/i]", max_length=20),
            StringField(name="email", label="Owner email", format=StringFormat.EMAIL, required=True, default="a@b.co"),
            NumberField(name="replicas", label="Replicas", integer=True, minimum=1, maximum=10, default=2),
            NumberField(name="ratio", label="Canary ratio", minimum=0, maximum=1),
            BooleanField(name="dry_run", label="Dry run", default=True),
            SingleSelectField(name="env", label="Environment", options=ENVS, required=True, default="stage"),
            MultiSelectField(name="regions", label="Regions", options=ENVS, min_items=1, max_items=2),
            StringField(name="day", label="Day", format=StringFormat.DATE),
            StringField(name="at", label="At", format=StringFormat.DATE_TIME),
        ),
    )


@asynccontextmanager
async def running(
    backend: ScriptedBackend, *, now: Callable[[], datetime] = lambda: NOW, sessions: tuple[str, ...] = ()
) -> AsyncIterator[tuple[MakaTui, Pilot[None]]]:
    app = MakaTui(lambda: backend, session_ids=sessions, now=now)
    async with app.run_test(size=(140, 90)) as pilot:
        yield app, pilot


async def test_form_shows_provenance_warning_and_untrusted_message_as_plain_text() -> None:
    backend = ScriptedBackend()
    view = view_of(every_kind_form(), expires_at=NOW + timedelta(minutes=4, seconds=5))
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(view,), resume_token="1-0"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form to be shown")
        text = screen_text(app)
        assert "Requested by provider: Maka MCP provider (mcp-provider-1)" in text
        assert "Claimed MCP server: deployer · claimed Tool: deploy (claimed by the server — display only)" in text
        assert WARNING_TEXT in text
        # Markup not interpreted; the escape and the bidi override shown as markers, never sent to the terminal.
        assert "Deploy [bold red]now[/]? \u241b[31m\ufffdall" in text
        assert "Why [i]deploy[/i]" in text
        assert "4m 05s left" in text
        assert app.attach_state == "connected"


async def test_every_field_kind_gets_its_widget_with_defaults_prefilled() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(view_of(every_kind_form()),), resume_token="1-0"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form to be shown")
        assert app.query_one("#field-0", Input).value == ""
        assert app.query_one("#field-1", Input).value == "a@b.co"
        assert app.query_one("#field-1", Input).placeholder == "name@example.com"
        assert app.query_one("#field-2", Input).value == "2"
        assert app.query_one("#field-3", Input).value == ""
        assert app.query_one("#field-4", RadioSet).pressed_index == 0
        assert app.query_one("#field-5", Select).value == "stage"
        assert app.query_one("#field-6", SelectionList).selected == []
        assert app.query_one("#field-7", Input).placeholder == "YYYY-MM-DD"
        assert app.query_one("#field-8", Input).placeholder.startswith("YYYY-MM-DDTHH:MM:SS")
        text = screen_text(app)
        assert "Owner email *  (Email address)" in text
        assert "Replicas  (Whole number between 1 and 10)" in text
        assert "Canary ratio  (Number between 0 and 1)" in text
        assert "Dry run  (Yes or no)" in text
        assert "Environment *  (Choose one)" in text
        assert "Regions  (Pick 1 to 2)" in text
        assert "Note  (Text, at most 20 characters)" in text
        assert "Day  (Date (YYYY-MM-DD))" in text
        assert "_select" not in text  # no internal kind names
        assert "integer" not in text
        assert "Staging" in text  # the single select shows the label of its value


async def test_submit_sends_accept_with_typed_values_after_edits() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1-0"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form to be shown")
        await pilot.click("#field-0")
        await pilot.press(*"rollout")
        app.query_one("#field-2", Input).value = "5"
        app.query_one("#field-3", Input).value = "0.25"
        await pilot.click("#field-4-no")
        app.query_one("#field-5", Select).value = "prod"
        app.query_one("#field-6", SelectionList).select("dev")
        app.query_one("#field-7", Input).value = "2026-12-01"
        app.query_one("#field-8", Input).value = "2026-12-01T10:00:00Z"
        await pilot.pause()
        assert not app.query_one("#submit", Button).disabled
        await pilot.click("#submit")
        await settle(pilot, lambda: backend.answers, "the answer to be sent")
        interaction_id, answer, submission_id, session_id = backend.answers[0]
        assert (interaction_id, session_id) == ("ix-1", "s1")
        assert submission_id
        assert answer.action is Action.ACCEPT
        assert answer.values == {
            "note": "rollout",
            "email": "a@b.co",
            "replicas": 5,
            "ratio": 0.25,
            "dry_run": False,
            "env": "prod",
            "regions": ("dev",),
            "day": "2026-12-01",
            "at": "2026-12-01T10:00:00Z",
        }
        await settle(pilot, lambda: "ix-1" not in app.pending, "the answered form to leave")
        assert "Submitted (accept) — sent to the server" in screen_text(app)


async def test_invalid_input_is_shown_inline_and_blocks_submit_until_fixed() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1-0"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form to be shown")
        app.query_one("#field-2", Input).value = "2.5"
        app.query_one("#field-7", Input).value = "2026-02-30"
        await pilot.pause()
        assert "whole number" in app.field_error(2)
        assert "calendar" in app.field_error(7)
        assert app.query_one("#submit", Button).disabled
        assert app.query_one("#field-2", Input).has_class("-invalid")
        app.action_submit_form()
        await pilot.pause()
        assert backend.answers == []
        assert "whole number" in screen_text(app)
        app.query_one("#field-2", Input).value = "11"
        await pilot.pause()
        assert "at most 10" in app.field_error(2) or "10" in app.field_error(2)
        app.query_one("#field-2", Input).value = "3"
        app.query_one("#field-7", Input).value = "2026-02-28"
        app.query_one("#field-6", SelectionList).select("prod")
        await pilot.pause()
        assert app.field_error(2) == ""
        assert not app.query_one("#submit", Button).disabled


async def test_required_field_cleared_shows_required_only_after_submit_attempt() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1-0"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form to be shown")
        app.query_one("#field-1", Input).value = ""
        app.query_one("#field-6", SelectionList).select("prod")
        await pilot.pause()
        assert app.field_error(1) == ""
        assert app.query_one("#submit", Button).disabled
        app.action_submit_form()
        await pilot.pause()
        assert app.field_error(1) == "required"
        assert backend.answers == []


async def test_decline_and_escape_send_decline_and_cancel_without_values() -> None:
    backend = ScriptedBackend()
    form = every_kind_form()
    async with running(backend) as (app, pilot):
        await backend.events.put(
            FormSnapshot(
                pending=(view_of(form, interaction_id="a"), view_of(form, interaction_id="b")), resume_token="1"
            )
        )
        await settle(pilot, lambda: len(app.pending) == 2, "two forms")
        assert app.selected_id == "a"
        await pilot.click("#decline")
        await settle(pilot, lambda: app.selected_id == "b", "the next form to be selected")
        text = screen_text(app)
        assert "Declined (decline) — sent to the server" in text
        assert "Connected · all visible sessions · 1 pending" in text  # the count follows our own answers
        await pilot.press("escape")
        await settle(pilot, lambda: len(backend.answers) == 2, "both answers")
        assert [(i, a.action, a.values) for i, a, _, _ in backend.answers] == [
            ("a", Action.DECLINE, {}),
            ("b", Action.CANCEL, {}),
        ]
        await settle(pilot, lambda: not app.pending, "both forms to leave")
        assert [o.action for o in app.outcomes] == [Action.DECLINE, Action.CANCEL]
        text = screen_text(app)
        assert "Dismissed (cancel) — sent to the server" in text
        assert "was recorded" not in text


async def test_several_forms_are_listed_and_each_is_reachable() -> None:
    backend = ScriptedBackend()
    first = view_of(Form(message="first round", fields=()), interaction_id="a", session_id="s1")
    second = view_of(
        Form(message="second session", fields=(StringField(name="x", label="X"),)),
        interaction_id="b",
        session_id="s2",
        tool_name="other:tool",
    )
    async with running(backend, sessions=("s1", "s2")) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(first,), resume_token="1"))
        await backend.events.put(FormOpened(second, "2"))
        await settle(pilot, lambda: len(app.pending) == 2, "two forms")
        assert backend.attached == [("s1", "s2")]
        text = screen_text(app)
        assert "s1 · deployer:deploy" in text
        assert "s2 · other:tool" in text
        assert "first round" in text
        await pilot.click("#item-b")
        await settle(pilot, lambda: app.selected_id == "b", "the second form to be selected")
        assert "second session" in screen_text(app)
        app.query_one("#field-0", Input).value = "kept"
        await pilot.click("#item-a")
        await settle(pilot, lambda: app.selected_id == "a", "the first form to be selected")
        await pilot.click("#item-b")
        await settle(pilot, lambda: app.selected_id == "b", "the second form again")
        assert app.query_one("#field-0", Input).value == "kept"  # edits survive switching forms


async def test_an_answer_recorded_lost_is_shown_as_never_reaching_the_tool() -> None:
    backend = ScriptedBackend()
    a = view_of(every_kind_form(), interaction_id="a")
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(a,), resume_token="1"))
        await settle(pilot, lambda: len(app.pending) == 1, "one form")
        answered = replace(a, state=InteractionState.ANSWERED, close_reason=CloseReason.ANSWERED)
        await backend.events.put(FormAnswered(answered, "2"))
        await settle(pilot, lambda: not app.pending, "the answered form to leave")
        delivered = replace(answered, delivery=Delivery.DELIVERED)
        await backend.events.put(FormDeliveryRecorded(delivered, "3"))
        lost = replace(answered, delivery=Delivery.LOST, delivery_lost_reason=CloseReason.STOPPED)
        await backend.events.put(FormDeliveryRecorded(lost, "4"))
        await settle(pilot, lambda: "never reached the Tool" in screen_text(app), "the lost-answer notice")
        text = screen_text(app)
        assert "the Tool call was stopped first" in text
        assert text.count("never reached the Tool") == 1  # a delivered answer adds no notice


async def test_form_closed_elsewhere_disappears_with_its_reason() -> None:
    backend = ScriptedBackend()
    form = every_kind_form()
    a, b = view_of(form, interaction_id="a"), view_of(form, interaction_id="b")
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(a, b), resume_token="1"))
        await settle(pilot, lambda: len(app.pending) == 2, "two forms")
        closed = replace(a, state=InteractionState.CLOSED, close_reason=CloseReason.STOPPED)
        await backend.events.put(FormClosed(closed, CloseReason.STOPPED, "2"))
        await settle(pilot, lambda: "a" not in app.pending, "the stopped form to leave")
        assert app.closed["a"] is CloseReason.STOPPED
        assert "closed: the Tool call was stopped" in screen_text(app)
        assert app.selected_id == "b"
        answered = replace(b, state=InteractionState.ANSWERED, close_reason=CloseReason.ANSWERED)
        await backend.events.put(FormAnswered(answered, "3"))
        await settle(pilot, lambda: not app.pending, "the answered form to leave")
        text = screen_text(app)
        assert "closed: answered on another surface" in text
        assert "No pending forms." in text
        assert backend.answers == []


async def test_answer_refused_as_already_settled_removes_the_form() -> None:
    backend = ScriptedBackend(
        answer_error=MakaError(
            grpc.StatusCode.ABORTED, "already answered", reason=InteractionErrorReason.ALREADY_SETTLED
        )
    )
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(Form(message="m", fields=())), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        await pilot.click("#decline")
        await settle(pilot, lambda: not app.pending, "the settled form to leave")
        assert app.outcomes[0].reason == InteractionErrorReason.ALREADY_SETTLED
        assert "ALREADY_SETTLED" in screen_text(app)


async def test_disconnect_shows_reconnecting_and_a_new_snapshot_restores_the_list() -> None:
    backend = ScriptedBackend()
    view = view_of(Form(message="survives", fields=()))
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(view,), resume_token="1"))
        await settle(pilot, lambda: app.attach_state == "connected", "connected")
        await backend.events.put(Reattaching("UNAVAILABLE", 1, 0.4))
        await settle(pilot, lambda: app.attach_state == "reconnecting", "reconnecting")
        assert "reconnecting in 0.4s (attempt 1)" in screen_text(app)
        assert "ix-1" in app.pending  # the form stays listed while reconnecting
        backend.known["ix-1"] = replace(view, state=InteractionState.CLOSED, close_reason=CloseReason.HOST_RESTARTED)
        await backend.events.put(FormSnapshot(pending=(), resume_token="2"))
        await settle(pilot, lambda: app.attach_state == "connected" and not app.pending, "the fresh snapshot")
        await settle(pilot, lambda: "closed: the Host restarted" in screen_text(app), "the reason to be looked up")
        assert app.closed["ix-1"] is CloseReason.HOST_RESTARTED


async def test_attach_refused_shows_the_stable_reason() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(
            MakaError(grpc.StatusCode.PERMISSION_DENIED, "not yours", reason=InteractionErrorReason.PERMISSION_DENIED)
        )
        await settle(pilot, lambda: app.attach_state == "failed: PERMISSION_DENIED", "the failure")
        assert "Cannot attach: PERMISSION_DENIED" in screen_text(app)


async def test_long_option_lists_are_filterable_and_keep_picks() -> None:
    options = tuple(Option(f"v{i}", f"Region {i:02d}") for i in range(30))
    form = Form(
        message="pick",
        fields=(
            MultiSelectField(name="r", label="Regions", options=options),
            SingleSelectField(name="one", label="One", options=options),
        ),
    )
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        selection = app.query_one("#field-0", SelectionList)
        selection.select("v3")
        await pilot.pause()
        app.query_one("#filter-0", Input).value = "region 2"
        await pilot.pause()
        assert [selection.get_option_at_index(i).value for i in range(selection.option_count)] == [
            f"v{i}" for i in range(20, 30)
        ]
        selection.select("v21")
        await pilot.pause()
        app.query_one("#filter-1", Input).value = "07"
        await pilot.pause()
        app.query_one("#field-1", Select).value = "v7"
        await pilot.pause()
        app.action_submit_form()
        await settle(pilot, lambda: backend.answers, "the answer")
        assert backend.answers[0][1].values == {"r": ("v3", "v21"), "one": "v7"}


async def test_wide_and_right_to_left_text_is_laid_out_whole() -> None:
    form = Form(
        message="部署先を選んでください — בחר יעד",
        requester=REQUESTER,
        fields=(SingleSelectField(name="env", label="環境 סביבה", options=(Option("prod", "本番 ייצור"),)),),
    )
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        text = screen_text(app)
        assert "部署先を選んでください — בחר יעד" in text
        assert "環境 סביבה" in text


async def test_time_left_counts_down_with_the_clock() -> None:
    clock = [NOW]
    backend = ScriptedBackend()
    view = view_of(Form(message="m", fields=()), expires_at=NOW + timedelta(seconds=90))
    async with running(backend, now=lambda: clock[0]) as (app, pilot):
        await backend.events.put(FormOpened(view, "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        assert "1m 30s left" in screen_text(app)
        clock[0] = NOW + timedelta(seconds=80)
        await settle(pilot, lambda: "10s left" in screen_text(app), "the countdown to tick")


async def test_boolean_without_default_is_omitted_until_chosen() -> None:
    form = Form(message="m", fields=(BooleanField(name="ok", label="OK"),))
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        assert app.query_one("#field-0", RadioSet).pressed_index == -1
        assert not app.query_one("#field-0-yes", RadioButton).value
        await pilot.click("#submit")
        await settle(pilot, lambda: backend.answers, "the answer")
        assert backend.answers[0][1].values == {}


async def test_untrusted_labels_and_options_are_shown_literally_never_as_markup() -> None:
    options = (Option("a", "[b]bold[/b] [red]x"), Option("b", "[link=https://evil.example]click"))
    form = Form(
        message="m",
        fields=(
            SingleSelectField(name="one", label="[blink]One[/blink]", options=options, default="a"),
            MultiSelectField(name="many", label="Many", description="[u]help[/u]", options=options),
        ),
    )
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        text = screen_text(app)
        assert "[blink]One[/blink]" in text
        assert "[b]bold[/b] [red]x" in text  # the single select's current choice
        assert "[link=https://evil.example]click" in text  # a multi-select row
        assert "[u]help[/u]" in text


async def test_unavailable_keeps_the_form_and_the_retry_reuses_the_submission_id() -> None:
    backend = ScriptedBackend(
        answer_error=MakaError(
            grpc.StatusCode.UNAVAILABLE, "try again", reason=InteractionErrorReason.STORE_UNAVAILABLE
        )
    )
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(Form(message="m", fields=())), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        await pilot.click("#decline")
        await settle(pilot, lambda: len(app.outcomes) == 1, "the failed attempt")
        assert "ix-1" in app.pending
        assert "Not accepted (STORE_UNAVAILABLE)" in screen_text(app)
        backend.answer_error = None
        await pilot.press("ctrl+d")  # the Decline key binding (independent of the re-laid-out buttons)
        await settle(pilot, lambda: not app.pending, "the retried answer")
        assert backend.answers[0][2] == backend.answers[1][2]  # same submission id: at most one commit


async def test_the_focused_field_and_button_are_marked_beyond_colour() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        app.set_focus(app.query_one("#field-1", Input))
        await settle(pilot, lambda: str(app.query_one("#label-1", Label).content).startswith("▶ "), "the marker")
        assert not str(app.query_one("#label-2", Label).content).startswith("▶")
        assert app.query_one("#field-1", Input).styles.border_top[0] == "heavy"
        assert "▶ Owner email *  (Email address)" in screen_text(app)
        app.set_focus(app.query_one("#field-6", SelectionList))  # focus inside a multi-select moves the marker
        await settle(pilot, lambda: str(app.query_one("#label-6", Label).content).startswith("▶ "), "it to move")
        assert not str(app.query_one("#label-1", Label).content).startswith("▶")
        app.set_focus(app.query_one("#decline", Button))
        await settle(pilot, lambda: str(app.query_one("#decline", Button).label) == "▶ Decline", "the button marker")
        assert str(app.query_one("#submit", Button).label) == "Submit"
        assert not any(str(label.content).startswith("▶") for label in app.query(".field-label").results(Label))
        item = app.query_one("#" + app.item_id("ix-1"))
        assert item.styles.border_left[0] == "solid"  # the selected entry, list not focused
        app.set_focus(app.query_one("#pending"))
        await settle(pilot, lambda: item.styles.border_left[0] == "thick", "the list's focus marker")


async def test_every_field_and_button_is_reachable_by_keyboard_in_a_small_terminal() -> None:
    backend = ScriptedBackend()
    app = MakaTui(lambda: backend, now=lambda: NOW)
    async with app.run_test(size=(100, 30)) as pilot:
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        assert "Dismiss (Esc)" not in screen_text(app)  # below the fold at first
        focused: list[str | None] = []
        for _ in range(12):  # Tab walks every field, then the enabled buttons, then the list
            await pilot.press("tab")
            await settle(pilot, lambda: app.focused is not None, "focus")
            focused.append(app.focused.id if app.focused is not None else None)
            if focused[-1] == "dismiss":
                break
        # The optional multi select without default is left out while untouched, so the form is valid and
        # Submit is enabled (a focus stop) from the start.
        assert focused[-4:] == ["field-8", "submit", "decline", "dismiss"]
        assert "form" not in focused  # the scroll container itself takes no focus stop
        await settle(pilot, lambda: "▶ Dismiss (Esc)" in screen_text(app), "the focused button scrolled into view")


async def test_enter_opens_a_focused_select_and_esc_then_only_closes_the_dropdown() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        assert "Esc Dismiss (cancel)" in screen_text(app)  # the footer names the key and the action sent
        select = app.query_one("#field-5", Select)
        app.set_focus(select)
        await pilot.pause()
        await pilot.press("enter")
        await settle(pilot, lambda: select.expanded, "the dropdown to open on Enter")
        await pilot.press("escape")
        await settle(pilot, lambda: not select.expanded, "the dropdown to close")
        assert backend.answers == []
        assert "ix-1" in app.pending
        await pilot.press("escape")  # with nothing of its own to close, Esc dismisses the form
        await settle(pilot, lambda: backend.answers, "the cancel")
        assert backend.answers[0][1] == Answer(Action.CANCEL)


async def test_esc_in_a_filter_with_text_clears_it_first_and_only_then_dismisses() -> None:
    options = tuple(Option(f"v{i}", f"Region {i:02d}") for i in range(12))
    form = Form(message="pick", fields=(MultiSelectField(name="r", label="Regions", options=options),))
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        app.set_focus(app.query_one("#filter-0", Input))
        await pilot.press(*"region 1")
        selection = app.query_one("#field-0", SelectionList)
        await settle(pilot, lambda: selection.option_count == 2, "the filter to apply")  # Region 10, 11
        await pilot.press("escape")
        await settle(pilot, lambda: app.query_one("#filter-0", Input).value == "", "the filter to clear")
        await settle(pilot, lambda: selection.option_count == 12, "every option to return")
        assert backend.answers == []
        await pilot.press("escape")
        await settle(pilot, lambda: backend.answers, "the cancel")
        assert backend.answers[0][1].action is Action.CANCEL


async def test_yes_no_and_multi_select_states_are_marked_as_text() -> None:
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(every_kind_form()), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        text = screen_text(app)
        assert "[x] Yes" in text
        assert "[ ] No" in text
        assert "[ ] Staging" in text
        await pilot.click("#field-4-no")
        app.query_one("#field-6", SelectionList).select("stage")
        await settle(pilot, lambda: "[x] No" in screen_text(app), "the No marker")
        text = screen_text(app)
        assert "[ ] Yes" in text
        assert "[x] Staging" in text
        assert "[ ] Production" in text


async def test_the_countdown_shows_once_per_form_and_long_tool_names_stay_reachable() -> None:
    backend = ScriptedBackend()
    long_tool = "examples:release_checklist_for_the_quarterly_platform_upgrade"
    shown = view_of(Form(message="first", fields=()), interaction_id="a", expires_at=NOW + timedelta(minutes=4))
    other = view_of(
        Form(message="second", fields=()),
        interaction_id="b",
        tool_name=long_tool,
        expires_at=NOW + timedelta(minutes=7),
    )
    typical = view_of(Form(message="third", fields=()), interaction_id="c", tool_name="examples:release_checklist")
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(shown, other, typical), resume_token="1"))
        await settle(pilot, lambda: len(app.pending) == 3, "three forms")
        text = screen_text(app)
        assert text.count("4m 00s left") == 1  # the selected form's countdown, in the form panel only
        assert text.count("7m 00s left") == 1  # the other form's, in the list
        assert re.search(r"s1 · examples:release_checklist(?![\w…])", text)  # a typical name is not cut
        assert long_tool not in text
        assert f"s1 · {long_tool[:19]}…{long_tool[-19:]}" in text  # a very long one keeps both ends
        item = app.query_one("#" + app.item_id("b"))
        assert item.tooltip == f"s1 · {long_tool}"
        await pilot.click("#item-b")
        await settle(pilot, lambda: app.selected_id == "b", "the long-named form")
        await settle(pilot, lambda: f"call {long_tool}" in screen_text(app), "the full name in the provenance header")
        await settle(  # once the new panel is laid out: each countdown exactly once
            pilot,
            lambda: (text := screen_text(app)).count("7m 00s left") == 1 and text.count("4m 00s left") == 1,
            "one countdown per form",
        )


# --- against the real Interaction service (in-process, real Redis; forms opened through HostLink) -------


@asynccontextmanager
async def live_tui(address: str, *, sessions: tuple[str, ...] = ()) -> AsyncIterator[tuple[MakaTui, Pilot[None]]]:
    app = MakaTui(
        lambda: Interactions.connect(address, reattach=ReattachPolicy(initial_delay=0.05, max_delay=0.2)),
        session_ids=sessions,
    )
    async with app.run_test(size=(140, 90)) as pilot:
        yield app, pilot


async def test_live_form_opened_through_hostlink_is_submitted_to_the_service(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1", wait_seconds=300)
        async with live_tui(live.address, sessions=("s1",)) as (app, pilot):
            await settle(pilot, lambda: app.selected_id == opened.interaction_id, "the live form")
            text = screen_text(app)
            assert "Requested by provider: Local MCP provider (mcp-provider-1)" in text
            assert "Claimed MCP server: deployer · claimed Tool: deploy" in text
            assert WARNING_TEXT in text
            assert re.search(r"\b[45]m \d\ds left", text)  # the five-minute wait, counting down
            app.query_one("#field-0", Select).value = "production"
            app.query_one("#field-1", Input).value = "4"
            await pilot.click("#field-2-yes")
            app.query_one("#field-3", SelectionList).select("eu")
            await pilot.pause()
            await pilot.click("#submit")
            await settle(pilot, lambda: not app.pending, "the answered form to leave")
        async with Interactions.connect(live.address) as client:
            stored = await client.get(opened.interaction_id)
        assert stored.state is InteractionState.ANSWERED
        assert stored.answer is not None
        assert stored.answer.action is Action.ACCEPT
        assert stored.answer.values == {"environment": "production", "replicas": 4, "dry_run": True, "regions": ("eu",)}


async def test_live_escape_cancels_and_decline_declines(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        first = await live.link.open(deploy_form("first"), session_id="s1")
        second = await live.link.open(deploy_form("second"), session_id="s1")
        async with live_tui(live.address) as (app, pilot):
            await settle(pilot, lambda: len(app.pending) == 2, "both live forms")
            await pilot.press("escape")
            await settle(pilot, lambda: len(app.pending) == 1, "the dismissed form to leave")
            await pilot.click("#decline")
            await settle(pilot, lambda: not app.pending, "the declined form to leave")
        async with Interactions.connect(live.address) as client:
            actions = {i: (await client.get(i)).answer for i in (first.interaction_id, second.interaction_id)}
        assert actions[first.interaction_id] == Answer(Action.CANCEL)
        assert actions[second.interaction_id] == Answer(Action.DECLINE)


async def test_live_forms_closed_elsewhere_disappear_with_their_reason(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        answered = await live.link.open(deploy_form("answered elsewhere"), session_id="s1")
        stopped = await live.link.open(deploy_form("stopped"), session_id="s2")
        async with live_tui(live.address) as (app, pilot):
            await settle(pilot, lambda: len(app.pending) == 2, "both live forms")
            async with Interactions.connect(live.address) as other_surface:
                await other_surface.answer(answered.interaction_id, Answer(Action.DECLINE))
            await settle(pilot, lambda: answered.interaction_id not in app.pending, "the answered form to leave")
            assert app.closed[answered.interaction_id] is CloseReason.ANSWERED
            assert "closed: answered on another surface" in screen_text(app)
            await live.link.close(stopped.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
            await settle(pilot, lambda: not app.pending, "the stopped form to leave")
            assert app.closed[stopped.interaction_id] is CloseReason.STOPPED
            assert "closed: the Tool call was stopped" in screen_text(app)
            assert app.outcomes == []


async def test_live_reconnect_after_an_outage_keeps_the_form_and_shows_new_ones(redis_url: str) -> None:
    port = free_port()
    async with interaction_service(redis_url, port=port) as live:
        kept = await live.link.open(deploy_form("kept"), session_id="s1")
        epoch = live.link.epoch
        async with live_tui(live.address) as (app, pilot):
            await settle(pilot, lambda: kept.interaction_id in app.pending, "the live form")
            await live.server.stop()
            await settle(pilot, lambda: app.attach_state == "reconnecting", "the outage to show")
            assert "reconnecting in" in screen_text(app)
            async with interaction_service(redis_url, port=port, resume_epoch=epoch) as again:
                later = await again.link.open(deploy_form("after the outage"), session_id="s1")
                await settle(pilot, lambda: later.interaction_id in app.pending, "the new form after reconnecting")
                assert app.attach_state == "connected"
                assert kept.interaction_id in app.pending
                await pilot.click("#" + app.item_id(later.interaction_id))
                await settle(pilot, lambda: app.selected_id == later.interaction_id, "the new form to be selected")
                assert "after the outage" in screen_text(app)


async def test_live_host_restart_closes_the_form_with_its_reason(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        old = await live.link.open(deploy_form("before the restart"), session_id="s1")
        async with live_tui(live.address) as (app, pilot):
            await settle(pilot, lambda: old.interaction_id in app.pending, "the live form")
            async with BrokerLink(live.channel):  # a freshly started broker begins a new Host epoch
                await settle(pilot, lambda: not app.pending, "the old-epoch form to leave")
            assert app.closed[old.interaction_id] is CloseReason.HOST_RESTARTED
            assert "closed: the Host restarted" in screen_text(app)


async def test_live_status_says_connected_again_as_soon_as_the_stream_is_back(redis_url: str) -> None:
    port = free_port()
    async with interaction_service(redis_url, port=port) as live:
        kept = await live.link.open(deploy_form("kept"), session_id="s1")
        epoch = live.link.epoch
        backend_box: list[FollowingBackend] = []

        def connect() -> FollowingBackend:
            backend_box.append(
                FollowingBackend(lambda: live.address, reattach=ReattachPolicy(initial_delay=0.05, max_delay=0.2))
            )
            return backend_box[0]

        async with MakaTui(connect).run_test(size=(140, 90)) as pilot:
            app = pilot.app
            assert isinstance(app, MakaTui)
            await settle(pilot, lambda: kept.interaction_id in app.pending, "the live form")
            await live.server.stop()
            await settle(pilot, lambda: app.attach_state == "reconnecting", "the outage to show")
            async with interaction_service(redis_url, port=port, resume_epoch=epoch):
                # no form opens or closes: the fresh snapshot alone must end "Reattaching…"
                await settle(pilot, lambda: app.attach_state == "connected", "connected again")
                assert "Connected · all visible sessions · 1 pending" in screen_text(app)
                assert kept.interaction_id in app.pending
                assert backend_box[0].retargets == 0


async def test_live_reconnect_rereads_endpoints_json_and_follows_a_stack_on_new_ports(
    redis_url: str, tmp_path: Path
) -> None:
    def locate() -> str:
        return read_endpoints(tmp_path).interaction

    async with interaction_service(redis_url) as first:
        write_endpoints(tmp_path, Endpoints(interaction=first.address, broker=""))
        before = await first.link.open(deploy_form("before the move"), session_id="s1")
        epoch = first.link.epoch
        backend_box: list[FollowingBackend] = []

        def connect() -> FollowingBackend:
            backend_box.append(FollowingBackend(locate, reattach=ReattachPolicy(initial_delay=0.05, max_delay=0.2)))
            return backend_box[0]

        async with MakaTui(connect).run_test(size=(140, 90)) as pilot:
            app = pilot.app
            assert isinstance(app, MakaTui)
            await settle(pilot, lambda: before.interaction_id in app.pending, "the first stack's form")
            await first.server.stop()
            await settle(pilot, lambda: app.attach_state == "reconnecting", "the outage to show")
            async with interaction_service(redis_url, resume_epoch=epoch) as moved:
                assert moved.address != first.address
                write_endpoints(tmp_path, Endpoints(interaction=moved.address, broker=""))
                later = await moved.link.open(deploy_form("after the move"), session_id="s1")
                await settle(pilot, lambda: later.interaction_id in app.pending, "the moved stack's new form")
                assert backend_box[0].address == moved.address
                assert backend_box[0].retargets == 1
                assert app.attach_state == "connected"
                assert before.interaction_id in app.pending
                await pilot.click("#" + app.item_id(later.interaction_id))
                await settle(pilot, lambda: app.selected_id == later.interaction_id, "the new form")
                await pilot.click("#decline")
                await settle(pilot, lambda: later.interaction_id not in app.pending, "the answer on the moved stack")
                assert app.outcomes[-1].accepted


async def test_a_pending_sign_in_is_shown_with_its_full_url_and_goes_away_once_signed_in() -> None:
    url = "https://as.example.com/authorize?response_type=code&client_id=c&state=S&redirect_uri=http%3A%2F%2F127.0.0.1"
    prompts = [SignInView("remote", "sign_in_required", url)]

    async def sign_ins() -> list[SignInView]:
        return list(prompts)

    app = MakaTui(lambda: ScriptedBackend(), sign_ins=sign_ins)
    async with app.run_test(size=(400, 40)) as pilot:
        shown = app.query_one("#sign-ins", Static)
        await settle(pilot, lambda: "Sign in to remote" in str(shown.render()), "the sign-in prompt")
        assert url in str(shown.render())
        assert "maka auth login remote" in str(shown.render())
        prompts[0] = SignInView("remote", "signed_in", "")  # the next poll (every 2 s) sees it
        await settle(pilot, lambda: str(shown.render()) == "", "the prompt to go away")


async def test_a_select_with_a_thousand_options_filters_as_you_type() -> None:
    options = tuple(Option(f"Zone/City_{i:04d}", f"City {i:04d}") for i in range(1000))
    form = Form(message="Which time zone?", fields=(SingleSelectField(name="tz", label="Time zone", options=options),))
    backend = ScriptedBackend()
    async with running(backend) as (app, pilot):
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        app.query_one("#filter-0", Input).value = "0777"
        await pilot.pause()
        select = app.query_one("#field-0", Select)
        select.value = "Zone/City_0777"
        await pilot.pause()
        app.action_submit_form()
        await settle(pilot, lambda: backend.answers, "the answer")
        assert backend.answers[0][1].values == {"tz": "Zone/City_0777"}


async def test_the_mcp_servers_status_is_shown_with_the_cause_of_a_failed_one() -> None:
    servers = [
        broker_pb2.ServerStatus(name="examples", state=broker_pb2.SERVER_STATE_READY, transport="stdio", tool_count=3),
        broker_pb2.ServerStatus(
            name="remote",
            state=broker_pb2.SERVER_STATE_FAILED,
            transport="http",
            last_error=broker_pb2.ServerError(summary="HTTP 401 Unauthorized from POST http://h/mcp", http_status=401),
        ),
    ]

    async def source() -> list[dict[str, object]]:
        return [server_json(s) for s in servers]

    app = MakaTui(lambda: ScriptedBackend(), server_status=source)
    async with app.run_test(size=(140, 90)) as pilot:
        await settle(pilot, lambda: app.server_lines, "the server status")
        assert app.server_lines == ["examples: ready", "remote: failed — HTTP 401 Unauthorized from POST http://h/mcp"]
        assert "remote: failed — HTTP 401" in screen_text(app)


def _surface(kind: str) -> AttachedSurface:
    return AttachedSurface(
        principal="local",
        kind=kind,
        session_ids=(),
        all_sessions=True,
        session_count=0,
        attached_at=NOW,
        host_id="local",
        replica_id="r1",
    )


async def test_the_status_line_counts_the_attached_surfaces_and_keeps_the_count_while_it_cannot_be_read() -> None:
    backend = ScriptedBackend(surfaces=[_surface("tui"), _surface("web")])
    app = MakaTui(lambda: backend)
    async with app.run_test(size=(140, 40)) as pilot:
        await backend.events.put(FormSnapshot(pending=(), resume_token="1-0"))
        await settle(pilot, lambda: app.surface_count == 2, "the surface count")
        assert "Connected · all visible sessions · 0 pending · 2 surfaces attached" in screen_text(app)
        backend.surfaces_error = MakaError(grpc.StatusCode.UNAVAILABLE, "the Interaction service is down")
        backend.surfaces = [_surface("tui")]
        asked = backend.surfaces_asked
        await backend.events.put(Reattaching("UNAVAILABLE", 1, 0.1))
        await backend.events.put(FormSnapshot(pending=(), resume_token="1-1"))  # reconnected: a poll that fails
        await settle(pilot, lambda: backend.surfaces_asked > asked, "the failing poll")
        assert app.surface_count == 2
        assert "· 0 pending · 2 surfaces attached" in screen_text(app)
        backend.surfaces_error = None
        await backend.events.put(Reattaching("UNAVAILABLE", 1, 0.1))
        await backend.events.put(FormSnapshot(pending=(), resume_token="1-2"))
        await settle(pilot, lambda: app.surface_count == 1, "the new count")
        assert "· 0 pending · 1 surface attached" in screen_text(app)


# --- one deadline, undo, outcome ----------------------------------------------------------------------


async def test_a_round_form_shows_one_deadline_the_earlier_labelled_by_what_it_is() -> None:
    backend = ScriptedBackend()
    form = Form(message="round form", fields=(StringField(name="x", label="X"),))
    closes_first = replace(
        view_of(form, interaction_id="a", expires_at=NOW + timedelta(minutes=4, seconds=57)),
        round_position=1,
        round_size=2,
        round_deadline=NOW + timedelta(minutes=9, seconds=57),
    )
    round_first = replace(
        view_of(form, interaction_id="b", expires_at=NOW + timedelta(minutes=9, seconds=57)),
        round_position=2,
        round_size=2,
        round_deadline=NOW + timedelta(minutes=4, seconds=57),
    )
    async with running(backend) as (app, pilot):
        await backend.events.put(FormSnapshot(pending=(closes_first, round_first), resume_token="1"))
        await settle(pilot, lambda: app.selected_id == "a", "the first form")
        assert str(app.query_one("#time-left", Static).content) == "4m 57s left"
        assert str(app.query_one("#round", Static).content) == "form 1 of 2"
        assert "9m 57s" not in screen_text(app)
        await app.select("b")
        await settle(pilot, lambda: app.selected_id == "b", "the second form")
        assert str(app.query_one("#time-left", Static).content) == "4m 57s left in this round"
        assert str(app.query_one("#round", Static).content) == "form 2 of 2 · the round ends 09:04:57 UTC"
        assert "9m 57s" not in screen_text(app)


async def test_esc_starts_a_countdown_and_undo_restores_the_form_with_its_draft_sending_nothing() -> None:
    backend = ScriptedBackend()
    form = Form(message="undo me", fields=(StringField(name="note", label="Note"),))
    app = MakaTui(lambda: backend, now=lambda: NOW, undo_seconds=600)
    async with app.run_test(size=(140, 90)) as pilot:
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        app.set_focus(app.query_one("#field-0", Input))
        await pilot.press(*"draft")
        await pilot.press("escape")
        await settle(pilot, lambda: bool(app.query("#undo")), "the undo bar")
        assert "Dismissed — sending in " in screen_text(app)
        assert not app.query_one("#form-panel").display
        assert backend.answers == []
        assert "ix-1" in app.pending
        await pilot.click("#undo")
        await settle(pilot, lambda: not app.query("#undo-bar"), "the undo bar to go")
        assert app.query_one("#form-panel").display
        assert app.query_one("#field-0", Input).value == "draft"
        assert "was not dismissed; nothing was sent" in screen_text(app)
        assert backend.answers == []
        await pilot.press("ctrl+z")  # nothing to undo: nothing happens
        await pilot.press("escape")
        await settle(pilot, lambda: bool(app.query("#undo")), "the undo bar again")
        await pilot.press("ctrl+z")
        await settle(pilot, lambda: not app.query("#undo-bar"), "the undo bar to go again")
        assert backend.answers == []


async def test_a_dismissal_whose_countdown_ends_sends_cancel_then_names_the_delivery() -> None:
    backend = ScriptedBackend()
    form = Form(message="let it go", fields=(StringField(name="note", label="Note"),))
    app = MakaTui(lambda: backend, now=lambda: NOW, undo_seconds=0.05)
    async with app.run_test(size=(140, 90)) as pilot:
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        await pilot.press("escape")
        await settle(pilot, lambda: not app.pending, "the cancel to be sent and the form to leave")
        assert [(i, a.action) for i, a, _, _ in backend.answers] == [("ix-1", Action.CANCEL)]
        assert "Dismissed (cancel) — sent to the server" in screen_text(app)
        delivered = replace(
            view_of(form), state=InteractionState.ANSWERED, answer=Answer(Action.CANCEL), delivery=Delivery.DELIVERED
        )
        await backend.events.put(FormDeliveryRecorded(delivered, "2"))
        await settle(pilot, lambda: "the Tool received it" in screen_text(app), "the delivery notice")
        assert "Dismissed (cancel) — the Tool received it for “let it go”." in screen_text(app)


async def test_a_form_closed_elsewhere_during_its_countdown_is_never_answered() -> None:
    backend = ScriptedBackend()
    form = Form(message="raced", fields=())
    app = MakaTui(lambda: backend, now=lambda: NOW, undo_seconds=600)
    async with app.run_test(size=(140, 90)) as pilot:
        await backend.events.put(FormOpened(view_of(form), "1"))
        await settle(pilot, lambda: app.selected_id == "ix-1", "the form")
        await pilot.press("escape")
        await settle(pilot, lambda: bool(app.query("#undo")), "the undo bar")
        closed = replace(view_of(form), state=InteractionState.CLOSED, close_reason=CloseReason.STOPPED)
        await backend.events.put(FormClosed(closed, CloseReason.STOPPED, "2"))
        await settle(pilot, lambda: not app.pending, "the form to leave")
        assert "closed: the Tool call was stopped" in screen_text(app)
        assert not app._dismissing
        assert backend.answers == []
