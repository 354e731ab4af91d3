"""Caller authentication by role (docs/design.md#tokens): bearer tokens in gRPC metadata, scoped to sessions.

Servicers ask :func:`current_principal` who is calling and whether it may see a session. With no
tokens configured (the zero-configuration loopback default of ``make run``), every caller is the
:data:`ANONYMOUS` principal, which holds every role and sees every session.

Configuration: ``MAKA_AUTH_TOKENS_FILE`` names a JSON file::

    {"tokens": [{"name": "tui", "token": "s3cret", "roles": ["surface"], "sessions": ["s1", "s2"]},
                {"name": "broker", "token": "...", "roles": ["broker"], "hosts": ["team-a"]}]}

``MAKA_AUTH_TOKENS_DIR`` adds one such file per unit, ``<dir>/<unit>/tokens.json`` (in Kubernetes each team's
Secret mounted into the Interaction tier at ``<dir>/<team>``, so a team carries its own entries and removing the
team removes them; :meth:`TokenTable.from_files`).
(``sessions`` and ``hosts`` default to ``["*"]``; ``hosts`` names the Runtime Hosts a broker may serve
or a surface may read on an Interaction tier that serves several; ``"acts_for": true`` lets a service such
as the web surface name the signed-in person it acts for, see :data:`ACTS_FOR_HEADER`.) Tokens are
compared in constant time and never logged. Bearer JWTs of an OpenID Connect issuer are verified by
:mod:`services.core.jwt_auth` (:func:`authenticate_async`).
Callers send ``authorization: Bearer <token>``. Errors (raised as gRPC status by
:class:`AuthInterceptor`): no or unknown token → ``UNAUTHENTICATED`` (reason ``UNAUTHENTICATED``);
a method whose roles the principal lacks → ``PERMISSION_DENIED`` (reason ``PERMISSION_DENIED``).
Health checking and reflection are always open.
"""

from __future__ import annotations

import contextvars
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote

from services.core.reasons import AUTH_DOMAIN, AuthErrorReason
from services.core.status import PermissionDenied, Unauthenticated


class Role(StrEnum):
    """Who a caller is. Each RPC names the roles it admits."""

    PROVIDER = "provider"
    """Connects to the broker's ``Connect``."""
    CALLER = "caller"
    """Calls Tools: the broker's ``CallTool``, ``Stop``, ``ListTools``."""
    SURFACE = "surface"
    """Reads and answers forms: ``Attach``, ``Answer``, ``ListPending``, ``GetInteraction``."""
    BROKER = "broker"
    """The broker itself on the Interaction service's ``HostLink``."""
    ADMIN = "admin"
    """Every role and every session."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its name, roles, and the sessions it may see (``"*"`` = all)."""

    name: str
    roles: frozenset[Role]
    sessions: frozenset[str] = field(default_factory=lambda: frozenset({"*"}))
    hosts: frozenset[str] = field(default_factory=lambda: frozenset({"*"}))
    acts_for: bool = False
    """May name the person it acts for (:data:`ACTS_FOR_HEADER`): the tokens file's ``"acts_for": true``."""
    via: str = ""
    """For a person named by an acting service: that service's principal name (empty otherwise)."""
    issuer: str = ""
    """For a person whose own OpenID Connect token was verified: the token's issuer (empty otherwise)."""
    groups: frozenset[str] = field(default_factory=frozenset[str])
    """A person's groups: their verified token's groups claim, or what the service acting for them stated
    (:data:`ACTS_FOR_GROUPS_HEADER`). Empty for machines."""

    @property
    def person(self) -> bool:
        """True when this principal is a person: their own verified token, or named by a service acting for them."""
        return bool(self.issuer or self.via)

    def has_role(self, role: Role) -> bool:
        """True when the principal holds ``role`` (or is admin)."""
        return role in self.roles or Role.ADMIN in self.roles

    def may_see(self, session_id: str) -> bool:
        """True when the principal may see and answer forms of ``session_id``."""
        return "*" in self.sessions or session_id in self.sessions

    def may_serve_host(self, host_id: str) -> bool:
        """True when the principal may act for (broker) or read (surface) the Runtime Host ``host_id``."""
        return "*" in self.hosts or host_id in self.hosts

    def visible(self, session_ids: Iterable[str]) -> list[str]:
        """The subset of ``session_ids`` this principal may see, in order."""
        return [s for s in session_ids if self.may_see(s)]

    @property
    def all_sessions(self) -> bool:
        """True when the principal may see every session."""
        return "*" in self.sessions


ANONYMOUS = Principal(name="anonymous", roles=frozenset({Role.ADMIN}))
"""The principal of every call when no tokens are configured."""

_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("maka_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    """The principal of the RPC being served (set by :class:`AuthInterceptor`; ANONYMOUS without auth)."""
    return _current.get()


def set_current_principal(principal: Principal) -> contextvars.Token[Principal]:
    """Bind ``principal`` to the current context (used by the interceptor and by tests)."""
    return _current.set(principal)


class TokenFileError(ValueError):
    """The tokens file is not the documented shape (message names the entry, never a token)."""


@dataclass(frozen=True)
class _Entry:
    token: bytes
    principal: Principal


TOKENS_DIR_FILE = "tokens.json"
"""The file of each unit under ``MAKA_AUTH_TOKENS_DIR``: ``<dir>/<unit>/tokens.json``."""


class TokenTable:
    """The configured tokens: look a bearer token up in constant time per entry.

    ``required``: authentication is on even with no entry (a tokens directory whose units are all gone
    refuses every caller rather than admitting everyone as ANONYMOUS).
    """

    def __init__(self, entries: Sequence[tuple[str, Principal]], *, required: bool = False) -> None:
        self._entries = tuple(_Entry(token.encode(), principal) for token, principal in entries)
        self._required = required

    @property
    def enabled(self) -> bool:
        """False when no token is configured and none is required (everyone is ANONYMOUS)."""
        return bool(self._entries) or self._required

    @property
    def principals(self) -> tuple[Principal, ...]:
        """Every entry's principal, in file order (never the tokens)."""
        return tuple(entry.principal for entry in self._entries)

    def hosts_named(self, role: Role) -> list[str]:
        """Every Host id the tokens holding ``role`` itself (not by admin) name, in order, once each.

        Raises :class:`TokenFileError` when such a token names every Host (``"*"``): the Hosts could then
        not be told from the tokens."""
        hosts: dict[str, None] = {}
        for principal in self.principals:
            if role not in principal.roles:
                continue
            if "*" in principal.hosts:
                raise TokenFileError(f"the {role.value} token {principal.name!r} must list its 'hosts', not '*'")
            hosts.update(dict.fromkeys(sorted(principal.hosts)))
        return list(hosts)

    @classmethod
    def from_files(cls, path: Path | None, directory: Path | None = None) -> TokenTable:
        """``path`` (as :meth:`from_file`) plus the tokens of every ``<directory>/<unit>/tokens.json`` (units
        in name order; hidden entries such as a Secret volume's ``..data`` skipped). With ``directory`` set,
        authentication is on even when no unit is left. An entry repeated exactly (the same token, name, roles
        and scopes: a team's entries moving from the file to its unit) counts once. Raises :class:`TokenFileError`
        on a malformed file or on one token value in two different entries (which principal it is would be
        ambiguous)."""
        table = cls.from_file(path)
        if directory is None:
            return table
        entries = [(entry.token.decode(), entry.principal) for entry in table._entries]
        try:
            units = sorted(p for p in directory.iterdir() if not p.name.startswith(".") and p.is_dir())
        except OSError as error:
            raise TokenFileError(f"cannot read tokens directory {directory}: {type(error).__name__}") from None
        for unit in units:
            if (unit / TOKENS_DIR_FILE).exists():
                try:
                    loaded = cls.from_file(unit / TOKENS_DIR_FILE)
                except TokenFileError as error:
                    raise TokenFileError(f"{unit.name}/{TOKENS_DIR_FILE}: {error}") from None
                entries += [(entry.token.decode(), entry.principal) for entry in loaded._entries]
        seen: dict[str, Principal] = {}
        unique: list[tuple[str, Principal]] = []
        for token, principal in entries:
            if token not in seen:
                seen[token] = principal
                unique.append((token, principal))
            elif seen[token] != principal:
                raise TokenFileError(f"tokens {seen[token].name!r} and {principal.name!r} share one token value")
        return cls(unique, required=True)

    def lookup(self, token: str) -> Principal | None:
        """The principal for ``token``, or None. Compares against every entry with ``hmac.compare_digest``."""
        found: Principal | None = None
        candidate = token.encode()
        for entry in self._entries:
            if hmac.compare_digest(entry.token, candidate):
                found = entry.principal
        return found

    @classmethod
    def from_file(cls, path: Path | None) -> TokenTable:
        """Load ``path`` (see the module docstring); ``None`` gives an empty (disabled) table.

        Raises :class:`TokenFileError` on a malformed file.
        """
        if path is None:
            return cls([])
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise TokenFileError(f"cannot read tokens file {path}: {type(error).__name__}") from None
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise TokenFileError('tokens file must be {"tokens": [...]}')
        entries: list[tuple[str, Principal]] = []
        for index, raw in enumerate(data["tokens"]):
            entries.append((_entry_token(raw, index), _entry_principal(raw, index)))
        return cls(entries)


def _entry_token(raw: object, index: int) -> str:
    if not isinstance(raw, dict) or not isinstance(raw.get("token"), str) or len(raw["token"]) < 8:
        raise TokenFileError(f"tokens[{index}]: needs a 'token' string of at least 8 characters")
    token: str = raw["token"]
    return token


def _entry_principal(raw: dict[str, object], index: int) -> Principal:
    name = raw.get("name", f"token-{index}")
    roles = raw.get("roles")
    sessions = raw.get("sessions", ["*"])
    hosts = raw.get("hosts", ["*"])
    acts_for = raw.get("acts_for", False)
    if not isinstance(acts_for, bool):
        raise TokenFileError(f"tokens[{index}]: 'acts_for' must be true or false")
    if not isinstance(name, str):
        raise TokenFileError(f"tokens[{index}]: 'name' must be a string")
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
        raise TokenFileError(f"tokens[{index}]: 'roles' must be a non-empty list of {[r.value for r in Role]}")
    try:
        parsed = frozenset(Role(r) for r in roles)
    except ValueError:
        raise TokenFileError(f"tokens[{index}]: unknown role; use {[r.value for r in Role]}") from None
    if not isinstance(sessions, list) or not all(isinstance(s, str) for s in sessions):
        raise TokenFileError(f"tokens[{index}]: 'sessions' must be a list of strings")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise TokenFileError(f"tokens[{index}]: 'hosts' must be a non-empty list of host ids")
    return Principal(name=name, roles=parsed, sessions=frozenset(sessions), hosts=frozenset(hosts), acts_for=acts_for)


OPEN_SERVICES: frozenset[str] = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"})
"""Services every caller may use without a token."""


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata that authenticates with ``token`` (empty when ``token`` is falsy)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def _bearer(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer ") :]
    return None


ACTS_FOR_HEADER = "x-maka-acts-for"
"""Call metadata naming (percent-encoded) the person a service acts for, e.g. the web surface answering for
the person signed in to it. Honoured only from a principal with ``acts_for`` (a tokens-file entry's
``"acts_for": true``), or from :data:`ANONYMOUS` when no authentication is configured: the call then runs as that
person, ``via`` the service; from anyone else (a JWT, or a token whose roles include ``admin``) it is
``PERMISSION_DENIED``. A browser never reaches gRPC, so only the service itself can set it."""
MAX_PERSON_CHARS = 256
ACTS_FOR_GROUPS_HEADER = "x-maka-acts-for-groups"
"""Call metadata stating the groups of the person :data:`ACTS_FOR_HEADER` names (comma-separated, each
percent-encoded), e.g. the groups claim of the web page's signed-in person, for approver policies
(docs/security.md "Who sees a form"). Honoured only beside :data:`ACTS_FOR_HEADER` from a principal allowed to
act for people; anything else is ``PERMISSION_DENIED``."""
MAX_GROUPS = 64
ACTS_FOR_ISSUER_HEADER = "x-maka-acts-for-issuer"
"""Call metadata stating (percent-encoded) the OpenID Connect issuer that verified the person
:data:`ACTS_FOR_HEADER` names, e.g. the issuer the web page's person signed in at, or that of the JWT an MCP client
sent the front door; the acting principal then carries it as ``issuer`` (so an answer is labelled an OpenID
Connect person's only with one, a token's principal otherwise). Honoured only beside :data:`ACTS_FOR_HEADER` from a
principal allowed to act for people; anything else is ``PERMISSION_DENIED``."""


def acts_for_metadata(person: str, groups: Iterable[str] = (), issuer: str = "") -> tuple[tuple[str, str], ...]:
    """Call metadata that names ``person`` as the one this call is made for, their ``groups`` and the ``issuer``
    that verified them (empty for a person a static token names; all empty when ``person`` is empty)."""
    if not person:
        return ()
    named: tuple[tuple[str, str], ...] = ((ACTS_FOR_HEADER, quote(person, safe="@.-_+")),)
    listed = [quote(group, safe="@.-_+") for group in groups if group]
    if listed:
        named = (*named, (ACTS_FOR_GROUPS_HEADER, ",".join(listed)))
    return (*named, (ACTS_FOR_ISSUER_HEADER, quote(issuer, safe=""))) if issuer else named


class BearerVerifier(Protocol):
    """Verifies bearer values the tokens file does not hold (:class:`services.core.jwt_auth.JwtVerifier`)."""

    def accepts(self, token: str) -> bool:
        """True when ``token`` is worth verifying (its shape)."""
        ...

    async def verify(self, token: str) -> Principal:
        """The principal of ``token``; raises ``Unauthenticated`` with a stable message when it does not verify."""
        ...


def _acting_person(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key.lower() == ACTS_FOR_HEADER and isinstance(value, str):
            return unquote(value)
    return None


def _acting_groups(metadata: Sequence[tuple[str, str | bytes]] | None) -> frozenset[str] | None:
    """The groups :data:`ACTS_FOR_GROUPS_HEADER` states (None without the header). Raises PermissionDenied when
    they are malformed (too many, too long, not printable)."""
    for key, value in metadata or ():
        if key.lower() == ACTS_FOR_GROUPS_HEADER and isinstance(value, str):
            groups = [unquote(part) for part in value.split(",") if part]
            if len(groups) > MAX_GROUPS or not all(
                g.strip() and len(g) <= MAX_PERSON_CHARS and g.isprintable() for g in groups
            ):
                raise PermissionDenied(
                    AuthErrorReason.PERMISSION_DENIED,
                    f"{ACTS_FOR_GROUPS_HEADER} must list at most {MAX_GROUPS} group names",
                    domain=AUTH_DOMAIN,
                )
            return frozenset(groups)
    return None


def _acting_issuer(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The issuer :data:`ACTS_FOR_ISSUER_HEADER` states (None without the header). Raises PermissionDenied when it
    is malformed (empty, too long, not printable)."""
    for key, value in metadata or ():
        if key.lower() == ACTS_FOR_ISSUER_HEADER and isinstance(value, str):
            issuer = unquote(value)
            if not issuer.strip() or len(issuer) > MAX_PERSON_CHARS or not issuer.isprintable():
                raise PermissionDenied(
                    AuthErrorReason.PERMISSION_DENIED,
                    f"{ACTS_FOR_ISSUER_HEADER} must name an issuer",
                    domain=AUTH_DOMAIN,
                )
            return issuer
    return None


def _admit(
    principal: Principal,
    method: str,
    metadata: Sequence[tuple[str, str | bytes]] | None,
    method_roles: Mapping[str, frozenset[Role]],
) -> Principal:
    """Apply :data:`ACTS_FOR_HEADER`, then the method's roles, to an authenticated ``principal``."""
    person = _acting_person(metadata)
    groups = _acting_groups(metadata)
    issuer = _acting_issuer(metadata)
    for header, stated in ((ACTS_FOR_GROUPS_HEADER, groups), (ACTS_FOR_ISSUER_HEADER, issuer)):
        if stated is not None and person is None:
            raise PermissionDenied(
                AuthErrorReason.PERMISSION_DENIED, f"{header} needs {ACTS_FOR_HEADER}", domain=AUTH_DOMAIN
            )
    if person is not None:
        if not (principal.acts_for or principal is ANONYMOUS):  # never a role: only the tokens file's grant
            raise PermissionDenied(
                AuthErrorReason.PERMISSION_DENIED, f"{principal.name} may not act for people", domain=AUTH_DOMAIN
            )
        if not person.strip() or len(person) > MAX_PERSON_CHARS or not person.isprintable():
            raise PermissionDenied(
                AuthErrorReason.PERMISSION_DENIED, f"{ACTS_FOR_HEADER} must name a person", domain=AUTH_DOMAIN
            )
        principal = replace(
            principal,
            name=person,
            acts_for=False,
            via=principal.name,
            issuer=issuer or "",
            groups=groups or frozenset(),
        )
    roles = method_roles.get(method)
    if roles is not None and not any(principal.has_role(role) for role in roles):
        raise PermissionDenied(
            AuthErrorReason.PERMISSION_DENIED, f"{principal.name} may not call {method}", domain=AUTH_DOMAIN
        )
    return principal


def _unauthenticated() -> Unauthenticated:
    return Unauthenticated(AuthErrorReason.UNAUTHENTICATED, "a valid bearer token is required", domain=AUTH_DOMAIN)


def authenticate(
    table: TokenTable,
    method: str,
    metadata: Sequence[tuple[str, str | bytes]] | None,
    method_roles: Mapping[str, frozenset[Role]],
) -> Principal:
    """Decide who calls ``method`` (``/pkg.Service/Method``) and whether they may (the tokens file only).

    Returns the principal. Raises ``services.core.status.Unauthenticated`` (no/unknown token) or
    ``PermissionDenied`` (missing role). Open services and a disabled table admit ANONYMOUS.
    """
    service = method.strip("/").split("/", 1)[0]
    if service in OPEN_SERVICES:
        return ANONYMOUS
    if not table.enabled:
        return _admit(ANONYMOUS, method, metadata, method_roles)
    token = _bearer(metadata)
    principal = table.lookup(token) if token else None
    if principal is None:
        raise _unauthenticated()
    return _admit(principal, method, metadata, method_roles)


async def authenticate_async(
    table: TokenTable,
    method: str,
    metadata: Sequence[tuple[str, str | bytes]] | None,
    method_roles: Mapping[str, frozenset[Role]],
    verifier: BearerVerifier | None,
) -> Principal:
    """:func:`authenticate`, where a bearer value the tokens file does not hold may be a JWT ``verifier``
    accepts (its refusal's message says why, e.g. ``bearer token refused: expired``). With a verifier,
    authentication is on even when the tokens file is empty."""
    if verifier is None:
        return authenticate(table, method, metadata, method_roles)
    service = method.strip("/").split("/", 1)[0]
    if service in OPEN_SERVICES:
        return ANONYMOUS
    token = _bearer(metadata)
    principal = table.lookup(token) if token else None
    if principal is None:
        if not token or not verifier.accepts(token):
            raise _unauthenticated()
        principal = await verifier.verify(token)
    return _admit(principal, method, metadata, method_roles)
