"""Repository caps, defined in one place (RFC criterion 5; docs/design.md#untrusted-form-copy).

Every cap is inclusive: a value exactly at the cap is accepted, one past it is rejected. Caps are
checked before anything is stored, published or retained. Form caps are enforced by
:func:`services.core.form.decode_requested_schema`, :func:`services.core.form.check_form` and
:func:`services.core.form.validate_answer` (``FormErrorReason.LIMIT_EXCEEDED``); the MRTR caps
(input requests per round, rounds, ``requestState`` bytes, input keys) by the MCP provider.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on untrusted form copy, schemas, answers and MRTR state."""

    max_request_bytes: int = 128 * 1024
    """UTF-8 bytes of one ``elicitation/create`` params object (message + requestedSchema) as JSON."""
    max_fields: int = 32
    """Properties in one form."""
    max_options: int = 1000
    """Options of one select field."""
    max_message_chars: int = 4000
    """Code points of the form's message."""
    max_label_chars: int = 200
    """Code points of a field label (``title``), option label, property name, or requester display text
    (``provider_display_name``, claimed server/Tool)."""
    max_option_value_chars: int = 1024
    """Code points of one select option's value (the string submitted back to the server)."""
    max_description_chars: int = 2000
    """Code points of a field description."""
    max_string_value_chars: int = 16 * 1024
    """Code points of one string answer value (also the implicit ``maxLength`` when none is given)."""
    max_answer_bytes: int = 128 * 1024
    """UTF-8 bytes of one answer's values as JSON."""
    max_input_requests_per_round: int = 8
    """Entries in one ``inputRequests`` object."""
    max_total_input_request_bytes: int = 256 * 1024
    """UTF-8 bytes of one round's whole ``inputRequests`` object as JSON."""
    max_rounds: int = 10
    """``tools/call`` legs of one logical invocation after the first (the SDK's default of 10)."""
    max_request_state_bytes: int = 256 * 1024
    """UTF-8 bytes of one ``requestState``."""
    max_input_key_chars: int = 200
    """Code points of one ``inputRequests`` key."""


DEFAULT_LIMITS = Limits()
"""The caps every service uses unless configured otherwise."""
