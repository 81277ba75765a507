"""Classify a user's follow-up prompt as feedback and derive deterministic checks from it.

A user prompt that follows an assistant answer is one of:

* ``correction`` — the user says the answer was wrong or unwanted ("no, use pnpm", "use pnpm
  instead of npm", "don't use sudo", "that's wrong", "still failing", "it doesn't work",
  "shorter please", "keep it under 50 characters", "you forgot the tests");
* ``positive`` — pure approval ("perfect", "thanks, that works", "great!");
* ``neutral`` — anything else, i.e. a new request ("now add a test", "no worries, next ...").

From a correction, :func:`derive_checks` builds :class:`~skillopt_sleep.models.Check` objects
only when the value is explicit in the user's words (or, for "no, use X", when the previous
answer used a known alternative of X). Everything is regex based and deterministic; when in
doubt no check is made: a false check poisons the training signal, while a missing one only
leaves the work to the rubric line every correction gets.

Negative checks are ``not_contains`` and rely on the replay's whole-token matching
(``mining.judges.run_check``: ``npm`` is not found in ``pnpm``); a negative that would also
reject the wanted value (``pytest`` when ``uv run pytest`` is wanted) is dropped.

**Style words are never literal.** "use the imperative mood", "conventional commits", "no
emojis", "snake_case", "type hints" map to structured checks (:data:`STYLES`: first-word verb
form, a regex, an emoji scan, an AST look at the answer's code); a ``contains`` value naming
a style ("imperative mood") is never made.

**Controls.** Every derived check is validated by the transcript's own answers
(:func:`validate`): it must fail the answer the user corrected (*negative* control) and pass
the answer the user then accepted, when there is one (*positive* control: the next answer,
when the user's next prompt is not another correction); and an answer made only of the
check's own words (its value, the style phrase, the length phrase) must not pass the whole
set of kept checks (*anti-gaming* control), unless those words are the very literal the user
wrote in backticks, as one word or as a known tool's command, or accepted in an answer
(``attested``: "pnpm" is an answer to "which package manager?"; a phrase such as "active
voice" is a description, not an answer). A check that fails a control is *demoted*: not scored,
kept in :attr:`Feedback.demoted` with its control results, and still described by the
correction's rubric line (which names every derived check), so a judge can still hold an
answer to it. Each check carries its results in ``Check.controls``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from skillopt_sleep.mining.judges import CONVENTIONAL_COMMIT, describe, run_check
from skillopt_sleep.models import Check

Label = Literal["correction", "positive", "neutral"]

#: Maximum words for the patterns that may match anywhere in a message (not only its start).
SHORT_WORDS = 30
EVIDENCE_CHARS = 300

_F = re.I
_NO_LEAD = re.compile(
    r"^\W*(?:no|nope|nah)\b(?!\W*(?:thanks?|thank|worries|problem|rush|need|now|next|let'?s|ok"
    r"|okay|(?:that|it)'?s (?:fine|ok|okay|all|good))\b)(?:\s*[,.!:;\-–—]+\s*\S"
    r"|\s+(?:use|don'?t|do not|not|that|it|i|you|the|this|wrong|we|just|instead|please|stop)\b)",
    _F,
)
_ANCHORED = [
    _NO_LEAD,
    re.compile(r"^\W*nope\b", _F),
    re.compile(r"^\W*(?:wrong|incorrect|not quite|not what i|not like that)\b", _F),
    re.compile(r"^\W*(?:please\s+)?(?:revert|undo)\b", _F),
    re.compile(
        r"^\W*(?:please\s+)?(?:don'?t|do not|never|stop)\s+(?:use|using|run|running"
        r"|add|adding|do|call|write|create|change|modify|touch|delete|remove|include|put"
        r"|make)\b",
        _F,
    ),
]
_STRONG = [  # anywhere in a short message: unambiguous back-references to the answer
    re.compile(
        r"\b(?:that'?s|that is|this is|it'?s|it is)\s+(?:still\s+)?(?:wrong|incorrect"
        r"|broken|not (?:right|correct|what i|it|working|how))\b",
        _F,
    ),
    re.compile(
        r"\byou (?:forgot|missed|didn'?t|did not|broke|should have|shouldn'?t have"
        r"|were supposed to|ignored)\b",
        _F,
    ),
    re.compile(r"\bi (?:said|told you|asked (?:you )?(?:to|for)|meant)\b", _F),
]
_WEAK = [  # anywhere in a short message, unless the message opens like a new request
    re.compile(
        r"\binstead of\b|\b(?:use|try)\s+\S+(?:\s+\S+){0,3}\s+instead\b"
        r"|\b(?:use|try)\s+\S+(?:\s+\S+){0,3}?\s*,?\s+(?:and\s+)?not\s+\S",
        _F,
    ),
    re.compile(
        r"\bstill\s+(?:fail|failing|fails|broken|not|doesn'?t|does not|getting|get|the same"
        r"|an? error|errors|erroring|crash|crashes|wrong)\b",
        _F,
    ),
    re.compile(
        r"\b(?:doesn'?t|does not|didn'?t|did not|won'?t|isn'?t|is not)"
        r"(?:\s+(?:it|this|that))?\s+(?:work|working"
        r"|compile|build|run|pass)\b|\bnot working\b|\bsame error\b",
        _F,
    ),
    re.compile(
        r"\b(?:way\s+)?too\s+(?:long|verbose|wordy)\b|\bshorter\b|\bmore concise\b"
        r"|\bless verbose\b",
        _F,
    ),
    # complaints about the answer's form: it stops early, a part is missing
    re.compile(
        r"\b(?:(?:got|is|was|it'?s|gets)\s+)?(?:cut\s+off|truncated|cut\s+short)\b"
        r"|\b(?:is|was|it'?s)\s+(?:incomplete|unfinished|half[\s-]finished)\b"
        r"|\bstops?\s+(?:mid|halfway|in the middle)\b",
        _F,
    ),
]
#: First words of a fresh request ("now add a test", "fix the bug where X doesn't work").
_REQUEST_VERBS = {
    "fix",
    "add",
    "implement",
    "create",
    "write",
    "make",
    "update",
    "refactor",
    "build",
    "explain",
    "generate",
    "remove",
    "delete",
    "rename",
    "move",
    "convert",
    "migrate",
    "set",
    "setup",
    "install",
    "document",
    "review",
    "show",
    "list",
    "find",
    "search",
    "check",
    "investigate",
    "debug",
    "look",
    "help",
    "now",
    "next",
    "also",
    "then",
    "and",
    "can",
    "could",
    "please",
    "let's",
    "lets",
    "run",
    "test",
    "deploy",
    "publish",
    "bump",
    "change",
    "replace",
    "rewrite",
    # the same openers in German, Spanish and French: a new request in any of them is no
    # feedback (the optimizer reads what they cannot decide: mining/meaning.py)
    "jetzt",
    "dann",
    "nun",
    "schreib",
    "schreibe",
    "füge",
    "erstelle",
    "erkläre",
    "zeige",
    "ahora",
    "luego",
    "escribe",
    "añade",
    "crea",
    "explica",
    "muestra",
    "maintenant",
    "ensuite",
    "écris",
    "ajoute",
    "crée",
    "explique",
    "montre",
}
_BACKREF = {
    "it",
    "this",
    "that",
    "these",
    "those",
    "still",
    "again",
    "you",
    "your",
    "same",
    "it's",
    "that's",
    "them",
}
_LIMIT = re.compile(
    r"\b(?:under|below|less than|fewer than|at most|no more than|max(?:imum)?(?: of)?|within|to)\s+"
    r"(\d+)\s*(chars?|characters?|words?)\b|\b(\d+)\s*(chars?|characters?|words?)\s+(?:max|or less"
    r"|or fewer|at most)\b",
    _F,
)
#: "shorter" derives a size check only from an answer of at least this many characters: after
#: a one-line reply ("Done.") the user means something else (the change, a file), and 60 % of
#: a few characters is no answer at all
MIN_SHORTENED = 40
_SHORTER = re.compile(
    r"\bshorter\b|\btoo\s+(?:long|verbose|wordy)\b|\bmore concise\b"
    r"|\bless verbose\b",
    _F,
)
_STOP = {
    "a",
    "an",
    "the",
    "it",
    "that",
    "this",
    "these",
    "those",
    "them",
    "one",
    "i",
    "you",
    "we",
    "why",
    "how",
    "what",
    "and",
    "or",
    "but",
    "is",
    "are",
    "do",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "to",
    "of",
    "in",
    "on",
    "for",
    "with",
    "me",
    "my",
    "your",
    "so",
    "now",
    "then",
    "just",
    "please",
    "yes",
    "ok",
    "okay",
    "same",
    "something",
    "anything",
}
_VAGUE = _STOP | {
    "different",
    "another",
    "other",
    "better",
    "proper",
    "correct",
    "right",
    "new",
    "existing",
    "approach",
    "way",
    "method",
    "solution",
    "thing",
    "simpler",
    "simple",
    "instead",
    "here",
    "there",
    "again",
    "more",
    "less",
    "only",
    "all",
    "any",
    "some",
    "style",
    "format",
    "code",
}
_GENERIC_TAIL = {
    "command",
    "tool",
    "package",
    "manager",
    "flag",
    "option",
    "cli",
    "binary",
    "library",
    "lib",
    "module",
    "instead",
    "here",
    "please",
    "too",
    "again",
}
_BOUNDARY = {
    "for",
    "to",
    "when",
    "in",
    "on",
    "with",
    "because",
    "since",
    "as",
    "so",
    "and",
    "but",
    "please",
    "here",
    "there",
    "everywhere",
    "now",
    "again",
    "from",
    "like",
    "if",
    "or",
}
#: Known interchangeable tools: "no, use X" negates a sibling of X used by the previous answer.
ALTERNATIVES: list[set[str]] = [
    {"npm", "pnpm", "yarn", "bun"},
    {"pip", "pip3", "uv", "poetry", "pipenv", "conda"},
    {"pytest", "unittest", "nose"},
    {"python", "python3"},
    {"docker", "podman"},
    {"jest", "vitest", "mocha"},
    {"black", "ruff"},
    {"flake8", "ruff"},
    {"mypy", "pyright"},
    {"curl", "wget"},
    {"requests", "httpx"},
    {"webpack", "vite"},
    {"merge", "rebase"},
]
#: style words -> the structured check each maps to (never a literal ``contains``)
STYLES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"\bimperative(?:\s+(?:mood|form|tense|voice))?\b", _F), "imperative", ""),
    (
        re.compile(r"\bconventional[\s-]+commits?(?:\s+(?:format|style|spec))?\b", _F),
        "regex",
        CONVENTIONAL_COMMIT,
    ),
    (
        re.compile(
            r"\b(?:no|without|zero|don'?t\s+use|do\s+not\s+use|drop|remove|stop\s+using|avoid"
            r"|lose|skip)\s+(?:the\s+|any\s+|all\s+(?:the\s+)?)?emojis?\b|\bemoji[\s-]*free\b",
            _F,
        ),
        "no_emoji",
        "",
    ),
    (re.compile(r"\bsnake[\s_-]?case\b", _F), "snake_case", ""),
    (re.compile(r"\btype\s+(?:hints?|annotations?)\b|\btype-hinted\b", _F), "type_hints", ""),
]
#: words that name a style or a measure: a literal value containing one is never made
_STYLE_WORDS = re.compile(
    r"\b(?:imperative|mood|tense|emojis?|snake[_ -]?case|camel[_ -]?case|conventional"
    r"|type\s+hints?|annotations?|characters?|chars?|words?|lines?|concise|format(?:ting)?"
    r"|style)\b",
    _F,
)
_POSITIVE_WORDS = {
    "perfect",
    "thanks",
    "thank",
    "thx",
    "ty",
    "great",
    "awesome",
    "nice",
    "works",
    "worked",
    "working",
    "good",
    "lgtm",
    "excellent",
    "cool",
    "brilliant",
    "amazing",
    "exactly",
    "sweet",
    "wonderful",
    "fantastic",
    "fixed",
    "love",
    "correct",
    "superb",
    "beautiful",
    # in German, Spanish and French
    "danke",
    "perfekt",
    "super",
    "toll",
    "prima",
    "gracias",
    "perfecto",
    "genial",
    "excelente",
    "merci",
    "parfait",
    "génial",
}
_POSITIVE_FILLER = {
    "that",
    "it",
    "this",
    "you",
    "looks",
    "look",
    "now",
    "so",
    "very",
    "much",
    "all",
    "job",
    "ok",
    "okay",
    "yes",
    "yep",
    "yeah",
    "is",
    "was",
    "it's",
    "that's",
    "really",
    "a",
    "lot",
    "just",
    "work",
    "done",
    "fine",
    "right",
    "!",
    "vielen",
    "dank",
    "sehr",
    "das",
    "ist",
    "muchas",
    "muy",
    "bien",
    "beaucoup",
    "très",
    "c'est",
}
_TRIVIAL = {
    "y",
    "yes",
    "yep",
    "yeah",
    "ok",
    "okay",
    "k",
    "sure",
    "continue",
    "go on",
    "go ahead",
    "proceed",
    "do it",
    "please",
    "yes please",
    "ok please",
    "keep going",
    "next",
    "retry",
    "try again",
    "go",
    "ok go",
    "ok continue",
    "yes continue",
    "yes go ahead",
}


class Feedback(BaseModel):
    """The result of :func:`analyze`: the label and, for corrections, checks and rubric line.

    ``derived``: every check the words gave; ``checks``: those that passed the controls,
    ``demoted``: those that failed one (see :func:`validate`). ``corrected``: the answer the
    user corrected; ``accepted``: the answer that followed, once the user's next prompt shows
    they accepted it (None until then, or when they corrected it again)."""

    label: Label
    text: str
    checks: list[Check] = Field(default_factory=list)
    rubric: str = ""
    derived: list[Check] = Field(default_factory=list)
    demoted: list[Check] = Field(default_factory=list)
    corrected: str = ""
    accepted: str | None = None
    attested: list[str] = Field(default_factory=list)
    #: the optimizer model read it (:mod:`~skillopt_sleep.mining.meaning`): it recognised the
    #: correction the words' regexes did not, or compiled checks and rubric items beside theirs
    read: bool = False


@dataclass
class _Derivation:
    uses: list[str] = field(default_factory=list)
    avoids: list[str] = field(default_factory=list)
    max_chars: int | None = None
    tools: list[str] = field(default_factory=list)
    styles: list[Check] = field(default_factory=list)
    #: literal values the user wrote as code or named as a known tool (see :func:`validate`)
    attested: list[str] = field(default_factory=list)


def _clean(text: str) -> str:
    return (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
        .strip()
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'!-]+", text.lower())


def is_trivial(text: str) -> bool:
    """True for an empty prompt, a bare acknowledgement ("yes", "continue", "go ahead") or a
    lone slash command: these neither start a task nor count as feedback."""
    t = re.sub(r"[^\w\s/'-]", " ", _clean(text).lower())
    t = " ".join(t.split())
    return not t or t in _TRIVIAL or (t.startswith("/") and " " not in t)


def is_positive(text: str) -> bool:
    clauses = [c for c in re.split(r"[,.;:!?\n]+|\s+-\s+", _clean(text).lower()) if c.strip()]
    if not clauses or len(_words(text)) > 12:
        return False
    strong = False
    for clause in clauses:
        for w in clause.split():
            w = w.strip("'\"()")
            if w in _POSITIVE_WORDS:
                strong = True
            elif w and w not in _POSITIVE_FILLER:
                return False
    return strong


def opens_request(text: str) -> bool:
    """True when the message starts like a new request (a request verb not followed, within
    its first four words, by a reference back to the answer such as "it" or "still")."""
    words = [w.strip("!,.:;") for w in _words(text)[:4]]
    return bool(words) and words[0] in _REQUEST_VERBS and not _BACKREF & set(words[1:])


#: markup an agent wraps around text the user did not type (attached files, selections, IDE
#: state, reminders, the typed query itself): a prompt that still carries it holds injected
#: text, which is never a correction
_INJECTED_MARKUP = re.compile(
    r"</?\s*(?:user_query|attached_files|attached_file|file|file_contents|manually_attached_\w+"
    r"|open_and_recently_viewed_files|code_selection|ide_selection|ide_opened_file"
    r"|system-reminder|system_reminder|environment_context|user_instructions|additional_data"
    r"|rules|instructions|custom_instruction|current_datetime|attachments?|context"
    r"|command-message|command-args|local-command-stdout)\b[^>]*>",
    re.I,
)


def typed_by_user(text: str) -> bool:
    """False when a prompt carries markup of injected context (an attached file's text, an
    IDE selection, a ``<user_query>`` tag a file held …): corrections come only from text the
    user typed, never from files, tool output or attachments."""
    return not _INJECTED_MARKUP.search(text)


def classify(text: str) -> Label:
    """Label a user prompt that follows an assistant answer (see the module docstring)."""
    t = _clean(text)
    if not t or is_trivial(t):
        return "neutral"
    if any(p.search(t) for p in _ANCHORED):
        return "correction"
    if len(_words(t)) <= SHORT_WORDS:
        if any(p.search(t) for p in _STRONG):
            return "correction"
        weak = any(p.search(t) for p in _WEAK) or _LIMIT.search(t) or _x_not_y(t)
        if weak and not opens_request(t):
            return "correction"
    if is_positive(t):
        return "positive"
    return "neutral"


# ---------------------------------------------------------------------------- values
def _value(raw: str | None) -> str | None:
    """Turn a captured phrase into a check value, or None when it is vague or too long."""
    if not raw:
        return None
    ticks = re.findall(r"`([^`\n]{1,80})`", raw)
    if ticks:
        v = ticks[0].strip()
        return v or None
    tokens: list[str] = []
    for tok in raw.split():
        tok = tok.strip("'\"()[]{}<>,:;!?").rstrip(".")
        if not tok:
            continue
        if tokens and tok.lower() in _BOUNDARY:
            break
        tokens.append(tok)
    while tokens and tokens[0].lower() in {"the", "a", "an", "using"}:
        tokens.pop(0)
    while tokens and tokens[-1].lower() in _GENERIC_TAIL:
        tokens.pop()
    if not tokens or len(tokens) > 3 or any(t.lower() in _VAGUE for t in tokens):
        return None
    return " ".join(tokens)


def _whole(word: str) -> str:
    return r"(?<![\w-])" + re.escape(word) + r"(?![\w-])"


def mentions(text: str, word: str) -> bool:
    """Case-insensitive whole-word occurrence (``npm`` is not found in ``pnpm``)."""
    return re.search(_whole(word), text, re.I) is not None


def _reduce(x: str, y: str) -> tuple[str, str]:
    """Drop tokens shared by X and Y at the start/end ("pnpm install"/"npm install" -> "pnpm",
    "npm") so the checks name the shortest distinguishing command."""
    xs, ys = x.split(), y.split()
    while len(xs) > 1 and len(ys) > 1 and xs[-1].lower() == ys[-1].lower():
        xs, ys = xs[:-1], ys[:-1]
    while len(xs) > 1 and len(ys) > 1 and xs[0].lower() == ys[0].lower():
        xs, ys = xs[1:], ys[1:]
    return " ".join(xs), " ".join(ys)


_CAP = r"(`[^`\n]+`|[^,;\n]+?)"
_PAIR_PATTERNS = [  # (regex, group of X, group of Y)
    (
        re.compile(
            r"\b(?:use|try|prefer)\s+"
            + _CAP
            + r"\s+(?:instead of|rather than|over)\s+"
            + _CAP
            + r"\s*$",
            _F,
        ),
        1,
        2,
    ),
    (re.compile(r"\binstead of\s+" + _CAP + r"\s*,?\s*(?:use|try)\s+" + _CAP + r"\s*$", _F), 2, 1),
    (
        re.compile(r"\b(?:use|try)\s+" + _CAP + r"\s*,?\s+(?:and\s+)?not\s+" + _CAP + r"\s*$", _F),
        1,
        2,
    ),
]
_X_NOT_Y = re.compile(
    r"^\W*(?:no\W+)?(`[^`]+`|[\w.@/+:-]+)\s*,?\s+not\s+(`[^`]+`|[\w.@/+:-]+)\W*$", _F
)
_USE_INSTEAD = re.compile(r"\b(?:use|try)\s+" + _CAP + r"\s+instead\b", _F)
_NO_USE = re.compile(
    r"^\W*(?:no|nope)\b\W*(?:please\s+)?(?:just\s+)?(?:use|try)\s+" + _CAP + r"\s*$", _F
)
_DONT_USE = re.compile(
    r"\b(?:don'?t|do not|never|stop)\s+(?:use|using|run|running)\s+"
    + _CAP
    + r"\s*$|\bavoid\s+(?:using\s+)?"
    + _CAP
    + r"\s*$",
    _F,
)
_TOOL = re.compile(r"\b(?:use|using|with|call|run)\s+(?:the\s+)?`?([\w.-]+)`?(\s+tool\b)?", _F)
_FORGOT_TICK = re.compile(
    r"\byou (?:forgot|didn'?t|did not)\s+(?:to\s+)?(?:run|use|add|call)\s+"
    r"`([^`\n]+)`",
    _F,
)


def _x_not_y(text: str) -> tuple[str, str] | None:
    if len(_words(text)) > 6:
        return None
    m = _X_NOT_Y.match(_clean(text))
    if not m:
        return None
    x, y = _value(m.group(1)), _value(m.group(2))
    return (x, y) if x and y else None


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"[.!?;]+(?=\s|$)|\n+", text) if s.strip()]


def _derive(text: str, previous_answer: str, known_tools: Iterable[str]) -> _Derivation:
    d = _Derivation()
    tools = {t.lower(): t for t in known_tools}
    t = _clean(text)

    def add_use(x: str | None, raw: str = "") -> None:
        if not x:
            return
        if x.lower() in tools:
            _add(d.tools, tools[x.lower()])
        elif not re.search(r"\btools?\W*$", raw, re.I):  # "use the X tool": no text check
            _add(d.uses, x)

    def add_avoid(y: str | None) -> None:
        if y and y.lower() not in tools:
            _add(d.avoids, y)

    pair = _x_not_y(t)
    if pair:
        x, y = _reduce(*pair)
        add_use(x)
        add_avoid(y)
    for sent in _sentences(t):
        for pattern, gx, gy in _PAIR_PATTERNS:
            m = pattern.search(sent)
            if m:
                vx, vy = _value(m.group(gx)), _value(m.group(gy))
                if vx and vy:
                    vx, vy = _reduce(vx, vy)
                add_use(vx, m.group(gx))
                add_avoid(vy)
                break
        else:
            m = _USE_INSTEAD.search(sent) or _NO_USE.search(sent)
            vx = _value(m.group(1)) if m else None
            if m and vx:
                add_use(vx, m.group(1))
                for sibling in _siblings(vx, previous_answer):
                    add_avoid(sibling)
        m = _DONT_USE.search(sent)
        if m:
            add_avoid(_value(m.group(1) or m.group(2)))
        m = _FORGOT_TICK.search(sent)
        if m:
            add_use(m.group(1).strip())
        for m in _TOOL.finditer(sent):
            name = m.group(1)
            exact = name in tools.values() or m.group(2) or "`" in m.group(0)
            if name.lower() in tools and exact:
                _add(d.tools, tools[name.lower()])
    # style words are structured checks, never literal ones
    for pattern, kind, value in STYLES:
        if pattern.search(t) and not any(c.kind == kind and c.value == value for c in d.styles):
            d.styles.append(Check(kind=kind, value=value))
    d.uses = [x for x in d.uses if not _STYLE_WORDS.search(x)]
    d.avoids = [y for y in d.avoids if not _STYLE_WORDS.search(y)]
    # literals the user asked for (an answer made of one is an answer): written as code, a
    # known tool's command, or one word ("mkdocs"); a phrase ("active voice") is a description
    d.attested = [
        x
        for x in d.uses
        if f"`{x.lower()}`" in t.lower()
        or len(x.split()) == 1
        or any(x.split()[0].lower() in g for g in ALTERNATIVES)
    ]
    # A negative that would also reject the wanted value is contradictory: drop it.
    d.avoids = [
        y
        for y in d.avoids
        if not any(mentions(x, y) for x in d.uses) and y.lower() not in {x.lower() for x in d.uses}
    ]
    limit = _LIMIT.search(t)
    if limit:
        n = int(limit.group(1) or limit.group(3))
        unit = (limit.group(2) or limit.group(4)).lower()
        d.max_chars = n * 6 if unit.startswith("word") else n
    elif _SHORTER.search(t) and len(previous_answer.strip()) >= MIN_SHORTENED:
        d.max_chars = int(len(previous_answer.strip()) * 0.6)
    return d


def _siblings(x: str, previous_answer: str) -> list[str]:
    head = x.split()[0].lower()
    found: list[str] = []
    for group in ALTERNATIVES:
        if head in group:
            for other in sorted(group - {head}):
                if mentions(previous_answer, other) and not mentions(x, other):
                    _add(found, other)
    return found


def _add(items: list[str], value: str) -> None:
    if value.lower() not in {v.lower() for v in items}:
        items.append(value)


def _checks(d: _Derivation, evidence: str) -> list[Check]:
    out = [Check(kind="contains", value=x) for x in d.uses]
    out += [Check(kind="not_contains", value=y) for y in d.avoids]
    out += d.styles
    if d.max_chars:
        out.append(Check(kind="max_chars", value=str(d.max_chars)))
    out += [Check(kind="tool_called", value=t) for t in d.tools]
    return [c.model_copy(update={"origin": "correction", "evidence": evidence}) for c in out]


def evidence(text: str) -> str:
    """The user's words as one line, trimmed to ``EVIDENCE_CHARS``."""
    one = " ".join(_clean(text).split())
    return one if len(one) <= EVIDENCE_CHARS else one[: EVIDENCE_CHARS - 1] + "…"


def _rubric(d: _Derivation, evidence: str) -> str:
    parts = []
    if d.uses:
        parts.append("use " + ", ".join(f"`{x}`" for x in d.uses))
    if d.avoids:
        parts.append(("not " if d.uses else "not use ") + ", ".join(f"`{y}`" for y in d.avoids))
    if d.tools:
        parts.append("call the " + ", ".join(f"`{t}`" for t in d.tools) + " tool")
    parts += [describe(c) for c in d.styles]
    if d.max_chars:
        parts.append(f"be at most {d.max_chars} characters long")
    tail = " and ".join(parts) if parts else "not repeat the mistake the user pointed out"
    return f'The user corrected: "{evidence}". The answer should {tail}.'


def derive_checks(
    text: str, previous_answer: str = "", known_tools: Iterable[str] = ()
) -> list[Check]:
    """Deterministic checks from a correction's words (empty when nothing is explicit).

    ``previous_answer`` is the answer being corrected (for "shorter" and "no, use X");
    ``known_tools`` are tool names seen in the session (only those become ``tool_called``).
    """
    return _checks(_derive(text, previous_answer, known_tools), evidence(text))


def rubric_line(text: str, previous_answer: str = "", known_tools: Iterable[str] = ()) -> str:
    """One rubric line for a correction, naming the key values in backticks."""
    return _rubric(_derive(text, previous_answer, known_tools), evidence(text))


def _own_words(check: Check) -> list[str]:
    """Answers made only of the check's own words (for the anti-gaming control): its value,
    the style or length phrase of the user's words it came from."""
    words: list[str] = []
    if check.kind in ("contains", "not_contains", "tool_called") and check.value:
        words.append(check.value)
    for pattern, kind, value in STYLES:
        if kind == check.kind and value == check.value:
            m = pattern.search(check.evidence)
            words.append(m.group(0) if m else kind.replace("_", " "))
    if check.kind in ("max_chars", "min_chars", "max_words"):
        m = _LIMIT.search(check.evidence)
        words.append(m.group(0) if m else f"{check.value} characters")
    return [w for w in words if w.strip()]


def _result(check: Check, answer: str | None) -> str:
    """A control's result: ``n/a`` without an answer (or for a tool check: the transcript's
    answers are text), else whether the check passed it."""
    if answer is None or not answer.strip() or check.kind == "tool_called":
        return "n/a"
    return "pass" if run_check(check, answer, []) else "fail"


def validate(
    checks: list[Check],
    corrected: str,
    accepted: str | None = None,
    attested: Iterable[str] = (),
) -> tuple[list[Check], list[Check]]:
    """``(kept, demoted)``: the checks with their control results (see the module doc).

    ``corrected``: the answer the user corrected; ``accepted``: the answer they then
    accepted (None: none); ``attested``: literal values the user asked for as code or as a
    known tool (an answer made of one is an answer, not a game)."""
    known = {a.lower() for a in attested}
    if accepted:
        known |= {
            c.value.lower() for c in checks if c.kind == "contains" and mentions(accepted, c.value)
        }
    kept: list[Check] = []
    demoted: list[Check] = []
    for c in checks:
        neg = _result(c, corrected)
        neg = {"pass": "fail", "fail": "pass"}.get(neg, neg)  # a negative control must fail
        pos = _result(c, accepted)
        c = c.model_copy(update={"controls": {"negative": neg, "positive": pos}})
        (demoted if "fail" in (neg, pos) else kept).append(c)
    while True:  # anti-gaming, over the set that is kept (dropping one can expose another)
        verdicts: dict[int, str] = {}
        for i, c in enumerate(kept):
            gamed = any(all(run_check(k, g, []) for k in kept) for g in _own_words(c))
            if not gamed:
                verdicts[i] = "pass"
            elif c.kind in ("contains", "regex") and c.value.lower() in known:
                verdicts[i] = "attested"
            else:
                verdicts[i] = "fail"
        failed = [i for i, v in verdicts.items() if v == "fail"]
        kept = [
            c.model_copy(update={"controls": {**c.controls, "anti_gaming": verdicts[i]}})
            for i, c in enumerate(kept)
        ]
        if not failed:
            return kept, demoted
        demoted += [kept[i] for i in failed]
        kept = [c for i, c in enumerate(kept) if i not in failed]


def settle(feedback: Feedback, accepted: str | None) -> Feedback:
    """The feedback once the answer that followed it is known: ``accepted`` (None when the
    user corrected it again) and its checks validated with the positive control too."""
    if feedback.label != "correction":
        return feedback
    kept, demoted = validate(feedback.derived, feedback.corrected, accepted, feedback.attested)
    return feedback.model_copy(update={"accepted": accepted, "checks": kept, "demoted": demoted})


def with_reading(feedback: Feedback, checks: list[Check], rubric: list[str]) -> Feedback:
    """A correction with what the optimizer model compiled from the same words (its checks,
    validated by the same controls as the regex layer's, and rubric items) added to what the
    regex layer derived."""
    derived = list(feedback.derived)
    for c in checks:
        if not any(d.kind == c.kind and d.value.lower() == c.value.lower() for d in derived):
            derived.append(c)
    said = feedback.text.lower()
    attested = list(feedback.attested)
    for c in checks:  # as the regex layer's: written as code, or one word
        if c.kind == "contains" and (f"`{c.value.lower()}`" in said or len(c.value.split()) == 1):
            attested.append(c.value)
    kept, demoted = validate(derived, feedback.corrected, feedback.accepted, attested)
    line = feedback.rubric
    items = [r.rstrip(".") for r in rubric if r.strip()]
    if items:
        line = f"{line} It should also: " + "; ".join(items) + "."
    return feedback.model_copy(
        update={
            "derived": derived,
            "checks": kept,
            "demoted": demoted,
            "rubric": line,
            "attested": attested,
            "read": True,
        }
    )


def analyze(
    text: str,
    previous_answer: str = "",
    known_tools: Iterable[str] = (),
    *,
    correction: bool = False,
) -> Feedback:
    """Classify ``text`` and, for a correction, derive its checks (validated by the negative
    and anti-gaming controls; :func:`settle` adds the positive one) and rubric line.
    ``correction``: the caller knows it is one (mining's correction by its role: "no emojis
    please"), whatever :func:`classify` says of its words."""
    label: Label = "correction" if correction else classify(text)
    if label != "correction":
        return Feedback(label=label, text=text)
    d = _derive(text, previous_answer, known_tools)
    ev = evidence(text)
    derived = _checks(d, ev)
    attested = [*d.attested, *d.tools]
    kept, demoted = validate(derived, previous_answer, None, attested)
    return Feedback(
        label=label,
        text=text,
        checks=kept,
        rubric=_rubric(d, ev),
        derived=derived,
        demoted=demoted,
        corrected=previous_answer,
        attested=attested,
    )
