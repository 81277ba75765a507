"""Which agents' logs exist on this machine, and which sources are enabled.

:func:`discover_sources` looks at every known source's roots (the config's ``roots``, else the
source's per-OS defaults with their environment overrides) without touching the store: whether
a root exists, how many session files / bytes are there, and whether the harvester can read
them. A sample of the newest files (:data:`PROBE_FILES`, at most :data:`PROBE_BYTES` each) is
parsed in memory; when files exist but none of them yields a single message the status is
``unrecognised format`` (a format this version cannot read, reported instead of being
silently empty).

:func:`enable_found` turns on the sources whose logs were found. By default (the first run of a
new install) it only appends ``[sources.<name>]`` tables for sources the file does not mention
(creating the file), so an existing config is never overwritten silently. With
``switch_disabled`` (``skillopt-sleep sources --enable-found``, an explicit request) it also
switches ``enabled = false`` to ``true`` for sources whose logs are found now, editing the file
in place with tomlkit: comments, order and every other byte are kept. An ``enabled = false``
for a source whose logs are not found stays.
"""

from __future__ import annotations

import os
import stat as stat_mod
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.config import DEFAULT_SOURCES, KNOWN_SOURCES, Settings, SourceConfig
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.files import atomic_write
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.base import Source
from skillopt_sleep.sources.common import read_regular

#: files parsed per source to tell a readable format from an unrecognised one
PROBE_FILES = 5
#: bytes read of each probed file
PROBE_BYTES = 2 * 1024 * 1024
#: files counted per source before giving up (bounded walk)
MAX_FILES = 200_000

STATUS_NOT_FOUND = "not found"
STATUS_EMPTY = "no sessions"
STATUS_OK = "ok"
STATUS_UNRECOGNISED = "unrecognised format"


@dataclass(frozen=True)
class SourceRoot:
    """A folder (or file) a source's logs are looked for in, and whether it is there."""

    path: str
    exists: bool


@dataclass
class SourceStatus:
    """One agent on this machine. ``sessions`` counts session files (a database counts its
    sessions), ``bytes`` their total size."""

    name: str
    enabled: bool
    configured: bool  # the config file names this source
    roots: list[SourceRoot] = field(default_factory=list)
    found: bool = False  # some root exists
    files: int = 0
    sessions: int = 0
    bytes: int = 0
    probed: int = 0
    readable: int = 0  # probed files that yielded at least one message
    status: str = STATUS_NOT_FOUND
    skipped: dict[str, int] = field(default_factory=dict)  # what the probe skipped, by reason
    agent: str = ""  # the agent whose logs these are (agents.agent_of_source), e.g. "copilot"

    def to_dict(self) -> dict:
        return asdict(self)


def _special(mode: int) -> bool:
    """A FIFO, device or socket: opening or reading one may block forever."""
    return not (stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode))


def _probe(src: Source, path: Path) -> tuple[int, dict[str, int]]:
    """Messages parsed from (the start of) one file, in memory, and the skip counts."""
    mode = src.read_mode(path)
    try:
        if mode == "snapshot":
            res = src.read_snapshot(path, {})
        else:
            data = read_regular(path, PROBE_BYTES, cut=True)
            if b"\x00" in data[:4096]:
                return 0, {"binary": 1}
            if mode == "whole_file":
                res = src.parse(path, [data], {})
            else:
                lines = data.split(b"\n")
                if len(data) == PROBE_BYTES:
                    lines = lines[:-1]  # a cut last line
                res = src.parse(path, [ln.rstrip(b"\r") for ln in lines if ln.strip()], {})
    except Exception as exc:  # a probe must never break the listing
        return 0, {f"error:{type(exc).__name__}": 1}
    return sum(len(s.messages) for s in res.sessions), dict(res.skipped)


def source_status(
    name: str, cfg: SourceConfig, configured: bool, env: Mapping[str, str], home: Path
) -> SourceStatus:
    src = get_source(name)
    roots = [Path(r).expanduser() for r in cfg.roots] or src.default_roots(env, home)
    st = SourceStatus(
        name=name,
        enabled=cfg.enabled,
        configured=configured,
        agent=agents.agent_of_source(name).name,
    )
    files: list[tuple[float, Path]] = []
    seen: set[str] = set()
    for root in roots:
        exists = root.exists()
        st.roots.append(SourceRoot(str(root), exists))
        st.found = st.found or exists
        if not exists:
            continue
        try:
            for p in src.discover(root):
                key = os.path.abspath(p)
                if key in seen:
                    continue
                seen.add(key)
                try:
                    stat = os.stat(p)
                except OSError:
                    continue
                if _special(stat.st_mode):  # a FIFO, device or socket is never opened
                    st.skipped["not_a_file"] = st.skipped.get("not_a_file", 0) + 1
                    continue
                files.append((stat.st_mtime, Path(p)))
                st.bytes += stat.st_size
                if len(files) >= MAX_FILES:
                    break
        except OSError:
            st.skipped["root_unreadable"] = st.skipped.get("root_unreadable", 0) + 1
    st.files = len(files)
    st.sessions = sum(src.count_sessions(p) for _, p in files)
    if not st.found:
        st.status = STATUS_NOT_FOUND
        return st
    if not files:
        st.status = STATUS_EMPTY
        return st
    for _, path in sorted(files, key=lambda x: -x[0])[:PROBE_FILES]:
        n, skipped = _probe(src, path)
        st.probed += 1
        st.readable += n > 0
        for k, v in skipped.items():
            st.skipped[k] = st.skipped.get(k, 0) + v
    st.status = STATUS_OK if st.readable else STATUS_UNRECOGNISED
    return st


def configured_sources(config_path: Path | None) -> set[str]:
    """Source names the config file itself has a ``[sources.<name>]`` table for."""
    if config_path is None or not config_path.is_file():
        return set()
    try:
        with open(config_path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError):  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return set()
    sources = data.get("sources")
    return set(sources) if isinstance(sources, dict) else set()


def discover_sources(
    settings: Settings,
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[SourceStatus]:
    """The status of every known source (see the module doc), in :data:`KNOWN_SOURCES` order
    (the agent registry's)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    named = configured_sources(config_path)
    out = []
    for name in KNOWN_SOURCES:
        cfg = settings.sources.get(name)
        if cfg is None:  # the config's [sources] table does not list it: not harvested
            cfg = SourceConfig(enabled=False)
        out.append(source_status(name, cfg, name in named, env, home))
    return out


def _disabled_in_file(doc: Mapping[str, Any], name: str) -> bool:
    """The parsed (tomlkit) config sets ``enabled = false`` for ``sources.<name>`` itself."""
    sources = doc.get("sources")
    table = sources.get(name) if isinstance(sources, Mapping) else None
    return isinstance(table, Mapping) and table.get("enabled") is False


def _plan_enable(
    config_path: Path, statuses: list[SourceStatus], switch_disabled: bool
) -> tuple[str | None, str | None, list[str]]:
    """(old text, new text, names enabled) for :func:`enable_found`; new text None: no change."""
    named = configured_sources(config_path)
    # bytes, not read_text: universal newlines would turn a CRLF file into LF
    old = config_path.read_bytes().decode("utf-8") if config_path.exists() else None
    text = old
    enabled: list[str] = []
    if switch_disabled and old is not None and named:
        switch = [s.name for s in statuses if s.name in named and s.found]
        if switch:
            import tomlkit
            from tomlkit.exceptions import TOMLKitError

            try:
                doc = tomlkit.parse(old)
            except TOMLKitError as exc:
                raise ConfigError(f"config file {config_path}: not valid TOML ({exc})") from None
            switch = [n for n in switch if _disabled_in_file(doc, n)]
            for name in switch:
                doc["sources"][name]["enabled"] = True  # tomlkit keeps the rest of the file as is
            if switch:
                text = tomlkit.dumps(doc)
                expected = tomllib.loads(old)
                for name in switch:
                    expected["sources"][name]["enabled"] = True
                if tomllib.loads(text) != expected:  # pragma: no cover - a tomlkit bug
                    raise ConfigError(
                        f"config file {config_path}: cannot switch on "
                        f"{', '.join(switch)} safely; set `enabled = true` by hand"
                    )
                enabled += switch
    missing = [s for s in statuses if s.name not in named]
    if missing:
        nl = "\r\n" if text and "\r\n" in text else "\n"
        lines = []
        for s in missing:
            # found, or on already (a default source the file does not name): never switched off
            on = s.found or s.enabled or (s.name in DEFAULT_SOURCES and not named)
            if on and not (s.enabled and named):  # a default already on is written, not switched
                enabled.append(s.name)
            lines.append(f"{nl}[sources.{s.name}]{nl}enabled = {'true' if on else 'false'}{nl}")
        if text is None:
            text = (
                "# skillopt-sleep configuration. [sources.*]: every agent it knows, enabled where"
                " its logs were found here (and the defaults, claude_code and codex).\n"
            )
        elif text and not text.endswith("\n"):
            text += nl
        text += "".join(lines)
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # e.g. an inline `sources = {…}` table
            raise ConfigError(
                f"config file {config_path}: cannot add [sources.*] tables ({exc}); "
                "add them by hand"
            ) from None
    if text is None or text == old:
        return old, None, []
    order = {n: i for i, n in enumerate(KNOWN_SOURCES)}
    return old, text, sorted(enabled, key=lambda n: order.get(n, len(order)))


def enable_found(
    config_path: Path, statuses: list[SourceStatus], *, switch_disabled: bool = False
) -> list[str]:
    """Append ``[sources.<name>]`` tables to ``config_path`` for every source it does not
    name yet: ``enabled = true`` when its logs were found (or it is a default source),
    ``false`` otherwise, so the file keeps listing every source explicitly. Sources the file
    already names are left exactly as they are, unless ``switch_disabled``: then a source the
    file sets ``enabled = false`` whose logs are found now is switched to ``true`` in place
    (tomlkit round-trip; nothing else in the file changes). Returns the names newly enabled."""
    old, new, enabled = _plan_enable(config_path, statuses, switch_disabled)
    if new is None:
        return []
    # an existing config keeps its mode; a new one may come to hold an `api_key`: private
    atomic_write(config_path, new, private=True)
    return enabled


def enableable(config_path: Path, statuses: list[SourceStatus]) -> list[str]:
    """The sources ``enable_found(…, switch_disabled=True)`` would enable (found here but not
    enabled); writes nothing. A file it could not edit yields the found, disabled ones."""
    idle = [s.name for s in statuses if s.found and not s.enabled]
    try:
        planned = _plan_enable(config_path, statuses, True)[2]
    except (ConfigError, OSError, UnicodeDecodeError):
        return idle
    # a source on by default that the file does not name yet would be written, not enabled
    return [n for n in planned if n in idle]


__all__ = [
    "STATUS_EMPTY",
    "STATUS_NOT_FOUND",
    "STATUS_OK",
    "STATUS_UNRECOGNISED",
    "SourceStatus",
    "configured_sources",
    "discover_sources",
    "enable_found",
    "enableable",
    "source_status",
]
