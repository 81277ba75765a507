"""``skillopt-sleep forget`` leaves no trace of what it forgot in the database files (WAL
included), the full-text index or the proposal reports; and projects kept out by config globs
or a ``.skillopt-sleep-ignore`` file never reach the store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.models import Task
from skillopt_sleep.results import ProposalReport, TaskDelta
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import skillopt_in_process as skillopt
from tests.helpers.sources import cc_user, write
from tests.helpers.store import ensure_night

SECRET_WORD = "zanzibarquokka"  # a word found nowhere else
OTHER_WORD = "keptwombat"


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    proc = skillopt(*args, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _session(home: Path, sid: str, cwd: str, text: str, ts: str) -> None:
    write(
        home / ".claude" / "projects" / sid / f"{sid}.jsonl",
        [cc_user(f"{sid}-u{i}", f"{text} {i}", sid=sid, cwd=cwd, ts=ts) for i in range(3)],
    )


def _traces(state: Path, word: str) -> list[str]:
    """Every file of the state folder (database, WAL, reports) whose bytes hold ``word``."""
    hits = []
    for p in state.rglob("*"):
        if p.is_file() and word.encode() in p.read_bytes():
            hits.append(str(p.relative_to(state)))
    return hits


def _fts_terms(db: Path) -> set[str]:
    store = Store(db)
    try:
        store.db.execute(
            "create virtual table if not exists temp.vocab using fts5vocab(main, messages_fts, row)"
        )
        return {r[0] for r in store.db.execute("select term from temp.vocab").fetchall()}
    finally:
        store.close()


def test_forget_a_project_leaves_no_trace(isolated_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "skillopt-home"
    env = dict(os.environ, HOME=str(isolated_home), SKILLOPT_SLEEP_HOME=str(state))
    secret_project, kept_project = str(tmp_path / "secret"), str(tmp_path / "kept")
    _session(
        isolated_home, "s-secret", secret_project, f"deploy {SECRET_WORD}", "2026-01-05T10:00:00Z"
    )
    _session(isolated_home, "s-kept", kept_project, f"build {OTHER_WORD}", "2026-01-06T10:00:00Z")
    _cli(env, "harvest")
    db = state / "state" / "skillopt.db"
    store = Store(db)
    try:
        store.tasks.save(
            [
                Task(
                    id="t-secret",
                    project=secret_project,
                    intent=f"deploy {SECRET_WORD}",
                    sessions=["claude_code:s-secret"],
                )
            ]
        )
        ensure_night(store, 1)
        store.rollouts.add(night_id=1, task_id="t-secret", answer=f"ran {SECRET_WORD}")
        store.outbox.record({"at": "2026-01-07T00:00:00+00:00", "prompt": f"deploy {SECRET_WORD}"})
    finally:
        store.close()
    folder = state / "state" / "proposals" / "p1"
    folder.mkdir(parents=True)
    report = ProposalReport(
        id="p1",
        night_id=1,
        created_at="2026-01-07T00:00:00Z",
        target="/x/CLAUDE.md",
        base_hash="",
        new_hash="",
        val_tasks=[TaskDelta(task_id="t-secret", intent=f"deploy {SECRET_WORD}", before=0.0)],
    )
    (folder / "report.json").write_text(report.to_json(), "utf-8")
    (folder / "report.md").write_text(f"| deploy {SECRET_WORD} | 0.00 | – |\n", "utf-8")
    assert _traces(state, SECRET_WORD)  # it is there before
    assert any(SECRET_WORD[:8] in t for t in _fts_terms(db))

    dry = json.loads(_cli(env, "forget", "--project", secret_project, "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["sessions"] == 1 and dry["tasks"] == 1
    assert _traces(state, SECRET_WORD)  # a dry run deletes nothing

    res = json.loads(_cli(env, "forget", "--project", secret_project, "--json").stdout)
    assert res["sessions"] == 1 and res["messages"] == 3 and res["tasks"] == 1
    assert res["rollouts"] == 1 and res["reports"] == ["p1"] and res["outbox"] == 1
    assert _traces(state, SECRET_WORD) == []  # database, WAL, reports: no byte of it
    assert not any(SECRET_WORD[:8] in t for t in _fts_terms(db))
    assert any(OTHER_WORD[:8] in t for t in _fts_terms(db))
    store = Store(db)
    try:
        assert store.sessions.search(SECRET_WORD) == []
        assert [s.id for s in store.sessions.all()] == ["claude_code:s-kept"]
        assert len(store.sessions.messages("claude_code:s-kept")) == 3
    finally:
        store.close()
    assert "[forgotten]" in (folder / "report.md").read_text("utf-8")
    _cli(env, "harvest")  # the files already read are not read back in
    assert _traces(state, SECRET_WORD) == []


def test_forget_by_session_and_by_date(isolated_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "skillopt-home"
    env = dict(os.environ, HOME=str(isolated_home), SKILLOPT_SLEEP_HOME=str(state))
    _session(isolated_home, "s-old", "/p", "old words", "2025-03-01T10:00:00Z")
    _session(isolated_home, "s-one", "/p", f"one {SECRET_WORD}", "2026-02-01T10:00:00Z")
    _session(isolated_home, "s-new", "/p", f"new {OTHER_WORD}", "2026-03-01T10:00:00Z")
    _cli(env, "harvest")
    res = json.loads(_cli(env, "forget", "--session", "s-one", "--json").stdout)
    assert res["sessions"] == 1 and _traces(state, SECRET_WORD) == []
    res = json.loads(_cli(env, "forget", "--before", "2026-01-01", "--json").stdout)
    assert res["sessions"] == 1
    store = Store(state / "state" / "skillopt.db")
    try:
        assert [s.id for s in store.sessions.all()] == ["claude_code:s-new"]
    finally:
        store.close()
    bad = skillopt("forget", "--before", "soon", env=env, timeout=60)
    assert bad.returncode == 1 and "not a date" in bad.stderr
    none = skillopt("forget", env=env, timeout=60)
    assert none.returncode == 1 and "nothing was deleted" in none.stderr


def test_kept_out_projects_never_reach_the_store(isolated_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "skillopt-home"
    env = dict(os.environ, HOME=str(isolated_home), SKILLOPT_SLEEP_HOME=str(state))
    ignored = tmp_path / "work" / "ignored"
    (ignored / "sub").mkdir(parents=True)
    (ignored / ".skillopt-sleep-ignore").write_text("")
    _session(
        isolated_home, "s-ign", str(ignored / "sub"), f"a {SECRET_WORD}", "2026-01-05T10:00:00Z"
    )
    _session(
        isolated_home, "s-deny", "/srv/client-x/app", f"b {SECRET_WORD}", "2026-01-05T10:00:00Z"
    )
    _session(isolated_home, "s-ok", "/srv/mine", f"c {OTHER_WORD}", "2026-01-05T10:00:00Z")
    config = state / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[privacy]\ndeny_projects = ["/srv/client-*"]\n', "utf-8")
    report = json.loads(_cli(env, "harvest", "--json").stdout)
    filtered = report["sources"]["claude_code"]["sessions_filtered"]
    assert filtered == {"ignored_project": 1, "denied_project": 1}
    assert _traces(state, SECRET_WORD) == []
    config.write_text('[privacy]\nallow_projects = ["/srv/client-x"]\n', "utf-8")
    _session(isolated_home, "s-ok2", "/srv/mine", f"d {OTHER_WORD}", "2026-01-05T10:00:00Z")
    report = json.loads(_cli(env, "harvest", "--json").stdout)
    assert report["sources"]["claude_code"]["sessions_filtered"] == {"not_allowed_project": 1}


#: words found nowhere else, one per session that asks to install the dependencies
INSTALL_WORDS = ["zanzibarquokka", "tamarindvole", "okapiwhistle"]


def _night_world(home: Path, tmp_path: Path, url: str) -> tuple[Path, Path]:
    """The demo's conversations in ``tmp_path/secret``, each install request naming its own
    word; a session of ``tmp_path/kept``; a config whose night trains ``secret``."""
    project = tmp_path / "secret"
    project.mkdir()
    n = 0
    conversations = []
    for agent, turns in DEMO_CONVERSATIONS:
        if "dependencies" in turns[0][0]:
            word, n = INSTALL_WORDS[n], n + 1
            turns = [
                (a.replace("dependencies", f"dependencies of {word}"), b, c) for a, b, c in turns
            ]
        conversations.append((agent, turns))
    write_conversations(home, project, conversations)
    _session(home, "s-kept", str(tmp_path / "kept"), f"build {OTHER_WORD}", "2026-01-06T10:00:00Z")
    backend = f'name = "openai_compatible"\nbase_url = "{url}/v1"\nmodel = "sim"\n'
    backend += 'api_key = "sk-test"\nmax_retries = 1\n'
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'project = "{project}"\nepochs = 1\n'
        f'[sources.claude_code]\nroots = ["{home / ".claude" / "projects"}"]\n'
        f'[sources.codex]\nroots = ["{home / ".codex" / "sessions"}"]\n'
        f"[target]\n{backend}[optimizer]\n{backend}"
        f'[document]\nkind = "path"\npath = "{project / "AGENTS.md"}"\n',
        encoding="utf-8",
    )
    return project, cfg


def test_forget_after_a_night_leaves_nothing_the_night_derived(
    isolated_home: Path, tmp_path: Path
) -> None:
    """A real night (simulator) on a project whose install requests each name a word found
    nowhere else; then edits, a night's summary and error and a proposal's reason that quote
    them (as an optimizer's rationale may). ``forget --session`` of one such session, then
    ``forget --project``: no byte of the forgotten words (nor of a forgotten prompt) in the
    database files, its full-text index, the outbox or any file of the state folder, while
    what was kept stays whole."""
    state = tmp_path / "skillopt-home"
    env = dict(os.environ, HOME=str(isolated_home), SKILLOPT_SLEEP_HOME=str(state))
    first, second, third = INSTALL_WORDS
    with serve("demo") as sim:
        project, cfg = _night_world(isolated_home, tmp_path, sim.url)
        night = json.loads(_cli(env, "--config", str(cfg), "run", "--json").stdout)
    assert night["status"] == "succeeded" and night["proposal_id"], night
    pid, nid = night["proposal_id"], night["night_id"]
    db = state / "state" / "skillopt.db"
    store = Store(db)
    try:
        for word in INSTALL_WORDS:
            quote = f"how do I install the dependencies of {word}?"
            store.edits.add(
                night_id=nid,
                op="add",
                text=f"For {word}, install with `pnpm`.",
                rationale=f'the user asked "{quote}" and corrected npm',
                origin="reflect",
                status="rejected",
            )
        summary = json.loads(store.nights.get(nid).summary)
        summary["warning"] = f"asked to install the dependencies of {first} and {second}"
        store.nights.set(nid, summary=json.dumps(summary), error=f"{third} timed out")
        store.proposals.set_status(pid, "staged", f"kept for {first}")
    finally:
        store.close()
    for word in INSTALL_WORDS:  # they are there before, in the store and the report
        assert "state/skillopt.db" in _traces(state, word), word
        assert any(word[:8] in t for t in _fts_terms(db))
    assert f"state/proposals/{pid}/report.md" in _traces(state, second)  # a val task

    hits = json.loads(_cli(env, "search", second, "--json").stdout)["hits"]
    [sid] = {h["session_id"] for h in hits}
    res = json.loads(_cli(env, "forget", "--session", sid, "--json").stdout)
    assert res["sessions"] == 1 and res["tasks"] >= 1 and res["rollouts"] >= 1
    assert res["derived"] >= 3 and res["outbox"] >= 1 and res["reports"] == [pid]
    assert _traces(state, second) == []
    assert not any(second[:8] in t for t in _fts_terms(db))
    assert any(first[:8] in t for t in _fts_terms(db))  # other sessions' messages stay
    store = Store(db)
    try:
        row = store.nights.get(nid)
        kept = json.loads(row.summary)  # still the night's summary, as JSON
        assert kept["warning"] == f"asked to install the dependencies of {first} and [forgotten]"
        assert row.error == f"{third} timed out"
        rules = [e["text"] for e in store.db["edits"].rows_where("night_id = ?", [nid])]
        assert "For [forgotten], install with `pnpm`." in rules
        assert f"For {first}, install with `pnpm`." in rules  # its session is kept
    finally:
        store.close()

    res = json.loads(_cli(env, "forget", "--project", str(project), "--json").stdout)
    assert res["sessions"] == len(DEMO_CONVERSATIONS) - 1
    for word in [*INSTALL_WORDS, "install the dependencies of"]:
        assert _traces(state, word) == [], word
    assert not any(w[:8] in t for w in INSTALL_WORDS for t in _fts_terms(db))
    assert any(OTHER_WORD[:8] in t for t in _fts_terms(db))
    report = json.loads((state / "state" / "proposals" / pid / "report.json").read_text())
    assert report["id"] == pid and "[forgotten]" in json.dumps(report)
    # the scrubbed report's new hash is recorded with the proposal: it still adopts
    adopted = skillopt("adopt", pid, env=env, timeout=120)
    assert adopted.returncode == 0 and f"adopted {pid}" in adopted.stdout, adopted.stderr
