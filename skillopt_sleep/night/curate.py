"""Curation before staging: a new rule is not staged twice, nor beside its opposite, unsaid.

The night's gate judges each rule on the replays; it cannot see that the file the agent loads
already says the same in the user's own words, or in another block the agent also reads (the
block for every project, in a shared memory file), or says the opposite there. Before a
proposal is staged, :func:`curate` compares each rule it adds with that text:

* **merged** — the file already says it (:func:`~skillopt_sleep.delivery.document.same_rule`,
  the same scope): the rule is left out, since the agent reads it anyway (the replays that
  certified it had the file whole, that text included);
* **flagged** — it contradicts a rule there, or a rule of another agent's copy of the same
  rules (:func:`~skillopt_sleep.delivery.document.contradicts`): staged, and the report says
  which two rules disagree, for the user to settle.

What it did is listed in the proposal's summary (``curation``) and report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from skillopt_sleep import agents
from skillopt_sleep.delivery.document import (
    Document,
    all_rules,
    contradicts,
    outside_blocks,
    read_live,
    same_rule,
)
from skillopt_sleep.errors import DocumentError

#: a line of the user's own text that reads as a rule (a bullet or a numbered item)
_OWN_RULE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(\S.*)$")


def _own_lines(text: str | None) -> list[str]:
    """The user's own rule lines in ``text`` (outside every managed block)."""
    plain: list[str] = []
    src = text or ""
    kept = outside_blocks(src)
    if not kept:
        return plain
    for line in src.splitlines():
        m = _OWN_RULE.match(line)
        if m and " ".join(m.group(1).split()) in kept:
            plain.append(m.group(1).strip())
    return plain


def curate(
    live: str | None,
    section: str | None,
    base: list[str],
    rules: list[str],
    elsewhere: dict[str, list[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """``rules`` (the block's trained rules; ``base``: the block's before) less those the file
    ``live`` already says elsewhere, and what curation did, one line each. ``elsewhere``:
    other agents' files (a label → the rules of their managed blocks), whose copies of the
    user's rules a new rule must not contradict either."""
    own = _own_lines(live)
    block_rules = set(Document.parse(live, section=section).rules)
    others = [r for r in all_rules(live) if r not in block_rules]
    where = "the block every project reads" if section is not None else "another block"
    notes: list[str] = []
    kept: list[str] = []
    for r in rules:
        if r in base:
            kept.append(r)
            continue
        dup = next((o for o in own if same_rule(o, r)), None)
        if dup is not None:
            notes.append(f"merged: {r} (your own line already says it: {dup})")
            continue
        dup = next((o for o in others if same_rule(o, r)), None)
        if dup is not None:
            notes.append(f"merged: {r} ({where} already says it: {dup})")
            continue
        against = [(o, "your own line") for o in own] + [(o, where) for o in others]
        against += [(o, "the rules already in this block") for o in base]
        against += [(o, label) for label, said in (elsewhere or {}).items() for o in said]
        for other, whose in against:
            why = contradicts(r, other)
            if why:
                notes.append(f"flagged: {r} contradicts {whose}: {other} ({why})")
                break
        kept.append(r)
    return kept, notes


def other_agents_rules(target: Path, env: Mapping[str, str], home: Path) -> dict[str, list[str]]:
    """The rules of the managed blocks in every other agent's user-level memory file (the
    copies of the user's rules for other agents), by ``<agent>'s <file>``."""
    out: dict[str, list[str]] = {}
    for agent in agents.AGENTS:
        for path in agent.user_memory_files(env, home):
            if path == target or not path.is_file():
                continue
            try:
                found = all_rules(read_live(path))
            except DocumentError:
                continue
            if found:
                out[f"{agent.name}'s {path.name}"] = found
    return out
