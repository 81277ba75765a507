"""The local dashboard: a face (like ``cli/`` and ``mcp/``) that serves the application
service's results as server-rendered pages on 127.0.0.1.

* :mod:`.server` — the per-install token (``<state>/ui-token``, mode 0600), the listening
  socket and the uvicorn server (``skillopt-sleep ui``, or a thread of the daemon when
  ``ui.serve`` is set);
* :mod:`.app` — the Starlette app: every request needs the token (``?token=`` once, then an
  ``HttpOnly``, ``SameSite=Strict`` cookie), the ``Host`` must be this loopback address, no CORS
  header is ever sent, and writes are ``POST`` only with the page's CSRF field and a same-origin
  ``Origin``;
* :mod:`.pages` — one function per page, reading only :class:`~skillopt_sleep.service.Service`;
* :mod:`.html` and :mod:`.charts` — escaping, layout, the side-by-side diff, inline SVG charts
  (no JavaScript, no CDN: the one stylesheet ships in the wheel).
"""
