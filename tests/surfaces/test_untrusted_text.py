"""A hostile MCP server (:mod:`tests.fixtures.mcp_servers.hostile_server`: ESC, BEL, C1, bidi and zero-width
characters in every string it supplies) through the real stack as ``maka up`` runs it: no such character
reaches a terminal through ``maka tools``, ``maka call`` (progress, form line, result), ``maka pending``, the
interactive ``maka answer`` or ``maka tui`` in a real terminal (tmux); each shows a visible marker instead
(surfaces/common/untrusted.py; docs/security.md#threats-and-what-stops-them).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from tests.acceptance.harness import write_config
from tests.fixtures.mcp_servers.hostile_server import FORBIDDEN
from tests.helpers.cli import MAKA, ROOT, maka
from tests.helpers.stack import RunningStack, running_stack, wait_for_pending
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]

ESC_PICTURE = "\u241b"
"""What an ESC shows as."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningStack]:
    directory = tmp_path_factory.mktemp("untrusted")
    config = write_config(
        directory,
        {
            "hostile": {
                "command": sys.executable,
                "args": ["-m", "tests.fixtures.mcp_servers.hostile_server"],
                "cwd": str(ROOT),
            }
        },
    )
    async with running_stack(directory, config=config, echo=False) as live:
        yield live


def forbidden_in(text: str) -> list[str]:
    """Every character of ``text`` no server string may bring to a terminal (as code points)."""
    return sorted({f"U+{ord(char):04X}" for char in text if char in FORBIDDEN})


async def start_call(running: RunningStack, session: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *MAKA,
        "call",
        "hostile:paint",
        "--session",
        session,
        "--state-dir",
        str(running.stack.state_dir),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )


async def answer_by_walking(running: RunningStack, interaction_id: str) -> tuple[int, str, str]:
    """``maka answer ID`` interactively: Enter on every field (defaults kept), then ``accept``."""
    process = await asyncio.create_subprocess_exec(
        *MAKA,
        "answer",
        interaction_id,
        "--state-dir",
        str(running.stack.state_dir),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate(b"\n\n\naccept\n")
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_maka_tools_shows_a_hostile_description_with_markers_and_no_control_character(
    running: RunningStack,
) -> None:
    ran = await maka("tools", state_dir=running.stack.state_dir)
    assert ran.code == 0, ran.err
    line = next(line for line in ran.out.splitlines() if line.startswith("hostile:paint"))
    assert forbidden_in(ran.out) == []
    assert f"Paints{ESC_PICTURE}[2J{ESC_PICTURE}[H{ESC_PICTURE}[42;30m VERIFIED" in line
    assert "\u2407\ufffd31m\ufffdevil\ufffd\ufffd\ufffd\ufffd the screen" in line


async def test_maka_call_pending_and_answer_show_every_hostile_string_with_markers_only(
    running: RunningStack,
) -> None:
    session = f"hostile-{uuid.uuid4().hex[:8]}"
    call = await start_call(running, session)
    try:
        form = await wait_for_pending(running.endpoints.interaction, session, timeout=60)
        listed = await maka("pending", "--session", session, state_dir=running.stack.state_dir)
        assert listed.code == 0, listed.err
        assert forbidden_in(listed.out) == []
        assert f"[prop{ESC_PICTURE}[2J\ufffdname]" in listed.out  # the property name
        assert f"Europe{ESC_PICTURE}[2J" in listed.out  # an option label
        assert ", us, " in listed.out  # an option titled "" is listed by its value alone
        # The 60 newlines before the fake provenance line are one blank line.
        assert "\n\n\n" not in listed.out
        code, out, err = await answer_by_walking(running, form.interaction_id)
        assert code == 0, out + err
        assert forbidden_in(out) == []
        assert forbidden_in(err) == []
        # The provenance and the warning come before the server's message; the default shows with its markers.
        assert out.index("From ") < out.index("Do not enter passwords") < out.index("Deploy?")
        assert f"[{ESC_PICTURE}[2J{ESC_PICTURE}[Hstaging{ESC_PICTURE}[2J" in out
        assert "    2) us\n" in out  # an option titled "" shows its value
        async with asyncio.timeout(60):
            stdout, stderr = await call.communicate()
    finally:
        if call.returncode is None:
            call.kill()
            await call.wait()
    assert call.returncode == 0, stderr.decode()
    result, notices = stdout.decode(), stderr.decode()
    assert forbidden_in(result) == []
    assert forbidden_in(notices) == []
    banner = f"{ESC_PICTURE}[2J{ESC_PICTURE}[H{ESC_PICTURE}[42;30m VERIFIED by Maka {ESC_PICTURE}[0m"
    assert result.startswith(f"done{banner}\u2407\ufffd31m\ufffdevil\ufffd\ufffd\ufffd\ufffd\n")
    assert result.endswith("\n\nresult end\n")
    assert f"progress 0.5/1 progress{ESC_PICTURE}[2J" in notices
    assert f"form {form.interaction_id}: Deploy?{ESC_PICTURE}[2J" in notices


async def test_maka_json_output_keeps_the_servers_exact_text_escaped(running: RunningStack) -> None:
    ran = await maka("tools", "--json", state_dir=running.stack.state_dir)
    assert ran.code == 0, ran.err
    assert "\\u001b[2J" in ran.out
    assert "\x1b" not in ran.out


async def provenance_shown(screen: Callable[[], Awaitable[str]]) -> bool:
    text = await screen()
    return "Claimed MCP server: hostile" in text and "Do not enter passwords" in text


async def test_maka_tui_in_a_real_terminal_keeps_provenance_and_warning_and_paints_no_fake_banner(
    running: RunningStack,
) -> None:
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    session = f"hostile-tui-{uuid.uuid4().hex[:8]}"
    socket_name = f"maka-untrusted-{uuid.uuid4().hex[:8]}"
    call = await start_call(running, session)

    async def tmux_run(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            tmux, "-L", socket_name, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await process.communicate()
        return out.decode()

    try:
        await wait_for_pending(running.endpoints.interaction, session, timeout=60)
        command = f"{sys.executable} -m surfaces.cli.main tui --session {session} --state-dir {running.stack.state_dir}"
        await tmux_run("new-session", "-d", "-x", "160", "-y", "70", "-c", str(ROOT), command)

        async def screen() -> str:
            return await tmux_run("capture-pane", "-p")

        async def shows_default() -> bool:
            if f"{ESC_PICTURE}[2J{ESC_PICTURE}[Hstaging" in await screen():
                return True
            await tmux_run("send-keys", "Tab")  # move focus on: the focused field scrolls into view
            return False

        await eventually(lambda: provenance_shown(screen), timeout=60, interval=0.2, what="the form")
        first_paint = await screen()
        try:
            await eventually(shows_default, timeout=60, interval=0.2, what="the TUI to show the form's default")
        except AssertionError as error:
            raise AssertionError(f"{error}; the screen:\n{await screen()}") from None
        text = first_paint
        assert "Requested by provider:" in text
        assert "Claimed MCP server: hostile" in text
        assert "Do not enter passwords" in text
        # Nothing cleared the screen or moved the cursor home to paint a banner: the app's own title is still
        # the top line and the server's sequences are on screen as text.
        assert "Maka — pending forms" in text.splitlines()[0]
        assert f"Deploy?{ESC_PICTURE}[2J{ESC_PICTURE}[H{ESC_PICTURE}[42;30m" in text
        assert forbidden_in(text) == []
        # With the default in view: still no clear screen, the default's sequences shown as text.
        shown = await screen()
        assert "Maka — pending forms" in shown.splitlines()[0]
        assert forbidden_in(shown) == []
    finally:
        await tmux_run("kill-server")
        call.kill()
        await call.wait()
