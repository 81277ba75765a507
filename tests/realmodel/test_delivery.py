"""Delivery and compliance with a real model: a night stages the user's rule for the project's
``CLAUDE.md``, ``adopt`` places it, and the real Claude Code CLI (pinned, in the project
folder) answers the user's recurring request through the real 1.5B model
(docs/realmodel.md) following it — and without the rule it does not. Claude Code sends its own
~6k-token system prompt and its default temperature; the model server keeps that prompt
evaluated between turns, so only the first turn pays for it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt, rollback
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.clis import agent_binary, cli_env, run_cli
from tests.helpers.night import night_settings, night_world, write_persona

# a group of its own: under xdist another worker runs it, with a model server of its own,
# beside the other real-model tests (two servers of 1 thread each on the two cores)
pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel-cli"), pytest.mark.slow]

#: answers asked with the rule and without it (each a whole ``claude -p`` turn)
K = 5
ASK = "how do I install the dependencies? answer with one command."
RULE = "Use `pnpm` instead of `npm`."


def _claude(url: str, project: Path, sample: int) -> str:
    """``claude -p ASK`` in ``project`` through the real model: what it answered. ``sample``
    goes to the server as ``x-skillopt-sample`` (Claude Code sends the headers of
    ``ANTHROPIC_CUSTOM_HEADERS``): the seed of the model's sampling, so the K answers are K
    samples, each reproducible, and not one answer K times."""
    out = run_cli(
        [agent_binary("claude"), "-p", ASK, "--output-format", "json"],
        project,
        cli_env(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="sk-local-model",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            ANTHROPIC_CUSTOM_HEADERS=f"x-skillopt-sample: {sample}",
        ),
        timeout=900,
    ).stdout
    return str(json.loads(out)["result"])


def _uses_pnpm(answer: str) -> bool:
    return "pnpm" in answer.lower()


@pytest.mark.timeout(1500)
def test_the_adopted_rule_reaches_the_real_cli_and_the_real_model_follows_it(
    real_model: str, tmp_path: Path, isolated_home: Path
) -> None:
    project, target = night_world(tmp_path, isolated_home, "# Project rules\n")
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    assert result.proposal_id, result.summary
    started = time.monotonic()
    without = [_claude(real_model, project, k) for k in range(K)]
    adopt(store, result.proposal_id)
    assert RULE in target.read_text(encoding="utf-8")
    with_rule = [_claude(real_model, project, k) for k in range(K)]
    rollback(store, result.proposal_id)
    assert RULE not in target.read_text(encoding="utf-8")
    after_rollback = _claude(real_model, project, 0)
    store.close()
    print(
        f"delivery: {sum(map(_uses_pnpm, with_rule))}/{K} with the rule, "
        f"{sum(map(_uses_pnpm, without))}/{K} without, {time.monotonic() - started:.0f} s"
    )
    assert all(map(_uses_pnpm, with_rule)), with_rule
    assert not any(map(_uses_pnpm, without)), without
    assert not _uses_pnpm(after_rollback), after_rollback
