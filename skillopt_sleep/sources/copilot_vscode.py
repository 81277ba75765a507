"""VS Code Copilot Chat sessions, read from VS Code's own storage (corpus SCHEMAS.md §3).

Roots are VS Code ``User`` folders: stable ``Code``, ``Code - Insiders``, ``VSCodium`` and
``Code - OSS`` under ``~/.config`` (Linux, or ``$XDG_CONFIG_HOME``), ``~/Library/Application
Support`` (macOS), ``%APPDATA%`` (Windows; ``VSCODE_APPDATA`` overrides the base on every OS),
a portable install's ``$VSCODE_PORTABLE/user-data/User``, and the remote servers'
``~/.vscode-server/data/User`` / ``~/.vscode-server-insiders/data/User``. Override with
``[sources.copilot_vscode] roots = [...]`` (a ``User`` folder, a ``workspaceStorage`` folder or a
``chatSessions`` folder).

Files:

* ``workspaceStorage/<hash>/chatSessions/<id>.json`` — the older v3 single JSON object
  ``{version, sessionId, creationDate, customTitle?, requests[]}``; read whole and re-read
  when its size, mtime and hash change;
* ``workspaceStorage/<hash>/chatSessions/<id>.jsonl`` — the newer incremental log: ``kind 0``
  the full state, ``kind 1`` set the value at path ``k``, ``kind 2`` append items to the array
  at ``k``; read by byte offset like every JSONL source;
* ``globalStorage/emptyWindowChatSessions/*.json(l)`` — chats of windows without a folder;
* ``workspaceStorage/<hash>/GitHub.copilot-chat/transcripts/<id>.jsonl`` — the agent
  transcript (Copilot CLI event envelope), only when no ``chatSessions`` file of the same
  session id exists (the same conversation must not be counted twice).

Per request: the prompt is ``message.text``; ``variableData.variables`` (instructions files,
AGENTS.md, the agents list …) are injected context and dropped (counted ``injected``). The
answer is the concatenated markdown of ``response[]`` (uid ``<session>:<requestId>:a``), with
``toolInvocationSerialized``/``toolInvocation`` ``toolId`` as tool names; ``thinking``,
``textEditGroup``, ``mcpServersStarting``, … are counted as ``ignored_part:<kind>``. Parts are
emitted once (``state`` remembers how many of each request were consumed), so a growing
response appends to its answer. Project = the adjacent ``workspace.json`` ``folder`` (or the
``.code-workspace`` file's folder), else the ``baseUri`` of the responses.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, ReadMode, Source
from skillopt_sleep.sources.common import (
    BadRecord,
    cap,
    json_records,
    loads,
    ms_to_iso,
    read_regular,
)
from skillopt_sleep.sources.copilot_events import parse_events

MAX_TEXT = 20_000
#: most requests one chat session may hold (a log line may name any index: see ``_slot``)
MAX_REQUESTS = 10_000
FLAVOURS = ("Code", "Code - Insiders", "VSCodium", "Code - OSS")
_TOOL_KINDS = ("toolInvocationSerialized", "toolInvocation")
_TEXT_KINDS = (None, "markdownContent", "markdownVuln")
_DRIVE = re.compile(r"^/([A-Za-z]):(/.*)?$")


def uri_to_path(uri: Any) -> str | None:
    """``file:///home/u/p`` → ``/home/u/p``; ``file:///c%3A/x`` → ``c:\\x``; a
    ``vscode-remote://ssh-remote+h/home/u/p`` URI → ``/home/u/p``; a ``{path}`` dict too."""
    if isinstance(uri, dict):
        path = uri.get("path") or uri.get("fsPath")
        if not isinstance(path, str):
            return None
    elif isinstance(uri, str) and "://" in uri:
        path = unquote(urlparse(uri).path)
    elif isinstance(uri, str) and uri.startswith("/"):
        path = uri
    else:
        return None
    path = path.rstrip("/") or "/"
    m = _DRIVE.match(path)
    if m:
        return f"{m.group(1)}:" + (m.group(2) or "\\").replace("/", "\\")
    return path


def _workspace_project(ws_dir: Path) -> str | None:
    try:
        data = loads(read_regular(ws_dir / "workspace.json", 1024 * 1024))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("folder"):
        return uri_to_path(data["folder"])
    ws = uri_to_path(data.get("workspace"))
    if ws:
        sep = "\\" if "\\" in ws else "/"
        return ws.rsplit(sep, 1)[0] or ws
    return None


class CopilotVSCodeSource(Source):
    """Harvester for VS Code Copilot Chat sessions (see module doc)."""

    name = "copilot_vscode"
    format_version = "VS Code Copilot Chat: chatSessions v3 JSON, incremental JSONL of extension 0.49.0, agent transcripts of 0.37.6 (VS Code 1.109.3)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        if env.get("VSCODE_APPDATA"):
            bases = [Path(env["VSCODE_APPDATA"]).expanduser()]
        elif sys.platform == "darwin":
            bases = [home / "Library" / "Application Support"]
        elif os.name == "nt":
            bases = [Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"]
        else:
            bases = [
                Path(env["XDG_CONFIG_HOME"]).expanduser()
                if env.get("XDG_CONFIG_HOME")
                else home / ".config"
            ]
        roots = [b / flavour / "User" for b in bases for flavour in FLAVOURS]
        if env.get("VSCODE_PORTABLE"):
            roots.append(Path(env["VSCODE_PORTABLE"]).expanduser() / "user-data" / "User")
        roots += [
            home / ".vscode-server" / "data" / "User",
            home / ".vscode-server-insiders" / "data" / "User",
        ]
        return roots

    def discover(self, root: Path) -> Iterator[Path]:
        tops = [root / "workspaceStorage", root / "globalStorage" / "emptyWindowChatSessions"]
        tops = [t for t in tops if t.is_dir()] or [root]
        for top in tops:
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames.sort()
                here = Path(dirpath)
                if here.name in ("chatSessions", "emptyWindowChatSessions"):
                    for name in sorted(filenames):
                        if name.endswith((".json", ".jsonl")):
                            yield here / name
                elif (
                    here.name == "transcripts" and here.parent.name.lower() == "github.copilot-chat"
                ):
                    sessions = here.parent.parent / "chatSessions"
                    for name in sorted(filenames):
                        stem = name.rsplit(".", 1)[0]
                        if name.endswith(".jsonl") and not (
                            (sessions / f"{stem}.json").exists()
                            or (sessions / f"{stem}.jsonl").exists()
                        ):
                            yield here / name

    def read_mode(self, path: Path) -> ReadMode:
        return "whole_file" if path.suffix == ".json" else "jsonl"

    # ------------------------------------------------------------------ parsing
    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        if path.parent.name == "transcripts":
            result = parse_events(self.name, path, lines, state, path.stem)
            for sess in result.sessions:
                sess.headless = False
                sess.project = sess.project or _workspace_project(path.parent.parent.parent)
            return result
        st: dict[str, Any] = (
            dict(state)
            if state
            else {
                "key": path.stem,
                "reqs": [],
                "fp": False,
                "self": False,
                "title": None,
                "started": None,
                "project": None,
            }
        )
        st["reqs"] = [list(r) for r in st.get("reqs", [])]
        ctx = _Ctx(self.name, path, st)
        if path.suffix == ".json":
            for raw in lines:  # one item: the whole document
                try:
                    doc = loads(raw)
                except BadRecord as exc:
                    ctx.skipped[exc.reason] += 1
                    continue
                if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
                    ctx.skipped["unknown_document"] += 1
                    continue
                ctx.full_state(doc)
        else:
            for rec in json_records(lines, ctx.skipped):
                ctx.record(rec)
        return ctx.finish()


class _Ctx:
    def __init__(self, source: str, path: Path, st: dict):
        self.path, self.st = path, st
        self.skipped: Counter = Counter()
        self.sess = HarvestedSession(source=source, key=st["key"])
        self.out: dict[str, HarvestedMessage] = {}
        #: an answer's raw text as its parts stream in, redacted once joined (in finish)
        self.raw: dict[str, str] = {}
        if not st.get("project"):
            st["project"] = _workspace_project(path.parent.parent)

    # ------------------------------------------------------------------ records
    def record(self, rec: dict) -> None:
        kind, k, v = rec.get("kind"), rec.get("k"), rec.get("v")
        if kind == 0 and isinstance(v, dict):
            self.full_state(v)
        elif kind in (1, 2) and isinstance(k, list) and k:
            if k == ["requests"] and isinstance(v, list):
                base = 0 if kind == 1 else len(self.st["reqs"])
                for i, req in enumerate(v):
                    self.request(base + i, req)
            elif (
                len(k) == 3
                and k[0] == "requests"
                and isinstance(k[1], int)
                and k[2] == "response"
                and isinstance(v, list)
            ):
                self.parts(k[1], v, append=kind == 2)
            elif (
                len(k) == 2 and k[0] == "requests" and isinstance(k[1], int) and isinstance(v, dict)
            ):
                self.request(k[1], v)
            elif k == ["customTitle"] and isinstance(v, str):
                self.st["title"] = clean(v)[:200]  # the state is stored too: never raw
            else:
                self.skipped[
                    f"ignored_path:{'.'.join(str(p) for p in k if not isinstance(p, int))}"
                ] += 1
        else:
            self.skipped[f"unknown_kind:{kind}"] += 1

    def full_state(self, doc: dict) -> None:
        sid = doc.get("sessionId")
        if isinstance(sid, str) and sid and not self.st["reqs"]:
            self.st["key"] = sid
        if isinstance(doc.get("customTitle"), str):
            self.st["title"] = clean(doc["customTitle"])[:200]
        self.st["started"] = self.st.get("started") or ms_to_iso(doc.get("creationDate"))
        for i, req in enumerate(doc.get("requests") or []):
            self.request(i, req)

    def _slot(self, i: int) -> list | None:
        """Request ``i``'s slot, or ``None`` (counted ``bad_index``) for an index no session
        reaches: a log line names any index, so slots are bounded by :data:`MAX_REQUESTS`."""
        reqs = self.st["reqs"]
        if not 0 <= i < MAX_REQUESTS:
            self.skipped["bad_index"] += 1
            return None
        while len(reqs) <= i:
            reqs.append([None, 0, False, None])  # requestId, parts consumed, prompt done, ts
        return reqs[i]

    def request(self, i: int, req: Any) -> None:
        if not isinstance(req, dict):
            self.skipped["bad_request"] += 1
            return
        slot = self._slot(i)
        if slot is None:
            return
        rid = req.get("requestId")
        if isinstance(rid, str) and slot[0] not in (None, rid):
            slot[:] = [None, 0, False, None]  # another request now sits at this index
        slot[0] = rid if isinstance(rid, str) else slot[0] or f"r{i}"
        slot[3] = ms_to_iso(req.get("timestamp")) or slot[3]
        if isinstance(req.get("modelId"), str) and req["modelId"]:
            self.sess.model = req["modelId"].removeprefix("copilot/")
        agent = req.get("agent")
        if isinstance(agent, dict) and isinstance(agent.get("extensionVersion"), str):
            self.sess.agent_version = agent["extensionVersion"]
        if not slot[2]:
            self.prompt(slot, req)
        if isinstance(req.get("response"), list):
            self.parts(i, req["response"], append=False)

    def prompt(self, slot: list, req: dict) -> None:
        msg = req.get("message")
        text = msg.get("text") if isinstance(msg, dict) else msg if isinstance(msg, str) else None
        variables = (
            (req.get("variableData") or {}).get("variables")
            if isinstance(req.get("variableData"), dict)
            else None
        )
        if isinstance(variables, list) and variables:
            self.skipped["injected"] += len(variables)
        if not isinstance(text, str) or not text.strip():
            self.skipped["empty"] += 1
            slot[2] = True
            return
        text = text.strip()
        slot[2] = True
        if not self.st["fp"]:
            self.st["fp"], self.st["self"] = True, SELF_MARKER in text
        uid = f"{self.st['key']}:{slot[0]}"
        self.out[uid] = HarvestedMessage(
            uid=uid, role="user", kind="prompt", timestamp=slot[3], text=cap(clean(text), MAX_TEXT)
        )

    def parts(self, i: int, items: list, append: bool) -> None:
        slot = self._slot(i)
        if slot is None:
            return
        if slot[0] is None:
            slot[0] = f"r{i}"
        if append:
            start, new = 0, items
            slot[1] += len(items)
        else:  # the whole response array: only what was not consumed yet
            start = slot[1] if slot[1] <= len(items) else 0
            new = items[start:]
            slot[1] = len(items)
        texts: list[str] = []
        tools: list[str] = []
        for part in new:
            if not isinstance(part, dict):
                continue
            kind = part.get("kind")
            if kind in _TEXT_KINDS:
                content = part.get("content")
                value = content.get("value") if isinstance(content, dict) else part.get("value")
                if isinstance(value, str):
                    texts.append(value)
                base = uri_to_path(part.get("baseUri"))
                if base and not self.st.get("project") and not self.st.get("base"):
                    self.st["base"] = base
            elif kind == "inlineReference":
                name = part.get("name")
                if not isinstance(name, str):
                    name = (
                        (uri_to_path(part.get("inlineReference")) or "")
                        .replace("\\", "/")
                        .rsplit("/", 1)[-1]
                    )
                texts.append(name)
            elif kind in _TOOL_KINDS:
                tid = part.get("toolId")
                if isinstance(tid, str) and tid and tid not in tools:
                    tools.append(tid)
            else:
                self.skipped[f"ignored_part:{kind}"] += 1
        text = "".join(texts).strip()
        if not text and not tools:
            return
        uid = f"{self.st['key']}:{slot[0]}:a"
        msg = self.out.get(uid)
        if msg is None:
            self.out[uid] = HarvestedMessage(
                uid=uid, role="assistant", kind="answer", timestamp=slot[3], tool_names=tools
            )
            self.raw[uid] = text
        else:
            if text:
                self.raw[uid] = f"{self.raw.get(uid, '')}{text}"
            msg.tool_names += [t for t in tools if t not in msg.tool_names]

    def finish(self) -> ParseResult:
        st, sess = self.st, self.sess
        sess.key = st["key"]
        sess.project = st.get("project") or st.get("base")
        sess.title = clean(st["title"])[:200] if st.get("title") else None
        for uid, raw in self.raw.items():  # parts joined first, then redacted, then cut
            self.out[uid].text = cap(clean(raw), MAX_TEXT)
        sess.started_at = st.get("started") or next((r[3] for r in st["reqs"] if r[3]), None)
        sess.self_generated = st["self"]
        # prompts before answers within a request; requests in order
        order = {r[0]: n for n, r in enumerate(st["reqs"])}
        sess.messages = sorted(
            self.out.values(),
            key=lambda m: (
                order.get(m.uid.split(":", 1)[1].removesuffix(":a"), 0),
                m.uid.endswith(":a"),
            ),
        )
        return ParseResult(sessions=[sess], skipped=self.skipped, state=st)
