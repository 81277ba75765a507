"""The installed console script, run as a user would (a subprocess per command)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.net import closed_port


def cli(
    *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    exe = shutil.which("skillopt-sleep")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "skillopt_sleep", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env or dict(os.environ), cwd=cwd, timeout=240
    )


def write_config(
    path: Path, home: Path, project: Path, base_url: str, api_key: str = "sk-test"
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"""
project = "{project}"
epochs = 1
[sources.claude_code]
roots = ["{home / ".claude" / "projects"}"]
[sources.codex]
roots = ["{home / ".codex" / "sessions"}"]
[target]
name = "openai_compatible"
base_url = "{base_url}"
model = "sim"
api_key = "{api_key}"
max_retries = 1
timeout = 10
[optimizer]
name = "openai_compatible"
base_url = "{base_url}"
model = "sim"
api_key = "{api_key}"
max_retries = 1
[document]
kind = "path"
path = "{project / "AGENTS.md"}"
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def sessions(tmp_path, isolated_home):
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    return isolated_home, project


def assert_failed_loudly(res, needle: str, project: Path) -> None:
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], res.stderr
    status = json.loads(cli("status", "--json").stdout)
    assert status["last_night"]["status"] == "failed"
    assert needle in status["last_night"]["error"]
    assert status["pending_proposals"] == []
    assert not (project / "AGENTS.md").exists()
    human = cli("status").stdout
    assert "failed" in human and needle in human


def test_backend_down_fails_the_night_loudly(sessions, tmp_path):
    home, project = sessions
    cfg = write_config(tmp_path / "c.toml", home, project, f"http://127.0.0.1:{closed_port()}/v1")
    res = cli("--config", str(cfg), "run")
    assert_failed_loudly(res, "cannot reach", project)


def test_unauthorised_backend_fails_the_night_loudly(sessions, tmp_path):
    home, project = sessions
    with serve("demo", api_key="sk-right") as sim:
        cfg = write_config(tmp_path / "c.toml", home, project, sim.url + "/v1", api_key="sk-wrong")
        res = cli("--config", str(cfg), "run")
    assert_failed_loudly(res, "401", project)
    assert "sk-wrong" not in res.stderr


def test_misspelled_config_key_is_one_line_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[optimizer]\nbase_ulr = 'http://127.0.0.1:1'\n")
    res = cli("--config", str(cfg), "run")
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: config ({cfg}): unknown key 'optimizer.base_ulr'"


def test_run_adopt_rollback_through_the_cli(sessions, tmp_path):
    home, project = sessions
    with serve("demo") as sim:
        cfg = write_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        res = cli("--config", str(cfg), "run", "--json")
        assert res.returncode == 0, res.stderr
        night = json.loads(res.stdout)
    assert night["status"] == "succeeded"
    pid = night["proposal_id"]
    listed = json.loads(cli("proposals", "--json").stdout)
    assert [p["id"] for p in listed] == [pid]
    shown = json.loads(cli("show", pid, "--json").stdout)
    assert shown["scores"]["val_after"] > shown["scores"]["val_before"]
    assert cli("adopt", pid).returncode == 0
    assert "Use `pnpm` instead of `npm`." in (project / "AGENTS.md").read_text()
    assert cli("rollback").returncode == 0
    assert not (project / "AGENTS.md").exists()
    res = cli("adopt", pid)
    assert res.returncode == 1 and res.stderr.startswith("error: proposal p")


def test_demo_runs_with_no_agent_installed(tmp_path):
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    res = cli("demo", "--keep", str(tmp_path / "demo"), env=env)
    assert res.returncode == 0, res.stderr
    assert "demo night: succeeded" in res.stdout
    report = Path(res.stdout.split("report: ")[1].splitlines()[0])
    assert report.is_file() and "Use `pnpm` instead of `npm`." in report.read_text()
    # the demo trains the agent's memory file: the report says how the replays delivered it
    said = " ".join(report.read_text().split())
    assert "put the candidate where the agent finds it after adopt: CLAUDE.md in" in said
    assert "loads it in every session" in said


def test_usage_mistakes_are_usage_errors_not_internal_ones(tmp_path):
    for args in (["status", "--bogus"], ["bogus"], ["show"]):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert "internal error" not in res.stderr
    state = Path(os.environ["SKILLOPT_SLEEP_HOME"]) / "state" / "last-error.txt"
    assert not state.exists()


def test_a_missing_config_file_given_explicitly_is_an_error(tmp_path):
    res = cli("--config", str(tmp_path / "nope.toml"), "run", "--dry-run")
    assert res.returncode == 1
    assert (
        res.stderr.strip()
        == f"error: config file {tmp_path / 'nope.toml'} does not exist (given with --config)"
    )


def test_unset_api_key_env_is_named(sessions, tmp_path):
    home, project = sessions
    cfg = write_config(tmp_path / "c.toml", home, project, "http://127.0.0.1:9/v1")
    cfg.write_text(
        cfg.read_text().replace(
            'api_key = "sk-test"\nmax_retries = 1\ntimeout = 10',
            'api_key_env = "SKILLOPT_TEST_UNSET_KEY"\nmax_retries = 1',
        )
    )
    res = cli("--config", str(cfg), "run")
    assert res.returncode == 1
    assert "$SKILLOPT_TEST_UNSET_KEY, which is not set" in res.stderr


def test_demo_refuses_a_folder_in_use(tmp_path):
    busy = tmp_path / "busy"
    busy.write_text("a file")
    res = cli("demo", "--keep", str(busy))
    assert res.returncode == 1 and res.stderr.startswith("error: demo folder")


def test_status_marks_a_night_whose_process_died_as_interrupted():
    from skillopt_sleep import paths
    from skillopt_sleep.store import Store

    store = Store(paths.db_path())
    # as left by a `run` killed with -9: "running", its lock released by the kernel
    store.nights.add(
        started_at="2026-11-30T01:00:00+00:00", status="running", pid=999999, trigger="cli"
    )
    data = json.loads(cli("status", "--json").stdout)
    assert data["last_night"]["status"] == "interrupted"
    assert data["last_night"]["error"] == "the process running it stopped"


def test_a_dry_run_does_not_hide_the_last_real_night(sessions, tmp_path):
    home, project = sessions
    cfg = write_config(tmp_path / "c.toml", home, project, f"http://127.0.0.1:{closed_port()}/v1")
    assert cli("--config", str(cfg), "run").returncode == 1
    assert cli("--config", str(cfg), "run", "--dry-run").returncode == 0
    status = json.loads(cli("status", "--json").stdout)
    assert status["last_night"]["status"] == "failed" and "cannot reach" in status["last_error"]
    assert [n["status"] for n in status["nights"]][:2] == ["planned", "failed"]
    # nor does a dry run that finds nothing to plan
    empty = tmp_path / "empty-project"
    empty.mkdir()
    assert cli("--config", str(cfg), "run", "--dry-run", "--project", str(empty)).returncode == 0
    status = json.loads(cli("status", "--json").stdout)
    assert (
        status["nights"][0]["status"] == "no_tasks" and status["last_night"]["status"] == "failed"
    )
    # a real night with nothing to train on: `status` says why, as `run` did
    assert cli("--config", str(cfg), "run", "--project", str(empty)).returncode == 0
    text = cli("--config", str(cfg), "status").stdout
    assert "no_tasks" in text and f"no task mined: no request in {empty}" in " ".join(text.split())


def test_first_harvest_of_a_new_install_enables_the_agents_found(isolated_home, tmp_path):
    from tests.helpers.sources import write_copilot_session

    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    res = cli("harvest", "--json")
    assert res.returncode == 0, res.stderr
    assert "first run: wrote" in res.stderr and "copilot_cli" in res.stderr
    report = json.loads(res.stdout)
    assert report["sources"]["copilot_cli"]["sessions_new"] == 1
    # the file lists every agent; a second run changes nothing and says nothing
    again = cli("harvest", "--json")
    assert "first run" not in again.stderr


def test_an_internal_error_is_one_line_exit_3_with_the_traceback_kept(monkeypatch, capsys):
    """A bug (here: an exception no part of the tool expects, raised inside `status`) is not
    a usage mistake (2) nor a known failure (1): one line, exit 3, the traceback on disk."""
    import skillopt_sleep.status
    from skillopt_sleep import cli as cli_mod

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in the status code")

    monkeypatch.setattr(skillopt_sleep.status, "collect_status", broken)
    monkeypatch.setattr(sys, "argv", ["skillopt-sleep", "status"])
    with pytest.raises(SystemExit) as info:
        cli_mod.main()
    assert info.value.code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: internal error: RuntimeError: a bug in the status code"
    )
    trace = Path(os.environ["SKILLOPT_SLEEP_HOME"]) / "state" / "last-error.txt"
    assert "Traceback" in trace.read_text() and "a bug in the status code" in trace.read_text()


def test_status_reports_a_config_that_does_not_load_and_exits_1(tmp_path):
    home = Path(os.environ["HOME"])
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, DEMO_CONVERSATIONS)
    assert cli("harvest").returncode == 0
    good = cli("status")
    assert good.returncode == 0, good.stderr
    assert "skipped lines: " in good.stdout and "{" not in good.stdout  # counts, not a dict
    bad = tmp_path / "bad.toml"
    bad.write_text('projet = "/tmp/x"\n', encoding="utf-8")
    res = cli("--config", str(bad), "status")
    assert res.returncode == 1
    assert "store:" in res.stdout  # the rest of the status is still shown
    assert res.stderr.strip() == f"error: config ({bad}): unknown key 'projet'"
    js = cli("--config", str(bad), "status", "--json")
    assert (
        js.returncode == 1
        and json.loads(js.stdout)["config_error"] == f"config ({bad}): unknown key 'projet'"
    )
    assert json.loads(cli("status", "--json").stdout)["config_error"] is None


def test_tasks_on_an_empty_store_says_so_instead_of_an_empty_table():
    res = cli("tasks")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(
        "no recurring or corrected task yet (0 sessions, 0 prompts considered"
    )
    assert json.loads(cli("tasks", "--json").stdout) == []


def test_simulator_help_describes_it_whole():
    res = subprocess.run(
        [sys.executable, "-m", "skillopt_sleep.simulator", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = " ".join(res.stdout.split())
    assert res.returncode == 0
    assert (
        "prints its URL on one line (``http://127.0.0.1:PORT``) once it accepts connections" in text
    )


def test_tasks_marks_a_task_with_nothing_to_score_it_by(tmp_path):
    """A task asked again and again but never corrected has no check: it is listed, without
    a split, saying it is not scored until a correction arrives."""
    home = Path(os.environ["HOME"])
    project = tmp_path / "docs-site"
    project.mkdir()
    write_conversations(
        home,
        project,
        [
            ("claude_code", [("build the docs site", "Run `mkdocs build`.", None)]),
            ("codex", [("build the docs site", "Run `mkdocs build`.", None)]),
        ],
    )
    assert "harvest first" in cli("tasks").stdout
    assert cli("harvest").returncode == 0
    res = cli("tasks")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "build the docs site" in text and "not scored until a correction arrives" in text
    [task] = json.loads(cli("tasks", "--json").stdout)
    assert task["split"] == "" and task["checks"] == []


def test_tasks_shows_occurrences_by_role_why_similar_prompts_were_kept_apart_and_drops(
    tmp_path,
):
    """The pnpm task asked three times (two agents): its occurrences by role; the same words
    in another project are another task, and ``tasks`` says why (and withholds the held-out
    occurrences that are the other task's train copy); an Agent-SDK grader's session with a
    scripted correction is not mined, and ``tasks`` and ``status`` say so."""
    import datetime as dt

    from skillopt_sleep.testing.sessions import write_claude_session

    home = Path(os.environ["HOME"])
    webapp, other = tmp_path / "webapp", tmp_path / "other"
    webapp.mkdir()
    other.mkdir()
    ask = ("install the dependencies", "Run `npm install`.", "no, use pnpm instead of npm")
    write_conversations(
        home, webapp, [("claude_code", [ask]), ("codex", [ask]), ("claude_code", [ask])]
    )
    write_conversations(home, other, [("claude_code", [ask])])
    write_claude_session(
        home,
        webapp,
        [("bump the version", "Bumped to 1.2.", "no, use hatch version instead of editing it")],
        when=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
        entrypoint="sdk-py",
    )
    assert cli("harvest").returncode == 0
    res = cli("tasks")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "occurrences" in text  # the table's column (its cells wrap: the roles are below)
    assert "kept apart from" in text and "a different project" in text
    assert "not mined: headless_session 1 (headless or programmatic runs" in text
    assert "bump the version" not in text
    tasks = {t["project"]: t for t in json.loads(cli("tasks", "--json").stdout)}
    # the other project's task trains on the very same words: webapp's later occurrences
    # would be its held-out copies, so they are withheld (never another task's held-out copy)
    occurrences = tasks[str(webapp)]["occurrences"]
    assert [o["split"] for o in occurrences] == ["train", "", ""]
    other_id = tasks[str(other)]["id"]
    assert occurrences[1]["note"] == (
        f"withheld from val: a near-duplicate of task {other_id}'s train occurrence"
    )
    assert "an occurrence withheld from test" in text
    assert [o["split"] for o in tasks[str(other)]["occurrences"]] == ["train"]
    assert "1 task(s) asked once" in text
    assert json.loads(cli("status", "--json").stdout)["counts"]["headless"] == 1


def test_a_broken_state_folder_or_database_is_one_line_and_exit_1(tmp_path):
    """The machine, not a bug: a state folder that cannot be made, a damaged database."""
    home = tmp_path / "sk"
    home.mkdir()
    (home / "state").write_text("a file where the state folder should be")
    env = dict(os.environ, SKILLOPT_SLEEP_HOME=str(home))
    for args in (["status"], ["run", "--dry-run"]):
        res = cli(*args, env=env)
        assert res.returncode == 1, (args, res.stderr)
        assert res.stderr.strip().splitlines() == [
            f"error: FileExistsError: File exists ({home / 'state'}); the state folder is {home / 'state'}"
        ]
    (home / "state").unlink()
    (home / "state").mkdir()
    (home / "state" / "skillopt.db").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    res = cli("status", env=env)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("error: ") and "internal error" not in res.stderr
