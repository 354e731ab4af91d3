"""Domain types of the provider-neutral form contract (RFC "Add a provider-neutral form Interaction").

These are plain frozen dataclasses: the MCP provider decodes an MCP ``requestedSchema`` into a
:class:`Form`, the Interaction service stores it (as ``maka.form.v1.Form`` protobuf), and surfaces
render it. Conversions to and from protobuf live in :mod:`services.core.form.protobuf`, to and from MCP JSON in
:mod:`services.core.form.mcp_json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias


class StringFormat(StrEnum):
    """The closed set of string formats form mode allows (MCP 2026-07-28 elicitation, "Requested Schema")."""

    EMAIL = "email"
    URI = "uri"
    DATE = "date"
    DATE_TIME = "date-time"


class Action(StrEnum):
    """The user's answer: MCP ``ElicitResult.action``."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


FormValue: TypeAlias = str | int | float | bool | tuple[str, ...]
"""One answer value: string, integer, number, boolean or the picks of a multi-select (in order)."""


@dataclass(frozen=True, slots=True)
class Option:
    """One choice of a select field."""

    value: str
    """The value submitted back to the server."""
    label: str
    """What the user sees (``title`` / ``enumNames`` entry, or the value)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldBase:
    """What every field kind has."""

    name: str
    """The property name: the key the value is sent back under. Untrusted; any Unicode."""
    label: str
    """The schema's ``title``, or the name."""
    description: str = ""
    """The schema's ``description``: help text, shown as plain text."""
    required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StringField(FieldBase):
    """Free text; lengths in Unicode code points."""

    min_length: int | None = None
    max_length: int | None = None
    format: StringFormat | None = None
    default: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NumberField(FieldBase):
    """``type: "number"`` (``integer=False``) or ``type: "integer"`` (integral, within ±2^53)."""

    integer: bool = False
    minimum: float | None = None
    maximum: float | None = None
    default: int | float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BooleanField(FieldBase):
    """A checkbox."""

    default: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SingleSelectField(FieldBase):
    """One of ``options``."""

    options: tuple[Option, ...]
    default: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiSelectField(FieldBase):
    """Unique members of ``options``, between ``min_items`` and ``max_items``."""

    options: tuple[Option, ...]
    min_items: int | None = None
    max_items: int | None = None
    default: tuple[str, ...] | None = None


Field: TypeAlias = StringField | NumberField | BooleanField | SingleSelectField | MultiSelectField
"""Every field kind of the closed form contract."""


@dataclass(frozen=True, slots=True)
class Requester:
    """Display provenance: provider (trusted, from registration) and the *claimed* server and Tool."""

    provider_id: str = ""
    provider_display_name: str = ""
    claimed_server: str = ""
    claimed_tool: str = ""


@dataclass(frozen=True, slots=True)
class Form:
    """A complete form request: message, fields in the server's order, requester provenance."""

    message: str
    fields: tuple[Field, ...]
    requester: Requester = field(default_factory=Requester)


@dataclass(frozen=True, slots=True)
class Answer:
    """The user's answer. ``values`` is non-empty only for :attr:`Action.ACCEPT`."""

    action: Action
    values: dict[str, FormValue] = field(default_factory=lambda: dict[str, FormValue]())
