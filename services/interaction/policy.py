"""Who sees a form made for a person (docs/security.md "Who sees a form"): the person and the approvers a policy
names.

A call made for a person (``Binding.made_for``, named by the broker from the caller's authentication) opens forms
that are visible to and answerable by that person and by the approvers of every policy matching the form's server
and Tool, nobody else. Forms without a person keep the session rules (:meth:`Principal.may_see`).

Policies live in a JSON file (``MAKA_APPROVER_POLICIES_FILE``)::

    {"policies": [{"server": "prod-*", "tool": "deploy",
                   "approvers": {"groups": ["release-managers"], "principals": ["oncall@example.com"]}}]}

``server`` and ``tool`` are globs (``fnmatch``, case-sensitive; default ``*``) over the form's qualified Tool
name ``SERVER:TOOL``. A person is an approver when their name is in ``principals`` or one of their groups (their
verified token's groups claim, or what the service acting for them stated) is in ``groups``.

:class:`PolicyFile` re-reads the file when it changed (its modification or change time, size or inode, checked
on use: no signal needed; the content's SHA-256 decides whether it is new). A file that no longer parses keeps the
policies in force and logs ``approver_policies_invalid`` (never its content); a file that is deleted revokes every
approver and logs ``approver_policies_removed``; at start a bad or missing file is an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from maka.interaction.v1 import interaction_pb2
from services.core.auth import Principal

log = logging.getLogger("maka.interaction.policy")

MAX_POLICIES = 1000


class PolicyFileError(ValueError):
    """The policy file is not the documented shape (the message names the entry, never a value)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """Approvers of the forms whose server and Tool match the globs."""

    server: str = "*"
    tool: str = "*"
    groups: frozenset[str] = frozenset()
    principals: frozenset[str] = frozenset()

    def matches(self, server: str, tool: str) -> bool:
        """True when this policy covers Tool ``tool`` of server ``server``."""
        return fnmatchcase(server, self.server) and fnmatchcase(tool, self.tool)

    def approves(self, principal: Principal) -> bool:
        """True when ``principal`` (a person) is one of this policy's approvers."""
        return principal.name in self.principals or not self.groups.isdisjoint(principal.groups)


@dataclass(frozen=True, slots=True)
class Policies:
    """A parsed policy file (empty: a person's forms reach only that person)."""

    policies: tuple[Policy, ...] = ()

    def approves(self, principal: Principal, tool_name: str) -> bool:
        """True when a policy matching the qualified ``tool_name`` (``SERVER:TOOL``) names ``principal``."""
        server, _, tool = tool_name.partition(":")
        return any(p.matches(server, tool) and p.approves(principal) for p in self.policies)

    @classmethod
    def parse(cls, text: str) -> Policies:
        """Parse the file's text; raises :class:`PolicyFileError`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise PolicyFileError("approver policies file is not JSON") from None
        if not isinstance(data, dict) or not isinstance(data.get("policies"), list):
            raise PolicyFileError('approver policies file must be {"policies": [...]}')
        if len(data["policies"]) > MAX_POLICIES:
            raise PolicyFileError(f"approver policies file holds more than {MAX_POLICIES} policies")
        return cls(tuple(_policy(raw, index) for index, raw in enumerate(data["policies"])))


def _names(raw: object, where: str) -> frozenset[str]:
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        raise PolicyFileError(f"{where} must be a list of non-empty strings")
    return frozenset(raw)


def _policy(raw: object, index: int) -> Policy:
    if not isinstance(raw, dict):
        raise PolicyFileError(f"policies[{index}] must be an object")
    server, tool = raw.get("server", "*"), raw.get("tool", "*")
    if not isinstance(server, str) or not server or not isinstance(tool, str) or not tool:
        raise PolicyFileError(f"policies[{index}]: 'server' and 'tool' must be non-empty globs")
    approvers = raw.get("approvers")
    if not isinstance(approvers, dict) or set(approvers) - {"groups", "principals"}:
        raise PolicyFileError(f"policies[{index}]: 'approvers' must be {{'groups': [...], 'principals': [...]}}")
    return Policy(
        server=server,
        tool=tool,
        groups=_names(approvers.get("groups", []), f"policies[{index}].approvers.groups"),
        principals=_names(approvers.get("principals", []), f"policies[{index}].approvers.principals"),
    )


def made_for_person(principal: Principal, made_for: interaction_pb2.Person) -> bool:
    """True when ``principal`` is the person ``made_for`` names (a person, same name; the same issuer when
    both name one)."""
    if not principal.person or principal.name != made_for.principal:
        return False
    return not (principal.issuer and made_for.issuer and principal.issuer != made_for.issuer)


class PolicyFile:
    """The policies of ``path`` (none when ``path`` is None), re-read when the file changes (see the module
    docstring). Raises :class:`PolicyFileError` at construction when the file is unreadable or malformed."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[int, ...] | None = None
        self._digest = b""
        self._policies = Policies()
        if path is not None:
            stamp = self._stat()
            if stamp is None:
                raise PolicyFileError(f"cannot read approver policies file {path}")
            self._load(stamp, strict=True)

    def _stat(self) -> tuple[int, ...] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        # ctime too: a rewrite that restores the old mtime and size (``cp -p``, ``rsync -t``) still moves it.
        return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino

    def _load(self, stamp: tuple[int, ...], *, strict: bool) -> None:
        assert self.path is not None
        self._stamp = stamp
        try:
            raw = self.path.read_bytes()
            digest = hashlib.sha256(raw).digest()
            if digest == self._digest:
                return
            self._policies, self._digest = Policies.parse(raw.decode()), digest
        except (OSError, UnicodeDecodeError, PolicyFileError) as error:
            if strict:
                raise PolicyFileError(str(error) if isinstance(error, PolicyFileError) else "unreadable") from None
            log.warning("approver_policies_invalid", extra={"error": type(error).__name__})
            return
        log.info("approver_policies_loaded", extra={"policies": len(self._policies.policies)})

    def current(self) -> Policies:
        """The policies in force (re-read first when the file changed since the last read; none once it is gone)."""
        if self.path is None:
            return self._policies
        stamp = self._stat()
        if stamp is None:
            if self._stamp is not None:  # deleted: its approvers are revoked, a person's forms reach that person only
                self._stamp, self._digest, self._policies = None, b"", Policies()
                log.warning("approver_policies_removed")
        elif stamp != self._stamp:
            self._load(stamp, strict=False)
        return self._policies


def visible(principal: Principal, made_for: interaction_pb2.Person, tool_name: str, policies: Policies) -> bool:
    """Whether ``principal`` may see and answer a form of ``tool_name`` made for ``made_for`` beyond its session
    rule: any form without a person; a person's form only for that person and the approvers ``policies`` name."""
    if not made_for.principal:
        return True
    if not principal.person:
        return False
    return made_for_person(principal, made_for) or policies.approves(principal, tool_name)
