"""Discovery (`skillopt-sleep sources`), enabling found agents, and a night mining tasks from
Claude Code + Codex + Copilot + Devin sessions of one project."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from skillopt_sleep.config import KNOWN_SOURCES, Settings, SourceConfig, load_settings
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.sources.discovery import (
    STATUS_EMPTY,
    STATUS_NOT_FOUND,
    STATUS_OK,
    STATUS_UNRECOGNISED,
    configured_sources,
    discover_sources,
    enable_found,
    enableable,
)
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_claude_session, write_codex_session
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.sources import write_copilot_session, write_devin_session
from tests.helpers.store import db_get, db_rows


def test_night_mines_one_task_across_four_agents(
    isolated_home: Path, store: Store, tmp_path: Path
) -> None:
    project = tmp_path / "webapp"
    project.mkdir()
    ask = "how do I run the tests?"
    write_claude_session(isolated_home, project, [(ask, "Run `npm test`.", None)])
    write_codex_session(isolated_home, project, [(ask, "Run `npm test`.", None)])
    write_copilot_session(
        isolated_home, project, [(ask, "Run `npm test`.", "no, use pnpm instead of npm")]
    )
    write_devin_session(
        isolated_home, project, [("how do I run the tests", "Run `npm test`.", None)]
    )
    settings = Settings(
        project=project,
        sources={n: SourceConfig() for n in ("claude_code", "codex", "copilot_cli", "devin")},
    )
    report = harvest(store, settings)
    assert {n: r.sessions_new for n, r in report.sources.items()} == {
        "claude_code": 1,
        "codex": 1,
        "copilot_cli": 1,
        "devin": 1,
    }
    mined = mine(store, settings)
    task = next(t for t in mined.tasks if "run the tests" in t.intent)
    assert {s.split(":", 1)[0] for s in task.sessions} == {
        "claude_code",
        "codex",
        "copilot_cli",
        "devin",
    }
    assert task.project == str(project)
    assert task.corrections == ["no, use pnpm instead of npm"]


def test_a_whole_night_over_four_agents_sessions(
    isolated_home: Path, store: Store, tmp_path: Path
) -> None:
    """Recurring tasks spread over Claude Code, Codex, Copilot CLI and Devin sessions of one
    project go through the whole night: replay, gate, proposal."""
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.simulator import serve

    project = tmp_path / "webapp"
    project.mkdir()
    fix = "no, use pnpm instead of npm"
    writers = [
        write_claude_session,
        write_codex_session,
        write_copilot_session,
        write_devin_session,
    ]
    asks = [
        ("how do I run the tests?", "Run `npm test`."),
        ("how do I install the dependencies?", "Run `npm install`."),
        ("run the linter", "Run `npm run lint`."),
        ("add the zod package as a dependency", "Run `npm install zod`."),
    ]
    # each task in two agents' sessions, one corrected; asked again in other words (a repeat
    # in the same words would replay as a cache hit of the train replay: no held-out copy)
    for i, (ask, answer) in enumerate(asks):
        writers[i % 4](isolated_home, project, [(ask, answer, fix)])
        writers[(i + 1) % 4](isolated_home, project, [(f"please, {ask}", answer, None)])
    skill = project / "SKILL.md"
    with serve("demo") as sim:
        backend = {
            "name": "openai_compatible",
            "base_url": sim.url + "/v1",
            "model": "sim",
            "max_retries": 0,
        }
        settings = load_settings(
            tmp_path / "none.toml",
            project=str(project),
            epochs=1,
            edit_budget=3,
            target=backend,
            optimizer=backend,
            sources={n: {} for n in ("claude_code", "codex", "copilot_cli", "devin")},
            document={"kind": "path", "path": str(skill)},
        )
        result = run_night(store, settings)
    assert result.status == "succeeded", result.summary
    # splits are by occurrence in time: earlier occurrences train, a later one validates
    # (a test occurrence needs a task asked three times, which this world does not have)
    assert result.summary.train >= 1 and result.summary.val >= 1
    sources = {s.split(":", 1)[0] for t in store.tasks.all() for s in t.sessions}
    assert sources == {"claude_code", "codex", "copilot_cli", "devin"}
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    # "<task>@<occurrence>"; the collateral gate's everyday probes have no split
    replayed = {r["task_id"].split("@")[0] for r in rollouts if r["split"]}
    assert replayed == {t.id for t in store.tasks.all()}
    assert result.val_after is not None and result.val_before is not None
    assert result.val_after > result.val_before
    assert (
        "- Use `pnpm` instead of `npm`."
        in (Path(db_get(store, "proposals", result.proposal_id)["dir"]) / "document").read_text()
    )
    assert not skill.exists()  # staged only


# ---------------------------------------------------------------------------- discovery
def status_of(settings: Settings, home: Path, config: Path | None = None) -> dict:
    return {s.name: s for s in discover_sources(settings, config_path=config, env={}, home=home)}


def test_discovery_reports_found_empty_missing_and_unrecognised(
    isolated_home: Path, tmp_path: Path
) -> None:
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    (isolated_home / ".codex" / "sessions").mkdir(parents=True)  # installed, no sessions yet
    # Devin transcripts in a format this version cannot read
    bad = isolated_home / ".local" / "share" / "devin" / "cli" / "transcripts"
    bad.mkdir(parents=True)
    (bad / "a.json").write_text(json.dumps({"schema_version": "ATIF-v9", "events": [{"x": 1}]}))
    (bad / "b.json").write_text("not json at all")
    st = status_of(Settings(), isolated_home)
    assert list(st) == list(KNOWN_SOURCES)
    cp = st["copilot_cli"]
    assert (cp.found, cp.sessions, cp.status, cp.enabled) == (True, 1, STATUS_OK, False)
    assert cp.bytes == sum(p.stat().st_size for p in (isolated_home / ".copilot").rglob("*.jsonl"))
    assert (st["codex"].found, st["codex"].status, st["codex"].enabled) == (
        True,
        STATUS_EMPTY,
        True,
    )
    assert (st["claude_code"].found, st["claude_code"].status) == (False, STATUS_NOT_FOUND)
    dv = st["devin"]
    assert (dv.sessions, dv.probed, dv.readable, dv.status) == (2, 2, 0, STATUS_UNRECOGNISED)
    assert dv.skipped == {"unknown_document": 1, "bad_json": 1}


def test_unrecognised_jsonl_format(isolated_home: Path) -> None:
    root = isolated_home / ".cursor" / "projects" / "x" / "agent-transcripts"
    root.mkdir(parents=True)
    (root / "t.jsonl").write_text(
        '{"speaker": "me", "said": "hi"}\n{"speaker": "bot", "said": "yo"}\n'
    )
    assert status_of(Settings(), isolated_home)["cursor"].status == STATUS_UNRECOGNISED


def test_enable_found_never_overwrites_an_existing_config(
    isolated_home: Path, tmp_path: Path
) -> None:
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    write_devin_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    config = tmp_path / "config.toml"
    config.write_text(
        "epochs = 3\n\n[sources.claude_code]\nenabled = false\n\n[sources.devin]\nenabled = false\n"
    )
    statuses = discover_sources(
        load_settings(config), config_path=config, env={}, home=isolated_home
    )
    assert enable_found(config, statuses) == ["copilot_cli"]
    text = config.read_text()
    assert text.startswith(
        "epochs = 3\n\n[sources.claude_code]\nenabled = false\n\n[sources.devin]\nenabled = false\n"
    )
    settings = load_settings(config)
    assert settings.epochs == 3
    # codex is a default source the file did not name: on before, so written as on (never
    # switched off by --enable-found), though its logs are not found here
    assert {n: c.enabled for n, c in settings.sources.items()} == {
        "claude_code": False,
        "devin": False,
        "codex": True,
        "copilot_cli": True,
        "copilot_vscode": False,
        "cursor": False,
        "opencode": False,
        "pi": False,
        "openclaw": False,
    }
    assert configured_sources(config) == set(KNOWN_SOURCES)
    assert enable_found(config, statuses) == []  # idempotent: nothing left to add
    assert config.read_text() == text


FIRST_RUN_CONFIG = """\
# skillopt-sleep configuration. [sources.*]: the agents whose logs were found here.
epochs = 3  # my own setting

[sources.claude_code]
enabled = true

[sources.codex]
enabled = true

[sources.copilot_cli]
# added by the first run, before Copilot CLI was installed
enabled   = false   # not yet

[sources.copilot_vscode]
enabled = false

[sources.devin]
enabled = false

[sources.cursor]
enabled = false

[sources.opencode]
enabled = false

[sources.pi]
enabled = false

[sources.openclaw]
enabled = false
"""


def test_enable_found_switches_on_a_disabled_agent_found_later(
    isolated_home: Path, tmp_path: Path
) -> None:
    """The first run wrote `enabled = false` for Copilot CLI; its logs exist now. Only the
    explicit request switches it on, in place, changing nothing else in the file; a disabled
    agent whose logs are still missing stays off."""
    config = tmp_path / "config.toml"
    config.write_bytes(FIRST_RUN_CONFIG.encode())
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    statuses = discover_sources(
        load_settings(config), config_path=config, env={}, home=isolated_home
    )
    assert enable_found(config, statuses) == []  # the first-run behaviour: named sources untouched
    assert config.read_bytes() == FIRST_RUN_CONFIG.encode()
    assert enableable(config, statuses) == ["copilot_cli"]
    assert enable_found(config, statuses, switch_disabled=True) == ["copilot_cli"]
    assert config.read_text() == FIRST_RUN_CONFIG.replace(
        "enabled   = false   # not yet", "enabled   = true   # not yet"
    )
    settings = load_settings(config)
    assert {n for n, c in settings.sources.items() if c.enabled} == {
        "claude_code",
        "codex",
        "copilot_cli",
    }
    assert settings.epochs == 3
    statuses = discover_sources(settings, config_path=config, env={}, home=isolated_home)
    assert enable_found(config, statuses, switch_disabled=True) == []  # idempotent
    assert enableable(config, statuses) == []


def test_enable_found_switches_dotted_and_inline_tables_and_keeps_crlf(
    isolated_home: Path, tmp_path: Path
) -> None:
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    write_devin_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    config = tmp_path / "config.toml"
    text = (
        "# mine\r\n[sources]\r\ncopilot_cli.enabled = false # later\r\n"
        "devin = { enabled = false, roots = [] }\r\n"
        "claude_code.enabled = false\r\ncodex.enabled = true\r\n"
        "copilot_vscode.enabled = false\r\nopencode.enabled = false\r\n"
        "pi.enabled = false\r\nopenclaw.enabled = false\r\n"
    )
    config.write_bytes(text.encode())
    (isolated_home / ".claude" / "projects").mkdir(
        parents=True
    )  # found: the user's false is switched too
    statuses = discover_sources(
        load_settings(config), config_path=config, env={}, home=isolated_home
    )
    assert enable_found(config, statuses, switch_disabled=True) == [
        "claude_code",
        "copilot_cli",
        "devin",
    ]
    assert (
        config.read_bytes()
        == (
            text.replace("copilot_cli.enabled = false", "copilot_cli.enabled = true")
            .replace("devin = { enabled = false", "devin = { enabled = true")
            .replace("claude_code.enabled = false", "claude_code.enabled = true")
            + "\r\n[sources.cursor]\r\nenabled = false\r\n"
        ).encode()
    )  # appended in the file's line endings


def test_enable_found_on_a_new_install_keeps_the_defaults(
    isolated_home: Path, tmp_path: Path
) -> None:
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    config = tmp_path / "new" / "config.toml"
    statuses = discover_sources(Settings(), config_path=config, env={}, home=isolated_home)
    assert enable_found(config, statuses) == ["claude_code", "codex", "copilot_cli"]
    enabled = {n for n, c in load_settings(config).sources.items() if c.enabled}
    assert enabled == {"claude_code", "codex", "copilot_cli"}


def test_default_settings_harvest_claude_code_and_codex_only() -> None:
    assert {n for n, c in Settings().sources.items() if c.enabled} == {"claude_code", "codex"}
    assert set(Settings(sources={n: SourceConfig() for n in KNOWN_SOURCES}).sources) == set(
        KNOWN_SOURCES
    )


def cli(*args: str) -> subprocess.CompletedProcess:
    return skillopt_in_process(*args, env=dict(os.environ, COLUMNS="240"), timeout=120)


def test_sources_command(isolated_home: Path, tmp_path: Path) -> None:
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    bad = isolated_home / ".local" / "share" / "opencode" / "storage" / "session" / "p"
    bad.mkdir(parents=True)
    (bad / "s.json").write_text('{"no": "id"}')
    first = cli("sources", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["created"] is True and data["enabled_now"] == [
        "claude_code",
        "codex",
        "copilot_cli",
        "opencode",
    ]
    rows = {s["name"]: s for s in data["sources"]}
    assert (
        rows["copilot_cli"]["enabled"],
        rows["copilot_cli"]["sessions"],
        rows["copilot_cli"]["status"],
    ) == (True, 1, "ok")
    assert rows["opencode"]["status"] == "unrecognised format"
    assert rows["devin"]["status"] == "not found" and rows["devin"]["enabled"] is False
    assert Path(data["config"]).is_file()
    table = cli("sources")
    assert table.returncode == 0, table.stderr
    assert "copilot_cli" in table.stdout and "unrecognised format" in table.stdout
    again = json.loads(cli("sources", "--json", "--enable-found").stdout)
    assert again["created"] is False and again["enabled_now"] == []


def test_sources_hints_and_enable_found_switches_on_an_agent_installed_later(
    isolated_home: Path, tmp_path: Path
) -> None:
    """The user trial: the first run wrote `enabled = false` for Copilot CLI (not installed
    then); once its logs exist, `sources` names it with the command, and `--enable-found`
    switches it on (only that line changes) and says so."""
    first = json.loads(cli("sources", "--json").stdout)
    config = Path(first["config"])
    assert first["created"] is True and "copilot_cli" not in first["enabled_now"]
    assert config.stat().st_mode & 0o777 == 0o600  # may come to hold an api_key
    config.write_text(
        config.read_text().replace("[sources.copilot_cli]", "# my note\n[sources.copilot_cli]")
    )
    before = config.read_text()
    assert "[sources.copilot_cli]\nenabled = false\n" in before
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    listing = cli("sources")
    assert listing.returncode == 0, listing.stderr
    assert "found but not enabled: copilot_cli" in listing.stdout
    assert "skillopt-sleep sources --enable-found" in listing.stdout
    assert json.loads(cli("sources", "--json").stdout)["found_not_enabled"] == ["copilot_cli"]
    assert config.read_text() == before  # listing changes nothing
    enabled = cli("sources", "--enable-found")
    assert enabled.returncode == 0, enabled.stderr
    assert f"enabled in {config}: copilot_cli" in " ".join(enabled.stdout.split())
    assert "found but not enabled" not in enabled.stdout
    assert config.read_text() == before.replace(
        "[sources.copilot_cli]\nenabled = false\n", "[sources.copilot_cli]\nenabled = true\n"
    )
    again = cli("sources", "--enable-found")
    assert "nothing to enable" in again.stdout and config.read_text() != before
    data = json.loads(cli("sources", "--json").stdout)
    assert data["found_not_enabled"] == []
    assert {s["name"]: s["enabled"] for s in data["sources"]}["copilot_cli"] is True
    assert {s["name"]: s["enabled"] for s in data["sources"]}[
        "devin"
    ] is False  # not found: stays off


def test_naming_one_source_keeps_the_defaults_as_the_docs_say(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[sources.copilot_cli]\nenabled = true\n")
    assert {n for n, c in load_settings(config).sources.items() if c.enabled} == {
        "claude_code",
        "codex",
        "copilot_cli",
    }
    config.write_text("[sources.copilot_cli]\n\n[sources.codex]\nenabled = false\n")
    assert {n for n, c in load_settings(config).sources.items() if c.enabled} == {
        "claude_code",
        "copilot_cli",
    }
    doc = " ".join(
        (Path(__file__).resolve().parents[2] / "docs" / "sources.md").read_text().split()
    )
    assert "harvests only those" not in doc
    assert (
        "Naming a source in `[sources]` configures that source; it does not switch the others off. "
        "The default ones (`claude_code`, `codex`) stay enabled unless the file sets `enabled = false` "
        "for them"
    ) in doc


def test_enable_found_names_only_what_it_switched_on(isolated_home: Path, tmp_path: Path) -> None:
    """A hand-written config naming only Copilot CLI (off): `--enable-found` writes tables
    for the other agents, but Claude Code and Codex were on already (default sources), so
    only Copilot CLI is reported as enabled."""
    from skillopt_sleep import paths

    config = paths.config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[sources.copilot_cli]\nenabled = false\n", encoding="utf-8")
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    res = cli("sources", "--enable-found")
    assert res.returncode == 0, res.stderr
    assert f"enabled in {config}: copilot_cli" in " ".join(res.stdout.split())
    data = json.loads(cli("sources", "--json").stdout)
    on = {s["name"]: s["enabled"] for s in data["sources"]}
    assert on["copilot_cli"] and on["claude_code"] and on["codex"]


def test_a_config_without_sources_names_no_default_agent_as_found_but_not_enabled(
    isolated_home: Path, tmp_path: Path
) -> None:
    """A config file with no [sources] (e.g. made by `config edit`): Claude Code and Codex are
    on by default, so `sources` must not tell the user to enable them (found or not)."""
    config = tmp_path / "config.toml"
    config.write_text("epochs = 2\n")
    write_claude_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    statuses = discover_sources(
        load_settings(config), config_path=config, env={}, home=isolated_home
    )
    on = {s.name for s in statuses if s.enabled}
    assert {"claude_code", "codex"} <= on and "copilot_cli" not in on
    assert enableable(config, statuses) == ["copilot_cli"]
