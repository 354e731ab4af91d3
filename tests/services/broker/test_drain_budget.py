"""The broker's drain budget: a number is kept as given; ``auto`` waits as long as a form can still wait plus
one provider leg after its answer plus the grace for the result to reach its caller."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.broker.settings import Settings
from services.interaction.settings import Settings as InteractionSettings


def test_a_numeric_drain_keeps_its_meaning_and_zero_is_no_drain() -> None:
    assert Settings(drain_seconds=30).drain_budget_seconds() == 30
    assert Settings().drain_budget_seconds() == 0


def test_the_auto_drain_is_the_longest_form_wait_plus_one_provider_leg_plus_grace() -> None:
    settings = Settings(drain_seconds="auto", grace_seconds=15, execution_timeout_seconds=120)

    assert settings.drain_budget_seconds() == 590 + 120 + 15


def test_the_auto_drain_follows_a_shorter_form_wait_the_broker_asks_for() -> None:
    settings = Settings(drain_seconds="auto", form_wait_seconds=4, execution_timeout_seconds=2, grace_seconds=1)

    assert settings.drain_budget_seconds() == 4 + 2 + 1
    assert Settings(drain_seconds="auto", form_wait_seconds=900, grace_seconds=0).longest_form_wait_seconds() == 590


def test_the_brokers_form_wait_maximum_defaults_to_the_interaction_tiers() -> None:
    broker = Settings.model_fields["form_wait_max_seconds"].default
    assert broker == InteractionSettings.model_fields["form_wait_max_seconds"].default


@pytest.mark.parametrize("value", ["-1", "forever"])
def test_a_drain_that_is_neither_auto_nor_a_non_negative_number_is_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        Settings(drain_seconds=value)
