"""A night's live progress: its text lines and its typed events.

:class:`NightProgress` is what a night's steps call: as ``say(message)`` it passes a line to
the caller's text callback (the MCP server keeps the latest lines, the daemon's worker logs
them) and emits a :class:`~skillopt_sleep.results.ProgressEvent` with the message and the
current step; :meth:`NightProgress.replaying` and :meth:`NightProgress.rollout` count the
rollouts of each replay (``done`` of ``total``, with the night's model calls and tokens so
far, its epoch and batch). Rollouts are counted from the replay workers' threads (a lock).
Rendering is the faces' business: nothing here prints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from skillopt_sleep.results import OnProgress, ProgressEvent


class NightProgress:
    """A night's progress reporter (callable as ``say``); a no-op without callbacks."""

    def __init__(
        self,
        say: Callable[[str], None] | None = None,
        on_progress: OnProgress | None = None,
    ) -> None:
        self.text = say
        self.on_progress = on_progress
        self.night_id: int | None = None
        #: the night's running cost (:class:`~skillopt_sleep.night.replay.Cost`), set by the
        #: trainer: its calls and tokens travel with each rollout's event
        self.cost: Any = None
        self.step = "night"
        self.where: dict[str, Any] = {}  # epoch, epochs, batch, batches
        self.phase: str | None = None
        self.done = 0
        self.total = 0
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        if self.text is not None:
            self.text(message)
        self.emit(message=message.strip())

    def relay(self, event: ProgressEvent) -> None:
        """An event of a step below the night (harvest, mining), stamped with its id."""
        if self.on_progress is not None:
            self.on_progress(event.model_copy(update={"night_id": self.night_id}))

    def enter(self, step: str, message: str | None = None, **where: Any) -> None:
        """A new step (``where``: its epoch / batch, replacing the last ones given)."""
        self.step = step
        if where:
            self.where = dict(where)
        if message is not None:
            self(message)

    def emit(self, **fields: Any) -> None:
        if self.on_progress is None:
            return
        if self.cost is not None:
            fields.setdefault("calls", self.cost.calls)
            fields.setdefault("cached_calls", self.cost.cached_calls)
            fields.setdefault("tokens", self.cost.input_tokens + self.cost.output_tokens)
        self.on_progress(
            ProgressEvent(step=fields.pop("step", self.step), night_id=self.night_id, **fields)
        )

    def replaying(self, phase: str, total: int) -> None:
        """A replay of ``total`` rollouts starts (its ``phase``: ``val baseline``, ``train
        e1b2``, …)."""
        with self._lock:
            self.phase, self.done, self.total = phase, 0, total
            self._rollout_event()

    def rollout(self, _scored: Any = None) -> None:
        """One rollout of the current replay is scored (any worker thread)."""
        with self._lock:
            self.done += 1
            self._rollout_event()

    def _rollout_event(self) -> None:
        self.emit(
            step="replay",
            phase=self.phase,
            done=self.done,
            total=max(self.total, self.done),
            unit="rollouts",
            **self.where,
        )
