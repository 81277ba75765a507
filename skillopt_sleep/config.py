"""Typed configuration.

Precedence (lowest to highest): defaults < TOML file (``paths.config_file()``, or the path
given to :func:`load_settings`) < ``SKILLOPT_SLEEP_*`` environment variables (nested keys
joined by ``__``, e.g. ``SKILLOPT_SLEEP_TARGET__MODEL``) < CLI flags (passed as overrides).

Every model forbids unknown keys, so a typo is a :class:`~skillopt_sleep.errors.ConfigError`
naming the key (e.g. ``config: unknown key 'target.modle'``).
"""

from __future__ import annotations

import contextvars
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from skillopt_sleep import agents, paths
from skillopt_sleep.errors import ConfigError, UnknownNameError

#: Backends the engine knows; ``backends.get_backend`` raises for anything else.
KNOWN_BACKENDS = (
    "openai_compatible",
    "anthropic",
    "claude_code",
    "codex",
    "copilot",
    "opencode",
    "pi",
    "openclaw",
)
#: Sources the engine knows (the agent registry's, in its order); ``sources.get_source``
#: raises for anything else.
KNOWN_SOURCES = agents.source_names()
#: Sources harvested when the config names none; the others are enabled by
#: ``skillopt-sleep sources --enable-found`` (or the first ``sources`` run of a new install).
DEFAULT_SOURCES = ("claude_code", "codex")
#: The TOML file the next Settings() reads (set by load_settings; None = no file).
_CONFIG_PATH: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "config_path", default=None
)

#: ``document.agent``: the agents whose managed skill can be placed
#: (:func:`skillopt_sleep.agents.trainable_agents`; spelled out for the type checker, and
#: checked against the registry here and in the tests).
TrainableAgent = Literal["claude_code", "codex", "copilot", "devin", "opencode", "pi", "openclaw"]
assert get_args(TrainableAgent) == tuple(a.name for a in agents.trainable_agents()), (
    "config.TrainableAgent must list agents.trainable_agents()"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceConfig(_Strict):
    """One harvested agent. ``roots`` empty means the agent's default locations."""

    enabled: bool = True
    roots: list[Path] = Field(default_factory=list)


class BackendConfig(_Strict):
    """One model / agent exec target.

    ``api_key`` may be given directly or, better, through ``api_key_env`` (the name of an
    environment variable holding it). ``timeout`` is per call, in seconds.
    ``temperature`` is sent by the HTTP backends (``openai_compatible``, ``anthropic``);
    0 (the default) makes replays as repeatable as the model allows; ``"default"`` (``None``)
    sends none, so the API's own default applies (1.0 for OpenAI and Anthropic). Exec backends
    cannot set it.
    """

    name: str = "openai_compatible"
    model: str = ""
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str = ""
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    max_tokens: int = Field(1024, gt=0)
    temperature: float | None = Field(0.0, ge=0.0, le=2.0)
    executable: str | None = None
    workers: int = Field(1, ge=1, le=32)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value

    @field_validator("temperature", mode="before")
    @classmethod
    def _api_default(cls, value: object) -> object:
        return None if value in ("default", "") else value

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in KNOWN_BACKENDS:
            raise ValueError(str(UnknownNameError("backend", value, KNOWN_BACKENDS)))
        return value


class DocumentConfig(_Strict):
    """Which document a night trains.

    * ``memory`` (the default) — the managed block of ``agent``'s user-level memory file,
      the file the agent loads in every turn of every session (Claude Code
      ``~/.claude/CLAUDE.md``, Codex ``$CODEX_HOME/AGENTS.md``, Copilot
      ``~/.copilot/copilot-instructions.md``; measured in docs/agents.md). A rule learned
      for a recurring request must reach the model every time to help: a skill reaches it
      only when the agent decides to load it.
    * ``managed_skill`` — ``skillopt-sleep-learned/SKILL.md`` in ``agent``'s skills folder
      (:meth:`skillopt_sleep.agents.Agent.skills_dir`: Claude Code ``~/.claude/skills/``,
      Codex ``$CODEX_HOME/skills/``, …). ``agent`` is a canonical name or an alias
      (``claude-code``), stored canonical.
    * ``claude_md`` / ``agents_md`` — ``CLAUDE.md`` / ``AGENTS.md`` in the project.
    * ``path`` — any file (an existing skill); ``path`` must be set.

    Only the managed block (between the skillopt-sleep markers) is ever edited. Replays put
    each candidate exactly where the agent finds the document after adopt
    (:mod:`skillopt_sleep.delivery.where`).
    """

    kind: Literal["memory", "managed_skill", "claude_md", "agents_md", "path"] = "memory"
    agent: TrainableAgent = "claude_code"
    path: Path | None = None
    #: Token budget of the managed block (estimated at 4 characters a token): a document
    #: loaded in every turn costs the user these tokens every turn. Edits and consolidations
    #: that would exceed it are refused.
    max_tokens: int = Field(1500, ge=20, le=100_000)

    @field_validator("agent", mode="before")
    @classmethod
    def _canonical_agent(cls, value: Any) -> Any:
        """An alias (``claude-code``) becomes the canonical name; an agent without a skills
        folder is refused with the reason."""
        if not isinstance(value, str):
            return value
        trainable = [a.name for a in agents.trainable_agents()]
        try:
            agent = agents.get_agent(value)
        except UnknownNameError:
            raise ValueError(str(UnknownNameError("agent", value, trainable))) from None
        if not agent.trainable:
            raise ValueError(
                f"{agent.name} has no skills folder for a managed skill (agents with one: "
                f'{", ".join(trainable)}); set document.kind = "path" with document.path'
            )
        return agent.name


class DeliverConfig(_Strict):
    """Which agents get what a night learned (see docs/agents.md, "Every agent gets it").

    * ``agents = "sessions"`` (the default) — the document's agent, and every other agent
      whose sessions the night's tasks came from: each gets its own copy (its own memory file
      or skill, with the same rules), certified through its own backend on the held-out tasks
      before it is staged as a proposal of its own (``p<n>-<agent>``);
      ``"document"`` — only ``document.agent``.
    * ``backends.<agent>`` — the backend that certifies that agent's copy. Without one: the
      night's target when it is a model API (the copy framed as that agent frames it),
      else the agent's own CLI as the user runs it, when it is on ``PATH``.

    Copies exist for the ``memory`` and ``managed_skill`` kinds (a project's ``CLAUDE.md`` /
    ``AGENTS.md`` or a ``path`` is one file, not one per agent).
    """

    agents: Literal["sessions", "document"] = "sessions"
    backends: dict[str, BackendConfig] = Field(default_factory=dict)

    @field_validator("backends", mode="before")
    @classmethod
    def _canonical_agents(cls, value: Any) -> Any:
        """Keys are agent names or aliases, stored canonical; an unknown agent is refused."""
        if not isinstance(value, dict):
            return value
        out = {}
        for key, cfg in value.items():
            try:
                out[agents.get_agent(str(key)).name] = cfg
            except UnknownNameError as exc:
                raise ValueError(str(exc)) from None
        return out


class UIConfig(_Strict):
    """The local dashboard (``skillopt-sleep ui``): ``serve`` makes the daemon serve it too,
    on 127.0.0.1 at ``port``."""

    serve: bool = False
    port: int = Field(8766, ge=1, le=65535)


class NotifyConfig(_Strict):
    """What is said when a night stages a proposal: ``desktop`` sends a desktop notification
    (``notify-send`` on Linux, ``osascript`` on macOS; when missing or failing, the night
    records why and goes on). ``status`` and the MCP ``sleep_status`` tool always say it."""

    desktop: bool = True


class PrivacyConfig(_Strict):
    """What never enters the store, and how long the outbox keeps what was sent."""

    #: project globs (``fnmatch`` on the session's project path, ``~`` expanded): when any is
    #: given, only sessions of a matching project are harvested (a session with no project
    #: then is not)
    allow_projects: list[str] = Field(default_factory=list)
    #: project globs never harvested (they win over ``allow_projects``); a folder holding a
    #: ``.skillopt-sleep-ignore`` file (or below one that does) is never harvested either
    deny_projects: list[str] = Field(default_factory=list)
    #: days the outbox keeps the redacted prompt of each outbound model call (0: never kept;
    #: the call itself — backend, model, purpose, size, hash — is always recorded)
    outbox_days: int = Field(14, ge=0)


class Settings(BaseSettings):
    """All settings of one run. The README's "Configuration" section lists every key
    with its default and unit."""

    model_config = SettingsConfigDict(
        env_prefix="SKILLOPT_SLEEP_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    sources: dict[str, SourceConfig] = Field(
        default_factory=lambda: {name: SourceConfig() for name in DEFAULT_SOURCES}
    )
    #: Only sessions whose project (cwd) is this directory or below it; None = all projects.
    #: ``~`` is expanded, symlinks are resolved (agents record their working directory
    #: resolved); it must be a directory. A relative path is taken from the config file's folder
    #: when it is in the file, from the current directory when given as a flag or variable.
    project: Path | None = None
    #: Only sessions touched in the last N days are mined.
    lookback_days: int = Field(30, ge=1)

    target: BackendConfig = Field(default_factory=lambda: BackendConfig())
    optimizer: BackendConfig = Field(default_factory=lambda: BackendConfig())

    epochs: int = Field(2, ge=1, le=50)
    batch_size: int = Field(4, ge=1)
    #: The learning rate: at most this many edits are tried per mini-batch.
    edit_budget: int = Field(2, ge=1, le=20)
    #: Dream rollouts: replay each train task this many times per mini-batch (samples 0..K-1,
    #: each cached under its own index) and show the optimizer its best and worst attempt.
    #: 1 = off (the learning benchmark measured no gain on the simulator: docs/benchmarks.md).
    dream_samples: int = Field(1, ge=1, le=8)
    #: Dream recall: add up to this many similar past tasks (stored by earlier nights, not
    #: mined tonight, same project) as extra train tasks; their held-out occurrences never.
    #: 0 = off.
    dream_recall: int = Field(0, ge=0, le=20)
    val_fraction: float = Field(0.25, ge=0.0, lt=1.0)
    test_fraction: float = Field(0.25, ge=0.0, lt=1.0)
    gate_metric: Literal["hard", "soft", "mixed"] = "mixed"
    #: Reject an edit that makes any single val task worse, even if the mean improves.
    no_regression: bool = True
    #: Where the target's answers vary (a val answer changes under a placebo rule or another
    #: sample), each val occurrence is scored on this many samples (their mean) and an edit
    #: must beat the current document by more than the measured spread (night/gate.py).
    #: 1 = off: no noise probe, every gain counts (a deterministic target). 4 is measured
    #: (docs/realmodel.md, "Choosing gate_samples"): the smallest k at which the real model at
    #: temperature 1 certified a vacuous edit in fewer than 1 night in 50, as often as k = 3
    #: certified the user's rule.
    gate_samples: int = Field(4, ge=1, le=8)
    #: Where answers vary: the smallest mean val gain an edit must show, whatever the spread.
    gate_margin: float = Field(0.05, ge=0.0, le=1.0)
    #: Where answers vary: a block with fewer val occurrences than this cannot decide, and
    #: certifies nothing (its night says so).
    gate_min_val: int = Field(3, ge=1)
    #: The collateral gate (night/probes.py): an edit the val gate accepts is replayed on up to
    #: this many of the user's other tasks in its block (every task family at least once),
    #: judged whole against the document before it; 0 = none of them.
    collateral_tasks: int = Field(6, ge=0, le=30)
    #: The collateral gate's built-in probe set of everyday coding requests (write a
    #: function, explain an error, a test, a shell command …), judged whole and doing the
    #: task against the document before the edit; off = the user's tasks alone.
    collateral_probes: bool = True
    #: Score rubrics with the optimizer model (soft score); off = rule checks only.
    rubric: bool = True
    #: Mining: follow-ups the optimizer model may read per night (mining/meaning.py): what the
    #: regex layer cannot decide (another language, a complaint it has no pattern for) and
    #: every correction, compiled into checks. Each is read once (kept in the store); the rest
    #: wait for the next night. 0 = the regex layer alone.
    read_calls: int = Field(100, ge=0)

    max_calls_per_night: int = Field(400, ge=1)
    max_tokens_per_night: int = Field(2_000_000, ge=1)

    #: Mining: a task needs this many distinct sessions unless it carries a correction.
    min_sessions: int = Field(2, ge=1)
    #: Mining: token-set similarity (0..1, rapidfuzz) above which two intents are one task.
    similarity: float = Field(0.72, gt=0.0, le=1.0)
    max_tasks: int = Field(60, ge=1)
    #: Mining: also mine headless and programmatic sessions (``claude -p`` and Agent-SDK runs,
    #: Claude Code ``entrypoint`` sdk-*; ``codex exec``; ``copilot -p``; ``opencode run``;
    #: ``openclaw agent``; CI bots; ``pi -p`` leaves no mark and is mined). Off: only the
    #: user's own interactive requests are mined, and the others are counted as dropped
    #: (``headless_session``) in ``tasks`` and ``status``.
    mine_headless: bool = False

    document: DocumentConfig = Field(default_factory=lambda: DocumentConfig())
    deliver: DeliverConfig = Field(default_factory=lambda: DeliverConfig())
    #: The local dashboard (``skillopt-sleep ui``; the daemon serves it when ``ui.serve``).
    ui: UIConfig = Field(default_factory=lambda: UIConfig())
    #: Projects kept out of the store; the outbox's retention.
    privacy: PrivacyConfig = Field(default_factory=lambda: PrivacyConfig())
    #: The desktop notification when a night stages a proposal.
    notify: NotifyConfig = Field(default_factory=lambda: NotifyConfig())

    #: Daemon: local time of the nightly run, "HH:MM" (or "HH:MM:SS").
    schedule: str = "03:00"
    #: Daemon: run a missed night (machine asleep or off at ``schedule``) once, soon after.
    catch_up: bool = True
    #: Daemon: APScheduler misfire grace period for the nightly job, in seconds.
    misfire_grace_seconds: int = Field(3600, ge=1)
    #: Daemon: only start a night when no agent session was written in the last N minutes.
    idle_minutes: int | None = Field(None, ge=1)
    #: Daemon: only start a night on mains power (where the OS reports a battery).
    require_mains: bool = False
    #: Daemon: full rescan of every source root every N seconds (backs up missed events).
    rescan_seconds: float = Field(300.0, ge=1.0)
    #: Daemon: wait this long after the last write event before ingesting (seconds).
    debounce_seconds: float = Field(0.5, ge=0.0, le=60.0)

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, value: dict[str, SourceConfig]) -> dict[str, SourceConfig]:
        for name in value:
            if name not in KNOWN_SOURCES:
                raise ValueError(str(UnknownNameError("source", name, KNOWN_SOURCES)))
        # naming one source configures it; it does not switch the default ones off
        return {**{name: SourceConfig() for name in DEFAULT_SOURCES}, **value}

    @field_validator("project")
    @classmethod
    def _project_dir(cls, value: Path | None) -> Path | None:
        if value is None or not str(value).strip():
            return None
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"{str(value)!r} is not a directory ({path})")
        return path

    @field_validator("schedule")
    @classmethod
    def _hhmm(cls, value: str) -> str:
        try:
            hh, mm, *ss = value.split(":")
            if len(ss) > 1 or not (
                0 <= int(hh) < 24 and 0 <= int(mm) < 60 and all(0 <= int(x) < 60 for x in ss)
            ):
                raise ValueError
        except ValueError:
            raise ValueError(f"schedule must be HH:MM (24h), got {value!r}") from None
        return value

    @model_validator(mode="after")
    def _document_of_the_target_agent(self) -> Settings:
        """A night that replays through an agent's CLI (``target.name = "opencode"``) trains
        that agent's document unless ``document.agent`` is set: the rule is certified where
        that agent loads it. Only for the kinds the agent names the file of (``memory``,
        ``managed_skill``)."""
        if "agent" in self.document.model_fields_set or self.document.kind not in (
            "memory",
            "managed_skill",
        ):
            return self
        agent = agents.agent_of_backend(self.target.name)
        if agent is not None and agent.trainable and agent.name != self.document.agent:
            self.document = self.document.model_copy(update={"agent": agent.name})
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # flags (init) > environment > the TOML file
        file_source = TomlConfigSettingsSource(settings_cls, toml_file=_CONFIG_PATH.get())
        return (init_settings, env_settings, file_source)


def _format_error(exc: ValidationError, origin: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if p not in ("function-after",)) or "(root)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc!r}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}")
    return f"config ({origin}): " + "; ".join(parts)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML config file. Raises ConfigError with the file and reason."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None


class _FileOnly(Settings):
    """Settings read from the TOML data alone (no environment), to attribute errors."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        return (init_settings,)


#: Environment variables with our prefix that are not settings.
_NON_SETTING_ENV = {
    "SKILLOPT_SLEEP_HOME",
    "SKILLOPT_SLEEP_CONFIG_FILE",
    "SKILLOPT_SLEEP_PLUGINS_DIR",
}


def environment_overrides(env: Mapping[str, str] | None = None) -> list[str]:
    """The ``SKILLOPT_SLEEP_*`` settings variables set in ``env`` (default: this process's
    environment), sorted; ``SKILLOPT_SLEEP_HOME`` and the like, which are not settings, are
    left out."""
    env = os.environ if env is None else env
    return sorted(k for k in env if k.startswith("SKILLOPT_SLEEP_") and k not in _NON_SETTING_ENV)


def _check_environment() -> None:
    import os

    for key in os.environ:
        if not key.startswith("SKILLOPT_SLEEP_") or key in _NON_SETTING_ENV:
            continue
        parts = key.removeprefix("SKILLOPT_SLEEP_").lower().split("__")
        model: Any = Settings
        for part in parts:
            fields = getattr(model, "model_fields", None)
            if fields is None:
                break  # a dict (e.g. sources.<name>) or a plain value: validated later
            if part not in fields:
                raise ConfigError(f"config (environment): unknown key {key!r}")
            model = fields[part].annotation


def load_settings(config_path: Path | None = None, **overrides: Any) -> Settings:
    """Build :class:`Settings` from file < environment < ``overrides``.

    ``overrides`` use the field names; nested dicts are merged key by key, ``None`` values are
    ignored (so CLI flags that were not given do not clobber the file).
    Raises ConfigError naming the offending key.
    """
    path = config_path or paths.config_file()
    file_data = read_config_file(path)
    project = file_data.get("project")
    if (
        isinstance(project, str)
        and project.strip()
        and not Path(project).expanduser().is_absolute()
    ):
        # a relative path in the file is the file's own folder's, whatever the current one
        file_data["project"] = str(Path(path).resolve().parent / project)
        if overrides.get("project") is None and "SKILLOPT_SLEEP_PROJECT" not in os.environ:
            overrides["project"] = file_data["project"]
    if file_data:
        try:
            _FileOnly(**file_data)  # report file mistakes against the file alone
        except ValidationError as exc:
            # Env may fill required things later; only structural errors matter here.
            raise ConfigError(_format_error(exc, str(path))) from None
    _check_environment()
    clean = {k: v for k, v in overrides.items() if v is not None}
    token = _CONFIG_PATH.set(path if file_data else None)
    try:
        return Settings(**clean)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, "environment or flags")) from None
    finally:
        _CONFIG_PATH.reset(token)
