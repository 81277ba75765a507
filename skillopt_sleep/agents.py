"""The agent registry: every coding agent skillopt-sleep knows, named once.

One :class:`Agent` per agent (``claude_code``, ``codex``, ``copilot``, ``devin``, ``cursor``,
``opencode``, ``pi``, ``openclaw``) says where the agent keeps its files on this machine (its home folder, honouring
the agent's own environment variable, with ``~`` expanded the same way everywhere), its skills
folder, the memory / instruction files it loads, the sources that harvest its logs, the exec
backend that replays through it and the install shell (``plugins/<install>``). Config, the
sources' default roots, the trained document's location, install, service units and the CLI's
choices all ask this module; adding an agent is one entry here plus its harvester
(``sources/``), backend (``backends/``) and shell (``plugins/``), where it has them.

Names: ``name`` is canonical (snake_case, what the config and the store use); ``aliases`` are
other spellings the CLI accepts (``claude-code``). Source names (``copilot_cli``) and backend
names are looked up with :func:`agent_of_source` / :func:`agent_of_backend`.

Foundation layer: imports only the standard library, :mod:`skillopt_sleep.errors` and (to read
OpenClaw's JSON5 config for its workspace) ``json5``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from skillopt_sleep.errors import UnknownNameError

#: The kinds of document skillopt-sleep writes for an agent (a proposal records its agent and
#: kind): ``memory``, the agent's memory / instruction file (user-level in its home, or
#: project-level in a project), and ``managed_skill``, ``<skills>/skillopt-sleep-learned/
#: SKILL.md`` in its skills folder. (A ``path`` document, any file the config names, is no
#: agent location: see :mod:`skillopt_sleep.proposals`.)
DocumentKind = Literal["memory", "managed_skill"]
DOCUMENT_KINDS: tuple[DocumentKind, ...] = ("memory", "managed_skill")
#: the managed skill's folder in an agent's skills folder
MANAGED_SKILL = "skillopt-sleep-learned"

#: ``(env, home) -> folder``: how an agent's folder is found (see :meth:`Agent.home`).
FolderRule = Callable[[Mapping[str, str], Path], Path]


def expand(value: str, home: Path) -> Path:
    """A path from an environment variable, with a leading ``~`` (or ``~/…``) meaning ``home``
    (the user's home folder given to the caller; ``Path.home()`` by default), ``~user/…`` the
    OS's answer. Every agent folder taken from the environment goes through this."""
    if value == "~" or value.startswith(("~/", "~" + os.sep)):
        return home / value[2:]
    return Path(value).expanduser()


def _env_or(var: str, *default: str) -> FolderRule:
    """``$var`` when set and not empty, else ``home/<default…>``."""

    def rule(env: Mapping[str, str], home: Path) -> Path:
        value = env.get(var)
        return expand(value, home) if value else home.joinpath(*default)

    return rule


def _xdg(var: str, default: tuple[str, ...], app: str, *, windows_appdata: bool) -> FolderRule:
    """``$var/<app>`` (an XDG base folder) when set, else ``home/<default…>/<app>``. With
    ``windows_appdata``, on Windows ``%APPDATA%\\<app>`` instead (``home/AppData/Roaming/<app>``
    without ``APPDATA``)."""

    def rule(env: Mapping[str, str], home: Path) -> Path:
        if windows_appdata and os.name == "nt":
            return _appdata(env, home) / app
        value = env.get(var)
        return (expand(value, home) if value else home.joinpath(*default)) / app

    return rule


def _appdata(env: Mapping[str, str], home: Path) -> Path:
    value = env.get("APPDATA")
    return expand(value, home) if value else home / "AppData" / "Roaming"


def _windows_appdata_or(app: str, *default: str) -> FolderRule:
    """Windows ``%APPDATA%\\<app>``; elsewhere ``home/<default…>`` (no variable honoured)."""

    def rule(env: Mapping[str, str], home: Path) -> Path:
        return _appdata(env, home) / app if os.name == "nt" else home.joinpath(*default)

    return rule


def _pi_sessions(env: Mapping[str, str], home: Path) -> Path:
    """Pi's session folder: ``$PI_CODING_AGENT_SESSION_DIR``, else ``<pi home>/sessions``."""
    value = env.get("PI_CODING_AGENT_SESSION_DIR")
    if value:
        return expand(value, home)
    return _env_or("PI_CODING_AGENT_DIR", ".pi", "agent")(env, home) / "sessions"


def _openclaw_state(env: Mapping[str, str], home: Path) -> Path:
    """OpenClaw's state folder (2026.9.6 ``resolveStateDir``): ``$OPENCLAW_STATE_DIR``, else
    ``.openclaw`` in ``$OPENCLAW_HOME`` or the home folder."""
    value = env.get("OPENCLAW_STATE_DIR", "").strip()
    if value:
        return expand(value, home)
    return _openclaw_home(env, home) / ".openclaw"


def _openclaw_home(env: Mapping[str, str], home: Path) -> Path:
    value = env.get("OPENCLAW_HOME", "").strip()
    return expand(value, home) if value else home


#: the largest ``openclaw.json`` read to find the workspace (bytes)
OPENCLAW_CONFIG_MAX = 4 * 1024 * 1024


def openclaw_workspace(env: Mapping[str, str], home: Path, state: Path) -> Path:
    """The workspace of OpenClaw's default agent ``main``, whose ``AGENTS.md`` it sends every
    turn, resolved as openclaw 2026.9.6 does (``resolveAgentWorkspaceDir`` and
    ``resolveDefaultAgentWorkspaceDir``, read from its bundle; ``agents.defaults.workspace``
    and the default are checked with the real CLI): ``agents.list[id=main].workspace``, else
    ``agents.defaults.workspace`` of its config (``$OPENCLAW_CONFIG_PATH``, else
    ``<state>/openclaw.json``, read as JSON5; ``~`` is the home folder); else
    ``$OPENCLAW_WORKSPACE_DIR``; else ``<state>/workspace`` when ``$OPENCLAW_STATE_DIR`` is
    set; else ``~/.openclaw-<profile>/workspace`` for ``$OPENCLAW_PROFILE`` (not
    ``default``); else ``~/.openclaw/workspace``. An unreadable or invalid config counts as
    none (OpenClaw itself refuses to start then). This reads the config file: the one place
    the registry touches the disk."""
    oc_home = _openclaw_home(env, home)
    value = env.get("OPENCLAW_CONFIG_PATH", "").strip()
    config = expand(value, oc_home) if value else state / "openclaw.json"
    configured: object = None
    try:
        with open(config, "rb") as fh:
            raw = fh.read(OPENCLAW_CONFIG_MAX + 1)
        if len(raw) <= OPENCLAW_CONFIG_MAX:
            import json5

            data = json5.loads(raw.decode("utf-8"))
            agents_cfg = data.get("agents") if isinstance(data, dict) else None
            if isinstance(agents_cfg, dict):
                listed = agents_cfg.get("list")
                main = next(
                    (
                        a
                        for a in (listed if isinstance(listed, list) else [])
                        if isinstance(a, dict) and str(a.get("id", "")).strip().lower() == "main"
                    ),
                    None,
                )
                defaults = agents_cfg.get("defaults")
                configured = (main or {}).get("workspace") or (
                    defaults.get("workspace") if isinstance(defaults, dict) else None
                )
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        configured = None
    if isinstance(configured, str) and configured.strip():
        return Path(os.path.abspath(expand(configured.strip(), oc_home)))
    value = env.get("OPENCLAW_WORKSPACE_DIR", "").strip()
    if value:
        return Path(os.path.abspath(value))
    if env.get("OPENCLAW_STATE_DIR", "").strip():
        return state / "workspace"
    profile = env.get("OPENCLAW_PROFILE", "").strip()
    if profile and profile.lower() != "default":
        return oc_home / f".openclaw-{profile}" / "workspace"
    return state / "workspace"


def _openclaw_memory(env: Mapping[str, str], home: Path, state: Path, rel: str) -> Path:
    """``workspace/…`` entries of OpenClaw's user memory live in its workspace."""
    if rel.startswith("workspace/"):
        return openclaw_workspace(env, home, state) / rel[len("workspace/") :]
    return state / rel


#: ``(env, home, agent home, registry path) -> the file``: where a user memory file really is
MemoryRule = Callable[[Mapping[str, str], Path, Path, str], Path]


def _resolve(env: Mapping[str, str] | None, home: Path | None) -> tuple[Mapping[str, str], Path]:
    return (os.environ if env is None else env), (Path.home() if home is None else home)


@dataclass(frozen=True, kw_only=True)
class Agent:
    """One coding agent. Pure data plus path rules; nothing here touches the disk, except
    OpenClaw's memory rule, which reads its config for the workspace (:func:`openclaw_workspace`).

    Every method takes ``env`` (default ``os.environ``) and ``home`` (default ``Path.home()``),
    so tests and the daemon resolve the same folders a shell with that environment would.
    """

    #: canonical name: the config's ``document.agent``, the store, :func:`get_agent`
    name: str
    #: how humans call it, e.g. ``"Claude Code"``
    label: str
    #: other spellings accepted wherever a name is (the CLI's ``claude-code``)
    aliases: tuple[str, ...] = ()
    #: the agent's CLI (``claude``, ``codex`` …) — None when it has none we drive
    executable: str | None = None
    #: the variable that replaces the agent's home folder (``CODEX_HOME``); None: none is known
    home_env: str | None = None
    #: every variable that moves one of the agent's folders (``home_env`` first, then e.g.
    #: ``XDG_DATA_HOME``); carried into service units. OS-given ones (``APPDATA``) are left out.
    env_vars: tuple[str, ...] = ()
    #: source names (``sources.get_source``) that harvest this agent's logs
    sources: tuple[str, ...] = ()
    #: exec backend name (``backends``) that replays through this agent; None: no exec backend
    backend: str | None = None
    #: how to install its CLI, shown when the executable is missing
    install_hint: str = ""
    #: what to tell a user whose credentials for its CLI are missing or rejected
    login_fix: str = ""
    #: install plan key (``skillopt-sleep install <key>``, the folder ``plugins/<key>``, the
    #: install record ``<state>/install/<key>-…``); None: no shell to install
    install: str | None = None
    #: skills folder, relative to :meth:`home` (``<skills>/<name>/SKILL.md``); None: none known
    skills_subdir: str | None = None
    #: memory / instruction files the agent loads for every session, relative to :meth:`home`
    user_memory: tuple[str, ...] = ()
    #: memory / instruction files it loads from a project, relative to the project folder
    project_memory: tuple[str, ...] = ()
    #: files of the home folder a replay's overlay copies so the user's login keeps working
    #: (relative to :meth:`home`; those that do not exist are skipped)
    auth_files: tuple[str, ...] = ()
    #: how the agent frames a memory file in its model request, for replays through an HTTP
    #: backend: ``(where, template)`` with ``where`` ``system`` (appended to the system text)
    #: or ``user`` (before the prompt in the first user message); the template's ``{path}``,
    #: ``{label}`` (user / project) and ``{text}`` are filled in. None: given as system text.
    memory_framing: tuple[str, str] | None = None
    #: how the agent's request states its working folder (``{path}``), measured against the
    #: pinned CLIs; an HTTP replay states the occurrence's project so (None: not measured)
    folder_line: str | None = None
    #: where the facts above come from and what is not verified
    notes: str = ""
    #: ``(env, home) -> the home folder`` (see :meth:`home`)
    _home: FolderRule = field(repr=False, compare=False)
    #: the folder the agent keeps its session data in, when it is not the home folder
    _data: FolderRule | None = field(default=None, repr=False, compare=False)
    #: where a :attr:`user_memory` entry really is, when its config can move it (OpenClaw's
    #: workspace); None: ``home / entry``
    _memory: MemoryRule | None = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ folders
    def home(self, env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
        """The agent's user folder (config, skills, user memory): ``$<home_env>`` when set
        (``~`` expanded against ``home``), else its per-OS default (see each entry)."""
        env, home = _resolve(env, home)
        return self._home(env, home)

    def data_dir(self, env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
        """The folder its session logs live under: :meth:`home`, or an XDG data folder for
        agents that split config and data (Devin, OpenCode; Pi's session folder)."""
        env, home = _resolve(env, home)
        return (self._data or self._home)(env, home)

    def skills_dir(
        self, env: Mapping[str, str] | None = None, home: Path | None = None
    ) -> Path | None:
        """The user skills folder (``<home>/skills``), or None when the agent has none known."""
        if self.skills_subdir is None:
            return None
        return self.home(env, home) / self.skills_subdir

    def user_memory_files(
        self, env: Mapping[str, str] | None = None, home: Path | None = None
    ) -> list[Path]:
        """The user-level memory / instruction files (they may not exist), in the order of
        :attr:`user_memory`."""
        env, home = _resolve(env, home)
        base = self.home(env, home)
        if self._memory is not None:
            return [self._memory(env, home, base, rel) for rel in self.user_memory]
        return [base / rel for rel in self.user_memory]

    def project_memory_files(self, project: Path) -> list[Path]:
        """The project-level memory / instruction files in ``project`` (they may not exist)."""
        return [Path(project) / rel for rel in self.project_memory]

    def managed_skill_file(
        self, env: Mapping[str, str] | None = None, home: Path | None = None
    ) -> Path | None:
        """``<skills_dir>/skillopt-sleep-learned/SKILL.md``, or None without a skills folder."""
        skills = self.skills_dir(env, home)
        return None if skills is None else skills / MANAGED_SKILL / "SKILL.md"

    def locations(
        self,
        kind: str,
        projects: Iterable[str | Path] = (),
        env: Mapping[str, str] | None = None,
        home: Path | None = None,
    ) -> list[tuple[Path, Path]]:
        """Where skillopt-sleep may write this agent's document of ``kind`` (see
        :data:`DOCUMENT_KINDS`): ``(file, root)`` pairs, absolute, each file inside its root.
        ``memory``: the user-level memory files (root: the agent's home, or the file's folder
        when its config moves it out, as OpenClaw's workspace) and the project-level ones in
        each of ``projects`` (root: the project, also spelled with its links resolved; a whole
        drive or the home folder is no project). ``managed_skill``: the managed skill in the
        skills folder (root: the home). Any other kind: none."""
        env, home = _resolve(env, home)
        base = Path(os.path.abspath(self.home(env, home)))
        out: list[tuple[Path, Path]] = []
        if kind == "managed_skill":
            skill = self.managed_skill_file(env, home)
            if skill is not None:
                out.append((Path(os.path.abspath(skill)), base))
            return out
        if kind != "memory":
            return out
        for f in self.user_memory_files(env, home):
            f = Path(os.path.abspath(f))
            out.append((f, base if _under(f, base) else f.parent))
        for folder in dict.fromkeys(str(p) for p in projects if p):
            project = Path(os.path.abspath(expand(folder, home)))
            if project == Path(project.anchor) or project == Path(os.path.abspath(home)):
                continue
            for variant in dict.fromkeys([project, Path(os.path.realpath(project))]):
                out += [(variant / rel, variant) for rel in self.project_memory]
        return out

    @property
    def trainable(self) -> bool:
        """A managed skill (``<skills_dir>/skillopt-sleep-learned/SKILL.md``) can be placed."""
        return self.skills_subdir is not None

    @property
    def names(self) -> tuple[str, ...]:
        """The canonical name and every alias."""
        return (self.name, *self.aliases)


AGENTS: tuple[Agent, ...] = (
    Agent(
        name="claude_code",
        label="Claude Code",
        aliases=("claude-code",),
        executable="claude",
        home_env="CLAUDE_CONFIG_DIR",
        env_vars=("CLAUDE_CONFIG_DIR",),
        sources=("claude_code",),
        backend="claude_code",
        install_hint="npm install -g @anthropic-ai/claude-code",
        login_fix=(
            "run `claude auth login`, or set `api_key_env` in the backend config to a "
            "variable holding an Anthropic API key"
        ),
        install="claude-code",
        skills_subdir="skills",
        user_memory=("CLAUDE.md",),
        project_memory=("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"),
        auth_files=(".credentials.json",),
        memory_framing=(
            "user",
            "<system-reminder>\nCodebase and user instructions are shown below. Be sure to "
            "adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default "
            "behavior and you MUST follow them exactly as written.\n\nContents of {path} "
            "({label}):\n\n{text}\n</system-reminder>\n",
        ),
        folder_line="# Environment\n - Primary working directory: {path}",
        notes="Home ~/.claude or $CLAUDE_CONFIG_DIR (transcripts in projects/, skills in "
        "skills/). Memory files and their framing measured with claude 2.1.328 "
        "(docs/agents.md; rules/*.md are loaded too).",
        _home=_env_or("CLAUDE_CONFIG_DIR", ".claude"),
    ),
    Agent(
        name="codex",
        label="OpenAI Codex",
        executable="codex",
        home_env="CODEX_HOME",
        env_vars=("CODEX_HOME",),
        sources=("codex",),
        backend="codex",
        install_hint="npm install -g @openai/codex",
        login_fix=(
            "run `codex login`, or set `api_key_env` in the backend config to a variable "
            "holding the API key"
        ),
        install="codex",
        skills_subdir="skills",
        user_memory=("AGENTS.md",),
        project_memory=("AGENTS.md",),
        auth_files=("auth.json", "config.toml"),
        memory_framing=(
            "user",
            "# AGENTS.md instructions\n\n<INSTRUCTIONS>\n{text}\n</INSTRUCTIONS>\n",
        ),
        folder_line="<environment_context>\n  <cwd>{path}</cwd>\n</environment_context>",
        notes="Home ~/.codex or $CODEX_HOME (rollouts in sessions/ and archived_sessions/). "
        "Memory files and their framing measured with codex 0.169.0 (docs/agents.md); "
        "AGENTS.override.md replaces AGENTS.md and is never written.",
        _home=_env_or("CODEX_HOME", ".codex"),
    ),
    Agent(
        name="copilot",
        label="GitHub Copilot",
        executable="copilot",
        home_env="COPILOT_HOME",
        env_vars=("COPILOT_HOME", "VSCODE_APPDATA", "VSCODE_PORTABLE", "XDG_CONFIG_HOME"),
        sources=("copilot_cli", "copilot_vscode"),
        backend="copilot",
        install_hint="npm install -g @github/copilot",
        login_fix=(
            "run `copilot login` (or `/login` in copilot), or for a custom provider set "
            "`api_key_env` in the backend config"
        ),
        install="copilot",
        skills_subdir="skills",
        user_memory=("copilot-instructions.md",),
        project_memory=(".github/copilot-instructions.md", "AGENTS.md", "CLAUDE.md", "GEMINI.md"),
        auth_files=("config.json",),
        memory_framing=("system", "<custom_instruction>\n{text}\n\n</custom_instruction>"),
        folder_line="* Current working directory: {path}",
        notes="Copilot CLI home ~/.copilot or $COPILOT_HOME (session-state/); the VS Code "
        "extension's logs are in VS Code's user folders (source copilot_vscode). Memory files "
        "and their framing measured with copilot 1.0.102 (docs/agents.md).",
        _home=_env_or("COPILOT_HOME", ".copilot"),
    ),
    Agent(
        name="devin",
        label="Devin CLI",
        executable="devin",
        env_vars=("XDG_DATA_HOME",),
        sources=("devin",),
        install="devin",
        skills_subdir="skills",
        user_memory=("AGENTS.md",),
        project_memory=("AGENTS.md",),
        notes="Config ~/.config/devin (Windows %APPDATA%\\devin; XDG_CONFIG_HOME not known to "
        "apply); transcripts under $XDG_DATA_HOME/devin (~/.local/share/devin). The executable "
        "name and memory files are unverified.",
        _home=_windows_appdata_or("devin", ".config", "devin"),
        _data=_xdg("XDG_DATA_HOME", (".local", "share"), "devin", windows_appdata=True),
    ),
    Agent(
        name="cursor",
        label="Cursor",
        executable="cursor-agent",
        home_env="CURSOR_CONFIG_DIR",
        env_vars=("CURSOR_CONFIG_DIR",),
        sources=("cursor",),
        project_memory=("AGENTS.md",),
        notes="Home ~/.cursor or $CURSOR_CONFIG_DIR (agent transcripts in projects/). Rules "
        "live in .cursor/rules/*.mdc and the app's settings; no skills folder known.",
        _home=_env_or("CURSOR_CONFIG_DIR", ".cursor"),
    ),
    Agent(
        name="opencode",
        label="OpenCode",
        executable="opencode",
        env_vars=("XDG_CONFIG_HOME", "XDG_DATA_HOME"),
        sources=("opencode",),
        backend="opencode",
        install_hint="npm install -g opencode-ai",
        login_fix=(
            "run `opencode auth login`, or set `api_key_env` in the backend config to a variable "
            "holding the API key"
        ),
        install="opencode",
        skills_subdir="skills",
        user_memory=("AGENTS.md",),
        project_memory=("AGENTS.md",),
        auth_files=("opencode.json", "opencode.jsonc", "config.json"),
        memory_framing=("system", "Instructions from: {path}\n{text}"),
        folder_line="<env>\n  Working directory: {path}\n</env>",
        notes="XDG layout on every OS: config $XDG_CONFIG_HOME/opencode (~/.config/opencode), "
        "data $XDG_DATA_HOME/opencode (~/.local/share/opencode: opencode.db, auth.json). "
        "Memory file, its framing and the skills listing measured with opencode 1.18.33 "
        "(docs/agents.md).",
        _home=_xdg("XDG_CONFIG_HOME", (".config",), "opencode", windows_appdata=False),
        _data=_xdg("XDG_DATA_HOME", (".local", "share"), "opencode", windows_appdata=False),
    ),
    Agent(
        name="pi",
        label="Pi",
        executable="pi",
        home_env="PI_CODING_AGENT_DIR",
        env_vars=("PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR"),
        sources=("pi",),
        backend="pi",
        install_hint="npm install -g @mariozechner/pi-coding-agent",
        login_fix=(
            "run `pi` and `/login`, or set `api_key_env` in the backend config to a variable "
            "holding the API key"
        ),
        install="pi",
        skills_subdir="skills",
        user_memory=("AGENTS.md",),
        project_memory=("AGENTS.md",),
        auth_files=("auth.json", "models.json", "settings.json"),
        memory_framing=(
            "system",
            "# Project Context\n\nProject-specific instructions and guidelines:\n\n"
            "## {path}\n\n{text}\n\n",
        ),
        folder_line="Current working directory: {path}",
        notes="Pi coding agent (npm @mariozechner/pi-coding-agent): home ~/.pi/agent or "
        "$PI_CODING_AGENT_DIR; sessions in <home>/sessions/--<cwd>--/*.jsonl or "
        "$PI_CODING_AGENT_SESSION_DIR. Memory file, its framing and the skills listing "
        "measured with pi 0.73.1 (docs/agents.md).",
        _home=_env_or("PI_CODING_AGENT_DIR", ".pi", "agent"),
        _data=_pi_sessions,
    ),
    Agent(
        name="openclaw",
        label="OpenClaw",
        executable="openclaw",
        home_env="OPENCLAW_STATE_DIR",
        env_vars=(
            "OPENCLAW_STATE_DIR",
            "OPENCLAW_HOME",
            "OPENCLAW_CONFIG_PATH",
            "OPENCLAW_WORKSPACE_DIR",
            "OPENCLAW_PROFILE",
        ),
        sources=("openclaw",),
        backend="openclaw",
        install_hint="npm install -g openclaw (on Node >= 24.16)",
        login_fix=(
            "configure a model provider in ~/.openclaw/openclaw.json (`openclaw onboard`), or set "
            "`base_url` and `api_key_env` in the backend config"
        ),
        install="openclaw",
        skills_subdir="skills",
        user_memory=("workspace/AGENTS.md",),
        auth_files=("openclaw.json",),
        memory_framing=("system", "## {path}\n{text}\n"),
        folder_line="Working directory: {path}",
        notes="State folder ~/.openclaw ($OPENCLAW_HOME/.openclaw) or $OPENCLAW_STATE_DIR; "
        "2026.9.6 keeps each agent's sessions in agents/<id>/agent/openclaw-agent.sqlite "
        "(older builds: agents/<id>/sessions/*.jsonl). It needs Node >= 24.16. The workspace "
        "of its agent main (see openclaw_workspace: agents.defaults.workspace, "
        "$OPENCLAW_WORKSPACE_DIR, $OPENCLAW_PROFILE, default ~/.openclaw/workspace) has "
        "AGENTS.md, SOUL.md, USER.md … sent every turn as '## <path>' sections of the system "
        "prompt (measured with openclaw 2026.9.6); managed skills in <state>/skills "
        "(OpenClaw's docs; docs/agents.md). `--profile NAME` runs with the state folder "
        "~/.openclaw-NAME (its sessions are harvested too).",
        _home=_openclaw_state,
        _memory=_openclaw_memory,
    ),
)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _spellings(path: Path) -> set[str]:
    """``path`` made absolute, and with its folder's links resolved (the file itself kept)."""
    given = os.path.abspath(path)
    return {given, os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given))}


def document_of(
    target: Path | str,
    *,
    prefer: str | None = None,
    only: bool = False,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[str, DocumentKind] | None:
    """The agent and kind of document ``target`` is, by its place (what a night records with
    the proposal it stages): an agent's managed skill or user-level memory file, else a file
    named as an agent's project-level memory file (``<folder>/AGENTS.md``,
    ``<folder>/.github/copilot-instructions.md``); ``prefer`` (a name or alias) is asked
    first, and with ``only`` it is the only agent asked. None: no agent's document. This says
    what a path is, not that it may be written: :meth:`Agent.locations` says that."""
    env, home = _resolve(env, home)
    spelled = _spellings(Path(target))
    first = [get_agent(prefer)] if prefer else []
    ordered = first if only else first + [a for a in AGENTS if a not in first]
    for a in ordered:
        skill = a.managed_skill_file(env, home)
        if skill is not None and _spellings(skill) & spelled:
            return a.name, "managed_skill"
        if any(_spellings(f) & spelled for f in a.user_memory_files(env, home)):
            return a.name, "memory"
    given = Path(os.path.abspath(target))
    for a in ordered:
        for rel in a.project_memory:
            parts = Path(rel).parts
            if given.parts[-len(parts) :] == parts and len(given.parts) > len(parts):
                return a.name, "memory"
    return None


_BY_NAME: dict[str, Agent] = {n: a for a in AGENTS for n in a.names}
_BY_SOURCE: dict[str, Agent] = {s: a for a in AGENTS for s in a.sources}
_BY_BACKEND: dict[str, Agent] = {a.backend: a for a in AGENTS if a.backend}


def agent_names() -> tuple[str, ...]:
    """Canonical names, in registry order."""
    return tuple(a.name for a in AGENTS)


def get_agent(name: str) -> Agent:
    """The agent called ``name`` (its canonical name or an alias). UnknownNameError otherwise:
    one line listing the canonical names."""
    agent = _BY_NAME.get(name)
    if agent is None:
        raise UnknownNameError("agent", name, agent_names())
    return agent


def agent_of_source(source: str) -> Agent:
    """The agent a harvested source belongs to (``copilot_vscode`` -> copilot).
    UnknownNameError for an unknown source name."""
    agent = _BY_SOURCE.get(source)
    if agent is None:
        raise UnknownNameError("source", source, source_names())
    return agent


def agent_of_backend(backend: str) -> Agent | None:
    """The agent an exec backend replays through (``claude_code`` -> claude_code); None for a
    model API backend (``openai_compatible``, ``anthropic``) or any other name."""
    return _BY_BACKEND.get(backend)


def source_names() -> tuple[str, ...]:
    """Every harvested source name, in registry order (``config.KNOWN_SOURCES``)."""
    return tuple(s for a in AGENTS for s in a.sources)


def trainable_agents() -> tuple[Agent, ...]:
    """Agents whose managed skill can be resolved (they have a skills folder)."""
    return tuple(a for a in AGENTS if a.trainable)


def installable_agents() -> tuple[Agent, ...]:
    """Agents with an install shell (``skillopt-sleep install``)."""
    return tuple(a for a in AGENTS if a.install)


def home_envs() -> tuple[str, ...]:
    """The agents' home variables (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, …), registry order."""
    return tuple(a.home_env for a in AGENTS if a.home_env)


def env_vars() -> tuple[str, ...]:
    """Every variable that moves an agent folder, deduplicated, registry order."""
    return tuple(dict.fromkeys(v for a in AGENTS for v in a.env_vars))


__all__ = [
    "AGENTS",
    "DOCUMENT_KINDS",
    "MANAGED_SKILL",
    "Agent",
    "DocumentKind",
    "agent_names",
    "agent_of_backend",
    "agent_of_source",
    "document_of",
    "env_vars",
    "expand",
    "get_agent",
    "home_envs",
    "installable_agents",
    "source_names",
    "trainable_agents",
]


MEMORY_LABELS = {
    "user": "user's private global instructions for all projects",
    "project": "project instructions, checked into the codebase",
}


def folder_statement(agent: str, folder: str) -> str:
    """How ``agent``'s request states that it works in ``folder`` ("" when not measured)."""
    line = get_agent(agent).folder_line
    return line.format(path=folder) if line else ""


def frame_memory(agent: str, path: str, scope: str, text: str) -> tuple[str, str]:
    """``(system, user_prefix)``: how ``agent`` puts a memory file's ``text`` into its model
    request (its :attr:`Agent.memory_framing`); an agent without a measured framing gets the
    text as system text."""
    a = get_agent(agent)
    if a.memory_framing is None:
        return text, ""
    where, template = a.memory_framing
    framed = template.format(path=path, label=MEMORY_LABELS.get(scope, scope), text=text)
    return (framed, "") if where == "system" else ("", framed)
