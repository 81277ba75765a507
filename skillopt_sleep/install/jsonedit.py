"""Format-preserving edits of JSON (and JSONC: comments, trailing commas) config files, and
with ``json5=True`` of JSON5 ones (also unquoted keys, single-quoted strings, hexadecimal,
``Infinity`` / ``NaN``, leading or trailing decimal points, ``+`` signs: what OpenClaw 2026.9.6
reads its ``openclaw.json`` as).

``set_key`` and ``remove_key`` change one member and leave every other byte of the file as it
was: key order, indentation (spaces or tabs), compact one-line objects, comments. A small
position-recording parser finds the spans; only the edited span is rewritten (as plain JSON,
which is JSON5 too). Values are decoded with :mod:`json` (JSON, JSONC) or the ``json5``
package (JSON5).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class JsonEditError(ValueError):
    """The file is not JSON(C) we can edit (syntax error, or a key that is not an object)."""


@dataclass
class Node:
    start: int
    end: int
    kind: str  # "object" | "array" | "scalar"
    members: list[Member] = field(default_factory=list)


@dataclass
class Member:
    key: str
    start: int  # the key's opening quote
    value: Node


_WS = " \t\r\n\ufeff"
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
#: JSON5 numbers (hexadecimal, ``.5``, ``5.``, a ``+`` sign, Infinity, NaN) and literals
_SCALAR5 = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity|NaN)"
    r"|true|false|null"
)
#: a JSON5 unquoted key (an ECMAScript IdentifierName; non-ASCII letters allowed)
_IDENT = re.compile(r"(?:[A-Za-z_$]|[^\x00-\x7f])(?:[\w$]|[^\x00-\x7f])*")


def _decode_value(raw: str, json5: bool) -> Any:
    """One JSON(C) / JSON5 value's text as Python data."""
    if json5:
        import json5 as _json5

        return _json5.loads(raw)
    return json.loads(_strip(raw))


class _Parser:
    def __init__(self, text: str, json5: bool = False):
        self.text = text
        self.i = 0
        self.json5 = json5
        self.quotes = "\"'" if json5 else '"'

    def fail(self, what: str) -> JsonEditError:
        line = self.text.count("\n", 0, self.i) + 1
        return JsonEditError(f"{what} at line {line}")

    def skip(self) -> None:
        t, n = self.text, len(self.text)
        while self.i < n:
            c = t[self.i]
            if c in _WS:
                self.i += 1
            elif t.startswith("//", self.i):
                j = t.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif t.startswith("/*", self.i):
                j = t.find("*/", self.i + 2)
                if j < 0:
                    raise self.fail("unterminated comment")
                self.i = j + 2
            else:
                return

    def string(self) -> str:
        t = self.text
        q = t[self.i]
        k = _string_end(t, q, self.i + 1)
        if k < 0:
            raise self.fail("unterminated string")
        raw = t[self.i : k + 1]
        self.i = k + 1
        try:
            value = _decode_value(raw, self.json5)
        except ValueError:
            raise self.fail("bad string") from None
        if not isinstance(value, str):
            raise self.fail("bad string")
        return value

    def key(self) -> str:
        t = self.text
        if self.i < len(t) and t[self.i] in self.quotes:
            return self.string()
        m = _IDENT.match(t, self.i) if self.json5 else None
        if not m:
            raise self.fail("expected a key")
        self.i = m.end()
        return m.group(0)

    def closed(self, close: str) -> bool:
        """Past blanks: True (and past it) when the container ends here."""
        self.skip()
        if self.i < len(self.text) and self.text[self.i] == close:
            self.i += 1
            return True
        return False

    def next_item(self, close: str) -> bool:
        """After an item: True past a ``,`` (another item may follow), False past the
        closing ``close``; anything else is an error."""
        self.skip()
        if self.i < len(self.text) and self.text[self.i] == ",":
            self.i += 1
            return True
        if self.closed(close):
            return False
        raise self.fail(f"expected ',' or '{close}'")

    def value(self) -> Node:
        self.skip()
        t, start = self.text, self.i
        if start >= len(t):
            raise self.fail("unexpected end of file")
        c = t[start]
        if c == "{":
            node = Node(start, start, "object")
            self.i += 1
            while not self.closed("}"):
                kstart = self.i
                key = self.key()
                self.skip()
                if self.i >= len(t) or t[self.i] != ":":
                    raise self.fail("expected ':'")
                self.i += 1
                node.members.append(Member(key, kstart, self.value()))
                if not self.next_item("}"):
                    break
            node.end = self.i
            return node
        if c == "[":
            self.i += 1
            while not self.closed("]"):
                self.value()
                if not self.next_item("]"):
                    break
            return Node(start, self.i, "array")
        if c in self.quotes:
            self.string()
            return Node(start, self.i, "scalar")
        m = (_SCALAR5 if self.json5 else _SCALAR).match(t, start)
        if not m:
            raise self.fail("unexpected character")
        self.i = m.end()
        return Node(start, self.i, "scalar")


def parse(text: str, *, json5: bool = False) -> Node:
    """The root value with member positions. Raises JsonEditError."""
    p = _Parser(text, json5)
    root = p.value()
    p.skip()
    if p.i != len(text):
        raise p.fail("trailing characters")
    return root


def loads(text: str, *, json5: bool = False) -> Any:
    """The JSON(C) (or JSON5) document as Python data (comments and trailing commas dropped).
    Raises JsonEditError (or ValueError) when it is not one."""
    parse(text, json5=json5)  # position-checked syntax first
    return _decode_value(text, json5)


def _string_end(text: str, quote: str, j: int) -> int:
    """The index of the ``quote`` that closes a string whose body starts at ``j`` (one not
    escaped by an odd run of backslashes); -1 when there is none."""
    while True:
        k = text.find(quote, j)
        if k < 0:
            return k
        backslashes = 0
        while text[k - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return k
        j = k + 1


def _strip(text: str) -> str:
    """Remove comments and trailing commas (outside strings)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            k = _string_end(text, '"', i + 1)
            out.append(text[i : k + 1])
            i = k + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2) + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_of(text: str, pos: int) -> str:
    ls = _line_start(text, pos)
    m = re.match(r"[ \t]*", text[ls:pos])
    return m.group(0) if m else ""


def _detect_unit(text: str, root: Node) -> str:
    """The file's indentation step (e.g. two spaces, a tab); two spaces when undetectable."""
    stack = [root]
    while stack:
        node = stack.pop()
        for m in node.members:
            if text.count("\n", node.start, m.start):
                outer, inner = _indent_of(text, node.start), _indent_of(text, m.start)
                if inner.startswith(outer) and len(inner) > len(outer):
                    return inner[len(outer) :]
            stack.append(m.value)
    return "  "


def _dump(value: Any, indent: str, unit: str, compact: bool) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=False)
    raw = json.dumps(value, indent=unit, ensure_ascii=False)
    return raw.replace("\n", "\n" + indent)


def _find(root: Node, keys: list[str]) -> tuple[Node, int, Member | None]:
    """Walk ``keys``: (deepest object reached, how many keys matched, the final member)."""
    node = root
    for depth, key in enumerate(keys):
        member = next((m for m in node.members if m.key == key), None)
        if member is None:
            return node, depth, None
        if depth == len(keys) - 1:
            return node, depth + 1, member
        if member.value.kind != "object":
            raise JsonEditError(f"{'.'.join(keys[: depth + 1])} is not an object")
        node = member.value
    raise AssertionError("unreachable")


def set_key(text: str | None, keys: list[str], value: Any, *, json5: bool = False) -> str:
    """``text`` with ``keys`` (a path of object keys) set to ``value``; a new file when None.
    ``json5``: ``text`` is JSON5 (the added member is written as plain JSON)."""
    if text is None or not text.strip():
        nested: Any = value
        for key in reversed(keys):
            nested = {key: nested}
        return json.dumps(nested, indent=2, ensure_ascii=False) + "\n"
    root = parse(text, json5=json5)
    if root.kind != "object":
        raise JsonEditError("the top level is not an object")
    unit = _detect_unit(text, root)
    obj, depth, member = _find(root, keys)
    if member is not None:
        if _decode_value(text[member.value.start : member.value.end], json5) == value:
            return text
        indent = _indent_of(text, member.start)
        compact = "\n" not in text[obj.start : obj.end]
        new = _dump(value, indent, unit, compact)
        return text[: member.value.start] + new + text[member.value.end :]
    rest: Any = value
    for key in reversed(keys[depth + 1 :]):
        rest = {key: rest}
    key = keys[depth]
    compact = "\n" not in text[obj.start : obj.end]
    if compact:
        item = json.dumps(key) + ": " + json.dumps(rest, ensure_ascii=False)
        if not obj.members:
            return text[: obj.start] + "{" + item + "}" + text[obj.end :]
        last = obj.members[-1].value
        return text[: last.end] + ", " + item + text[last.end :]
    outer = _indent_of(text, obj.start)
    indent = _indent_of(text, obj.members[0].start) if obj.members else outer + unit
    item = json.dumps(key) + ": " + _dump(rest, indent, unit, False)
    if not obj.members:
        close = obj.end - 1  # the "}"
        inner = text[obj.start + 1 : close]
        if inner.strip():  # only comments inside: keep them, add after
            return (
                text[:close].rstrip(" \t")
                + ("" if inner.rstrip(" \t").endswith("\n") else "\n")
                + indent
                + item
                + "\n"
                + outer
                + text[close:]
            )
        return text[: obj.start] + "{\n" + indent + item + "\n" + outer + "}" + text[obj.end :]
    last = obj.members[-1].value
    after = text[last.end : obj.end - 1]
    m = re.match(r"[ \t]*,", after)
    if m:  # a trailing comma already follows the last member (JSONC)
        pos = last.end + m.end()
        eol = text.find("\n", pos)
        if (
            eol < 0
            or eol > obj.end
            or (text[pos:eol].strip() and not text[pos:eol].strip().startswith("//"))
        ):
            eol = pos
        return text[:eol] + "\n" + indent + item + "," + text[eol:]
    eol = text.find("\n", last.end)
    tail = text[last.end : eol] if 0 <= eol < obj.end else ""
    if eol < 0 or eol >= obj.end or (tail.strip() and not tail.strip().startswith("//")):
        eol = last.end
    return text[: last.end] + "," + text[last.end : eol] + "\n" + indent + item + text[eol:]


def get_key(text: str | None, keys: list[str], *, json5: bool = False) -> Any:
    """The value at ``keys``, or None."""
    if text is None or not text.strip():
        return None
    root = parse(text, json5=json5)
    _, _, member = _find(root, keys)
    if member is None:
        return None
    return _decode_value(text[member.value.start : member.value.end], json5)


def remove_key(text: str, keys: list[str], *, json5: bool = False) -> str:
    """``text`` without the member at ``keys`` (unchanged when absent)."""
    root = parse(text, json5=json5)
    obj, _, member = _find(root, keys)
    if member is None:
        return text
    idx = obj.members.index(member)
    start = member.start
    ls = _line_start(text, start)
    own_line = not text[ls:start].strip()
    end = member.value.end
    m = re.match(r"[ \t]*,", text[end:])
    if m:
        end += m.end()
    if idx == len(obj.members) - 1 and not m and idx > 0:
        # the last member: drop the comma after the previous one instead
        prev_end = obj.members[idx - 1].value.end
        cm = re.match(r"[ \t]*,", text[prev_end:])
        if cm:
            comma = prev_end + cm.end() - 1
            text = text[:comma] + text[comma + 1 :]
            start, end, ls = start - 1, end - 1, ls - 1 if ls > comma else ls
    if own_line:
        eol = text.find("\n", end)
        if eol >= 0 and not text[end:eol].strip():
            return text[:ls] + text[eol + 1 :]
        return text[:ls] + text[end:].lstrip(" \t")
    # same line as something else: remove the member and the spaces before it
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return text[:start] + (text[end:].lstrip(" \t") if idx == 0 else text[end:])
