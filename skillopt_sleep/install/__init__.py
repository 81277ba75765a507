"""``skillopt-sleep install <agent>`` / ``uninstall <agent>``: put the agent shell in place.

The shells live in the repository's top-level ``plugins/`` folder (the source of truth); a wheel
ships a copy under ``<prefix>/share/skillopt-sleep/plugins`` (see :func:`plugins_root`).

What each agent gets (``--user``, the default, or ``--project DIR``):

* ``claude-code`` — the plugin in ``plugins/claude-code`` (MCP server, slash commands,
  SessionEnd hook, skill) is enabled in Claude Code's ``settings.json`` (``~/.claude`` or
  ``$CLAUDE_CONFIG_DIR``; ``DIR/.claude/settings.json``) through ``extraKnownMarketplaces``
  (a ``directory`` marketplace pointing at the plugin folder) and ``enabledPlugins``.
* ``codex`` — ``[mcp_servers.skillopt-sleep]`` in ``$CODEX_HOME/config.toml``
  (``DIR/.codex/config.toml``), the ``skillopt-sleep`` skill folder (``$CODEX_HOME/skills``;
  ``DIR/.agents/skills``) and a marked snippet in ``AGENTS.md``.
* ``copilot`` — ``mcpServers.skillopt-sleep`` in ``$COPILOT_HOME/mcp-config.json``, the skill in
  ``$COPILOT_HOME/skills`` and a snippet in ``$COPILOT_HOME/copilot-instructions.md``; for a
  project ``DIR/.vscode/mcp.json`` (VS Code), ``DIR/.github/skills`` and
  ``DIR/.github/copilot-instructions.md``.
* ``opencode`` — ``mcp.skillopt-sleep`` (``type: local``, ``command: [skillopt-sleep, mcp]``) in
  ``~/.config/opencode/opencode.json`` (``$XDG_CONFIG_HOME``; ``DIR/opencode.json``), the skill in
  ``~/.config/opencode/skills`` (``DIR/.opencode/skills``) and a snippet in
  ``~/.config/opencode/AGENTS.md`` (``DIR/AGENTS.md``).
* ``pi`` — Pi has no MCP client: the ``skillopt-sleep`` skill (naming the command line) in
  ``~/.pi/agent/skills`` (``$PI_CODING_AGENT_DIR``; ``DIR/.pi/skills``) and a snippet in
  ``~/.pi/agent/AGENTS.md`` (``DIR/AGENTS.md``).
* ``openclaw`` — ``mcp.servers.skillopt-sleep`` (what ``openclaw mcp set`` writes) in
  ``~/.openclaw/openclaw.json`` (``$OPENCLAW_STATE_DIR``), the skill in ``~/.openclaw/skills``
  and a snippet in the default workspace's ``~/.openclaw/workspace/AGENTS.md`` once OpenClaw
  has written that file (its first run does; until then a note says so). OpenClaw keeps
  MCP servers only in its state folder, so a project (an OpenClaw workspace) gets the skill in
  ``DIR/skills`` and the snippet in ``DIR/AGENTS.md``, and a note saying so.
* ``devin`` — ``mcpServers.skillopt-sleep`` in ``~/.config/devin/config.json``
  (``DIR/.devin/config.json``), the skill in ``~/.config/devin/skills`` (``DIR/.devin/skills``)
  and a snippet in ``~/.config/devin/AGENTS.md`` (``DIR/AGENTS.md``).

Codex reads ``DIR/.codex/config.toml`` and Claude Code ``DIR/.claude/settings.json`` only once
the user trusts ``DIR`` in the agent; trusting is a security decision, so install never writes it
and prints how instead (:func:`trust_note`).

Config files are merged, never replaced (one :class:`.steps.Step` per file): JSON(C) with
:mod:`.jsonedit` (other keys, order, indentation and comments kept), TOML with tomlkit
(round-trip), Markdown as a marked block. Before a file is first changed
its original bytes (or its absence) are saved under ``<state>/install/<agent>-<scope>/``;
``uninstall`` writes them back byte for byte — or, when the file was edited since, removes only
what install added. A second ``install`` changes nothing. All writes go through
:func:`skillopt_sleep.files.atomic_write`.

Confinement: every file install or uninstall writes or removes must lie in the agent's folder
(``--user``) or the project (``--project DIR``), also once resolved: a symlinked folder or a
link to a file outside them is refused before anything is written (one line naming the file,
the agent and the kind: ``memory`` snippet, ``skill`` file or ``config``), and so is an install
record naming a file outside them or an original outside its own folder. For ``--user`` a link
may lead to another agent's location of the same kind only (the agent registry's: a memory
file two agents share, a skills folder linked to another agent's), never into another agent's
config or folder otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_sleep import agents, paths
from skillopt_sleep.errors import UnknownNameError
from skillopt_sleep.install import jsonedit
from skillopt_sleep.install.steps import InstallError, Step, _sha, only_plugin_blocks

#: Install plan keys (``plugins/<key>``, ``<state>/install/<key>-…``), from the agent registry;
#: every function here also takes the agent's canonical name or another alias (``claude_code``).
AGENTS = tuple(a.install for a in agents.installable_agents() if a.install)
SERVER = "skillopt-sleep"
PLUGIN_ID = "skillopt-sleep@skillopt-sleep"  # <plugin>@<marketplace>
SKILL_DIR = "skillopt-sleep"


# ----------------------------------------------------------------------------- locations
def plugins_root() -> Path:
    """The folder holding ``claude-code/``, ``codex/``, ``copilot/``, ``devin/``.

    ``SKILLOPT_SLEEP_PLUGINS_DIR`` wins; then a source checkout (``<repo>/plugins`` next to the
    package — editable installs); then the copy a wheel installs as data files under
    ``<prefix>/share/skillopt-sleep/plugins`` (``sys.prefix``, the user base, the scheme's data
    path).
    """
    candidates: list[Path] = []
    if os.environ.get("SKILLOPT_SLEEP_PLUGINS_DIR"):
        candidates.append(Path(os.environ["SKILLOPT_SLEEP_PLUGINS_DIR"]).expanduser())
    candidates.append(Path(__file__).resolve().parents[2] / "plugins")
    share = Path("share") / "skillopt-sleep" / "plugins"
    bases = [
        sys.prefix,
        sysconfig.get_path("data"),
        getattr(site, "USER_BASE", None) or "",
        sys.base_prefix,
    ]
    try:
        bases.append(sysconfig.get_path("data", f"{os.name}_user"))
    except KeyError:  # pragma: no cover
        pass
    candidates += [Path(b) / share for b in bases if b]
    for c in candidates:
        if (c / "claude-code" / ".claude-plugin" / "plugin.json").is_file():
            return c.resolve()
    raise InstallError(
        "the agent plugin files were not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); reinstall skillopt-sleep or set SKILLOPT_SLEEP_PLUGINS_DIR"
    )


def install_key(agent: str) -> str:
    """The install plan key of ``agent`` (a key such as ``claude-code``, a canonical name such as
    ``claude_code`` or any alias). InstallError (one line, the known keys) otherwise."""
    try:
        found = agents.get_agent(agent)
    except UnknownNameError:
        found = None
    if found is None or not found.install:
        why = f" ({found.label} has no shell to install yet)" if found else ""
        raise InstallError(f"unknown agent {agent!r} for install{why}; known: {', '.join(AGENTS)}")
    return found.install


def agent_home(agent: str, env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """The agent's user config folder (:meth:`skillopt_sleep.agents.Agent.home`: honours
    CLAUDE_CONFIG_DIR, CODEX_HOME, COPILOT_HOME, …). ``agent``: a name, alias or install key."""
    return agents.get_agent(install_key(agent)).home(env, home)


# ----------------------------------------------------------------------------- plans
def _read_json(path: Path) -> Any:
    try:
        return jsonedit.loads(path.read_text("utf-8"))
    except (OSError, jsonedit.JsonEditError, ValueError) as exc:
        raise InstallError(f"plugin file {path} unreadable ({exc})") from None


def _skill_steps(src: Path, dest_root: Path, what: str) -> list[Step]:
    steps = []
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        steps.append(Step(dest_root / f.relative_to(src), "file", what, value=f.read_bytes()))
    return steps


def plan(
    agent: str,
    project: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[Step]:
    """The files ``install <agent>`` touches, for the user (``project`` None) or a project."""
    agent = install_key(agent)
    env = os.environ if env is None else env
    shell = plugins_root() / agent
    where = _Where(shell, agent_home(agent, env, home), project)
    return _PLANS.get(agent, _plan_devin)(where)


@dataclass
class _Where:
    """Where one agent's install goes: the plugin shell it copies from, the agent's user
    folder (used only when ``project`` is None) and the project."""

    shell: Path
    user_dir: Path
    project: Path | None

    @property
    def base(self) -> Path:
        """The project, else the user folder."""
        return self.project if self.project else self.user_dir

    def skill(self, dest_root: Path) -> list[Step]:
        """The steps that copy the skill into ``dest_root``/skillopt-sleep."""
        src = self.shell / "skills" / SKILL_DIR
        return _skill_steps(src, dest_root / SKILL_DIR, "skill skillopt-sleep")

    def snippet(self, path: Path, what: str, tag: str, source: str = "AGENTS.md") -> Step:
        """The step that puts the shell's ``source`` text as a block into ``path``."""
        return Step(path, "block", what, value=(self.shell / source).read_text("utf-8"), tag=tag)

    def server(self, file: str, *keys: str) -> Any:
        """The MCP server entry of the shell's JSON ``file`` under ``keys``."""
        value = _read_json(self.shell / file)
        for key in keys:
            value = value[key]
        return value


def _plan_claude(w: _Where) -> list[Step]:
    settings = (w.project / ".claude" if w.project else w.user_dir) / "settings.json"
    market = {"source": {"source": "directory", "path": str(w.shell)}}
    return [
        Step(
            settings,
            "json",
            "plugin marketplace (directory: plugins/claude-code)",
            ["extraKnownMarketplaces", SERVER],
            market,
            strict="Claude Code",
        ),
        Step(
            settings,
            "json",
            f"enable plugin {PLUGIN_ID}",
            ["enabledPlugins", PLUGIN_ID],
            True,
            strict="Claude Code",
        ),
    ]


def _plan_codex(w: _Where) -> list[Step]:
    import tomlkit

    snippet = tomlkit.parse((w.shell / "config.toml").read_text("utf-8"))
    server = snippet["mcp_servers"][SERVER].unwrap()
    cfg = (w.project / ".codex" if w.project else w.user_dir) / "config.toml"
    skills = w.project / ".agents" / "skills" if w.project else w.user_dir / "skills"
    return [
        Step(cfg, "toml", f"MCP server [mcp_servers.{SERVER}]", ["mcp_servers", SERVER], server),
        *w.skill(skills),
        w.snippet(w.base / "AGENTS.md", "AGENTS.md snippet", "codex"),
    ]


def _plan_copilot(w: _Where) -> list[Step]:
    instructions = "copilot-instructions.md"
    if w.project:
        vs = w.server("vscode-mcp.json", "servers", SERVER)
        github = w.project / ".github"
        return [
            Step(
                w.project / ".vscode" / "mcp.json",
                "json",
                "VS Code MCP server",
                ["servers", SERVER],
                vs,
            ),
            *w.skill(github / "skills"),
            w.snippet(
                github / instructions, "copilot-instructions snippet", "copilot", instructions
            ),
        ]
    cli = w.server("mcp-config.json", "mcpServers", SERVER)
    return [
        Step(
            w.user_dir / "mcp-config.json",
            "json",
            "Copilot CLI MCP server",
            ["mcpServers", SERVER],
            cli,
        ),
        *w.skill(w.user_dir / "skills"),
        w.snippet(
            w.user_dir / instructions, "copilot-instructions snippet", "copilot", instructions
        ),
    ]


def _plan_opencode(w: _Where) -> list[Step]:
    server = w.server("opencode.json", "mcp", SERVER)
    return [
        Step(w.base / "opencode.json", "json", "MCP server", ["mcp", SERVER], server),
        *w.skill(w.project / ".opencode" / "skills" if w.project else w.user_dir / "skills"),
        w.snippet(w.base / "AGENTS.md", "rules snippet (AGENTS.md)", "opencode"),
    ]


def _plan_pi(w: _Where) -> list[Step]:
    # no MCP client in Pi: a skill and a snippet naming the command line
    return [
        *w.skill(w.project / ".pi" / "skills" if w.project else w.user_dir / "skills"),
        w.snippet(w.base / "AGENTS.md", "rules snippet (AGENTS.md)", "pi"),
    ]


def _plan_openclaw(w: _Where) -> list[Step]:
    # MCP servers live only in the state folder's openclaw.json (mcp.servers, what
    # `openclaw mcp set` writes); a project is an OpenClaw workspace: skills/ and AGENTS.md
    skill = w.skill(w.base / "skills")
    workspace = w.project if w.project else w.user_dir / "workspace"
    workspace_md = w.snippet(workspace / "AGENTS.md", "workspace AGENTS.md snippet", "openclaw")
    if w.project:
        return [*skill, workspace_md]
    # OpenClaw writes its template AGENTS.md (and SOUL.md …) into a workspace lacking them
    # on first run: the snippet joins that file, never pre-empts it (a note says so)
    server = w.server("openclaw.json", "mcp", "servers", SERVER)
    return [
        Step(
            w.user_dir / "openclaw.json",
            "json",
            "MCP server (mcp.servers)",
            ["mcp", "servers", SERVER],
            server,
            json5=True,
        ),
        *skill,
        *([workspace_md] if workspace_md.path.is_file() else []),
    ]


def _plan_devin(w: _Where) -> list[Step]:
    server = w.server("config.json", "mcpServers", SERVER)
    base = w.project / ".devin" if w.project else w.user_dir
    return [
        Step(base / "config.json", "json", "MCP server", ["mcpServers", SERVER], server),
        *w.skill(base / "skills"),
        w.snippet(w.base / "AGENTS.md", "rules snippet (AGENTS.md)", "devin"),
    ]


#: the plan of each agent (any other: Devin's)
_PLANS = {
    "claude-code": _plan_claude,
    "codex": _plan_codex,
    "copilot": _plan_copilot,
    "opencode": _plan_opencode,
    "pi": _plan_pi,
    "openclaw": _plan_openclaw,
}


# ----------------------------------------------------------------------------- engine
@dataclass
class Change:
    path: Path
    action: str  # create | update | unchanged | restore | delete | edit | keep | missing
    what: str


@dataclass
class Report:
    agent: str
    scope: str
    dry_run: bool
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.action not in ("unchanged", "keep", "missing") for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "scope": self.scope,
            "dry_run": self.dry_run,
            "changed": self.changed,
            "notes": self.notes,
            "changes": [
                {"path": str(c.path), "action": c.action, "what": c.what} for c in self.changes
            ],
        }


def _scope(project: Path | None) -> tuple[str, str]:
    if project is None:
        return "user", "user"
    digest = hashlib.sha1(str(project).encode("utf-8")).hexdigest()[:12]
    return f"project {project}", f"project-{digest}"


def state_folder(agent: str, project: Path | None) -> Path:
    """Where the manifest and original bytes of one installation are kept."""
    return paths.state_dir() / "install" / f"{install_key(agent)}-{_scope(project)[1]}"


def _load_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "manifest.json").read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InstallError(
            f"install record {folder / 'manifest.json'} unreadable ({exc})"
        ) from None


def _write(path: Path, data: bytes) -> None:
    from skillopt_sleep.files import atomic_write

    atomic_write(path, data)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InstallError(f"{path} is a directory") from None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


#: what an install step writes, by its format: the memory snippet (``block``), the skill's
#: files (``file``), the agent's config (``json``, ``toml``)
_STEP_KIND = {"block": "memory", "file": "skill", "json": "config", "toml": "config"}


def _kind_of(path: Path, planned: Mapping[str, str]) -> str:
    """What ``path`` is for an install: ``memory``, ``skill`` or ``config`` — the
    plan's step kind, else (an install record's file the plan no longer names) by its place:
    below a ``skills`` folder a skill, a file named as an agent's memory file memory, anything
    else config (the strictest)."""
    if str(path) in planned:
        return planned[str(path)]
    if "skills" in Path(path).parts[:-1]:
        return "skill"
    names = {Path(rel).name for a in agents.AGENTS for rel in (*a.user_memory, *a.project_memory)}
    return "memory" if Path(path).name in names else "config"


def _shared(kind: str, env: Mapping[str, str] | None, home: Path | None) -> list[str]:
    """Every agent's user memory files (``memory``) or skills folders (``skill``), resolved,
    those that stay inside the agent's own folder (a link out of it is shared with no one)."""
    out = []
    for a in agents.AGENTS:
        if kind == "memory":
            places = a.locations("memory", (), env, home)
        else:
            skills = a.skills_dir(env, home)
            places = [] if skills is None else [(skills, a.home(env, home))]
        for place, own in places:
            real = os.path.realpath(place)
            if _inside(real, os.path.realpath(own)):
                out.append(real)
    return out


def _confine(
    paths_: list[Path],
    agent: str,
    project: Path | None,
    env: Mapping[str, str] | None,
    home: Path | None,
    planned: Mapping[str, str] | None = None,
) -> None:
    """InstallError (one line naming the path, the agent and kind; nothing written) unless
    every path lies in the scope's folder — the project, or the agent's home — both as
    written and once every symlink is resolved. For the user scope a link may also lead to
    another agent's location of the same kind, as the agent registry has it (a memory file
    two agents share, ``AGENTS.md -> CLAUDE.md``; a skills folder linked to another agent's);
    never into another agent's config, nor from a skill into a memory file."""
    found = agents.get_agent(install_key(agent))
    root = project if project is not None else found.home(env, home)
    for path in paths_:
        kind = _kind_of(path, planned or {})
        if not _inside(os.path.abspath(path), os.path.abspath(root)):
            raise InstallError(
                f"refusing {path} ({found.name}'s {kind}): outside {root}; nothing was written"
            )
        roots = [os.path.realpath(root)]
        if project is None and kind in ("memory", "skill"):
            roots += _shared(kind, env, home)
        real = os.path.realpath(path)
        if not any(_inside(real, r) for r in roots):
            also = {
                "memory": " or another agent's memory file",
                "skill": " or another agent's skills folder",
            }
            raise InstallError(
                f"refusing {path} ({found.name}'s {kind}): it resolves to {real}, outside "
                f"{root}{also.get(kind, '') if project is None else ''} (a symlink leaves "
                "the locations install writes); nothing was written"
            )


def _normalize_project(project: Path | None) -> Path | None:
    if project is None:
        return None
    project = Path(project).expanduser().resolve()
    if not project.is_dir():
        raise InstallError(f"--project {project}: not a directory")
    return project


def trust_note(
    agent: str, project: Path, *, env: Mapping[str, str] | None = None, home: Path | None = None
) -> str | None:
    """What the user must do before the agent reads the project-scoped config install wrote.

    Codex loads ``DIR/.codex/config.toml`` and Claude Code ``DIR/.claude/settings.json`` only
    for a folder the user trusts. Trusting a folder is the user's security decision, so install
    never writes it; it says how instead."""
    agent = install_key(agent)
    if agent == "codex":
        import tomlkit

        cfg = agent_home("codex", env, home) / "config.toml"
        line = tomlkit.dumps({"projects": {str(project): {"trust_level": "trusted"}}}).strip()
        return (
            f"Codex ignores {project / '.codex' / 'config.toml'} until you trust this project: "
            f"run `codex` once in {project} and accept the trust prompt, or add to {cfg}:\n"
            + "\n".join("      " + ln for ln in line.splitlines())
        )
    if agent == "claude-code":
        env = os.environ if env is None else env
        home = Path.home() if home is None else home
        # ~/.claude.json sits beside ~/.claude, or inside $CLAUDE_CONFIG_DIR
        var = agents.get_agent(agent).home_env or ""
        state = (agents.expand(env[var], home) if env.get(var) else home) / ".claude.json"
        return (
            f"Claude Code ignores {project / '.claude' / 'settings.json'} (the plugin) until you "
            f"trust this folder: run `claude` once in {project} and accept the trust prompt "
            f"(recorded as hasTrustDialogAccepted for the project in {state}); "
            "skillopt-sleep does not trust folders for you"
        )
    return None


def _openclaw_notes(
    project: Path | None, env: Mapping[str, str] | None, home: Path | None
) -> list[str]:
    """What an OpenClaw install cannot do: a project gets no MCP server (OpenClaw keeps them
    only in its state folder's ``openclaw.json``); a workspace OpenClaw has not set up yet
    gets no snippet (its first run writes the template ``AGENTS.md``, which a file of ours
    would pre-empt); a moved workspace (:func:`skillopt_sleep.agents.openclaw_workspace`) does
    not load ``<state>/workspace``."""
    state = agent_home("openclaw", env, home)
    unset = (
        []
        if (state / "workspace" / "AGENTS.md").is_file()
        else [
            f"OpenClaw has not set up its workspace yet (no {state / 'workspace' / 'AGENTS.md'}; "
            "its first run writes one): the MCP server and the skill are in place; run "
            "`skillopt-sleep install openclaw` again after that to add the AGENTS.md snippet"
        ]
    )
    if project is not None:
        return [
            f"OpenClaw keeps MCP servers only in {state / 'openclaw.json'}, so this project "
            f"install adds the skill and the AGENTS.md snippet to {project} (loaded when it is "
            "OpenClaw's workspace); `skillopt-sleep install openclaw` adds the MCP server"
        ]
    default = state / "workspace"
    moved = agents.get_agent("openclaw").user_memory_files(env, home)[0].parent
    if moved == default:
        return unset
    return [
        f"OpenClaw's workspace is {moved} (its config or OPENCLAW_WORKSPACE_DIR / "
        f"OPENCLAW_PROFILE), so {default / 'AGENTS.md'} is not loaded; run `skillopt-sleep "
        f"install openclaw --project {moved}` to add the AGENTS.md snippet to that workspace"
    ]


def install(
    agent: str,
    project: Path | None = None,
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Report:
    """Install the agent shell; idempotent. See the module docstring."""
    agent = install_key(agent)
    project = _normalize_project(project)
    steps = plan(agent, project, env=env, home=home)
    _confine(
        [s.path for s in steps],
        agent,
        project,
        env,
        home,
        {str(s.path): _STEP_KIND.get(s.kind, "config") for s in steps},
    )
    report = Report(agent, _scope(project)[0], dry_run)
    pending = _fold(steps, report)
    report.notes += _install_notes(agent, project, env, home)
    if dry_run or not pending:
        return report
    _apply(agent, project, pending)
    return report


#: a file install changes: its path, its bytes before (None: absent), after, and its steps
_Pending = tuple[Path, bytes | None, bytes, list[Step]]


def _fold(steps: list[Step], report: Report) -> list[_Pending]:
    """Apply the steps to the files' current bytes (several steps may edit one file: in
    order); the changes go to ``report``, the files that change are returned."""
    by_path: dict[Path, list[Step]] = {}
    for s in steps:
        by_path.setdefault(s.path, []).append(s)
    pending: list[_Pending] = []
    for path, group in by_path.items():
        cur = _read(path)
        new: bytes | None = cur
        for s in group:
            new = s.apply(new)
        assert new is not None  # a plan's file has at least one step
        what = "; ".join(dict.fromkeys(s.what for s in group))
        if new == cur:
            report.changes.append(Change(path, "unchanged", what))
            continue
        report.changes.append(Change(path, "create" if cur is None else "update", what))
        pending.append((path, cur, new, group))
    return pending


def _install_notes(
    agent: str, project: Path | None, env: Mapping[str, str] | None, home: Path | None
) -> list[str]:
    """What the user should know after an install: the command missing from PATH, the
    project trust the agent asks for, OpenClaw's limits."""
    notes = []
    if agent != "claude-code" and not shutil.which(
        "skillopt-sleep", path=(env or os.environ).get("PATH")
    ):
        how = (
            "the skill has the agent run it through its bash tool"
            if agent == "pi"
            else "the agent starts the MCP server as `skillopt-sleep mcp`"
        )
        notes.append(
            f"`skillopt-sleep` is not on PATH: {how}, so put it on PATH "
            "(e.g. pipx install skillopt-sleep)"
        )
    if project is not None:
        note = trust_note(agent, project, env=env, home=home)
        if note:
            notes.append(note)
    if agent == "openclaw":
        notes += _openclaw_notes(project, env, home)
    return notes


def _apply(agent: str, project: Path | None, pending: list[_Pending]) -> None:
    """Write the changed files, recording in the manifest (once per file) what each was
    before: its original bytes, the folders and keys install created."""
    folder = state_folder(agent, project)
    manifest = _load_manifest(folder) or {
        "agent": agent,
        "project": str(project) if project else None,
        "files": {},
    }
    files: dict[str, Any] = manifest["files"]
    for path, cur, new, group in pending:
        entry = files.get(str(path))
        if entry is None:
            n = len(files)
            original = None
            if cur is not None:
                original = f"originals/{n}"
                _write(folder / original, cur)
            created_dirs = []
            d = path.parent
            while not d.exists():
                created_dirs.append(str(d))
                d = d.parent
            entry = files[str(path)] = {
                "existed": cur is not None,
                "original": original,
                "created_dirs": created_dirs,
                "created_keys": [s.missing_prefix(cur) for s in group],
            }
        _write(path, new)
        entry["installed_sha"] = _sha(new)
        _write(folder / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))


def uninstall(
    agent: str,
    project: Path | None = None,
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Report:
    """Undo :func:`install`: original bytes back when a file is as install left it, otherwise
    only install's part removed (the user's later edits kept)."""
    agent = install_key(agent)
    project = _normalize_project(project)
    report = Report(agent, _scope(project)[0], dry_run)
    folder = state_folder(agent, project)
    manifest = _load_manifest(folder)
    if manifest is None:
        report.notes.append(f"{agent} is not installed for this scope (no record in {folder})")
        return report
    try:
        groups: dict[str, list[Step]] = {}
        for s in plan(agent, project, env=env, home=home):
            groups.setdefault(str(s.path), []).append(s)
    except InstallError:
        groups = {}
    planned = {p: _STEP_KIND.get(g[0].kind, "config") for p, g in groups.items()}
    _confine([Path(p) for p in manifest["files"]], agent, project, env, home, planned)
    _check_record(folder, manifest)
    for path_s, entry in reversed(list(manifest["files"].items())):
        _undo(Path(path_s), entry, groups.get(path_s), folder, report)
    if not dry_run:
        shutil.rmtree(folder)
    return report


def _check_record(folder: Path, manifest: dict[str, Any]) -> None:
    """Refuse an install record naming an original outside its folder, or a created folder
    that is not above its file."""
    for path_s, entry in manifest["files"].items():
        original = entry.get("original")
        if original and not _inside(os.path.realpath(folder / original), os.path.realpath(folder)):
            raise InstallError(
                f"install record {folder / 'manifest.json'} names an original outside "
                f"{folder}; nothing was written"
            )
        stray = [
            d
            for d in entry.get("created_dirs", [])
            if not _inside(os.path.abspath(path_s), os.path.abspath(d))
        ]
        if stray:  # only the folders above the file install created may be removed
            raise InstallError(
                f"install record {folder / 'manifest.json'} names a folder {stray[0]} that "
                f"is not above {path_s}; nothing was written"
            )


def _undo(
    path: Path, entry: dict[str, Any], group: list[Step] | None, folder: Path, report: Report
) -> None:
    """Undo install's change of one file (reported; written unless a dry run)."""
    dry_run = report.dry_run
    cur = _read(path)
    if cur is None:
        report.changes.append(Change(path, "missing", "already removed"))
        return
    if _sha(cur) == entry.get("installed_sha"):
        if entry["existed"]:
            report.changes.append(Change(path, "restore", "original bytes"))
            if not dry_run:
                _write(path, (folder / entry["original"]).read_bytes())
        else:
            report.changes.append(Change(path, "delete", "created by install"))
            if not dry_run:
                path.unlink()
                for d in entry.get("created_dirs", []):
                    try:
                        Path(d).rmdir()
                    except OSError:
                        break
        return
    if not group:
        report.changes.append(
            Change(path, "keep", "changed since install; not in the current plan")
        )
        return
    new: bytes = cur
    for s, created in zip(
        reversed(group),
        reversed(entry.get("created_keys") or [None] * len(group)),
        strict=False,
    ):
        new = s.unapply(new, created)
    if new == cur:
        report.changes.append(Change(path, "keep", "changed since install; kept as is"))
        return
    original = (folder / entry["original"]).read_bytes() if entry.get("original") else b""
    made_by_installs = not entry["existed"] or (
        original.strip() != b"" and only_plugin_blocks(original)
    )
    if not new.strip() and made_by_installs:
        # another agent's install made the file (e.g. AGENTS.md shared by OpenCode and Pi)
        # and its uninstall ran first: with the last snippet gone, nothing of the user's is
        # left, so the file goes as it came
        report.changes.append(Change(path, "delete", "only install's snippets were left"))
        if not dry_run:
            path.unlink()
        return
    report.changes.append(
        Change(path, "edit", "changed since install: removed only install's part")
    )
    if not dry_run:
        _write(path, new)


__all__ = [
    "AGENTS",
    "Change",
    "InstallError",
    "Report",
    "Step",
    "agent_home",
    "install",
    "install_key",
    "plan",
    "plugins_root",
    "state_folder",
    "trust_note",
    "uninstall",
]
