"""The command line's behaviour, run through the console script's entry point in this process
(``skillopt``: :func:`~tests.helpers.cli_run.skillopt_in_process`); a process where a process
is the point (``skillopt_process``, a pasted shell line, a pseudo-terminal, what ``--version``
imports)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import sim_config, skillopt_argv
from tests.helpers.cli_run import skillopt as skillopt_process
from tests.helpers.cli_run import skillopt_in_process as skillopt
from tests.helpers.net import closed_port


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
    status = json.loads(skillopt("status", "--json").stdout)
    assert status["last_night"]["status"] == "failed"
    assert needle in status["last_night"]["error"]
    assert status["pending_proposals"] == []
    assert not (project / "AGENTS.md").exists()
    human = skillopt("status").stdout
    assert "failed" in human and needle in human


def test_backend_down_fails_the_night_loudly(sessions, tmp_path):
    home, project = sessions
    cfg = sim_config(tmp_path / "c.toml", home, project, f"http://127.0.0.1:{closed_port()}/v1")
    res = skillopt("--config", str(cfg), "run")
    assert_failed_loudly(res, "cannot reach", project)


def test_unauthorised_backend_fails_the_night_loudly(sessions, tmp_path):
    home, project = sessions
    with serve("demo", api_key="sk-right") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1", api_key="sk-wrong")
        res = skillopt("--config", str(cfg), "run")
    assert_failed_loudly(res, "401", project)
    assert "sk-wrong" not in res.stderr


def test_misspelled_config_key_is_one_line_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[optimizer]\nbase_ulr = 'http://127.0.0.1:1'\n")
    res = skillopt("--config", str(cfg), "run")
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: config ({cfg}): unknown key 'optimizer.base_ulr'"


def test_run_adopt_rollback_through_the_cli(sessions, tmp_path):
    home, project = sessions
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        res = skillopt("--config", str(cfg), "run", "--json")
        assert res.returncode == 0, res.stderr
        night = json.loads(res.stdout)
    assert night["status"] == "succeeded"
    pid = night["proposal_id"]
    listed = json.loads(skillopt("proposals", "--json").stdout)
    assert [p["id"] for p in listed] == [pid]
    shown = json.loads(skillopt("show", pid, "--json").stdout)
    assert shown["scores"]["val_after"] > shown["scores"]["val_before"]
    assert skillopt("adopt", pid).returncode == 0
    assert "Use `pnpm` instead of `npm`." in (project / "AGENTS.md").read_text()
    assert skillopt("rollback").returncode == 0
    assert not (project / "AGENTS.md").exists()
    # the first proposal is p1, whatever the night's id
    assert pid == "p1"
    # show --json carries the diff; git apply takes it (here: the file it creates)
    work = tmp_path / "apply"
    work.mkdir()
    (tmp_path / "p.diff").write_text(shown["diff"])
    git = subprocess.run(
        ["git", "apply", str(tmp_path / "p.diff")], cwd=work, capture_output=True, text=True
    )
    assert git.returncode == 0, git.stderr
    assert (work / "AGENTS.md").read_text() == Path(shown["folder"], "document").read_text()
    # the report's cost line gives the numbers `run` gave
    cost = night["cost"]
    tokens = cost["input_tokens"] + cost["output_tokens"]
    report = Path(shown["folder"], "report.md").read_text()
    assert (
        f"- cost: {cost['calls']} model calls ({cost['cached_calls']} cached), {tokens} tokens, "
        f"{cost['seconds']:.1f} s in model calls" in report
    )
    assert shown["cost"] == cost and night["seconds"] >= cost["seconds"]
    # rollback is an undo, not a no: the same proposal adopts again
    res = skillopt("adopt", pid)
    assert res.returncode == 0, res.stderr
    assert "Use `pnpm` instead of `npm`." in (project / "AGENTS.md").read_text()
    assert skillopt("rollback").returncode == 0 and not (project / "AGENTS.md").exists()


def test_demo_runs_with_no_agent_installed(tmp_path):
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    res = skillopt("demo", "--keep", str(tmp_path / "demo"), env=env)
    assert res.returncode == 0, res.stderr
    assert "demo night: succeeded" in res.stdout
    report = Path(res.stdout.split("report: ")[1].splitlines()[0])
    assert report.is_file() and "Use `pnpm` instead of `npm`." in report.read_text()
    # the demo trains the agent's memory file: the report says how the replays delivered it
    said = " ".join(report.read_text().split())
    assert "put the candidate where the agent finds it after adopt: CLAUDE.md in" in said
    assert "loads it in every session" in said
    # no bare `adopt p1` (it fails outside the sandbox): the sandbox's own command, which
    # works, and the commands a user runs next for their own sessions
    assert "Adopt with `skillopt-sleep adopt" not in said
    assert "For your own sessions: `skillopt-sleep harvest`" in said
    assert "`skillopt-sleep run`" in said and "skillopt-sleep run --dry-run" in res.stdout
    sandbox_adopt = said.split("This proposal lives in the demo's sandbox: `")[1].split("`")[0]
    *assigns, exe, verb, pid = sandbox_adopt.split()
    assert (exe, verb, pid) == ("skillopt-sleep", "adopt", "p1")
    adopted = skillopt(verb, pid, env=env | dict(a.split("=", 1) for a in assigns))
    assert adopted.returncode == 0, adopted.stderr
    assert "Use `pnpm` instead of `npm`." in (tmp_path / "demo/home/.claude/CLAUDE.md").read_text()


def test_demo_look_around_line_works_pasted_and_proposals_all_fits_80_columns(tmp_path):
    """The "look around" line carries the env the demo ran with (HOME too): pasted into a
    shell it shows the proposal, and with its env the sandbox's proposals adopt and roll back.
    `proposals --all` then fits 80 columns (a rolled_back copy beside it), the target
    shortened in its middle, never wrapped."""
    import shlex

    res = skillopt("demo", "--keep", str(tmp_path / "a-demo-folder-named-at-length" / "demo"))
    assert res.returncode == 0, res.stderr
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("look around: ")]
    pasted = line.removeprefix("look around: ")
    shown = subprocess.run(["sh", "-c", pasted], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "skillopt-sleep proposal p1" in shown.stdout, shown.stderr
    *assigns, _exe, _show, _pid = shlex.split(pasted)
    sandbox = dict(a.split("=", 1) for a in assigns)
    assert set(sandbox) == {"HOME", "SKILLOPT_SLEEP_HOME"}
    env = dict(os.environ) | sandbox
    adopted = skillopt("adopt", "p1-codex", env=env)
    assert adopted.returncode == 0, adopted.stderr
    assert skillopt("rollback", env=env).returncode == 0
    listed = skillopt("proposals", "--all", env=env | {"COLUMNS": "80"}).stdout
    assert max(len(ln) for ln in listed.splitlines()) <= 80, listed
    rows = {ln.split()[0]: ln.split() for ln in listed.splitlines()[1:]}
    assert rows["p1-codex"][1] == "rolled_back" and rows["p1"][1] == "staged", listed
    assert rows["p1"][-1].endswith("…/CLAUDE.md") and rows["p1-codex"][-1].endswith("/AGENTS.md")


def test_usage_mistakes_are_usage_errors_not_internal_ones(tmp_path):
    for args in (["status", "--bogus"], ["bogus"], ["show"]):
        res = skillopt(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert "internal error" not in res.stderr
    state = Path(os.environ["SKILLOPT_SLEEP_HOME"]) / "state" / "last-error.txt"
    assert not state.exists()


def test_a_missing_config_file_given_explicitly_is_an_error(tmp_path):
    res = skillopt("--config", str(tmp_path / "nope.toml"), "run", "--dry-run")
    assert res.returncode == 1
    assert (
        res.stderr.strip()
        == f"error: config file {tmp_path / 'nope.toml'} does not exist (given with --config)"
    )


def test_a_broken_config_file_given_explicitly_fails_every_command_but_the_ones_that_fix_it(
    tmp_path,
):
    # a command that needs no setting (proposals, nights, show, search, ui…) still reads the
    # file the user named: a typo in it is said, not ignored
    bad = tmp_path / "bad.toml"
    bad.write_text("[target\n", encoding="utf-8")
    for args in (["proposals"], ["nights"], ["show", "p1"], ["search", "pnpm"]):
        res = skillopt("--config", str(bad), *args)
        assert res.returncode == 1, (args, res.stdout)
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith(f"error: config file {bad}: "), (args, line)
        assert res.stdout == "", args
    # how one finds out and fixes it still runs: config path, doctor, status
    where = skillopt("--config", str(bad), "config", "path")
    assert where.returncode == 0 and str(bad) in where.stdout
    assert "config file" in skillopt("--config", str(bad), "status").stderr


def test_unset_api_key_env_is_named(sessions, tmp_path):
    home, project = sessions
    cfg = sim_config(tmp_path / "c.toml", home, project, "http://127.0.0.1:9/v1")
    cfg.write_text(
        cfg.read_text().replace(
            'api_key = "sk-test"\nmax_retries = 1\ntimeout = 10',
            'api_key_env = "SKILLOPT_TEST_UNSET_KEY"\nmax_retries = 1',
        )
    )
    res = skillopt("--config", str(cfg), "run")
    assert res.returncode == 1
    assert "$SKILLOPT_TEST_UNSET_KEY, which is not set" in res.stderr


def test_demo_refuses_a_folder_in_use(tmp_path):
    busy = tmp_path / "busy"
    busy.write_text("a file")
    res = skillopt("demo", "--keep", str(busy))
    assert res.returncode == 1 and res.stderr.startswith("error: demo folder")


def test_status_marks_a_night_whose_process_died_as_interrupted():
    from skillopt_sleep import paths
    from skillopt_sleep.store import Store

    store = Store(paths.db_path())
    # as left by a `run` killed with -9: "running", its lock released by the kernel
    store.nights.add(
        started_at="2026-11-30T01:00:00+00:00", status="running", pid=999999, trigger="cli"
    )
    data = json.loads(skillopt("status", "--json").stdout)
    assert data["last_night"]["status"] == "interrupted"
    assert data["last_night"]["error"] == "the process running it stopped"


def test_a_dry_run_does_not_hide_the_last_real_night(sessions, tmp_path):
    # a process per command, as before: each night starts in a second of its own (status
    # lists nights by start second, then id, and dry runs' ids count down: two dry runs in
    # one second would list in the wrong order; in-process commands are that fast)
    home, project = sessions
    cfg = sim_config(tmp_path / "c.toml", home, project, f"http://127.0.0.1:{closed_port()}/v1")
    assert skillopt_process("--config", str(cfg), "run").returncode == 1
    assert skillopt_process("--config", str(cfg), "run", "--dry-run").returncode == 0
    status = json.loads(skillopt_process("status", "--json").stdout)
    assert status["last_night"]["status"] == "failed" and "cannot reach" in status["last_error"]
    assert [n["status"] for n in status["nights"]][:2] == ["planned", "failed"]
    # nor does a dry run that finds nothing to plan
    empty = tmp_path / "empty-project"
    empty.mkdir()
    assert (
        skillopt_process(
            "--config", str(cfg), "run", "--dry-run", "--project", str(empty)
        ).returncode
        == 0
    )
    status = json.loads(skillopt_process("status", "--json").stdout)
    assert (
        status["nights"][0]["status"] == "no_tasks" and status["last_night"]["status"] == "failed"
    )
    # a real night with nothing to train on: `status` says why, as `run` did
    assert skillopt_process("--config", str(cfg), "run", "--project", str(empty)).returncode == 0
    text = skillopt_process("--config", str(cfg), "status").stdout
    assert "no_tasks" in text and f"no task mined: no request in {empty}" in " ".join(text.split())


def test_first_harvest_of_a_new_install_enables_the_agents_found(isolated_home, tmp_path):
    from tests.helpers.sources import write_copilot_session

    write_copilot_session(isolated_home, tmp_path, [("list the files", "Done.", None)])
    res = skillopt("harvest", "--json")
    assert res.returncode == 0, res.stderr
    assert "first run: wrote" in res.stderr and "copilot_cli" in res.stderr
    report = json.loads(res.stdout)
    assert report["sources"]["copilot_cli"]["sessions_new"] == 1
    # the file lists every agent; a second run changes nothing and says nothing
    again = skillopt("harvest", "--json")
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
    # a broken line and a file that is no log, beside the demo's sessions
    logs = next((home / ".claude" / "projects").iterdir())
    (logs / "broken.jsonl").write_bytes(b'{"type": "user", "cut off\n')
    (logs / "blob.jsonl").write_bytes(b"\x7fELF\x00\x01" * 100)
    harvested = skillopt("harvest", env=dict(os.environ, COLUMNS="80"))
    assert harvested.returncode == 0, harvested.stderr
    # the table fits 80 columns; the skip reasons follow it in whole words
    assert max(len(ln) for ln in harvested.stdout.splitlines()) <= 80, harvested.stdout
    assert "claude_code skipped: binary 1" in harvested.stdout, harvested.stdout
    good = skillopt("status")
    assert good.returncode == 0, good.stderr
    # skipped files and unreadable lines by reason; what parsers leave out by design is no
    # problem and not said (`harvest --json` has every counter)
    said = " ".join(good.stdout.split())
    assert "1 file skipped (binary 1)" in said and "{" not in good.stdout
    assert "1 unreadable log line skipped (bad_json 1)" in said, said
    assert "injected" not in good.stdout and "ignored_type" not in good.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('projet = "/tmp/x"\n', encoding="utf-8")
    res = skillopt("--config", str(bad), "status")
    assert res.returncode == 1
    assert "store:" in res.stdout  # the rest of the status is still shown
    assert res.stderr.strip() == f"error: config ({bad}): unknown key 'projet'"
    js = skillopt("--config", str(bad), "status", "--json")
    assert (
        js.returncode == 1
        and json.loads(js.stdout)["config_error"] == f"config ({bad}): unknown key 'projet'"
    )
    assert json.loads(skillopt("status", "--json").stdout)["config_error"] is None


def test_tasks_on_an_empty_store_says_so_instead_of_an_empty_table():
    res = skillopt("tasks")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(
        "no recurring or corrected task yet (0 sessions, 0 prompts considered"
    )
    assert json.loads(skillopt("tasks", "--json").stdout) == []


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
    assert "harvest first" in skillopt("tasks").stdout
    assert skillopt("harvest").returncode == 0
    res = skillopt("tasks", env=dict(os.environ, COLUMNS="200"))  # whatever pytest's own terminal
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "build the docs site" in text and "not scored until a correction arrives" in text
    [task] = json.loads(skillopt("tasks", "--json").stdout)
    assert task["split"] == "" and task["checks"] == []


def test_tasks_says_a_task_asked_again_in_the_same_words_is_not_yet_validated(tmp_path):
    """The same request in the same words, seen alike (no tool before answering): the repeat
    would replay as a cache hit of the first, so it is no val; ``tasks`` says why."""
    home = Path(os.environ["HOME"])
    project = tmp_path / "webapp"
    project.mkdir()
    ask = ("install the dependencies", "Run `npm install`.", "no, use pnpm instead of npm")
    write_conversations(home, project, [("claude_code", [ask]), ("codex", [ask])])
    assert skillopt("harvest").returncode == 0
    res = skillopt("tasks", env=dict(os.environ, COLUMNS="200"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert (
        "1 task(s) asked again only in the same words with the same context: not yet "
        "validated on a distinct recurrence"
    ) in text
    assert "an occurrence withheld from val: the same wording and context as train" in text
    [task] = json.loads(skillopt("tasks", "--json").stdout)
    assert [o["split"] for o in task["occurrences"]] == ["train", ""]
    assert task["split"] == "train"  # it still learns


def test_tasks_shows_occurrences_by_role_why_similar_prompts_were_kept_apart_and_drops(
    tmp_path,
):
    """The pnpm task asked three times (two agents): its occurrences by role; the same words
    in another project are another task, and ``tasks`` says why (the default night trains a
    block per project, so the other project's train copy withholds none of this task's
    held-out occurrences); an Agent-SDK grader's session with a scripted correction is not
    mined, and ``tasks`` and ``status`` say so."""
    import datetime as dt

    from skillopt_sleep.testing.sessions import write_claude_session

    home = Path(os.environ["HOME"])
    webapp, other = tmp_path / "webapp", tmp_path / "other"
    webapp.mkdir()
    other.mkdir()
    ask = ("install the dependencies", "Run `npm install`.", "no, use pnpm instead of npm")
    # asked again in other words (a repeat in the same words is no held-out copy at all)
    again = ("install the dependencies please", *ask[1:])
    later = ("please install the dependencies now", *ask[1:])
    write_conversations(
        home, webapp, [("claude_code", [ask]), ("codex", [again]), ("claude_code", [later])]
    )
    write_conversations(home, other, [("claude_code", [ask])])
    write_claude_session(
        home,
        webapp,
        [("bump the version", "Bumped to 1.2.", "no, use hatch version instead of editing it")],
        when=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
        entrypoint="sdk-py",
    )
    assert skillopt("harvest").returncode == 0
    res = skillopt("tasks", env=dict(os.environ, COLUMNS="200"))  # the table of a wide terminal
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "occurrences" in text  # the table's column (its cells wrap: the roles are below)
    assert "kept apart from" in text and "a different project" in text
    assert "not mined: headless_session 1 (headless or programmatic runs" in text
    assert "bump the version" not in text
    narrow = skillopt("tasks", env=dict(os.environ, COLUMNS="80")).stdout
    assert max(len(ln) for ln in narrow.splitlines()) <= 80, narrow  # the notes wrap too
    flat = " ".join(narrow.split())
    assert "kept apart from" in flat and "not mined: headless_session 1" in flat
    # two projects' tasks: each intent names its project's folder
    assert "intent: [webapp] install the dependencies" in flat
    assert "intent: [other] install the dependencies" in flat
    tasks = {t["project"]: t for t in json.loads(skillopt("tasks", "--json").stdout)}
    # the other project's task trains on the very same words, but for its own project's
    # block: webapp's later occurrences stay webapp's held-out ones (issue 12: another
    # project's task neither withholds nor validates them)
    occurrences = tasks[str(webapp)]["occurrences"]
    assert [o["split"] for o in occurrences] == ["train", "val", "test"]
    assert not any(o["note"] for o in occurrences)
    assert "withheld" not in text
    assert [o["split"] for o in tasks[str(other)]["occurrences"]] == ["train"]
    assert "1 task(s) asked once" in text
    assert json.loads(skillopt("status", "--json").stdout)["counts"]["headless"] == 1

    # asked in three more projects: one line names the other projects' tasks by id
    for name in ("api", "docs", "cli"):
        (tmp_path / name).mkdir()
        write_conversations(home, tmp_path / name, [("claude_code", [ask])])
    assert skillopt("harvest").returncode == 0
    narrow = skillopt("tasks", env=dict(os.environ, COLUMNS="80")).stdout
    assert max(len(ln) for ln in narrow.splitlines()) <= 80, narrow
    flat = " ".join(narrow.split())
    mine = json.loads(skillopt("tasks", "--json").stdout)
    web_id = next(t["id"] for t in mine if t["project"] == str(webapp))
    others = [t["id"] for t in mine if t["project"] != str(webapp)]
    assert f"{web_id} kept apart from 4 like tasks of other projects (" in flat, flat
    assert all(o in flat.split(f"{web_id} kept apart from 4", 1)[1] for o in others)
    assert flat.count(f"{web_id} kept apart from") == 1


def test_a_broken_state_folder_or_database_is_one_line_and_exit_1(tmp_path):
    """The machine, not a bug: a state folder that cannot be made, a damaged database."""
    home = tmp_path / "sk"
    home.mkdir()
    (home / "state").write_text("a file where the state folder should be")
    env = dict(os.environ, SKILLOPT_SLEEP_HOME=str(home))
    for args in (["status"], ["run", "--dry-run"]):
        res = skillopt(*args, env=env)
        assert res.returncode == 1, (args, res.stderr)
        assert res.stderr.strip().splitlines() == [
            f"error: FileExistsError: File exists ({home / 'state'}); the state folder is {home / 'state'}"
        ]
    (home / "state").unlink()
    (home / "state").mkdir()
    (home / "state" / "skillopt.db").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    res = skillopt("status", env=env)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("error: ") and "internal error" not in res.stderr


def test_version_and_config_path_show_edit(tmp_path):
    """`--version` / `-V`; `config path` names the file, `config show` the settings in effect
    with keys masked, `config edit` runs $EDITOR on the file and checks it after."""
    from skillopt_sleep import __version__

    for flag in ("--version", "-V"):
        res = skillopt(flag)
        assert res.returncode == 0 and res.stdout.strip() == f"skillopt-sleep {__version__}"
    from skillopt_sleep import paths

    cfg = paths.config_file()  # the isolated user dir's: not there yet
    env = dict(os.environ)
    assert not cfg.exists() and skillopt("config", "path", env=env).stdout.strip() == str(cfg)
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('epochs = 1\n[target]\nmodel = "m1"\napi_key = "sk-never-shown-123"\n')
    shown = skillopt("config", "show", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "epochs = 1" in shown.stdout and 'model = "m1"' in shown.stdout
    assert "sk-never-shown-123" not in shown.stdout
    data = json.loads(skillopt("config", "show", "--json", env=env).stdout)
    assert data["epochs"] == 1 and data["target"]["model"] == "m1"
    assert "sk-never-shown-123" not in json.dumps(data)
    # a real editor run non-interactively: sed edits the file in place
    edited = skillopt(
        "config",
        "edit",
        env=env | {"VISUAL": "", "EDITOR": "sed -i s/epochs\\ =\\ 1/epochs\\ =\\ 2/"},
    )
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.strip() == f"{cfg}: valid"
    assert json.loads(skillopt("config", "show", "--json", env=env).stdout)["epochs"] == 2
    # an edit that breaks the file: exit 1 with the reason, the file kept as written
    broken = skillopt("config", "edit", env=env | {"VISUAL": "sed -i s/epochs/epochz/"})
    assert broken.returncode == 1 and broken.stderr.startswith("error: ")
    assert "epochz" in broken.stderr and "epochz = 2" in cfg.read_text()


def test_version_answers_without_importing_the_heavy_modules():
    """`--version` imports neither the service, the store, sqlite-utils nor pydantic (it took
    1.5 s cold before): measured with `python -X importtime`."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "skillopt_sleep", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and res.stdout.startswith("skillopt-sleep "), res.stderr
    imported = {
        line.split("|")[-1].strip()
        for line in res.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "skillopt_sleep.cli" in imported  # the measurement saw the CLI's imports
    heavy = {"skillopt_sleep.service", "skillopt_sleep.store", "sqlite_utils", "pydantic"}
    assert not heavy & imported, heavy & imported


def test_tables_fit_80_columns_keep_the_file_name_and_every_source_name(tmp_path, isolated_home):
    """Piped with COLUMNS=80: `harvest`, `proposals` and `tasks` lines fit in 80 columns; the
    target path is shortened in its middle (its file name whole), source names and ids whole."""
    project = tmp_path / "src" / "a-rather-long-organisation-name" / "some-deep-project" / "webapp"
    project.mkdir(parents=True)
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    env = dict(os.environ, COLUMNS="80")
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", isolated_home, project, sim.url + "/v1")
        harvest = skillopt("--config", str(cfg), "harvest", env=env)
        assert harvest.returncode == 0, harvest.stderr
        night = skillopt("--config", str(cfg), "run", env=env)
        assert night.returncode == 0, night.stderr
    target = str(project / "AGENTS.md")
    assert len(target) > 80
    listed = skillopt("--config", str(cfg), "proposals", env=env).stdout
    tasks = skillopt("--config", str(cfg), "tasks", env=env).stdout
    sources = skillopt("--config", str(cfg), "sources", env=env).stdout
    status = skillopt("--config", str(cfg), "status", env=env).stdout
    for text in (harvest.stdout, listed, tasks, sources, status):
        assert text.strip() and max(len(line) for line in text.splitlines()) <= 80, text
    assert "p1" in status and all(n in status for n in ("claude_code", "codex")), status
    # `sources`: every source name whole; a long root shortened in its middle, its end kept
    roots = {
        s["name"]: next(r["path"] for r in s["roots"] if r["exists"])
        for s in json.loads(skillopt("--config", str(cfg), "sources", "--json").stdout)["sources"]
        if s["found"]
    }
    assert set(roots) >= {"claude_code", "codex"}, roots
    for name, root in roots.items():
        [line] = [ln for ln in sources.splitlines() if ln.split()[:1] == [name]]
        shown = next(w for w in line.split() if "/" in w)
        if "…" in shown:
            head, tail = shown.split("…")
            assert root.startswith(head) and root.endswith(tail) and len(tail) > 1, (root, line)
        else:
            assert shown == root, (root, line)
    for name in ("claude_code", "codex"):
        assert any(line.split()[:1] == [name] for line in harvest.stdout.splitlines())
    [row] = [line for line in listed.splitlines() if line.startswith("p1 ")]
    assert "staged" in row and row.rstrip().endswith("/AGENTS.md") and "…" in row
    shown = row.split()[-1]
    head, tail = shown.split("…")
    assert target.startswith(head) and target.endswith(tail)
    ids = [t["id"] for t in json.loads(skillopt("--config", str(cfg), "tasks", "--json").stdout)]
    firsts = {line.split()[0] for line in tasks.splitlines() if line.strip()}
    assert ids and set(ids) <= firsts  # every task id whole, first on its line
    # without COLUMNS, piped output is 160 columns wide, not 80
    env.pop("COLUMNS")
    wide = skillopt("--config", str(cfg), "proposals", env=env).stdout
    [row] = [line for line in wide.splitlines() if line.startswith("p1 ")]
    assert 80 < len(row.rstrip()) <= 160 and row.rstrip().endswith("/webapp/AGENTS.md")


def test_nights_search_session_show_logs_and_status_says_what_is_adopted(sessions, tmp_path):
    home, project = sessions
    env = dict(os.environ, COLUMNS="80")
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        dry = skillopt("--config", str(cfg), "run", "--dry-run")
        assert dry.returncode == 0 and dry.stdout.startswith("dry run d1: planned"), dry.stdout
        night = json.loads(skillopt("--config", str(cfg), "run", "--json").stdout)
    # the dry run took neither a night number nor a proposal number
    assert night["night_id"] == 1 and night["proposal_id"] == "p1"
    history = json.loads(skillopt("nights", "--json").stdout)
    assert [(n["id"], n["status"], n["dry_run"]) for n in history] == [
        (1, "succeeded", False),
        (-1, "planned", True),
    ]
    human = skillopt("nights", env=env).stdout
    assert max(len(line) for line in human.splitlines()) <= 80
    [row] = [ln for ln in human.splitlines() if ln.split()[:1] == ["1"]]
    assert "succeeded" in row.split() and row.rstrip().endswith("p1")
    assert any(ln.split()[:1] == ["d1"] and "dry run" in ln for ln in human.splitlines())
    dry_log = skillopt("logs", "--night", "d1")
    assert dry_log.returncode == 0 and "dry run" in dry_log.stdout, dry_log.stderr
    assert skillopt("logs", "--night", "-1").stdout == dry_log.stdout
    bad = skillopt("logs", "--night", "x1")
    assert bad.returncode == 1 and bad.stderr.startswith("error: --night takes a night's id")
    assert str(night["cost"]["calls"]) in row.split()

    hits = json.loads(skillopt("search", "pnpm", "--json").stdout)["hits"]
    assert hits and all("[pnpm]" in h["snippet"] for h in hits)
    assert {h["agent"] for h in hits} == {"claude_code", "codex"}
    shown = skillopt("search", "pnpm", "--agent", "codex", env=env)
    assert shown.returncode == 0 and "codex" in shown.stdout and "claude_code" not in shown.stdout
    assert "no message matches" in skillopt("search", "zzyzx-nothing").stdout
    sid = hits[0]["session_id"]
    session = skillopt("session", "show", sid)
    assert session.returncode == 0 and f"session {sid}" in session.stdout
    assert "pnpm" in session.stdout
    # at 80 columns the session's key is cut in its middle (the source has its column) and
    # `session show` takes it as printed, the bare key and a unique prefix too
    narrow = skillopt("search", "pnpm", env=env).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    rows = [ln.split() for ln in narrow.splitlines()[1:]]
    assert rows and all("…" in r[0] and len(r[0]) <= 20 for r in rows), narrow
    assert all(r[1] in ("claude_code", "codex") and r[2] == "user" for r in rows), narrow
    for r in rows:
        assert "[pnpm]" in " ".join(r[3:])  # the match column keeps room for the words
    printed = rows[0][0]
    full = next(h["session_id"] for h in hits if h["session_id"].endswith(printed[-8:]))
    for given in (printed, full.split(":", 1)[1], full.split(":", 1)[1][:13]):
        got = skillopt("session", "show", given)
        assert got.returncode == 0 and f"session {full} " in got.stdout, (given, got.stderr)
    ambiguous = skillopt("session", "show", "codex:")
    assert ambiguous.returncode == 1 and len(ambiguous.stderr.strip().splitlines()) == 1
    assert ambiguous.stderr.startswith("error: session 'codex:' is ambiguous: codex:")
    bad = skillopt("session", "show", "nope")
    assert bad.returncode == 1 and bad.stderr.startswith("error: no session 'nope'")
    no_daemon_log = skillopt("logs").stdout  # a night run by the CLI: its own log, named
    assert "no night log yet" in no_daemon_log
    assert f"`skillopt-sleep logs --night {night['night_id']}`" in no_daemon_log
    # `logs --json`, as every read command: the text, where it was read, the last night
    log = json.loads(skillopt("logs", "--json").stdout)
    assert log["text"] == "" and log["path"].endswith("night.log") and log["night_id"] is None
    assert log["last_night_id"] == night["night_id"]
    own = json.loads(skillopt("logs", "--night", str(night["night_id"]), "--json").stdout)
    assert own["night_id"] == night["night_id"] and Path(own["path"]).is_file()
    assert f"night {night['night_id']} started" in own["text"]

    # export: a proposal and the history, JSON or Markdown, stdout or a file
    md = skillopt("export", "proposal", "p1").stdout
    assert md.startswith("# skillopt-sleep proposal p1") and "```diff" in md
    data = json.loads(skillopt("export", "proposal", "p1", "--format", "json").stdout)
    assert data["id"] == "p1" and data["status"] == "staged" and "+- Use `pnpm`" in data["diff"]
    out_file = tmp_path / "history.md"
    res = skillopt("export", "history", "-o", str(out_file))
    assert res.returncode == 0 and res.stderr.strip() == f"wrote {out_file}"
    table = out_file.read_text()
    assert f"| {night['night_id']} |" in table and "| p1 |" in table and "(dry run)" in table
    assert "| d1 |" in table
    hist = json.loads(skillopt("export", "history", "--format", "json").stdout)
    assert [n["id"] for n in hist] == [n["id"] for n in history]
    # the format follows the file's extension (x.json: JSON), --format wins over it
    as_json = tmp_path / "p1.json"
    assert skillopt("export", "proposal", "p1", "-o", str(as_json)).returncode == 0
    assert json.loads(as_json.read_text())["id"] == "p1"
    hist_json = tmp_path / "history.JSON"
    assert skillopt("export", "history", "-o", str(hist_json)).returncode == 0
    assert [n["id"] for n in json.loads(hist_json.read_text())] == [n["id"] for n in history]
    forced = tmp_path / "forced.json"
    assert skillopt("export", "history", "-f", "md", "-o", str(forced)).returncode == 0
    assert forced.read_text().startswith("# skillopt-sleep nights")
    wrong = skillopt("export", "history", "--format", "xml")
    assert wrong.returncode == 1 and wrong.stderr.startswith("error: --format must be md or json")

    assert skillopt("adopt", "p1").returncode == 0
    status = skillopt("status", env=dict(os.environ, COLUMNS="400")).stdout
    assert "adopted p1 (" in status and str(project / "AGENTS.md") in status
    narrow = skillopt("status", env=dict(os.environ, COLUMNS="80")).stdout
    [line] = [ln for ln in narrow.splitlines() if ln.startswith("adopted p1 (")]
    shown = line.split()[3].rstrip(":")  # the path, cut in its middle, its end whole
    head, tail = shown.split("…")
    assert str(project / "AGENTS.md").startswith(head) and tail.endswith("/AGENTS.md")


def _on_a_terminal(*args: str, env: dict) -> str:
    """Run the console script with a pseudo-terminal as its stdin/stdout/stderr; its output."""
    import pty
    import select

    cmd = skillopt_argv(*args)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_show_renders_markdown_with_a_coloured_diff_through_the_pager_on_a_terminal(
    sessions, tmp_path
):
    home, project = sessions
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        assert skillopt("--config", str(cfg), "run").returncode == 0
    piped = skillopt("show", "p1").stdout
    assert "# skillopt-sleep proposal p1" in piped and "```diff" in piped and "\x1b[" not in piped
    # the pager is a real program: `cat` passes the coloured output through, marked by a file
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ntouch {tmp_path}/pager-ran\nexec cat\n")
    pager.chmod(0o755)
    env = dict(os.environ, PAGER=str(pager), TERM="xterm-256color", COLUMNS="100")
    env.pop("NO_COLOR", None)
    shown = _on_a_terminal("show", "p1", env=env)
    assert (tmp_path / "pager-ran").exists()
    assert "\x1b[" in shown  # styled
    assert "```diff" not in shown and "# skillopt-sleep proposal" not in shown  # rendered
    assert "skillopt-sleep proposal p1" in shown and "Use `pnpm` instead of `npm`." in shown
    added = [ln for ln in shown.splitlines() if "+- Use `pnpm` instead of `npm`." in ln]
    assert added and all("\x1b[" in ln for ln in added)  # the diff's added line is coloured
    # on a narrow terminal the diff's long lines wrap, never cropped: the managed block's
    # marker line (76 columns with the diff's "+") ends in "edit with care -->" below
    narrow = _on_a_terminal("show", "p1", env=env | {"COLUMNS": "60"})
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", narrow).splitlines()
    begin = next(i for i, ln in enumerate(lines) if "+<!-- skillopt-sleep:begin" in ln)
    assert "edit with care -->" in " ".join(ln.strip() for ln in lines[begin : begin + 3])


@pytest.mark.slow  # doctor asks every pinned agent CLI on PATH for its version, four times
def test_doctor_reports_each_check_with_a_status(sessions, tmp_path):
    home, project = sessions
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1")
        res = skillopt("--config", str(cfg), "doctor", "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        checks = {c["name"]: c for c in json.loads(res.stdout)}
        human = skillopt("--config", str(cfg), "doctor", env=dict(os.environ, COLUMNS="80"))
    assert all(c["status"] in ("ok", "warn", "fail", "skip") for c in checks.values())
    assert checks["config"]["status"] == "ok" and checks["config"]["detail"] == str(cfg)
    assert checks["store"]["status"] == "ok"
    assert checks["logs claude_code"]["status"] == "ok" and checks["logs codex"]["status"] == "ok"
    assert (
        checks["backend target"]["status"] == "ok" and sim.url in checks["backend target"]["detail"]
    )
    assert checks["daemon"]["status"] == "warn"  # none runs here
    for exe in ("claude", "codex"):  # the pinned CLIs on PATH: their versions
        c = checks[f"cli {exe}"]
        if shutil.which(exe):
            assert c["status"] == "ok" and any(ch.isdigit() for ch in c["detail"]), c
        else:
            assert c["status"] == "skip"
    assert human.returncode == 0 and max(len(ln) for ln in human.stdout.splitlines()) <= 80
    assert any(ln.split()[:2] == ["ok", "store"] for ln in human.stdout.splitlines())
    # the backend gone: that check fails, with the reason, and doctor exits 1
    down = sim_config(tmp_path / "d.toml", home, project, f"http://127.0.0.1:{closed_port()}/v1")
    res = skillopt("--config", str(down), "doctor", "--json")
    assert res.returncode == 1
    failed = {c["name"]: c for c in json.loads(res.stdout) if c["status"] == "fail"}
    # (this config gives the optimizer its own section, at the same closed port)
    assert set(failed) == {"backend target", "backend optimizer"}
    assert all(c["detail"] for c in failed.values())
    offline = skillopt("--config", str(down), "doctor", "--offline", "--json")
    assert offline.returncode == 0
    assert not any(c["name"].startswith("backend") for c in json.loads(offline.stdout))


def test_shell_completion_script_and_completions(tmp_path):
    """`--show-completion` prints the shell's script; the completion it drives names the
    commands (here as bash asks for them: the script's own variables)."""
    env = dict(os.environ, SHELL="/bin/bash")
    script = skillopt("--show-completion", "bash", env=env)
    if script.returncode != 0:  # typer takes the shell from $SHELL when given no value
        script = skillopt("--show-completion", env=env)
    assert script.returncode == 0 and "_SKILLOPT_SLEEP_COMPLETE=complete_bash" in script.stdout
    ask = env | {"_SKILLOPT_SLEEP_COMPLETE": "complete_bash"}
    words = {
        "skillopt-sleep pro": ("1", {"proposals"}),
        "skillopt-sleep config s": ("2", {"show"}),
        "skillopt-sleep ni": ("1", {"nights"}),
        # an agent's other spelling (claude_code) is accepted, never offered beside claude-code
        "skillopt-sleep install cl": ("2", {"claude-code"}),
        "skillopt-sleep uninstall claude": ("2", {"claude-code"}),
    }
    for line, (cword, expected) in words.items():
        got = skillopt(env=ask | {"COMP_WORDS": line, "COMP_CWORD": cword})
        assert set(got.stdout.split()) == expected, (line, got.stdout, got.stderr)
    every = skillopt(env=ask | {"COMP_WORDS": "skillopt-sleep install ", "COMP_CWORD": "2"})
    offered = every.stdout.split()
    assert {"claude-code", "codex", "copilot"} <= set(offered), every.stdout
    assert len(offered) == len(set(offered)) and "claude_code" not in offered
    # the other spelling still installs
    res = skillopt("install", "claude_code", "--dry-run")
    assert res.returncode == 0 and res.stdout.startswith("install claude-code"), res.stderr


def test_tasks_join_and_split_say_which_requests_are_one_task(tmp_path):
    """The same request in German and in English is two tasks by its words; `tasks join`
    makes it one for every later mining run (shown as joined by the user), `tasks split`
    makes them two again; a bad id is a one-line refusal."""
    home = Path(os.environ["HOME"])
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(
        home,
        project,
        [
            (
                "claude_code",
                [("install the dependencies", "Run `npm install`.", "no, use pnpm instead of npm")],
            ),
            (
                "codex",
                [
                    (
                        "Installiere die Abhängigkeiten",
                        "Führe `npm install` aus.",
                        "no, use pnpm instead of npm",
                    )
                ],
            ),
        ],
    )
    assert skillopt("harvest").returncode == 0
    tasks = json.loads(skillopt("tasks", "--json").stdout)
    assert len(tasks) == 2
    english, german = sorted(tasks, key=lambda t: t["intent"].startswith("Inst"))
    res = skillopt("tasks", "join", english["id"][:6], german["id"])
    assert res.returncode == 0, res.stderr
    assert "are one task from the next mining on" in res.stdout
    [task] = json.loads(skillopt("tasks", "--json").stdout)
    assert len(task["occurrences"]) == 2
    assert sorted(o["joined"] for o in task["occurrences"]) == ["", "user"]
    text = " ".join(skillopt("tasks", env=dict(os.environ, COLUMNS="200")).stdout.split())
    assert "1 request(s) joined by your `tasks join`, not by their words" in text
    assert f"skillopt-sleep tasks split {task['id']}" in text

    res = skillopt("tasks", "split", task["id"])
    assert res.returncode == 0 and "1 request(s) joined to" in res.stdout
    assert len(json.loads(skillopt("tasks", "--json").stdout)) == 2

    bad = skillopt("tasks", "split", "ffffffff")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "no stored task with the id 'ffffffff'" in bad.stderr
    nothing = skillopt("tasks", "split", english["id"])
    assert nothing.returncode == 1 and "nothing to split" in nothing.stderr
