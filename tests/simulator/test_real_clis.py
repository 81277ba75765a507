"""The pinned agent CLIs (node_modules/.bin: claude, codex, copilot) against the simulator.

Each runs with a throw-away HOME and talks to 127.0.0.1 only. A missing binary fails when
``CI`` is set (the CI installs them with ``npm ci``) and skips otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt_sleep.simulator import Simulator, serve
from tests.helpers.clis import agent_binary

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "node_modules" / ".bin"
RULE = "- Use `pnpm` instead of `npm`.\n"
TIMEOUT = 120


def binary(name: str) -> str:
    return agent_binary(name, BIN)


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve("demo", api_key="sim-key") as running:
        yield running


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: no inherited keys, proxies or agent settings."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.update(extra)
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc


def claude(sim: Simulator, cwd: Path, prompt: str, *extra: str) -> dict:
    env = base_env(
        Path(os.environ["HOME"]),
        ANTHROPIC_BASE_URL=sim.url,
        ANTHROPIC_API_KEY="sim-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )
    proc = run([binary("claude"), "-p", prompt, "--output-format", "json", *extra], cwd, env)
    return json.loads(proc.stdout)


def test_claude_prints_the_simulators_answer(sim: Simulator, workdir: Path) -> None:
    out = claude(sim, workdir, "how do I run the tests?")
    assert out["result"] == "Run `npm test` to run the suite."
    assert sim.stats.by_endpoint["/messages"] >= 1
    assert all(r["stream"] for r in sim.stats.requests if r["endpoint"] == "/messages")


def test_claude_reads_claude_md_and_the_rule_applies(sim: Simulator, workdir: Path) -> None:
    (workdir / "CLAUDE.md").write_text(RULE)
    assert (
        claude(sim, workdir, "how do I run the tests?")["result"]
        == "Run `pnpm test` to run the suite."
    )


def test_claude_tool_use_round_trip(sim: Simulator, workdir: Path) -> None:
    out = claude(sim, workdir, "list the files", "--allowedTools", "Bash")
    assert out["result"] == "The project files are listed above."
    assert [r["tool"] for r in sim.stats.requests if r["endpoint"] == "/messages"][-2:] == [
        "Bash",
        None,
    ]


def codex(sim: Simulator, cwd: Path, prompt: str) -> str:
    home = Path(os.environ["HOME"])
    codex_home = home / "codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "Simulator"\n'
        f'base_url = "{sim.url}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n'
    )
    env = base_env(home, CODEX_HOME=str(codex_home), SIM_API_KEY="sim-key")
    return run([binary("codex"), "exec", "--skip-git-repo-check", prompt], cwd, env).stdout


def test_codex_prints_the_simulators_answer(sim: Simulator, workdir: Path) -> None:
    assert (
        codex(sim, workdir, "how do I run the tests?").strip() == "Run `npm test` to run the suite."
    )
    assert sim.stats.by_endpoint["/responses"] >= 1


def test_codex_reads_agents_md_and_calls_a_tool(sim: Simulator, workdir: Path) -> None:
    (workdir / "AGENTS.md").write_text(RULE)
    assert (
        codex(sim, workdir, "please run the tests").strip() == "Run `pnpm test` to run the suite."
    )
    assert codex(sim, workdir, "list the files").strip() == "The project files are listed above."
    assert "exec_command" in [r["tool"] for r in sim.stats.requests]


def copilot(sim: Simulator, cwd: Path, prompt: str) -> str:
    env = base_env(
        Path(os.environ["HOME"]),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=sim.url + "/v1",
        COPILOT_PROVIDER_API_KEY="sim-key",
        COPILOT_MODEL="sim",
        COPILOT_AUTO_UPDATE="false",
    )
    return run([binary("copilot"), "-p", prompt, "-s", "--allow-all-tools"], cwd, env).stdout


def test_copilot_prints_the_simulators_answer(sim: Simulator, workdir: Path) -> None:
    assert (
        copilot(sim, workdir, "how do I run the tests?").strip()
        == "Run `npm test` to run the suite."
    )
    assert sim.stats.by_endpoint["/chat/completions"] >= 1


def test_copilot_reads_agents_md_and_calls_a_tool(sim: Simulator, workdir: Path) -> None:
    (workdir / "AGENTS.md").write_text(RULE)
    assert (
        copilot(sim, workdir, "how do I run the tests?").strip()
        == "Run `pnpm test` to run the suite."
    )
    assert copilot(sim, workdir, "list the files").strip() == "The project files are listed above."
    assert "bash" in [r["tool"] for r in sim.stats.requests]


def test_missing_binary_fails_under_ci_and_skips_otherwise(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys.modules[__name__], "BIN", tmp_path)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="missing"):
        binary("claude")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="missing"):
        binary("claude")
