"""The real cause of a connection failure: flattened, bounded, redacted."""

from __future__ import annotations

import io
import subprocess
import sys
import threading

import httpx2

from services.mcp_provider.causes import MAX_CAUSES, MAX_LINE_CHARS, StderrTail, clean_line, describe


def _group() -> BaseException:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise httpx2.ConnectError("All connection attempts failed") from inner
    except httpx2.ConnectError as error:
        return ExceptionGroup("unhandled errors in a TaskGroup", [error])


def test_a_task_group_is_flattened_into_its_causes_innermost_first_line_as_summary() -> None:
    cause = describe(_group())

    assert cause.summary == "ConnectError: All connection attempts failed"
    assert cause.causes == (
        "ConnectError: All connection attempts failed",
        "ConnectionRefusedError: [Errno 111] Connection refused",
    )
    assert cause.http_status == 0


def test_secrets_url_queries_user_info_and_control_characters_are_redacted() -> None:
    text = "failed https://user:pw@h.example/mcp?key=abc123 with token s3cr3t-value\x1b[31m"

    line = clean_line(text, ["s3cr3t-value"])

    assert line == "failed https://***@h.example/mcp?*** with token *** [31m"
    assert "pw" not in line
    assert "abc123" not in line


def test_lines_and_chains_are_bounded() -> None:
    errors = [ValueError(f"{i} " + "x" * 1000) for i in range(20)]
    cause = describe(ExceptionGroup("many", errors))

    assert len(cause.causes) == MAX_CAUSES
    assert all(len(line) <= MAX_LINE_CHARS for line in cause.causes)


def test_a_generic_closed_connection_is_explained_by_the_childs_last_stderr_line() -> None:
    cause = describe(RuntimeError("Connection closed"), stderr_tail=["Traceback ...", "ModuleNotFoundError: nope"])

    assert cause.summary == "RuntimeError: Connection closed; the server's stderr said: ModuleNotFoundError: nope"
    assert cause.stderr_tail == ("Traceback ...", "ModuleNotFoundError: nope")


def test_the_stderr_error_line_is_quoted_rather_than_the_hint_printed_after_it() -> None:
    tail = ["starting", "error: config file ./srv.toml not found", "hint: run `srv init` first", "note: see --help"]
    cause = describe(RuntimeError("Connection closed"), stderr_tail=tail)

    assert cause.summary.endswith("the server's stderr said: error: config file ./srv.toml not found")


def test_without_an_error_line_the_last_line_that_is_not_a_hint_is_quoted() -> None:
    cause = describe(RuntimeError("Connection closed"), stderr_tail=["listening failed on fd 0", "hint: try again"])

    assert cause.summary.endswith("the server's stderr said: listening failed on fd 0")


def test_the_stderr_tail_keeps_the_last_lines_a_child_wrote_and_copies_them_to_the_sink(tmp_path: object) -> None:

    sink = io.StringIO()
    lock = threading.Lock()
    tail = StderrTail(sink)
    script = "import sys\nfor i in range(30): print(f'line {i}', file=sys.stderr)"
    with lock:
        child = subprocess.Popen([sys.executable, "-c", script], stderr=tail.writer)
    tail.spawned()
    child.wait(timeout=30)

    assert tail.wait_eof(10)
    assert tail.lines()[-1] == "line 29"
    assert len(tail.lines()) == 10
    assert sink.getvalue().count("\n") == 30


def test_the_summary_leads_with_the_target_redacted() -> None:
    missing = describe(FileNotFoundError(2, "No such file or directory"), target="command 'no-such-mcp-server'")
    http = describe(_group(), ["tok-secret-1"], target="URL https://u:pw@h.example/mcp?key=tok-secret-1")

    assert missing.summary == "command 'no-such-mcp-server': FileNotFoundError: [Errno 2] No such file or directory"
    assert http.summary == "URL https://***@h.example/mcp?***: ConnectError: All connection attempts failed"
