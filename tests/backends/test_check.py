"""Backend.check(): a readiness check that is not a model call."""

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendAuthError, BackendUnreachable
from skillopt_sleep.simulator import serve
from tests.helpers.net import closed_port


@pytest.mark.parametrize("name,suffix", [("openai_compatible", "/v1"), ("anthropic", "")])
def test_http_check_is_not_a_model_call_and_catches_a_bad_key(name, suffix):
    with serve("demo", api_key="sk-good") as sim:
        good = get_backend(BackendConfig(name=name, base_url=sim.url + suffix, api_key="sk-good"))
        good.check()
        assert sum(sim.stats.by_role.values()) == 0 and sim.stats.by_endpoint["/models"] == 1
        bad = get_backend(BackendConfig(name=name, base_url=sim.url + suffix, api_key="sk-bad"))
        with pytest.raises(BackendAuthError, match="401"):
            bad.check()


def test_http_check_catches_a_dead_server():
    backend = get_backend(
        BackendConfig(base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0)
    )
    with pytest.raises(BackendUnreachable, match="cannot reach"):
        backend.check()


@pytest.mark.parametrize("name", ["claude_code", "codex", "copilot"])
def test_exec_check_catches_a_missing_cli_and_a_dead_server(name, tmp_path):
    with pytest.raises(BackendUnreachable, match="set as `executable` in the backend config"):
        get_backend(BackendConfig(name=name, executable="no-such-cli-here")).check()
    fake = tmp_path / "cli"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    with pytest.raises(BackendUnreachable, match="cannot reach"):
        get_backend(
            BackendConfig(
                name=name, executable=str(fake), base_url=f"http://127.0.0.1:{closed_port()}"
            )
        ).check()
    get_backend(BackendConfig(name=name, executable=str(fake))).check()
