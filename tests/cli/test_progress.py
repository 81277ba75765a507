"""Live progress of the CLI (issue 15): JSON lines on stderr with ``--json``, a rich display on
a terminal, nothing when stderr is piped. Nights run against the simulator, the CLI in this
process with its stderr captured (a pipe), and as a process on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import sim_config, skillopt_argv
from tests.helpers.cli_run import skillopt_in_process as skillopt


@pytest.fixture
def world(tmp_path, isolated_home):
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    return isolated_home, project


def _events(stderr: str) -> list[dict]:
    """Every stderr line, each a JSON progress object (any other line fails the test)."""
    lines = stderr.splitlines()
    assert lines, "no progress on stderr"
    events = [json.loads(line) for line in lines]
    assert all(e["event"] == "progress" and e["step"] for e in events), events
    return events


def _runs(events: list[dict], step: str, key: tuple[str, ...]) -> list[list[dict]]:
    """The counting events of ``step``, cut into runs: a new run wherever ``key`` changes or
    the count starts again at 0."""
    runs: list[list[dict]] = []
    last = None
    for e in events:
        if e["step"] != step or "done" not in e:
            continue
        k = tuple(e.get(f) for f in key)
        if k != last or e["done"] == 0:
            runs.append([])
        runs[-1].append(e)
        last = k
    return runs


def _rising_to_total(run: list[dict]) -> None:
    done = [e["done"] for e in run]
    assert done == sorted(done), run
    assert run[-1]["done"] == run[-1]["total"] and all(e["total"] == run[0]["total"] for e in run)


def test_run_json_streams_progress_lines_and_stdout_stays_the_result(world, tmp_path):
    home, project = world
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        res = skillopt("--config", str(cfg), "run", "--json")
    assert res.returncode == 0, res.stderr
    night = json.loads(res.stdout)  # stdout: the one JSON result, nothing else
    assert night["status"] == "succeeded"
    events = _events(res.stderr)
    steps = [e["step"] for e in events]
    for step in ("harvest", "mine", "check", "replay", "train", "gate", "test"):
        assert step in steps, (step, steps)
    assert steps.index("harvest") < steps.index("mine") < steps.index("replay")
    # harvest: files of each source counted up to the total, bytes growing
    harvest = _runs(events, "harvest", ("source",))
    assert {r[0]["source"] for r in harvest} == {"claude_code", "codex"}
    for run in harvest:
        _rising_to_total(run)
        assert [e["bytes"] for e in run] == sorted(e["bytes"] for e in run)
    assert sum(r[-1]["total"] for r in harvest) == len(DEMO_CONVERSATIONS)
    # mining: every session walked, prompts counted
    [mine] = _runs(events, "mine", ())
    _rising_to_total(mine)
    assert mine[-1]["total"] == len(DEMO_CONVERSATIONS) and mine[-1]["prompts"] > 0
    # each replay counts its rollouts to its total, with the epoch / batch it belongs to
    replays = _runs(events, "replay", ("phase", "epoch", "batch"))
    phases = [r[0]["phase"] for r in replays]
    assert phases[0] == "val baseline" and "train e1b1" in phases, phases
    for run in replays:
        _rising_to_total(run)
    train = next(r for r in replays if r[0]["phase"] == "train e1b1")
    assert (train[0]["epoch"], train[0]["epochs"], train[0]["batch"]) == (1, 1, 1)
    assert train[0]["batches"] >= 1
    # the night's calls and tokens so far only grow, and end at most at the night's cost
    calls = [e["calls"] for e in events if "calls" in e]
    tokens = [e["tokens"] for e in events if "tokens" in e]
    assert calls == sorted(calls) and tokens == sorted(tokens) and calls[-1] > 0
    cost = night["cost"]
    assert calls[-1] <= cost["calls"]
    assert tokens[-1] <= cost["input_tokens"] + cost["output_tokens"]
    assert {e["night_id"] for e in events if "night_id" in e} == {night["night_id"]}


def test_run_on_a_pipe_without_json_prints_no_progress(world, tmp_path):
    home, project = world
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        res = skillopt("--config", str(cfg), "run")
    assert res.returncode == 0, res.stderr
    assert "night 1: succeeded" in res.stdout
    assert "desktop notification: " in res.stdout  # sent, or why not (tests/cli/test_notify.py)
    assert res.stderr == ""  # stderr is not a terminal: silent


def test_harvest_and_tasks_json_stream_their_progress(world, tmp_path):
    home, project = world
    cfg = sim_config(tmp_path / "c.toml", home, project, "http://127.0.0.1:9/v1")
    res = skillopt("--config", str(cfg), "harvest", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    events = _events(res.stderr)
    assert {e["step"] for e in events} == {"harvest"}
    ends = {r[-1]["source"]: r[-1] for r in _runs(events, "harvest", ("source",))}
    for name, acc in report["sources"].items():
        assert ends[name]["done"] == ends[name]["total"] == acc["files_seen"]
        assert ends[name]["bytes"] == acc["bytes_read"]
    res = skillopt("--config", str(cfg), "tasks", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)  # the tasks, on stdout alone
    [mine] = _runs(_events(res.stderr), "mine", ())
    _rising_to_total(mine)
    assert mine[-1]["total"] == len(DEMO_CONVERSATIONS)
    # piped without --json: nothing on stderr
    quiet = skillopt("--config", str(cfg), "tasks")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_demo_json_streams_its_night(tmp_path):
    res = skillopt("demo", "--keep", str(tmp_path / "demo"), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"] == "succeeded"
    events = _events(res.stderr)
    assert events[0]["step"] == "demo" and "sandbox" in events[0]["message"]
    assert any(e["step"] == "replay" for e in events)


def _run_on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 180) -> str:
    """Run ``argv`` with stderr (and stdin) on a pseudo-terminal, stdout piped; what the
    terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer is gone
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=30) == 0, shown.decode(errors="replace")[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        assert proc.stdout is not None
        proc.stdout.close()
    return shown.decode("utf-8", errors="replace")


def test_run_on_a_terminal_shows_rich_progress(world, tmp_path):
    home, project = world
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    env.pop("NO_COLOR", None)
    with serve("demo", latency=0.1) as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        shown = _run_on_a_terminal(skillopt_argv("--config", str(cfg), "run"), env)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    # the live display: a step with its count and the night's calls and tokens so far
    assert re.search(r"replay val baseline\s.*\d+/\d+", plain), plain[-3000:]
    assert re.search(r"\d+ calls \(\+\d+ cached\), \d+ tokens", plain), plain[-3000:]
    assert "harvest claude_code" in plain or "harvest codex" in plain
    assert "\x1b[" in shown  # drawn, not printed as plain lines
    # the night's messages above it
    assert "checking the backends" in plain


def test_progress_on_an_80_column_terminal_keeps_the_elapsed_time_whole(world, tmp_path):
    """At 80 columns the calls and tokens give way ("…"), never the elapsed time at the end."""
    home, project = world
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="40")
    env.pop("NO_COLOR", None)
    with serve("demo", latency=0.05) as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        shown = _run_on_a_terminal(skillopt_argv("--config", str(cfg), "run"), env)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    # the display's frames: a spinner first, then the step and its count
    frames = [f.rstrip() for f in re.split(r"[\r\n]", plain) if re.match(r"[\u2800-\u28ff] ", f)]
    replays = [f for f in frames if re.search(r"(replay|epoch).* \d+/\d+ ", f)]
    assert replays, plain[-3000:]
    for frame in replays:
        assert len(frame) <= 80 and re.search(r" \d+:\d\d:\d\d$", frame), frame


def test_progress_events_count_every_rollout_in_process(tmp_path, isolated_home):
    """The domain's events without the CLI: run_night's on_progress counts each rollout the
    night records, replay by replay."""
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.store import Store
    from tests.helpers.night import (
        api_backend,
        night_settings,
        night_world,
        write_persona,
    )

    project, doc = night_world(tmp_path, isolated_home, "# Notes\n")
    got: list = []
    with serve(write_persona(tmp_path)) as sim:
        s = night_settings(
            isolated_home,
            project,
            doc,
            sim.url,
            target=api_backend(sim.url, workers=2),
            optimizer=api_backend(sim.url),
        )
        store = Store(tmp_path / "db.sqlite")
        try:
            result = run_night(store, s, on_progress=got.append)
            recorded = len(store.rollouts.of_night(result.night_id))
        finally:
            store.close()
    replays = _runs([e.model_dump(exclude_none=True) for e in got], "replay", ("phase",))
    for run in replays:
        _rising_to_total(run)
    counted = sum(run[-1]["done"] for run in replays)
    # replays made ahead (workers > 1) that the gate never asked for are not recorded
    assert recorded > 0 and counted >= recorded
    assert {e.night_id for e in got} == {result.night_id}
