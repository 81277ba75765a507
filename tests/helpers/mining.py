"""Generated prompts for mining at scale: near-duplicate groups of one request (reordered,
filler, a qualifier, a dropped word, a plural / verb suffix, a typo, a path, a number) among
requests asked once. Deterministic for a seed."""

from __future__ import annotations

import random

from skillopt_sleep.mining.mine import Intent, normalise_intent
from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.store import Store

VERBS = [
    "add",
    "fix",
    "run",
    "write",
    "refactor",
    "rename",
    "remove",
    "update",
    "explain",
    "document",
    "test",
    "debug",
    "migrate",
    "optimise",
    "profile",
    "deploy",
    "build",
    "lint",
    "format",
    "review",
    "split",
    "merge",
    "cache",
    "log",
    "validate",
    "parse",
    "serialize",
]
NOUNS = [
    "parser",
    "tokenizer",
    "lexer",
    "router",
    "handler",
    "controller",
    "service",
    "client",
    "server",
    "worker",
    "queue",
    "scheduler",
    "cache",
    "index",
    "store",
    "database",
    "table",
    "schema",
    "migration",
    "query",
    "endpoint",
    "api",
    "model",
    "view",
    "template",
    "form",
    "widget",
    "button",
    "modal",
    "page",
    "layout",
    "theme",
    "style",
    "config",
    "settings",
    "logger",
    "metrics",
    "tracer",
    "profiler",
    "benchmark",
    "fixture",
    "mock",
    "stub",
    "test",
    "suite",
    "module",
    "package",
    "dependency",
    "build",
    "pipeline",
    "workflow",
    "release",
    "changelog",
    "readme",
    "docs",
    "tutorial",
    "example",
    "script",
    "command",
    "option",
    "flag",
    "argument",
    "parameter",
    "variable",
    "function",
    "method",
    "class",
    "interface",
    "type",
    "enum",
    "struct",
    "field",
    "property",
    "attribute",
    "decorator",
    "middleware",
    "plugin",
    "extension",
    "hook",
    "callback",
    "event",
    "signal",
    "message",
    "payload",
    "request",
    "response",
    "header",
    "cookie",
    "session",
    "token",
    "user",
    "account",
    "profile",
    "permission",
    "role",
    "group",
    "team",
    "project",
    "repository",
    "branch",
    "commit",
    "tag",
    "merge",
    "diff",
    "patch",
    "issue",
    "ticket",
    "bug",
    "error",
    "exception",
    "warning",
    "timeout",
    "retry",
    "backoff",
    "limit",
    "quota",
    "budget",
    "cost",
    "price",
    "invoice",
    "order",
    "cart",
    "product",
    "catalog",
    "inventory",
    "shipment",
    "address",
    "payment",
    "refund",
    "report",
    "chart",
    "graph",
    "dashboard",
    "alert",
    "notification",
    "email",
    "sms",
    "webhook",
    "socket",
    "stream",
    "buffer",
    "file",
    "directory",
    "path",
    "upload",
    "download",
    "image",
    "video",
    "audio",
    "thumbnail",
]
QUALIFIERS = [
    "quickly",
    "properly",
    "safely",
    "cleanly",
    "again",
    "incrementally",
    "asynchronously",
    "concurrently",
    "lazily",
    "strictly",
]
ADJECTIVES = [
    "new",
    "old",
    "broken",
    "slow",
    "flaky",
    "failing",
    "missing",
    "duplicate",
    "unused",
    "legacy",
    "async",
    "sync",
    "nested",
    "empty",
    "large",
    "small",
    "invalid",
    "expired",
]
FILLER = ["please", "can you", "could you", "let's", "now", "just", "also", "i need you to"]
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "zi",
    "be",
    "da",
    "fe",
    "gu",
    "ho",
    "ji",
    "ku",
    "la",
    "ma",
    "no",
    "pi",
    "re",
    "so",
    "tu",
]


def _typo(r: random.Random, w: str) -> str:
    if len(w) < 4:
        return w + "s"
    i = r.randrange(1, len(w) - 1)
    op = r.random()
    if op < 0.33:
        return w[:i] + w[i + 1 :]
    if op < 0.66:
        return w[:i] + w[i + 1] + w[i] + w[i + 2 :]
    return w[:i] + r.choice("aeiou") + w[i:]


class _Words:
    """The vocabulary: the common words above, and ``names`` project names (identifiers)
    drawn with a long tail, as a project's own function and file names are."""

    def __init__(self, r: random.Random, names: int) -> None:
        self.r = r
        self.names = [
            "_".join(
                "".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 3)))
                for _ in range(r.randint(1, 2))
            )
            for _ in range(names)
        ]

    def word(self) -> str:
        r = self.r
        x = r.random()
        if self.names and x < 0.35:
            return self.names[int(len(self.names) * r.random() ** 2)]  # a long tail
        if x < 0.75:
            return r.choice(NOUNS)
        if x < 0.9:
            return r.choice(ADJECTIVES)
        return r.choice(["in", "the", "of", "for"])


def _request(words: _Words) -> list[str]:
    r = words.r
    return [r.choice(VERBS), *(words.word() for _ in range(r.choice([1, 2, 3, 4, 6, 8, 10, 14])))]


def _variant(r: random.Random, request: list[str]) -> str:
    w = list(request)
    for _ in range(r.choice([0, 1, 1, 2])):
        op = r.random()
        if op < 0.25:
            i, j = r.randrange(len(w)), r.randrange(len(w))
            w[i], w[j] = w[j], w[i]
        elif op < 0.4:
            w.append(r.choice(QUALIFIERS))
        elif op < 0.5 and len(w) > 6:
            del w[r.randrange(2, len(w))]
        elif op < 0.65:
            i = r.randrange(len(w))
            w[i] = w[i] + r.choice(["s", "es", "ed", "ing"])
        elif op < 0.8:
            i = r.randrange(len(w))
            w[i] = _typo(r, w[i])
    if r.random() < 0.5:
        w.insert(0, r.choice(FILLER))
    if r.random() < 0.3:
        w.append(f"in src/{r.choice(NOUNS)}.py")
    if r.random() < 0.2:
        w.append(str(r.randint(1, 999)))
    return " ".join(w)


def prompts(n: int, seed: int = 0, *, grouped: float = 0.3, names: int = 0) -> list[str]:
    """``n`` prompts: about ``grouped`` of the requests asked 2–5 times (variants), the rest
    once; ``names`` project identifiers besides the ~250 common words (0: the common words
    only, which makes many prompts alike — the hard case for an index)."""
    r = random.Random(seed)
    words = _Words(r, names)
    out: list[str] = []
    while len(out) < n:
        request = _request(words)
        for _ in range(r.randint(2, 5) if r.random() < grouped else 1):
            out.append(_variant(r, request))
    return out[:n]


def intents(texts: list[str], project: str = "/p", start: int = 0) -> list[Intent]:
    """One intent per text, in order of time (one session each)."""
    return [
        Intent(
            session_id=f"s{start + i}",
            project=project,
            when=f"2025-06-01T{start + i:08d}",
            seq=0,
            text=text,
            norm=normalise_intent(text),
        )
        for i, text in enumerate(texts)
    ]


def save_sessions(
    store: Store,
    texts: list[str],
    *,
    per_session: int = 4,
    first_day: int = 1,
    last_day: int = 28,
    key: str = "k",
    project: str = "/home/u/app",
) -> None:
    """Store ``texts`` as answered prompts, ``per_session`` to a session, the sessions
    spread over June 2025 from ``first_day`` to ``last_day`` in order."""
    with store.write():  # one transaction
        _save(store, texts, per_session, first_day, last_day, key, project)


def _save(
    store: Store,
    texts: list[str],
    per_session: int,
    first_day: int,
    last_day: int,
    key: str,
    project: str,
) -> None:
    span = last_day - first_day + 1
    for s in range(0, len(texts), per_session):
        day = first_day + s * span // max(len(texts), 1)
        messages = []
        for i, text in enumerate(texts[s : s + per_session]):
            stamp = f"2025-06-{day:02d}T{i:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z"
            messages += [
                HarvestedMessage(
                    uid=f"{key}{s}-{i}-u", role="user", kind="prompt", text=text, timestamp=stamp
                ),
                HarvestedMessage(
                    uid=f"{key}{s}-{i}-a",
                    role="assistant",
                    kind="answer",
                    text="Done.",
                    timestamp=stamp,
                ),
            ]
        store.sessions.save(
            HarvestedSession(
                source="claude_code",
                key=f"{key}{s}",
                project=project,
                started_at=messages[0].timestamp,
                messages=messages,
            ),
            file_path=f"/logs/{key}{s}.jsonl",
        )
