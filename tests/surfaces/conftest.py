"""Fixtures of the surfaces' cross-surface suites: the stack with the low-level SDK fixture server that
``test_server_results_and_rounds.py`` and ``test_form_answer_rules.py`` share the shape of (one per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.surfaces.fixture_server_stack import FixtureServerStack, running_fixture_server_stack


@pytest.fixture(scope="module")
def fx_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FixtureServerStack]:
    """A :class:`FixtureServerStack` for the requesting module (its own processes, state in a folder named after
    the module), stopped after the module's last test."""
    with running_fixture_server_stack(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])) as stack:
        yield stack
