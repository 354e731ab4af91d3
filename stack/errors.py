"""The stack's one error type: everything that keeps a stack from starting or running is a :class:`StackError`.

Subclasses live beside what raises them: :class:`stack.state_dir.StackRunning` (the state dir is taken),
:class:`stack.topology.ConfigInvalid` (the ``mcpServers`` file has problems).
"""

from __future__ import annotations


class StackError(RuntimeError):
    """The stack could not start (missing binary or config, a child exited or never became ready)."""
