"""`install <agent>` against the pinned real agent CLIs (node_modules/.bin) and the simulator.

Each test uses a throw-away HOME / CODEX_HOME / COPILOT_HOME / SKILLOPT_SLEEP_HOME and talks to
127.0.0.1 only. A missing CLI fails when ``CI`` is set and skips otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomlkit

from skillopt_sleep.simulator import Simulator, serve
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.clis import OPENCLAW_QUIET, agent_binary, write_openclaw_config
from tests.helpers.store import db_rows

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "node_modules" / ".bin"
PLUGIN = ROOT / "plugins" / "claude-code"
TIMEOUT = 180
CLAUDE_TOOL = "mcp__plugin_skillopt-sleep_skillopt-sleep__sleep_status"
PERSONA = """
name = "install-tests"
default_answer = "No idea: {prompt}"

[[answers]]
match = "sleep status"
text = "The sleep status is above."
# Claude Code names plugin MCP tools mcp__plugin_<plugin>_<server>__<tool>; Codex offers them
# in a Responses "namespace" mcp__<server, - as _>, which the simulator flattens to <ns>__<tool>
tool = ["CLAUDE_TOOL", "mcp__skillopt_sleep__sleep_status"]
tool_input = {}

# these tests are about the MCP tools: the installed skill and the plugin's commands are listed
# and their descriptions share "sleep" with the prompts, so a default persona would load one
# first (tests/simulator/test_skill_loading.py covers that)
[skills]
match = "never"
""".replace("CLAUDE_TOOL", CLAUDE_TOOL)


def binary(name: str) -> str:
    return agent_binary(name)


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """No inherited keys or agent settings; this interpreter's scripts dir first on PATH so
    the agents start *this* `skillopt-sleep mcp`."""
    path = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]
    )
    env = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "SKILLOPT_SLEEP_HOME": os.environ["SKILLOPT_SLEEP_HOME"],
    }
    env.update(extra)
    return env


def run(
    argv: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"{argv[:3]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    return proc


def skillopt_ok(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``skillopt-sleep ARGS`` through its entry point in this process (the real agent CLIs
    that read what it wrote are the processes these tests are about); exit 0."""
    proc = skillopt_in_process(*args, env=env, timeout=TIMEOUT)
    assert proc.returncode == 0, (
        f"{args[:2]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    return proc


class Recorder:
    """Wraps the simulator's brain to keep the full text of every request (system prompt,
    messages, tool results), which ``sim.stats`` abbreviates."""

    def __init__(self, brain):
        self.brain, self.texts = brain, []

    def respond(self, turn):
        self.texts.append(turn.all_text())
        return self.brain.respond(turn)

    def __getattr__(self, name):
        return getattr(self.brain, name)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Simulator]:
    persona = tmp_path / "persona.toml"
    persona.write_text(PERSONA)
    with serve(persona, api_key="sim-key") as running:
        running.brain = Recorder(running.brain)
        yield running


def claude_env(home: Path, sim: Simulator) -> dict[str, str]:
    # ENABLE_TOOL_SEARCH=false: offer MCP tools directly instead of behind ToolSearch;
    # MCP_CONNECTION_NONBLOCKING=false: -p waits for the MCP servers before the first request
    return base_env(
        home,
        ANTHROPIC_BASE_URL=sim.url,
        ANTHROPIC_API_KEY="sim-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        ENABLE_TOOL_SEARCH="false",
        MCP_CONNECTION_NONBLOCKING="false",
    )


def claude_p(home: Path, sim: Simulator, cwd: Path, prompt: str, *extra: str) -> dict:
    proc = run(
        [binary("claude"), "-p", prompt, "--output-format", "json", *extra],
        claude_env(home, sim),
        cwd,
    )
    return json.loads(proc.stdout)


def transcript(home: Path, session_id: str) -> list[dict]:
    path = next((home / ".claude" / "projects").rglob(f"{session_id}.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def codex_home(home: Path, sim: Simulator) -> Path:
    """A CODEX_HOME whose config.toml already has a provider, comments and another server."""
    ch = home / "codex-home"
    ch.mkdir(exist_ok=True)
    (ch / "config.toml").write_text(
        '# my codex config\nmodel = "sim"\nmodel_provider = "sim"  # the simulator\n'
        # wait for MCP servers before the first model request (a cold `skillopt-sleep mcp`
        # takes ~1.5 s to import the MCP SDK; codex's default grace is shorter)
        "mcp_optional_startup_grace_ms = 30000\n\n"
        f'[model_providers.sim]\nname = "Simulator"\nbase_url = "{sim.url}/v1"\n'
        'wire_api = "responses"\nenv_key = "SIM_API_KEY"\n\n'
        '[mcp_servers.other]\ncommand = "other-mcp-server"  # never started: disabled\nenabled = false\n'
    )
    return ch


# ----------------------------------------------------------------------------- Claude Code
def test_claude_plugin_validate_passes() -> None:
    env = base_env(Path(os.environ["HOME"]))
    for target in (PLUGIN, PLUGIN / ".claude-plugin" / "plugin.json"):
        proc = run([binary("claude"), "plugin", "validate", "--strict", str(target)], env)
        assert "Validation passed" in proc.stdout
    out = run([binary("claude"), "plugin", "validate", str(PLUGIN)], env).stdout
    for part in (
        "SessionEnd",
        "mcpServers: skillopt-sleep",
        "skills: skillopt-sleep:skillopt-sleep",
        "commands: skillopt-sleep:status",
        "commands: skillopt-sleep:review",
        "commands: skillopt-sleep:adopt",
        "commands: skillopt-sleep:run",
    ):
        assert part in out


def test_claude_marketplace_add_and_plugin_install(isolated_home: Path) -> None:
    env = base_env(isolated_home)
    run([binary("claude"), "plugin", "marketplace", "add", str(PLUGIN)], env, isolated_home)
    run(
        [binary("claude"), "plugin", "install", "skillopt-sleep@skillopt-sleep"], env, isolated_home
    )
    listing = run([binary("claude"), "plugin", "list"], env, isolated_home).stdout
    assert "skillopt-sleep@skillopt-sleep" in listing and "enabled" in listing
    settings = json.loads((isolated_home / ".claude" / "settings.json").read_text())
    assert settings["enabledPlugins"] == {"skillopt-sleep@skillopt-sleep": True}


@pytest.mark.parametrize("how", ["skillopt-sleep install", "claude plugin marketplace"])
def test_claude_p_calls_the_plugins_mcp_tool_after_install(
    how: str, isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    env = base_env(isolated_home)
    if how == "skillopt-sleep install":
        skillopt_ok("install", "claude-code", env=env)
    else:  # Claude Code's own route: marketplace add, then plugin install
        run([binary("claude"), "plugin", "marketplace", "add", str(PLUGIN)], env, isolated_home)
        run(
            [binary("claude"), "plugin", "install", "skillopt-sleep@skillopt-sleep"],
            env,
            isolated_home,
        )
    out = claude_p(
        isolated_home, sim, workdir, "what is the sleep status?", "--allowedTools", CLAUDE_TOOL
    )
    assert out["result"] == "The sleep status is above."
    called = [r["tool"] for r in sim.stats.requests if r["endpoint"] == "/messages"]
    assert called.count(CLAUDE_TOOL) == 1 and called[-1] is None, sim.stats.requests
    offered = next(r["tools"] for r in sim.stats.requests if r["endpoint"] == "/messages")
    assert {
        f"mcp__plugin_skillopt-sleep_skillopt-sleep__{t}"
        for t in ("sleep_status", "get_proposal", "adopt_proposal", "run_night")
    } <= set(offered)
    # the tool ran: its result (the real server's status of this store) is in the transcript
    results = [
        c
        for e in transcript(isolated_home, out["session_id"])
        if e.get("type") == "user"
        for c in (e["message"].get("content") or [])
        if isinstance(c, dict) and c.get("type") == "tool_result"
    ]
    assert len(results) == 1 and not results[0].get("is_error"), results
    text = json.dumps(results[0]["content"])
    assert "pending_proposals" in text and os.environ["SKILLOPT_SLEEP_HOME"] in text.replace(
        "\\\\", "\\"
    )
    assert "pending_proposals" in sim.brain.texts[-1]  # and it was sent back to the model


def test_where_claude_shows_the_plugin_after_install(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    """What docs/plugins.md says a user sees after `install claude-code`: `claude plugin list`
    lists only plugins installed into Claude Code's cache, so it says "No plugins installed";
    `claude mcp list` shows the plugin's server (namespaced ``plugin:<plugin>:<server>``)
    connected, `claude mcp get` finds it by that name only, and a session's init event lists
    the plugin, its server, its slash commands and its skill."""
    env = base_env(isolated_home)
    skillopt_ok("install", "claude-code", env=env)
    listed = run([binary("claude"), "plugin", "list"], env, workdir).stdout
    assert listed.startswith("No plugins installed")
    assert (
        json.loads(run([binary("claude"), "plugin", "list", "--json"], env, workdir).stdout) == []
    )
    servers = run([binary("claude"), "mcp", "list"], env, workdir, timeout=TIMEOUT).stdout
    server = "plugin:skillopt-sleep:skillopt-sleep"
    [line] = [x for x in servers.splitlines() if x.startswith(server + ":")]
    assert "skillopt-sleep mcp" in line and "Connected" in line, servers
    got = run([binary("claude"), "mcp", "get", server], env, workdir).stdout
    assert "Connected" in got
    short = subprocess.run(
        [binary("claude"), "mcp", "get", "skillopt-sleep"],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert short.returncode != 0 and "No MCP server named" in short.stdout + short.stderr

    proc = run(
        [binary("claude"), "-p", "hello", "--output-format", "stream-json", "--verbose"],
        claude_env(isolated_home, sim),
        workdir,
    )
    init = json.loads(proc.stdout.splitlines()[0])
    assert init["subtype"] == "init"
    [plugin] = [p for p in init["plugins"] if p["name"] == "skillopt-sleep"]
    assert plugin["source"] == "skillopt-sleep@skillopt-sleep"
    assert {"name": server, "status": "connected", "source": "plugin"} in init["mcp_servers"]
    assert {f"skillopt-sleep:{c}" for c in ("status", "review", "adopt", "run")} <= set(
        init["slash_commands"]
    )
    assert "skillopt-sleep:skillopt-sleep" in init["skills"]


SETTINGS_MODEL = "sim-model-from-settings"


def test_claude_ignores_a_settings_json_with_comments_or_a_trailing_comma(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    """What `install claude-code`'s refusal of a non-strict ``settings.json`` rests on, shown
    with the real CLI: the ``model`` a strict file sets is the model of the request the CLI
    sends; the same file with a ``//`` comment or a trailing comma is ignored (the CLI's own
    default model is sent), and the CLI leaves the file as it is. Install refuses exactly
    those files and writes nothing."""
    settings = isolated_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    forms = {
        "strict": '{\n  "model": "MODEL",\n  "env": {"DISABLE_TELEMETRY": "1"}\n}\n',
        "comment": '{\n  // my model\n  "model": "MODEL",\n  "env": {"DISABLE_TELEMETRY": "1"}\n}\n',
        "trailing comma": '{\n  "model": "MODEL",\n  "env": {"DISABLE_TELEMETRY": "1"},\n}\n',
    }
    env = base_env(isolated_home)
    sent: dict[str, str] = {}
    for form, text in forms.items():
        text = text.replace("MODEL", SETTINGS_MODEL)
        settings.write_text(text)
        sim.stats.requests.clear()
        claude_p(isolated_home, sim, workdir, f"hello ({form})")
        [model] = {r["model"] for r in sim.stats.requests if r["endpoint"] == "/messages"}
        sent[form] = model
        assert settings.read_text() == text  # the CLI did not rewrite (or "fix") the file
        refused = skillopt_in_process("install", "claude-code", env=env, timeout=TIMEOUT)
        if form == "strict":
            assert refused.returncode == 0, refused.stderr
            skillopt_ok("uninstall", "claude-code", env=env)
        else:
            assert refused.returncode == 1 and "is not strict JSON" in refused.stderr
        assert settings.read_text() == text
    assert sent["strict"] == SETTINGS_MODEL
    assert sent["comment"] != SETTINGS_MODEL and sent["trailing comma"] != SETTINGS_MODEL
    assert sent["comment"] == sent["trailing comma"]  # both: the CLI's default, as with no file


def test_session_end_hook_reaches_the_running_daemon(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    from skillopt_sleep import daemon_client, paths

    def daemon_status() -> dict:
        return daemon_client.daemon_status().model_dump()

    cfg = paths.config_file()
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(
        tomlkit.dumps(
            {
                "sources": {
                    "claude_code": {"roots": [str(isolated_home / ".claude" / "projects")]},
                    "codex": {"roots": [str(isolated_home / ".codex" / "sessions")]},
                },
                "rescan_seconds": 3600,
                "schedule": "03:00",
            }
        )
    )
    env = base_env(isolated_home, SKILLOPT_DAEMON_QUIET="1")
    skillopt_ok("install", "claude-code", env=env)
    run([sys.executable, "-m", "skillopt_sleep", "start"], env, timeout=90)
    try:
        deadline = time.monotonic() + 30
        while daemon_status().get("ingest_pending") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        before = daemon_status()
        assert before["running"], before
        fulls_before = before.get("last_ingest") or {}
        claude_p(isolated_home, sim, workdir, "hello there")
        # only an ingest-now request makes a *full* pass (file events ingest single files)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            last = daemon_status().get("last_ingest") or {}
            if (
                last.get("full")
                and last != fulls_before
                and last.get("at") != fulls_before.get("at")
            ):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"no full ingest after the session ended: {daemon_status()}")
        # and the session that just ended is in the store
        from skillopt_sleep.store import Store

        store = Store(paths.db_path())
        prompts = [
            m["text"]
            for m in db_rows(store, "messages", "source = 'claude_code' and kind = 'prompt'")
        ]
        store.close()
        assert "hello there" in prompts, prompts
    finally:
        subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", "stop"],
            env=env,
            capture_output=True,
            timeout=90,
        )


# ----------------------------------------------------------------------------- Codex
def test_codex_mcp_list_shows_the_server_and_the_config_keeps_everything(
    isolated_home: Path, sim: Simulator
) -> None:
    ch = codex_home(isolated_home, sim)
    original = (ch / "config.toml").read_bytes()
    env = base_env(isolated_home, CODEX_HOME=str(ch))
    skillopt_ok("install", "codex", env=env)
    text = (ch / "config.toml").read_text()
    assert text.startswith(original.decode())  # providers, comments and servers untouched
    listing = run([binary("codex"), "mcp", "list", "--json"], env).stdout
    servers = {s["name"]: s for s in json.loads(listing)}
    assert set(servers) == {"other", "skillopt-sleep"}
    assert servers["skillopt-sleep"]["transport"]["command"] == "skillopt-sleep"
    assert servers["skillopt-sleep"]["transport"]["args"] == ["mcp"]
    assert servers["skillopt-sleep"]["enabled"] is True
    second = skillopt_ok("install", "codex", "--json", env=env).stdout
    assert json.loads(second)["changed"] is False
    skillopt_ok("uninstall", "codex", env=env)
    assert (ch / "config.toml").read_bytes() == original
    assert (
        sorted(p.name for p in ch.iterdir()) == ["config.toml"]
        or "skillopt-sleep" not in (ch / "config.toml").read_text()
    )


def test_codex_ignores_a_project_install_until_the_project_is_trusted(
    isolated_home: Path, tmp_path: Path
) -> None:
    """`install codex --project DIR` never trusts DIR; the note's exact lines, added to
    $CODEX_HOME/config.toml, are what makes codex load DIR/.codex/config.toml."""
    ch = isolated_home / "codex-home"
    ch.mkdir()
    project = tmp_path / "webapp"
    project.mkdir()
    env = base_env(isolated_home, CODEX_HOME=str(ch))
    report = json.loads(
        run(
            [
                sys.executable,
                "-m",
                "skillopt_sleep",
                "install",
                "codex",
                "--project",
                str(project),
                "--json",
            ],
            env,
        ).stdout
    )
    assert not (ch / "config.toml").exists()  # no trust setting written for the user
    listed = lambda: {
        s["name"]
        for s in json.loads(run([binary("codex"), "mcp", "list", "--json"], env, project).stdout)
    }
    assert "skillopt-sleep" not in listed()
    note = next(n for n in report["notes"] if "trust" in n)
    lines = [ln.strip() for ln in note.splitlines()[1:]]
    assert lines == [f'[projects."{project.resolve()}"]', 'trust_level = "trusted"']
    (ch / "config.toml").write_text("\n".join(lines) + "\n")
    assert "skillopt-sleep" in listed()


def test_codex_exec_calls_the_mcp_tool(isolated_home: Path, sim: Simulator, workdir: Path) -> None:
    ch = codex_home(isolated_home, sim)
    env = base_env(isolated_home, CODEX_HOME=str(ch), SIM_API_KEY="sim-key")
    skillopt_ok("install", "codex", env=env)
    proc = run(
        [
            binary("codex"),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "what is the sleep status?",
        ],
        env,
        workdir,
    )
    assert proc.stdout.strip() == "The sleep status is above.", proc.stderr[-3000:]
    tools = [r["tool"] for r in sim.stats.requests if r["endpoint"] == "/responses"]
    assert tools[0] == "mcp__skillopt_sleep__sleep_status", proc.stderr[-3000:]
    assert "pending_proposals" in sim.brain.texts[-1]  # the server's answer went back to the model


# ----------------------------------------------------------------------------- Copilot
def test_copilot_lists_the_server(isolated_home: Path) -> None:
    cp = isolated_home / "copilot-home"
    env = base_env(isolated_home, COPILOT_HOME=str(cp), COPILOT_AUTO_UPDATE="false")
    skillopt_ok("install", "copilot", env=env)
    listing = run([binary("copilot"), "mcp", "list", "--json"], env).stdout
    assert "skillopt-sleep" in listing
    got = run([binary("copilot"), "mcp", "get", "skillopt-sleep"], env).stdout
    assert "skillopt-sleep mcp" in got
    skillopt_ok("uninstall", "copilot", env=env)
    assert "skillopt-sleep" not in run([binary("copilot"), "mcp", "list", "--json"], env).stdout


# ----------------------------------------------------------------------------- learned skill
def adopt_a_real_proposal(home: Path, agent: str) -> Path:
    """Run a real night against the demo simulator with the managed skill of ``agent`` as
    target, adopt its proposal, return the written SKILL.md."""
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.proposals import adopt
    from skillopt_sleep.store import open_store
    from skillopt_sleep.testing.sessions import write_conversations

    project = home / "webapp"
    project.mkdir(exist_ok=True)
    write_conversations(home, project, DEMO_CONVERSATIONS)
    # a model that loads every skill it is offered, so the night can certify one
    from importlib import resources

    demo_toml = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = home / "always-load.toml"
    persona.write_text(demo_toml.read_text("utf-8") + '\n[skills]\nmatch = "always"\n')
    with serve(persona) as demo:
        settings = demo_settings(home, project, demo.url)
        settings["document"] = {"kind": "managed_skill", "agent": agent}
        store = open_store()
        try:
            result = run_night(store, load_settings(home / "none.toml", **settings))
            assert result.status == "succeeded" and result.proposal_id, result
            adopted = adopt(store, result.proposal_id)
        finally:
            store.close()
    target = Path(adopted.target_path)
    text = target.read_text()
    assert text.startswith("---\nname: skillopt-sleep-learned\ndescription: ")
    return target


def test_adopted_skill_is_in_claude_codes_skill_listing(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    target = adopt_a_real_proposal(isolated_home, "claude_code")
    assert target == isolated_home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    claude_p(isolated_home, sim, workdir, "hello")
    assert any("skillopt-sleep-learned" in t for t in sim.brain.texts), (
        "skill not listed to the model"
    )


def test_adopted_skill_is_in_codexs_skill_listing(
    isolated_home: Path, sim: Simulator, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ch = codex_home(isolated_home, sim)
    monkeypatch.setenv("CODEX_HOME", str(ch))
    target = adopt_a_real_proposal(isolated_home, "codex")
    assert target == ch / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    env = base_env(isolated_home, CODEX_HOME=str(ch), SIM_API_KEY="sim-key")
    run([binary("codex"), "exec", "--skip-git-repo-check", "hello"], env, workdir)
    assert any("skillopt-sleep-learned" in t for t in sim.brain.texts), (
        "skill not listed to the model"
    )


# ----------------------------------------------------------------------------- OpenCode
def test_opencode_lists_and_connects_the_server_and_uninstall_removes_it(
    isolated_home: Path, workdir: Path
) -> None:
    """``opencode mcp list`` (it starts each server) shows ``skillopt-sleep`` connected after
    install, and no server after uninstall, which restores the config byte for byte (opencode
    1.18.33 itself writes ``"$schema"`` into a config file lacking it; this one has it)."""
    config = isolated_home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    # with "$schema": opencode adds that key to a config file that lacks it, when it loads it
    original = (
        b'{\n  "$schema": "https://opencode.ai/config.json",\n  // mine\n'
        b'  "autoupdate": false,\n}\n'
    )
    config.write_bytes(original)
    env = base_env(
        isolated_home,
        PWD=str(workdir),
        npm_config_offline="true",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
    )
    skillopt_ok("install", "opencode", env=env)
    listing = run([binary("opencode"), "mcp", "list"], env, workdir).stdout
    assert "skillopt-sleep" in listing and "connected" in listing, listing
    assert "skillopt-sleep mcp" in listing
    skillopt_ok("uninstall", "opencode", env=env)
    assert config.read_bytes() == original
    assert "skillopt-sleep" not in run([binary("opencode"), "mcp", "list"], env, workdir).stdout


# ----------------------------------------------------------------------------- Pi
def test_pi_sends_the_snippet_and_lists_the_skill_after_install(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    """Pi has no MCP client: after ``install pi`` the real ``pi -p`` sends the snippet (its
    AGENTS.md) in the system prompt and lists the ``skillopt-sleep`` skill; after uninstall
    neither, and the Pi folder is as before, byte for byte."""
    pi_home = isolated_home / ".pi" / "agent"
    models = {
        "providers": {
            "sim": {
                "baseUrl": f"{sim.url}/v1",
                "api": "openai-completions",
                "apiKey": "SIM_API_KEY",
                "models": [{"id": "sim"}],
            }
        }
    }
    pi_home.mkdir(parents=True)
    (pi_home / "models.json").write_text(json.dumps(models))
    (pi_home / "AGENTS.md").write_text("# My rules\n")
    (pi_home / "auth.json").write_text("{}")  # pi writes this (empty) file when it is missing
    before = {p: p.read_bytes() for p in pi_home.rglob("*") if p.is_file()}
    env = base_env(isolated_home, SIM_API_KEY="sim-key", PI_OFFLINE="1")
    argv = [binary("pi"), "--provider", "sim", "--model", "sim", "-p", "hello", "--no-session"]
    skillopt_ok("install", "pi", env=env)
    run(argv, env, workdir)
    seen = sim.brain.texts[-1]
    assert "# My rules\n\n<!-- skillopt-sleep-plugin:begin pi" in seen  # the file as it is
    assert "run the `skillopt-sleep` command line with the bash" in seen
    assert "<name>skillopt-sleep</name>" in seen
    skillopt_ok("uninstall", "pi", env=env)
    run(argv, env, workdir)
    seen = sim.brain.texts[-1]
    assert "skillopt-sleep` command line" not in seen and "<name>skillopt-sleep</name>" not in seen
    assert {p: p.read_bytes() for p in pi_home.rglob("*") if p.is_file()} == before


# ----------------------------------------------------------------------------- OpenClaw
def test_openclaw_probes_the_server_sees_skill_and_snippet_and_uninstall_restores(
    isolated_home: Path, sim: Simulator, workdir: Path
) -> None:
    """After ``install openclaw`` the real CLI (2026.9.6) connects to the server (``openclaw mcp
    probe``, no model call: our tools), reports the skill ready and visible to the model
    (``skills info``), and one ``agent --local`` turn sends the workspace snippet and the skill
    in its system prompt; after uninstall ``mcp list`` has no server and every file install
    touched is as before, byte for byte (OpenClaw's turn writes neither file; its runtime state
    goes to other files of the state folder). The user's ``openclaw.json`` is JSON5 (unquoted
    keys, single quotes, a comment, trailing commas), which OpenClaw reads and install edits
    in place."""
    import json5

    state = isolated_home / ".openclaw"
    config = write_openclaw_config(state, f"{sim.url}/v1", "sim", "SIM_API_KEY")
    config.write_text(
        "// my OpenClaw config\n"
        + json5.dumps(
            json.loads(config.read_text()),
            indent=2,
            quote_keys=False,
            trailing_commas=True,
            quote_style=json5.QuoteStyle.ALWAYS_SINGLE,
        )
        + "\n"
    )
    assert "models: {" in config.read_text() and "'openai-completions'," in config.read_text()
    (state / "workspace").mkdir()
    (state / "workspace" / "AGENTS.md").write_text("# My rules\n")
    env = base_env(isolated_home, SIM_API_KEY="sim-key", **OPENCLAW_QUIET)
    oc = binary("openclaw")
    before = {p: p.read_bytes() for p in (config, state / "workspace" / "AGENTS.md")}
    skillopt_ok("install", "openclaw", env=env)
    probe = json.loads(run([oc, "mcp", "probe", "skillopt-sleep", "--json"], env).stdout)
    assert probe["servers"]["skillopt-sleep"]["launch"] == "skillopt-sleep mcp", probe
    assert "skillopt-sleep__sleep_status" in probe["tools"], probe
    info = run([oc, "skills", "info", "skillopt-sleep"], env).stdout
    assert "openclaw-managed" in info and "Visible to model: yes" in info, info
    run([oc, "agent", "--local", "--agent", "main", "-m", "sleep status", "--json"], env, workdir)
    seen = sim.brain.texts[-1]
    assert "# My rules\n\n<!-- skillopt-sleep-plugin:begin openclaw" in seen
    assert "use the `skillopt-sleep`\nMCP tools" in seen  # the snippet
    assert "<name>skillopt-sleep</name>" in seen  # the skill listing
    skillopt_ok("uninstall", "openclaw", env=env)
    assert {p: p.read_bytes() for p in before} == before
    assert not (state / "skills" / "skillopt-sleep").exists()
    assert "skillopt-sleep" not in run([oc, "mcp", "list"], env).stdout


def test_openclaw_project_install_is_a_workspace_skill(isolated_home: Path, tmp_path: Path) -> None:
    """``install openclaw --project DIR``: with DIR as OpenClaw's workspace the real CLI
    reports the skill from the workspace (``openclaw-workspace``), and not after uninstall."""
    project = tmp_path / "ws"
    project.mkdir()
    state = isolated_home / ".openclaw"
    state.mkdir()
    (state / "openclaw.json").write_text(
        json.dumps({"agents": {"defaults": {"workspace": str(project)}}})
    )
    env = base_env(isolated_home, **OPENCLAW_QUIET)
    oc = binary("openclaw")
    skillopt_ok("install", "openclaw", "--project", str(project), env=env)
    info = run([oc, "skills", "info", "skillopt-sleep"], env, project).stdout
    assert "Source: openclaw-workspace" in info, info
    assert str(project / "skills" / "skillopt-sleep" / "SKILL.md") in info
    run(
        [
            sys.executable,
            "-m",
            "skillopt_sleep",
            "uninstall",
            "openclaw",
            "--project",
            str(project),
        ],
        env,
    )
    gone = subprocess.run(
        [oc, "skills", "info", "skillopt-sleep"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert gone.returncode == 1 and 'Skill "skillopt-sleep" not found' in gone.stdout + gone.stderr
    assert list(project.iterdir()) == []
