"""The exception tree. The CLI catches :class:`SkilloptError` once and prints ``str(exc)``
as a one-line reason with a non-zero exit; anything else is a bug.

    SkilloptError
    ├── ConfigError            bad or unknown config key / value
    ├── UnknownNameError       unknown backend, source or agent name
    ├── StoreError             the database cannot be opened or migrated
    ├── BackendError           a model/agent backend failed (raised in backends/)
    │   ├── BackendUnreachable     connection refused, DNS, closed port
    │   ├── BackendAuthError       401/403, missing or invalid key, not logged in
    │   ├── BackendModelError      unknown model
    │   ├── BackendTimeout         the call exceeded its timeout
    │   └── BackendResponseError   malformed or unexpected answer, 5xx after retries
    ├── BudgetExceeded         a per-night cap on calls or tokens was reached
    ├── NightError             the night cannot run (no document, lock held, …)
    │   └── DocumentError          the trained document cannot be read (not UTF-8, unreadable)
    ├── ProposalError          unknown id, stale base, nothing to roll back, …
    ├── ServiceManagerError    systemctl / launchctl / schtasks refused (``service --now``)
    ├── BadArgument            a caller's argument is invalid (relative project, unknown agent)
    ├── DaemonError            the daemon did not come up (daemon/process.py)
    └── InstallError           install / uninstall cannot proceed (install/steps.py)
"""

from __future__ import annotations


class SkilloptError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(SkilloptError):
    pass


class UnknownNameError(SkilloptError, ValueError):
    """An unknown backend / source / agent name; the message lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        self.kind, self.name, self.known = kind, name, list(known)
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")


class StoreError(SkilloptError):
    pass


class BackendError(SkilloptError):
    """A backend failed. ``backend`` names it; ``fix`` is a hint for the user (may be empty)."""

    def __init__(self, message: str, *, backend: str = "", fix: str = ""):
        self.backend = backend
        self.fix = fix
        message = " ".join(str(message).split())  # one line, whatever the server sent
        text = f"{backend}: {message}" if backend else message
        if fix:
            text = f"{text} ({fix})"
        super().__init__(text)


class BackendUnreachable(BackendError):
    pass


class BackendAuthError(BackendError):
    pass


class BackendModelError(BackendError):
    pass


class BackendTimeout(BackendError):
    pass


class BackendResponseError(BackendError):
    pass


class BudgetExceeded(SkilloptError):
    pass


class NightError(SkilloptError):
    pass


class DocumentError(NightError):
    """The live document cannot be read as text: not UTF-8 (the message names the first bad
    byte and its offset) or unreadable. Raised before anything is written."""


class ProposalError(SkilloptError):
    pass


class ServiceManagerError(SkilloptError):
    """The OS service manager refused to enable / start (or stop) the daemon's service."""


class BadArgument(SkilloptError):
    """A caller's argument is invalid (a relative project path, an unknown agent, a target
    outside the managed documents)."""


def one_line(text: str, limit: int = 600) -> str:
    """``text`` as one line of at most ``limit`` characters (whitespace folded, "…" cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
