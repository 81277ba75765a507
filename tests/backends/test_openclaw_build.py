"""What the ``openclaw`` backend sets up for one call (no CLI run): its own state folder and
config in the call's scratch, the key only in the environment, the user's ``openclaw.json``
copied without a ``base_url`` but never its workspace, and an unreadable one refused loudly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillopt_sleep import agents
from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import CompletionRequest
from skillopt_sleep.sources.base import SELF_MARKER

KEY = "sk-sim-build-0123456789"


def _build(tmp_path: Path, **config: object):  # type: ignore[no-untyped-def]
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir()
    scratch.mkdir()
    backend = get_backend(BackendConfig(name="openclaw", **config))  # type: ignore[arg-type]
    request = CompletionRequest(prompt="run the tests", system="- Use pnpm.")
    return backend.build(request, "openclaw", work, scratch), work, scratch  # type: ignore[attr-defined]


def test_with_a_base_url_the_call_has_its_own_provider_and_the_key_only_in_the_env(
    tmp_path: Path, isolated_home: Path
) -> None:
    setup, work, scratch = _build(tmp_path, base_url="http://127.0.0.1:9", model="m1", api_key=KEY)
    config_path = Path(setup.argv[setup.argv.index("--config") + 1])
    assert config_path.parent == scratch
    text = config_path.read_text()
    assert KEY not in text and KEY not in " ".join(setup.argv)
    config = json.loads(text)
    provider = config["models"]["providers"]["skillopt_sleep"]
    assert provider["baseUrl"] == "http://127.0.0.1:9/v1"
    assert provider["apiKey"] == "${SKILLOPT_OPENCLAW_API_KEY}"
    assert config["agents"]["defaults"]["workspace"] == str(work)
    assert setup.env["SKILLOPT_OPENCLAW_API_KEY"] == KEY
    assert setup.env["OPENCLAW_STATE_DIR"].startswith(str(scratch))
    assert setup.argv[setup.argv.index("--cwd") + 1] == str(work)
    assert setup.files == {"AGENTS.md": "- Use pnpm."}
    assert setup.stdin.startswith(SELF_MARKER)


def test_without_a_base_url_the_users_config_is_copied_but_not_its_workspace(
    tmp_path: Path, isolated_home: Path
) -> None:
    state = agents.get_agent("openclaw").home()
    state.mkdir(parents=True)
    mine = {
        "models": {"providers": {"openai": {"apiKey": "${OPENAI_API_KEY}"}}},
        "agents": {"defaults": {"workspace": "/home/me/work", "model": {"primary": "openai/x"}}},
    }
    (state / "openclaw.json").write_text(json.dumps(mine))
    setup, work, _scratch = _build(tmp_path)
    config = json.loads(Path(setup.argv[setup.argv.index("--config") + 1]).read_text())
    assert config["models"] == mine["models"]
    assert config["agents"]["defaults"]["model"] == {"primary": "openai/x"}
    assert config["agents"]["defaults"]["workspace"] == str(work)
    assert json.loads((state / "openclaw.json").read_text()) == mine  # the user's untouched


def test_a_users_json5_config_is_read_as_openclaw_reads_it(
    tmp_path: Path, isolated_home: Path
) -> None:
    """OpenClaw reads ``openclaw.json`` as JSON5 (unquoted keys, single quotes, comments,
    trailing commas): the call's copy keeps its provider, and the user's file is untouched."""
    state = agents.get_agent("openclaw").home()
    state.mkdir(parents=True)
    text = (
        "{ // JSON5\n  models: {providers: {openai: {apiKey: '${OPENAI_API_KEY}',},},},\n"
        "  agents: {defaults: {workspace: '/home/me/work', model: {primary: 'openai/x'}}},\n}\n"
    )
    (state / "openclaw.json").write_text(text)
    setup, work, _scratch = _build(tmp_path)
    config = json.loads(Path(setup.argv[setup.argv.index("--config") + 1]).read_text())
    assert config["models"] == {"providers": {"openai": {"apiKey": "${OPENAI_API_KEY}"}}}
    assert config["agents"]["defaults"] == {
        "workspace": str(work),
        "model": {"primary": "openai/x"},
    }
    assert (state / "openclaw.json").read_text() == text


def test_a_users_config_that_is_not_json5_is_refused_naming_the_agent(
    tmp_path: Path, isolated_home: Path
) -> None:
    state = agents.get_agent("openclaw").home()
    state.mkdir(parents=True)
    (state / "openclaw.json").write_text("{ // broken\n  agents: {,\n}\n")
    with pytest.raises(BackendResponseError) as info:
        _build(tmp_path)
    message = str(info.value)
    assert message.startswith("openclaw: cannot read ") and "JSON5" in message, message
    assert "base_url" in message and "\n" not in message, message
