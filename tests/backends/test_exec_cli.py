"""The exec backends against the real pinned CLIs (node_modules/.bin) and the simulator.

* every flag a backend passes exists in the installed CLI's ``--help``;
* the skill document (``system``) reaches the model, tools are exactly the task's, tool calls
  come from the structured output, usage and time from the CLI's own output;
* replays leave no session in the agent's log folders (OpenCode's database, Pi's sessions
  folder included).

In CI (env ``CI`` set) a missing CLI fails; elsewhere these tests are skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from skillopt_sleep import agents
from skillopt_sleep.backends import claude_code, codex, copilot, get_backend, opencode, pi
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import CompletionRequest, Placement
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.base import SELF_MARKER
from tests.helpers.clis import require_cli

pytestmark = [pytest.mark.cli, pytest.mark.usefixtures("cli_path")]

MODULES = {
    "claude_code": (claude_code, "claude", ["--help"]),
    "codex": (codex, "codex", ["exec", "--help"]),
    "copilot": (copilot, "copilot", ["--help"]),
    "opencode": (opencode, "opencode", ["run", "--help"]),
    "pi": (pi, "pi", ["--help"]),
}
#: (backend, CLI) of every exec backend
CLIS = [(name, binary) for name, (_module, binary, _args) in sorted(MODULES.items())]

PERSONA = persona_from_dict(
    {
        "name": "exec-cli-test",
        "default_answer": "Sure: {prompt}",
        "answers": [
            {"match": "install.*dependenc", "text": "Run `npm install` in the project root."},
            {
                "match": "list the files",
                "text": "The project files are listed above.",
                "tool": "Bash",
                "tool_input": {"command": "ls"},
            },
            {
                "match": "list files via codex",
                "text": "The project files are listed above.",
                "tool": "exec_command",
                "tool_input": {"cmd": "ls"},
            },
        ],
    }
)


def help_text(binary: str, args: list[str], home: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "NO_COLOR": "1",
        "npm_config_offline": "true",
        "PI_OFFLINE": "1",
    }
    (home / ".codex").mkdir(exist_ok=True)
    out = subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def used_flags(name: str, tmp_path: Path) -> set[str]:
    """Every flag the backend puts on a command line, for plain and tool calls, with and
    without a custom base URL."""
    flags: set[str] = set()
    for base_url in (None, "http://127.0.0.1:9"):
        b = get_backend(BackendConfig(name=name, model="m", base_url=base_url, api_key="k"))
        for req in (
            CompletionRequest(system="S", prompt="P"),
            CompletionRequest(prompt="P", tools=["Bash", "Read"]),
        ):
            setup = b.build(req, "exe", tmp_path, tmp_path)
            for arg in setup.argv[1:]:
                if arg.startswith("-") and arg != "-":
                    flags.add(arg.split("=", 1)[0])
    return flags


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_flag_exists_in_the_pinned_cli(name, tmp_path, isolated_home):
    module, binary, args = MODULES[name]
    require_cli(binary)
    used = used_flags(name, tmp_path)
    assert used <= set(module.FLAGS), f"flags used but not declared: {used - set(module.FLAGS)}"
    text = help_text(binary, args, isolated_home)
    missing = [
        f
        for f in module.FLAGS
        if not re.search(r"(^|[\s,\[])" + re.escape(f) + r"([\s,=<\[]|$)", text, re.M)
    ]
    assert not missing, f"`{binary} {' '.join(args)}` does not list {missing}"


def config(name: str, url: str, **extra) -> BackendConfig:
    base = url if name == "claude_code" else url + "/v1"
    return BackendConfig(
        name=name,
        base_url=base,
        model="sim-demo",
        api_key="sk-sim-test-key",
        max_retries=0,
        timeout=60,
        **extra,
    )


def agent_logs(home: Path) -> list[Path]:
    roots = [
        home / ".claude" / "projects",
        home / ".codex" / "sessions",
        home / ".copilot" / "session-state",
        home / ".local" / "share" / "opencode",
        home / ".pi" / "agent" / "sessions",
    ]
    return [p for r in roots if r.exists() for p in r.rglob("*")]


@pytest.mark.parametrize("name,binary", CLIS)
def test_a_replay_through_the_real_cli(name, binary, isolated_home):
    require_cli(binary)
    with serve(PERSONA, api_key="sk-sim-test-key") as sim:
        b = get_backend(config(name, sim.url))
        # the skill document reaches the model: the simulator applies its rule
        plain = b.complete(
            CompletionRequest(
                system="# Learned\n- Use `pnpm` instead of `npm`.",
                prompt="how do I install the dependencies?",
            )
        )
        assert plain.text == "Run `pnpm install` in the project root."
        assert plain.tool_calls == []
        assert plain.usage.input_tokens > 100 and plain.usage.output_tokens > 0
        assert 0 < plain.seconds < 60
        first = sim.stats.snapshot()["requests"][0]
        assert first["prompt"].startswith("[skillopt-sleep replay]")
        offered = first["tools"]
        # a plain call is offered no tool that acts (no shell, no file writes)
        assert not {
            "Bash",
            "bash",
            "exec_command",
            "shell",
            "edit",
            "create",
            "Write",
            "Edit",
        } & set(offered), offered

        # a task that needs Bash runs with it; the call is read from the structured output
        sim.reset()
        prompt = "list files via codex" if name == "codex" else "list the files"
        tool = b.complete(CompletionRequest(prompt=prompt, tools=["Bash"]))
        assert tool.tool_calls == ["Bash"], tool
        assert tool.text == "The project files are listed above."
        asked = sim.stats.snapshot()["requests"][0]
        assert asked["tool"] in ("Bash", "bash", "exec_command")
        # never allow-all: nothing beyond the shell family is offered to a Bash task
        assert not {"edit", "create", "Write", "Edit", "apply_patch"} & set(asked["tools"])
    # first line of defence: no session was written into the agent's log folders
    assert [p for p in agent_logs(isolated_home) if p.is_file()] == []


@pytest.mark.parametrize("name,binary", CLIS)
def test_a_prompt_over_the_argument_size_limit_reaches_the_model_whole(name, binary, isolated_home):
    """Linux caps one argv string at 128 KiB; every backend passes the prompt on stdin."""
    require_cli(binary)
    filler = "a line of context the reflect prompt carries along. " * 4000  # ~200 KB
    prompt = f"how do I install the dependencies?\n{filler}\nEND-OF-PROMPT"
    assert len(prompt.encode()) > 131072
    with serve(PERSONA, api_key="sk-sim-test-key") as sim:
        got = get_backend(config(name, sim.url)).complete(CompletionRequest(prompt=prompt))
        assert got.text == "Run `npm install` in the project root."
        seen = sim.stats.snapshot()["requests"][0]
        assert seen["prompt_tail"].rstrip().endswith("END-OF-PROMPT")
        assert seen["prompt_chars"] >= len(prompt)


@pytest.mark.parametrize(
    "name,binary",
    [
        ("claude_code", "claude"),
        ("codex", "codex"),
        ("copilot", "copilot"),
        ("opencode", "opencode"),
        ("pi", "pi"),
    ],
)
def test_a_placed_replay_asks_exactly_what_the_user_asked_and_leaves_no_session(
    name, binary, isolated_home
):
    """Certified = deployed: a replay that places the document as the live agent finds it
    sends the task as the user types it (no marker: its words reach the model and, for a
    skill, decide whether it is loaded), and writes no session among the user's logs."""
    require_cli(binary)
    ask = "how do I install the dependencies?"
    agent = agents.get_agent(name)
    placement = Placement(
        agent=name,
        scope="user",
        path=agent.user_memory[0],
        mode="memory",
        text="# Learned\n- Use `pnpm` instead of `npm`.\n",
    )
    with serve(PERSONA, api_key="sk-sim-test-key", full_log=True) as sim:
        b = get_backend(config(name, sim.url))
        comp = b.complete(CompletionRequest(prompt=ask, placement=placement))
        targets = [r for r in sim.stats.requests if r.get("role") == "target"]
    assert comp.text == "Run `pnpm install` in the project root."  # the placed rule applied
    assert targets and all(SELF_MARKER not in r["prompt_full"] for r in targets)
    assert all(r["prompt_full"].rstrip().endswith(ask) for r in targets)
    assert agent_logs(isolated_home) == []  # nothing a harvester would mine as the user's
