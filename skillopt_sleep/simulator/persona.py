"""Persona files: the data that drives the deterministic simulator's answers.

A persona is a TOML file (see ``personas/demo.toml``)::

    name = "demo-js"
    models = []                      # accepted model names; empty = accept any model
    default_answer = "... {prompt}"  # used when no answer matches; ``{prompt}`` is substituted

    [[answers]]                      # first match wins
    match = "run (the )?tests"       # Python regex, searched case-insensitively in the prompt
    text = "Run `npm test` to run the suite."
    tool = ["Bash", "exec_command"]  # optional: call the first of these tools the request
                                     # offers (names case-insensitive), then answer `text`
    tool_input = { command = "ls" }  # optional: the tool call's input object
    variants = ["Run `pnpm test`."]  # optional: a dream rollout's sample k > 0 answers
                                     # variants[(k - 1) % len] instead of `text`
    fickle = ["Run `pnpm test`."]    # optional: a prompt-sensitive model: the answer is
                                     # `text` or one of these, picked by a hash of the
                                     # system text, the prompt and the sample index: any
                                     # change of the document, even a rule that says
                                     # nothing, may change it (overrides `variants`; list
                                     # an answer twice to make it likelier)

    [tool_inputs]                    # optional: per-tool inputs; override ``tool_input`` and
    exec_command = { cmd = "ls" }    # serve "Use the `T` tool." rules

    [optimizer]                      # reflect behaviour
    order = ["harmful", "derived", "useless"]
    useless_edits = ["Be helpful and precise."]
    harmful_edits = ["Keep answers under 12 characters."]
    lossy_consolidate = false        # consolidate by dropping the last rule (a bad merge)
    ignore_user_refusals = false     # re-propose edits the user refused (a model that does
                                     # not follow the prompt)
    describe_skills = true           # for a skill not loaded in failing rollouts, first
                                     # rewrite its description from those tasks' words
    describe_as = ""                 # for a skill, first propose this description (any skill,
                                     # loaded or not; a poisoned description, say)
    consolidate_adds = []            # rules a consolidation adds to its merge (a merge that
                                     # slips in rules the night did not accept)
    unscoped_consolidate = false     # consolidate by dropping each rule's scope ("When …:"),
                                     # a merge that widens rules to every task

    [skills]                         # as a target: when to load a skill the request lists
    match = "words"                  # "words": its description shares >= min_shared content
                                     # words (lower-cased, 4+ letters, stop-words out, no
                                     # stemming) with the task prompt; "always"; "never"
    min_shared = 1
    max_loads = 1                    # skills loaded per conversation at most (the best match)
    builtin = false                  # also load skills the CLI ships itself (Copilot
                                     # location "builtin", Codex's skills/.system, Claude
                                     # Code's bundled names); never by default
                                     # A listed description is never read for rules (it
                                     # is no instruction), only a loaded body; with no
                                     # skill listed, [skills] changes nothing

    [server]
    fail_first = 0                   # the first N model calls answer HTTP ``fail_status``
    fail_status = 500
    latency = 0.0                    # seconds every model call waits before it is answered
    jitter = 0.0                     # plus up to this many seconds more, drawn from a hash
    seed = 0                         # of ``seed`` and the request body: the same request
                                     # always waits the same time, whatever the thread order
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

EDIT_GROUPS = ("harmful", "derived", "useless")
SKILL_MATCHES = ("words", "always", "never")


@dataclass(frozen=True)
class SkillRule:
    """When the target loads a listed skill (``[skills]`` in the persona TOML)."""

    match: str = "words"
    min_shared: int = 1
    max_loads: int = 1
    builtin: bool = False


@dataclass(frozen=True)
class Answer:
    """One canned answer: ``pattern`` (compiled, case-insensitive) -> ``text``, optionally
    preceded by a call to the first offered tool of ``tools``."""

    pattern: re.Pattern[str]
    text: str
    tools: tuple[str, ...] = ()
    tool_input: dict[str, Any] = field(default_factory=dict)
    #: what later samples of a dream rollout answer instead of ``text``, in turn
    variants: tuple[str, ...] = ()
    #: a prompt-sensitive answer's alternatives (picked by a hash of the instructions)
    fickle: tuple[str, ...] = ()


@dataclass(frozen=True)
class Persona:
    name: str = "persona"
    models: tuple[str, ...] = ()
    default_answer: str = "I am not sure; could you give more detail?"
    answers: tuple[Answer, ...] = ()
    tool_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: tuple[str, ...] = EDIT_GROUPS
    useless_edits: tuple[str, ...] = ()
    harmful_edits: tuple[str, ...] = ()
    lossy_consolidate: bool = False
    ignore_user_refusals: bool = False
    describe_skills: bool = True
    describe_as: str = ""
    consolidate_adds: tuple[str, ...] = ()
    unscoped_consolidate: bool = False
    fail_first: int = 0
    fail_status: int = 500
    latency: float = 0.0
    jitter: float = 0.0
    seed: int = 0
    skills: SkillRule = SkillRule()

    def accepts(self, model: str) -> bool:
        """True when ``model`` is listed, or when the persona lists no models."""
        return not self.models or model in self.models


def _answer(raw: dict[str, Any]) -> Answer:
    try:
        pattern = re.compile(str(raw["match"]), re.I)
        text = str(raw["text"])
    except KeyError as exc:
        raise ValueError(f"persona answer needs `match` and `text`, missing {exc}") from None
    except re.error as exc:
        raise ValueError(f"persona answer has a bad regex {raw.get('match')!r}: {exc}") from None
    tool = raw.get("tool") or ()
    tools = (tool,) if isinstance(tool, str) else tuple(str(t) for t in tool)
    variants = tuple(str(v) for v in raw.get("variants", []))
    fickle = tuple(str(v) for v in raw.get("fickle", []))
    return Answer(pattern, text, tools, dict(raw.get("tool_input", {})), variants, fickle)


def persona_from_dict(data: dict[str, Any]) -> Persona:
    """Build a Persona from parsed TOML; ValueError on a malformed entry."""
    opt = data.get("optimizer", {})
    server = data.get("server", {})
    order = tuple(opt.get("order", EDIT_GROUPS))
    bad = [g for g in order if g not in EDIT_GROUPS]
    if bad:
        raise ValueError(f"persona optimizer.order: unknown group(s) {bad}; known {EDIT_GROUPS}")
    raw_skills = data.get("skills", {})
    skills = SkillRule(
        match=str(raw_skills.get("match", SkillRule.match)),
        min_shared=int(raw_skills.get("min_shared", SkillRule.min_shared)),
        max_loads=int(raw_skills.get("max_loads", SkillRule.max_loads)),
        builtin=bool(raw_skills.get("builtin", SkillRule.builtin)),
    )
    timing = {k: float(server.get(k, 0.0)) for k in ("latency", "jitter")}
    if any(v < 0 or v > 600 for v in timing.values()):
        raise ValueError(f"persona server latency / jitter must be 0..600 seconds, not {timing}")
    if skills.match not in SKILL_MATCHES:
        raise ValueError(f"persona skills.match: unknown {skills.match!r}; known {SKILL_MATCHES}")
    return Persona(
        name=str(data.get("name", "persona")),
        models=tuple(str(m) for m in data.get("models", [])),
        default_answer=str(data.get("default_answer", Persona.default_answer)),
        answers=tuple(_answer(a) for a in data.get("answers", [])),
        tool_inputs={str(k): dict(v) for k, v in data.get("tool_inputs", {}).items()},
        order=order,
        useless_edits=tuple(str(e) for e in opt.get("useless_edits", [])),
        harmful_edits=tuple(str(e) for e in opt.get("harmful_edits", [])),
        lossy_consolidate=bool(opt.get("lossy_consolidate", False)),
        ignore_user_refusals=bool(opt.get("ignore_user_refusals", False)),
        describe_skills=bool(opt.get("describe_skills", True)),
        describe_as=str(opt.get("describe_as", "")),
        consolidate_adds=tuple(str(e) for e in opt.get("consolidate_adds", [])),
        unscoped_consolidate=bool(opt.get("unscoped_consolidate", False)),
        fail_first=int(server.get("fail_first", 0)),
        fail_status=int(server.get("fail_status", 500)),
        latency=timing["latency"],
        jitter=timing["jitter"],
        seed=int(server.get("seed", 0)),
        skills=skills,
    )


def load_persona(source: Persona | str | Path | None = None) -> Persona:
    """A Persona from an object, a TOML file path, or ``None`` / ``"demo"`` (the bundled demo)."""
    if isinstance(source, Persona):
        return source
    if source is None or str(source) == "demo":
        text = resources.files(__package__).joinpath("personas/demo.toml").read_text("utf-8")
        return persona_from_dict(tomllib.loads(text))
    with open(source, "rb") as fh:
        return persona_from_dict(tomllib.load(fh))
