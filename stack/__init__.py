"""The runnable stack: a process supervisor for ``maka up``, tests and benchmarks.

Import from the modules (this package imports nothing, so a surface command that only reads
``endpoints.json`` through :mod:`stack.state_dir` stays a quick process).
"""
