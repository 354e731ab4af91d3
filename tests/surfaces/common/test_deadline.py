"""One deadline per form: :attr:`InteractionView.deadline`, :func:`deadline_text`, :func:`round_line` and the web
page's view of them (pure: views built in memory)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from services.core.form import Form
from surfaces.common.interactions import InteractionView, deadline_text, round_line
from surfaces.web.views import interaction_view
from tests.surfaces.helpers import view_of

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _round_view(expires_in: timedelta | None, round_in: timedelta | None, *, size: int = 2) -> InteractionView:
    view = view_of(Form(message="m", fields=()), expires_at=NOW + expires_in if expires_in is not None else None)
    return replace(
        view,
        round_position=1,
        round_size=size,
        round_deadline=NOW + round_in if round_in is not None else None,
    )


def test_a_form_whose_own_wait_ends_first_shows_only_that_countdown_and_its_place_in_the_round() -> None:
    view = _round_view(timedelta(minutes=4, seconds=57), timedelta(minutes=9, seconds=57))
    assert view.deadline == NOW + timedelta(minutes=4, seconds=57)
    assert not view.deadline_is_round
    assert deadline_text(view, NOW) == "4m 57s left"
    assert round_line(view) == "form 1 of 2"


def test_a_round_deadline_that_comes_first_is_the_one_shown_and_named_as_the_rounds() -> None:
    view = _round_view(timedelta(minutes=9, seconds=57), timedelta(minutes=4, seconds=57))
    assert view.deadline == NOW + timedelta(minutes=4, seconds=57)
    assert view.deadline_is_round
    assert deadline_text(view, NOW) == "4m 57s left in this round"
    assert round_line(view) == "form 1 of 2 · the round ends 12:04:57 UTC"


def test_a_wait_clamped_to_the_round_deadline_counts_as_the_rounds() -> None:
    view = _round_view(timedelta(minutes=2), timedelta(minutes=2), size=1)
    assert view.deadline_is_round
    assert deadline_text(view, NOW) == "2m 00s left in this round"
    assert round_line(view) == "the round ends 12:02:00 UTC"


def test_forms_outside_a_round_or_without_limits_keep_their_plain_countdown() -> None:
    plain = view_of(Form(message="m", fields=()), expires_at=NOW + timedelta(seconds=45))
    assert deadline_text(plain, NOW) == "45s left"
    assert round_line(plain) == ""
    unbounded = view_of(Form(message="m", fields=()))
    assert unbounded.deadline is None
    assert deadline_text(unbounded, NOW) == "no time limit"
    assert deadline_text(_round_view(None, timedelta(seconds=-1)), NOW) == "expired"


def test_the_web_view_carries_the_one_deadline_and_whose_it_is() -> None:
    data = interaction_view(_round_view(timedelta(minutes=4), timedelta(minutes=9)))
    assert data["deadline"] == "2026-11-30T12:04:00.000Z"
    assert data["deadline_is_round"] is False
    data = interaction_view(_round_view(timedelta(minutes=9), timedelta(minutes=4)))
    assert data["deadline"] == "2026-11-30T12:04:00.000Z"
    assert data["deadline_is_round"] is True
