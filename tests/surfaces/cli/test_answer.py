"""``maka answer`` against the real Interaction service found through endpoints.json."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2
from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.main import main
from surfaces.common.interactions import Interactions
from tests.surfaces.helpers import deploy_form, interaction_service


async def maka(*argv: str) -> int:
    """Run the ``maka`` entry point in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(main, list(argv))


async def test_accept_commits_typed_values_and_a_second_answer_gets_already_settled(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1"))
        opened = await live.link.open(deploy_form(), session_id="s1")
        ix = opened.interaction_id
        values = json.dumps({"environment": "production", "replicas": 3, "regions": ["eu"]})
        code = await maka(
            "answer", ix, "accept", "--values", values, "--session", "s1", "--json", "--state-dir", str(tmp_path)
        )
        assert code == 0
        assert json.loads(capsys.readouterr().out) == {
            "id": ix,
            "session": "s1",
            "state": "answered",
            "action": "accept",
            "close_reason": "answered",
        }
        async with Interactions.connect(live.address) as client:
            stored = await client.get(ix)
        assert stored.answer is not None
        assert stored.answer.values == {"environment": "production", "replicas": 3, "regions": ("eu",)}
        assert await maka("answer", ix, "decline", "--state-dir", str(tmp_path)) == 3
        assert capsys.readouterr().err.startswith("ALREADY_SETTLED: ")


async def test_decline_and_cancel_print_the_outcome(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        first = await live.link.open(deploy_form(), session_id="s1")
        second = await live.link.open(deploy_form(), session_id="s1")
        assert await maka("answer", first.interaction_id, "decline", "--interaction", live.address) == 0
        assert capsys.readouterr().out.strip() == f"{first.interaction_id}: answered (decline)"
        assert await maka("answer", second.interaction_id, "cancel", "--interaction", live.address, "--json") == 0
        assert json.loads(capsys.readouterr().out)["action"] == "cancel"


async def test_invalid_values_are_refused_with_violations_and_the_form_stays_pending(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        values = json.dumps({"replicas": 99, "colour": "red"})
        code = await maka("answer", opened.interaction_id, "accept", "--values", values, "--interaction", live.address)
        assert code == 3
        err = capsys.readouterr().err
        assert err.startswith("INVALID_ANSWER: ")
        assert "/replicas" in err
        assert "/colour" in err
        assert "99" not in err  # violations never quote the value
        async with Interactions.connect(live.address) as client:
            assert (await client.get(opened.interaction_id)).pending


async def test_closed_form_answer_fails_with_closed(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        await live.link.close(opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        assert await maka("answer", opened.interaction_id, "cancel", "--interaction", live.address) == 3
        assert capsys.readouterr().err.startswith("CLOSED: ")


async def test_wrong_session_or_unknown_id_is_not_found(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        code = await maka("answer", opened.interaction_id, "decline", "--session", "s2", "--interaction", live.address)
        assert code == 3
        assert capsys.readouterr().err.startswith("NOT_FOUND: ")
        assert await maka("answer", "nope", "accept", "--values", "{}", "--interaction", live.address) == 3
        assert capsys.readouterr().err.startswith("NOT_FOUND: ")


async def test_usage_errors_exit_2_before_contacting_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = ("--state-dir", str(tmp_path / "none"))
    assert await maka("answer", "ix", "decline", "--values", "{}", *nowhere) == 2
    assert capsys.readouterr().err.startswith("ANSWER_INVALID_ACTION: ")
    assert await maka("answer", "ix", "accept", "--values", "{not json", *nowhere) == 2
    assert capsys.readouterr().err.startswith("INVALID_VALUES: ")
    assert await maka("answer", "ix", "accept", "--values", "[1]", *nowhere) == 2
    assert capsys.readouterr().err.startswith("INVALID_VALUES: ")
    with pytest.raises(SystemExit) as usage:
        await maka("answer", "ix", "maybe", *nowhere)
    assert usage.value.code == 2


class Terminal:
    """A process on a pseudo-terminal: wait for text on its screen, type lines (bounded waits)."""

    def __init__(self, argv: list[str]) -> None:

        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        self.screen = ""

    def expect(self, text: str, timeout: float = 30.0) -> str:

        deadline = time.monotonic() + timeout
        while text not in self.screen:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {text!r}; screen:\n{self.screen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"the process ended before {text!r}; screen:\n{self.screen}"
                self.screen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        seen, _, self.screen = self.screen.partition(text)
        return seen + text

    def type(self, line: str) -> None:

        os.write(self.master, line.encode() + b"\n")

    def close(self) -> int:

        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code


@pytest.mark.slow
async def test_answer_without_an_action_walks_the_form_in_a_terminal_with_inline_validation(
    redis_url: str, tmp_path: Path
) -> None:

    async with interaction_service(redis_url) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1"))
        opened = await live.link.open(deploy_form(), session_id="s1")
        argv = [
            sys.executable,
            "-m",
            "surfaces.cli.main",
            "answer",
            opened.interaction_id,
            "--state-dir",
            str(tmp_path),
        ]

        def drive() -> tuple[str, int]:
            term = Terminal(argv)
            screen = term.expect("Do not enter passwords")
            screen += term.expect("[1/4] Environment (required): Choose one")
            screen += term.expect("[staging] > ")
            term.type("prod")  # not a choice: filters
            screen += term.expect("1 option(s) match")
            term.type("2")
            screen += term.expect("[2/4] Replicas: Whole number between 1 and 10")
            term.type("lots")
            screen += term.expect("! enter a whole number")
            term.type("11")
            screen += term.expect("! ")  # out of range: refused at once, before the next field
            term.type("3")
            screen += term.expect("[3/4] Dry run: Yes or no")
            term.type("")  # optional boolean left unset
            screen += term.expect("[4/4] Regions")
            term.type("1,2")
            screen += term.expect("accept, decline or cancel? [accept] > ")
            term.type("")
            screen += term.expect(f"{opened.interaction_id}: answered (accept)")
            return screen, term.close()

        screen, code = await asyncio.to_thread(drive)
        assert code == 0, screen
        assert "1) Staging [staging]" in screen
        async with Interactions.connect(live.address) as client:
            stored = await client.get(opened.interaction_id)
        assert stored.answer is not None
        assert stored.answer.values == {"environment": "production", "replicas": 3, "regions": ("eu", "us")}


async def test_pending_shows_each_fields_limits_default_and_choices(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with interaction_service(redis_url) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1"))
        await live.link.open(deploy_form(), session_id="s1")
        assert await maka("pending", "--state-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert '      default: "staging"\n      choices: staging (Staging), production (Production)' in out
    assert "      limits: between 1 and 10\n      default: 2" in out
    assert "      limits: pick at most 2\n      choices: eu (Europe), us (US)" in out
