"""Each adopted rule in the wild (issue 26): reach observed where the transcript shows the
memory the agent loaded (a session that never loaded the file is no evidence), and a verdict
per rule — a rule that made the user's later sessions worse is marked "hurt", and the next
night stages its removal."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import all_rules
from skillopt_sleep.delivery.wild import in_the_wild, record_reach
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import (
    write_claude_session,
    write_codex_session,
    write_conversations,
)

INSTALL = "how do I install the dependencies?"
CODE = "write a python function that reads the settings file"
WHOLE = "```python\ndef read_settings(path):\n    return open(path).read()\n```"
CUT = "```python\ndef read_settings(path):\n    return open(pa"


def _adopted(tmp_path: Path, home: Path, extra=()):
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, DEMO_CONVERSATIONS + list(extra))
    store = Store(paths.db_path())
    with serve("demo") as sim:
        settings = load_settings(
            Path("/nonexistent/config.toml"), **demo_settings(home, project, sim.url)
        )
        result = run_night(store, settings)
    assert result.status == "succeeded", result.summary
    done = adopt(store, result.proposal_id)
    return project, store, settings, result.proposal_id, Path(done.target_path)


def test_reach_is_observed_in_the_transcript_and_a_session_without_the_file_is_no_evidence(
    tmp_path, isolated_home
):
    project, store, settings, pid, live = _adopted(tmp_path, isolated_home)
    memory = live.read_text("utf-8")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    answer = "Run `pnpm install` in the project root."
    # loaded the user's memory file (observed), loaded only a project file (a run without user
    # settings: observed not reached), and a transcript that records nothing (inferred)
    for i, loaded in enumerate([{str(live): memory}, {str(project / "CLAUDE.md"): "# p\n"}, None]):
        write_claude_session(
            isolated_home,
            project,
            [(INSTALL, answer, None)],
            when=later + dt.timedelta(minutes=i),
            loaded=loaded,
        )
    harvest(store, settings)
    rows = {s.id: s.loaded_marks for s in store.sessions.all()}
    assert sum(m is not None for m in rows.values()) == 2
    record_reach(store)
    [wild] = in_the_wild(store)
    assert wild.sessions == 3, wild
    assert wild.reached == 2 and wild.observed == 1, wild
    # the verdict recorded at harvest says so too
    observed = store.wild.observed(store.adoptions.in_place()[0].id)
    assert len(observed) == 2  # the reached one and the one that never loaded the file


def test_codex_transcripts_record_the_agents_md_it_sent(tmp_path, isolated_home):
    project = tmp_path / "p"
    project.mkdir()
    write_codex_session(isolated_home, project, [(INSTALL, "Run `npm install`.", None)])
    # the message Codex sends with the user's AGENTS.md, as the real CLI writes it
    [rollout] = (isolated_home / ".codex" / "sessions").rglob("*.jsonl")
    lines = rollout.read_text().splitlines()
    injected = {
        "timestamp": json.loads(lines[0])["timestamp"],
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "# AGENTS.md instructions\n\n<INSTRUCTIONS>\n- Use `pnpm` instead"
                    " of `npm`.\n</INSTRUCTIONS>",
                }
            ],
        },
    }
    rollout.write_text("\n".join([lines[0], json.dumps(injected), *lines[1:]]) + "\n")
    store = Store(paths.db_path())
    settings = load_settings(
        Path("/nonexistent/config.toml"),
        **demo_settings(isolated_home, project, "http://127.0.0.1:9"),
    )
    harvest(store, settings)
    [session] = [s for s in store.sessions.all() if s.source == "codex"]
    from skillopt_sleep.marks import rule_mark

    assert session.loaded_marks == {rule_mark("- Use `pnpm` instead of `npm`.")}
    # the instructions are not a prompt of the user's
    texts = [m.text for m in store.sessions.messages(session.id) if m.kind == "prompt"]
    assert texts == [INSTALL]


def test_a_rule_that_hurt_later_sessions_is_marked_and_its_removal_staged(tmp_path, isolated_home):
    before = [("claude_code", [(CODE, WHOLE, None)]), ("codex", [(CODE + " please", WHOLE, None)])]
    project, store, settings, pid, live = _adopted(tmp_path, isolated_home, before)
    rule = all_rules(live.read_text("utf-8"))[-1]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    for i in range(3):  # since adopt, the same kind of request comes back broken
        write_claude_session(
            isolated_home, project, [(CODE, CUT, None)], when=later + dt.timedelta(minutes=i)
        )
    harvest(store, settings)
    record_reach(store)
    [wild] = in_the_wild(store)
    verdicts = {v.rule: v for v in wild.rules}
    assert verdicts[rule].verdict == "hurt", verdicts
    assert verdicts[rule].other_after == 3 and verdicts[rule].other_after_bad == 3
    assert "broken or corrected" in verdicts[rule].why

    with serve("demo") as sim:
        night = run_night(
            store,
            load_settings(
                Path("/nonexistent/config.toml"), **demo_settings(isolated_home, project, sim.url)
            ),
        )
    # the removal is staged (and the night does not learn the rule again meanwhile)
    staged = store.proposals.staged(str(live))
    assert len(staged) == 1, [(p.id, p.status) for p in store.proposals.all()]
    removal = staged[0]
    report = json.loads((Path(removal.dir) / "report.json").read_text())
    assert [(r["change"], r["rule"]) for r in report["rules"]] == [("removes", rule)]
    assert "hurt in your sessions since adopt" in report["summary"]["reason"]
    assert night.status in ("no_change", "succeeded")
    [wild] = in_the_wild(store)
    assert {v.rule: v.rollback for v in wild.rules}[rule] == removal.id
    adopt(store, removal.id)
    assert rule not in all_rules(live.read_text("utf-8"))
