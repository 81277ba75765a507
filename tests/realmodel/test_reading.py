"""Reading by meaning with the real 1.5B model (docs/realmodel.md): the prompts of
mining/meaning.py (``SKILLOPT-READ``, ``SKILLOPT-GROUP``) through the project's own HTTP
backend, as a night's optimizer sends them. What a model this small reads right is asserted;
each case prints what it read, so a run shows the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.backends.openai_compatible import OpenAICompatibleBackend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.models import CompletionRequest
from skillopt_sleep.night import prompts
from skillopt_sleep.store import Store

pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel")]


def _ask(url: str) -> Any:
    backend = OpenAICompatibleBackend(
        BackendConfig(
            name="openai_compatible",
            base_url=url + "/v1",
            model="qwen2.5-coder-1.5b",
            api_key="sk-local-model",
            timeout=600,
        )
    )

    def ask(kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        prompt = prompts.read_prompt(shown) if kind == "read" else prompts.group_prompt(shown)
        comp = backend.complete(CompletionRequest(prompt=prompt, purpose=kind, max_tokens=400))
        return prompts.extract_json(comp.text, backend="real")

    return ask


def test_the_real_model_reads_corrections_in_other_languages(real_model: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "t.db")
    reader = Reader(store, _ask(real_model))
    cases = {
        "german": (
            "install the dependencies",
            "Run `npm install` in the project root.",
            "Nein, verwende `pnpm` statt `npm`.",
        ),
        "spanish": (
            "write a commit message for the retry change",
            "Added a retry mechanism to the fetch client so that transient failures are retried",
            "No, demasiado largo: máximo 50 caracteres.",
        ),
        "new request": (
            "explain parse_date",
            "It parses ISO dates and returns a date.",
            "Jetzt schreib bitte eine Funktion slugify in utils.py",
        ),
    }
    read = {name: reader.read(*case) for name, case in cases.items()}
    for name, r in read.items():
        print(name, r)
    german, spanish = read["german"], read["spanish"]
    assert german is not None and german.label == "correction"
    assert ("contains", "pnpm") in {(c.kind, c.value) for c in german.checks}
    assert spanish is not None and spanish.label == "correction"
    assert read["new request"] is not None and read["new request"].label != "correction"
    # read once: the store answers the second time, with no call
    again = Reader(store, None)
    assert again.read(*cases["german"]) == german and again.calls == 0
    store.close()
