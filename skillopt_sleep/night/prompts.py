"""The prompts the night sends to the optimizer model, and the parsers of its answers.

Each prompt begins with a fixed marker line (``SKILLOPT-REFLECT v1``, ``SKILLOPT-JUDGE v1``,
``SKILLOPT-CONSOLIDATE v1``, ``SKILLOPT-READ v1``, ``SKILLOPT-GROUP v1``) and carries its structured material as one fenced ``json`` block,
so any capable model can follow it and the bundled simulator can parse it deterministically.
The answer is asked for as a single JSON object; :func:`extract_json` tolerates prose and
code fences around it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from skillopt_sleep.errors import BackendResponseError

REFLECT_MARKER = "SKILLOPT-REFLECT v1"
JUDGE_MARKER = "SKILLOPT-JUDGE v1"
CONSOLIDATE_MARKER = "SKILLOPT-CONSOLIDATE v1"
READ_MARKER = "SKILLOPT-READ v1"
GROUP_MARKER = "SKILLOPT-GROUP v1"


def _block(data: Any) -> str:
    return "```json\n" + json.dumps(data, indent=2, ensure_ascii=False) + "\n```"


def reflect_prompt(
    *,
    rules: list[str],
    failures: list[dict[str, Any]],
    successes: list[dict[str, Any]],
    rejected: list[str],
    budget: int,
    user_refused: list[dict[str, str]] | None = None,
    skill: dict[str, Any] | None = None,
    contrasts: list[dict[str, Any]] | None = None,
) -> str:
    """Build the reflect prompt.

    ``failures`` / ``successes`` items: ``{"task": str, "answer": str, "score": float,
    "failed_checks": [{"kind", "value", "evidence"}], "corrections": [str]}``.
    ``rejected``: texts of edits the gate rejected earlier (the rejected-edit buffer).
    ``user_refused``: ``{"edit": Edit.describe() text, "reason": the user's words}`` of edits
    in proposals the user rejected or rolled back (left out of the prompt when empty, so
    nights without any keep their cached prompts).
    ``skill``: for a skill document, ``{"description": its front matter description,
    "max_chars": the longest description allowed}``; the rollouts then say whether the agent
    loaded the skill (``skill_loaded``: true / false / "unknown") and a ``describe`` edit may
    rewrite the description (left out for a memory document, whose prompts stay as they were).
    ``contrasts``: dream rollouts (``dream_samples`` > 1) of tasks whose best and worst
    attempts scored apart, ``{"task", "best": {"answer", "score"}, "worst": {"answer",
    "score", "failed_checks"}}``; the prompt asks what distinguishes them (left out when
    empty, so nights without dream rollouts keep their cached prompts).
    """
    material = {
        "rules": rules,
        "failures": failures,
        "successes": successes,
        "rejected_edits": rejected,
        "edit_budget": budget,
    }
    refused = ""
    if user_refused:
        material["user_refused_edits"] = user_refused
        refused = (
            "\nThe user reviewed and refused the edits under user_refused_edits (their reasons "
            "say why): never propose them, or rules that say the same, again.\n"
        )
    contrast = ""
    if contrasts:
        material["contrasts"] = contrasts
        contrast = (
            "\nThe same task was attempted several times under the same rules: contrasts "
            "holds each task's best and worst attempt. Work out what distinguishes the best "
            "attempt from the worst, and propose rules that make the agent do what the best "
            "one did.\n"
        )
    describe = ""
    if skill is not None:
        material["skill"] = skill
        describe = (
            "\nThe document is a skill: the agent sees only its description (under skill) in "
            "every turn and loads the rules only when the description matches the task; "
            "skill_loaded says whether it did in each rollout. When failing rollouts did not "
            "load it, rewrite the description so that it names what those tasks are about "
            f"(one line, at most {skill.get('max_chars')} characters):\n"
            '  {"op": "describe", "text": "<new description>", "rationale": "..."}\n'
        )
    return f"""{REFLECT_MARKER}
You improve a coding agent's skill document: a list of short rules the agent reads before it
works. Below are the current rules, rollouts of the user's recurring tasks scored against
checks derived from the user's own corrections, and edits that were already tried and
rejected (do not propose them again).
{refused}{contrast}
Propose at most {budget} edits that would make the failing rollouts pass without breaking the
passing ones. Each edit is one of:
  {{"op": "add", "text": "<new rule>", "evidence": [<n of the failures it fixes>], "scope": "<family>", "rationale": "..."}}
  {{"op": "replace", "old": "<existing rule, verbatim>", "text": "<new rule>", "evidence": [...], "scope": "<family>", "rationale": "..."}}
  {{"op": "delete", "old": "<existing rule, verbatim>", "rationale": "..."}}
Rules are one line each, imperative, specific, and name concrete commands or values in
backticks. A rule applies only to the kind of task it was learned from: give as "scope" the
"family" of the failures it fixes; "all" only when it fixes failures of several families and
is right for every task the agent does (a length or style limit never is). The scope is
written before the rule for the agent to read ("When writing a commit message: …").
{describe}
{_block(material)}

Answer with one JSON object and nothing else: {{"edits": [...]}}"""


def judge_prompt(*, task: str, rubric: str, answer: str) -> str:
    """Build the rubric-scoring prompt; the answer is ``{"score": 0..1}``."""
    return f"""{JUDGE_MARKER}
Score how well an assistant's answer satisfies a rubric written from the user's feedback.
1.0 = fully satisfies, 0.0 = contradicts it. Judge only against the rubric.

{_block({"task": task, "rubric": rubric, "answer": answer})}

Answer with one JSON object and nothing else: {{"score": <number between 0 and 1>}}"""


def read_prompt(shown: dict[str, Any]) -> str:
    """Build the follow-up reading prompt (``mining/meaning.py``): ``shown`` is its
    ``request``, ``answer`` and ``follow_up``; the answer is ``{"label", "checks",
    "rubric"}``."""
    return f"""{READ_MARKER}
A user asked a coding agent for something, the agent answered, and the user wrote a
follow-up (in any language). First decide what the follow-up is:
- "correction": it says the answer just given is wrong, unwanted or incomplete, or must be
  changed (another tool or command, style, length, a missing part, it is cut off).
- "positive": it only thanks or approves ("thanks", "perfect", "danke", "gracias").
- "neutral": it asks for something new (another function, file, feature or question), even
  after a thank-you. Most follow-ups are neutral.
Examples: "no, use yarn" is a correction; "Danke, super!" is positive; "now add a test for
slugify" and "Jetzt schreib eine Funktion für X" are neutral.
Only for a correction, turn what the user asked for into checks that a good answer to the
same request passes and the corrected answer fails. Use only these kinds:
  {{"kind": "contains", "value": "<literal word or command the answer must have>"}}
  {{"kind": "not_contains", "value": "<literal the answer must not have>"}}
  {{"kind": "max_chars" | "min_chars" | "max_words", "value": "<number>"}}
  {{"kind": "imperative"}}  (the message starts with a verb in the imperative mood)
  {{"kind": "no_emoji"}}, {{"kind": "snake_case"}}, {{"kind": "type_hints"}}
  {{"kind": "section", "value": "<heading the answer must have>"}}
Literals must be words the user wrote; never a word that describes a style. Put what no
check can express in "rubric" as short English sentences. Cover everything the user asked
for. A positive or neutral follow-up has no checks and no rubric.

{_block(shown)}

Answer with one JSON object and nothing else:
{{"label": "correction" | "positive" | "neutral", "checks": [...], "rubric": ["..."]}}"""


def group_prompt(shown: dict[str, Any]) -> str:
    """Build the request grouping prompt (``mining/meaning.py``): ``shown["requests"]`` are
    ``{"id", "text"}``; the answer is ``{"groups": [[id, ...], ...]}``."""
    return f"""{GROUP_MARKER}
A user asked a coding agent for each of these requests, in one project, in whatever language.
Group the requests that ask for the same task — the same thing done again, even in other
words or another language. Requests about different files, features or values are
different tasks. Leave a request that matches no other out of every group.

{_block(shown)}

Answer with one JSON object and nothing else: {{"groups": [[<id>, <id>, ...], ...]}}"""


def consolidate_prompt(*, rules: list[str]) -> str:
    """Build the epoch-end slow-update prompt; the answer is ``{"rules": [str, ...]}``."""
    return f"""{CONSOLIDATE_MARKER}
Consolidate this list of rules from a coding agent's skill document: merge duplicates and
near-duplicates, drop rules that contradict a later rule, keep every distinct instruction and
every concrete command or value. Do not invent new rules.

{_block({"rules": rules})}

Answer with one JSON object and nothing else: {{"rules": ["...", ...]}}"""


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def extract_json(text: str, *, backend: str = "") -> dict[str, Any]:
    """Return the first JSON object in ``text`` (fenced or bare).

    Raises BackendResponseError when none parses, so a confused model fails loudly.
    """
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start != -1:
        candidates.append(text[start : text.rfind("}") + 1])
    for cand in candidates:
        try:
            value = json.loads(cand)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise BackendResponseError(
        f"expected a JSON object in the answer, got: {text[:120]!r}", backend=backend
    )


def material_of(prompt: str) -> dict[str, Any]:
    """The JSON material block of a prompt built here (used by the simulator)."""
    match = _FENCE.search(prompt)
    if not match:
        raise ValueError("prompt has no json block")
    return json.loads(match.group(1))
