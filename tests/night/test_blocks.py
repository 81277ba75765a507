"""The default night (no ``--project``) over several projects' sessions and a memory file
every project shares: one block per project (and the block every project reads for the
requests asked in no project), each trained, gated and certified on its own tasks, each
staged as a proposal of its own that supersedes none of the others; adopting them all keeps
every block as staged and the user's own text. Claude Code + Codex format sessions in a
temporary HOME, the ``openai_compatible`` backend against the simulator on loopback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.cli.nights import print_night
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import END, Document, sections
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.mining.split import task_of
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.results import BlockResult, NightSummary
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from skillopt_sleep.ui import pages
from tests.helpers.night import PERSONA, YARN_CONVERSATIONS, write_persona

USER_TEXT = "# My rules for every project\n\nWritten by hand \u2014 keep me exactly.\n"

#: a request asked in no project (in Claude Code's own folder), corrected to bun: three times
#: in other words (train, val, test; a second ask word for word as the first would be no val,
#: and the block could certify nothing)
DOCS = "build the documentation site"
NO_PROJECT = [
    ("claude_code", [(DOCS, "Run `npm run docs`.", "no, use bun instead of npm")]),
    ("claude_code", [(f"could you {DOCS}?", "Run `npm run docs`.", "no, use bun instead of npm")]),
    ("claude_code", [(DOCS + " please", "Run `npm run docs`.", None)]),
]
DOCS_PERSONA = PERSONA + f'\n[[answers]]\nmatch = "{DOCS}"\ntext = "Run `npm run docs`."\n'


def block_text(text: str, section: str | None) -> str:
    """The managed block of ``section`` in ``text``, begin marker to end marker."""
    marker = f"skillopt-sleep:begin project={section} " if section else "skillopt-sleep:begin —"
    begin = text.rindex("<!--", 0, text.index(marker))
    return text[begin : text.index(END, begin) + len(END)]


def test_the_default_night_trains_one_block_per_project_and_stages_each(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    web, api = (tmp_path / "src" / "web").resolve(), (tmp_path / "src" / "api").resolve()
    for project, conversations in ((web, DEMO_CONVERSATIONS), (api, YARN_CONVERSATIONS)):
        project.mkdir(parents=True)
        write_conversations(isolated_home, project, conversations)
    write_conversations(isolated_home, isolated_home / ".claude", NO_PROJECT)
    live = isolated_home / ".claude" / "CLAUDE.md"
    live.write_text(USER_TEXT, encoding="utf-8")
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path, DOCS_PERSONA), full_log=True) as sim:
        overrides = demo_settings(isolated_home, web, sim.url)
        del overrides["project"]  # the default night: every project's sessions
        overrides["document"] = {"kind": "memory", "agent": "claude_code"}
        settings = load_settings(Path("/nonexistent/config.toml"), **overrides)
        assert settings.project is None
        result = run_night(store, settings)
        requests = list(sim.stats.requests)
    assert result.status == "succeeded", result.summary
    # every replay states the project it was asked in (as Claude Code states its working
    # folder), the collateral gate's everyday requests included: each project's block's scope
    # holds in the replays that certify it
    probe = "Write a Python function"
    stated = {
        folder
        for r in requests
        if r.get("role") == "target" and probe in json.dumps(r.get("body") or {})
        for folder in re.findall(r"Primary working directory: ([^\\\n\"]+)", json.dumps(r["body"]))
    }
    assert {str(web), str(api)} <= stated, stated

    # one block per project, and the block every project reads for the project-less request
    blocks = {b.section: b for b in result.summary.blocks}
    assert set(blocks) == {None, str(web), str(api)}, result.summary.blocks
    assert all(b.status == "succeeded" and b.proposal_id for b in blocks.values()), blocks
    pids = {sec: b.proposal_id for sec, b in blocks.items()}
    assert len(set(pids.values())) == 3 and result.proposal_id in pids.values()
    staged = {p.id: p for p in store.proposals.staged(str(live))}
    assert set(staged) == set(pids.values())  # none superseded another project's proposal

    # what `skillopt-sleep run` prints: one short line for the night, each block with its
    # proposal, and no night-wide score where each block has its own
    every_pid = ", ".join(b.proposal_id for b in result.summary.blocks if b.proposal_id)
    assert result.summary.reason == f"3 blocks: proposals {every_pid}", result.summary.reason
    print_night(result)
    printed = " ".join(capsys.readouterr().out.split())
    assert "val and test: scored per block (below)" in printed and "val — ->" not in printed
    for sec, pid in pids.items():
        where = f"the block for {sec}" if sec else "the block every project reads"
        assert f"{where}: succeeded, proposal {pid}" in printed, printed

    # the night's log and `nights` name every proposal it staged, not only the first
    every = ", ".join(b.proposal_id for b in result.summary.blocks if b.proposal_id)
    log_text = paths.night_log_path(result.night_id).read_text("utf-8")
    assert f"night {result.night_id} succeeded: proposals {every}" in log_text, log_text
    [listed] = [n for n in Service().nights(5) if n.id == result.night_id]
    from skillopt_sleep.cli.browse import nights_cmd

    nights_cmd(limit=5, as_json=False)
    [row] = [
        ln
        for ln in capsys.readouterr().out.splitlines()
        if ln.split()[:1] == [str(result.night_id)]
    ]
    assert row.count("per block") == 2 and "—→—" not in row, row
    assert set(listed.summary.staged_proposals(listed.proposal_id)) == set(pids.values())

    # `proposals` (and its JSON, the MCP tool's rows) name each proposal's block
    listed_rows = {p.id: p for p in Service().proposals("staged")}
    assert {sec: listed_rows[pid].block for sec, pid in pids.items()} == {sec: sec for sec in pids}
    from skillopt_sleep.cli import proposals_cmd

    proposals_cmd(all_=False, as_json=False)
    table = capsys.readouterr().out
    assert "block" in table.splitlines()[0]
    for sec, pid in pids.items():
        line = next(ln for ln in table.splitlines() if ln.split()[:1] == [pid])
        assert (Path(sec).name if sec else "(all)") in line.split(), line

    # the dashboard's night page lists every block with its proposal
    night_page = pages.night(Service(), result.night_id)
    assert 'id="sec-blocks"' in night_page and "every project" in night_page
    for pid in pids.values():
        assert f'href="/proposals/{pid}"' in night_page, pid

    # a block with nothing held out shows its train scores as such, never as val
    lone = BlockResult(section=None, status="no_change", train=2, val_before=0.0, val_after=1.0)
    print_night(result.model_copy(update={"summary": NightSummary(blocks=[lone])}))
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "the block every project reads: no_change (no val occurrence: train 0.000 -> 1.000, "
        "unverified)"
    ) in said, said

    tasks = {t.id: t for t in store.tasks.all()}
    rules_of = {"web": "pnpm", "api": "yarn", None: "bun"}
    names = {str(web): "web", str(api): "api", None: None}
    documents: dict[str | None, str] = {}
    for sec, pid in pids.items():
        folder = Path(staged[pid].dir)
        text = (folder / "document").read_bytes().decode("utf-8")
        documents[sec] = text
        report = json.loads((folder / "report.json").read_text("utf-8"))
        assert report["summary"]["section"] == sec
        # the proposal's document holds its own block only (besides the user's text): the
        # other blocks are other proposals'
        assert sections(text) == [sec] and text.startswith(USER_TEXT)
        rules = Document.parse(text, section=sec).rules
        own = rules_of[names[sec]]
        assert rules and any(own in r for r in rules), (sec, rules)
        others = set(rules_of.values()) - {own}
        assert not any(o in r for r in rules for o in others), (sec, rules)
        # its val tasks are its own project's, and its val score rose on them alone
        val = [t["task_id"] for t in report["val_tasks"]]
        projects = {names.get(tasks[task_of(v)].project or "") for v in val}
        assert val and projects == {names[sec]}, (sec, projects)
        assert blocks[sec].val_after > blocks[sec].val_before
        said = f"the rules for project {sec}" if sec else "the rules for every project"
        in_md = f"the rules for project `{sec}`" if sec else said
        assert f"- block: {in_md}" in (folder / "report.md").read_text()
        assert said in pages.proposal(Service(), pid, "csrf")  # the dashboard's proposal page

    # another project's identical request withheld no held-out occurrence: every note of an
    # occurrence withheld as a literal repeat of another task's names a task of the same
    # project (a repeat of its own task's ask is withheld within that task)
    for t in tasks.values():
        for o in t.occurrences:
            if o.note.startswith("withheld") and "context as task " in o.note:
                twin = o.note.split("context as task ", 1)[1].split("'", 1)[0]
                assert tasks[twin].project == t.project, (t.project, o.note)

    # adopting every proposal (no --force: each changes only its own block) keeps every
    # block byte for byte as staged, and the user's text
    for pid in sorted(pids.values()):
        adopt(store, pid)
    final = live.read_bytes().decode("utf-8")
    assert final.startswith(USER_TEXT)
    assert sorted(sections(final), key=str) == sorted(pids, key=str)
    for sec, text in documents.items():
        assert block_text(final, sec) == block_text(text, sec)
