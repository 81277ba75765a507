"""Whole nights with OpenClaw (``openclaw agent exec``, openclaw 2026.9.6 on Node 24.22.3 from
``clis/node24``) as the target backend against the simulator on loopback. The optimizer is the
HTTP ``openai_compatible`` backend: each real OpenClaw turn takes 10-20 s, so only the target
goes through the CLI. A dead endpoint fails the night loudly, naming the agent, with nothing
staged."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.errors import BackendError, BackendUnreachable
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from tests.helpers.clis import agent_binary
from tests.helpers.net import closed_port
from tests.helpers.night import PERSONA as ENGINE_PERSONA
from tests.helpers.night import api_backend, night_settings, night_world
from tests.helpers.store import db_get, db_rows

pytestmark = pytest.mark.cli

PERSONA = ENGINE_PERSONA.replace(
    'name = "night-test"\nmodels = []', 'name = "night-openclaw"\nmodels = ["sim-demo"]'
)
SIM_KEY = "sk-sim-openclaw-night-0123456789"
USER_TEXT = "# Project rules\n\nWritten by hand.\n"


def openclaw_target(url: str) -> dict[str, object]:
    return {
        "name": "openclaw",
        "executable": agent_binary("openclaw"),
        "base_url": url,
        "model": "sim-demo",
        "api_key": SIM_KEY,
        "max_retries": 0,
        "timeout": 120,
        "workers": 2,
    }


def test_night_target_openclaw(tmp_path: Path, isolated_home: Path) -> None:
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    store = Store(paths.db_path())
    with serve(persona_from_dict(tomllib.loads(PERSONA)), api_key=SIM_KEY) as sim:
        optimizer = {**api_backend(sim.url), "api_key": SIM_KEY}
        settings = night_settings(
            isolated_home,
            project,
            target,
            target=openclaw_target(sim.url + "/v1"),
            optimizer=optimizer,
            # two edits are all this test needs, the derived pnpm rule and the harmful one
            # (the persona's order): a third would be one more gate of OpenClaw replays
            edit_budget=2,
            # a quiet target's noise probe is one more val replay through OpenClaw (10-20 s a
            # turn); the probe through real CLIs is in test_night_real_clis.py
            gate_samples=1,
        )
        result = run_night(store, settings)
        assert result.status == "succeeded", (result.summary, result.error)
        assert sim.stats.by_role["target"] > 0
    edits = {e["text"]: e for e in db_rows(store, "edits", "night_id = ?", [result.night_id])}
    assert edits["Use `pnpm` instead of `npm`."]["status"] == "applied"
    assert edits["Never mention `pnpm`."]["status"] == "rejected"
    assert result.val_after is not None and result.val_before is not None
    assert result.val_after > result.val_before
    assert target.read_text(encoding="utf-8") == USER_TEXT  # staged, not written
    prop = db_get(store, "proposals", result.proposal_id)
    assert "+- Use `pnpm` instead of `npm`." in (Path(prop["dir"]) / "diff.patch").read_text()
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    fresh = [r for r in rollouts if not r["cached"]]
    assert fresh and all(r["backend"] == "openclaw" for r in rollouts)
    assert all(r["input_tokens"] > 1000 and r["output_tokens"] > 0 for r in fresh)
    # the replays wrote nothing into the user's OpenClaw state folder: nothing to harvest
    assert not (isolated_home / ".openclaw").exists()
    harvested = store.db["sessions"].count
    harvest(store, settings)
    assert store.db["sessions"].count == harvested


def test_a_dead_openclaw_endpoint_fails_the_night_naming_the_agent(
    tmp_path: Path, isolated_home: Path
) -> None:
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    store = Store(paths.db_path())
    with serve(persona_from_dict(tomllib.loads(PERSONA)), api_key=SIM_KEY) as sim:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        settings = night_settings(
            isolated_home,
            project,
            target,
            target=openclaw_target(dead),
            optimizer={**api_backend(sim.url), "api_key": SIM_KEY},
        )
        with pytest.raises(BackendError) as info:
            run_night(store, settings)
    assert isinstance(info.value, BackendUnreachable), info.value
    message = str(info.value)
    assert message.startswith("openclaw: cannot reach ") and "\n" not in message, message
    assert SIM_KEY not in message
    night = db_rows(store, "nights", order_by="id desc", limit=1)[0]
    assert night["status"] == "failed" and night["error"] == message
    assert db_rows(store, "proposals") == []
    assert target.read_text(encoding="utf-8") == USER_TEXT
