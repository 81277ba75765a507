"""Every agent the user uses gets the learning: a night whose tasks came from Claude Code and
Codex sessions trains Claude Code's memory file and stages a copy of its rules in Codex's, each
certified through its own placement on the held-out tasks (real nights against the simulator
on loopback, through the OpenAI-compatible backend framing each agent's memory file as that
agent does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt_group, agent_group, reject
from skillopt_sleep.results import NightSummary
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import skillopt_in_process as skillopt
from tests.helpers.clis import run_cli
from tests.helpers.night import write_persona
from tests.helpers.store import db_rows

RULE = "Use `pnpm` instead of `npm`."
CODEX_FRAME = "# AGENTS.md instructions"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed command line, as the user runs it (HOME and the state folder are the
    test's, through the environment)."""
    return run_cli([sys.executable, "-m", "skillopt_sleep", *args], cwd, dict(os.environ), 90)


def _world(tmp_path: Path, home: Path) -> Path:
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    write_conversations(home, project, DEMO_CONVERSATIONS)  # claude_code and codex sessions
    return project


def _settings(home: Path, project: Path, url: str, **extra):
    return load_settings(
        Path("/nonexistent/config.toml"),
        **{
            **demo_settings(home, project, url),
            "document": {"kind": "memory", "agent": "claude_code"},
            **extra,
        },
    )


def test_a_rule_learned_from_two_agents_sessions_is_certified_and_staged_for_each(
    tmp_path, isolated_home
):
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path), full_log=True) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
        requests = list(sim.stats.requests)
    assert result.status == "succeeded" and result.proposal_id == "p1"  # a new store's first
    codex_memory = isolated_home / ".codex" / "AGENTS.md"
    [copy] = result.summary.copies
    assert copy.agent == "codex" and copy.status == "staged"
    assert copy.proposal_id == f"{result.proposal_id}-codex"
    assert copy.target == str(codex_memory)
    # on codex's own tasks (installing, running the tests, adding a package): each its val
    # ask (every one has one)
    assert copy.certified_on == "val" and copy.tasks == 3
    assert copy.before is not None and copy.after is not None and copy.after > copy.before
    # what it costs codex every turn, apart from Claude Code's own figure
    assert copy.delivery is not None and copy.delivery.agent == "codex"
    assert copy.delivery.mode == "memory" and copy.delivery.per_turn_tokens > 0
    assert result.summary.delivery is not None and result.summary.delivery.agent == "claude_code"

    row = store.proposals.get(copy.proposal_id)
    assert row is not None and row.status == "staged" and row.target_path == str(codex_memory)
    staged = Path(row.dir, "document").read_text("utf-8")
    assert RULE in staged and f"project={project}" in staged  # the project's block
    assert not codex_memory.exists()  # nothing live changes before adopt

    # the copy was scored as codex gets it: the rule in codex's framing, never Claude's
    certify = [
        r
        for r in requests
        if RULE in (r.get("prompt_full", "") + r.get("context_full", ""))
        and CODEX_FRAME in (r.get("prompt_full", "") + r.get("context_full", ""))
    ]
    assert certify, "no replay carried the rule framed as codex's AGENTS.md"
    assert not any(
        "Contents of" in (r.get("prompt_full", "") + r.get("context_full", "")) for r in certify
    )

    # both reports say it; the copy's says whose rules it carries
    report = Path(store.proposals.get(result.proposal_id).dir, "report.md").read_text()
    assert f"| codex | {copy.proposal_id} |" in report and "--all-agents" in report
    copy_report = Path(row.dir, "report.md").read_text()
    assert f"codex's copy of the rules of {result.proposal_id}" in copy_report


def test_adopt_all_agents_writes_every_copy_and_one_proposal_alone_writes_one(
    tmp_path, isolated_home
):
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
    pid = result.proposal_id
    assert pid and agent_group(store, pid) == [pid, f"{pid}-codex"]
    assert agent_group(store, f"{pid}-codex") == [f"{pid}-codex", pid]
    claude_md, agents_md = (
        isolated_home / ".claude" / "CLAUDE.md",
        isolated_home / ".codex" / "AGENTS.md",
    )

    # a stale member refuses the whole group before anything is written
    agents_md.parent.mkdir(parents=True, exist_ok=True)
    agents_md.write_text("# mine\n")
    try:
        adopt_group(store, pid)
        raise AssertionError("adopt_group should refuse a stale copy")
    except ProposalError as exc:
        assert "AGENTS.md changed since proposal" in str(exc) and "nothing was adopted" in str(exc)
    assert not claude_md.exists() and agents_md.read_text() == "# mine\n"
    agents_md.unlink()

    proc = _cli("adopt", pid, "--all-agents", cwd=tmp_path)
    assert f"adopted {pid} -> {claude_md}" in proc.stdout
    assert f"adopted {pid}-codex -> {agents_md}" in proc.stdout
    assert RULE in claude_md.read_text() and RULE in agents_md.read_text()
    assert {store.proposals.get(p).status for p in (pid, f"{pid}-codex")} == {"adopted"}


def test_adopting_one_names_the_others_and_a_refused_copy_is_not_staged_again(
    tmp_path, isolated_home
):
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        settings = _settings(isolated_home, project, sim.url)
        first = run_night(store, settings)
        pid = first.proposal_id
        proc = _cli("adopt", pid, cwd=tmp_path)
        assert f"also staged for other agents: {pid}-codex" in proc.stdout
        assert not (isolated_home / ".codex" / "AGENTS.md").exists()
        reject(store, f"{pid}-codex", "codex has its own setup")
        # a new night (a new session asks again): Claude Code already has the rule; codex's
        # copy is the very document the user rejected, so it is not staged again
        write_conversations(isolated_home, project, DEMO_CONVERSATIONS[:1])
        again = run_night(store, settings)
    # Claude Code's file already has the rule (no change there); codex's copy of the live rules
    # is the very document the user rejected: not staged again, and the night says why
    assert again.status == "no_change"
    [codex] = again.summary.copies
    assert codex.agent == "codex" and codex.status == "not_staged"
    assert f"{pid}-codex" in codex.reason and "rejected" in codex.reason
    assert [p.id for p in store.proposals.staged()] == []


def test_a_later_agent_gets_the_rules_the_first_agent_already_has(tmp_path, isolated_home):
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    claude_only = [c for c in DEMO_CONVERSATIONS if c[0] == "claude_code"]
    write_conversations(isolated_home, project, claude_only)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        settings = _settings(isolated_home, project, sim.url)
        first = run_night(store, settings)
        assert first.status == "succeeded" and first.summary.copies == []
        adopt_group(store, first.proposal_id)
        # the user starts asking codex the same things
        write_conversations(
            isolated_home, project, [c for c in DEMO_CONVERSATIONS if c[0] == "codex"]
        )
        later = run_night(store, settings)
    assert later.status == "no_change"  # Claude Code's file already holds the rule
    [copy] = later.summary.copies
    # a night that stages only a copy gives it the next number, not the night's
    assert first.proposal_id == "p1"
    assert copy.status == "staged" and copy.proposal_id == "p2-codex"
    assert copy.after is not None and copy.before is not None and copy.after > copy.before
    assert copy.proposal_id in (later.summary.reason or "")
    row = store.proposals.get(copy.proposal_id)
    assert row is not None and RULE in Path(row.dir, "document").read_text()
    summary = NightSummary.model_validate_json(row.summary)
    assert summary.copy_for == "codex" and summary.copy_of == first.proposal_id


def test_deliver_agents_document_keeps_the_learning_to_the_documents_agent(tmp_path, isolated_home):
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(
            store,
            _settings(isolated_home, project, sim.url, deliver={"agents": "document"}),
        )
    assert result.status == "succeeded" and result.summary.copies == []
    assert [p.id for p in store.proposals.staged()] == [result.proposal_id]


def test_a_copy_that_gains_nothing_is_not_staged(tmp_path, isolated_home):
    project = _world(tmp_path, isolated_home)
    # codex already answers the pnpm way: its copy of the rule is certified as no gain
    agents_md = isolated_home / ".codex" / "AGENTS.md"
    agents_md.parent.mkdir(parents=True, exist_ok=True)
    agents_md.write_text(f"# My codex notes\n\n{RULE}\n")
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
    assert result.status == "succeeded"
    [copy] = result.summary.copies
    assert copy.status == "not_staged" and copy.proposal_id is None
    assert "no gain" in copy.reason or "worse" in copy.reason
    assert agents_md.read_text() == f"# My codex notes\n\n{RULE}\n"
    assert [p.id for p in store.proposals.staged()] == [result.proposal_id]


def test_a_copy_a_later_night_makes_joins_its_group_and_no_means_no_covers_copies(
    tmp_path, isolated_home
):
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        # first night: codex's copy cannot be certified (only the document's agent gets it)
        first = run_night(
            store, _settings(isolated_home, project, sim.url, deliver={"agents": "document"})
        )
        pid = first.proposal_id
        assert pid and first.summary.copies == []
        # a later, otherwise unchanged night certifies codex's copy of the same rules
        later = run_night(store, _settings(isolated_home, project, sim.url))
    [copy] = later.summary.copies
    assert later.proposal_id == pid and copy.status == "staged"
    assert pid == "p1" and copy.proposal_id == "p2-codex"
    assert copy.proposal_id in (later.summary.reason or "")
    assert agent_group(store, pid) == [pid, copy.proposal_id]

    # rejecting the rules withdraws their staged copy too, with the reason
    proc = _cli("reject", pid, "--reason", "we are moving to yarn", cwd=tmp_path)
    assert f"and its copies for other agents: {copy.proposal_id}" in proc.stdout
    row = store.proposals.get(copy.proposal_id)
    assert row is not None and row.status == "rejected"
    assert "we are moving to yarn" in row.reason
    try:
        adopt_group(store, copy.proposal_id)
        raise AssertionError("a withdrawn copy must not be adoptable")
    except ProposalError as exc:
        assert "rejected, not staged" in str(exc)

    # the user takes the no back: the rules and the copy withdrawn with them are staged again
    proc = skillopt("reject", pid, "--undo", "--reason", "x", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == "error: --undo takes no --reason"
    proc = skillopt("reject", pid, "--undo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"lifted the refusal of {pid} (it was rejected): now staged" in proc.stdout
    assert f"and of its copy {copy.proposal_id}: now staged" in proc.stdout
    assert agent_group(store, pid) == [pid, copy.proposal_id]
    proc = skillopt("reject", pid, "--undo", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"error: proposal {pid} is staged: there is no refusal to lift (only a rejected or "
        "rolled-back proposal has one)"
    )


def test_a_rollback_undoes_one_file_and_says_which_copies_stay_adopted(tmp_path, isolated_home):
    """Each copy is its own adoption in its own file: rolling back the rules restores their
    file only, leaves the copies' statuses as they are and names them; a copy is rolled back
    by its own id, and ``--all-agents`` rolls back every file (the real command line)."""
    project = _world(tmp_path, isolated_home)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
    pid = str(result.proposal_id)
    copy = f"{pid}-codex"
    claude_md, agents_md = (
        isolated_home / ".claude" / "CLAUDE.md",
        isolated_home / ".codex" / "AGENTS.md",
    )

    def status(proposal_id: str) -> str:
        row = store.proposals.get(proposal_id)
        assert row is not None
        return row.status

    # the rules alone adopted and rolled back: their staged copy stays staged, and is named
    assert skillopt("adopt", pid, cwd=tmp_path).returncode == 0
    proc = skillopt("rollback", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back {pid}: {claude_md} removed" in proc.stdout
    assert f"still staged for other agents: {copy}" in proc.stdout
    assert (status(pid), status(copy)) == ("rolled_back", "staged")
    assert not claude_md.exists() and not agents_md.exists()

    # both adopted; the copy rolled back by its id: only codex's file, the rules stay adopted
    assert skillopt("adopt", pid, "--all-agents", cwd=tmp_path).returncode == 0
    adopted = {claude_md: claude_md.read_bytes(), agents_md: agents_md.read_bytes()}
    assert all(RULE.encode() in v for v in adopted.values())
    proc = skillopt("rollback", copy, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back {copy}: {agents_md} removed" in proc.stdout
    assert f"still adopted for other agents: {pid} ({claude_md})" in proc.stdout
    assert (status(pid), status(copy)) == ("adopted", "rolled_back")
    assert claude_md.read_bytes() == adopted[claude_md] and not agents_md.exists()
    proc = skillopt("rollback", copy, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"error: proposal {copy} is rolled_back, not adopted: nothing to roll back"
    )

    # the rules rolled back by their id: their file only; the copy (adopted again) stays
    assert skillopt("adopt", copy, cwd=tmp_path).returncode == 0
    proc = skillopt("rollback", pid, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"still adopted for other agents: {copy} ({agents_md})" in proc.stdout
    assert f"skillopt-sleep rollback {pid} --all-agents" in proc.stdout
    assert (status(pid), status(copy)) == ("rolled_back", "adopted")
    assert not claude_md.exists() and agents_md.read_bytes() == adopted[agents_md]

    # what that said: --all-agents on the rules rolls back the copy they left adopted
    proc = skillopt("rollback", pid, "--all-agents", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back {copy}: {agents_md} removed" in proc.stdout
    assert f"adopt {pid} --all-agents re-applies them" in proc.stdout
    assert (status(pid), status(copy)) == ("rolled_back", "rolled_back")
    assert not agents_md.exists()
    proc = skillopt("rollback", pid, "--all-agents", cwd=tmp_path)
    assert proc.returncode == 1 and f"neither {pid} nor its copies" in proc.stderr

    # adopt --all-agents after both were rolled back adopts both again (a rolled-back copy
    # is as adoptable as a staged one)
    proc = skillopt("adopt", pid, "--all-agents", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"adopted {copy} -> {agents_md}" in proc.stdout
    assert (status(pid), status(copy)) == ("adopted", "adopted")
    assert claude_md.read_bytes() == adopted[claude_md]
    assert agents_md.read_bytes() == adopted[agents_md]

    # --all-agents, named by a path: every file restored, each its own rollback
    proc = skillopt("rollback", str(claude_md), "--all-agents", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back {pid}: {claude_md} removed" in proc.stdout
    assert f"rolled back {copy}: {agents_md} removed" in proc.stdout
    assert "still adopted" not in proc.stdout
    assert (status(pid), status(copy)) == ("rolled_back", "rolled_back")
    assert not claude_md.exists() and not agents_md.exists()
    live = [a for a in db_rows(store, "adoptions") if a["rolled_back_at"] is None]
    assert live == []

    # an unknown id is named as one
    proc = skillopt("rollback", "p99-codex", cwd=tmp_path)
    assert proc.returncode == 1 and "no proposal 'p99-codex'" in proc.stderr


LINT, TESTS, FIX = (
    "Run `npm run lint`.",
    "Run `npm test` to run the suite.",
    "no, use pnpm instead of npm",
)
#: the linter asked three times in Claude Code (train, val, test); the tests asked twice, only
#: in Codex (train, val): the block's only test occurrence is a task Codex never saw
OWN_TASKS = [
    (agent, [(ask, answer, FIX)])
    for agent, ask, answer in (
        ("claude_code", "run the linter", LINT),
        ("claude_code", "please run the linter for me", LINT),
        ("claude_code", "could you run the linter now?", LINT),
        ("codex", "run the tests", TESTS),
        ("codex", "please run the tests for me", TESTS),
    )
]


def test_a_copy_is_certified_on_the_tasks_the_user_asked_that_agent_val_where_there_is_one(
    tmp_path, isolated_home, capsys
):
    from skillopt_sleep.cli.nights import print_night
    from skillopt_sleep.mining.split import task_of

    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    write_conversations(isolated_home, project, OWN_TASKS)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
    assert result.status == "succeeded", result.summary
    tasks = {t.id: t for t in store.tasks.all() if t.split}
    codex_task = next(t for t in tasks.values() if "tests" in t.intent)
    lint_task = next(t for t in tasks.values() if "lint" in t.intent)
    assert [o.split for o in lint_task.occurrences] == ["train", "val", "test"]
    assert [o.split for o in codex_task.occurrences] == ["train", "val"]
    [copy] = result.summary.copies
    # certified through codex's framing on codex's own task, its val ask, not on the test
    # ask of a task codex never saw
    assert copy.agent == "codex" and copy.status == "staged", copy
    assert copy.certified_on == "val" and copy.tasks == 1
    certified = {
        r["task_id"]
        for r in db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        if r["phase"] == "certify after codex"
    }
    assert {task_of(t) for t in certified} == {codex_task.id}
    [view] = certified
    assert view != codex_task.id and "@" in view  # one view: its val ask
    row = store.proposals.get(copy.proposal_id)
    assert row is not None and NightSummary.model_validate_json(row.summary or "{}").val == 1
    # `run` says what each other agent got
    capsys.readouterr()
    print_night(result)
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        f"codex's copy: {copy.proposal_id} staged, certified through openai_compatible on 1 "
        "val task(s) of its own" in printed
    )


def test_a_copy_that_is_not_staged_says_why_in_run_and_in_adopt_all_agents(
    tmp_path, isolated_home, capsys
):
    from skillopt_sleep.cli.nights import print_night

    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    # codex asked the tests once: nothing of codex's is held out to certify a copy on
    write_conversations(isolated_home, project, OWN_TASKS[:4])
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, _settings(isolated_home, project, sim.url))
    assert result.status == "succeeded", result.summary
    [copy] = result.summary.copies
    assert copy.status == "not_staged"
    why = "none of the 1 task(s) asked in codex was asked again"
    assert copy.reason.startswith(why)
    capsys.readouterr()
    print_night(result)
    assert f"codex's copy not staged: {why}" in " ".join(capsys.readouterr().out.split())
    proc = skillopt("adopt", str(result.proposal_id), "--all-agents")
    assert proc.returncode == 0, proc.stderr
    assert f"no copy for codex to adopt: {why}" in " ".join(proc.stdout.split())
    assert not (isolated_home / ".codex" / "AGENTS.md").exists()
