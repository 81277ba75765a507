"""Where skillopt-sleep keeps its own files (never the agents' logs), and who may read them.

``SKILLOPT_SLEEP_HOME`` overrides everything (tests point it at ``tmp_path``); otherwise the
platformdirs user config / state directories for app ``skillopt-sleep`` are used.

Everything this tool writes for itself is private to the user (folders 0700, files 0600),
whatever command runs first: every entry point (the CLI, the daemon and its worker, the MCP
servers, the dashboard) calls :func:`make_private`, which sets a 077 umask for the process.
Files written into the user's own folders (an adopted document, an installed skill) are created
as any other program would create them, from the umask the process started with
(:func:`user_umask`).
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "skillopt-sleep"


#: the umask the process had before :func:`make_private` (the user's own), once called
_USER_UMASK: int | None = None

#: the umask for this tool's own files: folders 0700, files 0600
PRIVATE_UMASK = 0o077


def make_private() -> None:
    """Create every later file and folder of this process private (umask 077); the umask it
    had before is kept for the user's own files (:func:`user_umask`). Idempotent."""
    global _USER_UMASK
    old = os.umask(PRIVATE_UMASK)
    if _USER_UMASK is None:
        _USER_UMASK = old


def user_umask() -> int:
    """The user's umask: the one the process started with (before :func:`make_private`),
    read without changing it where the OS allows (Linux ``/proc``)."""
    if _USER_UMASK is not None:
        return _USER_UMASK
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # the only portable way to read it; restored at once
    os.umask(old)
    return old


def make_user_dirs(folder: Path, *, private: bool = False) -> None:
    """Create ``folder`` and its missing parents in the user's own tree with the user's modes
    (``0o777 & ~user_umask()``), not this process's private ones; ``private``: 0700 (this
    tool's own folders)."""
    missing: list[Path] = []
    here = folder
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    mode = 0o700 if private else 0o777 & ~user_umask()
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            continue
        os.chmod(d, mode)


def _home_override() -> Path | None:
    value = os.environ.get("SKILLOPT_SLEEP_HOME")
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    base = _home_override()
    if base:
        return base / "config"
    import platformdirs  # only without SKILLOPT_SLEEP_HOME

    return Path(platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    base = _home_override()
    if base:
        return base / "state"
    import platformdirs

    return Path(platformdirs.user_state_dir(APP))


def config_file() -> Path:
    return config_dir() / "config.toml"


def db_path() -> Path:
    return state_dir() / "skillopt.db"


def proposals_dir() -> Path:
    return state_dir() / "proposals"


def backups_dir() -> Path:
    return state_dir() / "backups"


def night_log_path(night_id: int) -> Path:
    """A night's own log: ``<state>/nights/<id>/night.log`` (a dry run's, whose id is
    negative: ``nights/d1/night.log``)."""
    n = int(night_id)
    return state_dir() / "nights" / (f"d{-n}" if n < 0 else str(n)) / "night.log"


def is_own(path: Path) -> bool:
    """Whether ``path`` lies in this tool's own folders (:func:`state_dir`, :func:`config_dir`),
    where every file is the user's alone (0600, folders 0700) whatever the umask."""
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(os.path.realpath(root)) for root in (state_dir(), config_dir()))
