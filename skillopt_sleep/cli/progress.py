"""Live progress of ``harvest``, ``tasks``, ``run`` and ``demo``: the domain's
:class:`~skillopt_sleep.results.ProgressEvent` rendered for where stderr goes.

* ``--json``: one JSON object per line on stderr (``{"event": "progress", "step": "replay",
  "done": 3, "total": 12, "calls": 7, "tokens": 1234, …}``), stdout keeping the one JSON
  result; counting events of a step are thinned to one per 0.1 s (the first, the last of
  each count and every event with a message always pass).
* a terminal: a rich progress display (the step, a bar with done/total, calls and tokens so
  far or bytes read, elapsed time), the night's messages printed above it.
* otherwise (stderr piped or redirected): nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from skillopt_sleep.cli.console import err
from skillopt_sleep.results import ProgressEvent

if TYPE_CHECKING:  # rich's progress display is imported when a terminal shows it
    from rich.progress import Progress

#: the least time between two counting events of one step on ``--json`` (seconds)
MIN_INTERVAL = 0.1


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


#: what the display says while a step without a count runs
DOING = {
    "night": "planning the night",
    "harvest": "harvesting",
    "mine": "mining",
    "check": "checking the backends",
    "train": "training",
    "reflect": "reflecting on the batch",
    "gate": "gating the edits",
    "consolidate": "consolidating the rules",
    "test": "scoring the test split",
    "copies": "certifying the other agents' copies",
    "notify": "notifying",
}


def describe(ev: ProgressEvent) -> tuple[str, str]:
    """The display's label and its details for ``ev``."""
    if ev.step == "harvest" and ev.source:
        return f"harvest {ev.source}", _size(ev.bytes or 0)
    if ev.step == "mine":
        return "mining sessions", f"{ev.prompts or 0} prompts"
    label = DOING.get(ev.step, ev.step)
    if ev.step == "replay":
        label = f"replay {ev.phase or ''}".strip()
        if ev.epoch is not None:
            label = f"epoch {ev.epoch}/{ev.epochs}"
            label += f" batch {ev.batch}/{ev.batches}" if ev.batch is not None else ""
            label += f": {ev.phase}" if ev.phase else ""
    details = ""
    if ev.calls is not None:
        details = f"{ev.calls} calls (+{ev.cached_calls or 0} cached), {ev.tokens or 0} tokens"
    return label, details


def _details_column() -> Any:
    """The calls and tokens so far: the column that gives way on a narrow terminal (cut with
    "…"), so the elapsed time after it stays whole at 80 columns (rich imported on use)."""
    from rich.progress import ProgressColumn, Task
    from rich.table import Column
    from rich.text import Text

    class _Details(ProgressColumn):
        def __init__(self) -> None:
            super().__init__(table_column=Column(no_wrap=False, overflow="ellipsis", ratio=1))

        def render(self, task: Task) -> Text:
            return Text(task.fields["details"], style="dim", no_wrap=True, overflow="ellipsis")

    return _Details()


class LiveProgress:
    """A :data:`~skillopt_sleep.results.OnProgress` callback for one command (a context
    manager: the terminal display lives while the command runs). Thread-safe."""

    def __init__(self, as_json: bool) -> None:
        self.mode = "json" if as_json else ("rich" if err.is_terminal else "off")
        self._lock = threading.Lock()
        self._last: dict[tuple[Any, ...], float] = {}
        self._bar: Progress | None = None
        self._job: Any = None
        self._label = ""

    def __enter__(self) -> LiveProgress:
        if self.mode == "rich":
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                TextColumn("{task.fields[count]}"),
                _details_column(),
                TimeElapsedColumn(),
                console=err.real(),
                transient=True,
            )
            self._bar.start()
            self._job = self._bar.add_task("starting", total=None, details="", count="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def note(self, message: str, step: str = "run") -> None:
        """A line of the command's own (not from the domain)."""
        self(ProgressEvent(step=step, message=message))

    def __call__(self, ev: ProgressEvent) -> None:
        if self.mode == "off":
            return
        with self._lock:
            if self.mode == "json":
                self._json(ev)
            elif self._bar is not None:
                self._rich(ev, self._bar)

    def _json(self, ev: ProgressEvent) -> None:
        key = (ev.step, ev.source, ev.phase, ev.epoch, ev.batch)
        now = time.monotonic()
        counting = ev.message is None and ev.done is not None
        thinned = counting and ev.done not in (0, ev.total) and key in self._last
        if thinned and now - self._last[key] < MIN_INTERVAL:
            return
        self._last[key] = now
        sys.stderr.write(ev.line() + "\n")
        sys.stderr.flush()

    def _rich(self, ev: ProgressEvent, bar: Progress) -> None:
        if ev.message:
            from rich.markup import escape

            bar.console.print(f"[dim]{escape(ev.message)}[/]")
        label, details = describe(ev)
        new_step = label != self._label
        self._label = label
        if ev.done is None:  # a step without a count: the bar pulses
            for task in bar.tasks:
                if task.id == self._job:
                    task.total = None  # (update() takes None for "unchanged")
            bar.update(self._job, description=label, details=details, completed=0, count="")
        else:
            total = max(ev.total or 0, ev.done)
            bar.update(
                self._job,
                description=label,
                details=details,
                total=total,
                completed=ev.done,
                count=f"{ev.done}/{total}",
            )
        if new_step:  # drawn now: a step quicker than a refresh is still seen
            bar.refresh()
