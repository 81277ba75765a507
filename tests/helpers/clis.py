"""The pinned agent CLIs (``npm ci`` installs them into node_modules/.bin): where the tests find
them, and what a missing one does to a test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "node_modules" / ".bin"
#: CLIs that need Node 24, each run on it by a launcher in ``clis/node24`` (``npm ci --prefix
#: clis/node24 --ignore-scripts`` installs them): name -> launcher
NODE24 = {"openclaw": ROOT / "clis" / "node24" / "openclaw"}


def agent_binary(name: str, bin_dir: Path | None = None) -> str:
    """Path of the pinned CLI ``name``. Missing: the test FAILS when ``CI`` is set (CI must
    have installed it), and is skipped with the reason otherwise."""
    if bin_dir is None and name in NODE24:
        launcher = NODE24[name]
        if (launcher.parent / "node_modules" / name).is_dir():
            _settled(launcher, name)
            return str(launcher)
        reason = f"{launcher.parent}/node_modules is missing (run `npm ci --prefix "
        reason += f"{launcher.parent} --ignore-scripts`)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    path = (bin_dir or NODE_BIN) / name
    if path.exists():
        return str(path)
    reason = f"{path} is missing (run `npm ci` in {ROOT})"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _settled(launcher: Path, name: str) -> None:
    """OpenClaw installed with ``--ignore-scripts`` runs its postinstall on its first run,
    under a lock of its own: two first runs at once (two test workers) fail ("package
    lifecycle is incomplete"). The first caller runs ``--version`` once, under our lock."""
    pending = launcher.parent / "node_modules" / name / ".openclaw-lifecycle-pending"
    if not pending.exists():
        return
    with FileLock(str(launcher.parent / "node_modules" / ".skillopt-settle.lock")):
        if pending.exists():
            subprocess.run(
                [str(launcher), "--version"],
                capture_output=True,
                env=cli_env(),
                timeout=300,
                check=False,
                stdin=subprocess.DEVNULL,
            )


def require_cli(name: str) -> str:
    """Path of the pinned CLI ``name`` (see :func:`agent_binary`)."""
    return agent_binary(name)


def cli_env(**extra: str) -> dict[str, str]:
    """A minimal environment for running an agent CLI in the test's HOME: PATH, HOME, a UTF-8
    locale, no colour, loopback never proxied, plus ``extra`` (an empty value removes it)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ["HOME"],
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v}


def run_cli(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run an agent CLI with no stdin; it must exit 0 (else the assertion shows its stderr)."""
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc


#: environment that keeps ``opencode`` offline apart from its model provider: no update
#: check, no models.dev fetch, no npm install of ``@opencode-ai/plugin`` into its config folder
OPENCODE_QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "npm_config_offline": "true",
}
#: environment that keeps ``pi`` offline apart from its model provider
PI_QUIET = {"PI_OFFLINE": "1", "PI_TELEMETRY": "0"}


def write_opencode_config(home: Path, base_url: str, model: str, key_env: str) -> Path:
    """``~/.config/opencode/opencode.json`` in ``home`` with one OpenAI-compatible provider
    ``sim`` at ``base_url`` (``…/v1``) serving ``model``, its key read from ``$key_env``; the
    default model is ``sim/<model>``."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "sim": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Simulator",
                "options": {"baseURL": base_url, "apiKey": "{env:" + key_env + "}"},
                "models": {model: {"name": model}},
            }
        },
        "model": f"sim/{model}",
        "autoupdate": False,
        "share": "disabled",
    }
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def write_pi_models(home: Path, base_url: str, model: str, key_env: str) -> Path:
    """``~/.pi/agent/models.json`` in ``home`` with one provider ``sim`` (OpenAI Chat
    Completions at ``base_url``, ``…/v1``) serving ``model``, its key read from ``$key_env``."""
    models = {
        "providers": {
            "sim": {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": key_env,
                "models": [{"id": model}],
            }
        }
    }
    path = home / ".pi" / "agent" / "models.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(models, indent=2), encoding="utf-8")
    return path


#: environment that keeps ``openclaw`` quiet and offline apart from its model provider
OPENCLAW_QUIET = {"OPENCLAW_DISABLE_BUNDLED_PLUGIN_POSTINSTALL": "1", "NO_COLOR": "1"}


def write_openclaw_config(
    state: Path, base_url: str, model: str, key_env: str, workspace: Path | str | None = None
) -> Path:
    """``<state>/openclaw.json`` (``state`` = ``$OPENCLAW_STATE_DIR``, default ``~/.openclaw``)
    with one OpenAI Chat Completions provider ``sim`` at ``base_url`` (``…/v1``) serving
    ``model``, its key read from ``$key_env``, as the default model; ``workspace``: the
    default agent's workspace (``agents.defaults.workspace``) when given."""
    config = {
        "models": {
            "providers": {
                "sim": {
                    "baseUrl": base_url,
                    "apiKey": "${" + key_env + "}",
                    "api": "openai-completions",
                    "models": [{"id": model, "name": model}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": f"sim/{model}"}}},
    }
    if workspace is not None:
        config["agents"]["defaults"]["workspace"] = str(workspace)
    path = state / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path
