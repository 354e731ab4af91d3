"""Validate an answer against a form (RFC "Core owns exact-shape decoding ...")."""

from __future__ import annotations

from services.core.form.model import Answer, Form
from services.core.limits import DEFAULT_LIMITS, Limits


def validate_answer(form: Form, answer: Answer, *, limits: Limits = DEFAULT_LIMITS) -> Answer:
    """Validate ``answer`` against ``form``; return it normalized. STUB: implemented by the form work."""
    raise NotImplementedError
