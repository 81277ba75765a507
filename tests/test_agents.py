"""The agent registry (`skillopt_sleep.agents`) and everything that derives from it: config's
source and document-agent choices, the sources' default roots, the managed skill's location,
install's keys and CLI choices, the service units' environment."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import get_args

import pytest

from skillopt_sleep import agents
from skillopt_sleep.agents import (
    AGENTS,
    agent_of_backend,
    agent_of_source,
    get_agent,
    source_names,
    trainable_agents,
)
from skillopt_sleep.config import (
    KNOWN_BACKENDS,
    KNOWN_SOURCES,
    DocumentConfig,
    Settings,
    TrainableAgent,
)
from skillopt_sleep.delivery.document import SKILL_NAME, managed_skill_path, resolve_target
from skillopt_sleep.errors import NightError, SkilloptError, UnknownNameError
from skillopt_sleep.sources import get_source
from tests.helpers.cli_run import skillopt_in_process

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ names
def test_the_registry_names_each_agent_once() -> None:
    assert [a.name for a in AGENTS] == [
        "claude_code",
        "codex",
        "copilot",
        "devin",
        "cursor",
        "opencode",
        "pi",
        "openclaw",
    ]
    spellings = [n for a in AGENTS for n in a.names]
    assert len(spellings) == len(set(spellings))  # no alias names two agents
    for a in AGENTS:
        assert a.name.isidentifier() and a.name == a.name.lower()
        assert a.label and a.executable
        if a.home_env:  # the variable it names is the one its home folder honours
            assert a.home({a.home_env: "/moved"}, Path("/h")) == Path("/moved")
            assert a.home({}, Path("/h")) != Path("/moved")


def test_aliases_resolve_both_ways() -> None:
    claude = get_agent("claude_code")
    assert get_agent("claude-code") is claude
    assert "claude-code" in claude.aliases and claude.name == "claude_code"
    for a in AGENTS:
        for spelling in a.names:
            assert get_agent(spelling) is a
    # the config takes either spelling and keeps the canonical one
    assert DocumentConfig(agent="claude-code").agent == "claude_code"  # type: ignore[arg-type]
    assert DocumentConfig(agent="claude_code").agent == "claude_code"


def test_an_unknown_name_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_agent("claude")
    assert isinstance(info.value, SkilloptError)
    assert str(info.value) == (
        "unknown agent 'claude'; known: claude_code, codex, copilot, cursor, devin, openclaw, "
        "opencode, pi"
    )
    assert "\n" not in str(info.value)
    with pytest.raises(UnknownNameError, match="unknown source 'copilot'; known: claude_code"):
        agent_of_source("copilot")  # the agent's name is not a source name


def test_sources_and_backends_map_back_to_their_agent() -> None:
    assert agent_of_source("copilot_cli") is get_agent("copilot")
    assert agent_of_source("copilot_vscode") is get_agent("copilot")
    assert get_agent("copilot").sources == ("copilot_cli", "copilot_vscode")
    for a in AGENTS:
        for s in a.sources:
            assert agent_of_source(s) is a
    assert agent_of_backend("claude_code") is get_agent("claude_code")
    assert agent_of_backend("copilot") is get_agent("copilot")
    assert agent_of_backend("openai_compatible") is None
    assert agent_of_backend("anthropic") is None


def test_exec_backends_are_the_registry_agents_with_their_executable() -> None:
    from skillopt_sleep.backends import REGISTRY
    from skillopt_sleep.config import BackendConfig

    exec_backends = {a.backend: a for a in AGENTS if a.backend}
    assert set(exec_backends) <= set(KNOWN_BACKENDS) and set(exec_backends) <= set(REGISTRY)
    for name, agent in exec_backends.items():
        module, cls = REGISTRY[name].split(":")
        backend = getattr(importlib.import_module(module), cls)
        assert backend.name == name and backend.agent == agent.name
        made = backend(BackendConfig(name=name))
        assert made.executable_name == agent.executable
        assert made.install_hint.startswith("npm install -g ") and made.login_fix
    # every other backend is a model API, not an agent
    assert {b for b in KNOWN_BACKENDS if agent_of_backend(b) is None} == {
        "openai_compatible",
        "anthropic",
    }


# ------------------------------------------------------------------ config
def test_config_sources_are_the_registry_sources() -> None:
    assert source_names() == KNOWN_SOURCES
    assert source_names() == (
        "claude_code",
        "codex",
        "copilot_cli",
        "copilot_vscode",
        "devin",
        "cursor",
        "opencode",
        "pi",
        "openclaw",
    )
    for name in source_names():
        assert get_source(name).name == name
    with pytest.raises(UnknownNameError):
        get_source("copilot")
    assert set(Settings(sources={n: {} for n in source_names()}).sources) == set(source_names())
    import skillopt_sleep.config as config

    assert not hasattr(config, "KNOWN_AGENTS")  # the dead list is gone


def test_document_agent_choices_are_the_trainable_agents() -> None:
    names = tuple(a.name for a in trainable_agents())
    assert get_args(TrainableAgent) == names
    assert names == ("claude_code", "codex", "copilot", "devin", "opencode", "pi", "openclaw")
    assert all(a.skills_dir({}, Path("/h")) is not None for a in trainable_agents())
    for a in AGENTS:
        if a not in trainable_agents():
            assert a.skills_dir({}, Path("/h")) is None
            with pytest.raises(ValueError, match=f"{a.name} has no skills folder"):
                DocumentConfig(agent=a.name)  # type: ignore[arg-type]
            with pytest.raises(NightError, match="not supported yet"):
                managed_skill_path(a.name, {}, Path("/h"))
    with pytest.raises(ValueError, match="unknown agent 'nope'; known: claude_code, codex"):
        DocumentConfig(agent="nope")  # type: ignore[arg-type]


# ------------------------------------------------------------------ homes and ~
HOME_ENV = {
    "claude_code": "CLAUDE_CONFIG_DIR",
    "codex": "CODEX_HOME",
    "copilot": "COPILOT_HOME",
    "cursor": "CURSOR_CONFIG_DIR",
}
DEFAULT_HOME = {
    "claude_code": ".claude",
    "codex": ".codex",
    "copilot": ".copilot",
    "cursor": ".cursor",
}


@pytest.mark.parametrize("name", sorted(HOME_ENV))
def test_a_home_variable_with_tilde_is_one_folder_for_logs_and_skill(
    name: str, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    agent = get_agent(name)
    assert agent.home_env == HOME_ENV[name]
    assert agent.home({}, home) == home / DEFAULT_HOME[name]
    for value in ("~/elsewhere", "~", str(home / "elsewhere")):
        env = {HOME_ENV[name]: value}
        where = home / "elsewhere" if value != "~" else home
        assert agent.home(env, home) == where
        # every source of the agent that lives in its home reads logs below that folder
        for source in agent.sources:
            if source == "copilot_vscode":  # VS Code's own folders, not COPILOT_HOME
                continue
            roots = get_source(source).default_roots(env, home)
            assert roots and all(r.is_relative_to(where) for r in roots), (source, roots)
            assert "~" not in str(roots)
        if agent.trainable:
            skill = resolve_target(
                DocumentConfig(kind="managed_skill", agent=name),
                None,
                env=env,
                home=home,  # type: ignore[arg-type]
            )
            assert skill == where / "skills" / SKILL_NAME / "SKILL.md"
    # an empty variable is no variable
    assert agent.home({HOME_ENV[name]: ""}, home) == home / DEFAULT_HOME[name]


def test_codex_home_with_tilde_is_the_same_folder_for_rollouts_skill_and_install(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported bug: sources/codex.py expanded ~ in CODEX_HOME, delivery/document.py did not
    (a literal `~` folder in the current directory)."""
    from skillopt_sleep.install import agent_home

    monkeypatch.setenv("CODEX_HOME", "~/codex-elsewhere")
    want = isolated_home / "codex-elsewhere"
    roots = get_source("codex").default_roots(os.environ, Path.home())
    assert roots == [want / "sessions", want / "archived_sessions"]
    skill = resolve_target(DocumentConfig(kind="managed_skill", agent="codex"), None)
    assert skill == want / "skills" / SKILL_NAME / "SKILL.md"
    assert agent_home("codex") == want
    assert get_agent("codex").home() == want  # os.environ and Path.home() by default


@pytest.mark.skipif(os.name == "nt", reason="POSIX data folders")
def test_data_folders_honour_xdg_data_home_with_tilde(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert get_source("devin").default_roots({}, home)[0] == (
        home / ".local" / "share" / "devin" / "cli" / "transcripts"
    )
    assert get_source("opencode").default_roots({}, home) == [
        home / ".local" / "share" / "opencode"
    ]
    env = {"XDG_DATA_HOME": "~/data"}
    assert get_agent("devin").data_dir(env, home) == home / "data" / "devin"
    assert get_source("devin").default_roots(env, home)[0] == (
        home / "data" / "devin" / "cli" / "transcripts"
    )
    assert get_source("opencode").default_roots(env, home) == [home / "data" / "opencode"]
    # devin's config (skills, AGENTS.md) stays in ~/.config/devin
    assert get_agent("devin").home(env, home) == home / ".config" / "devin"
    assert (
        get_agent("opencode").home({"XDG_CONFIG_HOME": "~/cfg"}, home) == home / "cfg" / "opencode"
    )


def test_memory_files_are_paths_in_the_home_and_the_project(tmp_path: Path) -> None:
    home, project = tmp_path / "h", tmp_path / "p"
    claude = get_agent("claude_code")
    assert claude.user_memory_files({}, home) == [home / ".claude" / "CLAUDE.md"]
    assert project / "CLAUDE.md" in claude.project_memory_files(project)
    codex = get_agent("codex")
    assert codex.user_memory_files({"CODEX_HOME": "~/cx"}, home) == [home / "cx" / "AGENTS.md"]
    assert codex.project_memory_files(project) == [project / "AGENTS.md"]
    for a in AGENTS:
        assert all(p.is_relative_to(a.home({}, home)) for p in a.user_memory_files({}, home))
        assert all(p.is_relative_to(project) for p in a.project_memory_files(project))
        assert a.notes  # where the facts come from / what is unverified


# ------------------------------------------------------------------ install
def test_install_keys_and_cli_choices_come_from_the_registry() -> None:
    from skillopt_sleep.cli.install import AGENT_CHOICES
    from skillopt_sleep.install import AGENTS as INSTALL_KEYS
    from skillopt_sleep.install import InstallError, install_key, plugins_root, state_folder

    installable = [a for a in AGENTS if a.install]
    assert tuple(a.install for a in installable) == INSTALL_KEYS
    assert INSTALL_KEYS == (
        "claude-code",
        "codex",
        "copilot",
        "devin",
        "opencode",
        "pi",
        "openclaw",
    )
    assert set(AGENT_CHOICES) == {n for a in installable for n in (a.install, *a.names)}
    assert {"claude-code", "claude_code"} <= set(AGENT_CHOICES)
    assert "cursor" not in AGENT_CHOICES
    for a in installable:
        assert (plugins_root() / str(a.install)).is_dir()
        for spelling in {a.install, *a.names}:
            assert install_key(spelling) == a.install
            # one install record whatever the spelling: uninstall finds what install did
            assert state_folder(spelling, None) == state_folder(str(a.install), None)
    with pytest.raises(InstallError, match=r"unknown agent 'cursor' for install \(Cursor has"):
        install_key("cursor")
    with pytest.raises(InstallError, match="unknown agent 'nope' for install; known: claude-code"):
        install_key("nope")


def test_install_and_uninstall_accept_the_canonical_spelling(isolated_home: Path) -> None:
    from skillopt_sleep.install import install, uninstall

    report = install("claude_code")
    assert report.agent == "claude-code" and report.changed
    settings = isolated_home / ".claude" / "settings.json"
    assert "skillopt-sleep@skillopt-sleep" in settings.read_text()
    assert not install("claude-code").changed  # the same installation
    assert uninstall("claude-code").changed
    assert not settings.exists()


def test_the_cli_accepts_both_spellings(isolated_home: Path) -> None:
    run = lambda *a: skillopt_in_process(*a, env=dict(os.environ, COLUMNS="200"), timeout=60)
    for spelling in ("claude_code", "claude-code"):
        p = run("install", spelling, "--dry-run")
        assert p.returncode == 0, p.stderr
        assert "install claude-code (user) — dry run" in p.stdout
    p = run("install", "cursor")
    assert p.returncode == 2 and "'cursor' is not one of" in p.stderr
    # help names each agent once, by its install key
    shown = run("install", "--help").stdout
    assert "claude-code" in shown and "claude_code" not in shown


# ------------------------------------------------------------------ service units, discovery
def test_service_units_carry_every_agent_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillopt_sleep.install import units

    own = {"PATH", "SKILLOPT_SLEEP_HOME", "SKILLOPT_SLEEP_CONFIG_FILE", "XDG_STATE_HOME"}
    assert set(units.SERVICE_ENV) == own | set(agents.home_envs()) | set(agents.env_vars())
    assert len(units.SERVICE_ENV) == len(set(units.SERVICE_ENV))
    assert set(agents.home_envs()) == {a.home_env for a in AGENTS if a.home_env}
    assert {"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"} <= set(agents.home_envs())
    for a in AGENTS:
        assert a.home_env is None or a.env_vars[0] == a.home_env
    monkeypatch.setenv("CURSOR_CONFIG_DIR", "/somewhere/cursor")
    assert units.service_env()["CURSOR_CONFIG_DIR"] == "/somewhere/cursor"


def test_discovery_names_each_source_agent(tmp_path: Path) -> None:
    from skillopt_sleep.sources.discovery import discover_sources

    statuses = discover_sources(Settings(), env={}, home=tmp_path)
    assert [s.name for s in statuses] == list(source_names())
    assert {s.name: s.agent for s in statuses} == {
        s: agent_of_source(s).name for s in source_names()
    }
    assert {s.name: s.agent for s in statuses}["copilot_vscode"] == "copilot"


def _oc_memory(env: dict[str, str], home: Path) -> Path:
    return agents.get_agent("openclaw").user_memory_files(env, home)[0]


def test_openclaw_memory_follows_its_workspace_as_openclaw_resolves_it(tmp_path: Path) -> None:
    """OpenClaw 2026.9.6 sends its agent ``main``'s workspace ``AGENTS.md`` every turn; the
    workspace is moved by its config (JSON5), then by variables — the registry follows it, so
    the night trains and adopt writes the file OpenClaw really loads."""
    home = tmp_path / "home"
    state = home / ".openclaw"
    assert _oc_memory({}, home) == state / "workspace" / "AGENTS.md"
    state.mkdir(parents=True)
    config = state / "openclaw.json"
    config.write_text("{ // JSON5\n  agents: {defaults: {workspace: '~/ws',},},\n}\n")
    assert _oc_memory({}, home) == home / "ws" / "AGENTS.md"
    # agents.list's main wins over the defaults
    config.write_text(
        "{agents: {defaults: {workspace: '~/ws'}, list: [{id: 'other', workspace: '/o'},"
        " {id: 'main', workspace: '/srv/main-ws'}]}}"
    )
    assert _oc_memory({}, home) == Path("/srv/main-ws/AGENTS.md")
    # a config elsewhere ($OPENCLAW_CONFIG_PATH, ~ is OpenClaw's home)
    (home / "cfg.json").write_text('{"agents": {"defaults": {"workspace": "~/elsewhere"}}}')
    moved = {"OPENCLAW_CONFIG_PATH": "~/cfg.json"}
    assert _oc_memory(moved, home) == home / "elsewhere" / "AGENTS.md"
    # without a configured workspace: the variables, in OpenClaw's order
    config.write_text("{}")
    assert _oc_memory({"OPENCLAW_WORKSPACE_DIR": "/w", "OPENCLAW_PROFILE": "x"}, home) == Path(
        "/w/AGENTS.md"
    )
    assert _oc_memory({"OPENCLAW_PROFILE": "work"}, home) == (
        home / ".openclaw-work" / "workspace" / "AGENTS.md"
    )
    assert _oc_memory({"OPENCLAW_PROFILE": "Default"}, home) == state / "workspace" / "AGENTS.md"
    st = {"OPENCLAW_STATE_DIR": str(tmp_path / "st"), "OPENCLAW_PROFILE": "work"}
    assert _oc_memory(st, home) == tmp_path / "st" / "workspace" / "AGENTS.md"
    oc_home = {"OPENCLAW_HOME": str(tmp_path / "och")}
    assert _oc_memory(oc_home, home) == tmp_path / "och" / ".openclaw" / "workspace" / "AGENTS.md"
    # a broken or oversized config is no config (OpenClaw itself refuses to start on it)
    config.write_text("{agents: {defaults: {workspace: '~/ws'")
    assert _oc_memory({}, home) == state / "workspace" / "AGENTS.md"
    config.write_bytes(b"\xff\xfe")
    assert _oc_memory({}, home) == state / "workspace" / "AGENTS.md"


def test_a_moved_openclaw_workspace_is_where_the_night_trains_and_openclaw_loads(
    tmp_path: Path,
) -> None:
    from skillopt_sleep.delivery.where import where_loaded

    home = tmp_path / "home"
    (home / ".openclaw").mkdir(parents=True)
    (home / ".openclaw" / "openclaw.json").write_text(
        '{"agents":{"defaults":{"workspace":"~/ws"}}}'
    )
    env: dict[str, str] = {}
    target = resolve_target(DocumentConfig(kind="memory", agent="openclaw"), None, env, home)
    assert target == home / "ws" / "AGENTS.md"
    where = where_loaded(target, agent="openclaw", env=env, home=home)
    assert where is not None and (where.agent, where.scope, where.path, where.mode) == (
        "openclaw",
        "user",
        "workspace/AGENTS.md",
        "memory",
    )
    # the default workspace is no longer where OpenClaw looks
    assert (
        where_loaded(
            home / ".openclaw" / "workspace" / "AGENTS.md", agent="openclaw", env=env, home=home
        )
        is None
    )


def test_openclaw_profiles_state_folders_are_harvested_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for d in (".openclaw", ".openclaw-work", ".openclaw-dev", ".openclawx"):
        (home / d).mkdir(parents=True)
    roots = get_source("openclaw").default_roots({}, home)
    assert roots == [
        home / ".openclaw" / "agents",
        home / ".openclaw-dev" / "agents",
        home / ".openclaw-work" / "agents",
    ]
    only = get_source("openclaw").default_roots({"OPENCLAW_STATE_DIR": str(tmp_path / "s")}, home)
    assert only == [tmp_path / "s" / "agents"]


# ------------------------------------------------------------------ locations per agent and kind
def test_locations_answer_for_one_agent_and_one_kind(tmp_path: Path) -> None:
    """What adopt may write for an agent's document of a kind: its own user memory files or
    managed skill, and (memory) its own project memory files; never another agent's."""
    home, project = tmp_path / "home", tmp_path / "proj"
    env = {"CODEX_HOME": str(tmp_path / "codex")}

    def files(name: str, kind: str) -> set[Path]:
        return {f for f, _ in agents.get_agent(name).locations(kind, [project], env, home)}

    assert files("codex", "memory") == {tmp_path / "codex" / "AGENTS.md", project / "AGENTS.md"}
    assert files("codex", "managed_skill") == {
        tmp_path / "codex" / "skills" / SKILL_NAME / "SKILL.md"
    }
    assert files("claude_code", "memory") == {
        home / ".claude" / "CLAUDE.md",
        project / "CLAUDE.md",
        project / ".claude" / "CLAUDE.md",
        project / "CLAUDE.local.md",
    }
    assert project / ".github" / "copilot-instructions.md" in files("copilot", "memory")
    assert files("cursor", "memory") == {project / "AGENTS.md"}  # no user-level file known
    assert files("cursor", "managed_skill") == set()  # no skills folder known
    assert files("openclaw", "memory") == {home / ".openclaw" / "workspace" / "AGENTS.md"}
    assert files("pi", "anything else") == set()
    # the home folder is no project
    assert agents.get_agent("codex").locations("memory", [home], {}, home) == [
        (home / ".codex" / "AGENTS.md", home / ".codex")
    ]


def test_openclaw_memory_location_follows_its_workspace(tmp_path: Path) -> None:
    """A workspace moved out of the state folder: its AGENTS.md is OpenClaw's memory location,
    confined to the workspace folder."""
    home = tmp_path / "home"
    env = {"OPENCLAW_WORKSPACE_DIR": str(tmp_path / "ws")}
    assert agents.get_agent("openclaw").locations("memory", (), env, home) == [
        (tmp_path / "ws" / "AGENTS.md", tmp_path / "ws")
    ]


def test_document_of_names_the_agent_and_kind_of_a_place(tmp_path: Path) -> None:
    home = tmp_path / "home"

    def of(path: Path, prefer: str | None = None, only: bool = False):
        return agents.document_of(path, prefer=prefer, only=only, env={}, home=home)

    assert of(home / ".codex" / "AGENTS.md") == ("codex", "memory")
    assert of(home / ".codex" / "AGENTS.md", prefer="copilot") == ("codex", "memory")
    assert of(home / ".claude" / "skills" / SKILL_NAME / "SKILL.md") == (
        "claude_code",
        "managed_skill",
    )
    assert of(home / ".claude" / "skills" / "other" / "SKILL.md") is None
    assert of(tmp_path / "proj" / "AGENTS.md", prefer="claude_code") == ("codex", "memory")
    assert of(tmp_path / "proj" / "AGENTS.md", prefer="copilot") == ("copilot", "memory")
    assert of(tmp_path / "proj" / "AGENTS.md", prefer="claude_code", only=True) is None
    assert of(tmp_path / "notes.md") is None


@pytest.mark.parametrize("agent", [a.name for a in agents.AGENTS if a.memory_framing])
def test_an_http_replay_states_the_project_as_the_agent_states_its_working_folder(agent):
    """A model call framed as an agent frames its memory file says where it works, in that
    agent's words, so a project block's scope holds there as in the live request; the
    simulator, which obeys a block only inside its scope, reads it."""
    from skillopt_sleep.backends.base import PROJECT_BLOCK, framed
    from skillopt_sleep.delivery.document import END, begin_marker, section_heading
    from skillopt_sleep.models import CompletionRequest, Placement
    from skillopt_sleep.simulator.brain import Turn

    text = f"{begin_marker('/src/web')}\n{section_heading('/src/web')}\n- Use `pnpm`.\n{END}\n"
    placed = Placement(agent=agent, scope="user", path="AGENTS.md", mode="memory", text=text)
    unscoped = placed.model_copy(update={"text": "- Use `pnpm`.\n"})
    assert begin_marker("/src/web").startswith(PROJECT_BLOCK)
    # a document without a project's block: no scope to hold, no folder stated (as before)
    for doc, workdir, stated in (
        (placed, "/src/web", "/src/web"),
        (placed, "", None),
        (unscoped, "/src/web", None),
    ):
        req = CompletionRequest(prompt="install it", placement=doc, workdir=workdir)
        system, prompt, _ = framed(req)
        turn = Turn(system=system, messages=[("user", prompt)], prompt="install it")
        assert turn.working_folder() == stated, (agent, system[:300])
