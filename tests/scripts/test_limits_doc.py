"""The caps table in docs/limits.md is generated from the constants that enforce the caps and kept fresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import limits_doc
from scripts.doc_block import DocBlock
from services.core.limits import DEFAULT_LIMITS
from services.mcp_provider import manager


def test_the_limits_page_matches_the_code() -> None:
    assert limits_doc.main(["--check"]) == 0


def test_every_field_of_limits_has_a_row() -> None:
    assert limits_doc.uncovered_limits() == []


def test_the_rows_show_the_live_values() -> None:
    rows = {cap.what: cap.value for cap in limits_doc.caps()}
    assert rows["Fields per form"] == str(DEFAULT_LIMITS.max_fields)
    server_message = next(value for what, value in rows.items() if what.startswith("A server's JSON-RPC error message"))
    assert server_message == f"{manager.MAX_SERVER_MESSAGE_CHARS} code points"
    assert rows["`requestState`"] == f"{DEFAULT_LIMITS.max_request_state_bytes // 1024} KiB"


def test_units_are_written_for_people() -> None:
    assert limits_doc.size(128 * 1024) == "128 KiB"
    assert limits_doc.size(4 * 1024 * 1024) == "4 MiB"
    assert limits_doc.size(1000) == "1,000 bytes"
    assert limits_doc.chars(16384) == "16,384 code points"
    assert limits_doc.seconds(590.0) == "590 s"
    assert limits_doc.count(1000) == "1,000"


def test_a_stale_block_is_reported_and_write_makes_it_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scripts.doc_block.ROOT", tmp_path)
    page = "# Page\n\n<!-- x:begin -->\n{}<!-- x:end -->\n\nafter\n"
    (tmp_path / "page.md").write_text(page.format("old\n"), encoding="utf-8")
    block = DocBlock("page.md", "x", lambda: "new\n", "python -m scripts.x")

    assert block.main(["--check"]) == 1
    assert "python -m scripts.x --write" in capsys.readouterr().out
    assert block.main(["--write"]) == 0
    assert (tmp_path / "page.md").read_text(encoding="utf-8") == page.format("new\n")
    assert block.main(["--check"]) == 0
