"""The simulator's deterministic "brain": role detection, the rule language, and the
reflect / judge / consolidate behaviours. No randomness, no model: same input, same output.

Input is a :class:`Turn` (an API-neutral view of one request, built by ``wire.py``); output
is a :class:`Reply` (text and/or one tool call).

Roles: a request whose last user message contains a marker line of
:mod:`skillopt_sleep.night.prompts` (``SKILLOPT-REFLECT v1`` / ``SKILLOPT-JUDGE v1`` /
``SKILLOPT-CONSOLIDATE v1``) is that role; anything else is a ``target`` call.

Rule language (case-insensitive, values in backticks), read from the request's system text
and every message, applied to a target answer in this order:

* ``Use `A` instead of `B`.``      replace whole-word-ish occurrences of B with A
* ``Always mention `X`.``          append `` Also: `X`.`` when X is absent
* ``Never mention `X`.``           remove X
* ``Use the `T` tool.``            call tool T (when the request offers it) before answering
* ``Keep answers under N characters.``  truncate the answer to N characters

Any other sentence is ignored: without a matching rule the persona gives its canned answer
(its "characteristic mistake"). A dream rollout's later sample (``Turn.sample`` > 0, from the
``x-skillopt-sample`` header) gives the answer's ``variants`` in turn instead, when it has
some: still no randomness, the sample index is part of the input. An answer with ``fickle``
alternatives stands for a prompt-sensitive model: which of them it gives is picked by a hash of
everything the rule language reads (folders of paths left out) and the sample index, so any
change of the document — even a rule that says nothing — may change it.

Context: a replay's ``<session-context>`` preamble (the files and outputs the replayed
occurrence's agent saw, see ``backends.base.context_block``) is not part of what was asked
(answers are matched on the prompt without it); an answer's ``{changed_file}`` is the first
file a diff in that context changes (``diff --git a/X``), or ``files`` when no diff was seen.

Skills (``Turn.skills``, parsed by ``wire.py`` from the listing each agent CLI sends, see
docs/agents.md): a listed skill contributes only its *listing entry* (name, description,
location), and that entry is never read for rules: a description says when to load a skill,
it is not an instruction. As a target the brain loads a listed skill when the persona's
``[skills]`` rule picks it (:func:`skill_matches`) and the CLI offers the way to load it:
Claude Code's ``Skill`` / Copilot's ``skill`` tool with ``{"skill": name}``, or, for a skill
listed with a file path, Codex's ``exec_command`` with ``cat <path>``, OpenCode's ``skill`` tool
with ``{"name": name}`` or Pi's ``read`` with ``{"path": path}``. Loading happens at the
start of a conversation or right after another load, never after a plain tool result; one
skill per request, most shared words first (ties: listing order), each at most once (a call
already in the conversation counts as loaded), at most ``max_loads`` per conversation. The
CLI's answer carries the body, which the rule language then reads like any other context (the
YAML front matter of a file read by a tool is skipped, so a description's sentences do not
apply even after a Codex ``cat``). After a skill load the target goes on as at the start of
the conversation: the canned answer's tools and ``Use the `T` tool.`` rules are still called,
except a call (tool and input) already made in this conversation.
Skills the CLI ships itself (``ListedSkill.builtin``) are not loaded unless the persona says
``builtin = true``.

As the optimizer, for a skill document (the reflect material's ``skill``) whose failing
rollouts did not load it (``skill_loaded`` false), the brain first proposes a ``describe`` edit
(:func:`derive_description`: the content words of those tasks, so the ``words`` rule picks
the skill for them), unless the persona says ``describe_skills = false`` or that description
was already rejected (with ``describe_as`` set, that description instead, for any skill);
then the add edits of ``optimizer.order`` (the ``derived`` group: first what tells each
dream contrast's best attempt from its worst, :func:`contrast_edits`, then what the failed
checks say). A consolidation drops duplicate rules (and with
``lossy_consolidate`` the last rule; with ``unscoped_consolidate`` each rule's scope) and
appends ``consolidate_adds``.

Scope: a rule line ``When <scope>: <rule>`` counts for a target answer only where the scope holds
for the request (:func:`in_scope`: a literal reading by shared word stems); the optimizer names
each edit's ``evidence`` (the failures it derives from) and asks for the ``scope`` of their
``family``, "all" when they span several.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillopt_sleep.delivery import document
from skillopt_sleep.night import prompts
from skillopt_sleep.simulator.persona import Persona, SkillRule

ROLES = ("target", "reflect", "judge", "consolidate", "read", "group")
_MARKERS = {
    "reflect": prompts.REFLECT_MARKER,
    "judge": prompts.JUDGE_MARKER,
    "consolidate": prompts.CONSOLIDATE_MARKER,
    "read": prompts.READ_MARKER,
    "group": prompts.GROUP_MARKER,
}

_USE_INSTEAD = re.compile(r"\buse\s+`([^`]+)`\s+instead\s+of\s+`([^`]+)`", re.I)
_ALWAYS = re.compile(r"\balways\s+mention\s+`([^`]+)`", re.I)
_NEVER = re.compile(r"\bnever\s+mention\s+`([^`]+)`", re.I)
_USE_TOOL = re.compile(r"\buse\s+the\s+`([^`]+)`\s+tool", re.I)
_MAX_CHARS = re.compile(r"\bkeep\s+answers\s+under\s+(\d+)\s+characters", re.I)
_CONTEXT = re.compile(r"<session-context>(.*?)</session-context>\s*", re.S)
_DIFF_FILE = re.compile(r"^diff --git a/(\S+)|^\+\+\+ b/(\S+)", re.M)
_FRONT_MATTER = re.compile(r"(?ms)^---\n(?=[\w-]+:).*?^---$")
_WORD = re.compile(r"[a-z]+")
# fmt: off
STOP_WORDS = frozenset([
    "about", "above", "after", "again", "against", "also", "always", "another", "because", "been",
    "before", "being", "below", "between", "both", "could", "does", "doing", "done", "down",
    "during", "each", "either", "even", "every", "from", "further", "have", "having", "here",
    "into", "just", "like", "make", "many", "more", "most", "much", "must", "need", "never",
    "only", "other", "over", "please", "same", "should", "since", "some", "such", "than", "that",
    "their", "them", "then", "there", "these", "they", "this", "those", "through", "under",
    "until", "upon", "used", "uses", "using", "very", "want", "what", "when", "where", "which",
    "while", "will", "with", "within", "without", "would", "your", "yours",
])
# fmt: on
_NEGATORS = re.compile(r"\b(not|never|instead\s+of|avoid|without|don't|do\s+not|no)\b", re.I)


@dataclass(frozen=True)
class ListedSkill:
    """A skill as the request lists it. ``location``: Codex the absolute SKILL.md path,
    Copilot ``user`` / ``project`` / ``builtin``, Claude Code ``""`` (none listed).
    ``entry``: the listing text of this skill exactly as sent (never read for rules).
    ``builtin``: shipped with the CLI, not the user's (see ``wire.py``)."""

    name: str
    description: str
    location: str = ""
    entry: str = ""
    builtin: bool = False


#: the folder part of a path (``/tmp/x/webapp/`` of ``/tmp/x/webapp/CLAUDE.md``)
_FOLDERS = re.compile(r"\S*/")


@dataclass
class Turn:
    """One request, API-neutral.

    ``system``: all system/developer/instructions text. ``messages``: (role, text) pairs with
    role ``user`` / ``assistant`` / ``tool`` (tool results). ``last_user``: full text of the
    last user message; ``prompt``: its last real text block (system reminders dropped).
    ``tools``: names of the tools offered. ``after_tool``: the last item is a tool result
    (a skill body the CLI sends after a skill call counts as part of that result).
    ``skills``: the skills the request lists. ``calls``: the assistant's tool calls so far,
    ``(name, input)`` in order.
    """

    model: str = ""
    system: str = ""
    messages: list[tuple[str, str]] = field(default_factory=list)
    last_user: str = ""
    prompt: str = ""
    tools: list[str] = field(default_factory=list)
    after_tool: bool = False
    stream: bool = False
    skills: list[ListedSkill] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: a dream rollout's sample index (``x-skillopt-sample``; 0 without the header)
    sample: int = 0

    def all_text(self) -> str:
        return "\n".join([self.system, *(text for _, text in self.messages)])

    def working_folder(self) -> str | None:
        """The working folder the agent CLI states in its request (Claude Code's "Primary
        working directory", Codex's ``<cwd>``, Copilot's and Pi's "Current working directory",
        OpenCode's and OpenClaw's "Working directory"); None when none is stated (a bare HTTP
        call)."""
        found = _CWD.search(self.all_text())
        return (found.group(1) or found.group(2)).strip() if found else None

    def rule_text(self) -> str:
        """The text the rule language reads: :meth:`all_text` without the skill listing's
        entries and without the front matter of a skill file a tool read, and without a
        project's block of rules whose stated scope does not hold in the working folder the
        request states (a literal-minded model obeys "When working in `X` …" only there).
        Equal to :meth:`all_text` when no skill is listed and every block is in scope."""
        return _in_scope_blocks(self._rule_text(), self.working_folder())

    def _rule_text(self) -> str:
        if not self.skills:
            return self.all_text()
        parts = [self.system]
        parts += [_FRONT_MATTER.sub("", t) if r == "tool" else t for r, t in self.messages]
        text = "\n".join(parts)
        for skill in self.skills:
            if skill.entry:
                text = text.replace(skill.entry, "")
        return text


#: the working folder an agent CLI's request states (see :meth:`Turn.working_folder`)
_CWD = re.compile(
    r"(?:Primary working directory|[Cc]urrent working directory|Working directory):[ \t]*"
    r"([^\n]+?)[ \t]*$|<cwd>([^<\n]+)</cwd>",
    re.M,
)
#: the end of a managed block
_BLOCK_END = re.compile(r"^<!-- skillopt-sleep:end -->", re.M)


def _in_scope_blocks(text: str, cwd: str | None) -> str:
    """``text`` without the rules of each project block whose heading's scope does not hold
    in ``cwd`` (from the heading to the block's end marker); unchanged without a ``cwd``."""
    if cwd is None:
        return text
    out, at = [], 0
    for head in document.HEADING_RE.finditer(text):
        if head.start() < at or document.covers(head.group(1), cwd, head.group(2)):
            continue
        end = _BLOCK_END.search(text, head.end())
        out.append(text[at : head.start()])
        at = end.start() if end else len(text)
    return "".join(out) + text[at:]


@dataclass
class Reply:
    role: str
    text: str = ""
    tool: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rules:
    """The rules found in a context, in the order they appear."""

    replace: list[tuple[str, str]] = field(default_factory=list)  # (new, old)
    always: list[str] = field(default_factory=list)
    never: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    max_chars: int | None = None


#: a scoped rule line: ``- When <scope>: <rule>`` (see ``delivery.document.scoped``)
_SCOPED_LINE = re.compile(r"^(\s*(?:[-*]\s+)?)When ([^:\n]{3,120}?): (\S[^\n]*)$", re.M)
#: words of a scope that say nothing of what it is about
_SCOPE_FILLER = frozenset({"when", "writing", "giving", "asked", "answering", "running", "doing"})


def in_scope(scope: str, asked: str) -> bool:
    """Whether a literal-minded model takes a rule scoped to ``scope`` to hold for the request
    ``asked``: a content word of the scope (4+ letters) and a word of the request start alike,
    on five letters or the whole shorter word ("installing dependencies" holds for "install
    them"; "writing tests" for "add a test"; "writing a commit message" not for "give me a
    command")."""
    words = [w for w in _WORD.findall(scope.lower()) if len(w) >= 4 and w not in STOP_WORDS]
    words = [w for w in words if w not in _SCOPE_FILLER]
    said = [w for w in _WORD.findall(asked.lower()) if len(w) >= 4]
    return any(r.startswith(w[:5]) or w.startswith(r[:5]) for w in words for r in said)


def parse_rules(text: str, asked: str | None = None) -> Rules:
    """Read every rule of the rule language in ``text``. The smallest length limit wins.
    With ``asked`` (the request), a scoped rule ("When writing a commit message: …") counts
    only when its scope holds for the request (:func:`in_scope`); without it, every rule
    counts as if unscoped."""
    if asked is not None:
        text = _SCOPED_LINE.sub(
            lambda m: m.group(1) + m.group(3) if in_scope(m.group(2), asked) else "", text
        )
    rules = Rules(
        replace=[(m.group(1), m.group(2)) for m in _USE_INSTEAD.finditer(text)],
        always=[m.group(1) for m in _ALWAYS.finditer(text)],
        never=[m.group(1) for m in _NEVER.finditer(text)],
        tools=[m.group(1) for m in _USE_TOOL.finditer(text)],
    )
    limits = [int(m.group(1)) for m in _MAX_CHARS.finditer(text)]
    rules.max_chars = min(limits) if limits else None
    return rules


def _word(term: str) -> re.Pattern[str]:
    """Whole-word-ish matcher: ``npm`` matches in ``npm test`` but not in ``pnpm``."""
    return re.compile(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])", re.I)


def has_term(text: str, term: str) -> bool:
    return bool(_word(term).search(text))


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A :func:`re.sub` replacement inserting ``text`` as is (no backslash escapes)."""
    return lambda _m: text


def apply_rules(answer: str, rules: Rules) -> str:
    """Apply replace, always, never, then the length limit to a target answer."""
    for new, old in rules.replace:
        answer = _word(old).sub(_literal(new), answer)
    for term in rules.always:
        if term.lower() not in answer.lower():
            answer = f"{answer.rstrip()} Also: `{term}`."
    for term in rules.never:
        answer = re.sub(re.escape(term), "", answer, flags=re.I)
        answer = re.sub(r"``", "", answer)
        answer = re.sub(r"[ \t]{2,}", " ", answer).strip()
    if rules.max_chars is not None:
        answer = answer[: rules.max_chars].rstrip()
    return answer


def detect_role(turn: Turn) -> str:
    for role, marker in _MARKERS.items():
        if marker in turn.last_user:
            return role
    return "target"


def _material(text: str, role: str) -> dict[str, Any]:
    start = text.find(_MARKERS[role])
    try:
        return prompts.material_of(text[start:])
    except (ValueError, json.JSONDecodeError):
        return {}


def content_words(text: str) -> set[str]:
    """Lower-cased words of 4 letters or more, stop-words out (no stemming)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in STOP_WORDS}


def skill_matches(skill: ListedSkill, prompt: str, rule: SkillRule) -> int:
    """How strongly the persona's load rule picks ``skill`` for ``prompt``: 0 = not at all.
    ``words``: the number of content words its description shares with the prompt, when at
    least ``min_shared``; ``always``: 1; ``never``: 0. A built-in skill: 0 unless
    ``rule.builtin``."""
    if skill.builtin and not rule.builtin:
        return 0
    if rule.match == "always":
        return 1
    if rule.match == "words":
        shared = len(content_words(skill.description) & content_words(prompt))
        return shared if shared >= max(rule.min_shared, 1) else 0
    return 0


def _is_path(location: str) -> bool:
    return location.startswith("/")


def loads_skill(call: tuple[str, dict[str, Any]], skill: ListedSkill) -> bool:
    """True when the tool call ``(name, input)`` loads ``skill``: a ``Skill`` / ``skill`` call
    naming it, or any call whose input holds its file path (Codex's ``cat <path>``)."""
    name, tool_input = call
    if name.lower() == "skill" and skill.name in (tool_input.get("skill"), tool_input.get("name")):
        return True  # Claude Code / Copilot {"skill": …}; OpenCode {"name": …}
    return _is_path(skill.location) and skill.location in json.dumps(tool_input, ensure_ascii=False)


def skill_loaded(turn: Turn, skill: ListedSkill) -> bool:
    """True when a tool call of the conversation so far loaded ``skill``."""
    return any(loads_skill(call, skill) for call in turn.calls)


def skill_call(skill: ListedSkill, tools: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The tool call that loads ``skill`` with the tools offered, or None when none fits."""
    offered = {t.lower(): t for t in tools}
    if _is_path(skill.location):
        if "exec_command" in offered:  # Codex
            return offered["exec_command"], {"cmd": f"cat {shlex.quote(skill.location)}"}
        if "skill" in offered:  # OpenCode lists the file, loads by name
            return offered["skill"], {"name": skill.name}
        if "read" in offered:  # Pi: no skill tool, the model reads the listed file
            return offered["read"], {"path": skill.location}
        return None
    if "skill" in offered:
        return offered["skill"], {"skill": skill.name}
    return None


def _norm(rule: str) -> str:
    return " ".join(str(rule).lower().split()).rstrip(".")


class Brain:
    """Answers one :class:`Turn` for a :class:`Persona`."""

    def __init__(self, persona: Persona):
        self.persona = persona

    def respond(self, turn: Turn) -> Reply:
        role = detect_role(turn)
        if role == "target":
            return self.target(turn)
        material = _material(turn.last_user, role)
        if role == "reflect":
            out: dict[str, Any] = {"edits": self.reflect(material)}
        elif role == "group":
            requests = material.get("requests", [])
            texts = [str(r.get("text", "")) for r in requests if isinstance(r, dict)]
            out = {"groups": group_requests(texts)}
        elif role == "read":
            out = read_followup(str(material.get("follow_up", "")))
        elif role == "judge":
            out = {
                "score": judge_score(
                    str(material.get("rubric", "")), str(material.get("answer", ""))
                )
            }
        else:
            merged = consolidate(list(material.get("rules", [])))
            if self.persona.unscoped_consolidate:  # a merge that widens each rule
                merged = [m.group(3) if (m := _SCOPED_LINE.match(r)) else r for r in merged]
            if self.persona.lossy_consolidate and len(merged) > 1:
                merged = merged[:-1]  # a merge that loses a rule: the night must refuse it
            merged += [r for r in self.persona.consolidate_adds if r not in merged]
            out = {"rules": merged}
        return Reply(role, json.dumps(out, ensure_ascii=False))

    # -- target -------------------------------------------------------------------------
    def target(self, turn: Turn) -> Reply:
        persona = self.persona
        asked = turn.prompt or turn.last_user
        last_load = bool(
            turn.after_tool
            and turn.calls
            and any(loads_skill(turn.calls[-1], s) for s in turn.skills)
        )
        if not turn.after_tool or last_load:
            load = self.skill_to_load(turn, asked)
            if load is not None:
                return Reply("target", "", load[0], load[1])
        seen = "\n".join(_CONTEXT.findall(turn.all_text()))
        asked = _CONTEXT.sub("", asked)
        match = next((a for a in persona.answers if a.pattern.search(asked)), None)
        if match is not None:
            text = match.text
            if match.fickle:  # a prompt-sensitive model: any change of the instructions
                options = (match.text, *match.fickle)
                # the folders of paths left out: the same world in another folder, same answers
                said = _FOLDERS.sub("", turn.rule_text())
                seed = f"{said}\x00{turn.sample}".encode()
                text = options[hashlib.sha256(seed).digest()[0] % len(options)]
            elif turn.sample and match.variants:  # a dream rollout's other sample
                text = match.variants[(turn.sample - 1) % len(match.variants)]
        else:
            text = persona.default_answer.replace("{prompt}", _CONTEXT.sub("", turn.prompt).strip())
        diff = _DIFF_FILE.search(seen)
        text = text.replace("{changed_file}", (diff.group(1) or diff.group(2)) if diff else "files")
        rules = parse_rules(turn.rule_text(), asked)
        text = apply_rules(text, rules)
        if not turn.after_tool or last_load:
            offered = {t.lower(): t for t in turn.tools}
            called = [(name.lower(), args) for name, args in turn.calls] if last_load else []
            wanted = [(n, match.tool_input) for n in match.tools] if match else []
            wanted += [(name, {}) for name in rules.tools]
            for name, default in wanted:
                tool_input = dict(persona.tool_inputs.get(name, default))
                if name.lower() in offered and (name.lower(), tool_input) not in called:
                    return Reply("target", "", offered[name.lower()], tool_input)
        return Reply("target", text)

    def skill_to_load(self, turn: Turn, asked: str) -> tuple[str, dict[str, Any]] | None:
        """The call loading the best-matching listed skill not loaded yet (see the module
        docstring), or None."""
        best: tuple[int, tuple[str, dict[str, Any]]] | None = None
        loaded = sum(skill_loaded(turn, skill) for skill in turn.skills)
        if loaded >= self.persona.skills.max_loads:
            return None
        for skill in turn.skills:
            score = skill_matches(skill, asked, self.persona.skills)
            if not score or skill_loaded(turn, skill):
                continue
            call = skill_call(skill, turn.tools)
            if call is not None and (best is None or score > best[0]):
                best = (score, call)
        return None if best is None else best[1]

    # -- reflect ------------------------------------------------------------------------
    def reflect(self, material: dict[str, Any]) -> list[dict[str, Any]]:
        """Edits ``[{"op": "add", "text", "rationale"}]`` (see the module docstring); for a
        skill first a ``describe`` edit (:func:`derive_description`)."""
        blocked = {_norm(r) for r in material.get("rules", [])}
        # the buffer holds Edit.describe() texts: "add: <rule>", "replace: <old> -> <new>",
        # "describe: <description>"
        said = [str(r) for r in material.get("rejected_edits", [])]
        if not self.persona.ignore_user_refusals:
            said += [str(r.get("edit", "")) for r in material.get("user_refused_edits", [])]
        described = set()
        for r in said:
            if r.startswith("describe:"):
                described.add(_norm(r.removeprefix("describe:")))
                continue
            r = re.sub(r"^(add|delete):\s*", "", r)
            blocked.add(_norm(r.split(" -> ", 1)[-1] if r.startswith("replace:") else r))
        budget = int(material.get("edit_budget", 2) or 0)
        edits: list[dict[str, Any]] = []
        skill = material.get("skill")
        told = self.persona.describe_as
        if told and isinstance(skill, dict) and budget > 0 and _norm(told) not in described:
            edits.append({"op": "describe", "text": told, "rationale": "a better description"})
        elif self.persona.describe_skills and isinstance(skill, dict) and budget > 0:
            rollouts = list(material.get("failures", [])) + list(material.get("successes", []))
            text = derive_description(rollouts, int(skill.get("max_chars") or 300))
            current = _norm(str(skill.get("description") or ""))
            if text and _norm(text) not in described and _norm(text) != current:
                edits.append(
                    {
                        "op": "describe",
                        "text": text,
                        "rationale": "the skill was not loaded in failing rollouts",
                    }
                )
        failures = [f for f in material.get("failures", []) if isinstance(f, dict)]
        every = [f.get("n") for f in failures if f.get("n") is not None]
        groups: dict[str, list[tuple[str, str, list[Any]]]] = {
            "derived": [(t, why, every) for t, why in contrast_edits(material.get("contrasts", []))]
            + derive_edits(failures),
            "useless": [(e, "generic advice", every) for e in self.persona.useless_edits],
            "harmful": [
                (e, "shorter answers are easier to read", every) for e in self.persona.harmful_edits
            ],
        }
        family = {f.get("n"): str(f.get("family", "")) for f in failures}
        for group in self.persona.order:
            for text, rationale, evidence in groups[group]:
                if _norm(text) in blocked or len(edits) >= budget:
                    continue
                blocked.add(_norm(text))
                # a literal-minded optimizer: the families of what it fixes, "all" when several
                families = {family.get(n, "") for n in evidence}
                scope = "all" if len(families) != 1 else next(iter(families))
                edits.append(
                    {
                        "op": "add",
                        "text": text,
                        "rationale": rationale,
                        "evidence": evidence,
                        "scope": scope,
                    }
                )
        return edits


def _ordered_words(text: str) -> list[str]:
    """:func:`content_words` of ``text`` in order of first appearance."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        if len(w) >= 4 and w not in STOP_WORDS and w not in out:
            out.append(w)
    return out


def derive_description(rollouts: list[dict[str, Any]], max_chars: int) -> str:
    """A skill description the ``words`` load rule picks for the failing rollouts that did not
    load the skill: ``Rules for <word>, <word>, ….`` with the content words of those tasks,
    then of the rollouts that did load it (so they still do), in order of first appearance,
    as many as fit in ``max_chars``. ``""`` when no failing rollout went without the skill
    (``skill_loaded`` false; "unknown" does not count)."""
    missed = [
        r for r in rollouts if r.get("skill_loaded") is False and float(r.get("score", 0)) < 1.0
    ]
    if not missed:
        return ""
    kept = [r for r in rollouts if r.get("skill_loaded") is True]
    words: list[str] = []
    for r in missed + kept:
        words += [w for w in _ordered_words(str(r.get("task", ""))) if w not in words]
    text = "Rules for"
    for i, w in enumerate(words):
        longer = f"{text}{',' if i else ''} {w}"
        if len(longer) + 1 > max_chars:
            break
        text = longer
    return text + "." if text != "Rules for" else ""


_SPAN = re.compile(r"`([^`]+)`")


def contrast_edits(contrasts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(rule text, rationale) pairs from dream rollouts' best and worst attempts (the reflect
    material's ``contrasts``): the i-th backticked value only the best answer has, paired with
    the i-th only the worst has, as "Use `X` instead of `Y`." (unpaired ones: "Always
    mention" / "Never mention"). Values compared ignoring case."""
    out: list[tuple[str, str]] = []
    for c in contrasts:
        best = [m.group(1) for m in _SPAN.finditer(str((c.get("best") or {}).get("answer", "")))]
        worst = [m.group(1) for m in _SPAN.finditer(str((c.get("worst") or {}).get("answer", "")))]
        low_b, low_w = {x.lower() for x in best}, {x.lower() for x in worst}
        pos = [x for x in best if x.lower() not in low_w]
        neg = [x for x in worst if x.lower() not in low_b]
        why = f"the best attempt did it: {str(c.get('task', ''))[:80]}"
        out += [(f"Use `{x}` instead of `{y}`.", why) for x, y in zip(pos, neg, strict=False)]
        out += [(f"Always mention `{x}`.", why) for x in pos[len(neg) :]]
        out += [(f"Never mention `{y}`.", why) for y in neg[len(pos) :]]
    return out


def derive_edits(failures: list[dict[str, Any]]) -> list[tuple[str, str, list[Any]]]:
    """(rule text, rationale, evidence) triples derived from the failed checks, in failure
    order; the evidence is the numbers (``n``) of the failures that call for the rule.

    Within one failure the i-th failed ``contains X`` pairs with the i-th failed
    ``not_contains Y`` into "Use `X` instead of `Y`."; leftovers become "Always mention" /
    "Never mention"; ``max_chars N`` (or, without one, a length in the user's corrections:
    "under 50 characters") and ``tool_called T`` have their own rules.
    """
    out: list[tuple[str, str, Any]] = []
    for failure in failures:
        checks = failure.get("failed_checks", []) or []
        by_kind: dict[str, list[str]] = {}
        for check in checks:
            by_kind.setdefault(str(check.get("kind")), []).append(str(check.get("value", "")))
        pos, neg = by_kind.get("contains", []), by_kind.get("not_contains", [])
        why = f"fixes task: {str(failure.get('task', ''))[:80]}"
        n = failure.get("n")
        for x, y in zip(pos, neg, strict=False):  # the extra positives follow
            out.append((f"Use `{x}` instead of `{y}`.", why, n))
        out += [(f"Always mention `{x}`.", why, n) for x in pos[len(neg) :]]
        out += [(f"Never mention `{y}`.", why, n) for y in neg[len(pos) :]]
        limits = by_kind.get("max_chars", [])
        if not limits:  # a length the user asked for, read from their words (a rubric task)
            said = " ".join(str(c) for c in failure.get("corrections", []) or [])
            limits = _READ_LIMIT.findall(said)[:1]
        out += [(f"Keep answers under {v} characters.", why, n) for v in limits]
        out += [(f"Use the `{t}` tool.", why, n) for t in by_kind.get("tool_called", [])]
    unique: dict[str, tuple[str, str, list[Any]]] = {}
    for text, why, n in out:
        key = _norm(text)
        if key not in unique:
            unique[key] = (text, why, [])
        if n is not None and n not in unique[key][2]:
            unique[key][2].append(n)
    return list(unique.values())


def judge_score(rubric: str, answer: str) -> float:
    """Fraction of backticked rubric terms satisfied by ``answer`` (3 decimals).

    A term counts when present, or when ABSENT if a negator (not, never, instead of, avoid,
    without, don't, no) occurs in the few words before it (since the previous term).
    No terms: 1.0 for a non-empty answer, else 0.0. A length limit ("at most N characters")
    is one more term, met when the answer's first line is no longer.
    """
    terms = list(re.finditer(r"`([^`]+)`", rubric))
    limits = [int(n) for n in _JUDGE_LIMIT.findall(rubric)]
    if not terms and not limits:
        return 1.0 if answer.strip() else 0.0
    ok, prev_end = 0, 0
    for m in terms:
        window = " ".join(rubric[prev_end : m.start()].split()[-4:])
        negative = bool(_NEGATORS.search(window))
        ok += has_term(answer, m.group(1)) != negative
        prev_end = m.end()
    first = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    ok += sum(bool(first) and len(first) <= n for n in limits)
    return round(ok / (len(terms) + len(limits)), 3)


_JUDGE_LIMIT = re.compile(r"\bat most (\d+) characters\b", re.I)


# A literal-minded reader of follow-ups in four languages (the real model reads any): the
# words that make a follow-up a correction or an approval, and the words before a backticked
# literal that make it one to avoid.
_READ_CORRECTION = re.compile(
    r"^\W*(?:no|nein|non|nope)\b|\b(?:wrong|falsch|incorrect[oa]?|faux|instead of|statt"
    r"|anstatt|en (?:vez|lugar) de|au lieu de|cut off|truncated|abgeschnitten|unvollständig"
    r"|cortad[oa]|incomplet[oa]?|coupée?|too long|zu lang|demasiado larg[oa]|trop long"
    r"|vergessen|olvidaste|oublié|nicht|pas)\b",
    re.I,
)
_READ_POSITIVE = re.compile(
    r"^\W*(?:danke|perfekt|super|gracias|perfecto|genial|merci|parfait|thanks|perfect)\b", re.I
)
_READ_AVOID = re.compile(
    r"\b(?:not|nicht|no|pas|sin|ohne|without|statt|anstatt|instead of|en (?:vez|lugar) de"
    r"|au lieu de|kein(?:e|en)?)\W*$",
    re.I,
)
_READ_USE = re.compile(r"\b(?:use|usa|utilise|verwende|nutze|benutze|with|mit|con|avec)\W*$", re.I)
_READ_LIMIT = re.compile(r"(\d+)\s*(?:characters|chars|zeichen|caracteres|caractères)", re.I)
_READ_SECTION = re.compile(
    r"\b(?:section|abschnitt|sección|seccion)\s+`([^`]+)`|`([^`]+)`[\s-]+(?:section|abschnitt)\b",
    re.I,
)
_READ_IMPERATIVE = re.compile(r"\b(?:imperativ[eo]?|impératif)\b", re.I)


def read_followup(text: str) -> dict[str, Any]:
    """The simulator's reading of a follow-up (``SKILLOPT-READ``): a correction when it says
    no or names what is wrong in one of four languages, an approval when it thanks; a
    backticked literal after "use" becomes ``contains`` (after a negating word
    ``not_contains``; any other is left to the rubric item, the follow-up itself), a
    number of characters ``max_chars``, a named section ``section``, the imperative mood
    ``imperative``."""
    if _READ_POSITIVE.search(text) and not _READ_CORRECTION.search(text):
        return {"label": "positive", "checks": [], "rubric": []}
    if not _READ_CORRECTION.search(text):
        return {"label": "neutral", "checks": [], "rubric": []}
    checks: list[dict[str, str]] = []
    sections = {m.group(1) or m.group(2) for m in _READ_SECTION.finditer(text)}
    for m in re.finditer(r"`([^`]+)`", text):
        if m.group(1) in sections:
            continue
        before = text[: m.start()]
        if _READ_AVOID.search(before):
            checks.append({"kind": "not_contains", "value": m.group(1)})
        elif _READ_USE.search(before):
            checks.append({"kind": "contains", "value": m.group(1)})
        # any other literal ("`make release` is missing") is left to the rubric
    checks += [{"kind": "section", "value": name} for name in sorted(sections)]
    limit = _READ_LIMIT.search(text)
    if limit:
        checks.append({"kind": "max_chars", "value": limit.group(1)})
    if _READ_IMPERATIVE.search(text):
        checks.append({"kind": "imperative", "value": ""})
    return {"label": "correction", "checks": checks, "rubric": [f"Do what the user asked: {text}"]}


#: what the simulator understands of a request in four languages: a concept per line, each
#: a pattern for its action and one for its object (the real model reads any wording)
_CONCEPTS: list[tuple[str, re.Pattern[str], re.Pattern[str]]] = [
    (
        "install dependencies",
        re.compile(r"\b(?:instal\w*|set ?up)\b", re.I),
        re.compile(
            r"\b(?:dependenc\w*|deps|abhängigkeit\w*|dependencias|dépendances|packages)\b", re.I
        ),
    ),
    (
        "run tests",
        re.compile(r"\b(?:run|führe|ejecuta|lance|lancer|starte)\b", re.I),
        re.compile(r"\b(?:tests?|pruebas|suite|testsuite)\b", re.I),
    ),
    (
        "commit message",
        re.compile(r"\b(?:write|schreib\w*|escrib\w*|écri\w*|give|suggest)\b", re.I),
        re.compile(r"\bcommit\w*", re.I),
    ),
]


#: words a request may hold beside its concept's (filler in four languages): a request with any
#: other word ("run the *unit* tests") asks for more than the concept, and is grouped with none
_GROUP_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "for",
        "me",
        "my",
        "our",
        "this",
        "please",
        "now",
        "can",
        "could",
        "you",
        "how",
        "do",
        "i",
        "in",
        "to",
        "all",
        "project",
        "projects",
        "die",
        "der",
        "das",
        "des",
        "den",
        "dem",
        "ein",
        "eine",
        "einen",
        "bitte",
        "jetzt",
        "im",
        "kannst",
        "du",
        "projekts",
        "projekt",
        "aus",
        "el",
        "la",
        "los",
        "las",
        "del",
        "de",
        "por",
        "favor",
        "ahora",
        "puedes",
        "proyecto",
        "le",
        "les",
        "du",
        "des",
        "s'il",
        "te",
        "plaît",
        "maintenant",
        "projet",
        "le",
        "la",
    ]
)


def group_requests(texts: list[str]) -> list[list[int]]:
    """The simulator's grouping (``SKILLOPT-GROUP``): requests that name the same concept of
    :data:`_CONCEPTS` (its action and its object) in one of four languages, and nothing else
    (:data:`_GROUP_FILLER` aside), are one group."""
    by: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        for name, action, thing in _CONCEPTS:
            if not (action.search(text) and thing.search(text)):
                continue
            rest = thing.sub(" ", action.sub(" ", text.lower()))
            if all(w in _GROUP_FILLER for w in re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", rest)):
                by.setdefault(name, []).append(i)
            break
    return [ids for ids in by.values() if len(ids) >= 2]


def consolidate(rules: list[str]) -> list[str]:
    """Drop case/whitespace-insensitive duplicates, keeping the first of each, in order."""
    seen: set[str] = set()
    out = []
    for rule in rules:
        key = " ".join(str(rule).lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(str(rule))
    return out


def tokens(text: str) -> int:
    """Deterministic token count: ``len(text) // 4 + 1``."""
    return len(text) // 4 + 1
