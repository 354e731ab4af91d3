"""The runnable stack: a process supervisor for ``maka up``, tests and benchmarks."""

from surfaces.stack.supervisor import ChildSpec, Ports, Stack, StackError, StackEvent, Supervisor

__all__ = ["ChildSpec", "Ports", "Stack", "StackError", "StackEvent", "Supervisor"]
