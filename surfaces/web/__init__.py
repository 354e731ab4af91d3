"""The web surface: a loopback Starlette page over the Interaction service (``maka web``).

- :mod:`surfaces.web.app` — routes and the JSON API under ``/api/`` (pending, answer, SSE events).
- :mod:`surfaces.web.views` — the JSON shapes the page reads and sends.
- :mod:`surfaces.web.security` — CSP and headers, surface-token login/bearer, CSRF defence.
- :mod:`surfaces.web.settings` — ``WebSettings`` (``MAKA_*``).
- :mod:`surfaces.web.main` — ``build`` → ``start_web``/``serve`` (uvicorn), ``python -m surfaces.web.main``.
- ``static/`` — ``index.html``, ``login.html``, ``js/*.js`` (ES modules from ``js/main.js``; DOM text only, no
  inline script), ``app.css``.
"""
