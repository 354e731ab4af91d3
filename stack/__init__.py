"""The runnable stack: what ``maka up``, the e2e/fault tests and the benchmarks run, one module per concern.

- :mod:`stack.supervisor`: the generic process supervisor (:class:`~stack.supervisor.Supervisor`,
  :class:`~stack.supervisor.ChildSpec`, :class:`~stack.supervisor.StackEvent`, process groups, log sinks).
- :mod:`stack.topology`: the Maka topology (:class:`~stack.topology.Stack`: which children, their
  environment, arguments and ports).
- :mod:`stack.probes`: readiness probes (gRPC health, the broker's Tools and sign-ins, HTTP, Redis PING).
- :mod:`stack.state_dir`: the state dir (``endpoints.json``, the one-stack-per-dir lock).
- :mod:`stack.ports`: the ports a stack binds (service ports, ``--metrics`` ports, free ports).
- :mod:`stack.errors`: :class:`~stack.errors.StackError`, the base of every stack error.

Import from the modules: this package imports none of them, so a surface command that only reads
``endpoints.json`` (:mod:`stack.state_dir`) stays a quick process. The CLI and the surfaces import
``stack``; ``stack`` imports ``services`` (to run them) and never ``surfaces``.
"""
