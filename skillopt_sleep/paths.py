"""Where skillopt-sleep keeps its own files (never the agents' logs).

``SKILLOPT_SLEEP_HOME`` overrides everything (tests point it at ``tmp_path``); otherwise the
platformdirs user config / state directories for app ``skillopt-sleep`` are used.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "skillopt-sleep"


def _home_override() -> Path | None:
    value = os.environ.get("SKILLOPT_SLEEP_HOME")
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    base = _home_override()
    return (base / "config") if base else Path(platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    base = _home_override()
    return (base / "state") if base else Path(platformdirs.user_state_dir(APP))


def config_file() -> Path:
    return config_dir() / "config.toml"


def db_path() -> Path:
    return state_dir() / "skillopt.db"


def proposals_dir() -> Path:
    return state_dir() / "proposals"


def backups_dir() -> Path:
    return state_dir() / "backups"
