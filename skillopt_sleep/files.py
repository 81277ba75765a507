"""Writing files safely: the one atomic writer and the one secret-token file of the package.

:func:`atomic_write` replaces a file as a whole or not at all (temp file in the same folder,
fsync, ``os.replace``, fsync of the folder); every file the tool writes for itself or into
the user's folders goes through it. :func:`ensure_token` reads (creating on first use) a
per-install secret such as the MCP server's or the dashboard's bearer token.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.errors import ConfigError


def atomic_write(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) atomically; creates parent
    folders; keeps the mode.

    Temp files a killed write of this same file left beside it (``.NAME.XXXXXXXX.tmp``) are
    removed first. An existing file keeps its mode; a new one gets what any program creating
    it would give it (``0o666 & ~umask``, the user's umask: :func:`paths.user_umask`), not the
    temp file's private 0600 — except when ``private`` or in this tool's own folders
    (:func:`skillopt_sleep.paths.is_own`: records, backups, install originals), where a new
    file is 0600 and a new folder 0700.
    A symlink is written through (its target is replaced), so a link such as
    ``AGENTS.md -> CLAUDE.md`` stays a link.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    own = paths.is_own(path)  # this tool's own folders: the user's alone whatever the umask
    paths.make_user_dirs(path.parent, private=own or private)
    if path.exists():
        mode = path.stat().st_mode & 0o7777
    elif own or private:
        mode = 0o600
    else:
        mode = 0o666 & ~paths.user_umask()
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        if re.fullmatch(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp", stale.name):
            stale.unlink(missing_ok=True)  # left by a write killed before its rename
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - e.g. Windows
        pass


def ensure_token(path: Path, what: str = "token") -> str:
    """The secret token kept in ``path``, created (``secrets.token_urlsafe``, mode 0600) on
    first use; a looser mode is re-tightened. ConfigError (naming ``what``, e.g. "the MCP
    token") when the stored one is too short to be a token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            os.chmod(path, 0o600)
        token = path.read_text("utf-8").strip()
        if len(token) < 16:
            raise ConfigError(
                f"{path}: {what} is too short; delete the file to make a new one"
            ) from None
        return token
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token
