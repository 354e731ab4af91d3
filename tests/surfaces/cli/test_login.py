"""``maka login`` / ``maka logout`` as real processes against a real OpenID provider (``oidc-provider-mock``: its own
authorization form, code flow with PKCE, ID tokens signed with its key, refresh tokens, end-session endpoint), and
the real Interaction service trusting that issuer: the person signed in is who ``maka pending``, ``maka answer`` and
``maka history`` act as; an expired ID token is renewed with the refresh token; one that cannot be renewed says
``run `maka login```; the credentials file is 0600 and no token reaches any output or log."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import secrets
import shlex
import shutil
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from maka.form.v1 import form_pb2
from services.core.form import Action, Answer
from surfaces.cli.commands.status import sign_in_lines, signed_in
from surfaces.cli.commands.tui import person_token
from surfaces.cli.main import _token_env, build_parser
from surfaces.common.interactions import FormOpened, FormSnapshot, Interactions
from surfaces.tui.backend import FollowingBackend
from tests.helpers.cli import MAKA, ROOT, Ran, maka
from tests.helpers.oidc import Person, Provider, oidc_provider
from tests.helpers.waiting import eventually
from tests.surfaces.helpers import LiveInteraction, deploy_form, interaction_service

CLIENT_ID = "maka-cli"
BROKER_TOKEN = "login-broker-token"
ALICE = Person("alice", "alice@example.com", ("approvers",))
BOB = Person("bob", "bob@example.com", ("visitors",))
CAROL = Person("carol", "carol@example.com", ("approvers",))
TIMEOUT = 60.0


@pytest.fixture
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, CAROL]) as running:
        running.renew_with_id_tokens()
        running.accept_public_clients()
        yield running


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    return tmp_path / "config"


def environment(config_home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any Maka token or target, with its own config dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKA_")}
    return {**env, "XDG_CONFIG_HOME": str(config_home), **extra}


@asynccontextmanager
async def tier(redis_url: str, tmp_path: Path, provider: Provider, host: str) -> AsyncIterator[LiveInteraction]:
    """The real Interaction service with a tokens file (the broker's only) and the provider as its issuer: the CLI's
    ID tokens are accepted (audience ``maka-cli``) and the group ``approvers`` is granted the ``surface`` role."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]}]}))
    async with interaction_service(
        redis_url,
        broker_token=BROKER_TOKEN,
        host_id=host,
        auth_tokens_file=tokens,
        oidc_issuer=provider.issuer,
        oidc_audiences=[CLIENT_ID],
        oidc_roles={"approvers": ["surface"]},
    ) as live:
        yield live


@asynccontextmanager
async def login_process(provider: Provider, config_home: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``maka login --no-browser`` as a real process (killed if the test leaves it running)."""
    process = await asyncio.create_subprocess_exec(
        *MAKA,
        "login",
        "--no-browser",
        "--issuer",
        provider.issuer,
        "--client-id",
        CLIENT_ID,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=environment(config_home),
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


async def sign_in(provider: Provider, person: Person, config_home: Path) -> Ran:
    """Run ``maka login --no-browser`` as a process, read the URL it prints, complete the provider's authorization
    form as ``person`` would in a browser (choose the subject, follow the redirect to the loopback listener), and
    wait for the process to end."""
    async with login_process(provider, config_home) as process, asyncio.timeout(TIMEOUT):
        assert process.stdout is not None
        url = (await process.stdout.readline()).decode().strip()
        assert url.startswith(f"{provider.issuer}/oauth2/authorize?"), url
        async with httpx.AsyncClient(timeout=10) as browser:
            form = await browser.get(url)
            assert form.status_code == 200
            assert "Authorize" in form.text
            chosen = await browser.post(url, data={"sub": person.sub})
            assert chosen.status_code == 302, chosen.text
            callback = chosen.headers["location"]
            assert callback.startswith("http://127.0.0.1:")
            assert "/callback?" in callback
            landed = await browser.get(callback)
        out, err = await process.communicate()
    assert process.returncode is not None
    assert landed.status_code == (200 if process.returncode == 0 else 403), landed.text
    return Ran(process.returncode, url + "\n" + out.decode(), err.decode() + landed.text)


def stored(config_home: Path) -> dict[str, Any]:
    entries: dict[str, Any] = json.loads((config_home / "maka" / "credentials.json").read_text())["sign_ins"]
    return entries


async def as_person(config_home: Path, provider: Provider, live: LiveInteraction, host: str, *argv: str) -> Ran:
    """``maka ARGV`` against the tier with ``MAKA_OIDC_ISSUER`` naming the provider and no token of its own."""
    env = environment(config_home, MAKA_OIDC_ISSUER=provider.issuer)
    return await maka(*argv, "--interaction", live.address, "--host-id", host, state_dir=None, env=env)


async def test_maka_login_signs_a_person_in_and_pending_answer_and_history_act_as_them(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = f"login-{secrets.token_hex(4)}"
    async with tier(redis_url, tmp_path, provider, host) as live:
        opened = await live.link.open(deploy_form("Deploy build-9?"), session_id="s1")
        login = await sign_in(provider, ALICE, config_home)
        assert login.code == 0, login.err
        assert f"signed in as alice@example.com at {provider.issuer}" in login.err
        assert "Signed in to Maka as alice@example.com" in login.err  # the browser's page
        pending = await as_person(config_home, provider, live, host, "pending", "--json")
        assert pending.code == 0, pending.err
        assert [form["id"] for form in json.loads(pending.out)] == [opened.interaction_id]
        values = json.dumps({"environment": "production"})
        answer = await as_person(
            config_home, provider, live, host, "answer", opened.interaction_id, "accept", "--values", values
        )
        assert answer.code == 0, answer.err
        settled = await asyncio.wait_for(live.link.next_settled(), TIMEOUT)
        assert (settled.interaction_id, settled.answer.action) == (opened.interaction_id, form_pb2.ACTION_ACCEPT)
        history = await as_person(config_home, provider, live, host, "history", "--json")
        assert history.code == 0, history.err
    (entry,) = json.loads(history.out)
    assert entry["answered_by"] == {
        "principal": "alice@example.com",
        "principal_kind": "oidc",
        "surface": "cli",
        "issuer": provider.issuer,
        "via": None,
    }
    # The credentials file: 0600 in a 0700 folder, one sign-in keyed by the issuer.
    path = config_home / "maka" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (issuer,) = stored(config_home)
    saved = stored(config_home)[issuer]
    assert (issuer, saved["person"], saved["client_id"]) == (provider.issuer, "alice@example.com", CLIENT_ID)
    # Canaries: neither token reaches a command's output or a line the Interaction service logged (every Maka
    # logger; the provider, a test double, logs what it issues).
    ours = [record for record in caplog.records if record.name.startswith("maka")]
    assert any(record.getMessage() == "answered" for record in ours)
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in ours)
    for secret in (saved["id_token"], saved["refresh_token"]):
        assert secret
        for ran in (login, pending, answer, history):
            assert secret not in ran.out
            assert secret not in ran.err
        assert secret not in logged


async def test_without_the_issuer_set_commands_do_not_send_the_sign_in_and_are_refused(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path
) -> None:
    host = f"login-{secrets.token_hex(4)}"
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        env = environment(config_home)  # no MAKA_OIDC_ISSUER: the target's issuer is not known to match
        ran = await maka("pending", "--interaction", live.address, "--host-id", host, state_dir=None, env=env)
    assert ran.code == 3
    assert ran.reason.startswith("UNAUTHENTICATED")


async def test_an_expired_id_token_is_renewed_with_the_refresh_token_and_stored(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path
) -> None:
    host = f"login-{secrets.token_hex(4)}"
    # ID tokens that live 20 s: already inside the 30 s margin in which maka counts one as expired.
    provider.set_token_lifetime(timedelta(seconds=20))
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        before = stored(config_home)[provider.issuer]
        provider.set_token_lifetime(timedelta(hours=1))
        ran = await as_person(config_home, provider, live, host, "pending", "--json")
        assert ran.code == 0, ran.err
    after = stored(config_home)[provider.issuer]
    assert after["id_token"] != before["id_token"]
    assert after["expires_at"] > before["expires_at"] + 3000
    assert (after["person"], after["subject"], after["signed_in_at"]) == (
        "alice@example.com",
        "alice",
        before["signed_in_at"],
    )
    assert after["id_token"] not in ran.out + ran.err


async def test_a_sign_in_the_issuer_will_not_renew_asks_to_run_maka_login(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path
) -> None:
    host = f"login-{secrets.token_hex(4)}"
    provider.set_token_lifetime(timedelta(seconds=20))
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        provider.revoke_tokens(ALICE)  # the refresh token no longer works
        ran = await as_person(config_home, provider, live, host, "pending")
    assert ran.code == 3
    assert ran.reason == (
        f"UNAUTHENTICATED: the sign-in of alice@example.com at {provider.issuer} has expired and could not be"
        " renewed: run `maka login`"
    )


async def test_maka_logout_forgets_the_sign_in_and_ends_the_session_at_the_issuer(
    provider: Provider, config_home: Path
) -> None:
    assert (await sign_in(provider, ALICE, config_home)).code == 0
    env = environment(config_home, MAKA_OIDC_ISSUER=provider.issuer)
    out = await maka("logout", state_dir=None, env=env)
    assert out.code == 0, out.err
    assert f"signed out alice@example.com at {provider.issuer} (the session ended there)" in out.err
    assert stored(config_home) == {}
    again = await maka("logout", state_dir=None, env=env)
    assert (again.code, again.err.strip()) == (0, f"not signed in at {provider.issuer}")


async def test_a_refused_sign_in_stores_nothing_and_says_why(provider: Provider, config_home: Path) -> None:
    """The person denies the request on the provider's page. The package's denial redirect leaves out ``state``
    (RFC 6749 4.1.2.1 requires it): the listener refuses that as not this sign-in; the same denial with the
    sign-in's ``state``, as a conformant issuer sends it, ends the sign-in."""
    async with login_process(provider, config_home) as process, asyncio.timeout(TIMEOUT):
        assert process.stdout is not None
        url = httpx.URL((await process.stdout.readline()).decode().strip())
        async with httpx.AsyncClient(timeout=10) as browser:
            denied = await browser.post(url, data={"action": "deny"})
            assert denied.status_code == 302
            redirect = httpx.URL(denied.headers["location"])
            assert redirect.params["error"] == "access_denied"
            assert (await browser.get(redirect)).status_code == 400  # no state: not this sign-in
            landed = await browser.get(redirect.copy_set_param("state", url.params["state"]))
        _out, err = await process.communicate()
    assert process.returncode == 3
    assert landed.status_code == 403
    assert err.decode().splitlines()[-1] == f"REFUSED: {provider.issuer} refused the sign-in (access_denied)"
    assert not (config_home / "maka" / "credentials.json").exists()


async def test_the_loopback_listener_ignores_a_callback_with_another_state(
    provider: Provider, config_home: Path
) -> None:
    """A request to the listener that does not carry this sign-in's ``state`` is refused and changes nothing: the
    real answer still completes the sign-in."""
    async with login_process(provider, config_home) as process, asyncio.timeout(TIMEOUT):
        assert process.stdout is not None
        url = (await process.stdout.readline()).decode().strip()
        async with httpx.AsyncClient(timeout=10) as browser:
            chosen = await browser.post(url, data={"sub": ALICE.sub})
            callback = httpx.URL(chosen.headers["location"])
            forged = await browser.get(callback.copy_set_param("state", "forged-" + secrets.token_urlsafe(8)))
            assert forged.status_code == 400
            landed = await browser.get(callback)
            assert landed.status_code == 200
        _out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert stored(config_home)[provider.issuer]["person"] == "alice@example.com"


async def test_status_shows_who_commands_act_as_and_never_a_token(
    provider: Provider, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await sign_in(provider, ALICE, config_home)).code == 0
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("MAKA_OIDC_ISSUER", provider.issuer)
    data = signed_in()
    assert data["person"]["person"] == "alice@example.com"
    (line,) = sign_in_lines(data)
    assert line.startswith(f"signed in as alice@example.com at {provider.issuer} (until ")
    saved = stored(config_home)[provider.issuer]
    assert saved["id_token"] not in json.dumps(data)
    assert saved["refresh_token"] not in json.dumps(data)
    monkeypatch.delenv("MAKA_OIDC_ISSUER")
    (other,) = sign_in_lines(signed_in())
    assert other.endswith(f"(not used: MAKA_OIDC_ISSUER={provider.issuer} acts as them)")


async def test_the_tui_connects_with_the_signed_in_persons_token_and_answers_as_them(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maka tui``'s wiring without the terminal: the token the entry point gives the ``tui`` command (read from the
    credentials file the real ``maka login`` wrote) and the backend the command builds (``FollowingBackend`` over
    ``Interactions.connect``, surface kind ``tui``) see the form and answer it as the person."""
    host = f"login-{secrets.token_hex(4)}"
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        opened = await live.link.open(deploy_form("Deploy build-11?"), session_id="s1", wait_seconds=300)
        for name in ("MAKA_SURFACE_TOKEN", "MAKA_CALLER_TOKEN", "MAKA_HOST_ID", "MAKA_HOST_IDS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
        monkeypatch.setenv("MAKA_OIDC_ISSUER", provider.issuer)
        parser, _ = build_parser(["tui"])
        args = parser.parse_args(["tui", "--session", "s1", "--interaction", live.address, "--host-id", host])
        found = await asyncio.to_thread(_token_env, args)
        assert found is not None
        assert found["MAKA_SURFACE_TOKEN"] == stored(config_home)[provider.issuer]["id_token"]
        for name, value in found.items():
            monkeypatch.setenv(name, value)
        backend = FollowingBackend(
            lambda: live.address,
            connect=functools.partial(Interactions.connect, host_id=host, pool=None, surface_kind="tui"),
        )
        try:
            async with asyncio.timeout(TIMEOUT):
                snapshot = await anext(aiter(backend.attach(["s1"])))
            assert isinstance(snapshot, FormSnapshot)
            assert [form.interaction_id for form in snapshot.pending] == [opened.interaction_id]
            await backend.answer(opened.interaction_id, Answer(Action.CANCEL))
        finally:
            await backend.close()
        settled = await asyncio.wait_for(live.link.next_settled(), TIMEOUT)
    assert settled.interaction_id == opened.interaction_id
    assert (settled.answered_by.principal, settled.answered_by.surface_kind, settled.answered_by.issuer) == (
        "alice@example.com",
        "tui",
        provider.issuer,
    )


async def test_the_tui_reads_the_stored_sign_in_per_call_so_a_new_maka_login_applies_without_a_restart(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``tui`` command's backend (``FollowingBackend`` with :func:`person_token`) answers as alice, then, after a
    real ``maka login`` as carol rewrote the credentials file, as carol: on the same attached stream, which never
    reconnected (its live events keep coming)."""
    host = f"login-{secrets.token_hex(4)}"
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        first = await live.link.open(deploy_form("Deploy build-21?"), session_id="s1", wait_seconds=300)
        for name in ("MAKA_SURFACE_TOKEN", "MAKA_CALLER_TOKEN", "MAKA_HOST_ID", "MAKA_HOST_IDS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
        monkeypatch.setenv("MAKA_OIDC_ISSUER", provider.issuer)
        parser, _ = build_parser(["tui"])
        args = parser.parse_args(["tui", "--session", "s1", "--interaction", live.address, "--host-id", host])
        found = await asyncio.to_thread(_token_env, args)  # what the entry point gives the command
        assert found is not None
        for name, value in found.items():
            monkeypatch.setenv(name, value)
        followed = await asyncio.to_thread(person_token)
        assert followed is not None, "the TUI's token is the signed-in person's: it follows their sign-in"
        backend = FollowingBackend(
            lambda: live.address,
            connect=functools.partial(Interactions.connect, host_id=host, pool=None, surface_kind="tui"),
            token=followed,
        )
        events = aiter(backend.attach(["s1"]))
        try:
            async with asyncio.timeout(TIMEOUT):
                snapshot = await anext(events)
                assert isinstance(snapshot, FormSnapshot)
                assert [form.interaction_id for form in snapshot.pending] == [first.interaction_id]
                await backend.answer(first.interaction_id, Answer(Action.CANCEL))
                answered_first = await live.link.next_settled()

                assert (await sign_in(provider, CAROL, config_home)).code == 0  # the token file changes under it
                second = await live.link.open(deploy_form("Deploy build-22?"), session_id="s1", wait_seconds=300)
                while True:  # the live event of the second form, on the stream alice's token opened
                    event = await anext(events)
                    assert not isinstance(event, FormSnapshot), "the attached stream never reconnected"
                    if isinstance(event, FormOpened) and event.interaction.interaction_id == second.interaction_id:
                        break
                await backend.answer(second.interaction_id, Answer(Action.CANCEL))
                answered_second = await live.link.next_settled()
        finally:
            await backend.close()
    assert answered_first.interaction_id == first.interaction_id
    assert answered_first.answered_by.principal == ALICE.email
    assert answered_second.interaction_id == second.interaction_id
    assert (answered_second.answered_by.principal, answered_second.answered_by.surface_kind) == (CAROL.email, "tui")


@pytest.mark.slow
async def test_maka_tui_in_a_real_terminal_acts_as_the_signed_in_person(
    redis_url: str, tmp_path: Path, provider: Provider, config_home: Path
) -> None:
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    socket_name = f"maka-login-tui-{secrets.token_hex(4)}"
    host = f"login-{secrets.token_hex(4)}"
    async with tier(redis_url, tmp_path, provider, host) as live:
        assert (await sign_in(provider, ALICE, config_home)).code == 0
        opened = await live.link.open(deploy_form("Deploy build-12?"), session_id="s1", wait_seconds=300)
        unset = ("MAKA_SURFACE_TOKEN", "MAKA_CALLER_TOKEN", "MAKA_HOST_ID", "MAKA_HOST_IDS")
        command = shlex.join(
            [
                "env",
                *(f"-u{name}" for name in unset),
                f"XDG_CONFIG_HOME={config_home}",
                f"MAKA_OIDC_ISSUER={provider.issuer}",
                *MAKA,
                "tui",
                "--session",
                "s1",
                "--interaction",
                live.address,
                "--host-id",
                host,
            ]
        )

        async def tmux_run(*args: str) -> str:
            process = await asyncio.create_subprocess_exec(
                tmux, "-L", socket_name, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await process.communicate()
            return out.decode()

        await tmux_run("new-session", "-d", "-x", "150", "-y", "50", "-c", str(ROOT), command)
        try:

            async def shows_form() -> bool:
                text = await tmux_run("capture-pane", "-p")
                return "Deploy build-12?" in text and "Do not enter passwords" in text

            await eventually(shows_form, timeout=30, interval=0.1, what="the TUI to show the form")
            await tmux_run("send-keys", "Escape")
            settled = await asyncio.wait_for(live.link.next_settled(), TIMEOUT)
        finally:
            await tmux_run("kill-server")
    assert settled.interaction_id == opened.interaction_id
    assert settled.answer.action == form_pb2.ACTION_CANCEL
    assert (settled.answered_by.principal, settled.answered_by.surface_kind) == ("alice@example.com", "tui")
