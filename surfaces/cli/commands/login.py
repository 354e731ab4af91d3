"""``maka login``: sign a person in at the OpenID Connect issuer, for every ``maka`` command and the TUI.

``maka login [--issuer URL] [--client-id ID] [--no-browser] [--timeout S]`` (defaults ``MAKA_OIDC_ISSUER`` and
``MAKA_OIDC_CLI_CLIENT_ID``) prints the authorization URL on stdout, opens it in a browser when one is available
(not with ``--no-browser``), waits for the issuer to send the browser back to a one-shot loopback listener, and
stores the verified sign-in in the credentials file (:mod:`surfaces.common.login`). From then on every ``maka``
command run with ``MAKA_OIDC_ISSUER`` set to that issuer, and no ``MAKA_SURFACE_TOKEN`` / ``MAKA_CALLER_TOKEN`` of
its own, presents the person's ID token (renewed with the refresh token once it expires).

Exit codes: 0 signed in (``signed in as NAME at ISSUER`` on stderr); 2 usage (no issuer or client id); 3 failed,
with a stable code first on stderr: ``ISSUER_UNREACHABLE``, ``TIMED_OUT``, ``REFUSED`` (the issuer refused or the
code exchange failed), ``NOT_VERIFIED`` (the ID token did not verify). No token is ever printed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from services.core.settings import check_issuer_url
from surfaces.common.login import LoginFailed, LoginSettings, login, open_browser

NAME = "login"
HELP = "sign in as a person at the OpenID Connect issuer (browser, PKCE) for every maka command and the TUI"
EXAMPLES = """\
  maka login                                   MAKA_OIDC_ISSUER and MAKA_OIDC_CLI_CLIENT_ID from the environment
  maka login --issuer https://id.example.com/realms/eng --client-id maka-cli --no-browser"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--issuer", default=None, metavar="URL", help="the issuer (default: $MAKA_OIDC_ISSUER)")
    parser.add_argument(
        "--client-id", default=None, metavar="ID", help="the CLI's client id at the issuer ($MAKA_OIDC_CLI_CLIENT_ID)"
    )
    parser.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")
    parser.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="how long to wait for the sign-in (default 300)"
    )


def _show(url: str) -> None:
    print("Sign in to Maka: open this URL in your browser (check the address first):", file=sys.stderr)
    print(url, flush=True)
    print("waiting for the sign-in to complete…", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        settings = LoginSettings()
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    issuer = (args.issuer or settings.oidc_issuer).strip()
    client_id = args.client_id or settings.oidc_cli_client_id
    if not issuer or not client_id:
        print(
            "USAGE: name the issuer and the client id (--issuer/--client-id, or MAKA_OIDC_ISSUER and "
            "MAKA_OIDC_CLI_CLIENT_ID)",
            file=sys.stderr,
        )
        return 2
    try:
        check_issuer_url(issuer)
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    try:
        sign_in = asyncio.run(
            login(
                settings,
                issuer=issuer,
                client_id=client_id,
                show_url=_show,
                browser=None if args.no_browser else open_browser,
                timeout=args.timeout,
            )
        )
    except LoginFailed as failed:
        print(f"{failed.code}: {failed}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("INTERRUPTED: nobody signed in", file=sys.stderr)
        return 3
    print(f"signed in as {sign_in.person} at {issuer}", file=sys.stderr)
    return 0
