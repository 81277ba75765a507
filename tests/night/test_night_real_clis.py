"""Whole nights through the real agent CLIs (``claude -p``, ``codex exec``, ``copilot -p``,
``opencode run``, ``pi -p`` from
``node_modules/.bin``, pinned in package.json) against the simulator on loopback.

Each CLI runs with HOME = the test's temporary home (conftest), points at the simulator by
its documented environment / config, and never reaches the network. In CI (env ``CI`` set) a
missing CLI fails these tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendError,
    BackendModelError,
    BackendUnreachable,
)
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import load_persona, serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.status import collect_status
from skillopt_sleep.store import Store
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.clis import require_cli
from tests.helpers.net import closed_port
from tests.helpers.night import NO_COLLATERAL, night_settings, night_world
from tests.helpers.night import PERSONA as ENGINE_PERSONA
from tests.helpers.store import db_get, db_rows

pytestmark = pytest.mark.cli


# the engine test's persona, answering only the model the CLIs are configured with
PERSONA = ENGINE_PERSONA.replace(
    'name = "night-test"\nmodels = []', 'name = "night-cli-test"\nmodels = ["sim-demo"]'
)
assert 'models = ["sim-demo"]' in PERSONA
SIM_KEY = "sk-sim-night-0123456789"
USER_TEXT = "# Project rules\n\nWritten by hand.\n"


@pytest.fixture
def world(tmp_path, isolated_home, cli_path):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    persona = tomllib.loads(PERSONA)
    return isolated_home, project, persona_from_dict(persona), target


def backend(name: str, url: str, **extra) -> dict:
    base = {
        "name": name,
        "base_url": url,
        "model": "sim-demo",
        "api_key": SIM_KEY,
        "max_retries": 0,
        "timeout": 60,
        "workers": 2,
    }
    base.update(extra)
    return base


def settings_for(home: Path, project: Path, target: Path, tgt: dict, opt: dict, **extra):
    return night_settings(home, project, target, target=tgt, optimizer=opt, **extra)


def session_files(home: Path) -> set[Path]:
    roots = [
        home / ".claude" / "projects",
        home / ".codex" / "sessions",
        home / ".codex" / "archived_sessions",
        home / ".copilot" / "session-state",
        home / ".local" / "share" / "opencode",
        home / ".pi" / "agent" / "sessions",
    ]
    return {p for r in roots if r.exists() for p in r.rglob("*") if p.is_file()}


def check_night(store: Store, result, target: Path, target_backend: str) -> None:
    assert result.status == "succeeded", (result.summary, result.error)
    edits = {e["text"]: e for e in db_rows(store, "edits", "night_id = ?", [result.night_id])}
    assert edits["Use `pnpm` instead of `npm`."]["status"] == "applied"
    assert edits["Never mention `pnpm`."]["status"] == "rejected"
    assert result.val_after > result.val_before
    # staged, not written
    assert target.read_text(encoding="utf-8") == USER_TEXT
    prop = db_get(store, "proposals", result.proposal_id)
    assert "+- Use `pnpm` instead of `npm`." in (Path(prop["dir"]) / "diff.patch").read_text()
    # tokens and wall time per rollout, from the CLI's own usage output
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    fresh = [r for r in rollouts if not r["cached"]]
    assert fresh and all(r["backend"] == target_backend for r in rollouts)
    assert all(r["input_tokens"] > 100 and r["output_tokens"] > 0 for r in fresh)
    assert all(0 < r["seconds"] < 60 for r in fresh)
    night = db_get(store, "nights", result.night_id)
    assert night["calls"] > 0 and night["input_tokens"] > 0 and night["output_tokens"] > 0


def test_night_target_claude_optimizer_codex(world):
    require_cli("claude")
    require_cli("codex")
    home, project, persona, target = world
    before = session_files(home)
    store = Store(paths.db_path())
    with serve(persona, api_key=SIM_KEY) as sim:
        settings = settings_for(
            home,
            project,
            target,
            backend("claude_code", sim.url),
            backend("codex", sim.url + "/v1"),
        )
        result = run_night(store, settings)
        check_night(store, result, target, "claude_code")
        # the noise probe (gate_samples = 4, the default) replayed val under a placebo through
        # the real CLI too; the simulator answers alike, so that one replay was its whole cost
        phases = [r["phase"] for r in db_rows(store, "rollouts", "night_id = ?", [result.night_id])]
        assert "val noise probe placebo 1" in phases and "val baseline sample 1" not in phases
        assert result.summary.noise is None  # quiet: nothing to report
        endpoints = sim.stats.by_endpoint
        assert endpoints["/messages"] > 0 and endpoints["/responses"] > 0  # both CLIs ran

        # never harvest yourself: no session file appeared, and a re-harvest finds nothing new
        assert session_files(home) == before
        harvested = store.db["sessions"].count
        report = harvest(store, settings)
        assert store.db["sessions"].count == harvested
        assert all(not s.self_generated for s in store.sessions.all(include_self=True))
        assert report is not None


def test_night_target_copilot(world):
    require_cli("copilot")
    require_cli("codex")
    home, project, persona, target = world
    before = session_files(home)
    store = Store(paths.db_path())
    with serve(persona, api_key=SIM_KEY) as sim:
        settings = settings_for(
            home,
            project,
            target,
            backend("copilot", sim.url + "/v1"),
            backend("codex", sim.url + "/v1"),
        )
        result = run_night(store, settings)
        check_night(store, result, target, "copilot")
        assert sim.stats.by_endpoint["/chat/completions"] > 0
        assert session_files(home) == before
        harvested = store.db["sessions"].count
        harvest(store, settings)
        assert store.db["sessions"].count == harvested


@pytest.mark.parametrize("case", ["no_key", "wrong_url", "unknown_model"])
def test_night_fails_loudly_and_stages_nothing(world, case):
    require_cli("claude")
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona, api_key=SIM_KEY) as sim:
        tgt = backend("claude_code", sim.url)
        if case == "no_key":
            tgt["api_key"] = None
            expected, words = BackendAuthError, ("claude auth login", "api_key_env")
        elif case == "wrong_url":
            tgt["base_url"] = "http://127.0.0.1:9"
            expected, words = BackendUnreachable, ("base_url",)
        else:
            tgt["model"] = "no-such-model"
            expected, words = BackendModelError, ("`model`",)
        # the optimizer is healthy: the failure must come from (and name) the target
        settings = settings_for(home, project, target, tgt, backend("anthropic", sim.url))
        with pytest.raises(BackendError) as info:
            run_night(store, settings)
    assert isinstance(info.value, expected), info.value
    message = str(info.value)
    assert message.startswith("claude_code: ") and "\n" not in message
    assert all(w in message for w in words), message
    assert SIM_KEY not in message
    night = db_rows(store, "nights", order_by="id desc", limit=1)[0]
    assert night["status"] == "failed" and night["error"] == message
    assert db_rows(store, "proposals") == []
    assert target.read_text(encoding="utf-8") == USER_TEXT
    # no CLI error text was stored as an answer
    assert all(
        "Not logged in" not in r["answer"] and "API Error" not in r["answer"]
        for r in db_rows(store, "rollouts")
    )
    status = collect_status(store).model_dump(mode="json")
    assert status["last_night"]["status"] == "failed"
    assert status["last_error"] == message


#: target backend -> (CLI, the URL it is given for the simulator, the login command its fix names)
TARGETS = {
    "claude_code": ("claude", "", "`claude auth login`"),
    "codex": ("codex", "/v1", "`codex login`"),
    "copilot": ("copilot", "/v1", "`copilot login`"),
    "opencode": ("opencode", "/v1", "`opencode auth login`"),
    "pi": ("pi", "/v1", "`/login`"),
}
WRONG_KEY = "sk-sim-wrong-9876543210"


def toml_table(name: str, values: dict) -> str:
    lines = [f"[{name}]"]
    for key, value in values.items():
        if value is not None:  # a JSON string / number is a TOML one too
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def write_night_config(
    path: Path, world, target_backend: dict, optimizer_backend: dict, **top: object
) -> Path:
    """A config file for a CLI night over the world's sessions, training its CLAUDE.md."""
    home, project, _persona, target = world
    path.write_text(
        f"project = {json.dumps(str(project))}\nepochs = 1\n"
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in top.items())
        + toml_table("sources.claude_code", {"roots": [str(home / ".claude" / "projects")]})
        + toml_table("sources.codex", {"roots": [str(home / ".codex" / "sessions")]})
        + toml_table("document", {"kind": "path", "path": str(target)})
        + toml_table("target", target_backend)
        + toml_table("optimizer", optimizer_backend),
        encoding="utf-8",
    )
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The real entry point (``main``, in this process: the agent CLI it starts is the
    process that matters here), with the test's HOME, PATH and SKILLOPT_SLEEP_HOME."""
    return skillopt_in_process(*args, env=dict(os.environ), timeout=240)


@pytest.mark.parametrize("case", ["no_key", "wrong_key", "wrong_url", "unknown_model"])
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_cli_night_with_a_broken_target_cli_exits_1_and_stages_nothing(world, tmp_path, name, case):
    """``python -m skillopt_sleep --config FILE run`` with each real agent CLI as the target,
    broken four ways; the optimizer is healthy, so the failure must come from (and name) the
    target, with its fix."""
    binary, suffix, login = TARGETS[name]
    require_cli(binary)
    home, project, persona, target = world
    with serve(persona, api_key=SIM_KEY) as sim:
        tgt = backend(name, sim.url + suffix)
        if case == "no_key":
            # no key configured: claude falls back to its (absent) login and says "Not logged
            # in" without sending a request; codex and copilot send no key and get a 401
            tgt["api_key"] = None
            words = ("not logged in or the API key was rejected", login, "`api_key_env`")
        elif case == "wrong_key":
            tgt["api_key"] = WRONG_KEY
            words = ("not logged in or the API key was rejected", login, "`api_key_env`")
        elif case == "wrong_url":
            # a closed port: the backend's pre-flight check fails before the CLI is started
            tgt["base_url"] = f"http://127.0.0.1:{closed_port()}{suffix}"
            words = (f"cannot reach {tgt['base_url']}", "check `base_url`")
        else:
            tgt["model"] = "no-such-model"  # the persona lists only sim-demo: 404
            words = ("unknown model 'no-such-model'", "check `model`")
        config = write_night_config(
            tmp_path / "config.toml", world, tgt, backend("anthropic", sim.url), edit_budget=3
        )
        res = run_cli("--config", str(config), "run")
        seen = sim.stats.snapshot()["requests"]

    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    message = errors[0].removeprefix("error: ")
    assert message.startswith(f"{name}: "), message
    assert all(w in message for w in words), (words, message)
    assert "internal error" not in message
    assert SIM_KEY not in res.stderr + res.stdout and WRONG_KEY not in res.stderr + res.stdout
    # the simulator saw what the case is about (the CLI really talked to it)
    statuses = {r["status"] for r in seen if r.get("model") == tgt["model"]}
    if case == "wrong_key" or (case == "no_key" and name != "claude_code"):
        assert 401 in statuses, seen
    elif case == "unknown_model":
        assert statuses == {404}, seen

    status = run_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["last_night"]["status"] == "failed"
    assert data["last_night"]["error"] == message and data["last_error"] == message
    assert data["pending_proposals"] == []
    store = Store(paths.db_path())
    assert db_rows(store, "proposals") == []
    assert target.read_text(encoding="utf-8") == USER_TEXT
    # no CLI error text was stored as an answer
    assert all(r["backend"] != name or not r["answer"] for r in db_rows(store, "rollouts")), (
        db_rows(store, "rollouts")
    )


def test_unknown_model_persona_is_strict():
    """Guard for the failure tests above: the persona rejects unknown models."""
    persona = dataclasses.replace(load_persona("demo"), models=("sim-demo",))
    assert persona.accepts("sim-demo") and not persona.accepts("no-such-model")


@pytest.mark.parametrize("signame,workers", [("SIGTERM", 2), ("SIGHUP", 1), ("SIGINT", 1)])
def test_cli_run_terminated_kills_the_agent_cli_and_records_the_night_interrupted(
    world, tmp_path, signame, workers
):
    """`skillopt-sleep run` (a night in the CLI's own process) gets SIGTERM (`timeout`, a
    service manager) or SIGHUP (its terminal closed) while `claude -p` waits on its model:
    the claude process groups die with it — with parallel rollouts too, where the calls run
    in worker threads and the queued ones must not start — the night is `interrupted`, and
    the CLI exits 128 + signal at once."""
    import signal
    import time

    import psutil

    exe = require_cli("claude")
    home, project, persona, target = world
    sig = getattr(signal, signame)
    # the optimizer answers; every call of the target's simulator hangs: the night waits on claude
    with serve(persona, api_key=SIM_KEY) as opt, serve(persona, api_key=SIM_KEY) as sim:
        sim.stall_next(1000, 120.0)
        # val_fraction: the first phase (the val baseline) has more tasks than workers
        config = write_night_config(
            tmp_path / "config.toml",
            world,
            backend("claude_code", sim.url, timeout=300, workers=workers),
            backend("anthropic", opt.url),
            val_fraction=0.5,
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillopt_sleep", "--config", str(config), "run"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        me = psutil.Process(proc.pid)
        seen: list[psutil.Process] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            for child in me.children(recursive=True):
                if child not in seen:
                    seen.append(child)
            if len([r for r in sim.stats.snapshot()["requests"] if r.get("stalled")]) >= workers:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        assert any(r.get("stalled") for r in sim.stats.snapshot()["requests"]), (
            "claude never called"
        )
        seen += [c for c in me.children(recursive=True) if c not in seen]
        assert any(
            os.path.realpath(exe) in " ".join(c.cmdline()) or "claude" in " ".join(c.cmdline())
            for c in seen
            if c.is_running()
        )
        proc.send_signal(sig)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=60)
        assert time.monotonic() - signalled < 30  # not held up by the stalled calls (120 s)
        assert len([r for r in sim.stats.snapshot()["requests"] if r.get("stalled")]) == workers
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    said = "aborted (Ctrl-C)" if signame == "SIGINT" else f"aborted by signal {int(sig)}"
    assert f"{said}: the night is recorded interrupted" in err
    gone, alive = psutil.wait_procs(seen, timeout=10)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    night = db_rows(Store(paths.db_path()), "nights", order_by="id desc", limit=1)[0]
    assert night["status"] == "interrupted"
    assert night["error"] == (
        "interrupted (Ctrl-C)" if signame == "SIGINT" else f"interrupted (signal {int(sig)})"
    )
    assert target.read_text(encoding="utf-8") == USER_TEXT


@pytest.mark.parametrize("name,binary", [("opencode", "opencode"), ("pi", "pi")])
def test_skill_mode_night_through_opencode_and_pi(
    tmp_path, isolated_home, cli_path, monkeypatch, name, binary
):
    """The managed skill of OpenCode / Pi trained by replaying through that CLI: the candidate
    sits in the overlay's skills folder, the CLI lists it and (the persona loads every listed
    skill) loads it its own way (OpenCode's skill tool, Pi's read), so the night certifies it;
    the user's skills folder is untouched until adopt."""
    from importlib import resources

    from skillopt_sleep import agents
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
    from skillopt_sleep.testing.sessions import write_conversations

    require_cli(binary)
    project = tmp_path / "webapp"
    project.mkdir()
    # the demo's first two tasks (install, run the tests): each task is more real-CLI turns
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS[:5])
    demo = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = tmp_path / "persona.toml"
    persona.write_text(demo.read_text("utf-8") + '\n[skills]\nmatch = "always"\n')
    # OpenCode's skill tool lists the skill folder with ripgrep: the pinned codex ships an rg
    rg = sorted(
        (Path(require_cli("codex")).parent.parent / "@openai").glob(
            "codex-linux-*/vendor/*/codex-path"
        )
    )
    monkeypatch.setenv("PATH", os.pathsep.join([*(str(d) for d in rg[:1]), os.environ["PATH"]]))
    store = Store(paths.db_path())
    with serve(persona, full_log=True) as sim:
        base = demo_settings(isolated_home, project, sim.url)
        base.update(NO_COLLATERAL)
        base["target"] = {**base["target"], "name": name, "timeout": 90, "max_retries": 0}
        # one edit is all this test needs, the derived pnpm rule (the persona proposes it
        # first): each further edit is one more gate of real-CLI replays
        base["edit_budget"] = 1
        base["gate_samples"] = 1  # no noise probe: one more val replay through the CLI
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{**base, "document": {"kind": "managed_skill", "agent": name}},
        )
        result = run_night(store, settings)
        replays = [r for r in sim.stats.requests if r.get("role") == "target"]
    assert result.status == "succeeded", (result.summary, result.error)
    assert result.summary.delivery is not None and result.summary.delivery.mode == "skill"
    assert result.val_after > result.val_before
    assert any(r.get("skills_loaded") == ["skillopt-sleep-learned"] for r in replays), replays
    assert not agents.get_agent(name).skills_dir().exists()  # staged, not written
