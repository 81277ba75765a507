"""The ``openclaw`` exec backend through the real CLI (openclaw 2026.9.6 on Node 24.22.3,
``clis/node24``) against the simulator on loopback: the placed memory file reaches the model
where OpenClaw loads the user's workspace ``AGENTS.md``, the replay leaves nothing in the
user's OpenClaw state folder, and a wrong key, an unknown model and a dead endpoint fail
loudly naming the agent. Each real turn takes 10-20 s: three turns in all."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from skillopt_sleep import agents
from skillopt_sleep.backends import Backend, get_backend, openclaw
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendAuthError, BackendModelError, BackendUnreachable
from skillopt_sleep.models import CompletionRequest, Placement
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from tests.helpers.clis import agent_binary, cli_env
from tests.helpers.net import closed_port

pytestmark = pytest.mark.cli

KEY = "sk-sim-openclaw-0123456789"
PERSONA = persona_from_dict(
    {
        "name": "openclaw-backend",
        "models": ["sim-demo"],
        "default_answer": "Sure: {prompt}",
        "answers": [{"match": "install.*dependenc", "text": "Run `npm install`."}],
    }
)
RULE = "Use `pnpm` instead of `npm`."


def _backend(url: str, **extra: object) -> Backend:
    config = {
        "name": "openclaw",
        "executable": agent_binary("openclaw"),
        "base_url": url,
        "model": "sim-demo",
        "api_key": KEY,
        "max_retries": 0,
        "timeout": 120,
        **extra,
    }
    return get_backend(BackendConfig(**config))  # type: ignore[arg-type]


def test_the_placed_workspace_agents_md_reaches_the_model_and_nothing_reaches_the_user(
    isolated_home: Path,
) -> None:
    state = agents.get_agent("openclaw").home()
    placement = Placement(
        agent="openclaw",
        scope="user",
        path=agents.get_agent("openclaw").user_memory[0],
        mode="memory",
        text=f"# Rules\n\n- {RULE}\n",
    )
    with serve(PERSONA, api_key=KEY, full_log=True) as sim:
        completion = _backend(sim.url + "/v1").complete(
            CompletionRequest(prompt="how do I install the dependencies?", placement=placement)
        )
        requests = [r for r in sim.stats.requests if r.get("role") == "target"]
    bodies = [r["body"] for r in requests]
    assert completion.text == "Run `pnpm install`."
    assert completion.usage.input_tokens > 1000 and completion.usage.output_tokens > 0
    assert bodies
    for body in bodies:
        system = body["messages"][0]
        assert system["role"] == "system"
        # OpenClaw's framing of a workspace file: "## <absolute path>" then its text
        framed = re.compile(r"^## /\S+/AGENTS\.md\n# Rules\n\n- " + re.escape(RULE), re.M)
        assert framed.search(system["content"]), "the rule is not framed as a workspace file"
        assert all(RULE not in json.dumps(m) for m in body["messages"][1:])
    # the user's prompt is the prompt (OpenClaw's injected context block is not)
    assert {r["prompt"] for r in requests} == {"how do I install the dependencies?"}
    assert not state.exists() or not any(state.rglob("*.sqlite")), list(state.rglob("*"))


@pytest.mark.parametrize("case", ["wrong_key", "unknown_model"])
def test_a_rejected_call_fails_loudly_naming_the_agent(case: str, isolated_home: Path) -> None:
    with serve(PERSONA, api_key=KEY) as sim:
        if case == "wrong_key":
            backend = _backend(sim.url + "/v1", api_key="sk-sim-wrong-9876543210")
            expected: type[Exception] = BackendAuthError
        else:
            backend = _backend(sim.url + "/v1", model="no-such-model")
            expected = BackendModelError
        with pytest.raises(expected) as info:
            backend.complete(CompletionRequest(prompt="hello"))
    message = str(info.value)
    assert message.startswith("openclaw: ") and "\n" not in message, message
    assert KEY not in message and "9876543210" not in message


def test_a_dead_endpoint_fails_before_any_turn_naming_the_agent(isolated_home: Path) -> None:
    backend = _backend(f"http://127.0.0.1:{closed_port()}/v1")
    with pytest.raises(BackendUnreachable) as info:
        backend.complete(CompletionRequest(prompt="hello"))
    assert str(info.value).startswith("openclaw: cannot reach http://127.0.0.1:")


def test_every_flag_the_backend_passes_is_listed_by_the_pinned_cli(
    tmp_path: Path, isolated_home: Path
) -> None:
    used: set[str] = set()
    for base_url in (None, "http://127.0.0.1:9"):
        b = get_backend(BackendConfig(name="openclaw", model="m", base_url=base_url, api_key="k"))
        for req in (CompletionRequest(system="S", prompt="P"), CompletionRequest(prompt="P")):
            setup = b.build(req, "exe", tmp_path, tmp_path)  # type: ignore[attr-defined]
            assert setup.argv[1:3] == ["agent", "exec"]
            used |= {a for a in setup.argv[3:] if a.startswith("-") and a != "-"}
    assert used <= set(openclaw.FLAGS), used - set(openclaw.FLAGS)
    proc = subprocess.run(
        [agent_binary("openclaw"), "agent", "exec", "--help"],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    listed = proc.stdout + proc.stderr
    missing = [f for f in openclaw.FLAGS if not re.search(rf"(^|\s){f}\b", listed, re.M)]
    assert not missing, f"`openclaw agent exec --help` does not list {missing}"


def test_a_placed_managed_skill_is_listed_from_the_sandbox_state_and_loaded(
    isolated_home: Path,
) -> None:
    """The registry's skills folder (``<state>/skills``, from OpenClaw's docs) is where the
    real CLI finds a managed skill: it lists it in ``<available_skills>`` and the model loads
    it by reading that file; the user's state folder is left alone."""
    name = "skillopt-sleep-learned"
    skills = agents.get_agent("openclaw").skills_dir()
    assert skills is not None
    placement = Placement(
        agent="openclaw",
        scope="user",
        path=f"{skills.name}/{name}/SKILL.md",
        mode="skill",
        text=f"---\nname: {name}\ndescription: How to install the dependencies of this "
        f"project.\n---\n\n- {RULE}\n",
    )
    with serve(PERSONA, api_key=KEY, full_log=True) as sim:
        completion = _backend(sim.url + "/v1").complete(
            CompletionRequest(prompt="how do I install the dependencies?", placement=placement)
        )
        requests = [r for r in sim.stats.requests if r.get("role") == "target"]
    assert requests and all(name in r.get("skills", []) for r in requests)
    assert name in requests[-1].get("skills_loaded", [])
    listing = re.search(
        rf"<name>{name}</name>\s*<description>[^<]*</description>\s*<location>([^<]+)</location>",
        requests[0]["body"]["messages"][0]["content"],
    )
    assert listing and listing.group(1).endswith(f"/openclaw-state/skills/{name}/SKILL.md")
    assert completion.text == "Run `pnpm install`."
    assert not skills.exists()
