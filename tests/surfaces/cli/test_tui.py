"""``maka tui`` command wiring (the app itself is tested in tests/surfaces/tui/test_app.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from surfaces.cli.main import build_parser, main


def test_tui_without_a_stack_fails_with_no_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", "--state-dir", str(tmp_path / "none")]) == 3
    assert capsys.readouterr().err.startswith("NO_STACK: ")


def test_tui_accepts_repeated_sessions_and_an_explicit_address() -> None:
    parser, commands = build_parser()
    args = parser.parse_args(["tui", "--session", "s1", "--session", "s2", "--interaction", "127.0.0.1:9"])
    assert "tui" in commands
    assert args.session == ["s1", "s2"]
    assert args.interaction == "127.0.0.1:9"
