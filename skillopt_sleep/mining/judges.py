"""Rule checks on an answer: :func:`run_check` for every :class:`~skillopt_sleep.models.Check`
kind, and the structured style predicates the correction miner maps style words to.

Style words are never matched literally ("use the imperative mood" does not want the words
"imperative mood" in the answer): each is a structured check on the answer's form:

* ``imperative`` — the first word of the first line (after a ``type(scope):`` prefix of a
  conventional commit, quotes, backticks and a code fence) is a known base-form verb. Past
  forms ("Added"), gerunds ("Adding"), third person ("Adds") and non-verbs ("This", "The")
  fail; an unknown word fails too (deterministic and strict: a false pass would reward a
  gamed answer).
* ``no_emoji`` — no emoji code point in the answer.
* ``snake_case`` — the answer's code defines at least one name, and every function, argument
  and variable it defines is snake_case (UPPER_CASE constants and ``_private`` names allowed).
* ``type_hints`` — the answer's Python code defines at least one function, and each has a
  return annotation and annotated arguments (``self`` / ``cls`` excepted).
* ``section`` — the answer has a heading or a label line naming the value (``## Testing``,
  ``**Testing**``, ``Testing:``); the word inside a sentence is no section.

Code is the answer's fenced blocks, or the whole answer when it has none.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from skillopt_sleep.mining import artifact
from skillopt_sleep.mining.integrity import Fault, broken
from skillopt_sleep.models import Acts, Check, ContextCapsule, Task

#: a conventional commit's header (``feat(api)!: add x``)
CONVENTIONAL_COMMIT = (
    r"(?m)\A\W*(?:build|chore|ci|docs|feat|fix|perf|refactor|revert|style|test)"
    r"(?:\([\w./-]+\))?!?: \S"
)
# fmt: off
#: base-form verbs a commit subject / an instruction starts with
VERBS = frozenset(["accept", "add", "adjust", "align", "allow", "annotate", "apply", "archive", "assert", "avoid", "backport", "batch", "bump", "cache", "call", "cap", "catch", "change", "check", "clamp", "clarify", "clean", "cleanup", "clear", "close", "collapse", "combine", "comment", "compute", "configure", "connect", "consolidate", "convert", "copy", "correct", "create", "cut", "debounce", "declare", "decouple", "default", "defer", "define", "delete", "deprecate", "describe", "detect", "disable", "document", "downgrade", "drop", "dedupe", "emit", "enable", "encode", "enforce", "ensure", "escape", "exclude", "expand", "explain", "export", "expose", "extend", "extract", "fail", "fetch", "filter", "finish", "fix", "flatten", "flush", "fold", "follow", "force", "format", "forward", "generate", "guard", "handle", "harden", "hide", "hook", "ignore", "implement", "import", "improve", "include", "increase", "index", "inline", "initialize", "init", "inject", "insert", "install", "introduce", "invert", "isolate", "keep", "kill", "label", "launch", "let", "lift", "limit", "link", "lint", "list", "load", "lock", "log", "lower", "make", "map", "mark", "match", "merge", "migrate", "mock", "move", "mute", "name", "narrow", "normalize", "normalise", "note", "omit", "open", "optimize", "optimise", "order", "override", "parse", "pass", "patch", "pin", "poll", "polish", "port", "prefer", "prepare", "preserve", "prevent", "print", "propagate", "protect", "prune", "publish", "pull", "purge", "push", "put", "raise", "read", "rebase", "rebuild", "record", "redact", "reduce", "refactor", "refresh", "register", "reject", "release", "reload", "remove", "rename", "render", "reorder", "reorganize", "repair", "replace", "report", "require", "reset", "resolve", "restore", "restrict", "retry", "return", "reuse", "revert", "review", "rewrite", "rework", "round", "run", "sanitize", "save", "scope", "search", "send", "separate", "serialize", "set", "share", "shorten", "show", "simplify", "skip", "sort", "speed", "split", "squash", "start", "stop", "store", "strip", "stub", "support", "suppress", "swap", "switch", "sync", "tag", "test", "throttle", "tidy", "time", "toggle", "track", "trim", "truncate", "tune", "tweak", "unify", "unpin", "unwrap", "update", "upgrade", "use", "validate", "verify", "wait", "warn", "watch", "widen", "wire", "wrap", "write"])
# fmt: on
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\U0001f1e6-\U0001f1ff\ufe0f\u200d]"
)
_FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.S)
_SNAKE = re.compile(r"^_*[a-z][a-z0-9_]*$|^_*[A-Z][A-Z0-9_]*$|^_+$")
_CC_PREFIX = re.compile(r"^[a-z]+(?:\([\w./-]+\))?!?:\s*")


def _mentions(answer: str, value: str) -> bool:
    """Case-insensitive match of ``value`` as a whole token: ``npm`` is not found in ``pnpm``."""
    pattern = r"(?<![\w-])" + re.escape(value.strip()) + r"(?![\w-])"
    return re.search(pattern, answer, re.I) is not None


#: words that, right before a mention, say the answer does not use it ("pnpm, not npm")
_NEGATED = re.compile(
    r"(?:\bnot|\bno|\bnever|\bwithout|\binstead\s+of|\brather\s+than|\bavoid(?:ing)?"
    r"|\bdon'?t\s+use|\bdo\s+not\s+use|\bover)\s+[`'\"]?$",
    re.I,
)


def _affirmed(answer: str, value: str) -> bool:
    """Whether ``answer`` mentions ``value`` (as :func:`_mentions`) other than to say it does
    not use it: "use pnpm, not npm" does not use npm; "run npm install" does."""
    pattern = r"(?<![\w-])" + re.escape(value.strip()) + r"(?![\w-])"
    return any(
        not _NEGATED.search(answer[max(0, m.start() - 40) : m.start()])
        for m in re.finditer(pattern, answer, re.I)
    )


def first_word(answer: str) -> str:
    """The first word of the answer's first non-empty line (fence, quotes, bullets, a
    conventional-commit ``type(scope):`` prefix skipped), lower-cased; "" when none."""
    for line in answer.splitlines():
        if line.strip().startswith("```"):
            continue  # a fence, with or without its language
        line = line.strip().lstrip("`'\"*>#-• ").strip()
        if not line:
            continue
        line = _CC_PREFIX.sub("", line)
        m = re.match(r"[A-Za-z][\w'-]*", line)
        return m.group(0).lower() if m else ""
    return ""


def imperative(answer: str) -> bool:
    """True when the answer's first word is a known base-form verb (see the module doc)."""
    return first_word(answer) in VERBS


def code_of(answer: str) -> str:
    """The answer's fenced code blocks joined, or the whole answer when it has none."""
    blocks = _FENCE.findall(answer)
    return "\n".join(blocks) if blocks else answer


def _python(answer: str) -> ast.Module | None:
    try:
        return ast.parse(code_of(answer))
    except (SyntaxError, ValueError):
        return None


def defined_names(answer: str) -> list[str]:
    """Names the answer's code defines: functions, classes' methods, arguments, assigned
    variables (Python parsed; other code read with ``def``/``let``/``const``/``var``/``=``)."""
    tree = _python(answer)
    names: list[str] = []
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append(node.name)
                a = node.args
                names += [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.append(node.id)
        return [n for n in names if n not in {"self", "cls"}]
    code = code_of(answer)
    for m in re.finditer(
        r"\b(?:def|function|let|const|var|fn)\s+([A-Za-z_]\w*)|^\s*([A-Za-z_]\w*)\s*=[^=]",
        code,
        re.M,
    ):
        names.append(m.group(1) or m.group(2))
    return names


def snake_case(answer: str) -> bool:
    names = defined_names(answer)
    return bool(names) and all(_SNAKE.match(n) for n in names)


def type_hints(answer: str) -> bool:
    tree = _python(answer)
    if tree is None:
        return False
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not funcs:
        return False
    for f in funcs:
        if f.returns is None:
            return False
        a = f.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None and arg.arg not in {"self", "cls"} and arg.annotation is None:
                return False
    return True


def has_section(answer: str, name: str) -> bool:
    """True when a line of ``answer`` is a heading or a label naming ``name``: a Markdown
    heading (``## Testing``), a bold line (``**Testing**``) or a label (``Testing:``), the
    name as whole words, case-insensitive; a mention inside a sentence is no section."""
    want = " ".join(name.lower().split())
    if not want:
        return False
    for line in answer.splitlines():
        line = line.strip()
        heading = re.match(r"#{1,6}\s+(.+)", line)
        bold = re.fullmatch(r"\*\*(.+?)\*\*:?", line) or re.fullmatch(r"__(.+?)__:?", line)
        label = re.fullmatch(r"([^:.!?]{1,60}):(?:\s.*)?", line)
        for m in (heading, bold, label):
            if m and re.search(
                r"(?<![\w-])" + re.escape(want) + r"(?![\w-])",
                " ".join(m.group(1).lower().strip("*_ ").split()),
            ):
                return True
    return False


def run_check(check: Check, answer: str, tool_calls: list[str]) -> bool:
    """Run one check (see :class:`~skillopt_sleep.models.Check`); True when it passes."""
    value = check.value
    kind = check.kind
    if kind == "contains":
        return _mentions(answer, value)
    if kind == "not_contains":
        return not _affirmed(answer, value)
    if kind in ("regex", "not_regex"):
        try:
            found = re.search(value, answer, re.I | re.M) is not None
        except re.error:
            return False
        return found if kind == "regex" else not found
    if kind == "max_chars":
        return len(answer) <= int(value)
    if kind == "min_chars":
        return len(answer) >= int(value)
    if kind == "max_words":
        return len(answer.split()) <= int(value)
    if kind == "tool_called":
        return any(t == value or t.endswith("__" + value) for t in tool_calls)
    if kind == "imperative":
        return imperative(answer)
    if kind == "no_emoji":
        return _EMOJI.search(answer) is None
    if kind == "snake_case":
        return snake_case(answer)
    if kind == "type_hints":
        return type_hints(answer)
    if kind == "section":
        return has_section(answer, value)
    raise ValueError(f"unknown check kind {kind!r}")


def describe(check: Check) -> str:
    """The check in words, for a rubric line or a table."""
    v = check.value
    return {
        "contains": f"mention `{v}`",
        "not_contains": f"not mention `{v}`",
        "regex": f"match the pattern `{v}`",
        "not_regex": f"not match the pattern `{v}`",
        "max_chars": f"be at most {v} characters long",
        "min_chars": f"be at least {v} characters long",
        "max_words": f"be at most {v} words long",
        "tool_called": f"call the `{v}` tool",
        "imperative": "start with a verb in the imperative mood",
        "no_emoji": "use no emoji",
        "snake_case": "name things in snake_case",
        "type_hints": "give every function full type hints",
        "section": f"have a `{v}` section",
    }[check.kind]


# --- which checks score a task's answer


def scorable(task: Task, judge_available: bool) -> bool:
    return bool(task.checks) or (judge_available and bool(task.rubric))


def context_state(task: Task) -> str:
    """How a replay of ``task`` gets its occurrence's context: ``none needed`` (the agent
    used no tool before answering, or the task has no occurrence), ``rebuilt``, or ``not
    rebuilt: <why>`` (then checks needing it are not scored)."""
    return capsule_state(task.context)


def capsule_state(ctx: ContextCapsule | None) -> str:
    """:func:`context_state` of one capsule."""
    if ctx is None or (not ctx.items and not ctx.missing):
        return "none needed"
    if ctx.missing:
        return "not rebuilt: " + "; ".join(ctx.missing)
    return "rebuilt"


def scored_checks(task: Task) -> list[Check]:
    """The checks a replay scores: all of them, except (when the task's context cannot be
    rebuilt) those whose value only the context held (``Check.context``)."""
    if context_state(task).startswith("not rebuilt"):
        return [c for c in task.checks if not c.context]
    return list(task.checks)


# --- judging one answer to a task, as a replay, the wild and ``tasks score`` do


def vocabulary(task: Task) -> frozenset[str]:
    """The words of ``task`` — its request, the user's corrections, the transcript's answers
    (``controls``) — lower-cased: what tells a last word cut short."""
    texts = [task.intent, task.rubric, *task.corrections]
    texts += [a for pair in task.controls for a in pair if a]
    return frozenset(w.lower() for t in texts for w in re.findall(r"[^\W\d_]{3,}", t))


#: an answer of at most this many words can be an echo of the user's correction
ECHO_WORDS = 16
_ECHO_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "and",
        "or",
        "not",
        "no",
        "use",
        "using",
        "please",
        "instead",
        "it",
        "is",
        "be",
        "with",
        "for",
        "in",
        "on",
    ]
)


def echoes(answer: str, task: Task) -> bool:
    """True when ``answer`` is only the words the user corrected the task with (and its
    checks' values): "Use pnpm", "Use the imperative mood" game the checks those words gave
    and do not do the task. Short answers only (:data:`ECHO_WORDS`); one holding a command
    the user wrote out in backticks (`` `pnpm install` ``) does what they asked."""
    words = re.findall(r"[^\W_]+", answer.lower())
    if not words or len(words) > ECHO_WORDS:
        return False
    said = " ".join([*task.corrections, *(c.value for c in task.checks)]).lower()
    # a command the user wrote out (`pnpm install`) is the answer, not an echo of it
    if any(len(v.split()) > 1 and v in answer.lower() for v in re.findall(r"`([^`]+)`", said)):
        return False
    vocabulary = set(re.findall(r"[^\W_]+", said))
    content = [w for w in words if w not in _ECHO_FILLER]
    return bool(content) and all(w in vocabulary for w in content)


@dataclass
class Judged:
    """One answer judged against its task: ``faults`` (the answer is no answer: it scores 0,
    :mod:`~skillopt_sleep.mining.integrity`) and each check with whether it passed on the
    artifact the task asks for (:mod:`~skillopt_sleep.mining.artifact`)."""

    faults: list[Fault] = field(default_factory=list)
    results: list[tuple[Check, bool]] = field(default_factory=list)

    @property
    def hard(self) -> float | None:
        """The share of checks passed (0 for a broken answer; None: nothing to check)."""
        if self.faults:
            return 0.0
        return sum(ok for _, ok in self.results) / len(self.results) if self.results else None

    @property
    def passed(self) -> bool:
        """Whole, and every check passed."""
        return not self.faults and all(ok for _, ok in self.results)


def judge_answer(
    task: Task,
    answer: str,
    tool_calls: list[str],
    checks: list[Check] | None = None,
    acts: Acts | None = None,
) -> Judged:
    """Judge ``answer`` (and the tools the agent called) against ``task``: whole first — an
    agent that acted with tools and wrote no text, or one word ("Done."), is not judged on
    its text — then ``checks``
    (the task's :func:`scored_checks` unless given), each on the task's artifact. An agent
    that made the artifact with its tools (``acts``: a test file written, a ``git commit``
    run) is judged on that artifact (:func:`~skillopt_sleep.mining.artifact.acted`): a test
    file cut off is broken whatever the text says."""
    kind = artifact.kind_of(task.intent)
    made = artifact.acted(kind, answer, acts.files, acts.commands) if acts else None
    if made is not None and kind == "test":
        answer = made  # the test file is the answer: whole, and defining a test
    faults = broken(answer, kind, vocabulary(task)) if answer or not tool_calls else []
    if tool_calls:  # an agent that acted may end on a word ("Done."): its tools did the task
        faults = [f for f in faults if f.kind != "bare"]
    found = made if made is not None else artifact.extract(kind, answer)
    if not faults and task.corrections and echoes(found, task):
        faults.append(Fault("echo", "the answer only repeats the words of the user's correction"))
    text = artifact.judged_text(kind, found)
    results = [
        (c, run_check(c, text(c.kind), tool_calls))
        for c in (scored_checks(task) if checks is None else checks)
    ]
    return Judged(faults=faults, results=results)
