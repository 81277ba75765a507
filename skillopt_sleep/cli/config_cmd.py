"""``skillopt-sleep config path | show | edit``: where the config file is, the settings in
effect (secrets masked), and editing it in ``$VISUAL`` / ``$EDITOR`` with a check after."""

from __future__ import annotations

import typer

config_app = typer.Typer(
    help="The config file: where it is, the settings in effect, edit it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _drop_none(value: object) -> object:
    """``value`` without None members (TOML has no null)."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


@config_app.command("path")
def config_path_cmd() -> None:
    """Print the config file's path (it may not exist yet: every key has a default)."""
    from skillopt_sleep.cli.console import out, service

    out.print(str(service().config_file()), markup=False, soft_wrap=True)


@config_app.command("show")
def config_show(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Print the settings in effect (file, environment and defaults), API keys masked."""
    import tomlkit

    from skillopt_sleep.cli.console import out, print_json, service

    svc = service()
    data = svc.settings().model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    out.print(f"# {svc.config_file()} (and SKILLOPT_SLEEP_* variables, then defaults)")
    table = _drop_none(data)
    assert isinstance(table, dict)
    out.print(tomlkit.dumps(table).rstrip(), markup=False)


@config_app.command("edit")
def config_edit() -> None:
    """Open the config file in $VISUAL / $EDITOR (vi when neither is set), then check it: a
    file that does not load is reported (exit 1) and left as you wrote it."""
    import os
    import shlex
    import subprocess

    from skillopt_sleep.cli.console import err, out, service
    from skillopt_sleep.errors import ConfigError

    svc = service()
    path = svc.config_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# skillopt-sleep config: every key is optional (`skillopt-sleep config show`\n"
            "# prints the settings in effect; README.md lists every key)\n",
            encoding="utf-8",
        )
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        code = subprocess.run([*shlex.split(editor), str(path)], check=False).returncode
    except OSError as exc:
        raise ConfigError(f"cannot start the editor {editor!r} ({exc.strerror or exc})") from None
    if code != 0:
        err.print(f"error: the editor {editor!r} exited {code}", markup=False)
        raise typer.Exit(1)
    svc.settings()  # a ConfigError (one line, exit 1) when the file does not load
    out.print(f"{path}: valid", markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
