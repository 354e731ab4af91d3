"""``maka logout [--issuer URL]``: forget the person's sign-in at the issuer (default ``MAKA_OIDC_ISSUER``).

The stored sign-in is removed from the credentials file first; then, best effort, its refresh token is revoked
(when the issuer offers revocation) and its session ended at the issuer (when it offers an end-session endpoint).
Exit codes: 0 signed out (also when nobody was signed in there: ``not signed in at ISSUER``); 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from surfaces.common.login import LoginSettings, logout

NAME = "logout"
HELP = "forget your sign-in at the OpenID Connect issuer (and end the session there when it offers that)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--issuer", default=None, metavar="URL", help="the issuer (default: $MAKA_OIDC_ISSUER)")


def run(args: argparse.Namespace) -> int:
    try:
        settings = LoginSettings()
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    issuer = (args.issuer or settings.oidc_issuer).strip()
    if not issuer:
        print("USAGE: name the issuer (--issuer, or MAKA_OIDC_ISSUER)", file=sys.stderr)
        return 2
    done = asyncio.run(logout(settings, issuer))
    if done is None:
        print(f"not signed in at {issuer}", file=sys.stderr)
        return 0
    told = "the session ended there" if done.ended_session else "the issuer was not told (best effort)"
    if done.revoked:
        told = "refresh token revoked; " + told
    print(f"signed out {done.sign_in.person} at {issuer} ({told})", file=sys.stderr)
    return 0
