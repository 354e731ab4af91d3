"""Unit tests of the invocation's one table of moves (`services/broker/invocation.py`): pure logic."""

from __future__ import annotations

import pytest

from maka.interaction.v1 import interaction_pb2
from services.broker.call_log import CallLog
from services.broker.invocation import MOVES, TERMINAL, IllegalMove, Invocation, InvocationState


def _invocation() -> Invocation:
    return Invocation(
        invocation_id="inv_1",
        session_id="s1",
        turn_id="t1",
        tool_use_id="tu1",
        qualified_name="examples:deploy",
        arguments_json="{}",
        registration=None,
        log=CallLog(16),
    )


def _at(state: InvocationState) -> Invocation:
    """An invocation moved to ``state`` along the legal path."""
    invocation = _invocation()
    path = {
        InvocationState.RUNNING: [],
        InvocationState.OPENING: [InvocationState.OPENING],
        InvocationState.AWAITING: [InvocationState.OPENING, InvocationState.AWAITING],
    }.get(state, [state])
    for step in path:
        invocation.move(step)
    return invocation


def test_every_state_has_a_row_and_a_terminal_state_moves_nowhere() -> None:
    assert set(MOVES) == set(InvocationState)
    assert all(MOVES[state] == frozenset() for state in TERMINAL)
    assert all(MOVES[state] >= TERMINAL for state in set(InvocationState) - TERMINAL)


@pytest.mark.parametrize("state", list(InvocationState))
def test_a_move_the_table_allows_happens_and_any_other_is_refused_and_changes_nothing(state: InvocationState) -> None:
    for to in InvocationState:
        invocation = _at(state)
        if to in MOVES[state]:
            assert invocation.move(to) is state
            assert invocation.state is to
        else:
            with pytest.raises(IllegalMove):
                invocation.move(to)
            assert invocation.state is state


def test_a_form_round_goes_opening_awaiting_and_back_to_running() -> None:
    invocation = _invocation()
    invocation.ask_form("corr-1")
    assert (invocation.state, invocation.correlation_id, invocation.form_bound) == (
        InvocationState.OPENING,
        "corr-1",
        True,
    )
    invocation.await_form(interaction_pb2.Interaction(interaction_id="ix_1"))
    assert (invocation.state, invocation.interaction_id, invocation.interaction_ids) == (
        InvocationState.AWAITING,
        "ix_1",
        ["ix_1"],
    )
    invocation.drop_form()
    invocation.resume()
    assert (invocation.state, invocation.interaction_id, invocation.form_bound) == (InvocationState.RUNNING, "", False)


def test_an_invocation_ends_once_and_only_in_a_terminal_state() -> None:
    invocation = _invocation()
    with pytest.raises(IllegalMove):
        invocation.end_as(InvocationState.AWAITING)
    assert invocation.end_as(InvocationState.STOPPED) is InvocationState.RUNNING
    assert invocation.is_terminal
    with pytest.raises(IllegalMove):
        invocation.end_as(InvocationState.LOST)
    assert invocation.state is InvocationState.STOPPED
