"""``skillopt-sleep ui``: serve the local dashboard on 127.0.0.1 (see :mod:`skillopt_sleep.ui`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("ui")
    def ui_cmd(
        port: int | None = typer.Option(
            None,
            "--port",
            min=0,
            max=65535,
            help="Port on 127.0.0.1 (default: ui.port of the config, 8766; 0 = any free port).",
        ),
        open_browser: bool = typer.Option(
            False, "--open", help="Open the dashboard in the default browser."
        ),
    ) -> None:
        """Serve the dashboard (score history, proposals with adopt / reject / rollback, tasks,
        session search, nights) on 127.0.0.1 until Ctrl-C.

        The address printed carries the per-install token (<state dir>/ui-token, mode 0600)
        once; the browser then keeps it in a cookie. Nothing else can reach the server. When
        the daemon serves the dashboard (config ui.serve), this prints its address instead.
        """
        from skillopt_sleep.cli.console import err, service
        from skillopt_sleep.ui.server import Dashboard, ensure_token, token_path

        svc = service()
        served = svc.daemon_status(timeout=1.0).ui if port is None else None
        if served:  # the daemon serves it (ui.serve): its address, with the token
            login = f"{served}?token={ensure_token()}"
            err.print(f"dashboard (served by the daemon): {login}", markup=False)
            if open_browser:
                import webbrowser

                webbrowser.open(login)
            return
        dash = Dashboard(svc, svc.settings().ui.port if port is None else port)
        err.print(f"dashboard: {dash.login_url}", markup=False, soft_wrap=True)
        err.print(f"  (token in {token_path()}; Ctrl-C stops it)", markup=False)
        if open_browser:
            import webbrowser

            webbrowser.open(dash.login_url)
        dash.serve()
