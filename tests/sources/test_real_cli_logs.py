"""Harvest transcripts genuinely written by the pinned agent CLIs (``claude -p``, ``codex exec``,
``opencode run``, ``pi -p`` from ``node_modules/.bin``) in the test's temporary HOME, answering from the simulator on
loopback. In CI (env ``CI`` set) a missing CLI fails; elsewhere the test is skipped."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from skillopt_sleep.config import Settings
from skillopt_sleep.simulator import serve
from skillopt_sleep.sources.base import SELF_MARKER
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import MessageRow, SessionRow, Store
from tests.helpers.clis import (
    OPENCODE_QUIET,
    PI_QUIET,
    agent_binary,
    cli_env,
    write_opencode_config,
    write_pi_models,
)

pytestmark = pytest.mark.cli

KEY = "sk-test-000"
PROMPT = f"{SELF_MARKER} list the project files"


def _cli(name: str) -> str:
    return agent_binary(name)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def _only_session(store: Store, source: str) -> tuple[SessionRow, list[MessageRow]]:
    rows = [s for s in store.sessions.all(include_self=True) if s.source == source]
    assert len(rows) == 1
    return rows[0], store.sessions.messages(rows[0].id)


def test_claude_p_transcript(isolated_home: Path, store: Store) -> None:
    claude = _cli("claude")
    work = isolated_home / "work"
    work.mkdir()
    with serve("demo", api_key=KEY) as sim:
        env = dict(
            os.environ,
            ANTHROPIC_BASE_URL=sim.url,
            ANTHROPIC_API_KEY=KEY,
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        _run([claude, "-p", PROMPT], work, env)
    report = harvest(store, Settings(), sources=["claude_code"])
    cc = report.sources["claude_code"]
    assert cc.files_read == 1 and cc.files_skipped == {} and "bad_json" not in cc.lines_skipped
    assert cc.sessions_filtered == {"self_generated": 1}
    sess, msgs = _only_session(store, "claude_code")
    assert sess.headless == 1 and sess.self_generated == 1
    assert sess.project == str(work) and sess.agent_version
    assert (msgs[0].kind, msgs[0].text) == ("prompt", PROMPT)
    assert [m.kind for m in msgs] == ["prompt", "answer"] and msgs[1].text


def test_codex_exec_rollout(isolated_home: Path, store: Store) -> None:
    codex = _cli("codex")
    work = isolated_home / "work"
    work.mkdir()
    (isolated_home / ".codex").mkdir()
    with serve("demo", api_key=KEY) as sim:
        provider = (
            f'{{name="sim", base_url="{sim.url}/v1", wire_api="responses", '
            f'env_key="SIM_KEY", request_max_retries=0, stream_max_retries=0}}'
        )
        env = dict(os.environ, SIM_KEY=KEY, NO_COLOR="1")
        _run(
            [
                codex,
                "exec",
                "--skip-git-repo-check",
                "--sandbox",
                "read-only",
                "-c",
                f"model_providers.sim={provider}",
                "-c",
                'model_provider="sim"',
                "-m",
                "gpt-5",
                PROMPT,
            ],
            work,
            env,
        )
    report = harvest(store, Settings(), sources=["codex"])
    cx = report.sources["codex"]
    assert cx.files_read == 1 and cx.files_skipped == {} and "bad_json" not in cx.lines_skipped
    sess, msgs = _only_session(store, "codex")
    assert sess.headless == 1 and sess.self_generated == 1 and sess.model == "gpt-5"
    assert sess.project == str(work) and sess.agent_version
    assert [m.kind for m in msgs] == ["prompt", "answer"]  # each written 2-3 ways, stored once
    assert msgs[0].text == PROMPT and msgs[1].text


#: a prompt of the user's own (not a replay), asked twice in one session
ASK = "how do I run the tests?"
FOLLOW_UP = "and the linter?"


def test_opencode_run_database(isolated_home: Path, store: Store) -> None:
    """opencode 1.18.33 writes ``~/.local/share/opencode/opencode.db`` (tables ``session``,
    ``message``, ``part``; ``session_message`` stays empty): a session of two prompts and a
    replay-marked session, both harvested, the replay filtered; a second pass reads nothing
    new."""
    opencode = _cli("opencode")
    work = isolated_home / "work"
    work.mkdir()
    with serve("demo", api_key=KEY) as sim:
        write_opencode_config(isolated_home, sim.url + "/v1", "sim-demo", "SIM_KEY")
        env = cli_env(SIM_KEY=KEY, PWD=str(work), **OPENCODE_QUIET)
        # one word per argument: `opencode run` quotes an argument that holds a space
        _run([opencode, "run", *ASK.split()], work, env)
        _run([opencode, "run", "--continue", *FOLLOW_UP.split()], work, env)
        _run([opencode, "run", *PROMPT.split()], work, env)
    db = isolated_home / ".local" / "share" / "opencode" / "opencode.db"
    assert db.is_file()
    report = harvest(store, Settings(), sources=["opencode"])
    oc = report.sources["opencode"]
    assert oc.files_read == 1 and oc.files_skipped == {} and "bad_json" not in oc.lines_skipped
    assert oc.sessions_filtered == {"self_generated": 1}
    rows = sorted(
        (s for s in store.sessions.all(include_self=True) if s.source == "opencode"),
        key=lambda s: s.self_generated,
    )
    assert [r.self_generated for r in rows] == [0, 1]
    own, replay = rows
    msgs = store.sessions.messages(own.id)
    assert [(m.kind, m.text) for m in msgs if m.kind == "prompt"] == [
        ("prompt", ASK),
        ("prompt", FOLLOW_UP),
    ]
    assert [m.kind for m in msgs] == ["prompt", "answer", "prompt", "answer"]
    assert all(m.text for m in msgs)
    assert own.project == str(work) and own.agent_version == "1.18.33"
    assert own.model == "sim-demo"
    # `opencode run` made the session (its permission ruleset says so): headless
    assert own.headless == 1
    assert store.sessions.messages(replay.id)[0].text == PROMPT
    again = harvest(store, Settings(), sources=["opencode"]).sources["opencode"]
    assert again.sessions_new == 0 and again.sessions_updated == 0


def test_pi_print_session(isolated_home: Path, store: Store) -> None:
    """pi 0.73.1 writes ``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``: a session of
    two prompts (``pi -p`` then ``pi -p -c``) and a replay-marked one, both harvested, the
    replay filtered."""
    pi = _cli("pi")
    work = isolated_home / "work"
    work.mkdir()
    with serve("demo", api_key=KEY) as sim:
        write_pi_models(isolated_home, sim.url + "/v1", "sim-demo", "SIM_KEY")
        env = cli_env(SIM_KEY=KEY, **PI_QUIET)
        base = [pi, "--provider", "sim", "--model", "sim-demo", "-p"]
        _run([*base, ASK], work, env)
        _run([*base, "-c", FOLLOW_UP], work, env)
        _run([*base, PROMPT], work, env)
    files = sorted((isolated_home / ".pi" / "agent" / "sessions").rglob("*.jsonl"))
    assert len(files) == 2 and all(f.parent.name.startswith("--") for f in files)
    report = harvest(store, Settings(), sources=["pi"])
    pr = report.sources["pi"]
    assert pr.files_read == 2 and pr.files_skipped == {} and "bad_json" not in pr.lines_skipped
    assert pr.sessions_filtered == {"self_generated": 1}
    rows = sorted(
        (s for s in store.sessions.all(include_self=True) if s.source == "pi"),
        key=lambda s: s.self_generated,
    )
    assert [r.self_generated for r in rows] == [0, 1]
    own, replay = rows
    msgs = store.sessions.messages(own.id)
    assert [(m.kind, m.text) for m in msgs if m.kind == "prompt"] == [
        ("prompt", ASK),
        ("prompt", FOLLOW_UP),
    ]
    assert [m.kind for m in msgs] == ["prompt", "answer", "prompt", "answer"]
    assert all(m.text for m in msgs)
    assert own.project == str(work) and own.model == "sim-demo"
    # pi 0.73.1 records nothing of `-p` (tests/sources/test_pi.py): not marked headless
    assert own.headless == 0
    assert store.sessions.messages(replay.id)[0].text == PROMPT
