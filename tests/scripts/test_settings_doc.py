"""The configuration reference in docs/configuration.md is generated from the Settings classes and kept fresh."""

from __future__ import annotations

from scripts import settings_doc


def test_the_configuration_reference_matches_the_settings_classes() -> None:
    assert settings_doc.main(["--check"]) == 0


def test_every_documented_variable_has_a_meaning() -> None:
    rows = [line for line in settings_doc.render().splitlines() if line.startswith("| `MAKA_")]
    assert rows
    assert all(not line.rstrip().endswith("|  |") for line in rows), "a Settings field lacks an attribute docstring"
