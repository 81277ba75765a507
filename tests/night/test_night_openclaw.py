"""A night with OpenClaw (``openclaw agent exec``, openclaw 2026.9.6 on Node 24.22.3 from
``clis/node24``) as the target backend whose endpoint is dead fails loudly, naming the agent,
with nothing staged. The whole night through OpenClaw (the derived rule certified, the harmful
edit rejected, tokens from the CLI, no state left to harvest) is in
``test_openclaw_deployed.py``, from sessions the real CLI wrote to the adopted rule."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.errors import BackendError, BackendUnreachable
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.store import Store
from tests.helpers.clis import agent_binary
from tests.helpers.net import closed_port
from tests.helpers.night import PERSONA as ENGINE_PERSONA
from tests.helpers.night import api_backend, night_settings, night_world
from tests.helpers.store import db_rows

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
