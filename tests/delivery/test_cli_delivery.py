"""Where each pinned agent CLI puts memory files and skills in its model request (docs/agents.md).

Each test writes unique markers into the files docs/agents.md says a CLI loads, and into files
it does not load (a skill's body, another agent's memory file), runs the real CLI from
``node_modules/.bin`` once against the simulator on 127.0.0.1, and checks the full request
bodies the simulator received: the marker is at the documented place with the documented
framing, the others are absent. A CLI version that moves, re-wraps or drops these files fails
here; then docs/agents.md and the replay that copies this placement need a look.

HOME is the test's throw-away home (tests/conftest.py); no agent config of the real user is
read. A missing CLI fails under ``CI`` and is skipped otherwise (tests/helpers/clis.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.simulator import Simulator, serve
from skillopt_sleep.simulator import server as sim_server
from skillopt_sleep.simulator.persona import persona_from_dict
from tests.helpers.clis import (
    NODE_BIN,
    OPENCODE_QUIET,
    PI_QUIET,
    agent_binary,
    write_opencode_config,
    write_pi_models,
)
from tests.helpers.clis import cli_env as base_env
from tests.helpers.clis import run_cli as run

pytestmark = pytest.mark.cli

SIM_KEY = "sk-sim-delivery-0123456789"
TIMEOUT = 120
SKILL = "skillopt-sleep-learned"
ASK = "how do I run the tests?"
ASK_SKILL = "please load the learned skill"
MODEL_ROUTES = ("/messages", "/responses", "/chat/completions")


# -- full request capture -------------------------------------------------------------------


@dataclass
class Request:
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case names

    @property
    def text(self) -> str:
        """The whole body as JSON text: a marker absent here is absent from the request."""
        return json.dumps(self.body, ensure_ascii=False)


@pytest.fixture
def requests_log(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    """Every model request the simulator receives, body in full. The simulator's own
    ``Stats`` keep only the first and last 200 characters of the prompt, so the handler's body
    reader is wrapped here (test-only; the simulator itself is unchanged)."""
    log: list[Request] = []
    original = sim_server._Handler._body

    def recording(handler: sim_server._Handler) -> dict[str, Any]:
        body = original(handler)
        if handler._path() in MODEL_ROUTES:
            headers = {k.lower(): v for k, v in handler.headers.items()}
            log.append(Request(body, headers))
        return body

    monkeypatch.setattr(sim_server._Handler, "_body", recording)
    return log


@pytest.fixture
def sim(tmp_path: Path, requests_log: list[Request]) -> Iterator[Simulator]:
    """A simulator that answers ``ASK`` in one turn and answers ``ASK_SKILL`` by first calling
    the CLI's way of loading a skill: Claude Code's ``Skill``, Copilot's ``skill``, and for
    Codex (no skill tool) ``exec_command`` reading the SKILL.md path it listed."""
    codex_skill = tmp_path / "codex-home" / "skills" / SKILL / "SKILL.md"
    persona = persona_from_dict(
        {
            "name": "delivery",
            "models": [],
            "default_answer": "ok",
            "answers": [
                {"match": "run (the )?tests", "text": "Run `npm test` to run the suite."},
                {
                    "match": "load the learned skill",
                    "text": "Loaded the skill.",
                    "tool": ["Skill", "exec_command"],
                },
            ],
            "tool_inputs": {
                "Skill": {"skill": SKILL},
                "exec_command": {"cmd": f"cat {codex_skill}"},
            },
        }
    )
    with serve(persona, api_key=SIM_KEY) as running:
        yield running


# -- sandbox files --------------------------------------------------------------------------


def marker(name: str) -> str:
    return f"MARK-{name}-{uuid.uuid4().hex[:10]}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class SkillMarks:
    folder: Path
    description: str
    body: str


def write_skill(skills_dir: Path, name: str = SKILL) -> SkillMarks:
    """A skill folder as adopt writes it: SKILL.md with front matter; markers in the
    description and in the body."""
    desc, body = marker("SKILL-DESC"), marker("SKILL-BODY")
    folder = skills_dir / name
    write(
        folder / "SKILL.md",
        f"---\nname: {name}\ndescription: Learned rules {desc}.\n---\n\n# Learned rules\n\n"
        f"- {body} Use `pnpm` instead of `npm`.\n",
    )
    return SkillMarks(folder, f"Learned rules {desc}.", body)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A plain folder: no git repository, never trusted in any agent's config."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "hello.txt").write_text("hi\n")
    return work.resolve()


# -- running the CLIs -----------------------------------------------------------------------


def home() -> Path:
    return Path(os.environ["HOME"]).resolve()


def claude(sim: Simulator, cwd: Path, prompt: str, **env: str) -> dict[str, Any]:
    full = base_env(
        **{
            "ANTHROPIC_BASE_URL": sim.url,
            "ANTHROPIC_API_KEY": SIM_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **env,
        }
    )
    argv = [agent_binary("claude"), "-p", prompt, "--output-format", "json"]
    return json.loads(run(argv, cwd, full).stdout)


def codex(sim: Simulator, cwd: Path, prompt: str, **env: str) -> str:
    argv = [agent_binary("codex"), "exec", "--skip-git-repo-check", prompt]
    return run(argv, cwd, base_env(**{"SIM_API_KEY": SIM_KEY, **env})).stdout


def codex_config(sim: Simulator, auth: str = 'env_key = "SIM_API_KEY"') -> str:
    return (
        'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "Simulator"\n'
        f'base_url = "{sim.url}/v1"\nwire_api = "responses"\n{auth}\n'
    )


def copilot(sim: Simulator, cwd: Path, prompt: str, **env: str) -> str:
    full = base_env(
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=sim.url + "/v1",
        COPILOT_PROVIDER_API_KEY=SIM_KEY,
        COPILOT_MODEL="sim",
        COPILOT_AUTO_UPDATE="false",
        **env,
    )
    # no --allow-all-tools / COPILOT_ALLOW_ALL (=true also trusts the folder): files load untrusted
    return run([agent_binary("copilot"), "-p", prompt, "-s"], cwd, full).stdout


# -- request structure helpers ----------------------------------------------------------------


def parts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [p.get("text", "") for p in content or [] if isinstance(p, dict)]


def only_in(req: Request, mark: str, where: str) -> None:
    """``mark`` occurs in the request exactly once (so nowhere but the checked place)."""
    assert req.text.count(mark) == 1, f"{mark} should occur once in the request ({where})"


# == Claude Code (`claude -p`) ==============================================================

CLAUDE_MEMORY_HEADER = (
    "<system-reminder>\nCodebase and user instructions are shown below. Be sure to adhere to "
    "these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you "
    "MUST follow them exactly as written.\n\n"
)
CLAUDE_USER = "(user's private global instructions for all projects)"
CLAUDE_PROJECT = "(project instructions, checked into the codebase)"
CLAUDE_LOCAL = "(user's private project instructions, not checked in)"
CLAUDE_SKILLS = "The following skills are available for use with the Skill tool:"


def claude_memory(req: Request) -> str:
    """The memory block: the first text part of the first (user) message."""
    first = req.body["messages"][0]
    assert first["role"] == "user"
    text = parts(first)[0]
    assert text.startswith(CLAUDE_MEMORY_HEADER), text[:300]
    assert text.endswith("\n</system-reminder>")
    return text


def claude_contents(path: Path, label: str, mark: str) -> str:
    return f"Contents of {path} {label}:\n\n{mark}\n"


def claude_skill_listing(req: Request) -> str:
    found = [(m["role"], t) for m in req.body["messages"] for t in parts(m) if CLAUDE_SKILLS in t]
    assert len(found) == 1, "one skill listing expected"
    role, text = found[0]
    assert role == "system"  # a system-role entry of `messages`, not the `system` field
    return text


def test_claude_memory_files_reach_the_request_and_a_skill_only_as_a_description(
    sim: Simulator, requests_log: list[Request], project: Path
) -> None:
    user_md = home() / ".claude" / "CLAUDE.md"
    user, imported = marker("CLAUDE-USER"), marker("CLAUDE-IMPORTED")
    # an @-import line: the imported file is sent as its own block after the importer
    write(user_md, f"{user}\n@learned.md\n")
    write(home() / ".claude" / "learned.md", imported + "\n")
    proj, proj_dot, local = marker("CLAUDE-PROJ"), marker("CLAUDE-PROJDOT"), marker("LOCAL")
    rules = marker("CLAUDE-RULES")
    write(project / "CLAUDE.md", proj + "\n")
    write(project / ".claude" / "CLAUDE.md", proj_dot + "\n")
    write(project / ".claude" / "rules" / "style.md", rules + "\n")
    write(project / "CLAUDE.local.md", local + "\n")
    agents = marker("AGENTS-MD")  # Claude Code does not read AGENTS.md
    write(project / "AGENTS.md", agents + "\n")
    skill = write_skill(home() / ".claude" / "skills")

    out = claude(sim, project, ASK)
    assert out["result"] == "Run `npm test` to run the suite."

    assert len(requests_log) == 1
    req = requests_log[0]
    memory = claude_memory(req)
    # user-level first, then project files in this order, each as "Contents of PATH (label):"
    expected = [
        claude_contents(user_md, CLAUDE_USER, user) + "@learned.md\n",
        claude_contents(home() / ".claude" / "learned.md", CLAUDE_USER, imported),
        claude_contents(project / "CLAUDE.md", CLAUDE_PROJECT, proj),
        claude_contents(project / ".claude" / "CLAUDE.md", CLAUDE_PROJECT, proj_dot),
        claude_contents(project / ".claude" / "rules" / "style.md", CLAUDE_PROJECT, rules),
        claude_contents(project / "CLAUDE.local.md", CLAUDE_LOCAL, local),
    ]
    positions = [memory.find(block) for block in expected]
    assert -1 not in positions, memory
    assert positions == sorted(positions)
    for mark in (user, imported, proj, proj_dot, rules, local):
        only_in(req, mark, "memory block")
    assert user not in json.dumps(req.body["system"])
    assert parts(req.body["messages"][0])[-1] == ASK
    # AGENTS.md is not Claude Code's file
    assert agents not in req.text
    # the skill: name + description in the listing, never the body
    listing = claude_skill_listing(req)
    assert f"- {SKILL}: {skill.description}" in listing
    assert skill.body not in req.text
    assert "Skill" in [t["name"] for t in req.body["tools"]]


def test_claude_skill_body_is_sent_only_after_the_skill_tool_call(
    sim: Simulator, requests_log: list[Request], project: Path
) -> None:
    user = marker("CLAUDE-USER")
    write(home() / ".claude" / "CLAUDE.md", user + "\n")
    skill = write_skill(home() / ".claude" / "skills")

    claude(sim, project, ASK_SKILL)

    assert len(requests_log) == 2
    first, second = requests_log
    assert skill.body not in first.text
    # the model's call, then the CLI's answer: a tool_result plus the body (front matter
    # stripped) in a text part of the same user message
    call, result = second.body["messages"][-2:]
    assert call["content"][-1]["type"] == "tool_use"
    assert call["content"][-1]["name"] == "Skill"
    assert call["content"][-1]["input"] == {"skill": SKILL}
    assert result["role"] == "user"
    assert result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["content"] == f"Launching skill: {SKILL}"
    loaded = result["content"][1]["text"]
    assert loaded.startswith(f"Base directory for this skill: {skill.folder}\n\n# Learned rules")
    assert skill.body in loaded and "description:" not in loaded
    # memory is in every request of the turn
    for req in requests_log:
        assert user in claude_memory(req)


def test_claude_config_dir_overlay_replaces_the_user_folder_and_keeps_a_login(
    sim: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    live = marker("CLAUDE-LIVE")
    write(home() / ".claude" / "CLAUDE.md", live + "\n")
    live_skill = write_skill(home() / ".claude" / "skills", "live-skill")
    overlay = tmp_path / "overlay-claude"
    candidate = marker("CLAUDE-CANDIDATE")
    write(overlay / "CLAUDE.md", candidate + "\n")
    # a subscription login is this one file on Linux (macOS keeps it in the Keychain)
    token = {
        "accessToken": SIM_KEY,
        "refreshToken": "sim-refresh",
        "expiresAt": int(time.time() * 1000) + 86_400_000,
        "scopes": ["user:inference", "user:profile"],
        "subscriptionType": "max",
    }
    write(overlay / ".credentials.json", json.dumps({"claudeAiOauth": token}))

    claude(sim, project, ASK, CLAUDE_CONFIG_DIR=str(overlay), ANTHROPIC_API_KEY="")

    (req,) = requests_log
    assert req.headers.get("authorization") == f"Bearer {SIM_KEY}"
    assert "x-api-key" not in req.headers
    memory = claude_memory(req)
    assert claude_contents(overlay / "CLAUDE.md", CLAUDE_USER, candidate) in memory
    assert live not in req.text
    assert live_skill.description not in req.text
    # the run's state (.claude.json, transcripts) went to the overlay, not to the live home
    assert (overlay / ".claude.json").exists()
    assert (overlay / "projects").is_dir()
    assert not (home() / ".claude.json").exists()
    assert sorted(p.name for p in (home() / ".claude").iterdir()) == ["CLAUDE.md", "skills"]


# == Codex (`codex exec`) ===================================================================


def codex_agents_block(req: Request) -> str:
    """The AGENTS.md block: the first content part of the first user-role input item."""
    assert not req.body.get("instructions")
    users = [i for i in req.body["input"] if i.get("type") == "message" and i.get("role") == "user"]
    assert users[-1]["content"][0]["text"] != users[0]["content"][0]["text"]
    return users[0]["content"][0]["text"]


def codex_developer_text(req: Request) -> str:
    dev = [
        t
        for i in req.body["input"]
        if i.get("type") == "message" and i.get("role") == "developer"
        for t in parts(i)
    ]
    return "\n".join(dev)


def test_codex_agents_md_files_reach_the_request_and_a_skill_only_as_a_description(
    sim: Simulator, requests_log: list[Request], project: Path
) -> None:
    codex_home = home() / ".codex"  # the default: CODEX_HOME is not set
    write(codex_home / "config.toml", codex_config(sim))
    user, proj = marker("CODEX-USER"), marker("CODEX-PROJ")
    write(codex_home / "AGENTS.md", user + "\n")
    write(project / "AGENTS.md", proj + "\n")
    claude_md = marker("CLAUDE-MD")  # Codex does not read CLAUDE.md
    write(project / "CLAUDE.md", claude_md + "\n")
    skill = write_skill(codex_home / "skills")

    out = codex(sim, project, ASK)
    assert out.strip() == "Run `npm test` to run the suite."

    assert len(requests_log) == 1
    req = requests_log[0]
    block = codex_agents_block(req)
    assert block == (
        f"# AGENTS.md instructions for {project}\n\n<INSTRUCTIONS>\n{user}\n\n"
        f"--- project-doc ---\n\n{proj}\n\n</INSTRUCTIONS>"
    )
    only_in(req, user, "AGENTS.md block")
    only_in(req, proj, "AGENTS.md block")
    assert claude_md not in req.text
    # the skill: listed in a developer message (name, description, file), body not sent
    dev = codex_developer_text(req)
    assert "<skills_instructions>" in dev
    assert f"= `{codex_home / 'skills'}`" in dev
    assert f"- {SKILL}: {skill.description} (file: r" in dev
    assert skill.body not in req.text
    tools = [t.get("name") or t.get("type") for t in req.body["tools"]]
    assert "exec_command" in tools
    assert not [t for t in tools if "skill" in t.lower()]  # no skill-loading tool


def test_codex_skill_body_is_sent_only_when_the_model_reads_the_file(
    sim: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex-home"  # CODEX_HOME honoured; the persona cats this path
    write(codex_home / "config.toml", codex_config(sim))
    user = marker("CODEX-USER")
    write(codex_home / "AGENTS.md", user + "\n")
    skill = write_skill(codex_home / "skills")

    codex(sim, project, ASK_SKILL, CODEX_HOME=str(codex_home))

    assert len(requests_log) == 2
    first, second = requests_log
    assert skill.body not in first.text
    call, output = second.body["input"][-2:]
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    assert output["type"] == "function_call_output"
    assert skill.body in output["output"] and "description:" in output["output"]  # raw file
    for req in requests_log:
        assert user in codex_agents_block(req)


def test_codex_override_file_replaces_agents_md_and_the_git_root_down_to_cwd_is_read(
    sim: Simulator, requests_log: list[Request], tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex-home"
    write(codex_home / "config.toml", codex_config(sim))
    hidden, override = marker("CODEX-USER"), marker("CODEX-USER-OVERRIDE")
    write(codex_home / "AGENTS.md", hidden + "\n")
    write(codex_home / "AGENTS.override.md", override + "\n")
    repo = (tmp_path / "repo").resolve()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    above = marker("CODEX-ABOVE-GIT-ROOT")
    write(tmp_path / "AGENTS.md", above + "\n")
    root, sub = marker("CODEX-GIT-ROOT"), marker("CODEX-SUBDIR")
    write(repo / "AGENTS.md", root + "\n")
    write(repo / "pkg" / "AGENTS.md", sub + "\n")

    codex(sim, repo / "pkg", ASK, CODEX_HOME=str(codex_home))

    (req,) = requests_log
    assert codex_agents_block(req) == (
        f"# AGENTS.md instructions for {repo / 'pkg'}\n\n<INSTRUCTIONS>\n{override}\n\n"
        f"--- project-doc ---\n\n{root}\n\n\n{sub}\n\n</INSTRUCTIONS>"
    )
    assert hidden not in req.text
    assert above not in req.text


def test_codex_home_overlay_replaces_the_user_folder_and_keeps_a_login(
    sim: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    live_home = home() / ".codex"
    live = marker("CODEX-LIVE")
    write(live_home / "AGENTS.md", live + "\n")
    live_skill = write_skill(live_home / "skills", "live-skill")
    overlay = tmp_path / "overlay-codex"
    candidate = marker("CODEX-CANDIDATE")
    write(overlay / "AGENTS.md", candidate + "\n")
    # the login: auth.json, used by a provider with requires_openai_auth (as the built-in
    # OpenAI provider is); no key in the environment
    write(overlay / "config.toml", codex_config(sim, "requires_openai_auth = true"))
    auth = {"auth_mode": "apikey", "OPENAI_API_KEY": SIM_KEY, "tokens": None}
    write(overlay / "auth.json", json.dumps(auth))

    codex(sim, project, ASK, CODEX_HOME=str(overlay), SIM_API_KEY="")

    (req,) = requests_log
    assert req.headers.get("authorization") == f"Bearer {SIM_KEY}"
    # user-level file only: no "for <cwd>" in the heading, one newline before the end tag
    assert codex_agents_block(req) == (
        f"# AGENTS.md instructions\n\n<INSTRUCTIONS>\n{candidate}\n</INSTRUCTIONS>"
    )
    assert live not in req.text
    assert live_skill.description not in req.text
    assert (overlay / "sessions").is_dir()
    assert sorted(p.name for p in live_home.iterdir()) == ["AGENTS.md", "skills"]


# == GitHub Copilot CLI (`copilot -p`) ======================================================


def copilot_system(req: Request) -> str:
    first = req.body["messages"][0]
    assert first["role"] == "system" and isinstance(first["content"], str)
    return first["content"]


def custom_instruction(mark: str) -> str:
    return f"<custom_instruction>\n{mark}\n\n</custom_instruction>"


def copilot_skill_entry(name: str, description: str, location: str) -> str:
    return (
        f"<skill>\n  <name>{name}</name>\n  <description>{description}</description>\n"
        f"  <location>{location}</location>\n</skill>"
    )


def test_copilot_instruction_files_reach_the_request_and_a_skill_only_as_a_description(
    sim: Simulator, requests_log: list[Request], project: Path
) -> None:
    copilot_home = home() / ".copilot"  # the default: COPILOT_HOME is not set
    user, gh, agents, claude_md = (
        marker(n) for n in ("COPILOT-USER", "COPILOT-GH", "COPILOT-AGENTS", "COPILOT-CLAUDE")
    )
    instr = marker("COPILOT-INSTR")
    write(copilot_home / "copilot-instructions.md", user + "\n")
    write(project / ".github" / "copilot-instructions.md", gh + "\n")
    write(project / "AGENTS.md", agents + "\n")
    write(project / "CLAUDE.md", claude_md + "\n")
    write(project / ".github" / "instructions" / "style.instructions.md", instr + "\n")
    not_loaded = {
        "~/.copilot/AGENTS.md": marker("COPILOT-HOME-AGENTS"),
        "~/.claude/CLAUDE.md": marker("USER-CLAUDE"),
    }
    write(copilot_home / "AGENTS.md", not_loaded["~/.copilot/AGENTS.md"] + "\n")
    write(home() / ".claude" / "CLAUDE.md", not_loaded["~/.claude/CLAUDE.md"] + "\n")
    skill = write_skill(copilot_home / "skills")

    out = copilot(sim, project, ASK)
    assert out.strip() == "Run `npm test` to run the suite."

    assert len(requests_log) == 1
    req = requests_log[0]
    system = copilot_system(req)
    blocks = [custom_instruction(m) for m in (user, gh, agents, claude_md)]
    positions = [system.find(b) for b in blocks]
    assert -1 not in positions, system[-4000:]
    assert positions == sorted(positions)  # user-level first, then the project files
    # *.instructions.md without applyTo: raw text after the last custom_instruction block
    assert f"</custom_instruction>\n\n{instr}\n" in system
    assert system.find(instr) > positions[-1]
    for mark in (user, gh, agents, claude_md, instr):
        only_in(req, mark, "system message")
    for where, mark in not_loaded.items():
        assert mark not in req.text, f"{where} should not be loaded"
    # the skill: name + description + location in <available_skills>, body not sent
    assert copilot_skill_entry(SKILL, skill.description, "user") in system
    assert skill.body not in req.text
    assert "skill" in [t["function"]["name"] for t in req.body["tools"]]


def test_copilot_skill_body_is_sent_only_after_the_skill_tool_call(
    sim: Simulator, requests_log: list[Request], project: Path
) -> None:
    user = marker("COPILOT-USER")
    write(home() / ".copilot" / "copilot-instructions.md", user + "\n")
    skill = write_skill(home() / ".copilot" / "skills")

    copilot(sim, project, ASK_SKILL)

    assert len(requests_log) == 2
    first, second = requests_log
    assert skill.body not in first.text
    call, result, loaded = second.body["messages"][-3:]
    assert call["tool_calls"][0]["function"]["name"] == "skill"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"skill": SKILL}
    assert result["role"] == "tool"
    assert result["content"].startswith(f'Skill "{SKILL}" loaded successfully.')
    assert loaded["role"] == "user"
    assert loaded["content"].startswith(
        f'<skill-context name="{SKILL}">\nBase directory for this skill: {skill.folder}\n\n'
        "# Learned rules"
    )
    assert loaded["content"].rstrip().endswith("</skill-context>")
    assert skill.body in loaded["content"] and "description:" not in loaded["content"]
    for req in requests_log:
        assert custom_instruction(user) in copilot_system(req)


def test_copilot_home_overlay_replaces_the_user_folder(
    sim: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    live_home = home() / ".copilot"
    live = marker("COPILOT-LIVE")
    write(live_home / "copilot-instructions.md", live + "\n")
    live_skill = write_skill(live_home / "skills", "live-skill")
    overlay = tmp_path / "overlay-copilot"
    candidate = marker("COPILOT-CANDIDATE")
    write(overlay / "copilot-instructions.md", candidate + "\n")

    copilot(sim, project, ASK, COPILOT_HOME=str(overlay))

    (req,) = requests_log
    system = copilot_system(req)
    assert custom_instruction(candidate) in system
    assert live not in req.text
    assert live_skill.description not in req.text
    assert (overlay / "session-state").is_dir()
    assert sorted(p.name for p in live_home.iterdir()) == ["copilot-instructions.md", "skills"]


# == OpenCode (`opencode run`) and Pi (`pi -p`) =============================================
# Both talk OpenAI Chat Completions to the simulator; both load skills by a tool call the
# model makes (OpenCode's `skill` tool with {"name": …}, Pi's `read` of the listed SKILL.md),
# so they get a persona of their own that makes exactly those calls.


@pytest.fixture
def sim_oc_pi(tmp_path: Path, requests_log: list[Request]) -> Iterator[Simulator]:
    """Answers ``ASK``; answers ``ASK_SKILL`` by calling OpenCode's ``skill`` tool or Pi's
    ``read`` on the SKILL.md path the test writes under HOME."""
    pi_skill = home() / ".pi" / "agent" / "skills" / SKILL / "SKILL.md"
    persona = persona_from_dict(
        {
            "name": "delivery-oc-pi",
            "models": [],
            "default_answer": "ok",
            "answers": [
                {"match": "run (the )?tests", "text": "Run `npm test` to run the suite."},
                {
                    "match": "load the learned skill",
                    "text": "Loaded the skill.",
                    "tool": ["skill", "read"],
                },
            ],
            "tool_inputs": {"skill": {"name": SKILL}, "read": {"path": str(pi_skill)}},
        }
    )
    with serve(persona, api_key=SIM_KEY) as running:
        yield running


def model_requests(log: list[Request]) -> list[Request]:
    """The requests of the agent's own turn (OpenCode also asks, without tools, for a title)."""
    return [r for r in log if r.body.get("tools")]


def chat_system(req: Request) -> str:
    first = req.body["messages"][0]
    assert first["role"] == "system" and isinstance(first["content"], str)
    return first["content"]


def listed_skill(name: str, description: str, location: Path) -> str:
    """One entry of the ``<available_skills>`` block both CLIs send."""
    return (
        f"  <skill>\n    <name>{name}</name>\n    <description>{description}</description>\n"
        f"    <location>{location}</location>\n  </skill>"
    )


def framed(agent: str, path: Path, text: str) -> str:
    """A memory file as the registry says ``agent`` frames it (agents.py memory_framing)."""
    from skillopt_sleep.agents import get_agent

    framing = get_agent(agent).memory_framing
    assert framing is not None and framing[0] == "system"
    return framing[1].format(path=path, label="user", text=text)


#: OpenCode's skill tool lists the skill's folder with ripgrep: ``rg`` on PATH, else it
#: downloads one from GitHub. The pinned codex package ships an ``rg``; the tests use that.
RIPGREP_DIRS = sorted(
    (NODE_BIN.parent / "@openai").glob("codex-linux-*/vendor/*/codex-path"), reverse=True
)


def opencode(cwd: Path, prompt: str, **env: str) -> str:
    """``opencode run`` with the prompt one word per argument (it quotes an argument with a
    space) and ``$PWD`` = ``cwd`` (OpenCode takes its directory from ``$PWD``)."""
    rg = [str(d) for d in RIPGREP_DIRS if (d / "rg").is_file()][:1]
    path = os.pathsep.join([*rg, os.environ.get("PATH", "")])
    full = base_env(SIM_API_KEY=SIM_KEY, PWD=str(cwd), PATH=path, **OPENCODE_QUIET, **env)
    return run([agent_binary("opencode"), "run", *prompt.split()], cwd, full).stdout


def pi(cwd: Path, prompt: str, **env: str) -> str:
    full = base_env(SIM_API_KEY=SIM_KEY, **PI_QUIET, **env)
    argv = [agent_binary("pi"), "--provider", "sim", "--model", "sim", "-p", prompt]
    return run(argv, cwd, full).stdout


def test_opencode_agents_md_files_reach_the_request_and_a_skill_only_as_a_description(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path
) -> None:
    write_opencode_config(home(), sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    config = home() / ".config" / "opencode"
    user, proj = marker("OPENCODE-USER"), marker("OPENCODE-PROJ")
    write(config / "AGENTS.md", user + "\n")
    write(project / "AGENTS.md", proj + "\n")
    claude_md = marker("OPENCODE-CLAUDE")  # a project CLAUDE.md next to AGENTS.md is not read
    write(project / "CLAUDE.md", claude_md + "\n")
    skill = write_skill(config / "skills")

    assert opencode(project, ASK).strip() == "Run `npm test` to run the suite."

    (req,) = model_requests(requests_log)
    system = chat_system(req)
    # appended to the system prompt, user file first, each as "Instructions from: PATH"
    both = (
        f"Instructions from: {config / 'AGENTS.md'}\n{user}\n\n"
        f"Instructions from: {project / 'AGENTS.md'}\n{proj}\n"
    )
    assert both in system
    assert framed("opencode", config / "AGENTS.md", user + "\n") in system
    for mark in (user, proj):
        only_in(req, mark, "system message")
    assert claude_md not in req.text
    assert req.body["messages"][-1] == {"role": "user", "content": ASK}
    # the skill: name, description and SKILL.md path in <available_skills>, body not sent
    assert listed_skill(SKILL, skill.description, skill.folder / "SKILL.md") in system
    assert skill.body not in req.text
    assert "skill" in [t["function"]["name"] for t in req.body["tools"]]


def test_opencode_skill_body_is_sent_only_after_the_skill_tool_call(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path
) -> None:
    write_opencode_config(home(), sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    config = home() / ".config" / "opencode"
    user = marker("OPENCODE-USER")
    write(config / "AGENTS.md", user + "\n")
    skill = write_skill(config / "skills")

    opencode(project, ASK_SKILL)

    # the persona's answer then also tries Pi's `read` (OpenCode offers it too): the first
    # two requests are the listing and the skill call's result
    first, second = model_requests(requests_log)[:2]
    assert skill.body not in first.text
    call, result = second.body["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == "skill"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"name": SKILL}
    assert result["role"] == "tool"
    loaded = result["content"] if isinstance(result["content"], str) else "".join(parts(result))
    assert skill.body in loaded and "description:" not in loaded
    for req in (first, second):
        assert f"Instructions from: {config / 'AGENTS.md'}\n{user}\n" in chat_system(req)


def test_opencode_xdg_overlay_replaces_the_user_folders(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    """What the opencode backend does for a replay: XDG_CONFIG_HOME / XDG_DATA_HOME /
    XDG_STATE_HOME in a throw-away folder: the candidate AGENTS.md is read from there, the
    live one is not, and the run's session database is written there."""
    live_config = home() / ".config" / "opencode"
    live = marker("OPENCODE-LIVE")
    write(live_config / "AGENTS.md", live + "\n")
    live_skill = write_skill(live_config / "skills", "live-skill")
    overlay = tmp_path / "overlay-opencode"
    write_opencode_config(overlay, sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    candidate = marker("OPENCODE-CANDIDATE")
    write(overlay / ".config" / "opencode" / "AGENTS.md", candidate + "\n")

    opencode(
        project,
        ASK,
        XDG_CONFIG_HOME=str(overlay / ".config"),
        XDG_DATA_HOME=str(overlay / "data"),
        XDG_STATE_HOME=str(overlay / "state"),
    )

    (req,) = model_requests(requests_log)
    system = chat_system(req)
    path = overlay / ".config" / "opencode" / "AGENTS.md"
    assert f"Instructions from: {path}\n{candidate}\n" in system
    assert live not in req.text
    assert live_skill.description not in req.text
    assert (overlay / "data" / "opencode" / "opencode.db").is_file()
    assert not (home() / ".local" / "share" / "opencode").exists()
    assert sorted(p.name for p in live_config.iterdir()) == ["AGENTS.md", "skills"]


def test_pi_context_files_reach_the_request_and_a_skill_only_as_a_description(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path
) -> None:
    write_pi_models(home(), sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    pi_home = home() / ".pi" / "agent"
    user, proj = marker("PI-USER"), marker("PI-PROJ")
    write(pi_home / "AGENTS.md", user + "\n")
    write(project / "AGENTS.md", proj + "\n")
    not_loaded = {
        # AGENTS.md wins over CLAUDE.md in the same folder
        "user CLAUDE.md": write(pi_home / "CLAUDE.md", marker("PI-USER-CLAUDE") + "\n"),
        "project CLAUDE.md": write(project / "CLAUDE.md", marker("PI-PROJ-CLAUDE") + "\n"),
    }
    skill = write_skill(pi_home / "skills")

    assert pi(project, ASK).strip() == "Run `npm test` to run the suite."

    (req,) = requests_log
    system = chat_system(req)
    both = (
        "# Project Context\n\nProject-specific instructions and guidelines:\n\n"
        f"## {pi_home / 'AGENTS.md'}\n\n{user}\n\n\n## {project / 'AGENTS.md'}\n\n{proj}\n"
    )
    assert both in system
    assert framed("pi", pi_home / "AGENTS.md", user + "\n") in system
    for mark in (user, proj):
        only_in(req, mark, "system message")
    for where, path in not_loaded.items():
        assert path.read_text().strip() not in req.text, f"{where} should not be loaded"
    assert parts(req.body["messages"][-1]) == [ASK]
    assert listed_skill(SKILL, skill.description, skill.folder / "SKILL.md") in system
    assert skill.body not in req.text
    # no skill tool: a skill is loaded by reading its file
    assert "read" in [t["function"]["name"] for t in req.body["tools"]]
    assert "skill" not in [t["function"]["name"] for t in req.body["tools"]]


def test_pi_skill_body_is_sent_only_when_the_model_reads_the_file(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path
) -> None:
    write_pi_models(home(), sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    pi_home = home() / ".pi" / "agent"
    user = marker("PI-USER")
    write(pi_home / "AGENTS.md", user + "\n")
    skill = write_skill(pi_home / "skills")

    pi(project, ASK_SKILL)

    first, second = requests_log
    assert skill.body not in first.text
    call, result = second.body["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == "read"
    args = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert args == {"path": str(skill.folder / "SKILL.md")}
    assert result["role"] == "tool"
    loaded = result["content"] if isinstance(result["content"], str) else "".join(parts(result))
    assert skill.body in loaded and "description:" in loaded  # the raw file
    for req in (first, second):
        assert f"## {pi_home / 'AGENTS.md'}\n\n{user}\n" in chat_system(req)


def test_pi_agent_dir_overlay_replaces_the_user_folder(
    sim_oc_pi: Simulator, requests_log: list[Request], project: Path, tmp_path: Path
) -> None:
    live_home = home() / ".pi" / "agent"
    live = marker("PI-LIVE")
    write(live_home / "AGENTS.md", live + "\n")
    live_skill = write_skill(live_home / "skills", "live-skill")
    overlay = tmp_path / "overlay-pi"
    models = write_pi_models(tmp_path, sim_oc_pi.url + "/v1", "sim", "SIM_API_KEY")
    write(overlay / "models.json", models.read_text())
    candidate = marker("PI-CANDIDATE")
    write(overlay / "AGENTS.md", candidate + "\n")

    pi(project, ASK, PI_CODING_AGENT_DIR=str(overlay))

    (req,) = requests_log
    assert f"## {overlay / 'AGENTS.md'}\n\n{candidate}\n" in chat_system(req)
    assert live not in req.text
    assert live_skill.description not in req.text
    assert list((overlay / "sessions").rglob("*.jsonl"))  # the session went to the overlay
    assert sorted(p.name for p in live_home.iterdir()) == ["AGENTS.md", "skills"]
