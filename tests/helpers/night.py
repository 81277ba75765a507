"""A night's world for the night tests: the demo conversations in a temporary HOME, a project
whose ``CLAUDE.md`` is the trained document, the engine persona, the settings of a night."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillopt_sleep.config import Settings, load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.testing.sessions import write_conversations

#: The engine persona: answers with npm; the optimizer proposes derived, harmful, useless edits.
PERSONA = """
name = "night-test"
models = []
default_answer = "Sure: {prompt}"

[[answers]]
match = "install.*dependenc|set ?up the project"
text = "Run `npm install` in the project root."

[[answers]]
match = "run (the )?tests"
text = "Run `npm test` to run the suite."

[[answers]]
match = "add (a )?dependency|add .* package"
text = "Run `npm install <pkg>`."

[[answers]]
match = "lint"
text = "Run `npm run lint`."

[optimizer]
order = ["derived", "harmful", "useless"]
useless_edits = ["Be helpful and precise."]
harmful_edits = ["Never mention `pnpm`."]
"""


#: More recurring requests than the demo's, so a replay has more tasks than a worker or two
#: (each asked in a Claude Code and a Codex session, and corrected to pnpm): 10 scorable
#: tasks; by occurrence, 10 train, 10 val, 1 test (only the install task is asked 3 times)
_WIDER = {
    "build the project for production": "Run `npm run build`.",
    "start the dev server": "Run `npm run dev`.",
    "run the type checker": "Run `npm run typecheck`.",
    "format the code base": "Run `npm run format`.",
    "update the outdated packages": "Run `npm update`.",
}
WIDER_CONVERSATIONS = DEMO_CONVERSATIONS + [
    (agent, [(ask, answer, "no, use pnpm instead of npm")])
    for ask, answer in _WIDER.items()
    for agent in ("claude_code", "codex")
]
WIDER_PERSONA = PERSONA + "".join(
    f'\n[[answers]]\nmatch = "{ask}"\ntext = "{answer}"\n' for ask, answer in _WIDER.items()
)


#: the demo's requests in a second project, corrected to yarn there
YARN_CONVERSATIONS = [
    (agent, [(ask, answer, fix.replace("pnpm", "yarn") if fix else None) for ask, answer, fix in t])
    for agent, t in DEMO_CONVERSATIONS
]


def night_world(
    tmp_path: Path,
    home: Path,
    user_text: bytes | str,
    conversations: list[tuple[str, list[tuple[str, str, str | None]]]] = DEMO_CONVERSATIONS,
    *,
    name: str = "webapp",
) -> tuple[Path, Path]:
    """Write ``conversations`` as sessions of ``tmp_path/name`` under ``home`` and the
    project's ``CLAUDE.md`` (``user_text``); returns (project, CLAUDE.md)."""
    project = tmp_path / name
    project.mkdir()
    write_conversations(home, project, conversations)
    target = project / "CLAUDE.md"
    if isinstance(user_text, bytes):
        target.write_bytes(user_text)
    else:
        target.write_text(user_text, encoding="utf-8")
    return project, target


def write_persona(tmp_path: Path, text: str = PERSONA) -> Path:
    persona = tmp_path / "persona.toml"
    persona.write_text(text, encoding="utf-8")
    return persona


def night_settings(
    home: Path, project: Path, document: Path, url: str = "http://127.0.0.1:9", **extra: Any
) -> Settings:
    """The demo's settings against ``url``, training the file ``document`` with an edit budget
    of 3; ``extra`` overrides any key (``target``, ``optimizer`` …)."""
    overrides = demo_settings(home, project, url)
    overrides["document"] = {"kind": "path", "path": str(document)}
    overrides["edit_budget"] = 3
    overrides.update(extra)
    return load_settings(Path("/nonexistent/config.toml"), **overrides)


def api_backend(url: str, workers: int = 1) -> dict[str, Any]:
    """The ``openai_compatible`` backend against the simulator at ``url`` with ``workers``."""
    return {
        "name": "openai_compatible",
        "base_url": url + "/v1",
        "model": "sim-demo",
        "api_key": "sk-sim",
        "max_retries": 0,
        "timeout": 30,
        "workers": workers,
    }


#: A prompt-sensitive target (``fickle`` answers: the simulator picks an answer by a hash of
#: the document, the prompt and the sample index): twelve requests, each answered with npm
#: three times in four and with pnpm once, whatever the rules say until a rule replaces npm.
#: Each is asked three times in other words and corrected to pnpm: 12 train, 12 val and 12
#: test occurrences.
NOISY_TASKS = {
    "build the project for production": "npm run build",
    "lint the source files": "npm run lint",
    "format the code base": "npm run format",
    "run the type checker": "npm run typecheck",
    "start the dev server": "npm run dev",
    "generate the api docs": "npm run docs",
    "bump the release version": "npm version patch",
    "audit the dependencies for vulnerabilities": "npm audit",
    "clean the build output": "npm run clean",
    "seed the local database": "npm run seed",
    "regenerate the graphql types": "npm run codegen",
    "publish the package to the registry": "npm publish",
}
NOISY_CONVERSATIONS: list[tuple[str, list[tuple[str, str, str | None]]]] = [
    (agent, [(ask.format(task), f"Run `{command}`.", fix)])
    for task, command in NOISY_TASKS.items()
    for agent, ask, fix in (
        ("claude_code", "{}", "no, use pnpm instead of npm"),
        ("codex", "please {} for me", "use pnpm instead of npm"),
        ("claude_code", "could you {} now?", "no, use pnpm instead of npm"),
    )
]


def noisy_persona(order: list[str], useless: tuple[str, ...] = ()) -> str:
    """The :data:`NOISY_CONVERSATIONS` target; the optimizer proposes ``order``'s groups
    (``useless``: its vacuous edits)."""
    answers = "".join(
        f'\n[[answers]]\nmatch = "{task}"\ntext = "Run `{command}`."\n'
        f'fickle = ["Run `{command}`.", "Run `{command}`.", '
        f'"Run `{command.replace("npm", "pnpm")}`."]\n'
        for task, command in NOISY_TASKS.items()
    )
    return (
        'name = "noisy"\nmodels = []\ndefault_answer = "Sure: {prompt}"\n'
        + answers
        + f"\n[optimizer]\norder = {json.dumps(order)}\n"
        + f"useless_edits = {json.dumps(list(useless))}\n"
        + 'harmful_edits = ["Never mention `pnpm`."]\n'
    )


#: Settings for the nights through slow targets (real agent CLIs, the real model) whose point
#: is delivery or learning, not the collateral gate: without it a night makes up to 12 fewer
#: replays per edit the val gate accepts. The gate itself is tested in-process
#: (tests/night/test_rule_scope.py) and through the real claude and codex CLIs
#: (tests/night/test_scope_real_clis.py, tests/night/test_night_real_clis.py).
NO_COLLATERAL: dict[str, Any] = {"collateral_tasks": 0, "collateral_probes": False}
