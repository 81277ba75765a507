"""Mine recurring, replayable tasks from harvested sessions (docs/mining.md).

:func:`mine` walks the stored sessions of the configured scope (not self-generated, not
headless unless ``settings.mine_headless``, touched within ``settings.lookback_days``), turns
every real user prompt into an *intent* (later answers, tool names and the user's correction /
approval attach to it; a follow-up that corrects or amends the answer, by its words or by its
role — :func:`amends` — is a correction, never an intent), clusters intents that are the same
request in the same project (compatible corrections), and saves the qualifying clusters as
:class:`~skillopt_sleep.models.Task` objects with stable ids, their *occurrences* (one per
intent) and the occurrences' roles by time (:mod:`skillopt_sleep.mining.split`). A task the
night cannot score — no rule check, no rubric it judges — gets no roles (split ``""``).

Similarity is rapidfuzz ``fuzz.token_set_ratio`` on the content words of normalised text
(placeholders — masked urls, paths, file names, numbers, hashes, redactions, pasted blocks — and
filler are not content): agent prompts are short imperatives whose recurrences reorder words
and add qualifiers ("run the unit tests with pytest" / "please run the pytest unit tests"),
which token-set matching tolerates; it is cheap, deterministic and needs no model. Its one
blind spot — a short intent whose words are a subset of a long one scores 100 ("fix" vs "fix
the login bug") — is closed by also requiring the shorter intent to have at least half as many
content words as the longer one.

Only the pairs a candidate index proposes are scored (:mod:`skillopt_sleep.mining.candidates`;
:func:`cluster_all_pairs` is the quadratic reference it is tested against), and each
project's clustering is kept in the store (``store.mining``): a run whose stored clustering
still holds compares only the intents new since (:func:`_reusable`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process

from skillopt_sleep import agents
from skillopt_sleep.config import Settings
from skillopt_sleep.mining import corrections as fb
from skillopt_sleep.mining import meaning
from skillopt_sleep.mining.candidates import CandidateIndex, Screen, Vocabulary
from skillopt_sleep.mining.judges import scorable
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.mining.split import assign_splits, undistinct, view_id
from skillopt_sleep.models import CapsuleItem, Check, ContextCapsule, Occurrence, Task
from skillopt_sleep.results import OnProgress, ProgressEvent
from skillopt_sleep.store import MessageRow, SessionRow, Store

INTENT_CHARS = 2000
#: a context capsule's bounds: items kept, and characters over all its items
CAPSULE_ITEMS = 12
CAPSULE_CHARS = 24_000
_COMPARE_CHARS = 1000
#: the corrected / accepted answer pairs a task keeps for its rubric judge, and their length
CONTROLS = 2
CONTROL_CHARS = 3000
#: Words ignored when counting an intent's content words (question and politeness filler).
_STOPWORDS = {
    "a",
    "an",
    "the",
    "to",
    "of",
    "for",
    "in",
    "on",
    "and",
    "or",
    "with",
    "please",
    "can",
    "could",
    "you",
    "me",
    "my",
    "is",
    "it",
    "this",
    "that",
    "all",
    "now",
    "how",
    "do",
    "does",
    "i",
    "we",
    "should",
    "would",
    "will",
    "what",
    "why",
    "where",
    "let",
    "lets",
    "let's",
    "just",
    "again",
    "also",
    "our",
    "your",
    "be",
    "are",
    "some",
    "us",
}


class MineReport(BaseModel):
    """What :func:`mine` found; ``dropped`` counts what was left out, by reason."""

    tasks: list[Task] = Field(default_factory=list)
    sessions_considered: int = 0
    prompts: int = 0
    clusters: int = 0
    tasks_recurring: int = 0
    tasks_corrected: int = 0
    tasks_scorable: int = 0  # with a split; the others are unassigned ("")
    #: scorable tasks asked once: they train, and are not yet validated on a recurrence
    tasks_once: int = 0
    #: scorable tasks asked again only in the same words with the same context: the later
    #: asks would replay as cache hits of a train replay, so not yet validated on a distinct
    #: recurrence (:func:`~skillopt_sleep.mining.split.undistinct`)
    tasks_undistinct: int = 0
    #: pairs of intents scored, and intents whose cluster the last run's stays (only the
    #: others are compared)
    pairs_compared: int = 0
    prompts_reused: int = 0
    #: requests asked where no project of the user's is known (an agent's own folder, such
    #: as OpenClaw's workspace) given the one project the same request was asked in
    rehomed: int = 0
    #: follow-ups the optimizer model read in this run (:mod:`.meaning`), and those it could
    #: not yet (no model, or the run's reading cap reached): the next night reads them
    read: int = 0
    unread: int = 0
    #: requests joined to another's task by their meaning (the optimizer's reading) or by
    #: the user (``tasks join``), not by their words
    joined: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)


@dataclass
class Intent:
    """One user request and what followed it inside its session."""

    session_id: str
    project: str
    when: str
    seq: int
    text: str
    norm: str = ""
    tools: set[str] = field(default_factory=set)
    answer: str = ""  # answer text of the latest turn
    #: the code of every answer to it (commands, block lines): what validates a join by
    #: meaning (:func:`answers_agree`)
    code: set[str] = field(default_factory=set)
    answered: bool = False
    corrections: list[fb.Feedback] = field(default_factory=list)
    positives: int = 0
    settled: int = 0  # corrections whose following answer's fate is known
    #: what the agent saw before its first answer: capsule items, and tool results the log
    #: keeps no input of (see :func:`capsule`)
    seen: list[CapsuleItem] = field(default_factory=list)
    unseen: int = 0
    #: how it joined a task its words did not: "meaning" (the optimizer read it as the same
    #: request) or "user" (``tasks join``); "" by its words
    joined: str = ""
    #: what it is clustered with: its project, or "" for a request asked in no project of the
    #: user's (no folder, or an agent's own folder: one block of a shared memory file, so
    #: ``~/.claude`` and ``~/.codex`` are not two projects); None: its project
    scope: str | None = None


def _group(it: Intent) -> str:
    """The project an intent is clustered in (:attr:`Intent.scope`, else its project)."""
    return it.project if it.scope is None else it.scope


# ---------------------------------------------------------------------------- normalise
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+", re.I)
_PATH = re.compile(r"(?<![\w<])(?:~|\.{1,2})?(?:/[\w.@+-]+)+/?|\b[\w.@+-]+(?:/[\w.@+-]+)+/?")
_HASH = re.compile(r"\b(?=[0-9a-f-]*\d)(?=[0-9a-f-]*[a-f])[0-9a-f]{7,}(?:-[0-9a-f]{4,})*\b", re.I)
_NUM = re.compile(r"\b\d+(?:[.,]\d+)*\b")
#: a redaction placeholder (``[REDACTED:github_token]``, and the corpus's ``[REDACTED_…]``)
_REDACTED = re.compile(r"\[REDACTED[^\]]*\]", re.I)
#: a pasted block: fenced code, or three or more indented / traceback lines in a row
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)
_INDENTED = re.compile(r"(?:^(?:[ \t]{2,}|\t|Traceback |  File ).*(?:\n|\Z)){3,}", re.M)
#: a file name with a common extension (``dates.py``): a masked path
_FILE = re.compile(
    r"\b[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|json|md|rst|txt|toml|ya?ml|ini"
    r"|cfg|rs|go|java|kt|rb|php|cs|c|h|cc|cpp|hpp|sh|bash|zsh|sql|html|css|scss|lock|csv"
    r"|xml|env|swift|lua|ex|exs|vue|svelte)\b",
    re.I,
)
#: placeholders: what masking leaves, never content
PLACEHOLDERS = frozenset({"<url>", "<path>", "<hash>", "<n>", "<redacted>", "<block>"})


@functools.lru_cache(maxsize=1024)
def normalise_intent(text: str) -> str:
    """Lowercase, mask redactions, pasted blocks, urls, paths and file names, hashes and
    numbers, drop punctuation, collapse whitespace. The latest 1,024 texts are remembered:
    walking a session normalises each prompt again as the request its follow-up may
    restate (at most 20,000 characters each, so at most ~20 MB kept)."""
    t = _REDACTED.sub(" <redacted> ", text)
    t = _FENCED.sub(" <block> ", t)
    t = _INDENTED.sub(" <block> ", t)
    t = t.lower()
    t = _URL.sub(" <url> ", t)
    t = _PATH.sub(" <path> ", t)
    t = _FILE.sub(" <path> ", t)
    t = _HASH.sub(" <hash> ", t)
    t = _NUM.sub(" <n> ", t)
    t = re.sub(r"[^\w\s<>-]", " ", t)
    return " ".join(t.split())


def _content(norm: str) -> int:
    return len({w for w in norm.split() if w not in _STOPWORDS and w not in PLACEHOLDERS}) or 1


def similar(a: str, b: str, threshold: float) -> float:
    """Similarity (0..100) of two normalised intents, or 0 when below ``threshold`` (0..100)
    or when one has less than half the content words of the other. Placeholders (masked
    paths, redactions, pasted blocks …) are not content."""
    ca, cb = _content(a), _content(b)
    if min(ca, cb) * 2 < max(ca, cb):
        return 0.0
    return near_duplicate(a, b, threshold)


def near_duplicate(a: str, b: str, threshold: float) -> float:
    """:func:`similar` without the length rule: whether one's content words are (nearly) a
    subset of the other's. What keeps a recalled train prompt from being a near-copy of a
    held-out one (:mod:`skillopt_sleep.mining.recall`)."""
    # compare content words only: shared filler ("how do I … the") must not make
    # "how do I lint the project" look like "how do I run the tests"
    wa, wb = _content_text(a), _content_text(b)
    if not (wa and wb):
        wa, wb = a, b
    score = fuzz.token_set_ratio(wa[:_COMPARE_CHARS], wb[:_COMPARE_CHARS])
    return score if score >= threshold else 0.0


def _content_text(norm: str) -> str:
    return " ".join(w for w in norm.split() if w not in _STOPWORDS and w not in PLACEHOLDERS)


# ---------------------------------------------------------------------------- walking
def _parse(ts: str | None) -> _dt.datetime | None:
    if not ts:
        return None
    try:
        value = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)


def _last_active(session: SessionRow, messages: list[MessageRow]) -> _dt.datetime | None:
    """The latest message timestamp; else ``started_at``; else ``updated_at`` (which is the
    harvest time, so it is only a fallback)."""
    stamps = [d for d in (_parse(m.timestamp) for m in messages) if d]
    if stamps:
        return max(stamps)
    return _parse(session.started_at) or _parse(session.updated_at)


#: A short follow-up that amends the answer it follows ("use the imperative mood", "make it
#: shorter", "it should mention the ticket", "without emojis", "no emojis please", "in
#: snake_case"): a correction by its role, whatever its first word.
_AMENDS = re.compile(
    r"^\W*(?:(?:and|but|also|please|pls)\W+)*(?:use|make (?:it|that|this|them)"
    r"|no (?:more )?emojis?|emoji[\s-]*free"
    r"|keep (?:it|that|this|them)|(?:it|that|this|they|the \w+) (?:should|must|needs? to"
    r"|has to|have to)|should|must|needs? to|without|only|in (?:the )?[\w-]+(?: [\w-]+)? "
    r"(?:mood|style|case|format|tense|voice)|in (?:snake|camel|kebab|pascal)_?case"
    r"|imperative|shorter|longer|simpler|less|more|mention|include|as (?:a|an) )\b",
    re.I,
)
#: Longest follow-up (in words) :data:`_AMENDS` is looked for in.
AMEND_WORDS = 20
#: Fewest content words (placeholders and filler left out) a follow-up restating the request
#: it follows has.
RESTATEMENT_WORDS = 3


def amends(text: str, intent: str, threshold: float) -> bool:
    """Whether a follow-up the classifier calls neutral still corrects the answer it follows,
    by its role: it restates the request ``intent`` it follows (the user asked again, with
    changes, in the same session) or is a short amendment of the answer (:data:`_AMENDS`).
    A follow-up that differs from the request in its numbers ("Step 2" after "Step 1") or
    has too few words of its own is the next request, not a restatement."""
    norm = normalise_intent(text)
    numbers, before = _NUM.findall(text), _NUM.findall(intent)
    if (
        len(_content_text(norm).split()) >= RESTATEMENT_WORDS
        and not (numbers and before and numbers != before)
        and similar(norm, normalise_intent(intent), threshold)
    ):
        return True
    return len(text.split()) <= AMEND_WORDS and _AMENDS.search(text) is not None


def _walk(
    session: SessionRow,
    messages: list[MessageRow],
    dropped: Counter,
    threshold: float = 72.0,
    reader: Reader | None = None,
) -> tuple[list[Intent], int]:
    """Split one session into intents; returns them and the number of prompts seen. A
    follow-up that corrects the answer before it (:func:`~.corrections.classify`, or by its
    role: :func:`amends`, or by its meaning: ``reader``, :mod:`~.meaning`) is that intent's
    correction, never an intent of its own; the reader also compiles checks from every
    correction's words beside the regex layer's."""
    intents: list[Intent] = []
    current: Intent | None = None
    prompts = 0
    session_tools = sorted({t for m in messages for t in m.tool_names})
    for at, m in enumerate(messages):
        if m.is_sidechain:
            continue
        if m.role == "user" and m.kind == "prompt":
            prompts += 1
            text = (m.text or "").strip()
            if fb.is_trivial(text):
                dropped["trivial_prompt"] += 1
                continue
            if not _content_text(normalise_intent(text)):
                # only placeholders (a redacted or pasted block, a path) and filler: nothing to learn
                dropped["no_content_prompt"] += 1
                continue
            label = fb.classify(text)
            if (
                label == "neutral"
                and current is not None
                and current.answered
                and fb.typed_by_user(text)  # injected markup amends nothing
                and amends(text, current.text, threshold)
            ):
                label = "correction"
                dropped["correction_by_role"] += 1
            reading = None
            if (
                reader is not None
                and current is not None
                and current.answered
                and fb.typed_by_user(text)
                and (
                    label == "correction"
                    or meaning.worth_reading(
                        text,
                        english_request=fb.opens_request(text),
                        positive=fb.is_positive(text),
                    )
                )
            ):
                reading = reader.read(current.text, current.answer, text)
                if label == "neutral" and reading is not None and reading.label != "neutral":
                    if reading.label == "correction" and not redoes(
                        current.answer, _answer_after(messages, at)
                    ):
                        dropped["reading_refuted"] += 1  # the agent did something else next
                    else:
                        label = reading.label
                        dropped[f"{label}_by_meaning".replace("positive", "approval")] += 1
            _settle(current, label)
            if label != "neutral":
                if current is None or not current.answered:
                    dropped["feedback_without_answer"] += 1
                elif label == "correction" and not fb.typed_by_user(text):
                    dropped["correction_in_injected_text"] += 1  # a file's words, not the user's
                elif label == "correction":
                    found = fb.analyze(text, current.answer, session_tools, correction=True)
                    if reading is not None and reading.label == "correction":
                        found = fb.with_reading(found, reading.checks, reading.rubric)
                    current.corrections.append(found)
                    current.answer = ""
                else:
                    current.positives += 1
                    current.answer = ""
                continue
            current = Intent(
                session_id=session.id,
                project=session.project or "",
                when=m.timestamp or session.started_at or "",
                seq=m.seq,
                text=text[:INTENT_CHARS],
                norm=normalise_intent(text),
            )
            intents.append(current)
        elif current is not None:
            if m.kind == "tool" and not current.corrections and not current.positives:
                if m.context:
                    item = CapsuleItem.model_validate(m.context)
                    if item.kind != "action":  # an edit's result is no context
                        current.seen.append(item)
                elif not m.is_error:
                    current.unseen += 1
            current.tools.update(m.tool_names)
            if m.role == "assistant":
                current.answered = True
                if m.text:
                    current.answer = f"{current.answer}\n{m.text}".strip()
                    current.code |= code_lines(m.text)
    return intents, prompts


def _answer_after(messages: list[MessageRow], at: int) -> str:
    """The agent's answer to the prompt at ``at``: its texts up to the next prompt."""
    out: list[str] = []
    for m in messages[at + 1 :]:
        if m.is_sidechain:
            continue
        if m.role == "user" and m.kind == "prompt":
            break
        if m.role == "assistant" and m.text:
            out.append(m.text)
    return "\n".join(out)


#: how alike (rapidfuzz token-set ratio) a redone answer is to the answer it redoes, at least
REDO_SIMILARITY = 40


def redoes(corrected: str, after: str) -> bool:
    """The transcript's word on a follow-up read as a correction (the user's next move is the
    agent's answer to it): the agent redid the answer — its next answer is like the one
    corrected — or said so without code ("Understood."). Code unlike the corrected answer is
    another task: the follow-up was a new request."""
    if not code_lines(after) or not corrected.strip():
        return True
    return fuzz.token_set_ratio(corrected.lower(), after.lower()) >= REDO_SIMILARITY


def _settle(current: Intent | None, label: str) -> None:
    """The user's next prompt tells the fate of the answer that followed their latest
    correction: accepted (approval, or a new request) or corrected again. Its checks get
    their positive control then (:func:`~skillopt_sleep.mining.corrections.settle`)."""
    if current is None or len(current.corrections) <= current.settled:
        return
    accepted = current.answer if label != "correction" and current.answer.strip() else None
    current.corrections[-1] = fb.settle(current.corrections[-1], accepted)
    current.settled = len(current.corrections)


# ---------------------------------------------------------------------------- clustering
def _stances(members: list[Intent]) -> dict[str, str]:
    """``{value: kind}`` of the members' ``contains`` / ``not_contains`` correction checks."""
    out: dict[str, str] = {}
    for it in members:
        for f in it.corrections:
            for c in f.checks:
                if c.kind in ("contains", "not_contains"):
                    out[c.value.lower()] = c.kind
    return out


def contradiction(a: list[Intent], b: list[Intent]) -> str:
    """The first value one group's corrections want and the other's forbid ("" if none)."""
    sa, sb = _stances(a), _stances(b)
    for value in sorted(sa.keys() & sb.keys()):
        if sa[value] != sb[value]:
            return value
    return ""


#: The version of what :func:`_cluster` stores per project (a stored state of another
#: version, or of another threshold, is not reused).
CLUSTER_STATE_VERSION = 1


def _stance_key(it: Intent) -> list[list[str]]:
    """What of an intent's corrections clustering reads (:func:`contradiction`)."""
    return [
        [c.kind, c.value.lower()]
        for f in it.corrections
        for c in f.checks
        if c.kind in ("contains", "not_contains")
    ]


def _reusable(prior: dict | None, group: list[Intent], threshold: float) -> list[tuple[int, bool]]:
    """What an earlier run (``prior``) decided for each of ``group``'s first intents: its
    stored cluster and whether it was that cluster's first intent. Only decisions that may
    still hold are returned: up to the first intent that changed (time, words, corrections'
    stances), that a new intent now comes before, or that follows an intent gone out of the
    lookback whose corrections had stances while its cluster has intents still mined.
    :func:`_cluster_project` checks each of them against what changed since."""
    if (
        not prior
        or prior.get("version") != CLUSTER_STATE_VERSION
        or prior.get("threshold") != threshold
    ):
        return []
    entries = prior.get("intents") or []
    now = {(it.session_id, it.seq): it for it in group}
    alive = {e[4] for e in entries if (e[0], e[1]) in now}  # clusters with a mined intent
    kept: list[tuple[int, bool]] = []
    seen: set[int] = set()
    for session_id, seq, when, norm, cluster, stances in entries:
        it = now.get((session_id, seq))
        first = cluster not in seen
        seen.add(cluster)
        if it is None:
            if stances and cluster in alive:
                break  # its cluster stays, without the stances it had
            continue
        if (
            it.when != when
            or it.norm != norm
            or _stance_key(it) != stances
            or len(kept) >= len(group)
            or group[len(kept)] is not it  # a new intent comes before it
        ):
            break
        kept.append((cluster, first))
    return kept


def _cluster(
    intents: list[Intent],
    threshold: float,
    counts: Counter | None = None,
    states: dict[str, dict] | None = None,
) -> list[list[Intent]]:
    """Greedy, deterministic: intents in (project, time, session, seq) order join the best
    matching cluster of their project (compared with its first member) whose corrections they
    do not contradict, else start one. Only the clusters the candidate index proposes are
    scored (:mod:`skillopt_sleep.mining.candidates`); ``counts["compared"]`` counts them.

    ``states`` (project -> what an earlier run stored) makes it incremental: the intents
    whose stored clustering still holds (:func:`_reusable`) keep their clusters and only
    the intents after them are compared. ``states`` is updated in place
    with every clustered project's new state."""
    ordered = sorted(intents, key=lambda i: (_group(i), i.when, i.session_id, i.seq))
    clusters: list[list[Intent]] = []
    start = 0
    while start < len(ordered):
        end = start
        while end < len(ordered) and _group(ordered[end]) == _group(ordered[start]):
            end += 1
        group = ordered[start:end]
        start = end
        project = _group(group[0])
        prior = states.get(project) if states is not None else None
        done, state = _cluster_project(group, threshold, counts, prior)
        clusters += done
        if states is not None:
            states[project] = state
    return clusters


def _cluster_project(
    group: list[Intent], threshold: float, counts: Counter | None, prior: dict | None
) -> tuple[list[list[Intent]], dict]:
    """:func:`_cluster` for one project's intents (in order). A stored decision
    (:func:`_reusable`) is kept unless what it chose between changed: its cluster's first
    intent is no longer one (gone out of the lookback, or decided otherwise now), or an
    intent that is a cluster's first now and was not then (*promoted*) is similar to it. Those
    are decided again; when one moves an intent with correction stances to another cluster,
    every later intent is decided again."""
    clustering = _ProjectClustering(group, threshold)
    reused = clustering.run(_reusable(prior, group, threshold))
    if counts is not None:
        counts["compared"] += clustering.index.compared + clustering.promoted.compared
        counts["reused"] += reused
    clusters = clustering.clusters
    of = {id(it): n for n, members in enumerate(clusters) for it in members}
    state = {
        "version": CLUSTER_STATE_VERSION,
        "threshold": threshold,
        "intents": [
            [it.session_id, it.seq, it.when, it.norm, of[id(it)], _stance_key(it)] for it in group
        ],
    }
    return clusters, state


class _ProjectClustering:
    """One project's intents joined into clusters, in order: each intent joins the most
    similar cluster head (:meth:`decide`) or starts a cluster. Candidate heads come from an
    inverted index over typo classes and a screen drops pairs provably below the threshold
    before token-set ratio scores them (docs/mining.md)."""

    def __init__(self, group: list[Intent], threshold: float):
        self.group, self.threshold = group, threshold
        self.contents = contents = [_content_text(it.norm)[:_COMPARE_CHARS] for it in group]
        vocab = Vocabulary()
        for text in contents:
            vocab.add(text.split())
        self.records = [vocab.classes(text) for text in contents]
        frequency = Counter(c for r in self.records for c in r)
        self.index = CandidateIndex(frequency)
        self.promoted = CandidateIndex(frequency)  # heads now that were not heads then
        self.promoted_at: list[int] = []  # their positions in ``index``
        self.screen = Screen(threshold)  # cheap tests before token-set ratio scores a candidate
        for text in contents:
            self.screen.count(text)
        self.keys = [self.screen.key(text) for text in contents]
        self.clusters: list[list[Intent]] = []
        self.heads: list[tuple[int, str]] = []  # (cluster, head norm) by position in the index
        self.head_texts: list[str] = []  # head contents, by position
        self.bare_heads: list[int] = []  # positions of heads without content words

    def run(self, kept: list[tuple[int, bool]]) -> int:
        """Cluster every intent, reusing the stored decisions ``kept`` (by position: the
        stored cluster and whether the intent was its head) where they still hold; returns
        how many were reused."""
        now_of: dict[int, int] = {}  # stored cluster -> its cluster now, while its head is one
        goes_on: dict[int, int] = {}  # stored cluster -> the cluster now that holds its intents
        reused = 0
        for i, it in enumerate(self.group):
            if i >= len(kept):
                best = self.decide(i)
                if best is None:
                    self.start_cluster(i)
                else:
                    self.clusters[self.heads[best][0]].append(it)
                continue
            stored, was_head = kept[i]
            if (was_head or stored in now_of) and not self.near_promoted(i):
                reused += 1
                if was_head:
                    now_of[stored] = goes_on[stored] = self.start_cluster(i)
                else:
                    self.clusters[now_of[stored]].append(it)
                continue
            best = self.decide(i)
            if best is None:
                target = self.start_cluster(i)
                if not was_head:
                    self.promoted.add(len(self.promoted_at), self.records[i], _content(it.norm))
                    self.promoted_at.append(len(self.heads) - 1)
                else:
                    now_of[stored] = target
                goes_on.setdefault(stored, target)
            else:
                target = self.heads[best][0]
                self.clusters[target].append(it)
            if target != goes_on.get(stored) and _stance_key(it):
                kept = kept[: i + 1]  # correction stances moved: decide every later one again
        return reused

    def start_cluster(self, i: int) -> int:
        """A new cluster headed by ``group[i]``; its number."""
        self.index.add(len(self.heads), self.records[i], _content(self.group[i].norm))
        self.screen.add(self.keys[i])
        self.heads.append((len(self.clusters), self.group[i].norm))
        self.head_texts.append(self.contents[i])
        if not self.contents[i]:
            self.bare_heads.append(len(self.heads) - 1)
        self.clusters.append([self.group[i]])
        return len(self.clusters) - 1

    def _scored(self, i: int) -> list[int]:
        """The head positions ``group[i]`` may join: the index's candidates, screened and
        scored on content words (heads without content words always kept)."""
        it, content, head_texts = self.group[i], self.contents[i], self.head_texts
        proposed = self.index.candidates(self.records[i], _content(it.norm))
        if not (content and proposed):  # similar() compares content words: a cheap test first
            return list(proposed)
        bare = [pos for pos in proposed if not head_texts[pos]] if self.bare_heads else []
        # the screen drops only pairs scoring below threshold (a few are scored at once)
        found = self.screen.screen(self.keys[i], proposed) if len(proposed) > 8 else list(proposed)
        texts = (
            itemgetter(*found)(head_texts)
            if len(found) > 1
            else tuple(map(head_texts.__getitem__, found))
        )
        return [
            found[j]
            for _, _, j in process.extract(
                content, texts, scorer=fuzz.token_set_ratio, score_cutoff=self.threshold, limit=None
            )
            if texts[j]
        ] + bare

    def decide(self, i: int) -> int | None:
        """The position of the head ``group[i]`` joins (None: it starts a cluster)."""
        it, threshold = self.group[i], self.threshold
        best: int | None = None
        best_score = 0.0
        for pos in self._scored(i):
            head = self.heads[pos][1]
            if not fuzz.token_set_ratio(it.norm, head, score_cutoff=threshold):
                continue
            score = similar(it.norm, head, threshold)
            if score and contradiction([it], self.clusters[self.heads[pos][0]]):
                continue  # "use npm" and "use pnpm" are not one task
            if score > best_score or (
                score and best is not None and score == best_score and pos < best
            ):
                best, best_score = pos, score
        return best

    def near_promoted(self, i: int) -> bool:
        """Whether ``group[i]`` is similar to a head promoted this run (then its stored
        decision is taken again)."""
        it = self.group[i]
        for p in self.promoted.candidates(self.records[i], _content(it.norm)):
            head = self.heads[self.promoted_at[p]][1]
            if fuzz.token_set_ratio(it.norm, head, score_cutoff=self.threshold) and similar(
                it.norm, head, self.threshold
            ):
                return True
        return False


def cluster_all_pairs(
    intents: list[Intent], threshold: float, counts: Counter | None = None
) -> list[list[Intent]]:
    """:func:`_cluster` comparing every intent with every cluster of its project (quadratic:
    kept as the reference the candidate index is tested and benchmarked against)."""
    clusters: list[list[Intent]] = []
    heads: dict[str, list[tuple[int, str]]] = {}  # project -> [(cluster index, head norm)]
    for it in sorted(intents, key=lambda i: (_group(i), i.when, i.session_id, i.seq)):
        mine_heads = heads.setdefault(_group(it), [])
        choices = [h for _, h in mine_heads]
        if counts is not None:
            counts["compared"] += len(choices)
        best: int | None = None
        best_score = 0.0
        for _, _, pos in process.extract(
            it.norm, choices, scorer=fuzz.token_set_ratio, score_cutoff=threshold, limit=None
        ):
            score = similar(it.norm, choices[pos], threshold)
            if score and contradiction([it], clusters[mine_heads[pos][0]]):
                continue  # "use npm" and "use pnpm" are not one task
            if score > best_score or (
                score and best is not None and score == best_score and pos < best
            ):
                best, best_score = pos, score
        if best is None:
            mine_heads.append((len(clusters), it.norm))
            clusters.append([it])
        else:
            clusters[mine_heads[best][0]].append(it)
    return clusters


_CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.S)


def code_lines(text: str) -> set[str]:
    """The commands and code in ``text`` (inline code, each line of a block), spaced alike."""
    out: set[str] = set()
    for fenced, inline in _CODE.findall(text):
        for line in (fenced or inline).splitlines():
            line = " ".join(line.split())
            if len(line) >= 3:
                out.add(line)
    return out


def answers_agree(a: list[Intent], b: list[Intent]) -> bool:
    """Whether the agent answered both requests with some of the same code (a command, a line
    of a block): what validates a join by meaning — the same request in two languages gets
    the same `npm install`; a request read as the same by mistake does not."""
    return bool(set().union(*(it.code for it in a)) & set().union(*(it.code for it in b)))


def join_by_meaning(
    clusters: list[list[Intent]],
    reader: Reader | None,
    links: Sequence[tuple[str, str, str, str]] = (),
) -> tuple[list[list[Intent]], int]:
    """Join the clusters of one project that are the same request in other words or another
    language: first those the user joined (``links``: ``tasks join``), then those the
    optimizer reads as one (:meth:`Reader.group`, over the project's latest
    :data:`~.meaning.GROUP_MAX` clusters, in a stable order so the reading is kept; only in a
    project where some request was corrected, as nothing else could train), each join held
    to the transcript (:func:`answers_agree`: the agent answered both with the same code). Never
    two the user split (``tasks split``) or whose corrections contradict. Returns the
    clusters and how many requests joined another's cluster."""
    splits = {(p, a, b) for p, a, b, kind in links if kind == "split"}
    order: dict[str, list[int]] = {}
    for k, c in enumerate(clusters):
        order.setdefault(_group(c[0]), []).append(k)
    gone: set[int] = set()
    joined = 0

    def merge(head: int, k: int, how: str) -> None:
        nonlocal joined
        a, b = clusters[head], clusters[k]
        project = _group(a[0])
        if any((project, *sorted((x.norm, y.norm))) in splits for x in a for y in b):
            return
        if contradiction(a, b):
            return
        for it in b:
            it.joined = it.joined or how
        joined += len(b)
        a.extend(b)
        gone.add(k)

    for project, a_norm, b_norm, kind in links:
        if kind != "join":
            continue
        ks = order.get(project, [])
        ka = next(
            (k for k in ks if k not in gone and any(i.norm == a_norm for i in clusters[k])), None
        )
        kb = next(
            (k for k in ks if k not in gone and any(i.norm == b_norm for i in clusters[k])), None
        )
        if ka is not None and kb is not None and ka != kb:
            merge(min(ka, kb), max(ka, kb), "user")
    if reader is not None:
        for ks in order.values():
            live = [k for k in ks if k not in gone]
            if len(live) < 2 or not any(it.corrections for k in live for it in clusters[k]):
                continue  # nothing a join could teach: no request of the project was corrected
            latest = sorted(live, key=lambda k: max(i.when for i in clusters[k]), reverse=True)
            shown = sorted(latest[: meaning.GROUP_MAX], key=lambda k: (clusters[k][0].text, k))
            for group in reader.group([clusters[k][0].text for k in shown]) or []:
                ids = sorted(shown[i] for i in group)
                for k in ids[1:]:
                    # the transcript's control: the agent answered both with the same code
                    if (
                        ids[0] not in gone
                        and k not in gone
                        and answers_agree(clusters[ids[0]], clusters[k])
                    ):
                        merge(ids[0], k, "meaning")
    return [c for k, c in enumerate(clusters) if k not in gone], joined


def _apart(a: list[Intent], b: list[Intent], threshold: float) -> str:
    """Why two clusters whose first prompts look alike are two tasks ("" when they do not
    look alike)."""
    ha, hb = a[0].norm, b[0].norm
    if not near_duplicate(ha, hb, threshold):
        return ""
    if _group(a[0]) != _group(b[0]):
        return "a different project"
    value = contradiction(a, b)
    if value:
        return f"contradicting corrections about {value!r}"
    if not similar(ha, hb, threshold):
        ca, cb = _content(ha), _content(hb)
        return (
            f"one request has less than half the content words of the other ({min(ca, cb)} "
            f"vs {max(ca, cb)})"
        )
    return "each joined a closer request first"


def _merge_checks(members: list[Intent]) -> list[Check]:
    """Union of the members' correction checks; duplicates dropped, a later correction wins
    over an earlier contradicting one, and of several ``max_chars`` the loosest is kept."""
    checks: list[Check] = []
    for it in members:
        for feedback in it.corrections:
            for c in feedback.checks:
                opposite = {"contains": "not_contains", "not_contains": "contains"}.get(c.kind)
                checks = [
                    o
                    for o in checks
                    if not (o.kind == opposite and o.value.lower() == c.value.lower())
                ]
                if not any(o.kind == c.kind and o.value.lower() == c.value.lower() for o in checks):
                    checks.append(c)
    limits = [c for c in checks if c.kind == "max_chars"]
    if len(limits) > 1:
        keep = max(limits, key=lambda c: int(c.value))
        checks = [c for c in checks if c.kind != "max_chars" or c is keep]
    return checks


def _common_tool_checks(members: list[Intent], checks: list[Check]) -> list[Check]:
    """``tool_called`` for a tool every member used and some correction named."""
    have = {c.value for c in checks if c.kind == "tool_called"}
    common = set.intersection(*(it.tools for it in members)) if members else set()
    out = []
    for tool in sorted(common - have):
        for it in members:
            hit = next((f for f in it.corrections if fb.mentions(f.text, tool)), None)
            if hit:
                out.append(
                    Check(
                        kind="tool_called",
                        value=tool,
                        origin="correction",
                        evidence=fb.evidence(hit.text),
                    )
                )
                break
    return out


def capsule(it: Intent) -> ContextCapsule:
    """The occurrence's context capsule: the files it read and outputs it saw before
    answering (the last read of a file wins), bounded by :data:`CAPSULE_ITEMS` and
    :data:`CAPSULE_CHARS`; ``missing`` says what cannot be rebuilt."""
    items: list[CapsuleItem] = []
    for item in it.seen:
        items = [i for i in items if not (i.kind == item.kind == "file" and i.name == item.name)]
        items.append(item)
    missing: list[str] = []
    if it.unseen:
        missing.append(f"{it.unseen} tool result(s) the agent's log keeps no input of")
    if len(items) > CAPSULE_ITEMS:
        missing.append(f"{len(items) - CAPSULE_ITEMS} earlier item(s) over the capsule's bound")
        items = items[-CAPSULE_ITEMS:]
    kept: list[CapsuleItem] = []
    room = CAPSULE_CHARS
    for item in reversed(items):  # the latest matter most
        if room <= 0:
            missing.append(f"{item.kind} {item.name!r} over the capsule's bound")
            continue
        if len(item.text) > room:
            item = item.model_copy(update={"text": item.text[:room], "truncated": True})
        room -= len(item.text)
        kept.append(item)
    kept.reverse()
    missing += [f"{i.kind} {i.name!r} was cut short" for i in kept if i.truncated]
    return ContextCapsule(items=kept, missing=missing)


def _needs_context(checks: list[Check], intent: str, ctx: ContextCapsule) -> list[Check]:
    """Mark the checks whose value only the context held (a file name, a function the
    agent read): a replay without that context cannot be held to them."""
    seen = "\n".join(i.text + "\n" + i.name for i in ctx.items)
    out = []
    for c in checks:
        needs = (
            c.kind == "contains"
            and bool(c.value)
            and fb.mentions(seen, c.value)
            and not fb.mentions(intent, c.value)
        )
        out.append(c.model_copy(update={"context": needs}) if needs else c)
    return out


def _task_id(project: str, norm: str, stored: list[Task], used: set[str], threshold: float) -> str:
    best, best_score = None, 0.0
    for t in stored:
        if t.id in used or (t.project or "") != project:
            continue
        score = similar(norm, normalise_intent(t.intent), threshold)
        if score > best_score:
            best, best_score = t.id, score
    if best:
        return best
    return hashlib.sha256(f"{project}\n{norm}".encode()).hexdigest()[:16]


def _build(members: list[Intent], task_id: str) -> Task:
    checks = _merge_checks(members)
    checks += _common_tool_checks(members, checks)
    rubric: list[str] = []
    texts: list[str] = []
    said: dict[str, int] = {}  # the user's words -> their rubric line (the fullest reading)
    for it in members:
        for f in it.corrections:
            if f.rubric and f.rubric not in rubric:
                key = fb.evidence(f.text)
                if key not in said:
                    said[key] = len(rubric)
                    rubric.append(f.rubric)
                elif len(f.rubric) > len(rubric[said[key]]):
                    rubric[said[key]] = f.rubric
            if f.text not in texts:
                texts.append(f.text)
    sessions = list(dict.fromkeys(it.session_id for it in members))
    tools = list(dict.fromkeys(c.value for c in checks if c.kind == "tool_called"))
    # each occurrence keeps its own capsule: its replay sees what its agent saw (the staged
    # diff of that day), not the first occurrence's
    capsules = {id(it): capsule(it) for it in members}
    occurrences = [
        Occurrence(
            session_id=it.session_id,
            seq=it.seq,
            when=it.when,
            prompt=it.text,
            corrected=bool(it.corrections),
            context=capsules[id(it)],
            joined=it.joined,
        )
        for it in sorted(members, key=lambda i: (i.when, i.session_id, i.seq))
    ]
    demoted = [c for it in members for f in it.corrections for c in f.demoted]
    # the answers a rubric judge must tell apart (the corrected one below the accepted one)
    controls = [
        (f.corrected[:CONTROL_CHARS], f.accepted[:CONTROL_CHARS] if f.accepted else None)
        for it in members
        for f in it.corrections
        if f.corrected.strip()
    ][:CONTROLS]
    context = capsules[id(members[0])]
    # a check needs context when some occurrence's capsule alone held its value
    for it in members:
        marked = _needs_context(checks, it.text, capsules[id(it)])
        checks = [m if m.context else c for c, m in zip(checks, marked, strict=True)]
    return Task(
        id=task_id,
        project=members[0].project or None,
        intent=members[0].text,
        sessions=sessions,
        checks=checks,
        rubric="\n".join(rubric),
        corrections=texts,
        synthetic=False,
        tools=tools,
        occurrences=occurrences,
        demoted=demoted,
        context=context,
        controls=controls,
    )


# ---------------------------------------------------------------------------- projects
def _agent_folders() -> list[str]:
    """The agents' own folders (each agent's home; OpenClaw's workspace, wherever its config
    puts it): a session whose project is one of them was asked of the agent, not in a
    project of the user's (OpenClaw 2026.9.6 records its workspace as every session's
    folder, whatever folder ``openclaw agent`` was run in)."""
    folders = {str(a.home()) for a in agents.AGENTS}
    folders |= {str(p.parent) for p in agents.get_agent("openclaw").user_memory_files()}
    return sorted(folders)


def _own_folder(project: str, folders: list[str]) -> bool:
    return not project or any(project == f or project.startswith(f + "/") for f in folders)


def block_key(project: str | None) -> str | None:
    """The block of a memory file every project shares that a task asked in ``project``
    trains on a night without a project (night/run.py): that project's, None (the block
    every project reads) for a request asked in no project of the user's (no folder, or an
    agent's own folder)."""
    return None if _own_folder(project or "", _agent_folders()) else project


def rehome_projectless(intents: list[Intent], threshold: float, folders: list[str]) -> int:
    """Give a request asked where no project of the user's is known (no folder, or an
    agent's own folder: ``folders``) the project of the same request asked in a project,
    when all its matches (:func:`similar` at ``threshold``, 0..100) are in one project: the
    request asked of OpenClaw and in OpenCode in ``~/src/webapp`` is one task, held out on
    its next occurrence whichever agent it was asked of. Requests matching several projects
    or none keep theirs. Returns how many moved. Scores only the candidates rapidfuzz's
    token-set ratio proposes (the looser measure of :func:`similar`)."""
    homed: dict[str, set[str]] = {}  # content text -> the user's projects it was asked in
    norms: dict[str, str] = {}  # content text -> one normalised request with it
    for it in intents:
        if not _own_folder(it.project, folders):
            key = _content_text(it.norm) or it.norm
            homed.setdefault(key, set()).add(it.project)
            norms.setdefault(key, it.norm)
    if not homed:
        return 0
    choices = list(homed)
    cut = [c[:_COMPARE_CHARS] for c in choices]
    moved = 0
    for it in intents:
        if not _own_folder(it.project, folders):
            continue
        query = (_content_text(it.norm) or it.norm)[:_COMPARE_CHARS]
        found: set[str] = set()
        for _choice, _score, idx in process.extract(
            query, cut, scorer=fuzz.token_set_ratio, score_cutoff=threshold, limit=None
        ):
            if similar(it.norm, norms[choices[idx]], threshold):
                found |= homed[choices[idx]]
        if len(found) == 1:
            it.project = found.pop()
            moved += 1
    return moved


# ---------------------------------------------------------------------------- entry point
def mine(
    store: Store,
    settings: Settings,
    *,
    now: _dt.datetime | None = None,
    on_progress: OnProgress | None = None,
    reader: Reader | None = None,
) -> MineReport:
    """Mine tasks from the store, assign splits (keeping stored ones) and save them.
    ``on_progress`` gets a ``mine`` event per session walked (sessions done of the total,
    prompts seen so far). ``reader`` reads follow-ups by their meaning (:mod:`.meaning`);
    None: the readings the store keeps (a night's), and no model call."""
    reader = reader if reader is not None else Reader(store)
    now = now or _dt.datetime.now(_dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=_dt.UTC)
    dropped: Counter = Counter()
    report = MineReport()
    intents = _intents(store, settings, now, report, dropped, on_progress, reader)
    threshold = settings.similarity * 100
    folders = _agent_folders()
    report.rehomed = rehome_projectless(intents, threshold, folders)
    for it in intents:  # the requests asked in no project of the user's are one group
        it.scope = "" if _own_folder(it.project, folders) else it.project
    # each project's clustering of the last run: only the prompts new since are compared
    states = store.mining.states(sorted({_group(it) for it in intents}))
    counts: Counter = Counter()
    clusters = _cluster(intents, threshold, counts, states)
    report.pairs_compared, report.prompts_reused = counts["compared"], counts["reused"]
    store.mining.save(states)
    # the same request in other words or another language: joined by the user's word, then
    # by the optimizer's reading
    clusters, report.joined = join_by_meaning(clusters, reader, store.mining.links())
    report.clusters = len(clusters)
    kept = _recurring(clusters, settings, dropped)
    tasks = _tasks_of(kept, store, threshold)
    # each task's occurrences get roles by time (held out = the next time the user asked);
    # an occurrence replayed for training or gating by an earlier night is never test, nor
    # a literal repeat of a train (or val) occurrence of its task or of another task
    judge_ok = settings.rubric
    replayed = store.rollouts.splits_of([view_id(t.id, o) for t in tasks for o in t.occurrences])
    tasks = assign_splits(
        tasks,
        replayed,
        settings.val_fraction,
        settings.test_fraction,
        is_scorable=lambda t: scorable(t, judge_ok),
        # a night without a project trains one block per project (night/night.py)
        block_of=(lambda t: block_key(t.project)) if settings.project is None else None,
    )
    store.tasks.save(tasks)
    report.tasks = tasks
    report.tasks_recurring = sum(1 for t in tasks if len(t.sessions) >= settings.min_sessions)
    report.tasks_corrected = sum(1 for t in tasks if t.corrections)
    report.tasks_scorable = sum(1 for t in tasks if t.split)
    report.tasks_once = sum(1 for t in tasks if t.split and len(t.occurrences) == 1)
    report.tasks_undistinct = sum(1 for t in tasks if undistinct(t))
    report.read, report.unread = reader.calls, reader.unread
    report.dropped = dict(sorted(dropped.items()))
    return report


def _intents(
    store: Store,
    settings: Settings,
    now: _dt.datetime,
    report: MineReport,
    dropped: Counter,
    on_progress: OnProgress | None,
    reader: Reader | None = None,
) -> list[Intent]:
    """The requests of the stored sessions in scope (not self-generated, not headless unless
    ``mine_headless``, active within the lookback), with what each session's walk dropped
    counted in ``dropped`` and the sessions and prompts in ``report``."""
    cutoff = now - _dt.timedelta(days=settings.lookback_days)
    scope = str(settings.project).rstrip("/") if settings.project else None
    intents: list[Intent] = []
    sessions = store.sessions.all(scope, include_self=True)

    def progress(done: int, message: str | None = None) -> None:
        if on_progress is not None:
            on_progress(
                ProgressEvent(
                    step="mine",
                    done=done,
                    total=len(sessions),
                    unit="sessions",
                    prompts=report.prompts,
                    message=message,
                )
            )

    for n, s in enumerate(sessions, 1):
        progress(n - 1)
        project = s.project or ""
        if scope and not (project == scope or project.startswith(scope + "/")):
            continue  # the store's LIKE treats "_" as a wildcard
        if s.self_generated:
            dropped["self_generated_session"] += 1
            continue
        if s.headless and not settings.mine_headless:
            # a `claude -p` / Agent-SDK / `codex exec` / `copilot -p` run: a script's or a
            # grader's requests, not the user's (its "no, use X" is scripted)
            dropped["headless_session"] += 1
            continue
        messages = store.sessions.messages(s.id)
        active = _last_active(s, messages)
        if active is None or active < cutoff or active > now + _dt.timedelta(days=1):
            dropped["outside_lookback"] += 1
            continue
        report.sessions_considered += 1
        found, n_prompts = _walk(s, messages, dropped, settings.similarity * 100, reader)
        report.prompts += n_prompts
        intents.extend(found)
    progress(len(sessions), f"clustering {len(intents)} requests")
    return intents


def _recurring(
    clusters: list[list[Intent]], settings: Settings, dropped: Counter
) -> list[tuple[bool, int, str, list[Intent]]]:
    """The clusters that are tasks: recurring in ``min_sessions`` sessions or corrected,
    corrected first, then by sessions and age, at most ``max_tasks``."""
    kept = []
    for members in clusters:
        n_sessions = len({it.session_id for it in members})
        corrected = any(it.corrections for it in members)
        if n_sessions >= settings.min_sessions or corrected:
            kept.append((not corrected, -n_sessions, members[0].when, members))
        else:
            dropped["too_few_sessions"] += 1
    kept.sort(key=lambda k: k[:3])
    if len(kept) > settings.max_tasks:
        dropped["over_max_tasks"] += len(kept) - settings.max_tasks
        kept = kept[: settings.max_tasks]
    return kept


def _tasks_of(
    kept: list[tuple[bool, int, str, list[Intent]]], store: Store, threshold: float
) -> list[Task]:
    """A task per kept cluster, with its id (a stored task's when it is the same request:
    clusters are matched oldest first, so an old task keeps its stored id) and why it was
    kept apart from each similar task."""
    stored = [t for t in store.tasks.all() if not t.synthetic]
    used: set[str] = set()
    ids: dict[int, str] = {}
    for i in sorted(
        range(len(kept)), key=lambda i: (kept[i][2], kept[i][3][0].session_id, kept[i][3][0].seq)
    ):
        members = kept[i][3]
        ids[i] = _task_id(members[0].project, members[0].norm, stored, used, threshold)
        used.add(ids[i])
    tasks = [_build(k[3], ids[i]) for i, k in enumerate(kept)]
    for i, t in enumerate(tasks):
        why = []
        for j, other in enumerate(tasks):
            reason = _apart(kept[i][3], kept[j][3], threshold) if i != j else ""
            if reason:
                why.append(f"{other.id} ({other.intent[:60]!r}): {reason}")
        t.apart = why
    return tasks
