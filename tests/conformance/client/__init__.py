"""The MCP conformance client surface: ``maka conformance-client`` drives the whole stack for the
official MCP conformance harness (``@modelcontextprotocol/conformance``).

- :mod:`tests.conformance.client.answers` — the automatic answer (accept with defaults / minimal valid values).
- :mod:`tests.conformance.client.auto_answer` — the automatic answering surface (an ``Attach`` client).
- :mod:`tests.conformance.client.scenarios` — what each harness client scenario expects, as step plans.
- :mod:`tests.conformance.client.stack` — the whole stack in one process (private redis-server, three services).
- :mod:`tests.conformance.client.runner` — runs one scenario against a harness server URL.
"""
