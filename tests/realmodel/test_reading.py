"""Reading by meaning with the real 1.5B model (docs/realmodel.md): mining with the prompts of
mining/meaning.py (``SKILLOPT-READ``, ``SKILLOPT-GROUP``) sent through the project's own HTTP
backend, as a night's optimizer sends them, over one German-speaking user's sessions in three
agents. What the small model reads right is asserted; the readings are printed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.backends.openai_compatible import OpenAICompatibleBackend
from skillopt_sleep.config import BackendConfig, Settings
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.models import CompletionRequest
from skillopt_sleep.night import prompts
from skillopt_sleep.store import Store
from tests.helpers.store import save_turns

pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel")]

NOW = dt.datetime(2025, 6, 30, 12, 0, tzinfo=dt.UTC)
INSTALL = "Installiere die Abhängigkeiten des Projekts"
COMMIT = "Schreib eine Commit-Nachricht für die Änderung am Retry"


class RealAsk:
    """The night's ``ask`` (night/night.py, ``Night.read``) against the real model."""

    def __init__(self, url: str):
        self.backend = OpenAICompatibleBackend(
            BackendConfig(
                name="openai_compatible",
                base_url=url + "/v1",
                model="qwen2.5-coder-1.5b",
                api_key="sk-local-model",
                timeout=600,
            )
        )
        self.kinds: list[str] = []

    def __call__(self, kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        self.kinds.append(kind)
        prompt = prompts.read_prompt(shown) if kind == "read" else prompts.group_prompt(shown)
        comp = self.backend.complete(CompletionRequest(prompt=prompt, purpose=kind, max_tokens=400))
        print(kind, shown.get("follow_up") or shown.get("requests"), "->", comp.text)
        return prompts.extract_json(comp.text, backend="real")


def test_the_real_model_reads_a_german_users_corrections(real_model: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "t.db")
    sessions = [
        (
            "claude_code",
            20,
            INSTALL,
            "Führe `npm install` aus.",
            "Nein, verwende `pnpm` statt `npm`.",
            "Führe `pnpm install` aus.",
        ),
        ("codex", 21, INSTALL, "Führe `npm ci` aus.", None, None),
        (
            "claude_code",
            22,
            COMMIT,
            "Added retries to the fetch client so transient failures do not fail the sync job",
            "Zu lang: höchstens 50 Zeichen, im Imperativ.",
            "Add retries to the fetch client",
        ),
        ("copilot", 23, COMMIT, "Add retries to the fetch client", None, None),
    ]
    for i, (source, day, ask, answer, fix, accepted) in enumerate(sessions):
        turns = [("user", ask), ("assistant", answer)]
        if fix:
            turns += [("user", fix), ("assistant", accepted), ("user", "Danke, perfekt!")]
        turns += [
            ("user", "Jetzt schreib eine Funktion slugify in utils.py"),
            ("assistant", "def slugify(s): ..."),
        ]
        save_turns(store, f"s{i}", turns, source=source, project="/home/u/app", day=day)
    ask = RealAsk(real_model)
    report = mine(store, Settings(), now=NOW, reader=Reader(store, ask))
    install = [t for t in report.tasks if t.intent == INSTALL]
    commit = [t for t in report.tasks if t.intent == COMMIT]
    assert install and commit, [t.intent for t in report.tasks]
    # both German corrections were read as corrections, with the user's values as checks
    assert install[0].corrections == ["Nein, verwende `pnpm` statt `npm`."]
    assert ("contains", "pnpm") in {(c.kind, c.value) for c in install[0].checks}
    assert commit[0].corrections == ["Zu lang: höchstens 50 Zeichen, im Imperativ."]
    assert ("max_chars", "50") in {(c.kind, c.value) for c in commit[0].checks}
    # the thanks and the new request were decided by their words: the model read only the
    # two corrections (and grouped the project's requests)
    assert ask.kinds.count("read") == 2
    # whatever the small model grouped, a join stands only where the agent answered alike:
    # the new request (asked in every session) is no occurrence of either task
    for task in (*install, *commit):
        assert all("slugify" not in o.prompt for o in task.occurrences), task.occurrences
    # read once: mining again asks nothing
    calls = len(ask.kinds)
    mine(store, Settings(), now=NOW, reader=Reader(store, ask))
    assert len(ask.kinds) == calls
    store.close()
