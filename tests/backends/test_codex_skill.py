"""A Codex skill replay loads the skill the way the live ``codex`` does (docs/agents.md): Codex
lists the placed SKILL.md in its ``<skills_instructions>`` and the model reads it with the
shell tool (``exec_command`` ``cat <path>``). So a skill replay keeps the shell on, in the
read-only sandbox with approvals never and the core environment only, and reports a read of
the placed file as ``Skill`` (``skill_loaded`` true), any other command as a shell call. A
memory placement keeps the shell off. The ``cli`` tests run the real ``codex`` against the
simulator, whose persona loads a listed skill or never does."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.codex import PROFILE, CodexBackend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import CompletionRequest, Placement
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from tests.helpers.clis import require_cli

KEY = "sk-sim-codex-skill-0123456789"
ASK = "How should I write unit tests for the parser module in Python?"
ANSWER = "Use `unittest` for the parser tests."
FIXED = "Use `pytest` for the parser tests."
SKILL = (
    "---\nname: python-tests\ndescription: Conventions for Python unit tests.\n---\n\n"
    "# Python tests\n\n- Use `pytest` instead of `unittest`.\n"
)
#: where each scope puts the skill (relative to CODEX_HOME / the working directory)
PATHS = {"user": "skills/python-tests/SKILL.md", "project": ".codex/skills/python-tests/SKILL.md"}


def _request(mode: str = "skill", scope: str = "user", tools: list[str] | None = None):
    path = PATHS[scope] if mode == "skill" else "AGENTS.md"
    placement = Placement(agent="codex", scope=scope, path=path, mode=mode, text=SKILL)
    return CompletionRequest(prompt=ASK, placement=placement, tools=tools or [], workdir="/u/work")


def _argv(request: CompletionRequest, tmp_path: Path) -> list[str]:
    backend = CodexBackend(BackendConfig(name="codex"))
    (tmp_path / "work").mkdir()
    (tmp_path / "scratch").mkdir()
    return backend.build(request, "codex", tmp_path / "work", tmp_path / "scratch").argv


def _flags(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


@pytest.mark.parametrize("scope", ["user", "project"])
def test_a_skill_replay_keeps_the_shell_on_with_the_least_power(scope, tmp_path, isolated_home):
    argv = _argv(_request("skill", scope), tmp_path)
    disabled = _flags(argv, "--disable")
    assert "shell_tool" not in disabled and "unified_exec" not in disabled
    settings = _flags(argv, "-c")
    assert 'approval_policy="never"' in settings
    assert 'shell_environment_policy.inherit="core"' in settings
    # a permission profile reading the skill's folder, writing only the working copy, not
    # --sandbox
    assert _flags(argv, "--sandbox") == []
    assert f'default_permissions="{PROFILE}"' in settings
    [table] = [x for x in settings if x.startswith(f"permissions.{PROFILE}.filesystem=")]
    assert '":minimal"="read"' in table and f'"{tmp_path / "work"}"="write"' in table
    home = tmp_path / "scratch" / "codex-home"
    if scope == "user":
        assert f'"{home / "skills" / "python-tests"}"="read"' in table
    assert f'"{home}"=' not in table  # not the overlay's auth.json
    assert table.count('"write"') == 1 and "network" not in table
    assert "--dangerously-bypass-approvals-and-sandbox" not in argv and "--add-dir" not in argv


def test_a_memory_replay_offers_the_live_tools_under_the_same_profile(tmp_path, isolated_home):
    argv = _argv(_request("memory"), tmp_path)
    # no tool switched off (the live agent's tool set), web search as Codex configures it
    assert _flags(argv, "--disable") == ["unbounded_connection_retries"]
    assert not [s for s in _flags(argv, "-c") if s.startswith("web_search")]
    settings = _flags(argv, "-c")
    assert 'approval_policy="never"' in settings
    assert 'shell_environment_policy.inherit="core"' in settings
    assert _flags(argv, "--sandbox") == []
    [table] = [x for x in settings if x.startswith(f"permissions.{PROFILE}.filesystem=")]
    assert f'"{tmp_path / "work"}"="write"' in table and table.count('"write"') == 1


def test_a_call_that_is_not_a_replay_keeps_the_shell_off(tmp_path, isolated_home):
    """An optimizer's or judge's call through Codex (no placement) acts on nothing."""
    argv = _argv(CompletionRequest(prompt=ASK, purpose="reflect"), tmp_path)
    assert _flags(argv, "--sandbox") == ["read-only"]
    assert {"shell_tool", "unified_exec"} <= set(_flags(argv, "--disable"))
    settings = _flags(argv, "-c")
    assert not [s for s in settings if s.startswith(("approval_policy", "shell_environment"))]


def test_a_codex_skill_replay_has_its_own_cache_key():
    """Answers cached before Codex could load a skill are not reused for skill replays."""
    codex = get_backend(BackendConfig(name="codex"))
    claude = get_backend(BackendConfig(name="claude_code"))
    assert codex.skill_replays != claude.skill_replays


@pytest.mark.cli
@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("load", ["always", "never"])
def test_the_real_codex_reads_the_placed_skill_and_says_so(scope, load, isolated_home, cli_path):
    require_cli("codex")
    persona = persona_from_dict(
        {
            "name": "codex-skill",
            "default_answer": "ok",
            "answers": [{"match": "unit tests", "text": ANSWER}],
            "skills": {"match": load},
        }
    )
    with serve(persona, api_key=KEY, full_log=True) as sim:
        backend = get_backend(
            BackendConfig(
                name="codex",
                base_url=sim.url + "/v1",
                api_key=KEY,
                model="sim-demo",
                max_retries=0,
                timeout=90,
            )
        )
        out = backend.complete(_request("skill", scope))
        requests = [r for r in sim.stats.requests if r.get("role") == "target"]
    # codex listed the placed skill in every request; the persona decided whether to read it
    assert requests and all(r.get("skills") == ["python-tests"] for r in requests)
    read = [r for r in requests if r.get("tool") == "exec_command"]
    loaded = [r for r in requests if r.get("skills_loaded") == ["python-tests"]]
    if load == "always":
        assert len(read) == 1 and loaded  # one `cat` of the file, its body then in context
        assert out.tool_calls == ["Skill"] and backend.skill_loaded(out) is True
        assert out.text == FIXED  # the skill's rule reached the model
    else:
        assert not read and not loaded
        assert out.tool_calls == [] and backend.skill_loaded(out) is False
        assert out.text == ANSWER


@pytest.mark.cli
def test_a_shell_task_with_a_skill_reports_the_read_apart_from_the_shell_call(
    isolated_home, cli_path
):
    """A task that needs a shell: reading the skill is not the shell call its check asks for
    (the read is reported as ``Skill``, the model's own command as ``Bash``)."""
    require_cli("codex")
    persona = persona_from_dict(
        {
            "name": "codex-skill-shell",
            "default_answer": "ok",
            "answers": [
                {
                    "match": "unit tests",
                    "text": ANSWER,
                    "tool": ["exec_command"],
                    "tool_input": {"cmd": "ls"},
                }
            ],
            "skills": {"match": "always"},
        }
    )
    with serve(persona, api_key=KEY) as sim:
        backend = get_backend(
            BackendConfig(
                name="codex",
                base_url=sim.url + "/v1",
                api_key=KEY,
                model="sim-demo",
                max_retries=0,
                timeout=90,
            )
        )
        out = backend.complete(_request("skill", tools=["Bash"]))
    assert out.tool_calls == ["Skill", "Bash"] and backend.skill_loaded(out) is True


@pytest.mark.cli
def test_a_skill_replays_shell_reads_the_skill_and_nothing_else(tmp_path, isolated_home, cli_path):
    """The profile's confinement through the real ``codex``: the persona loads the skill, then
    runs a command that tries to read a file of the user's, the overlay's copy of their Codex
    config (which asks for no sandbox at all), the key in the environment, to write in the
    work dir and HOME, and to reach a loopback port that listens. Only the skill's text
    reaches the model."""
    require_cli("codex")
    secret = isolated_home / "secret.txt"
    secret.write_text("TOPSECRET-user-file\n")
    (isolated_home / ".codex").mkdir()
    # the user's own sandbox setting (copied into the overlay) does not loosen the replay's
    (isolated_home / ".codex" / "config.toml").write_text(
        '# MARKER-user-codex-config\nsandbox_mode = "danger-full-access"\n'
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    # run in the replay's working copy (work/<name>); the overlay CODEX_HOME is in the
    # call's scratch folder, ../../scratch/codex-home
    command = (
        f"cat {secret}; cat $PWD/../../scratch/codex-home/config.toml; "
        "echo KEY=[$SKILLOPT_CODEX_API_KEY]; echo w > ./w && echo WROTE-WORK; "
        f"echo w > {isolated_home}/w && echo WROTE-HOME; "
        f"(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo NET-OPEN || echo NET-CLOSED"
    )
    persona = persona_from_dict(
        {
            "name": "codex-skill-confined",
            "default_answer": "ok",
            "answers": [
                {
                    "match": "unit tests",
                    "text": ANSWER,
                    "tool": ["exec_command"],
                    "tool_input": {"cmd": command},
                }
            ],
            "skills": {"match": "always"},
        }
    )
    try:
        with serve(persona, api_key=KEY, full_log=True) as sim:
            backend = get_backend(
                BackendConfig(
                    name="codex",
                    base_url=sim.url + "/v1",
                    api_key=KEY,
                    model="sim-demo",
                    max_retries=0,
                    timeout=90,
                )
            )
            out = backend.complete(_request("skill", tools=["Bash"]))
            last = [r["body"] for r in sim.stats.requests if r.get("body")][-1]
    finally:
        listener.close()
    assert out.tool_calls == ["Skill", "Bash"] and out.text == FIXED
    # what the commands gave the model: the last request carries both commands' output
    skill, other = [
        json.dumps(i["output"]) for i in last["input"] if i.get("type") == "function_call_output"
    ]
    assert "Use `pytest` instead of `unittest`." in skill  # the skill was read
    # the command ran, confined: it wrote in its working copy (a replay acts as the live
    # agent does), and nowhere else
    assert "KEY=[]" in other and "NET-CLOSED" in other and "WROTE-WORK" in other
    for leak in ("TOPSECRET", "MARKER-user-codex-config", KEY, "WROTE-HOME", "NET-OPEN"):
        assert leak not in other
    assert not (isolated_home / "w").exists()
