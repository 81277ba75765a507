"""`skillopt-sleep install / uninstall <agent>` without any agent CLI: merges, idempotence,
byte-exact restore, dry runs, refusals, the hook, the learned-skill locations, the wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import tomlkit

from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.delivery.document import SKILL_NAME, resolve_target
from skillopt_sleep.install import (
    AGENTS,
    InstallError,
    install,
    jsonedit,
    plugins_root,
    state_folder,
    uninstall,
)
from skillopt_sleep.service import session_end_hook
from tests.helpers.cli_run import skillopt_in_process

ROOT = Path(__file__).resolve().parents[2]

CODEX_TOML = """\
# my codex config
model = "gpt-5"
model_provider = "local"   # the local one

[model_providers.local]
name = "Local"
base_url = "http://127.0.0.1:11434/v1"

[mcp_servers.other]
command = "other-mcp"
args = ["--flag"]   # keep

[profiles.fast]
model = "small"
"""
CLAUDE_SETTINGS = '{\n  "model": "opus",\n  "enabledPlugins": {\n    "other@market": true\n  }\n}\n'
COPILOT_MCP = '{\n  "mcpServers": {\n    "github": {\n      "type": "http",\n      "url": "https://example.invalid/mcp"\n    }\n  }\n}\n'
DEVIN_JSONC = '{\n  // my devin settings\n  "agent": { "model": "claude-sonnet-4.5" },\n}\n'
AGENTS_MD = "# My rules\n\n- Keep answers short.\n"
OPENCODE_JSONC = (
    '{\n  // my opencode config\n  "$schema": "https://opencode.ai/config.json",\n'
    '  "model": "local/qwen",\n  "mcp": {\n    "other": { "type": "remote", '
    '"url": "https://example.invalid/mcp" },\n  },\n}\n'
)

# what `openclaw mcp set` leaves (2026.9.6), plus a comment and a trailing comma (JSON5)
OPENCLAW_JSON = (
    '{\n  // my openclaw config\n  "mcp": {\n    "servers": {\n      "docs": {\n'
    '        "command": "docs-mcp"\n      }\n    }\n  },\n  "meta": {\n'
    '    "lastTouchedVersion": "2026.9.6"\n  },\n}\n'
)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def dirs(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


@pytest.fixture
def agent_homes(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Existing user configs for every agent, with other entries, comments and odd formatting."""
    codex, copilot = isolated_home / "codex-home", isolated_home / "copilot-home"
    monkeypatch.setenv("CODEX_HOME", str(codex))
    monkeypatch.setenv("COPILOT_HOME", str(copilot))
    files = {
        codex / "config.toml": CODEX_TOML,
        codex / "AGENTS.md": AGENTS_MD,
        isolated_home / ".claude" / "settings.json": CLAUDE_SETTINGS,
        copilot / "mcp-config.json": COPILOT_MCP,
        isolated_home / ".config" / "devin" / "config.json": DEVIN_JSONC,
        isolated_home / ".config" / "opencode" / "opencode.json": OPENCODE_JSONC,
        isolated_home / ".config" / "opencode" / "AGENTS.md": AGENTS_MD,
        isolated_home / ".openclaw" / "openclaw.json": OPENCLAW_JSON,
        isolated_home / ".openclaw" / "workspace" / "AGENTS.md": AGENTS_MD,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    return isolated_home


@pytest.mark.parametrize("agent", AGENTS)
def test_install_twice_changes_nothing_and_uninstall_restores_every_byte(
    agent: str, agent_homes: Path
) -> None:
    before, before_dirs = snapshot(agent_homes), dirs(agent_homes)
    first = install(agent)
    assert first.changed and all(c.action in ("create", "update") for c in first.changes)
    after_first = snapshot(agent_homes)
    assert after_first != before
    second = install(agent)
    assert not second.changed and {c.action for c in second.changes} == {"unchanged"}
    assert snapshot(agent_homes) == after_first
    undo = uninstall(agent)
    assert undo.changed
    assert snapshot(agent_homes) == before
    assert dirs(agent_homes) == before_dirs  # folders install created are gone too
    assert not state_folder(agent, None).exists()
    assert "not installed" in uninstall(agent).notes[0]


def test_codex_merge_keeps_providers_comments_and_servers(agent_homes: Path) -> None:
    install("codex")
    codex = agent_homes / "codex-home"
    text = (codex / "config.toml").read_text()
    assert text.startswith(
        CODEX_TOML.split("[profiles.fast]")[0]
    )  # everything before: byte for byte
    for line in CODEX_TOML.splitlines():
        assert line in text
    doc = tomlkit.parse(text).unwrap()
    assert doc["mcp_servers"]["other"] == {"command": "other-mcp", "args": ["--flag"]}
    assert doc["mcp_servers"]["skillopt-sleep"]["command"] == "skillopt-sleep"
    assert doc["mcp_servers"]["skillopt-sleep"]["args"] == ["mcp"]
    assert doc["model_providers"]["local"]["base_url"] == "http://127.0.0.1:11434/v1"
    assert doc["profiles"]["fast"] == {"model": "small"}
    skill = (codex / "skills" / "skillopt-sleep" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: skillopt-sleep\ndescription: ")
    agents_md = (codex / "AGENTS.md").read_text()
    assert agents_md.startswith(AGENTS_MD + "\n<!-- skillopt-sleep-plugin:begin")
    assert "`skillopt-sleep`" in agents_md and agents_md.endswith(
        "<!-- skillopt-sleep-plugin:end codex -->\n"
    )


def test_claude_code_settings_enable_the_plugin_directory(agent_homes: Path) -> None:
    install("claude-code")
    settings = jsonedit.loads((agent_homes / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus"
    assert settings["enabledPlugins"] == {
        "other@market": True,
        "skillopt-sleep@skillopt-sleep": True,
    }
    source = settings["extraKnownMarketplaces"]["skillopt-sleep"]["source"]
    assert source["source"] == "directory"
    assert (Path(source["path"]) / ".claude-plugin" / "marketplace.json").is_file()
    assert Path(source["path"]) == plugins_root() / "claude-code"


def test_copilot_and_devin_entries(agent_homes: Path) -> None:
    install("copilot")
    install("devin")
    cop = jsonedit.loads((agent_homes / "copilot-home" / "mcp-config.json").read_text())
    assert set(cop["mcpServers"]) == {"github", "skillopt-sleep"}
    assert cop["mcpServers"]["skillopt-sleep"] == {
        "type": "local",
        "command": "skillopt-sleep",
        "args": ["mcp"],
        "tools": ["*"],
    }
    assert (agent_homes / "copilot-home" / "skills" / "skillopt-sleep" / "SKILL.md").is_file()
    assert (
        "skillopt-sleep-plugin:begin"
        in (agent_homes / "copilot-home" / "copilot-instructions.md").read_text()
    )
    devin_text = (agent_homes / ".config" / "devin" / "config.json").read_text()
    assert "// my devin settings" in devin_text  # JSONC comment kept
    devin = jsonedit.loads(devin_text)
    assert devin["agent"] == {"model": "claude-sonnet-4.5"}
    assert devin["mcpServers"]["skillopt-sleep"] == {"command": "skillopt-sleep", "args": ["mcp"]}
    assert (agent_homes / ".config" / "devin" / "skills" / "skillopt-sleep" / "SKILL.md").is_file()
    assert (agent_homes / ".config" / "devin" / "AGENTS.md").is_file()


def test_opencode_entries(agent_homes: Path) -> None:
    install("opencode")
    config = agent_homes / ".config" / "opencode"
    text = (config / "opencode.json").read_text()
    assert "// my opencode config" in text  # JSONC comment kept
    doc = jsonedit.loads(text)
    assert doc["model"] == "local/qwen"
    assert doc["mcp"]["other"] == {"type": "remote", "url": "https://example.invalid/mcp"}
    assert doc["mcp"]["skillopt-sleep"] == {
        "type": "local",
        "command": ["skillopt-sleep", "mcp"],
        "enabled": True,
    }
    assert (config / "skills" / "skillopt-sleep" / "SKILL.md").is_file()
    agents_md = (config / "AGENTS.md").read_text()
    assert agents_md.startswith(AGENTS_MD + "\n<!-- skillopt-sleep-plugin:begin")
    assert agents_md.endswith("<!-- skillopt-sleep-plugin:end opencode -->\n")


def test_openclaw_entries(agent_homes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = agent_homes / ".openclaw"
    report = install("openclaw")
    assert sorted(str(c.path.relative_to(state)) for c in report.changes) == [
        "openclaw.json",
        "skills/skillopt-sleep/SKILL.md",
        "workspace/AGENTS.md",
    ]
    text = (state / "openclaw.json").read_text()
    assert text.startswith('{\n  // my openclaw config\n  "mcp": {')  # comment kept
    doc = jsonedit.loads(text)
    assert doc["meta"] == {"lastTouchedVersion": "2026.9.6"}
    assert doc["mcp"]["servers"] == {
        "docs": {"command": "docs-mcp"},
        "skillopt-sleep": {"command": "skillopt-sleep", "args": ["mcp"]},
    }
    skill = (state / "skills" / "skillopt-sleep" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: skillopt-sleep\ndescription: ")
    agents_md = (state / "workspace" / "AGENTS.md").read_text()
    assert agents_md.startswith(AGENTS_MD + "\n<!-- skillopt-sleep-plugin:begin openclaw")
    assert agents_md.endswith("<!-- skillopt-sleep-plugin:end openclaw -->\n")
    assert not any("workspace" in n for n in report.notes)
    uninstall("openclaw")
    # $OPENCLAW_STATE_DIR moves all of it; a workspace moved elsewhere is named in a note,
    # and a workspace OpenClaw has not written yet gets no AGENTS.md of ours (its first run
    # writes its template there): install says to run again after that
    moved = agent_homes / "oc-state"
    moved.mkdir()
    (moved / "openclaw.json").write_text('{"agents": {"defaults": {"workspace": "~/ws"}}}\n')
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(moved))
    report = install("openclaw")
    assert {str(c.path.relative_to(moved)) for c in report.changes} == {
        "openclaw.json",
        "skills/skillopt-sleep/SKILL.md",
    }
    ws = Path.home() / "ws"
    assert [n for n in report.notes if "workspace" in n] == [
        f"OpenClaw's workspace is {ws} (its config or OPENCLAW_WORKSPACE_DIR / "
        f"OPENCLAW_PROFILE), so {moved / 'workspace' / 'AGENTS.md'} is not loaded; run "
        f"`skillopt-sleep install openclaw --project {ws}` to add the AGENTS.md snippet to "
        "that workspace"
    ]
    uninstall("openclaw")
    (moved / "openclaw.json").write_text("{}\n")
    report = install("openclaw")
    assert any("has not set up its workspace yet" in n for n in report.notes), report.notes
    (moved / "workspace").mkdir()
    (moved / "workspace" / "AGENTS.md").write_text(AGENTS_MD)  # OpenClaw's first run
    report = install("openclaw")
    assert [(c.path.name, c.action) for c in report.changes if c.action != "unchanged"] == [
        ("AGENTS.md", "update")
    ]
    assert not any("workspace" in n for n in report.notes)
    uninstall("openclaw")
    assert snapshot(moved) == {"openclaw.json": b"{}\n", "workspace/AGENTS.md": AGENTS_MD.encode()}


def test_openclaw_project_install_is_a_workspace_without_mcp(
    tmp_path: Path, isolated_home: Path
) -> None:
    """OpenClaw keeps MCP servers only in its state folder: a project (an OpenClaw workspace)
    gets the skill in DIR/skills and the snippet in DIR/AGENTS.md, and a note saying so."""
    project = tmp_path / "ws"
    project.mkdir()
    (project / "AGENTS.md").write_text(AGENTS_MD)
    before, home_before = snapshot(project), snapshot(isolated_home)
    report = install("openclaw", project)
    assert sorted(str(c.path.relative_to(project)) for c in report.changes) == [
        "AGENTS.md",
        "skills/skillopt-sleep/SKILL.md",
    ]
    assert any("MCP servers only in" in n for n in report.notes)
    assert snapshot(isolated_home) == home_before  # no openclaw.json written
    assert "plugin:begin openclaw" in (project / "AGENTS.md").read_text()
    uninstall("openclaw", project)
    assert snapshot(project) == before and not (project / "skills").exists()


def test_pi_gets_a_skill_and_a_snippet_naming_the_command_line(agent_homes: Path) -> None:
    report = install("pi")
    pi_home = agent_homes / ".pi" / "agent"
    assert sorted(str(c.path.relative_to(pi_home)) for c in report.changes) == [
        "AGENTS.md",
        "skills/skillopt-sleep/SKILL.md",
    ]
    skill = (pi_home / "skills" / "skillopt-sleep" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: skillopt-sleep\ndescription: ")
    assert "`skillopt-sleep adopt ID`" in skill and "MCP tools" not in skill
    snippet = (pi_home / "AGENTS.md").read_text()
    assert snippet.startswith("<!-- skillopt-sleep-plugin:begin")
    assert "with the bash\ntool" in snippet


def test_project_scope(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "webapp"
    (project / ".vscode").mkdir(parents=True)
    vscode = '{\n  // workspace servers\n  "servers": {\n    "db": {"type": "stdio", "command": "db-mcp"}\n  }\n}\n'
    (project / ".vscode" / "mcp.json").write_text(vscode)
    (project / "AGENTS.md").write_text(AGENTS_MD)
    before = snapshot(project)
    home_before = snapshot(isolated_home)
    for agent in AGENTS:
        assert install(agent, project).changed
        assert not install(agent, project).changed
    assert snapshot(isolated_home) == home_before  # nothing in the user's own config
    vs = jsonedit.loads((project / ".vscode" / "mcp.json").read_text())
    assert vs["servers"]["skillopt-sleep"] == {
        "type": "stdio",
        "command": "skillopt-sleep",
        "args": ["mcp"],
    }
    assert "db" in vs["servers"]
    claude = json.loads((project / ".claude" / "settings.json").read_text())
    assert claude["enabledPlugins"] == {"skillopt-sleep@skillopt-sleep": True}
    assert (
        "skillopt-sleep"
        in tomlkit.parse((project / ".codex" / "config.toml").read_text())["mcp_servers"]
    )
    for rel in (
        ".agents/skills/skillopt-sleep/SKILL.md",
        ".github/skills/skillopt-sleep/SKILL.md",
        ".devin/skills/skillopt-sleep/SKILL.md",
        ".devin/config.json",
        ".github/copilot-instructions.md",
    ):
        assert (project / rel).is_file(), rel
    # codex and devin share AGENTS.md: one block each, so one uninstall leaves the other's
    text = (project / "AGENTS.md").read_text()
    assert text.count("skillopt-sleep-plugin:begin codex") == 1
    assert text.count("skillopt-sleep-plugin:begin devin") == 1
    uninstall("codex", project)
    text = (project / "AGENTS.md").read_text()
    assert "plugin:begin codex" not in text and "plugin:begin devin" in text
    assert not install("devin", project).changed  # devin still counts as installed
    for agent in AGENTS:
        if agent != "codex":
            uninstall(agent, project)
    assert snapshot(project) == before


def test_project_install_says_codex_and_claude_code_must_trust_the_folder(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = isolated_home / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    project = tmp_path / "web app"
    project.mkdir()
    home_before = snapshot(isolated_home)
    env = dict(os.environ, COLUMNS="500")
    run = lambda *a: skillopt_in_process(*a, env=env, timeout=60)
    p = run("install", "codex", "--project", str(project), "--json")
    assert p.returncode == 0, p.stderr
    notes = [n for n in json.loads(p.stdout)["notes"] if "trust" in n]
    assert len(notes) == 1 and str(codex_home / "config.toml") in notes[0]
    assert "accept the trust prompt" in notes[0]
    # the exact lines to add: a valid TOML table trusting the absolute project path
    trusted = tomlkit.parse("\n".join(ln.strip() for ln in notes[0].splitlines()[1:])).unwrap()
    assert trusted == {"projects": {str(project.resolve()): {"trust_level": "trusted"}}}
    p = run("install", "claude-code", "--project", str(project))
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    assert "note: Claude Code ignores" in out and "accept the trust prompt" in out
    assert "hasTrustDialogAccepted" in out and str(isolated_home / ".claude.json") in out
    # a second install (nothing to change) still says it; dry runs too
    assert any("trust" in n for n in install("codex", project).notes)
    assert any("trust" in n for n in install("claude-code", project, dry_run=True).notes)
    # never written for the user: trusting a folder is the user's decision
    assert snapshot(isolated_home) == home_before
    # other agents and user installs need no trust step
    for agent in ("copilot", "devin"):
        assert not any("trust" in n for n in install(agent, project).notes)
    for agent in ("codex", "claude-code"):
        assert not any("trust" in n for n in install(agent).notes)


def test_dry_run_writes_nothing(agent_homes: Path) -> None:
    before = snapshot(agent_homes)
    for agent in AGENTS:
        report = install(agent, dry_run=True)
        assert report.changed and report.dry_run
    assert snapshot(agent_homes) == before
    install("codex")
    after = snapshot(agent_homes)
    assert uninstall("codex", dry_run=True).changed
    assert snapshot(agent_homes) == after


def test_uninstall_after_user_edits_removes_only_our_part(agent_homes: Path) -> None:
    install("codex")
    install("copilot")
    cfg = agent_homes / "codex-home" / "config.toml"
    cfg.write_text(cfg.read_text() + '\n[mcp_servers.added_later]\ncommand = "later"\n')
    mcp = agent_homes / "copilot-home" / "mcp-config.json"
    mcp.write_text(jsonedit.set_key(mcp.read_text(), ["theme"], "dark"))
    skill = agent_homes / "codex-home" / "skills" / "skillopt-sleep" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nMy own note.\n")
    codex_report = {c.path.name: c.action for c in uninstall("codex").changes}
    assert codex_report == {"config.toml": "edit", "SKILL.md": "keep", "AGENTS.md": "restore"}
    doc = tomlkit.parse(cfg.read_text()).unwrap()
    assert set(doc["mcp_servers"]) == {"other", "added_later"}
    assert cfg.read_text().startswith(CODEX_TOML)
    assert skill.read_text().endswith("My own note.\n")  # the user's edit is not thrown away
    uninstall("copilot")
    data = jsonedit.loads(mcp.read_text())
    assert data == {
        "mcpServers": {"github": {"type": "http", "url": "https://example.invalid/mcp"}},
        "theme": "dark",
    }


def test_invalid_config_is_refused_untouched(agent_homes: Path) -> None:
    bad = agent_homes / "copilot-home" / "mcp-config.json"
    bad.write_text('{"mcpServers": {')
    with pytest.raises(InstallError, match="not valid JSON"):
        install("copilot")
    assert bad.read_text() == '{"mcpServers": {'
    assert not (agent_homes / "copilot-home" / "skills").exists()
    toml = agent_homes / "codex-home" / "config.toml"
    toml.write_text("[broken\n")
    with pytest.raises(InstallError, match="not valid TOML"):
        install("codex")
    with pytest.raises(InstallError, match="unknown agent"):
        install("cursor")


def test_cli_prints_a_summary_and_json(agent_homes: Path) -> None:
    env = dict(os.environ)
    run = lambda *a: skillopt_in_process(*a, env=env, timeout=60)
    p = run("install", "codex", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "dry run" in p.stdout and "update" in p.stdout and "config.toml" in p.stdout
    p = run("install", "codex")
    assert p.returncode == 0 and "+ create" in p.stdout
    p = run("install", "codex", "--json")
    assert json.loads(p.stdout)["changed"] is False
    p = run("install", "codex", "--user", "--project", str(agent_homes))
    assert p.returncode == 1 and p.stderr.startswith("error: --user and --project")
    p = run("uninstall", "codex")
    assert p.returncode == 0 and "restore" in p.stdout
    assert (agent_homes / "codex-home" / "config.toml").read_text() == CODEX_TOML
    p = run("install", "nope")
    assert p.returncode != 0


@pytest.mark.parametrize(
    "broken",
    [
        '{\n  // my settings\n  "model": "opus"\n}\n',
        '{\n  "model": "opus",\n  "enabledPlugins": {"other@market": true,},\n}\n',
    ],
)
def test_install_refuses_a_claude_settings_file_claude_would_ignore(
    agent_homes: Path, broken: str
) -> None:
    """Claude Code reads settings.json as strict JSON and ignores the whole file when it has
    comments or a trailing comma: install exits 1 with the reason and writes nothing."""
    settings = agent_homes / ".claude" / "settings.json"
    settings.write_text(broken)
    before, before_dirs = snapshot(agent_homes), dirs(agent_homes)
    p = skillopt_in_process("install", "claude-code", timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    [line] = p.stderr.strip().splitlines()
    assert line.startswith(f"error: {settings} is not strict JSON (")
    assert "comments or a trailing comma" in line and "nothing was written" in line
    assert snapshot(agent_homes) == before and dirs(agent_homes) == before_dirs
    assert not state_folder("claude-code", None).exists()
    # the same file made strict JSON installs, and stays strict JSON
    settings.write_text(CLAUDE_SETTINGS)
    assert install("claude-code").changed
    assert json.loads(settings.read_text())["enabledPlugins"]["other@market"] is True


def test_session_end_hook_is_silent_and_instant_without_a_daemon() -> None:
    t0 = time.monotonic()
    assert session_end_hook() == "no daemon"
    p = subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", "hook", "session-end"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert time.monotonic() - t0 < 10


def test_session_end_hook_reaches_the_control_socket() -> None:
    from skillopt_sleep.daemon.control import ControlServer

    got: list[dict] = []
    slow = {"ingest-now": 2.0}

    def handler(req: dict) -> dict:
        got.append(req)
        time.sleep(slow.pop(req["cmd"], 0))
        return {"ok": True}

    server = ControlServer(handler).start()
    try:
        t0 = time.monotonic()
        assert session_end_hook() == "sent"  # the daemon is still ingesting: do not wait
        assert time.monotonic() - t0 < 1.5
        assert session_end_hook() == "answered"
    finally:
        server.close()
    assert got == [{"cmd": "ingest-now"}, {"cmd": "ingest-now"}]


def test_learned_skill_locations_per_agent(tmp_path: Path) -> None:
    home = tmp_path / "h"
    where = {
        a: resolve_target(DocumentConfig(kind="managed_skill", agent=a), None, env={}, home=home)
        for a in ("claude_code", "codex", "copilot", "devin")
    }
    assert where == {
        "claude_code": home / ".claude" / "skills" / SKILL_NAME / "SKILL.md",
        "codex": home / ".codex" / "skills" / SKILL_NAME / "SKILL.md",
        "copilot": home / ".copilot" / "skills" / SKILL_NAME / "SKILL.md",
        "devin": home / ".config" / "devin" / "skills" / SKILL_NAME / "SKILL.md",
    }
    env = {"COPILOT_HOME": str(tmp_path / "cp"), "CODEX_HOME": str(tmp_path / "cx")}
    assert (
        resolve_target(
            DocumentConfig(kind="managed_skill", agent="copilot"), None, env=env, home=home
        )
        == tmp_path / "cp" / "skills" / SKILL_NAME / "SKILL.md"
    )


def test_shared_skill_copies_are_identical_and_valid() -> None:
    root = plugins_root()
    assert root == ROOT / "plugins"
    texts = {
        a: (root / a / "skills" / "skillopt-sleep" / "SKILL.md").read_text()
        for a in ("codex", "copilot", "devin", "opencode", "openclaw")
    }
    assert len(set(texts.values())) == 1
    for text in [
        *texts.values(),
        (root / "claude-code" / "skills" / "skillopt-sleep" / "SKILL.md").read_text(),
    ]:
        head = text.split("---\n")[1]
        assert head.startswith("name: skillopt-sleep\ndescription: ")
    for tool in (
        "sleep_status",
        "list_proposals",
        "get_proposal",
        "adopt_proposal",
        "reject_proposal",
        "lift_refusal",
        "rollback",
        "run_night",
        "get_night",
        "list_tasks",
        "search_sessions",
        "get_skill",
    ):
        assert f"`{tool}`" in texts["codex"]


def test_plugin_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(ROOT / "plugins", tmp_path / "p")
    monkeypatch.setenv("SKILLOPT_SLEEP_PLUGINS_DIR", str(tmp_path / "p"))
    assert plugins_root() == (tmp_path / "p").resolve()


def test_pyproject_ships_every_plugin_file_as_data() -> None:
    """A wheel must carry plugins/ (the source of truth) to <prefix>/share/skillopt-sleep/plugins,
    where plugins_root() looks; a new plugin file without a data-files line fails here."""
    import tomllib

    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "data-files"
    ]
    shipped = {}
    for dest, sources in data_files.items():
        for src in sources:
            shipped[src] = f"{dest}/{Path(src).name}"
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "plugins").rglob("*") if p.is_file()}
    assert set(shipped) == want
    assert all(dest == "share/skillopt-sleep/" + src for src, dest in shipped.items())


def test_the_wheel_ships_every_plugin_file(tmp_path: Path) -> None:
    try:
        from setuptools.command import bdist_wheel  # noqa: F401  (setuptools >= 70.1)
    except ImportError:
        why = (
            "no wheel-building setuptools here (needs >= 70.1 offline, in the test extras); "
            "test_pyproject_ships_every_plugin_file_as_data checks the mapping"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = zipfile.ZipFile(next(tmp_path.glob("skillopt_sleep-*.whl")))
    marker = "/data/share/skillopt-sleep/plugins/"
    shipped = {n.split(marker, 1)[1]: n for n in wheel.namelist() if marker in n}
    want = {
        p.relative_to(ROOT / "plugins").as_posix()
        for p in (ROOT / "plugins").rglob("*")
        if p.is_file()
    }
    assert set(shipped) == want
    for rel, name in shipped.items():
        assert wheel.read(name) == (ROOT / "plugins" / rel).read_bytes()
    css = "skillopt_sleep/ui/static/style.css"  # the dashboard's only asset: no CDN
    assert wheel.read(css) == (ROOT / css).read_bytes()
    for template in (ROOT / "skillopt_sleep/ui/templates").glob("*.html"):  # the pages' markup
        name = template.relative_to(ROOT).as_posix()
        assert wheel.read(name) == template.read_bytes()


@pytest.mark.parametrize("order", ["same", "reverse"])
def test_project_installs_sharing_agents_md_leave_nothing_whatever_the_uninstall_order(
    tmp_path: Path, order: str
) -> None:
    """OpenCode and Pi both put their snippet in the project's AGENTS.md: after both
    uninstalls, in either order, the project is as before (no empty AGENTS.md left); a file
    the user had keeps its bytes."""
    for had in (None, b"# Team rules\n"):
        project = tmp_path / f"p-{order}-{had is not None}"
        project.mkdir()
        if had is not None:
            (project / "AGENTS.md").write_bytes(had)
        before = snapshot(project)
        install("opencode", project)
        install("pi", project)
        text = (project / "AGENTS.md").read_text()
        assert "plugin:begin opencode" in text and "plugin:begin pi" in text
        first, second = ("opencode", "pi") if order == "same" else ("pi", "opencode")
        uninstall(first, project)
        assert (project / "AGENTS.md").exists()
        report = uninstall(second, project)
        assert snapshot(project) == before, report.changes
        assert dirs(project) == set(), dirs(project)
