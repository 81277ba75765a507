"""Pi coding agent sessions (npm ``@mariozechner/pi-coding-agent``; format checked against the
files pi 0.73.1 writes, docs/sources.md): ``<pi home>/sessions/--<cwd>--/<ISO time>_<uuid>.jsonl``
with ``<pi home>`` = ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``, or
``$PI_CODING_AGENT_SESSION_DIR`` instead of ``<pi home>/sessions``. Override with
``[sources.pi] roots = [...]``.

One append-only JSONL file per session (format version 3):

* the first line is the header ``{"type": "session", "version": 3, "id": <uuid>, "timestamp",
  "cwd", "parentSession"?}``: the key (``id``, else the uuid in the file name) and the project
  (``cwd``);
* ``{"type": "message", "id", "parentId", "timestamp", "message": {...}}`` entries carry the
  conversation (the entries form a tree through ``parentId``; an abandoned branch stays in the
  file and is read like the rest). ``message.role``: ``user`` (``content`` a string or
  ``text`` / ``image`` blocks) → a prompt; ``assistant`` (``text`` / ``thinking`` /
  ``toolCall`` blocks, ``model``, ``stopReason``) → an answer with its tool names (an
  assistant message that failed with no content, ``stopReason`` ``error`` / ``aborted``, is
  counted as ``failed_answer``); ``toolResult`` (``toolName``, ``content``, ``isError``) → a
  ``tool`` excerpt; ``bashExecution`` (a ``!command`` the user ran) → a ``tool`` excerpt of
  its output; ``custom`` (an extension's injected message), ``branchSummary`` and
  ``compactionSummary`` are injected context: dropped, counted as ``injected``;
* ``model_change`` sets the session's model; ``thinking_level_change``, ``compaction``,
  ``branch_summary``, ``custom``, ``label``, ``session_info`` … are counted as
  ``ignored_type:<type>``.

uids are ``<session id>:<entry id>``. A session whose first prompt carries
:data:`SELF_MARKER` is ``self_generated`` (a replay; the pi backend runs with
``--no-session`` and writes none). ``headless`` stays False: pi 0.73.1 does not record
whether a run was ``pi -p`` (checked by running ``pi -p`` and ``pi`` on a terminal against
the simulator and diffing the files: the same entries with the same keys; only the gap
between the header's and the first prompt's timestamps differs, which is no signal, since
``pi "prompt"`` starts an interactive session just as fast).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from skillopt_sleep.sources.base import ParseResult, Source, ending, walk_files
from skillopt_sleep.sources.common import parse_pi_lines

_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.I)


class PiSource(Source):
    """Harvester for Pi's session JSONL files (see module doc)."""

    name = "pi"
    format_version = "pi 0.73.1 session files (format version 3)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).data_dir(env, home)]

    def discover(self, root: Path) -> Iterator[Path]:
        """Every ``*.jsonl`` below ``root`` (one folder per working directory), sorted."""
        return walk_files(root, ending(".jsonl"))

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        st = dict(state) if state else {}
        if "key" not in st:
            m = _UUID.search(path.name)
            st.update(key=m.group(1) if m else path.stem, line=0, fp=False, self=False)
        return parse_pi_lines(self.name, lines, st)
