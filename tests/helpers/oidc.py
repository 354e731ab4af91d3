"""A real OpenID provider for tests: PyPI ``oidc-provider-mock`` (Authlib's authorization server in a Flask app)
on a loopback port in a thread of this process, with discovery, JWKS, the authorization code flow (its sign-in
page lets a person pick a subject), PKCE, ID tokens and RP-initiated logout (``end_session_endpoint``).

:func:`id_token` walks the code flow over HTTP as a browser would (no shortcut into the provider), so tokens
are the provider's own, signed with its key.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

with warnings.catch_warnings():  # the package imports authlib.jose, which Authlib deprecates; its code, not ours
    warnings.simplefilter("ignore")
    import oidc_provider_mock

REDIRECT_URI = "http://127.0.0.1:9/callback"
"""Where :func:`id_token` asks the provider to send the code (never fetched: the code is read off the redirect)."""


@dataclass(frozen=True)
class Person:
    """A predefined user of the provider: its subject and the claims its tokens carry."""

    sub: str
    email: str
    groups: tuple[str, ...] = ()
    email_verified: bool = True
    """The ``email_verified`` claim its tokens carry (with scope ``email``)."""
    username: str = ""
    """Its ``preferred_username`` claim (with scope ``profile``; none when empty)."""

    def user(self) -> oidc_provider_mock.User:
        claims: dict[str, object] = {
            "email": self.email,
            "email_verified": self.email_verified,
            "groups": list(self.groups),
        }
        if self.username:
            claims["preferred_username"] = self.username
        return oidc_provider_mock.User(sub=self.sub, claims=claims)


ALICE = Person("alice", "alice@example.com", ("approvers",))
"""A person in the ``approvers`` group (which the tests' ``oidc_roles`` map to ``surface``)."""
BOB = Person("bob", "bob@example.com", ("visitors",))
"""A person in the ``visitors`` group only (which no role map grants anything)."""


@dataclass(frozen=True)
class Provider:
    """A running provider: ``issuer`` is its base URL (``http://localhost:PORT``), as its tokens' ``iss``."""

    issuer: str
    storage: Any = None
    """The provider's own key and client store (the package keeps it in a closure of its Flask app)."""

    server: Any = None
    """The package's ``AuthorizationServer`` (Authlib), for :meth:`renew_with_id_tokens`."""

    def renew_with_id_tokens(self) -> None:
        """Answer a refresh-token grant with a new ID token too, as Keycloak, Entra ID, Okta and Dex do (OpenID
        Connect Core 12.2): the package registers Authlib's refresh grant without Authlib's OpenID extension, so
        it is given the one its code grant uses (same key, claims and lifetime)."""
        grants = self.server._token_grants
        openid = next(ext for _grant, exts in grants for ext in exts or () if hasattr(ext, "process_token"))
        for index, (grant, extensions) in enumerate(grants):
            if grant.GRANT_TYPE == "refresh_token" and not extensions:
                grants[index] = (grant, [openid])

    def accept_public_clients(self) -> None:
        """Let clients without a secret use the token endpoint (``token_endpoint_auth_method=none``, PKCE binding the
        code), as a native app's client is registered at Keycloak, Entra ID, Okta or Dex (RFC 8252 8.4): the package
        allows only ``client_secret_basic``/``_post``. Its code and refresh grants are replaced, for this provider
        only, by subclasses that also list ``none``."""
        grants = self.server._token_grants
        for index, (grant, extensions) in enumerate(grants):
            methods = [*grant.TOKEN_ENDPOINT_AUTH_METHODS, "none"]
            grants[index] = (type(grant.__name__, (grant,), {"TOKEN_ENDPOINT_AUTH_METHODS": methods}), extensions)

    def set_token_lifetime(self, lifetime: timedelta) -> None:
        """Issue ID tokens that live ``lifetime`` from now on (negative: already expired)."""
        for _grant, extensions in self.server._token_grants:
            for extension in extensions or ():
                if hasattr(extension, "_token_max_mage"):
                    extension._token_max_mage = lifetime

    def revoke_tokens(self, person: Person) -> None:
        """The provider's own ``POST /users/<sub>/revoke-tokens``: ``person``'s access and refresh tokens stop
        working (as when an administrator ends their sessions)."""
        response = httpx.post(f"{self.issuer}/users/{person.sub}/revoke-tokens", timeout=10)
        assert response.status_code == 204, response.text

    def rotate_key(self) -> None:
        """Replace the provider's signing key (as an issuer rotates it): its JWKS then publishes only the new key,
        which signs every token from now on. The package names no ``kid``, as some issuers do not."""
        self.storage.jwk = type(self.storage.jwk).generate_key(is_private=True)


@contextmanager
def oidc_provider(
    people: Sequence[Person] = (), *, token_lifetime: timedelta = timedelta(hours=1)
) -> Iterator[Provider]:
    """Serve a provider for ``people`` on a free loopback port until the block ends.

    A negative ``token_lifetime`` makes the provider issue ID tokens that have already expired.
    """
    with oidc_provider_mock.run_server_in_thread(
        user_claims=[person.user() for person in people], access_token_max_age=token_lifetime
    ) as server:
        yield Provider(
            issuer=f"http://localhost:{server.server_port}",
            storage=_closure_of(server.app, "storage"),
            server=_closure_of(server.app, "authorization"),
        )


def _closure_of(app: Any, name: str) -> Any:
    """A closure variable of the package's ``before_request`` hook (it puts its ``storage`` and its Authlib
    ``authorization`` server in ``flask.g``)."""
    for hook in app.before_request_funcs.get(None, []):
        cells = dict(zip(hook.__code__.co_freevars, hook.__closure__ or (), strict=True))
        if name in cells:
            return cells[name].cell_contents
    raise AssertionError(f"oidc-provider-mock keeps its {name} elsewhere now: update tests/helpers/oidc.py")


def id_token(provider: Provider, person: Person, client_id: str, *, scope: str = "openid email") -> str:
    """An ID token the provider issues to ``client_id`` for ``person`` through the authorization code flow."""
    params = {
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "response_type": "code",
        "scope": scope,
        "state": secrets.token_urlsafe(8),
        "nonce": secrets.token_urlsafe(8),
    }
    with httpx.Client(base_url=provider.issuer, timeout=10) as client:
        chosen = client.post("/oauth2/authorize", params=params, data={"sub": person.sub})
        assert chosen.status_code == 302, chosen.text
        code = parse_qs(urlsplit(chosen.headers["location"]).query)["code"][0]
        token = client.post(
            "/oauth2/token",
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI},
            auth=(client_id, "any-secret"),
        )
        assert token.status_code == 200, token.text
        value: str = token.json()["id_token"]
        return value
