"""The simulator models skill loading (docs/agents.md): as a target it sees the skills a
request lists, loads one (Claude Code ``Skill``, Copilot ``skill``, Codex ``exec_command`` with
``cat <file>``) only when the persona's ``[skills]`` rule picks its description for the task,
then answers by the loaded body's rules. A listed description is never read for rules.

The unit tests build request bodies in the shapes the pinned CLIs send (captured from real
runs, trimmed); the ``cli`` tests run the real CLIs in a throw-away HOME against the simulator.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.simulator import Simulator, serve
from skillopt_sleep.simulator.brain import Brain, ListedSkill, Turn, content_words, skill_matches
from skillopt_sleep.simulator.persona import Persona, SkillRule, persona_from_dict
from skillopt_sleep.simulator.wire import parse_anthropic, parse_chat, parse_responses
from tests.helpers.clis import (
    NODE_BIN,
    OPENCODE_QUIET,
    PI_QUIET,
    agent_binary,
    write_pi_models,
)

KEY = "sk-sim-skills-0123456789"
ASK = "How should I write unit tests for the parser module in Python?"
ANSWER = "Use `unittest` for the parser tests."
FIXED = "Use `pytest` for the parser tests."
RULE = "Use `pytest` instead of `unittest`."
MATCHING = ("python-tests", "Conventions for Python unit tests in this repository.")
# shares no content word with ASK; its rule-looking sentence must not apply (not instructions)
UNRELATED = (
    "deploy-notes",
    "Deploying containers to Kubernetes clusters. Always mention `kubectl`.",
)


def persona(**skills: Any) -> Persona:
    return persona_from_dict(
        {
            "name": "skills",
            "default_answer": "ok",
            "answers": [{"match": "unit tests", "text": ANSWER}],
            **({"skills": skills} if skills else {}),
        }
    )


def body_of(name: str) -> str:
    return f"# {name}\n\n- {RULE}\n"


def skill_file(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body_of(name)}"


# == request shapes (docs/agents.md) ========================================================

CLAUDE_HEADER = "The following skills are available for use with the Skill tool:"
CLAUDE_BUNDLED = (
    "- claude-api: Reference for the Claude API / Anthropic SDK — model ids, pricing.\n"
    "TRIGGER — read FIRST, before you answer: unit tests in Python count too.\n"
    "- init: Initialize a new CLAUDE.md file with codebase documentation"
)


def claude_body(*skills: tuple[str, str], after: str | None = None) -> dict[str, Any]:
    """Claude Code's first request (prompt in messages[0], listing in a role ``system`` entry
    of ``messages``); with ``after`` its request after a ``Skill`` call for that skill."""
    listing = "\n".join(f"- {n}: {d}" for n, d in skills)
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nmemory\n</system-reminder>"},
                {"type": "text", "text": ASK},
            ],
        },
        {
            "role": "system",
            "content": f"# Environment\nplatform: linux\n\n{CLAUDE_HEADER}\n\n{listing}\n"
            f"{CLAUDE_BUNDLED}\n\nToday's date is 2026-12-01.",
        },
    ]
    if after:
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": after}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": f"Launching skill: {after}",
                    },
                    {
                        "type": "text",
                        "text": f"Base directory for this skill: /h/.claude/skills/{after}\n\n"
                        + body_of(after),
                    },
                ],
            },
        ]
    tools = [{"name": n, "input_schema": {}} for n in ("Bash", "Read", "Skill")]
    return {
        "model": "m",
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": messages,
        "tools": tools,
    }


def codex_body(*skills: tuple[str, str], after: str | None = None) -> dict[str, Any]:
    """Codex's request: listing in the second developer message with a roots table (``r0``
    the user's folder, ``r1`` its ``.system`` folder); ``after``: after a ``cat`` of it."""
    entries = "\n".join(f"- {n}: {d} (file: r0/{n}/SKILL.md)" for n, d in skills)
    listing = (
        "<skills_instructions>\n## Skills\nA skill is a set of local instructions.\n"
        "### Skill roots\n- `r0` = `/h/.codex/skills`\n- `r1` = `/h/.codex/skills/.system`\n"
        "### Available skills\n"
        "- skill-creator: Create or update a Codex skill for Python unit tests. "
        "(file: r1/skill-creator/SKILL.md)\n"
        f"{entries}\n</skills_instructions>"
    )
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "p"}]},
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": listing}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>\n</environment_context>"}
            ],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]},
    ]
    if after:
        description = dict(skills)[after]
        path = f"/h/.codex/skills/{after}/SKILL.md"
        items += [
            {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "c1",
                "arguments": json.dumps({"cmd": f"cat {path}"}),
            },
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "Chunk ID: 1\nProcess exited with code 0\nOutput:\n"
                + skill_file(after, description),
            },
        ]
    tools = [
        {"type": "function", "name": n, "parameters": {}} for n in ("exec_command", "apply_patch")
    ]
    return {"model": "m", "input": items, "tools": tools, "stream": True}


def copilot_body(*skills: tuple[str, str], after: str | None = None) -> dict[str, Any]:
    """Copilot's request: ``<available_skills>`` inside the one system message; ``after``:
    after a ``skill`` call (a tool message, then a ``<skill-context>`` user message)."""
    entries = "".join(
        f"<skill>\n  <name>{n}</name>\n  <description>{d}</description>\n"
        "  <location>user</location>\n</skill>\n"
        for n, d in skills
    )
    builtin = (
        "<skill>\n  <name>customize-cloud-agent</name>\n  <description>Python unit tests in the "
        "cloud agent.</description>\n  <location>builtin</location>\n</skill>\n"
    )
    system = f"You are Copilot.\n<skill>\n<available_skills>\n{entries}{builtin}</available_skills>\n</skill>\n"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"<current_datetime>2026-12-01</current_datetime>\n\n{ASK}"},
    ]
    if after:
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "skill", "arguments": json.dumps({"skill": after})},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": f'Skill "{after}" loaded successfully. Follow the instructions in the skill context.',
            },
            {
                "role": "user",
                "content": f'<skill-context name="{after}">\nBase directory for this skill: '
                f"/h/.copilot/skills/{after}\n\n{body_of(after)}\n</skill-context>",
            },
        ]
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {}}}
        for n in ("bash", "view", "skill")
    ]
    return {"model": "m", "messages": messages, "tools": tools}


FORMATS = {
    "claude": (claude_body, parse_anthropic),
    "codex": (codex_body, parse_responses),
    "copilot": (copilot_body, parse_chat),
}


def turn_of(fmt: str, *skills: tuple[str, str], after: str | None = None) -> Turn:
    build, parse = FORMATS[fmt]
    return parse(build(*skills, after=after))


# -- wire: the listing of each CLI ----------------------------------------------------------


def test_claude_listing_is_read_from_the_system_entry_of_messages() -> None:
    turn = turn_of("claude", MATCHING, UNRELATED)
    assert [(s.name, s.description, s.location, s.builtin) for s in turn.skills] == [
        (*MATCHING, "", False),
        (*UNRELATED, "", False),
        ("claude-api", CLAUDE_BUNDLED.split("\n- init")[0][len("- claude-api: ") :], "", True),
        ("init", "Initialize a new CLAUDE.md file with codebase documentation", "", True),
    ]
    assert turn.skills[0].entry == f"- {MATCHING[0]}: {MATCHING[1]}"
    assert turn.prompt == ASK and turn.calls == []


def test_codex_listing_resolves_the_skill_roots_to_the_file_path() -> None:
    turn = turn_of("codex", MATCHING)
    assert [(s.name, s.location, s.builtin) for s in turn.skills] == [
        ("skill-creator", "/h/.codex/skills/.system/skill-creator/SKILL.md", True),
        ("python-tests", "/h/.codex/skills/python-tests/SKILL.md", False),
    ]
    assert turn.skills[1].description == MATCHING[1]
    assert turn.prompt == ASK


def test_copilot_listing_is_read_from_available_skills() -> None:
    turn = turn_of("copilot", MATCHING)
    assert [(s.name, s.description, s.location, s.builtin) for s in turn.skills] == [
        (*MATCHING, "user", False),
        ("customize-cloud-agent", "Python unit tests in the cloud agent.", "builtin", True),
    ]
    assert turn.prompt == ASK


def test_opencode_and_pi_listings_are_read_from_available_skills() -> None:
    """OpenCode 1.18.33 and Pi 0.73.1 append Copilot's block shape to their system message,
    the location an absolute SKILL.md path (OpenCode's own skill: ``&lt;built-in&gt;``);
    docs/agents.md."""
    system = (
        "You are opencode.\n<available_skills>\n  <skill>\n    <name>customize-opencode</name>\n"
        "    <description>Use ONLY when editing opencode&#39;s config.</description>\n"
        "    <location>&lt;built-in&gt;</location>\n  </skill>\n  <skill>\n"
        f"    <name>{MATCHING[0]}</name>\n    <description>{MATCHING[1]}</description>\n"
        f"    <location>/h/.config/opencode/skills/{MATCHING[0]}/SKILL.md</location>\n"
        "  </skill>\n</available_skills>"
    )
    turn = parse_chat(
        {"messages": [{"role": "system", "content": system}, {"role": "user", "content": ASK}]}
    )
    assert [(s.name, s.location, s.builtin) for s in turn.skills] == [
        ("customize-opencode", "<built-in>", True),
        (MATCHING[0], f"/h/.config/opencode/skills/{MATCHING[0]}/SKILL.md", False),
    ]
    assert turn.skills[0].description == "Use ONLY when editing opencode's config."
    assert turn.prompt == ASK


def test_no_listing_no_skills_and_rule_text_is_all_text() -> None:
    turn = parse_chat(
        {"messages": [{"role": "system", "content": RULE}, {"role": "user", "content": ASK}]}
    )
    assert turn.skills == [] and turn.rule_text() == turn.all_text()


# -- brain: load, then obey ---------------------------------------------------------------

LOAD_CALLS = {
    "claude": ("Skill", {"skill": "python-tests"}),
    "codex": ("exec_command", {"cmd": "cat /h/.codex/skills/python-tests/SKILL.md"}),
    "copilot": ("skill", {"skill": "python-tests"}),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_matching_skill_is_loaded_by_the_clis_own_call(fmt: str) -> None:
    reply = Brain(persona()).respond(turn_of(fmt, UNRELATED, MATCHING))
    assert (reply.tool, reply.tool_input) == LOAD_CALLS[fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_after_the_load_the_body_rules_apply_and_the_prompt_is_the_task(fmt: str) -> None:
    turn = turn_of(fmt, UNRELATED, MATCHING, after="python-tests")
    assert turn.prompt == ASK and turn.after_tool
    assert turn.calls == [LOAD_CALLS[fmt]]
    reply = Brain(persona()).respond(turn)
    assert (reply.tool, reply.text) == (None, FIXED)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_unrelated_skill_is_never_loaded_and_its_description_is_no_rule(fmt: str) -> None:
    reply = Brain(persona()).respond(turn_of(fmt, UNRELATED))
    assert (reply.tool, reply.text) == (None, ANSWER)  # no load, no `kubectl`


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_rule_in_a_listed_description_does_not_apply(fmt: str) -> None:
    ruled = ("py-rules", f"Python unit tests. {RULE}")
    reply = Brain(persona(match="never")).respond(turn_of(fmt, ruled))
    assert (reply.tool, reply.text) == (None, ANSWER)


def test_the_description_in_a_read_files_front_matter_is_no_rule_either() -> None:
    ruled = ("python-tests", "Python unit tests. Always mention `tox`.")
    turn = turn_of("codex", ruled, after="python-tests")
    assert "Always mention `tox`" in turn.all_text()
    assert Brain(persona()).respond(turn).text == FIXED


@pytest.mark.parametrize("fmt", FORMATS)
def test_match_never_and_always(fmt: str) -> None:
    assert Brain(persona(match="never")).respond(turn_of(fmt, MATCHING)).tool is None
    reply = Brain(persona(match="always")).respond(turn_of(fmt, UNRELATED))
    assert reply.tool is not None and "deploy-notes" in json.dumps(reply.tool_input)


@pytest.mark.parametrize("fmt", FORMATS)
def test_built_in_skills_load_only_when_the_persona_says_so(fmt: str) -> None:
    turn = turn_of(fmt)  # only the CLI's own skill, whose description matches the task
    assert Brain(persona()).respond(turn).tool is None
    assert Brain(persona(builtin=True)).respond(turn).tool is not None


def test_min_shared_and_the_best_match_first() -> None:
    one = ("one-word", "Everything about Python.")
    three = ("three-words", "Python unit tests for code.")
    turn = turn_of("claude", one, three)
    assert Brain(persona()).respond(turn).tool_input == {"skill": "three-words"}
    assert Brain(persona(min_shared=4)).respond(turn).tool is None
    only_one = turn_of("claude", one)
    assert Brain(persona(min_shared=2)).respond(only_one).tool is None
    assert Brain(persona(min_shared=1)).respond(only_one).tool_input == {"skill": "one-word"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_at_most_max_loads_skills_per_conversation(fmt: str) -> None:
    other = ("python-style", "Python style for unit tests.")
    after = turn_of(fmt, MATCHING, other, after="python-tests")
    assert Brain(persona()).respond(after).text == FIXED  # one load (the default): answer
    reply = Brain(persona(max_loads=2)).respond(after)
    assert reply.tool is not None and "python-style" in json.dumps(reply.tool_input)


def test_content_words_and_skill_matches() -> None:
    assert content_words("How should I write unit tests, please?") == {"write", "unit", "tests"}
    skill = ListedSkill("x", "Writing unit test files.")
    assert skill_matches(skill, ASK, SkillRule()) == 1  # "unit" ("test" != "tests": no stemming)
    assert skill_matches(skill, ASK, SkillRule(match="never")) == 0


def test_each_skill_loads_once_and_the_answers_tool_follows_the_load() -> None:
    tooled = persona_from_dict(
        {
            "answers": [{"match": "unit tests", "text": ANSWER, "tool": ["bash", "skill"]}],
            "tool_inputs": {"bash": {"command": "ls"}},
        }
    )
    turn = turn_of("copilot", MATCHING, after="python-tests")
    reply = Brain(tooled).respond(turn)  # the load came first; the answer's own tool is next
    assert (reply.tool, reply.tool_input) == ("bash", {"command": "ls"})
    turn.calls.append(("bash", {"command": "ls"}))
    turn.messages.append(("tool", "hello.txt"))
    assert Brain(tooled).respond(turn).text == FIXED  # after a plain tool result: the answer


def test_a_tool_rule_in_the_loaded_body_is_obeyed_and_a_load_is_not_repeated() -> None:
    turn = turn_of("claude", MATCHING, after="python-tests")
    turn.messages[-1] = ("user", turn.messages[-1][1] + "\nUse the `Bash` tool.\n")
    assert Brain(persona()).respond(turn).tool == "Bash"  # the body's rule, after the load
    # an answer whose own tool call is the very load already made: not made again
    again = persona_from_dict(
        {
            "answers": [{"match": "unit tests", "text": ANSWER, "tool": ["Skill"]}],
            "tool_inputs": {"Skill": {"skill": "python-tests"}},
        }
    )
    reply = Brain(again).respond(turn_of("claude", MATCHING, after="python-tests"))
    assert (reply.tool, reply.text) == (None, FIXED)


def test_persona_skills_defaults_and_validation() -> None:
    assert Persona().skills == SkillRule(match="words", min_shared=1, max_loads=1, builtin=False)
    custom = persona(match="always", min_shared=2, max_loads=3, builtin=True).skills
    assert custom == SkillRule(match="always", min_shared=2, max_loads=3, builtin=True)
    with pytest.raises(ValueError, match=r"skills\.match"):
        persona(match="sometimes")


# == the real CLIs ========================================================================


@pytest.fixture
def requests_log(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every model request body the simulator receives (its handler's reader, wrapped)."""
    from skillopt_sleep.simulator import server

    log: list[dict[str, Any]] = []
    original = server._Handler._body

    def recording(handler: server._Handler) -> dict[str, Any]:
        body = original(handler)
        if handler._path() in ("/messages", "/responses", "/chat/completions"):
            log.append(body)
        return body

    monkeypatch.setattr(server._Handler, "_body", recording)
    return log


@pytest.fixture
def sim(requests_log: list[dict[str, Any]]) -> Iterator[Simulator]:
    with serve(persona(), api_key=KEY, full_log=True) as running:
        yield running


def write_skill(skills_dir: Path, name: str, description: str) -> None:
    path = skills_dir / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(skill_file(name, description), encoding="utf-8")


def run_cli(argv: list[str], cwd: Path, **extra: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ["HOME"],
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        **extra,
    }
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc.stdout


def claude(sim: Simulator, cwd: Path) -> str:
    out = run_cli(
        [agent_binary("claude"), "-p", ASK, "--output-format", "json"],
        cwd,
        ANTHROPIC_BASE_URL=sim.url,
        ANTHROPIC_API_KEY=KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )
    return str(json.loads(out)["result"])


def copilot(sim: Simulator, cwd: Path) -> str:
    return run_cli(
        [agent_binary("copilot"), "-p", ASK, "-s"],
        cwd,
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=sim.url + "/v1",
        COPILOT_PROVIDER_API_KEY=KEY,
        COPILOT_MODEL="sim",
        COPILOT_AUTO_UPDATE="false",
    ).strip()


def codex(sim: Simulator, cwd: Path) -> str:
    config = (
        'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "Simulator"\n'
        f'base_url = "{sim.url}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n'
    )
    home = Path(os.environ["HOME"]) / ".codex"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    argv = [agent_binary("codex"), "exec", "--skip-git-repo-check", ASK]
    return run_cli(argv, cwd, SIM_API_KEY=KEY).strip()


def opencode(sim: Simulator, cwd: Path) -> str:
    config = {
        "provider": {
            "sim": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": sim.url + "/v1", "apiKey": "{env:SIM_API_KEY}"},
                "models": {"sim": {"name": "sim"}},
            }
        },
        "model": "sim/sim",
        "agent": {"title": {"disable": True}},  # no extra title request
    }
    home = Path(os.environ["HOME"]) / ".config" / "opencode"
    home.mkdir(parents=True, exist_ok=True)
    (home / "opencode.json").write_text(json.dumps(config), encoding="utf-8")
    # OpenCode's skill tool lists the skill folder with ripgrep (else it downloads one): the
    # pinned codex package ships an `rg`
    rg = sorted((NODE_BIN.parent / "@openai").glob("codex-linux-*/vendor/*/codex-path"))
    path = os.pathsep.join([*(str(d) for d in rg[:1]), os.environ.get("PATH", "/usr/bin:/bin")])
    argv = [agent_binary("opencode"), "run", *ASK.split()]  # one word an argument: no quotes
    return run_cli(argv, cwd, SIM_API_KEY=KEY, PWD=str(cwd), PATH=path, **OPENCODE_QUIET).strip()


def pi(sim: Simulator, cwd: Path) -> str:
    write_pi_models(Path(os.environ["HOME"]), sim.url + "/v1", "sim", "SIM_API_KEY")
    argv = [agent_binary("pi"), "--provider", "sim", "--model", "sim", "-p", ASK]
    return run_cli(argv, cwd, SIM_API_KEY=KEY, **PI_QUIET).strip()


CLIS = {
    "claude": (claude, ".claude/skills"),
    "codex": (codex, ".codex/skills"),
    "copilot": (copilot, ".copilot/skills"),
    "opencode": (opencode, ".config/opencode/skills"),
    "pi": (pi, ".pi/agent/skills"),
}
#: the tool each CLI loads a skill with
LOAD_TOOL = {
    "claude": "Skill",
    "codex": "exec_command",
    "copilot": "skill",
    "opencode": "skill",
    "pi": "read",
}


@pytest.mark.cli
@pytest.mark.parametrize("cli", CLIS)
def test_a_matching_user_skill_is_loaded_and_its_rule_changes_the_answer(
    cli: str, sim: Simulator, requests_log: list[dict[str, Any]], workdir: Path
) -> None:
    run, folder = CLIS[cli]
    skills = Path(os.environ["HOME"]) / folder
    write_skill(skills, *MATCHING)
    write_skill(skills, *UNRELATED)

    assert run(sim, workdir) == FIXED

    records = list(sim.stats.requests)
    assert len(records) == len(requests_log) == 2
    first, second = records
    assert sorted(first["skills"]) == sorted(second["skills"]) == ["deploy-notes", "python-tests"]
    assert first["skills_loaded"] == [] and second["skills_loaded"] == ["python-tests"]
    assert first["tool"] == LOAD_TOOL[cli]
    assert second["tool"] is None and second["prompt_full"] == ASK
    body = body_of("python-tests")
    assert body not in json.dumps(requests_log[0]) and body not in first["context_full"]
    assert body in second["context_full"]
    assert body_of("deploy-notes") not in json.dumps(requests_log)  # never loaded


@pytest.mark.cli
@pytest.mark.parametrize("cli", CLIS)
def test_a_skill_whose_description_does_not_match_is_never_loaded(
    cli: str, sim: Simulator, requests_log: list[dict[str, Any]], workdir: Path
) -> None:
    run, folder = CLIS[cli]
    write_skill(Path(os.environ["HOME"]) / folder, *UNRELATED)

    assert run(sim, workdir) == ANSWER  # keeps `unittest`; the description's rule is no rule

    (record,) = sim.stats.requests
    assert record["skills"] == ["deploy-notes"] and record["skills_loaded"] == []
    assert record["tool"] is None
    assert UNRELATED[1] in json.dumps(requests_log[0])  # listed ...
    assert body_of("deploy-notes") not in json.dumps(requests_log[0])  # ... but not loaded
