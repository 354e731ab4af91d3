"""Decode an MCP 2026-07-28 form-mode ``requestedSchema`` into the form contract."""

from __future__ import annotations

from services.core.form.model import Form, Requester
from services.core.limits import DEFAULT_LIMITS, Limits


def decode_requested_schema(
    requested_schema: object,
    *,
    message: str,
    requester: Requester | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Form:
    """Decode ``requestedSchema`` (parsed JSON) into a :class:`Form`. STUB: implemented by the form work."""
    raise NotImplementedError


def check_form(form: Form, *, limits: Limits = DEFAULT_LIMITS) -> Form:
    """Re-check a :class:`Form` against the contract and caps. STUB: implemented by the form work."""
    raise NotImplementedError
