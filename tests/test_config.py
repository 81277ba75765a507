from pathlib import Path

import pytest

from skillopt_sleep.config import load_settings
from skillopt_sleep.errors import ConfigError
from tests.helpers.cli_run import skillopt_in_process


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_without_a_file(tmp_path):
    s = load_settings(tmp_path / "missing.toml")
    assert s.gate_metric == "mixed" and s.no_regression is True
    assert s.document.kind == "memory"
    assert set(s.sources) == {"claude_code", "codex"}


def test_misspelled_top_level_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'edit_budjet'"):
        load_settings(write(tmp_path, "edit_budjet = 3\n"))


def test_misspelled_nested_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'target\.modle'"):
        load_settings(write(tmp_path, '[target]\nmodle = "x"\n'))


def test_unknown_backend_and_source_names_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown backend 'olama'"):
        load_settings(write(tmp_path, '[target]\nname = "olama"\n'))
    with pytest.raises(ConfigError, match="unknown source 'cursorr'"):
        load_settings(write(tmp_path, "[sources.cursorr]\nenabled = true\n"))


def test_bad_literal_choice(tmp_path):
    with pytest.raises(ConfigError, match="gate_metric"):
        load_settings(write(tmp_path, 'gate_metric = "median"\n'))


def test_precedence_file_env_flags(tmp_path, monkeypatch):
    path = write(tmp_path, 'epochs = 3\nedit_budget = 4\n[target]\nmodel = "from-file"\n')
    assert load_settings(path).epochs == 3
    monkeypatch.setenv("SKILLOPT_SLEEP_EPOCHS", "5")
    monkeypatch.setenv("SKILLOPT_SLEEP_TARGET__MODEL", "from-env")
    s = load_settings(path)
    assert s.epochs == 5 and s.target.model == "from-env" and s.edit_budget == 4
    s = load_settings(path, epochs=7, target={"model": "from-flag"})
    assert s.epochs == 7 and s.target.model == "from-flag"
    # a flag that was not given does not clobber
    assert load_settings(path, epochs=None).epochs == 5


def test_unknown_environment_key_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLOPT_SLEEP_EPOCS", "2")
    with pytest.raises(ConfigError, match="SKILLOPT_SLEEP_EPOCS"):
        load_settings(tmp_path / "missing.toml")


def test_broken_toml_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="config file"):
        load_settings(write(tmp_path, "epochs = = 2\n"))


def test_naming_one_source_keeps_the_default_ones(tmp_path):
    s = load_settings(write(tmp_path, '[sources.claude_code]\nroots = ["/somewhere"]\n'))
    assert s.sources["codex"].enabled and s.sources["claude_code"].roots == [Path("/somewhere")]
    s = load_settings(write(tmp_path, "[sources.codex]\nenabled = false\n"))
    assert not s.sources["codex"].enabled


def test_environment_mistakes_are_blamed_on_the_environment(tmp_path, monkeypatch):
    path = write(tmp_path, "epochs = 2\n")
    monkeypatch.setenv("SKILLOPT_SLEEP_TARGET__MODLE", "x")
    with pytest.raises(
        ConfigError, match=r"config \(environment\): unknown key 'SKILLOPT_SLEEP_TARGET__MODLE'"
    ):
        load_settings(path)
    monkeypatch.delenv("SKILLOPT_SLEEP_TARGET__MODLE")
    monkeypatch.setenv("SKILLOPT_SLEEP_EPOCHS", "abc")
    with pytest.raises(ConfigError, match=r"config \(environment or flags\): epochs"):
        load_settings(path)


def test_base_url_must_be_http(tmp_path):
    with pytest.raises(ConfigError, match=r"target\.base_url: must be an http"):
        load_settings(write(tmp_path, '[target]\nbase_url = "not a url"\n'))


def test_project_is_expanded_resolved_and_must_be_a_directory(tmp_path, monkeypatch):
    """`--project .`, `~/src/app` and a symlinked folder all name the folder the agents record
    as their (resolved) working directory; a missing folder is an error, not zero tasks."""
    app = tmp_path / "src" / "app"
    app.mkdir(parents=True)
    (tmp_path / "link").symlink_to(app)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(app)
    assert load_settings(None, project=".").project == app.resolve()
    assert load_settings(write(tmp_path, 'project = "~/src/app"\n')).project == app.resolve()
    assert load_settings(None, project=str(tmp_path / "link")).project == app.resolve()
    monkeypatch.setenv("SKILLOPT_SLEEP_PROJECT", "~/src/nope")
    with pytest.raises(ConfigError, match=r"project: '~/src/nope' is not a directory"):
        load_settings(None)


def test_a_relative_project_in_the_file_is_the_files_folders(tmp_path, monkeypatch):
    """The daemon and its night worker run in the state folder: a relative `project` in the
    config file must not depend on the current directory."""
    (tmp_path / "conf" / "webapp").mkdir(parents=True)
    cfg = tmp_path / "conf" / "config.toml"
    cfg.write_text('project = "webapp"\n', encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_settings(cfg).project == (tmp_path / "conf" / "webapp").resolve()
    assert load_settings(cfg, project=None).project == (tmp_path / "conf" / "webapp").resolve()
    # a flag or a variable is the user's current directory's
    (elsewhere / "other").mkdir()
    assert load_settings(cfg, project="other").project == (elsewhere / "other").resolve()
    monkeypatch.setenv("SKILLOPT_SLEEP_PROJECT", "other")
    assert load_settings(cfg).project == (elsewhere / "other").resolve()


def test_a_config_file_that_is_not_utf8_is_a_one_line_error(tmp_path):

    from skillopt_sleep.config import read_config_file

    bad = tmp_path / "c.toml"
    bad.write_bytes(b"epochs = 1\n# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_config_file(bad)
    for cmd in ("run", "sources"):
        res = skillopt_in_process("--config", str(bad), cmd, timeout=60)
        assert res.returncode == 1, res.stderr
        assert res.stderr.strip().splitlines()[-1].startswith(f"error: config file {bad}")


def test_a_target_agent_cli_trains_that_agents_document_unless_told_otherwise() -> None:
    """``target.name = "opencode"``: the memory file trained is OpenCode's, where the replays
    certify it; an explicit ``document.agent`` and a file-named kind are left alone."""
    from skillopt_sleep.config import Settings

    assert Settings(target={"name": "opencode"}).document.agent == "opencode"
    assert (
        Settings(target={"name": "pi"}, document={"kind": "managed_skill"}).document.agent == "pi"
    )
    explicit = Settings(target={"name": "opencode"}, document={"agent": "codex"})
    assert explicit.document.agent == "codex"
    path = Settings(target={"name": "opencode"}, document={"kind": "path", "path": "/x/A.md"})
    assert path.document.agent == "claude_code"
    assert Settings(target={"name": "openai_compatible"}).document.agent == "claude_code"
