"""What every command module of the CLI shares: the two consoles, the parsed ``--config``,
JSON and score printing, and the application service for this invocation. Command modules
import from here (never from :mod:`skillopt_sleep.cli` itself), so the CLI has no import
circle."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on use: `--version` and `--help` answer without the service
    from rich.console import Console

    from skillopt_sleep.service import Service

if TYPE_CHECKING:  # imported by the commands that print a table
    from rich.table import Table


class LazyConsole:
    """A rich ``Console`` made on first use (a command that prints only JSON, ``harvest
    --json``, never imports rich): its attributes are the console's, :meth:`real` is the
    console itself (what rich's own classes are given)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_options", "_console"):
            raise AttributeError(name)
        return getattr(self.real(), name)


# piped output is not cut to 80 columns (rich's default without a terminal) unless COLUMNS
# says how wide (rich reads COLUMNS itself when the width is left to it)
_SIZED = sys.stdout.isatty() or os.environ.get("COLUMNS", "").strip().isdigit()
out = LazyConsole(highlight=False, soft_wrap=True, width=None if _SIZED else 160)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)

#: set by the root callback: ``config`` is the ``--config`` file (None: the default one)
state: dict[str, Any] = {"config": None, "service": None}


def config_path() -> Path | None:
    path = state["config"]
    return Path(path) if path else None


def service() -> Service:
    """The application service of this invocation (one store connection, opened on use)."""
    if state["service"] is None:
        from skillopt_sleep.service import Service

        state["service"] = Service(config_path())
    svc: Service = state["service"]
    return svc


def shorten_middle(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, cut in the middle ("/home/u/…/app/CLAUDE.md"):
    its start and its end (the file name whole, even past ``width``) are kept."""
    if len(path) <= width:
        return path
    name = path.rsplit("/", 1)[-1]
    tail = path[len(path) - max(len(name) + 1, (width - 1) // 2) :]
    if not tail.startswith("/") and "/" in tail:
        tail = tail[tail.index("/") :]
    head = path[: max(0, width - len(tail) - 1)]
    return f"{head}…{tail}"


def fitted_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    path: int | None = None,
    wrap: Sequence[int] = (),
) -> Table:
    """A table for ``out``'s width (80 columns too): every column whole on one line except
    ``path`` (file paths, shortened in the middle to the room left, the file name kept) and the
    ``wrap`` columns (free text, wrapped)."""
    from rich.table import Column, Table
    from rich.text import Text

    fixed = [
        max([len(h), *(len(line) for r in rows for line in str(r[i]).splitlines() or [""])])
        for i, h in enumerate(headers)
    ]
    used = sum(w for i, w in enumerate(fixed) if i != path and i not in wrap)
    used += sum(min(w, 12) for i, w in enumerate(fixed) if i in wrap)
    # the room left, never less than "/…/CLAUDE.md" (a path column that got less would wrap)
    room = max(12, out.width - used - 2 * (len(headers) - 1))
    columns = [
        Column(h, no_wrap=i != path and i not in wrap, overflow="fold")
        for i, h in enumerate(headers)
    ]
    table = Table(*columns, box=None, pad_edge=False, show_edge=False)
    for r in rows:
        cells = [str(c) for c in r]
        if path is not None:
            cells[path] = "\n".join(shorten_middle(p, room) for p in cells[path].splitlines())
        table.add_row(*(Text(c) for c in cells))  # the user's text, never rich markup
    return table


def _plain_stdout() -> bool:
    """Whether ``out`` would write no terminal codes: stdout is no terminal by rich's own rule
    (``TTY_COMPATIBLE``, ``FORCE_COLOR``, ``isatty``), outside Jupyter and Windows."""
    if sys.platform == "win32" or "IPython" in sys.modules:
        return False
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "0"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force == ""
    try:
        return not sys.stdout.isatty()
    except ValueError:  # closed
        return True


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (coloured on a terminal). Piped, it is the very
    text rich's ``print_json`` writes there, written without importing rich."""
    text = json.dumps(data, default=str, ensure_ascii=False)
    if out._console is not None or not _plain_stdout():
        out.print_json(text)
        return
    sys.stdout.write(json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def wrap_words(text: str, indent: str = "  ", first: str = "") -> str:
    """``text`` wrapped to ``out``'s width in whole words (a path or a reason is never broken
    inside), its first line starting with ``first``, the others with ``indent``."""
    import textwrap

    return textwrap.fill(
        text,
        out.width,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def fmt_score(x: Any) -> str:
    return "—" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def first_run_setup() -> None:
    """On a new install (no config file, none given) write one that enables every agent whose
    logs exist on this machine, and say so. Used by ``harvest``, ``run`` and ``start``."""
    enabled = service().first_run_setup()
    if enabled is None:
        return
    from skillopt_sleep import paths

    err.print(
        f"first run: wrote {paths.config_file()}, harvesting "
        f"{', '.join(enabled) or 'nothing found yet'} (`skillopt-sleep sources` lists every agent)",
        markup=False,
    )
