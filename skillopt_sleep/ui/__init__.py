"""The local dashboard: a face (like ``cli/`` and ``mcp/``) that serves the application
service's results as server-rendered pages on 127.0.0.1.

* :mod:`.server` — the per-install token (``<state>/ui-token``, mode 0600), the listening
  socket and the uvicorn server (``skillopt-sleep ui``, or a thread of the daemon when
  ``ui.serve`` is set);
* :mod:`.app` — the Starlette app: every request needs the token (``?token=`` once, then an
  ``HttpOnly``, ``SameSite=Strict`` cookie), the ``Host`` must be this loopback address, no CORS
  header is ever sent, and writes are ``POST`` only with the page's CSRF field and a same-origin
  ``Origin``;
* :mod:`.pages` — one function per page, reading only :class:`~skillopt_sleep.service.Service`
  and rendering its template;
* ``templates/`` and :mod:`.render` — the pages' markup (Jinja2, autoescaped: the layout, the
  macros, a template per page) and the one environment that renders it;
* :mod:`.html` and :mod:`.charts` — escaping, URLs, numbers, the side-by-side diff, inline SVG
  charts (no JavaScript, no CDN: the one stylesheet and the templates ship in the wheel).
"""
