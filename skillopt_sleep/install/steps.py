"""The file edits behind ``install`` / ``uninstall``: one :class:`Step` per file, merging our
part into (and taking it out of) the user's JSON, TOML and Markdown files.

JSON is edited as text by :mod:`.jsonedit` (indentation and comments kept), TOML with tomlkit
(round-trip), Markdown as a marked block per agent (``<!-- skillopt-sleep-plugin:begin TAG … -->``
… ``<!-- skillopt-sleep-plugin:end TAG -->``; Codex and Devin share one AGENTS.md). Line endings
follow the file. A file that is not UTF-8, JSON or TOML is refused with :class:`InstallError`,
never rewritten.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_sleep.errors import SkilloptError
from skillopt_sleep.install import jsonedit


class InstallError(SkilloptError):
    """install / uninstall cannot proceed (unknown agent, unreadable config, missing shell)."""


def _block_begin(tag: str) -> str:
    """Each agent's snippet has its own markers: Codex and Devin share ``DIR/AGENTS.md``."""
    return f"<!-- skillopt-sleep-plugin:begin {tag} — added by `skillopt-sleep install {tag}` -->"


def _block_end(tag: str) -> str:
    return f"<!-- skillopt-sleep-plugin:end {tag} -->"


def _block_re(tag: str) -> re.Pattern[str]:
    t = re.escape(tag)
    return re.compile(
        r"(?:\r?\n)?<!-- skillopt-sleep-plugin:begin " + t + r"\b[^\n]*-->.*?"
        r"<!-- skillopt-sleep-plugin:end " + t + r" -->[ \t]*(?:\r?\n)?",
        re.S,
    )


def _sha(data: bytes | None) -> str:
    return "" if data is None else hashlib.sha256(data).hexdigest()


def _decode(path: Path, data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InstallError(f"{path} is not UTF-8 text; not touching it") from None


def _newline(text: str | None) -> str:
    return "\r\n" if text and "\r\n" in text else "\n"


@dataclass
class Step:
    """One file install touches. ``kind``: json | toml | block | file."""

    path: Path
    kind: str
    what: str
    keys: list[str] = field(default_factory=list)
    value: Any = None  # json/toml: the value at keys; block: markdown; file: bytes
    tag: str = ""  # block: the agent whose snippet it is
    strict: str = ""  # json: the agent that reads the file as strict JSON (no JSONC)
    json5: bool = False  # json: the agent reads the file as JSON5 (OpenClaw's openclaw.json)

    # -- the file content with our part present
    def apply(self, cur: bytes | None) -> bytes:
        text = _decode(self.path, cur)
        if self.kind == "file":
            return self.value
        if self.kind == "json":
            if self.strict and text is not None and text.strip():
                _strict_json(self.path, text, self.strict)
            try:
                out = jsonedit.set_key(text, self.keys, self.value, json5=self.json5)
            except (jsonedit.JsonEditError, ValueError) as exc:
                raise InstallError(
                    f"{self.path}: not valid {self._dialect} ({exc}); not touching it"
                ) from None
            return out.encode("utf-8")
        if self.kind == "toml":
            return _toml_set(self.path, text, self.keys, self.value).encode("utf-8")
        if self.kind == "block":
            return _block_set(text, self.value, self.tag).encode("utf-8")
        raise AssertionError(self.kind)

    # -- key paths that did not exist before (json / toml), outermost first
    def missing_prefix(self, cur: bytes | None) -> list[str] | None:
        if self.kind not in ("json", "toml"):
            return None
        text = _decode(self.path, cur)
        for i in range(1, len(self.keys) + 1):
            if _get(self.kind, text, self.keys[:i], self.json5) is None:
                return self.keys[:i]
        return None

    # -- the file without our part
    def unapply(self, cur: bytes, created: list[str] | None) -> bytes:
        text = _decode(self.path, cur) or ""
        if self.kind == "file":
            return cur  # edited since install: keep the user's version
        if self.kind == "block":
            out = _block_remove(text, self.tag)
        else:
            out = self._remove(text, self.keys)
            if created:  # drop containers install created that are now empty
                for depth in range(len(self.keys) - 1, len(created) - 1, -1):
                    prefix = self.keys[:depth]
                    if _get(self.kind, out, prefix, self.json5) in ({}, None):
                        out = self._remove(out, prefix)
                    else:
                        break
        return out.encode("utf-8")

    @property
    def _dialect(self) -> str:
        return "JSON5" if self.json5 else "JSON"

    def _remove(self, text: str, keys: list[str]) -> str:
        if self.kind == "toml":
            return _toml_remove(self.path, text, keys)
        try:
            return jsonedit.remove_key(text, keys, json5=self.json5)
        except (jsonedit.JsonEditError, ValueError) as exc:
            raise InstallError(
                f"{self.path}: not valid {self._dialect} ({exc}); not touching it"
            ) from None


def _strict_json(path: Path, text: str, agent: str) -> None:
    """InstallError when ``text`` is not strict JSON: ``agent`` would ignore the whole file
    (comments, a trailing comma), so install adds nothing to it and writes nothing at all."""
    try:
        json.loads(text)
    except ValueError as exc:
        where = (
            f" ({exc.msg} at line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        )
        raise InstallError(
            f"{path} is not strict JSON{where}: {agent} ignores the whole file when it has "
            "comments or a trailing comma, so the plugin would not load; remove them, then "
            "run install again (nothing was written)"
        ) from None


def _get(kind: str, text: str | None, keys: list[str], json5: bool = False) -> Any:
    if text is None or not text.strip():
        return None
    if kind == "json":
        try:
            return jsonedit.get_key(text, keys, json5=json5)
        except (jsonedit.JsonEditError, ValueError):
            return None
    import tomlkit

    node: Any = tomlkit.parse(text)
    for k in keys:
        if not hasattr(node, "get") or k not in node:
            return None
        node = node[k]
    return node.unwrap() if hasattr(node, "unwrap") else node


def _toml_doc(path: Path, text: str | None):
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); not touching it") from None


def _toml_set(path: Path, text: str | None, keys: list[str], value: dict[str, Any]) -> str:
    import tomlkit

    doc = _toml_doc(path, text)
    if _get("toml", text, keys) == value:
        return text or ""
    node: Any = doc
    for k in keys[:-1]:
        if k not in node:
            node.add(k, tomlkit.table(is_super_table=True))
        node = node[k]
        if not hasattr(node, "add"):
            raise InstallError(f"{path}: {'.'.join(keys)} — {k} is not a table; not touching it")
    table = tomlkit.table()
    for k, v in value.items():
        table.add(k, v)
    table.add(tomlkit.nl())
    if keys[-1] in node:
        node[keys[-1]] = table
    else:
        node.add(keys[-1], table)
    return tomlkit.dumps(doc)


def _toml_remove(path: Path, text: str, keys: list[str]) -> str:
    doc = _toml_doc(path, text)
    node: Any = doc
    for k in keys[:-1]:
        if k not in node:
            return text
        node = node[k]
    if keys[-1] not in node:
        return text
    del node[keys[-1]]
    import tomlkit

    return tomlkit.dumps(doc)


def _block_set(text: str | None, body: str, tag: str) -> str:
    nl = _newline(text)
    block = nl.join([_block_begin(tag), *body.strip("\n").splitlines(), _block_end(tag)]) + nl
    text = text or ""
    m = _block_re(tag).search(text)
    if m:
        lead = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip("\r\n"))]
        new = text[: m.start()] + lead + block + text[m.end() :]
        return text if new == text else new
    if not text:
        return block
    sep = "" if text.endswith(nl + nl) else (nl if text.endswith(nl) else nl + nl)
    return text + sep + block


_ANY_BLOCK = re.compile(
    r"<!-- skillopt-sleep-plugin:begin (\S+)\b[^\n]*-->.*?<!-- skillopt-sleep-plugin:end \1 -->",
    re.S,
)


def only_plugin_blocks(data: bytes) -> bool:
    """``data`` holds nothing but ``install``'s snippets (any agent's) and white space: a file
    that installs made, whose last snippet going means the file goes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not _ANY_BLOCK.sub("", text).strip()


def _block_remove(text: str, tag: str) -> str:
    m = _block_re(tag).search(text)
    if not m:
        return text
    before, after = text[: m.start()], text[m.end() :]
    nl = _newline(text)
    if not after and before.endswith(nl + nl):
        before = before[: -len(nl)]
    return before + (nl if after and not before.endswith(nl) and before else "") + after
