"""services.core.logs: one JSON object per line with the event and its extras."""

from __future__ import annotations

import json
import logging

from services.core.logs import JsonFormatter, RedactSessionIds


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("maka.test", logging.INFO, __file__, 1, "event_name", (), None)
    record.__dict__.update(extra)
    return record


def test_a_line_carries_the_event_and_its_extras() -> None:
    entry = json.loads(JsonFormatter().format(_record(interaction_id="ix_1")))
    assert entry["event"] == "event_name"
    assert entry["level"] == "info"
    assert entry["interaction_id"] == "ix_1"


def test_uvicorns_ansi_coloured_copy_of_the_message_is_not_logged() -> None:
    line = JsonFormatter().format(_record(color_message="\x1b[36mGET\x1b[0m /"))
    assert "color_message" not in json.loads(line)
    assert "\\u001b" not in line


def test_an_mcp_session_id_in_the_sdks_streamable_http_log_is_cut_to_its_first_8_digits() -> None:
    session = "3f9c0e7a51b24d6e8a1b2c3d4e5f6a7b"
    record = logging.LogRecord(
        "mcp.server.streamable_http_manager",
        logging.WARNING,
        __file__,
        1,
        "Rejecting request for session %s",
        (session,),
        None,
    )
    assert RedactSessionIds().filter(record)
    assert record.getMessage() == "Rejecting request for session 3f9c0e7a…"
