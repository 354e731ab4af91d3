"""Bearer JWTs from an OpenID Connect issuer, beside the static tokens file (docs/security.md, "Sign-in for people").

A gRPC caller or surface may send ``authorization: Bearer <JWT>`` signed by the configured issuer
(``MAKA_OIDC_ISSUER``). :class:`JwtVerifier` checks it with joserfc (the JOSE library Authlib is built on; no
crypto of ours): the signature against the issuer's JWKS (found by OpenID discovery, cached; a ``kid`` it
does not hold (or a signature that fails when the token names no ``kid``) refetches the JWKS, at most once per
:data:`MIN_REFRESH_SECONDS` whatever the outcome, one fetch at a time and never in the way of a token whose key
is cached (:class:`IssuerKeys`), so a rotated key is picked up and a flood of made-up ``kid`` values, or an issuer
that fails or hangs, neither hammers the issuer nor delays anyone), an asymmetric algorithm only, ``iss``,
``aud`` (one of ``MAKA_OIDC_AUDIENCES``), ``exp``/``nbf``/``iat`` within ``MAKA_OIDC_CLOCK_SKEW_SECONDS``.
A verified token becomes a :class:`~services.core.auth.Principal` named by ``MAKA_OIDC_NAME_CLAIM`` with the
roles ``MAKA_OIDC_ROLES`` grants its groups (``MAKA_OIDC_GROUPS_CLAIM``); named by ``email`` (the default) only
when ``email_verified`` is true.

Refusals are ``UNAUTHENTICATED`` with a stable message ``bearer token refused: <why>`` (:class:`Refusal`);
the token itself is never logged or put in a message.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
from joserfc import errors as jose_errors
from joserfc import jws, jwt
from joserfc.jwk import KeySet

from services.core.auth import Principal, Role
from services.core.backoff import Backoff
from services.core.reasons import AUTH_DOMAIN, AuthErrorReason
from services.core.settings import OidcSettings, check_issuer_url
from services.core.status import Unauthenticated

log = logging.getLogger("maka.auth.jwt")

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""Signature algorithms accepted: asymmetric only (never ``none`` or an HMAC keyed with a public key)."""
MIN_REFRESH_SECONDS = 30.0
"""The JWKS is fetched at most this often (an unknown ``kid`` refetches it), whatever the fetch's outcome."""
FETCH_BACKOFF = Backoff(initial=MIN_REFRESH_SECONDS, maximum=300.0)
"""After failed fetches in a row, the next waits this backoff's delay (at least :data:`MIN_REFRESH_SECONDS`)."""
FETCH_TIMEOUT_SECONDS = 5.0
"""A whole fetch (discovery and JWKS) gives up after this long."""
MAX_TOKEN_CHARS = 16_384
"""Longer bearer values are refused before any decoding."""


class Refusal(StrEnum):
    """Why a bearer JWT was refused: the stable tail of ``bearer token refused: <why>``."""

    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad signature"
    UNKNOWN_KEY = "unknown signing key"
    WRONG_ISSUER = "wrong issuer"
    WRONG_AUDIENCE = "wrong audience"
    EXPIRED = "expired"
    NOT_YET_VALID = "not yet valid"
    WRONG_NONCE = "wrong nonce"
    NO_NAME = "no name claim"
    EMAIL_NOT_VERIFIED = "email not verified"
    ISSUER_UNREACHABLE = "issuer unreachable"


class JwtRefused(Exception):
    """A bearer JWT did not verify; ``str()`` is the stable message (never the token)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"bearer token refused: {refusal.value}")
        self.refusal = refusal


@dataclass(frozen=True)
class OidcConfig:
    """What a verifier needs: the issuer, accepted audiences, the claims and the group → roles grants."""

    issuer: str
    audiences: frozenset[str]
    name_claim: str = "email"
    groups_claim: str = "groups"
    roles: Mapping[str, frozenset[Role]] | None = None
    clock_skew_seconds: int = 60

    @classmethod
    def from_settings(cls, settings: OidcSettings, *, audiences: Iterable[str] = ()) -> OidcConfig | None:
        """The config of ``settings`` (plus ``audiences``), or None when no issuer is set.

        Raises ``ValueError`` for an issuer that is not https (or loopback http) or an unknown role name.
        """
        if not settings.oidc_issuer:
            return None
        check_issuer_url(settings.oidc_issuer)
        return cls(
            issuer=settings.oidc_issuer,
            audiences=frozenset([*settings.oidc_audiences, *audiences]),
            name_claim=settings.oidc_name_claim,
            groups_claim=settings.oidc_groups_claim,
            roles=parse_roles(settings.oidc_roles),
            clock_skew_seconds=settings.oidc_clock_skew_seconds,
        )

    def roles_for(self, groups: Iterable[str]) -> frozenset[Role]:
        """The roles granted to a person in ``groups`` (plus those of ``*``)."""
        grants = self.roles or {}
        granted: set[Role] = set(grants.get("*", frozenset()))
        for group in groups:
            granted |= grants.get(group, frozenset())
        return frozenset(granted)


def parse_roles(raw: Mapping[str, list[str]]) -> dict[str, frozenset[Role]]:
    """``MAKA_OIDC_ROLES`` as group → roles; raises ``ValueError`` naming an unknown role."""
    parsed: dict[str, frozenset[Role]] = {}
    for group, names in raw.items():
        if Role.ADMIN.value in names:
            raise ValueError(f"MAKA_OIDC_ROLES[{group!r}]: a group may not be granted 'admin'")
        try:
            parsed[group] = frozenset(Role(name) for name in names)
        except ValueError:
            raise ValueError(
                f"MAKA_OIDC_ROLES[{group!r}]: unknown role; use {[r.value for r in Role if r is not Role.ADMIN]}"
            ) from None
    return parsed


class IssuerKeys:
    """The issuer's discovery document and JWKS, fetched on first use and cached.

    One fetch at a time, never under a lock: :meth:`current` returns the cached set at once (a token whose
    ``kid`` it holds never waits for a fetch); a caller that needs a fetch while one runs joins it (single
    flight). A fetch starts at most once per :data:`MIN_REFRESH_SECONDS` whether it succeeds, fails or times out
    (:data:`FETCH_TIMEOUT_SECONDS` for the whole fetch); after failures the wait grows by :data:`FETCH_BACKOFF`
    (negative caching). Raises :class:`JwtRefused` (``issuer unreachable``) when there is no key set to use.
    """

    def __init__(
        self, issuer: str, *, clock: Callable[[], float] = time.monotonic, backoff: Backoff = FETCH_BACKOFF
    ) -> None:
        self.issuer = issuer
        self._clock = clock
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._next_fetch_at = -math.inf
        self._failures = backoff.attempts()
        self._fetch: asyncio.Task[KeySet | None] | None = None
        self.fetches = 0
        """How many times the JWKS was fetched (for tests and status)."""
        self.joined = 0
        """How many callers waited for a fetch another had started (for tests and status)."""

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False) as client:
                response = await client.get(url, headers={"Accept": "application/json"})
                response.raise_for_status()
                body = response.json()
        except (httpx.HTTPError, ValueError) as error:
            log.warning("auth.oidc_fetch_failed", extra={"url": url, "error": type(error).__name__})
            raise JwtRefused(Refusal.ISSUER_UNREACHABLE) from None
        if not isinstance(body, dict):
            raise JwtRefused(Refusal.ISSUER_UNREACHABLE)
        return body

    async def metadata(self) -> dict[str, Any]:
        """The discovery document (``{issuer}/.well-known/openid-configuration``); its ``issuer`` must match."""
        if self._metadata is None:
            body = await self._get_json(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
            if body.get("issuer") != self.issuer or not isinstance(body.get("jwks_uri"), str):
                log.warning("auth.oidc_discovery_mismatch", extra={"issuer": self.issuer})
                raise JwtRefused(Refusal.ISSUER_UNREACHABLE)
            self._metadata = body
        return self._metadata

    async def current(self, *, refresh: bool = False) -> tuple[KeySet, bool]:
        """The cached JWKS, and whether it came from a fetch this call waited for (so refreshing it again would
        fetch nothing newer). With ``refresh`` (or none cached) the result of a fetch: the one running, or a new
        one when the last started at least the refetch interval ago (else the cached set, or ``issuer
        unreachable`` when there is none)."""
        keys = self._keys
        if keys is not None and not refresh:
            return keys, False
        if self._fetch is None:
            if self._clock() < self._next_fetch_at:
                if keys is None:
                    raise JwtRefused(Refusal.ISSUER_UNREACHABLE)
                return keys, False
            self._fetch = asyncio.create_task(self._refetch(), name=f"jwks {self.issuer}")
        else:
            self.joined += 1
        fetched = await asyncio.shield(self._fetch)
        if fetched is None:
            if keys is None:
                raise JwtRefused(Refusal.ISSUER_UNREACHABLE)
            return keys, False
        return fetched, True

    async def _refetch(self) -> KeySet | None:
        """One fetch: the new key set (also cached), or None when it failed or timed out (the old set stays)."""
        started = self._clock()
        self._next_fetch_at = started + MIN_REFRESH_SECONDS
        self.fetches += 1
        keys: KeySet | None = None
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_SECONDS):
                jwks_uri: str = (await self.metadata())["jwks_uri"]
                body = await self._get_json(jwks_uri)
            keys = KeySet.import_key_set(body)  # type: ignore[arg-type]
        except TimeoutError:
            log.warning("auth.oidc_fetch_failed", extra={"issuer": self.issuer, "error": "TimeoutError"})
        except JwtRefused:
            pass  # logged where it failed
        except (jose_errors.JoseError, ValueError, KeyError, TypeError):
            log.warning("auth.oidc_jwks_invalid", extra={"issuer": self.issuer})
        finally:
            self._fetch = None
        if keys is None:
            wait = max(MIN_REFRESH_SECONDS, self._failures.next_delay())
            self._next_fetch_at = started + wait
            log.info("auth.oidc_jwks_refetch_deferred", extra={"issuer": self.issuer, "seconds": round(wait, 1)})
            return None
        self._failures.reset()
        self._keys = keys
        log.info("auth.oidc_jwks_fetched", extra={"issuer": self.issuer, "keys": len(keys.keys)})
        return keys


class JwtVerifier:
    """Verify bearer JWTs of one issuer and turn them into principals (see the module docstring)."""

    def __init__(
        self,
        config: OidcConfig,
        *,
        keys: IssuerKeys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keys = keys or IssuerKeys(config.issuer)
        self._clock = clock

    @staticmethod
    def accepts(token: str) -> bool:
        """True when ``token`` has a JWS compact shape (three dot-separated parts): worth verifying."""
        return token.count(".") == 2 and len(token) <= MAX_TOKEN_CHARS

    async def claims(
        self, token: str, *, audiences: Iterable[str] | None = None, nonce: str | None = None
    ) -> dict[str, Any]:
        """The verified claims of ``token`` (``aud`` one of ``audiences``, default the config's; ``nonce``
        when given). Raises :class:`JwtRefused`."""
        if not self.accepts(token):
            raise JwtRefused(Refusal.MALFORMED)
        decoded = await self._decode(token)
        accepted = sorted(self.config.audiences if audiences is None else audiences)
        options: dict[str, Any] = {
            "iss": {"essential": True, "value": self.config.issuer},
            "aud": {"essential": True, "values": accepted},
            "exp": {"essential": True},
        }
        if nonce is not None:
            options["nonce"] = {"essential": True, "value": nonce}
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()), leeway=self.config.clock_skew_seconds, **options
        )
        try:
            registry.validate(decoded)
        except jose_errors.ExpiredTokenError:
            raise JwtRefused(Refusal.EXPIRED) from None
        except (jose_errors.InvalidClaimError, jose_errors.MissingClaimError) as error:
            raise JwtRefused(_claim_refusal(getattr(error, "claim", ""))) from None
        except jose_errors.InvalidTokenError:  # nbf or iat in the future
            raise JwtRefused(Refusal.NOT_YET_VALID) from None
        except jose_errors.JoseError:
            raise JwtRefused(Refusal.MALFORMED) from None
        return decoded

    async def _decode(self, token: str) -> dict[str, Any]:
        refresh = False
        while True:
            keys, fresh = await self.keys.current(refresh=refresh)
            last = refresh or fresh  # after a fetch this token waited for, refetching could find nothing newer
            try:
                return dict(jwt.decode(token, keys, algorithms=ALGORITHMS).claims)
            except (jose_errors.InvalidKeyIdError, jose_errors.MissingKeyError):
                if last:
                    raise JwtRefused(Refusal.UNKNOWN_KEY) from None
            except jose_errors.BadSignatureError:
                if last or _has_kid(token):
                    raise JwtRefused(Refusal.BAD_SIGNATURE) from None
            except (jose_errors.JoseError, ValueError, TypeError):
                raise JwtRefused(Refusal.MALFORMED) from None
            refresh = True  # a key the cached set does not hold (or no kid): the issuer may have rotated; refetch once

    def principal(self, claims: Mapping[str, Any]) -> Principal:
        """The principal of verified ``claims``: named by the name claim, with the roles its groups grant.

        Raises :class:`JwtRefused`: ``no name claim`` when the claim is missing or not a short string; ``email not
        verified`` when the name claim is ``email`` and ``email_verified`` is not true (anyone may put any address
        on an account at many issuers: an unverified one names nobody).
        """
        name = claims.get(self.config.name_claim)
        if not isinstance(name, str) or not name.strip() or len(name) > 256:
            raise JwtRefused(Refusal.NO_NAME)
        if self.config.name_claim == "email" and not email_verified(claims):
            raise JwtRefused(Refusal.EMAIL_NOT_VERIFIED)
        groups = groups_of(claims, self.config.groups_claim)
        return Principal(
            name=name,
            roles=self.config.roles_for(groups),
            issuer=str(claims.get("iss", "")),
            groups=frozenset(groups),
        )

    async def verify(self, token: str) -> Principal:
        """The principal of bearer ``token``; raises ``Unauthenticated`` with ``bearer token refused: <why>``."""
        try:
            return self.principal(await self.claims(token))
        except JwtRefused as refused:
            log.info("auth.jwt_refused", extra={"why": refused.refusal.value})
            raise Unauthenticated(AuthErrorReason.UNAUTHENTICATED, str(refused), domain=AUTH_DOMAIN) from None


def email_verified(claims: Mapping[str, Any]) -> bool:
    """True when ``claims`` say their ``email`` is verified: ``email_verified`` is ``true`` (or the string
    ``"true"``, as some issuers send it); missing or anything else is not."""
    value = claims.get("email_verified")
    return value is True or value == "true"


def _has_kid(token: str) -> bool:
    try:
        return bool(jws.extract_compact(token.encode()).headers().get("kid"))
    except (jose_errors.JoseError, ValueError):
        return False


def groups_of(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups ``claims`` names under ``claim`` (a list of strings, or one string); others are ignored."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _claim_refusal(claim: str) -> Refusal:
    return {
        "aud": Refusal.WRONG_AUDIENCE,
        "iss": Refusal.WRONG_ISSUER,
        "exp": Refusal.EXPIRED,
        "nbf": Refusal.NOT_YET_VALID,
        "nonce": Refusal.WRONG_NONCE,
    }.get(claim, Refusal.MALFORMED)


def verifier_from_settings(settings: OidcSettings) -> JwtVerifier | None:
    """A gRPC service's verifier for ``settings``: None unless both ``MAKA_OIDC_ISSUER`` and
    ``MAKA_OIDC_AUDIENCES`` are set. Raises ``ValueError`` on a bad config."""
    if not settings.oidc_audiences:
        return None
    config = OidcConfig.from_settings(settings)
    return JwtVerifier(config) if config is not None else None
