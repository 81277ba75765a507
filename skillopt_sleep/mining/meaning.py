"""Reading a user's follow-up by its meaning, in any wording or language.

The regex layer of :mod:`~skillopt_sleep.mining.corrections` is the fast path: it knows
English phrasings ("no, use pnpm", "too long", "you forgot …"). What it cannot decide goes to
the optimizer model, which reads the request, the answer and the follow-up and says

* what the follow-up is: a ``correction`` (the answer was wrong, unwanted, incomplete, or in
  the wrong form — "it is cut off", "use X, not Y" — in any language), a ``positive``
  approval, or ``neutral`` (a new request, a question);
* for a correction, what the user asked for, **compiled** into checks of a small, safe DSL —
  the kinds of :class:`~skillopt_sleep.models.Check` (``contains``, ``not_contains``,
  ``regex``, ``max_chars`` …, the structured styles, ``section``) — plus rubric items for
  what no check can express.

A compiled check is only a candidate. It must be grounded in what was said — what the answer
must have (a literal, a size, a section) in the user's words, what it must not have in the
user's words or the corrected answer; anything else is dropped with why (a model may not
invent what the user wants) — and :func:`~skillopt_sleep.mining.corrections.validate` holds
it to the transcript's controls (it fails the corrected answer, passes the accepted one, and
an answer made of its own words does not pass) before it scores anything, exactly as a check
the regex layer derived.

Readings are kept in the store (``store.readings``) under a hash of what the model was shown:
a follow-up is read once, a repeat night makes no call, and mining without a model (``tasks``,
``mine``) reuses what the nights read. A :class:`Reader` without ``ask`` reads from the store
only. At most ``max_calls`` follow-ups are read per run (the rest wait for the next night;
:attr:`Reader.unread` counts them). A model answer that is no JSON object reads as nothing
(``neutral``, no group) and is kept as such: one bad answer neither fails the night nor
comes back from the response cache to fail every later one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, ValidationError

from skillopt_sleep.errors import BackendResponseError, BudgetExceeded
from skillopt_sleep.models import Check
from skillopt_sleep.store import Store

#: the version of what a reading asks; a change re-reads every follow-up once
VERSION = "read-v1"
#: the characters of the request and of the answer the model is shown
SHOWN_CHARS = 1500
#: follow-ups longer than this are never read: a correction is said in a few sentences
MAX_WORDS = 60
#: the characters of each request the model groups is shown, and the most requests of a
#: project it groups in one call (the latest ones asked apart)
GROUP_CHARS = 300
GROUP_MAX = 30
#: the check kinds a reading may compile (``tool_called`` needs the session's tool names:
#: the regex layer makes those)
KINDS = frozenset(get_args(Check.model_fields["kind"].annotation)) - {"tool_called"}
_NUMERIC = {"max_chars", "min_chars", "max_words"}
_VALUELESS = {"imperative", "no_emoji", "snake_case", "type_hints"}


class Reading(BaseModel):
    """What the model read in one follow-up (see the module doc)."""

    label: Literal["correction", "positive", "neutral"]
    checks: list[Check] = Field(default_factory=list)
    rubric: list[str] = Field(default_factory=list)
    #: what was dropped from the model's answer, with why (shown in ``tasks show``)
    dropped: list[str] = Field(default_factory=list)


#: ``ask(kind, material) -> the model's JSON object``: the night's optimizer behind
#: ``night.prompts.read_prompt`` (``kind`` "read") and ``group_prompt`` ("group"); it raises
#: the backend's errors (a dead model fails the night)
Ask = Callable[[str, dict[str, Any]], dict[str, Any]]


def material(request: str, answer: str, followup: str) -> dict[str, Any]:
    """What the model is shown: the request, the answer (each cut to ``SHOWN_CHARS``) and the
    follow-up."""
    return {
        "request": request[:SHOWN_CHARS],
        "answer": answer[:SHOWN_CHARS],
        "follow_up": followup,
    }


def key(shown: dict[str, Any], kind: str = "read") -> str:
    blob = json.dumps(
        [VERSION, shown] + ([kind] if kind != "read" else []), ensure_ascii=False, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def compile_reading(data: dict[str, Any], shown: dict[str, Any]) -> Reading:
    """The model's JSON object as a :class:`Reading`: an unknown label is ``neutral``; a check
    of an unknown kind, with a value that is not a number where one is needed, a regex that
    does not compile, or a literal that appears neither in the user's words nor in the
    answers, is dropped with its reason."""
    label = str(data.get("label", "")).strip().lower()
    if label not in ("correction", "positive", "neutral"):
        label = "neutral"
    dropped: list[str] = []
    checks: list[Check] = []
    rubric: list[str] = []
    if label == "correction":
        raw = data.get("checks")
        for item in raw if isinstance(raw, list) else []:
            check, why = _check(item, shown)
            if check is not None:
                if not any(c.kind == check.kind and c.value == check.value for c in checks):
                    checks.append(check)
            elif why:
                dropped.append(why)
        items = data.get("rubric")
        if isinstance(items, str):  # one item, not in a list
            items = [items]
        for r in items if isinstance(items, list) else []:
            r = " ".join(str(r).split())[:200]
            if r and r not in rubric:
                rubric.append(r)
    if data.get("unreadable"):
        dropped.append(f"the model's answer was no JSON object: {str(data['unreadable'])[:120]}")
    return Reading(label=label, checks=checks, rubric=rubric, dropped=dropped)


def _check(item: Any, shown: dict[str, Any]) -> tuple[Check | None, str]:
    """One compiled check, grounded in what was said: what the answer must have, its size
    and a section come from the user's words (the follow-up); what it must not have from
    the user's words or the corrected answer."""
    followup = str(shown["follow_up"])
    if not isinstance(item, dict):
        return None, f"not a check: {str(item)[:60]!r}"
    kind = str(item.get("kind", "")).strip()
    value = str(item.get("value", "") or "").strip()
    if kind not in KINDS:
        return None, f"unknown check kind {kind!r}"
    if kind in _VALUELESS:
        value = ""
    elif kind in _NUMERIC:
        m = re.search(r"\d+", value)
        if not m or int(m.group(0)) <= 0:
            return None, f"{kind} needs a number, got {value!r}"
        value = m.group(0)
        if not re.search(rf"(?<!\d){value}(?!\d)", followup):
            return None, f"{kind} {value}: the user named no such number"
    elif not value:
        return None, f"{kind} needs a value"
    elif kind in ("regex", "not_regex"):
        try:
            re.compile(value)
        except re.error:
            return None, f"{kind} {value!r} does not compile"
    else:
        where = followup if kind != "not_contains" else f"{followup}\n{shown['answer']}"
        if value.lower() not in where.lower():
            return None, f"{kind} {value!r}: not in the user's words" + (
                " or the answer" if kind == "not_contains" else ""
            )
    try:
        check = Check(kind=kind, value=value, origin="reading", evidence=_one_line(followup))
    except ValidationError as exc:  # pragma: no cover - the kinds above are all valid
        return None, str(exc).splitlines()[0]
    return check, ""


def _one_line(text: str, limit: int = 300) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class Reader:
    """Reads follow-ups by their meaning (see the module doc). ``ask``: the model (None: the
    store's readings only); ``model``: its name, kept beside each reading."""

    def __init__(
        self, store: Store, ask: Ask | None = None, *, model: str = "", max_calls: int = 50
    ):
        self.store, self.ask, self.model, self.max_calls = store, ask, model, max_calls
        #: follow-ups read by the model in this run, answered from the store, left unread
        self.calls = 0
        self.stored = 0
        self.unread = 0

    def read(self, request: str, answer: str, followup: str) -> Reading | None:
        """The reading of ``followup`` (None: not read yet, and no call may be made)."""
        shown = material(request, answer, followup)
        k = key(shown)
        hit = self.store.readings.get(k)
        if hit is not None:
            try:
                reading = Reading.model_validate(hit)
            except ValidationError:
                reading = None
            if reading is not None:
                self.stored += 1
                return reading
        data = self._answer("read", shown)
        if data is None:
            return None
        reading = compile_reading(data, shown)
        self.store.readings.put(k, reading.model_dump(), self.model)
        return reading

    def _answer(self, kind: str, shown: dict[str, Any]) -> dict[str, Any] | None:
        """The model's answer to a reading not in the store (None: no call may be made — no
        model, this run's cap, or the night's call cap, after which it asks no more). An
        answer that is no JSON object reads as nothing (``unreadable``), to be kept so."""
        if self.ask is None or self.calls >= self.max_calls:
            self.unread += 1
            return None
        try:
            data = self.ask(kind, shown)
        except BudgetExceeded:  # the night's call cap: the rest wait for the next night
            self.ask = None
            self.unread += 1
            return None
        except BackendResponseError as exc:  # prose, no JSON: read as nothing, and kept so
            data = {"label": "neutral", "groups": [], "unreadable": str(exc)}
        self.calls += 1
        return data

    def group(self, requests: list[str]) -> list[list[int]] | None:
        """Which of ``requests`` (one project's, each a request mined apart) ask for the same
        thing in other words or another language: groups of their indices, each of two or
        more (None: not read yet, and no call may be made)."""
        shown = {"requests": [{"id": i, "text": r[:GROUP_CHARS]} for i, r in enumerate(requests)]}
        k = key(shown, "group")
        hit = self.store.readings.get(k)
        if hit is not None and isinstance(hit.get("groups"), list):
            self.stored += 1
            return groups_of(hit, len(requests))
        data = self._answer("group", shown)
        if data is None:
            return None
        groups = groups_of(data, len(requests))
        self.store.readings.put(k, {"groups": groups}, self.model)
        return groups


def groups_of(data: dict[str, Any], n: int) -> list[list[int]]:
    """The model's ``groups`` as disjoint lists of two or more valid indices below ``n``."""
    raw = data.get("groups")
    seen: set[int] = set()
    out: list[list[int]] = []
    for g in raw if isinstance(raw, list) else []:
        if not isinstance(g, list):
            continue
        ids = []
        for i in g:
            if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n and i not in seen:
                ids.append(i)
                seen.add(i)
        if len(ids) >= 2:
            out.append(sorted(ids))
    return out


def worth_reading(text: str, *, english_request: bool, positive: bool) -> bool:
    """True when a follow-up the regex layer called ``neutral`` may still be feedback: short
    enough to be one, not an approval, and not opening like a new English request ("now add
    a test"). Text in another language always qualifies (the regex layer knows English)."""
    words = text.split()
    if not words or len(words) > MAX_WORDS or positive:
        return False
    return not english_request
