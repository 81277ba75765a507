"""The backend interface: one method, :meth:`Backend.complete`.

Every backend (HTTP APIs here, agent exec CLIs in their own modules) takes a
:class:`~skillopt_sleep.config.BackendConfig` and raises only the
:class:`~skillopt_sleep.errors.BackendError` tree: ``BackendUnreachable``,
``BackendAuthError``, ``BackendModelError``, ``BackendTimeout``, ``BackendResponseError``.
Transient failures (connection reset, 429, 5xx, timeouts) are retried ``max_retries`` times
with exponential backoff; auth and unknown-model errors are never retried.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import Completion, CompletionRequest


class Backend(ABC):
    #: registry name, e.g. ``"openai_compatible"``
    name: str = ""

    def __init__(self, config: BackendConfig):
        self.config = config

    @property
    def model(self) -> str:
        return self.config.model

    @abstractmethod
    def complete(self, request: CompletionRequest) -> Completion:
        """Run one call. ``request.model`` empty means ``config.model``."""

    def check(self) -> None:  # noqa: B027 (optional: most backends need no check)
        """A cheap readiness check that is not a model call (no tokens spent): the key is
        set, the server answers, the CLI exists. The night runs it first, so a dead or
        unauthorised backend fails loudly even when every rollout would come from the cache.
        Raises the BackendError tree; the default does nothing."""

    def close(self) -> None:  # noqa: B027  # pragma: no cover - optional
        """Release connections/processes."""
