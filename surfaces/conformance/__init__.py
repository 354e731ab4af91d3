"""The MCP conformance client surface: ``maka conformance-client`` drives the whole stack for the
official MCP conformance harness (``@modelcontextprotocol/conformance``).

- :mod:`surfaces.conformance.answers` — the automatic answer (accept with defaults / minimal valid values).
- :mod:`surfaces.conformance.auto_answer` — the automatic answering surface (an ``Attach`` client).
- :mod:`surfaces.conformance.scenarios` — what each harness client scenario expects, as step plans.
- :mod:`surfaces.conformance.stack` — the whole stack in one process (private redis-server, three services).
- :mod:`surfaces.conformance.runner` — runs one scenario against a harness server URL.
"""
