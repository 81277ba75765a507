"""The live-file write: the only code that writes (or removes) a user's live file.

Writes are atomic (:func:`skillopt_sleep.files.atomic_write`: temp file in the same folder,
fsync, ``os.replace``, fsync of the folder), keep the file's mode (a new file gets the umask's
default), and what they overwrite is first kept byte for byte under ``<state>/backups/``
(:func:`_keep_copy`). The folders a write creates are known beforehand (:func:`_missing_dirs`)
so that undoing it removes exactly those, when empty (:func:`_remove_created`).
"""

from __future__ import annotations

import os
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import sha256_text
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.files import atomic_write
from skillopt_sleep.proposals.confinement import _inside


def _missing_dirs(path: Path) -> list[Path]:
    """The folders writing ``path`` would create, deepest first."""
    out: list[Path] = []
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        out.append(parent)
        parent = parent.parent
    return out


def _remove_empty_dirs(dirs: list[str] | list[Path]) -> list[str]:
    """rmdir each folder (deepest first) that is empty now; the ones removed."""
    removed = []
    for d in dirs:
        try:
            os.rmdir(d)
        except OSError:  # not empty (the user put something there), gone, or not ours to remove
            continue
        removed.append(str(d))
    return removed


def _remove_created(target: Path | str, dirs: list[str]) -> list[str]:
    """rmdir (deepest first) those of ``dirs`` (the folders an adoption of ``target``
    created) that hold ``target`` and are empty now; the ones removed."""
    path = os.path.abspath(target)
    return _remove_empty_dirs(
        [d for d in dirs if _inside(path, os.path.abspath(d)) and os.path.abspath(d) != path]
    )


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when absent; ProposalError when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProposalError(f"cannot read {path}: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    """:func:`skillopt_sleep.files.atomic_write`; ProposalError (one line) when it fails."""
    try:
        atomic_write(path, data, private=private)
    except OSError as exc:
        raise ProposalError(
            f"cannot write {path}: {exc.strerror or exc}; nothing was changed"
        ) from None


def _keep_copy(data: bytes, name: str, why: str) -> Path:
    """Save bytes about to be overwritten under ``<state>/backups/<why>-<time>/``."""
    import time

    folder = paths.backups_dir() / f"{why}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    _write(target, data, private=True)  # a copy of the user's file stays private to them
    return target


def _hash_bytes(data: bytes | None) -> str:
    return "" if data is None else sha256_text(data.decode("utf-8", "surrogateescape"))
