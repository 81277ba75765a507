"""The trained document and its managed block.

Only the text between the two marker lines is ever changed; everything before and after is
kept byte for byte. Inside the block each rule is one ``- `` bullet line::

    <!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->
    - Use `pnpm` instead of `npm`.
    <!-- skillopt-sleep:end -->

A file without a block gets one appended (after a blank line). A new managed skill file is
created with a valid frontmatter (``name``, ``description``) as Claude Code and Codex expect.

A skill's front matter ``description`` is trained too (an agent lists a skill by it and loads
the skill only when it matches the task): :class:`Document` parses it from a skill document
and a ``describe`` edit (:func:`apply_describe`) rewrites only that value; an unchanged
description renders byte for byte as read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rapidfuzz import fuzz

from skillopt_sleep import agents
from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.errors import DocumentError, NightError, UnknownNameError
from skillopt_sleep.models import workdir_name

BEGIN = "<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->"
END = "<!-- skillopt-sleep:end -->"
_BEGIN_RE = re.compile(r"^<!-- skillopt-sleep:begin\b[^\n]*?-->[ \t]*(?=\r?$)", re.M)
#: ``project=<path>`` in a begin marker: the block holds one project's rules (a section); the
#: path runs to the `` — `` before "managed by" (a path may hold spaces)
_SECTION_RE = re.compile(r"^<!-- skillopt-sleep:begin project=(.+?) — managed by skillopt-sleep")


def begin_marker(section: str | None) -> str:
    """The begin marker of the block for ``section`` (a project path; None: every project)."""
    if section is None:
        return BEGIN
    return BEGIN.replace("begin —", f"begin project={section} —", 1)


def copy_name(section: str) -> str:
    """The folder name a copy of the project ``section`` has (its last path part): a replay
    works in a throw-away copy of that name, which the block's scope covers."""
    return workdir_name(section)


def section_heading(section: str) -> str:
    """The first line inside a project's block: says where its rules apply, the project's
    folder or a copy of it (where a night replays it; :func:`covers`)."""
    return (
        f"When working in `{section}` (or below it, or in a copy of it named "
        f"`{copy_name(section)}`), follow these rules:"
    )


#: a project block's heading, as :func:`section_heading` writes it (the copy clause absent
#: in blocks written before it): the section, and the copy's name
HEADING_RE = re.compile(
    r"^When working in `([^`\n]+)` \(or below it(?:, or in a copy of it named `([^`\n]+)`)?\), "
    r"follow these rules:[ \t]*$",
    re.M,
)


def covers(section: str, cwd: str, name: str | None = None) -> bool:
    """Whether the scope a block's heading states for ``section`` holds in the working
    folder ``cwd``: the project's folder or below it, or (``name``, the copy clause) a folder
    of that name (a copy of the project) or below it. The one reading of the scope, for the
    replays that must run inside it and for the simulator, which obeys it."""
    here, root = cwd.rstrip("/") or "/", section.rstrip("/") or "/"
    if here == root or here.startswith(root.rstrip("/") + "/"):
        return True
    return bool(name) and name in Path(here).parts[1:]


_END_RE = re.compile(r"^<!-- skillopt-sleep:end -->[ \t]*(?=\r?$)", re.M)

SKILL_NAME = agents.MANAGED_SKILL
NEW_SKILL = f"""---
name: {SKILL_NAME}
description: Rules learned by skillopt-sleep from this user's recurring tasks and corrections. Apply them to every coding task.
---

# Learned rules

These rules were validated on the user's own recurring tasks before being adopted.

"""


#: Characters per token for the size estimates (a common rule of thumb for English text and
#: code with BPE tokenizers; no tokenizer is shipped, so sizes are estimates).
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (:data:`CHARS_PER_TOKEN` characters a token, rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def block_tokens(rules: list[str], section: str | None = None) -> int:
    """Estimated tokens of a managed block holding ``rules`` (markers, and a project
    section's heading, included)."""
    head = begin_marker(section) + "\n"
    if section is not None:
        head += section_heading(section) + "\n"
    return estimate_tokens(head + "".join(f"- {r}\n" for r in rules) + END)


def sha256_text(text: str | None) -> str:
    """Hash of a document's text; ``""`` for an absent file."""
    if text is None:
        return ""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def managed_skill_path(
    agent: str, env: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """``<the agent's skills folder>/skillopt-sleep-learned/SKILL.md``
    (:meth:`skillopt_sleep.agents.Agent.skills_dir`: the agent's home variable honoured, ``~``
    expanded as everywhere else). ``agent`` is a name or alias. NightError for an unknown
    agent or one without a skills folder."""
    try:
        found = agents.get_agent(agent)
    except UnknownNameError as exc:
        raise NightError(str(exc)) from None
    skills = found.skills_dir(env, home)
    if skills is None:
        raise NightError(
            f"a managed skill for agent {found.name!r} is not supported yet; "
            'set document.kind = "path" with document.path'
        )
    return skills / SKILL_NAME / "SKILL.md"


def resolve_target(
    doc: DocumentConfig,
    project: Path | None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path:
    """The live file a night trains. Raises NightError when it cannot be determined."""
    env = os.environ if env is None else env
    home = home or Path.home()
    if doc.kind == "path":
        if not doc.path:
            raise NightError('document.kind = "path" needs document.path')
        return doc.path.expanduser().resolve()
    if doc.kind == "memory":
        files = agents.get_agent(doc.agent).user_memory_files(env, home)
        if not files:
            raise NightError(f"{doc.agent} has no user-level memory file known; use another kind")
        return files[0]
    if doc.kind in ("claude_md", "agents_md"):
        if not project:
            raise NightError(f"document.kind = {doc.kind!r} needs a project (--project DIR)")
        return project.resolve() / ("CLAUDE.md" if doc.kind == "claude_md" else "AGENTS.md")
    return managed_skill_path(doc.agent, env, home)


def decode_live(
    data: bytes, path: Path | str, *, fix: str = "convert it to UTF-8 or train another document"
) -> str:
    """The text of a live file's bytes. DocumentError (naming the first bad byte) when they
    are not UTF-8; newlines are kept exactly."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise DocumentError(
            f"{path} is not UTF-8 text (byte 0x{bad:02x} at offset {exc.start}); {fix}"
        ) from None


def read_live(path: Path) -> str | None:
    """The live file's text, or None when absent. Newlines are kept exactly (no translation).

    Raises DocumentError when the file is not UTF-8 text or cannot be read; never writes.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_live(data, path)


#: the longest skill description a ``describe`` edit may write (one line; the agent lists it,
#: and so sends it, in every turn)
MAX_DESCRIPTION_CHARS = 300

_FRONT_OPEN = re.compile(r"\A---[ \t]*\r?\n")
_FRONT_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.M)
_DESCRIPTION_KEY = re.compile(r"^description:[ \t]*", re.M)
#: a YAML plain scalar that needs no quotes (no indicator first, no ``: `` / `` #`` inside)
_PLAIN_SAFE = re.compile(r"^[^\s\-?:,\[\]{}#&*!|>'\"%@`][^\n]*$")


def front_matter_description(text: str) -> tuple[str, tuple[int, int]] | None:
    """``(description, (start, end))`` of the ``description`` in the YAML front matter at the
    start of ``text``; ``start:end`` is the value's span (a folded or continued value's lines
    included). None when ``text`` has no front matter or it has no description."""
    opened = _FRONT_OPEN.match(text)
    if not opened:
        return None
    closed = _FRONT_CLOSE.search(text, opened.end())
    if not closed:
        return None
    key = _DESCRIPTION_KEY.search(text, opened.end(), closed.start())
    if not key:
        return None
    start = key.end()
    line_end = text.find("\n", start)
    end = line_end if line_end != -1 and line_end < closed.start() else closed.start()
    end = end - 1 if text[start:end].endswith("\r") else end
    pieces = [text[start:end]]
    # continuation lines: indented, until a line at column 0 (the next key or the closing ---)
    pos = end
    while True:
        nl = text.find("\n", pos)
        if nl == -1 or nl + 1 >= closed.start():
            break
        nxt = text.find("\n", nl + 1)
        nxt = closed.start() - 1 if nxt == -1 or nxt >= closed.start() else nxt
        line = text[nl + 1 : nxt].removesuffix("\r")
        if line.strip() and not line[:1].isspace():
            break
        if line.strip():
            pieces.append(line)
            end = nl + 1 + len(line)
        pos = nxt
    first = pieces[0].strip()
    if first[:1] in (">", "|"):  # a block scalar: the value is its lines
        value = " ".join(p.strip() for p in pieces[1:])
    elif first[:1] == '"' and first.endswith('"') and len(pieces) == 1:
        try:
            value = str(json.loads(first))
        except ValueError:
            value = first[1:-1]
    elif first[:1] == "'" and first.endswith("'") and len(pieces) == 1:
        value = first[1:-1].replace("''", "'")
    else:
        value = " ".join(p.strip() for p in pieces)
    return " ".join(value.split()), (start, end)


def yaml_scalar(text: str) -> str:
    """``text`` as a one-line YAML scalar: plain when that is safe, else double-quoted."""
    if _PLAIN_SAFE.match(text) and ": " not in text and " #" not in text and text[-1] != ":":
        return text
    return json.dumps(text, ensure_ascii=False)


@dataclass
class Document:
    """A document split around its managed block: ``before + block + after`` == the text.

    A skill document (``skill``) also has its front matter ``description`` (None when it has
    none); ``description_span`` is where its value sits in ``before``. Setting another
    ``description`` (see :func:`apply_describe`) rewrites that value on render."""

    before: str
    rules: list[str]
    after: str
    had_block: bool
    newline: str = "\n"
    #: the project whose block this is (None: the block for every project)
    section: str | None = None
    skill: bool = False
    description: str | None = None
    description_span: tuple[int, int] | None = field(default=None, repr=False)

    @classmethod
    def parse(
        cls, text: str | None, *, new_skill: bool = False, section: str | None = None
    ) -> Document:
        """Split ``text`` around the managed block of ``section`` (a project path, whose
        block only holds that project's rules; None: the block for every project). Other
        projects' blocks are kept, as any other text, byte for byte. ``new_skill``: the
        document is a skill (SKILL.md; created with a front matter when absent), whose front
        matter description is parsed."""
        doc = cls._split(text, new_skill=new_skill, section=section)
        if new_skill:
            doc.skill = True
            found = front_matter_description(doc.before)
            if found is not None:
                doc.description, doc.description_span = found
        return doc

    @property
    def parsed_description(self) -> str | None:
        """The description as read (before any ``describe`` edit)."""
        if self.description_span is None:
            return None
        found = front_matter_description(self.before)
        return found[0] if found else None

    def _head(self) -> str:
        """``before`` with the description rewritten when it was changed."""
        if self.description_span is None or self.description == self.parsed_description:
            return self.before
        s, e = self.description_span
        return self.before[:s] + yaml_scalar(self.description or "") + self.before[e:]

    @classmethod
    def _split(cls, text: str | None, *, new_skill: bool, section: str | None) -> Document:
        if text is None:
            return cls(NEW_SKILL if new_skill else "", [], "", False, section=section)
        newline = "\r\n" if "\r\n" in text else "\n"
        b, e = None, None
        for found in _BEGIN_RE.finditer(text):
            m = _SECTION_RE.match(found.group(0))
            if (m.group(1) if m else None) == section:
                b = found
                break
        if b:
            e = _END_RE.search(text, b.end())
        if not b or not e:
            return cls(text, [], "", False, newline, section)
        inner = text[b.end() : e.start()]
        rules = [
            line.strip()[2:].strip()
            for line in inner.splitlines()
            if line.strip().startswith("- ") and line.strip()[2:].strip()
        ]
        return cls(text[: b.start()], rules, text[e.end() :], True, newline, section)

    def render(self, rules: list[str] | None = None) -> str:
        rules = self.rules if rules is None else rules
        nl = self.newline
        head = begin_marker(self.section) + nl
        if self.section is not None:
            head += section_heading(self.section) + nl
        body = head + "".join(f"- {r}{nl}" for r in rules) + END
        before = self._head()
        if self.had_block:
            return before + body + self.after
        if not rules:
            return before
        return before + _separator(before, nl) + body + nl


def sections(text: str | None) -> list[str | None]:
    """The managed blocks in ``text``, by section (None: the block for every project)."""
    out: list[str | None] = []
    for found in _BEGIN_RE.finditer(text or ""):
        m = _SECTION_RE.match(found.group(0))
        out.append(m.group(1) if m else None)
    return out


def all_rules(text: str | None) -> list[str]:
    """The rules of every managed block in ``text`` (the global block's first)."""
    found = sections(text)
    ordered: list[str | None] = [None] if None in found else []
    ordered += [s for s in found if s is not None]
    return [r for sec in ordered for r in Document.parse(text, section=sec).rules]


def block_hash(text: str | None, section: str | None) -> str:
    """What the block of ``section`` in ``text`` holds (whether there is one, and its rules),
    as a sha256 hex: a proposal records it of its base, so adopt can tell that the live file
    changed only outside that block (:func:`outside_blocks`)."""
    doc = Document.parse(text, section=section)
    return sha256_text(json.dumps([doc.had_block, doc.rules]))


def outside_blocks(text: str | None) -> str:
    """``text`` without any managed block (every project's and the global one), whitespace
    folded: the user's own text, which two proposals for different blocks of one file share."""
    out, at = [], 0
    src = text or ""
    for found in _BEGIN_RE.finditer(src):
        if found.start() < at:
            continue
        end = _END_RE.search(src, found.end())
        if end is None:
            break
        out.append(src[at : found.start()])
        at = end.end()
    out.append(src[at:])
    return " ".join("".join(out).split())


def _separator(before: str, nl: str) -> str:
    """What goes between ``before`` and an appended block so that exactly one blank line
    separates them: ends the last line if it is unterminated, then adds the blank line unless
    ``before`` already ends with one. Whatever line ending ``before`` already has (a CRLF file's
    last line may end in a bare LF) counts as one; only added line endings use ``nl``."""
    if not before:
        return ""
    if not before.endswith("\n"):
        return nl + nl
    last_line_start = before[:-1].removesuffix("\r")
    return "" if last_line_start.endswith("\n") else nl


@dataclass
class Edit:
    """One proposed change to the rules. ``op``: add | delete | replace, or describe (a
    skill's new front matter description in ``text``; ``old`` is set to the description it
    replaces when applied)."""

    op: Literal["add", "delete", "replace", "describe"]
    text: str = ""
    old: str = ""
    rationale: str = ""
    origin: str = "reflect"
    status: str = "proposed"  # applied | rejected | unmatched | unverified
    reason: str = ""
    val_before: float | None = None
    val_after: float | None = None
    epoch: int = 0
    batch: int = 0
    id: int | None = field(default=None, compare=False)
    #: the task family the rule is scoped to ("" unscoped; :func:`scoped`)
    scope: str = ""
    #: the tasks (ids) the rule was learned from: the failures the optimizer named
    evidence: list[str] = field(default_factory=list)
    #: the scope the optimizer asked for: ``"all"`` (unscoped), a phrase, or "" (none said)
    asked_scope: str = field(default="", compare=False)

    def describe(self) -> str:
        if self.op == "add":
            return f"add: {self.text}"
        if self.op == "delete":
            return f"delete: {self.old}"
        if self.op == "describe":
            return f"describe: {self.text}"
        return f"replace: {self.old} -> {self.text}"


# ------------------------------------------------------------------ a rule's scope
#: a scoped rule: ``When <scope>: <rule>`` (the scope names a task family; no ``: `` in it)
_SCOPED_RE = re.compile(r"^When ([^:\n]{3,120}?): (\S.*)$")
#: what an optimizer may answer for a rule meant for every task
UNSCOPED = ("all", "any", "every task", "all tasks", "none", "global")


def scope_of(rule: str) -> str:
    """The task family ``rule`` is scoped to ("" when it holds for every task)."""
    m = _SCOPED_RE.match(_clean_rule(rule))
    return m.group(1) if m else ""


def unscoped_text(rule: str) -> str:
    """``rule`` without its scope (what it tells the agent to do)."""
    m = _SCOPED_RE.match(_clean_rule(rule))
    return m.group(2) if m else _clean_rule(rule)


def scoped(rule: str, scope: str) -> str:
    """``rule`` scoped to ``scope`` ("When writing a commit message: keep it under 50
    characters."): the scope in words the agent reads, before the rule. A rule already scoped
    keeps its own; an empty ``scope`` leaves it unscoped."""
    rule = _clean_rule(rule)
    scope = " ".join(scope.replace(":", " ").split())
    if not scope or scope_of(rule):
        return rule
    first = rule[:1]
    if first.isupper() and rule[1:2].islower():  # "Keep answers …" -> "keep answers …"
        rule = first.lower() + rule[1:]
    return f"When {scope}: {rule}"


def _clean_rule(text: str) -> str:
    text = " ".join(text.replace("\r", " ").replace("\n", " ").split())
    return text.removeprefix("- ").strip()


# ------------------------------------------------------------------ when two rules are the same
#: Fuzzy similarity (rapidfuzz ``ratio``, case-insensitive) two rules need to count as the same
#: rule: with the same code spans a rewording ("Always use `pnpm` instead of `npm`." for "Use
#: `pnpm` instead of `npm`.") passes; with no code spans to anchor them only near-identical
#: text does ("Be brief." / "Be brief!").
SAME_SPANS_SIMILARITY = 85.0
PLAIN_SIMILARITY = 95.0

_SPAN_RE = re.compile(r"`([^`]+)`")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION_RE = re.compile(
    r"\b(?:not|never|no|none|nor|avoid|without|cannot|dont|(?:can|don|doesn|isn|won)['’]t)\b"
)


def code_spans(rule: str) -> tuple[str, ...]:
    """The backticked terms of a rule, in order, inner whitespace collapsed."""
    return tuple(" ".join(m.group(1).split()) for m in _SPAN_RE.finditer(rule))


def _has_term(text: str, term: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text) is not None


def _similarity(a: str, b: str) -> tuple[float, float] | None:
    """``(score, threshold)`` for comparing rules ``a`` and ``b``, or None when they cannot be
    the same rule whatever their wording: different code spans (compared exactly: `pytest -q`
    is not `pytest -x`), different numbers ("under 200" / "under 300") or one negated where
    the other is not. A rule written without backticks may still be a rule's plain rewording
    when every code span of the other occurs in it as a term; that is held to the plain-text
    threshold."""
    a, b = _clean_rule(a), _clean_rule(b)
    if scope_of(a).casefold() != scope_of(b).casefold():
        return None  # the same words for other task families are other rules
    sa, sb = code_spans(a), code_spans(b)
    pa, pb = a.replace("`", ""), b.replace("`", "")
    if sorted(_NUMBER_RE.findall(pa)) != sorted(_NUMBER_RE.findall(pb)):
        return None
    if sorted(_NEGATION_RE.findall(pa.casefold())) != sorted(_NEGATION_RE.findall(pb.casefold())):
        return None
    if sa or sb:
        if sa == sb:
            return fuzz.ratio(_fold(a), _fold(b)), SAME_SPANS_SIMILARITY
        plain, spans = (pa, sb) if not sa else (pb, sa) if not sb else ("", ())
        if not spans or not all(_has_term(plain, t) for t in spans):
            return None
    return fuzz.ratio(_fold(pa), _fold(pb)), PLAIN_SIMILARITY


def _fold(rule: str) -> str:
    """A rule's text for fuzzy comparison: case-insensitive, its final punctuation dropped."""
    return rule.casefold().rstrip(" .!;:")


def same_rule(a: str, b: str) -> bool:
    """True when rules ``a`` and ``b`` say the same thing: identical once whitespace is
    normalised, or a near-duplicate — same code spans, numbers and negation, and similar
    enough text (see :func:`_similarity`). Rules whose code spans differ never are."""
    if _clean_rule(a) == _clean_rule(b):
        return True
    sim = _similarity(a, b)
    return sim is not None and sim[0] >= sim[1]


_INSTEAD_RE = re.compile(r"`([^`]+)`\s+instead\s+of\s+`([^`]+)`", re.I)


def contradicts(a: str, b: str) -> str:
    """Why rules ``a`` and ``b`` ask for opposite things ("" when they do not): one says to use
    `X` instead of `Y` and the other `Y` instead of `X`; the same commands or values, one
    negated ("Always mention `pnpm`" / "Never mention `pnpm`"); or the same words with other
    numbers ("under 50 characters" / "under 200 characters"). Rules for different task
    families (their scopes) never contradict."""
    if scope_of(a).casefold() != scope_of(b).casefold():
        return ""
    ua, ub = unscoped_text(a), unscoped_text(b)
    ia, ib = _INSTEAD_RE.search(ua), _INSTEAD_RE.search(ub)
    if ia and ib and (ia.group(1), ia.group(2)) == (ib.group(2), ib.group(1)):
        return f"`{ia.group(1)}` instead of `{ia.group(2)}` against the reverse"
    sa, sb = code_spans(ua), code_spans(ub)
    na = sorted(_NEGATION_RE.findall(ua.replace("`", "").casefold()))
    nb = sorted(_NEGATION_RE.findall(ub.replace("`", "").casefold()))
    if sa and sorted(sa) == sorted(sb) and (not na) != (not nb):
        return f"one says not to, the other to ({', '.join(f'`{x}`' for x in sa)})"
    pa, pb = _NUMBER_RE.findall(ua), _NUMBER_RE.findall(ub)
    if pa and pb and pa != pb:
        words_a, words_b = _NUMBER_RE.sub("#", _fold(ua)), _NUMBER_RE.sub("#", _fold(ub))
        if fuzz.ratio(words_a, words_b) >= PLAIN_SIMILARITY:
            return f"{', '.join(pa)} against {', '.join(pb)}"
    return ""


def find_rule(rules: list[str], old: str) -> int | None:
    """Index of the rule ``old`` refers to: the exact rule, else the most similar rule that is
    :func:`same_rule` as ``old`` (so a rule with other code spans is never picked)."""
    target = _clean_rule(old)
    if target in rules:
        return rules.index(target)
    best, best_score = None, -1.0
    for i, r in enumerate(rules):
        sim = _similarity(r, target)
        if sim is not None and sim[0] >= sim[1] and sim[0] > best_score:
            best, best_score = i, sim[0]
    return best


def _quote(text: str, limit: int = 200) -> str:
    text = _clean_rule(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def apply_edit(rules: list[str], edit: Edit, *, max_rules: int = 60) -> list[str] | None:
    """Return the new rules, or None when the edit does not apply; then ``edit.reason`` says
    why (a duplicate of an existing rule, no rule matching ``old``, ...)."""
    new, reason = _try_edit(rules, edit, max_rules=max_rules)
    if new is None:
        edit.reason = reason
    return new


def _try_edit(rules: list[str], edit: Edit, *, max_rules: int) -> tuple[list[str] | None, str]:
    if edit.op == "describe":
        return None, "a describe edit changes the skill's description, not its rules"
    if edit.op == "add":
        text = _clean_rule(edit.text)
        if not text:
            return None, "the edit has no rule text"
        idx = find_rule(rules, text)
        if idx is not None:
            if rules[idx] == text:
                return None, f"already a rule: {_quote(rules[idx])}"
            return None, f"a near-duplicate of the existing rule: {_quote(rules[idx])}"
        if len(rules) >= max_rules:
            return None, f"the document already has the most rules allowed ({max_rules})"
        return rules + [text], ""
    if not _clean_rule(edit.old):
        return None, f"the {edit.op} names no rule (its old text is empty)"
    idx = find_rule(rules, edit.old)
    if idx is None:
        return None, f"no rule matches '{_quote(edit.old)}'"
    if edit.op == "delete":
        return rules[:idx] + rules[idx + 1 :], ""
    text = _clean_rule(edit.text)
    if not text:
        return None, f"the replacement for '{_quote(rules[idx])}' is empty"
    if text == rules[idx]:
        return None, f"the replacement is the rule itself: {_quote(rules[idx])}"
    return rules[:idx] + [text] + rules[idx + 1 :], ""


def apply_describe(doc: Document, edit: Edit) -> Document | None:
    """``doc`` with the description ``edit.text`` (one line, at most
    :data:`MAX_DESCRIPTION_CHARS` characters), ``edit.old`` set to the description it
    replaces; None when it does not apply, then ``edit.reason`` says why (not a skill, no
    front matter description, empty, too long, unchanged)."""
    new, reason = _try_describe(doc, edit)
    if new is None:
        edit.reason = reason
    return new


def _try_describe(doc: Document, edit: Edit) -> tuple[Document | None, str]:
    if not doc.skill:
        return None, "only a skill has a description; this document is loaded in every turn"
    if doc.description is None or doc.description_span is None:
        return None, "the skill has no front matter description to rewrite"
    edit.old = doc.description
    text = " ".join(edit.text.split())
    if not text:
        return None, "the new description is empty"
    if len(text) > MAX_DESCRIPTION_CHARS:
        return None, (
            f"the description is {len(text)} characters; at most {MAX_DESCRIPTION_CHARS} "
            "(the agent sends it in every turn)"
        )
    if text == doc.description:
        return None, "the new description is the current one"
    edit.text = text
    return replace(doc, description=text), ""


EDIT_OPS = ("add", "delete", "replace", "describe")


def parse_edits(data: dict, *, origin: str = "reflect") -> list[Edit]:
    """Edits from an optimizer answer ``{"edits": [...]}``; malformed items are dropped."""
    out: list[Edit] = []
    for item in data.get("edits") or []:
        if not isinstance(item, dict) or item.get("op") not in EDIT_OPS:
            continue
        evidence = item.get("evidence")
        out.append(
            Edit(
                op=item["op"],
                text=str(item.get("text") or ""),
                old=str(item.get("old") or ""),
                rationale=str(item.get("rationale") or "")[:500],
                origin=origin,
                # the failures it is meant to fix, by their number in the reflect material
                evidence=[str(n) for n in evidence if isinstance(n, int | str)]
                if isinstance(evidence, list)
                else [],
                asked_scope=str(item.get("scope") or "").strip()[:120],
            )
        )
    return out


def delivery_cost(
    target: Path, text: str, rules: list[str], budget: int, section: str | None = None
) -> dict[str, Any]:
    """What ``text`` (the document for ``target``) costs once adopted, in estimated tokens:
    a ``SKILL.md`` is a skill (its frontmatter ``description`` is listed in every turn, the
    whole file only once the agent loads it); any other file is memory, loaded whole in every
    turn (see docs/agents.md). The fields of :class:`skillopt_sleep.results.Delivery`."""
    if Path(target).name == "SKILL.md":
        found = front_matter_description(text)
        return {
            "mode": "skill",
            "rules": len(rules),
            "block_tokens": block_tokens(rules, section),
            "budget": budget,
            "per_turn_tokens": estimate_tokens(found[0] if found else ""),
            "when_loaded_tokens": estimate_tokens(text),
        }
    return {
        "mode": "memory",
        "rules": len(rules),
        "block_tokens": block_tokens(rules),
        "budget": budget,
        "per_turn_tokens": estimate_tokens(text),
    }
