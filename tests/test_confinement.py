"""Confinement: adopt, rollback and install write only where the agent registry allows.

Each case tampers with what they read — a proposal or adoption row, a staged document, a
report, a backup, an install record — or puts a symlink where they write, and checks the
operation is refused with one line and that no file in the whole sandbox changed (every
byte and every link compared before and after)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillopt_sleep import agents, paths
from skillopt_sleep.delivery.document import Document, read_live, sha256_text
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.install import InstallError, install, plan, state_folder, uninstall
from skillopt_sleep.night.stage import Staging, stage_proposal
from skillopt_sleep.proposals import ADOPTING, adopt, adopt_group, reject, rollback
from skillopt_sleep.results import AgentCopy, NightCost, NightSummary, Scores
from skillopt_sleep.store import Store
from tests.helpers.store import db_get, db_rows, ensure_night, tamper

RULE = "Use `pnpm` instead of `npm`."


def sandbox_state(root: Path) -> dict[str, object]:
    """Every file's bytes and every link's target under ``root`` (the database files aside:
    the tests tamper with its rows on purpose, and check them separately)."""
    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file() and not p.name.startswith("skillopt.db"):
            out[rel] = p.read_bytes()
        elif p.is_dir():
            out[rel] = "dir"
    return out


def stage(store: Store, target: Path, rules: list[str], night_id: int = 1, **kw) -> str:
    live = read_live(target)
    new = Document.parse(live, new_skill=target.name == "SKILL.md").render(rules)
    ensure_night(store, night_id)
    return stage_proposal(
        store,
        Staging(
            night_id=night_id,
            target_path=target,
            base_text=live,
            new_text=new,
            base_hash=sha256_text(live),
            edits=[],
            tasks=[],
            cost=NightCost(calls=1),
            summary=kw.pop("summary", NightSummary()),
            scores=Scores(val_before=0.0, val_after=1.0, test_before=0.0, test_after=1.0),
            **kw,
        ),
    )


@pytest.fixture
def world(tmp_path: Path, isolated_home: Path):
    """The sandbox: a home with Claude Code's and Codex's memory files, a foreign file and a
    foreign folder outside every agent location, and the store."""
    claude = isolated_home / ".claude"
    claude.mkdir()
    (claude / "CLAUDE.md").write_text("# mine\n")
    (isolated_home / ".codex").mkdir()
    (isolated_home / ".codex" / "AGENTS.md").write_text("# codex rules\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("foreign file\n")
    (outside / "AGENTS.md").write_text("someone else's AGENTS.md\n")
    store = Store(paths.db_path())
    return store, isolated_home, outside


def refused(
    tmp_path: Path, store: Store, action, match: str, error: type[Exception] = ProposalError
) -> None:
    """``action()`` is refused with ``match`` and changes no file and no adoption."""
    before = sandbox_state(tmp_path)
    adoptions = db_rows(store, "adoptions")
    with pytest.raises(error, match=match):
        action()
    assert sandbox_state(tmp_path) == before
    assert db_rows(store, "adoptions") == adoptions


# ------------------------------------------------------------------------------ adopt
@pytest.mark.parametrize(
    "where",
    ["outside/precious.txt", "outside/AGENTS.md", "home/.claude/settings.json", "home/.bashrc"],
)
def test_adopt_refuses_a_tampered_target(tmp_path, world, where):
    store, home, _ = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    foreign = tmp_path / where
    foreign.parent.mkdir(parents=True, exist_ok=True)
    if not foreign.exists():
        foreign.write_text("foreign\n")
    tamper(
        store,
        "proposals",
        pid,
        target_path=str(foreign),
        base_hash=sha256_text(foreign.read_text()),
    )
    for force in (False, True):
        refused(tmp_path, store, lambda f=force: adopt(store, pid, force=f), "refusing")
    assert db_get(store, "proposals", pid)["status"] == "staged"


def test_adopt_refuses_a_tampered_target_even_with_a_matching_report(tmp_path, world):
    store, home, outside = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    foreign = outside / "precious.txt"
    tamper(
        store,
        "proposals",
        pid,
        target_path=str(foreign),
        base_hash=sha256_text(foreign.read_text()),
    )
    report_path = paths.proposals_dir() / pid / "report.json"
    report = json.loads(report_path.read_text())
    report.update(target=str(foreign), base_hash=sha256_text(foreign.read_text()))
    forge_report(store, pid, report)
    refused(tmp_path, store, lambda: adopt(store, pid, force=True), "not a location")


def test_adopt_refuses_a_swapped_document(tmp_path, world):
    store, home, _ = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    (paths.proposals_dir() / pid / "document").write_text("# replaced\n- run evil\n")
    refused(tmp_path, store, lambda: adopt(store, pid), "does not match its recorded hash")


def test_adopt_refuses_a_document_swapped_with_its_row_but_not_its_report(tmp_path, world):
    store, home, _ = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    swapped = "# replaced\n"
    (paths.proposals_dir() / pid / "document").write_text(swapped)
    tamper(store, "proposals", pid, new_hash=sha256_text(swapped))
    refused(tmp_path, store, lambda: adopt(store, pid), "disagree")


def test_adopt_refuses_a_report_changed_after_the_night(tmp_path, world):
    """report.json's whole text is hashed at staging: a report edited afterwards (here only
    its summary's reason, which no other check compares) is refused, forced or not, and so
    is a removed one; the report as staged adopts."""
    store, home, _ = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    report_path = paths.proposals_dir() / pid / "report.json"
    staged = report_path.read_text()
    report = json.loads(staged)
    report["summary"]["reason"] = "approved by the security team"
    report_path.write_text(json.dumps(report))
    for force in (False, True):
        refused(
            tmp_path,
            store,
            lambda f=force: adopt(store, pid, force=f),
            "its report.json does not match its recorded hash",
        )
    report_path.unlink()
    refused(tmp_path, store, lambda: adopt(store, pid), "report.json is missing or unreadable")
    report_path.write_text(staged)
    adopt(store, pid)
    assert RULE in (home / ".claude" / "CLAUDE.md").read_text()


def test_adopt_refuses_a_proposal_folder_outside_the_proposals_folder(tmp_path, world):
    store, home, outside = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    fake = outside / "fake"
    fake.mkdir()
    for name in ("document", "report.json"):
        (fake / name).write_bytes((paths.proposals_dir() / pid / name).read_bytes())
    tamper(store, "proposals", pid, dir=str(fake))
    refused(tmp_path, store, lambda: adopt(store, pid), "is not under")


def test_adopt_refuses_a_symlinked_skill_folder(tmp_path, world):
    store, home, outside = world
    skills = home / ".claude" / "skills"
    skills.mkdir()
    (skills / "skillopt-sleep-learned").symlink_to(outside, target_is_directory=True)
    pid = stage(store, skills / "skillopt-sleep-learned" / "SKILL.md", [RULE])
    for force in (False, True):
        refused(tmp_path, store, lambda f=force: adopt(store, pid, force=f), "a symlink leaves")
    assert not (outside / "SKILL.md").exists()


def test_adopt_refuses_a_memory_file_linked_outside(tmp_path, world):
    store, home, outside = world
    memory = home / ".codex" / "AGENTS.md"
    memory.unlink()
    memory.symlink_to(outside / "precious.txt")
    pid = stage(store, memory, [RULE])
    refused(tmp_path, store, lambda: adopt(store, pid), "a symlink leaves")


def test_adopt_refuses_a_symlinked_agent_folder_inside_a_project(tmp_path, world):
    store, home, outside = world
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".claude").symlink_to(outside, target_is_directory=True)
    os.environ["SKILLOPT_SLEEP_PROJECT"] = str(project)
    try:
        pid = stage(store, project / ".claude" / "CLAUDE.md", [RULE])
        refused(tmp_path, store, lambda: adopt(store, pid), "a symlink leaves")
    finally:
        del os.environ["SKILLOPT_SLEEP_PROJECT"]


def test_a_link_between_two_agents_memory_files_is_written_through(tmp_path, world):
    """The one kind of link adopt follows: from one allowed file to another."""
    store, home, _ = world
    memory = home / ".codex" / "AGENTS.md"
    memory.unlink()
    memory.symlink_to(home / ".claude" / "CLAUDE.md")
    adopt(store, stage(store, memory, [RULE]))
    assert memory.is_symlink() and RULE in (home / ".claude" / "CLAUDE.md").read_text()


def test_a_skills_folder_shared_with_another_agent_is_written_through(tmp_path, world):
    """Codex's skills folder linked to Claude Code's: Codex's managed skill is Claude Code's
    managed skill file, written through; a Codex memory proposal pointed at it is refused."""
    store, home, _ = world
    (home / ".claude" / "skills").mkdir()
    (home / ".codex" / "skills").symlink_to(home / ".claude" / "skills", target_is_directory=True)
    skill = home / ".codex" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    pid = stage(store, home / ".codex" / "AGENTS.md", [RULE])
    retarget(store, pid, skill)
    refused(tmp_path, store, lambda: adopt(store, pid), "for agent codex, kind memory")
    adopt(store, stage(store, skill, [RULE], night_id=2))
    assert RULE in (home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md").read_text()


def test_an_agent_home_that_is_itself_a_link_is_followed(tmp_path, world, monkeypatch):
    """``CLAUDE_CONFIG_DIR`` (or ``~/.claude``) kept in a dotfiles folder: the home folder
    resolves elsewhere, and so do its files, inside it."""
    store, home, _ = world
    dotfiles = tmp_path / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    (home / "claude-link").symlink_to(dotfiles, target_is_directory=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude-link"))
    target = home / "claude-link" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    adopt(store, stage(store, target, [RULE]))
    assert RULE in (dotfiles / "skills" / "skillopt-sleep-learned" / "SKILL.md").read_text()


def test_adopt_group_refuses_every_member_when_one_copy_is_tampered(tmp_path, world):
    store, home, outside = world
    head = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    copy = stage(
        store,
        home / ".codex" / "AGENTS.md",
        [RULE],
        proposal_id=f"{head}-codex",
        summary=NightSummary(copy_of=head, copy_for="codex"),
    )
    summary = NightSummary(copies=[AgentCopy(agent="codex", proposal_id=copy, status="staged")])
    tamper(store, "proposals", head, summary=json.dumps(summary.dump()))
    tamper(store, "proposals", copy, target_path=str(outside / "AGENTS.md"))
    for force in (False, True):
        refused(tmp_path, store, lambda f=force: adopt_group(store, head, force=f), "refusing")
    assert {db_get(store, "proposals", p)["status"] for p in (head, copy)} == {"staged"}


def test_a_path_document_is_allowed_only_while_the_config_names_it(tmp_path, world, monkeypatch):
    store, _, outside = world
    notes = outside / "notes.md"
    notes.write_text("# notes\n")
    pid = stage(store, notes, [RULE])
    refused(tmp_path, store, lambda: adopt(store, pid), "not a location")
    monkeypatch.setenv("SKILLOPT_SLEEP_DOCUMENT__KIND", "path")
    monkeypatch.setenv("SKILLOPT_SLEEP_DOCUMENT__PATH", str(notes))
    adopt(store, pid)
    assert RULE in notes.read_text()


def test_a_path_document_that_is_an_agents_project_file_is_that_agents(
    tmp_path, world, monkeypatch
):
    """A configured ``document.path`` in a folder no night ran for, named as Copilot's project
    instructions: recorded as Copilot's memory, adopted while the config names it, and no
    other agent's proposal may be pointed at it."""
    store, home, outside = world
    instructions = outside / ".github" / "copilot-instructions.md"
    instructions.parent.mkdir()
    pid = stage(store, instructions, [RULE], agent="copilot")
    assert (db_get(store, "proposals", pid)["agent"], db_get(store, "proposals", pid)["kind"]) == (
        "copilot",
        "memory",
    )
    refused(tmp_path, store, lambda: adopt(store, pid), "for agent copilot, kind memory")
    monkeypatch.setenv("SKILLOPT_SLEEP_DOCUMENT__KIND", "path")
    monkeypatch.setenv("SKILLOPT_SLEEP_DOCUMENT__PATH", str(instructions))
    codex = stage(store, home / ".codex" / "AGENTS.md", [RULE], night_id=2)
    retarget(store, codex, instructions)
    refused(tmp_path, store, lambda: adopt(store, codex), "for agent codex, kind memory")
    adopt(store, pid)
    assert RULE in instructions.read_text()


# ------------------------------------------------------------------------------ rollback
def _adopted(store: Store, target: Path) -> str:
    pid = stage(store, target, [RULE])
    adopt(store, pid)
    return pid


def test_rollback_refuses_a_tampered_adoption_target(tmp_path, world):
    store, home, outside = world
    _adopted(store, home / ".claude" / "CLAUDE.md")
    adoption = db_rows(store, "adoptions")[0]
    for existed in (1, 0):  # restore a backup over it, or delete it
        foreign = outside / "precious.txt"
        tamper(
            store,
            "adoptions",
            adoption["id"],
            target_path=str(foreign),
            existed_before=existed,
            after_hash=sha256_text(foreign.read_text()),
        )
        for force in (False, True):
            refused(tmp_path, store, lambda f=force: rollback(store, force=f), "refusing")
    assert (outside / "precious.txt").read_text() == "foreign file\n"


def test_rollback_refuses_an_adoption_whose_target_is_not_its_proposals(tmp_path, world):
    store, home, _ = world
    _adopted(store, home / ".claude" / "CLAUDE.md")
    adoption = db_rows(store, "adoptions")[0]
    other = home / ".codex" / "AGENTS.md"  # an agent's memory file, not the one adopted
    tamper(
        store,
        "adoptions",
        adoption["id"],
        target_path=str(other),
        after_hash=sha256_text(other.read_text()),
    )
    refused(tmp_path, store, lambda: rollback(store), "does not match its proposal")


def test_rollback_refuses_a_backup_outside_the_backups_folder(tmp_path, world):
    store, home, outside = world
    _adopted(store, home / ".claude" / "CLAUDE.md")
    adoption = db_rows(store, "adoptions")[0]
    tamper(store, "adoptions", adoption["id"], backup_path=str(outside / "precious.txt"))
    refused(tmp_path, store, lambda: rollback(store, force=True), "is not under")


def test_rollback_refuses_a_swapped_backup(tmp_path, world):
    store, home, _ = world
    _adopted(store, home / ".claude" / "CLAUDE.md")
    backup = Path(db_rows(store, "adoptions")[0]["backup_path"])
    backup.write_text("#!/bin/sh\nevil\n")
    refused(tmp_path, store, lambda: rollback(store, force=True), "not the file adopt saved")


def test_rollback_refuses_a_skill_folder_replaced_by_a_link_after_adopt(tmp_path, world):
    store, home, outside = world
    target = home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    _adopted(store, target)
    # the folder moved out and linked back: rollback would delete the file out there
    moved = outside / "moved"
    target.parent.rename(moved)
    target.parent.symlink_to(moved, target_is_directory=True)
    for force in (False, True):
        refused(tmp_path, store, lambda f=force: rollback(store, force=f), "a symlink leaves")
    assert (moved / "SKILL.md").exists()


def test_rollback_removes_only_folders_above_the_target(tmp_path, world):
    store, home, outside = world
    target = home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    pid = _adopted(store, target)
    empty = outside / "empty"
    empty.mkdir()
    record = paths.proposals_dir() / pid / "adoption.json"
    data = json.loads(record.read_text())
    data["created_dirs"].append(str(empty))
    record.write_text(json.dumps(data))
    done = rollback(store)
    assert empty.is_dir() and str(empty) not in done.removed_dirs
    assert not target.exists()


# ------------------------------------------------------------------------------ per agent and kind
#: every document a proposal can write: (agent, kind, scope), scope ``user`` (in the agent's
#: folders) or ``project`` (its project-level memory file in the night's project)
DOCUMENTS = [
    *[
        (a.name, kind, "user")
        for a in agents.AGENTS
        for kind in agents.DOCUMENT_KINDS
        if a.locations(kind, (), {}, Path("/h"))
    ],
    *[(a.name, "memory", "project") for a in agents.AGENTS if a.project_memory],
]


def _place(name: str, kind: str, scope: str, project: Path) -> Path:
    """The first location of ``name``'s ``kind`` in ``scope``."""
    files = agents.get_agent(name).locations(kind, [project] if scope == "project" else [])
    if scope == "project":
        files = [(f, r) for f, r in files if r == project]
    return files[0][0]


@pytest.fixture
def project(tmp_path: Path, world) -> Path:
    """The project night 1 ran for."""
    folder = tmp_path / "proj"
    folder.mkdir()
    ensure_night(world[0], 1, project=str(folder))
    return folder


def forge_report(store: Store, pid: str, report: dict) -> None:
    """Write a tampered ``report.json`` and, as someone who can also edit the database would,
    its hash in the proposal's row, so only the checks after the report's hash can tell."""
    text = json.dumps(report)
    (paths.proposals_dir() / pid / "report.json").write_text(text)
    tamper(store, "proposals", pid, report_hash=sha256_text(text))


def retarget(store: Store, pid: str, target: Path, **more) -> None:
    """Point proposal ``pid`` at ``target`` in its row (a real sqlite edit) and its
    report.json alike, so only the confinement can tell."""
    base = sha256_text(read_live(target))
    tamper(store, "proposals", pid, target_path=str(target), base_hash=base, **more)
    report_path = paths.proposals_dir() / pid / "report.json"
    report = json.loads(report_path.read_text())
    report.update(target=str(target), base_hash=base)
    report.update({k: v for k, v in more.items() if k in ("agent", "kind")})
    forge_report(store, pid, report)


def point_adoption(store: Store, pid: str, adoption: dict, target: Path) -> None:
    """Point proposal ``pid`` (row and report, :func:`retarget`) and its ``adoption`` at
    ``target``, as if adopt had written it there."""
    retarget(store, pid, target)
    tamper(
        store,
        "adoptions",
        adoption["id"],
        target_path=str(target),
        after_hash=sha256_text(read_live(target)),
    )


@pytest.mark.parametrize(("name", "kind", "scope"), DOCUMENTS)
def test_each_agent_writes_only_its_own_locations_of_its_kind(
    tmp_path, world, project, name, kind, scope
):
    """A proposal for ``name``'s ``kind`` whose row (and report) is pointed at another agent's
    location, or at another kind's, is refused on adopt, forced or not; the real one adopts;
    its adoption pointed elsewhere is refused on rollback; the real one rolls back."""
    store = world[0]
    own = _place(name, kind, scope, project)
    ours = {f for f, _ in agents.get_agent(name).locations(kind, [project])}
    foreign = sorted(
        {_place(n, k, sc, project) for n, k, sc in DOCUMENTS} - ours,
    )
    assert len(foreign) >= 10
    pid = stage(store, own, [RULE], agent=name)
    row = db_get(store, "proposals", pid)
    assert (row["agent"], row["kind"]) == (name, kind)
    for other in foreign:
        retarget(store, pid, other)
        for force in (False, True):
            refused(
                tmp_path,
                store,
                lambda f=force: adopt(store, pid, force=f),
                f"refusing proposal {pid}'s target {other}: not a location skillopt-sleep "
                f"writes for agent {name}, kind {kind} \\(allowed: .*{own.name}",
            )
    retarget(store, pid, own)
    was = read_live(own)
    adopt(store, pid)
    assert RULE in own.read_text()
    adoption = db_rows(store, "adoptions")[0]
    for other in (foreign[0], foreign[-1]):
        point_adoption(store, pid, adoption, other)
        for force in (False, True):
            refused(
                tmp_path,
                store,
                lambda f=force: rollback(store, force=f),
                f"refusing the adoption's target {other}: not a location skillopt-sleep "
                f"writes for agent {name}, kind {kind}",
            )
    retarget(store, pid, own)
    tamper(
        store, "adoptions", adoption["id"], target_path=str(own), after_hash=adoption["after_hash"]
    )
    rollback(store)
    assert read_live(own) == was


def test_rollback_of_every_agents_copy_confines_each_copy_to_its_agent(tmp_path, world):
    """``rollback --all-agents``: a copy for Codex whose proposal and adoption rows (and
    report) are pointed at Claude Code's managed skill refuses the whole group."""
    store, home, _ = world
    head = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    copy = stage(
        store,
        home / ".codex" / "AGENTS.md",
        [RULE],
        proposal_id=f"{head}-codex",
        summary=NightSummary(copy_of=head, copy_for="codex"),
    )
    summary = NightSummary(copies=[AgentCopy(agent="codex", proposal_id=copy, status="staged")])
    tamper(store, "proposals", head, summary=json.dumps(summary.dump()))
    adopt_group(store, head)
    claude = home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    adoption = next(a for a in db_rows(store, "adoptions") if a["proposal_id"] == copy)
    point_adoption(store, copy, adoption, claude)
    for force in (False, True):
        refused(
            tmp_path,
            store,
            lambda f=force: rollback(store, head, all_agents=True, force=f),
            f"refusing the adoption's target {claude}: not a location skillopt-sleep writes "
            "for agent codex, kind memory",
        )
    assert {db_get(store, "proposals", p)["status"] for p in (head, copy)} == {"adopted"}


def test_a_row_tampered_to_name_another_agent_is_refused(tmp_path, world):
    """The row says Claude Code and points at Claude Code's file, but the staged report says
    the proposal is Codex's: refused, on adopt and on rollback."""
    store, home, _ = world
    pid = stage(store, home / ".codex" / "AGENTS.md", [RULE])
    assert db_get(store, "proposals", pid)["agent"] == "codex"
    claude = home / ".claude" / "CLAUDE.md"
    base = sha256_text(claude.read_text())
    tamper(store, "proposals", pid, agent="claude_code", target_path=str(claude), base_hash=base)
    report_path = paths.proposals_dir() / pid / "report.json"
    report = json.loads(report_path.read_text())
    report.update(target=str(claude), base_hash=base)
    forge_report(store, pid, report)
    for force in (False, True):
        refused(
            tmp_path,
            store,
            lambda f=force: adopt(store, pid, force=f),
            "its record says agent claude_code, kind memory but its report.json says agent "
            "codex, kind memory",
        )
    # adopted as what it is, then the row and the adoption both turned to Claude Code's file
    tamper(store, "proposals", pid, agent="codex")
    report.update(
        target=str(home / ".codex" / "AGENTS.md"), base_hash=sha256_text("# codex rules\n")
    )
    forge_report(store, pid, report)
    tamper(
        store,
        "proposals",
        pid,
        target_path=report["target"],
        base_hash=report["base_hash"],
    )
    adopt(store, pid)
    adoption = db_rows(store, "adoptions")[0]
    tamper(store, "proposals", pid, agent="claude_code", target_path=str(claude))
    tamper(store, "adoptions", adoption["id"], target_path=str(claude), after_hash=base)
    refused(tmp_path, store, lambda: rollback(store, force=True), "report.json says agent codex")
    # the report changed too: the row and report agree on Claude Code, but the document is
    # Codex's copy of the night's rules
    report.update(agent="claude_code", summary={"copy_for": "codex"})
    forge_report(store, pid, report)
    refused(tmp_path, store, lambda: rollback(store, force=True), "it is codex's copy")


def test_a_row_staged_before_agents_and_kinds_were_recorded(tmp_path, world):
    """A row without agent and kind (what migration m010 leaves) derives them from its target,
    asking only the agent its report names (a copy's agent): adopted where it belongs,
    refused elsewhere."""
    store, home, _ = world
    codex = home / ".codex" / "AGENTS.md"
    pid = stage(store, codex, [RULE], summary=NightSummary(copy_for="codex"))

    def legacy() -> None:
        report_path = paths.proposals_dir() / pid / "report.json"
        report = json.loads(report_path.read_text())
        report.pop("agent"), report.pop("kind")
        forge_report(store, pid, report)
        tamper(store, "proposals", pid, agent="", kind="")

    legacy()
    retarget(store, pid, home / ".claude" / "CLAUDE.md")
    # Claude Code's file is no document of Codex's: a ``path``, not configured
    refused(tmp_path, store, lambda: adopt(store, pid, force=True), "for agent codex, kind path")
    retarget(store, pid, codex)
    adopt(store, pid)
    assert RULE in codex.read_text()


def test_a_killed_adopt_whose_record_was_pointed_elsewhere_is_left_alone(tmp_path, world):
    """The recovery of a killed adopt (``adopting.json``) removes the folders an adoption
    created only where its proposal's agent and kind may write: a record pointed at another
    agent's empty skills folder leaves it, the rows and the marker as they are, and rolling
    it back is refused."""
    store, home, _ = world
    target = home / ".codex" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    pid = _adopted(store, target)
    adoption = db_rows(store, "adoptions")[0]
    # the adopt as if killed before its live write: the file gone, the marker left
    rollback(store)
    tamper(store, "adoptions", adoption["id"], rolled_back_at=None)
    tamper(store, "proposals", pid, status="adopted")
    folder = paths.proposals_dir() / pid
    (folder / ADOPTING).write_text(json.dumps({"proposal_id": pid, "adoption_id": adoption["id"]}))
    # ... and its records pointed at Claude Code's (empty) managed skill folder
    theirs = home / ".claude" / "skills" / "skillopt-sleep-learned"
    theirs.mkdir(parents=True)
    other = theirs / "SKILL.md"
    tamper(store, "proposals", pid, target_path=str(other))
    tamper(store, "adoptions", adoption["id"], target_path=str(other))
    record = json.loads((folder / "adoption.json").read_text())
    record.update(target_path=str(other), created_dirs=[str(theirs)])
    (folder / "adoption.json").write_text(json.dumps(record))
    other_pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE], night_id=2)
    before = sandbox_state(tmp_path)
    reject(store, other_pid)  # runs the recovery first
    assert sandbox_state(tmp_path) == before and theirs.is_dir()
    assert db_get(store, "adoptions", adoption["id"])["rolled_back_at"] is None
    assert db_get(store, "proposals", pid)["status"] == "adopted"
    refused(
        tmp_path, store, lambda: rollback(store, force=True), "for agent codex, kind managed_skill"
    )


# ------------------------------------------------------------------------------ install
def test_install_refuses_a_symlinked_skill_folder(tmp_path, world, monkeypatch):
    _, home, outside = world
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    (home / ".codex" / "skills").mkdir()
    (home / ".codex" / "skills" / "skillopt-sleep").symlink_to(outside, target_is_directory=True)
    refused(tmp_path, world[0], lambda: install("codex"), "a symlink leaves", InstallError)


def test_install_refuses_a_memory_file_linked_outside(tmp_path, world, monkeypatch):
    _, home, outside = world
    (home / ".codex" / "AGENTS.md").unlink()
    (home / ".codex" / "AGENTS.md").symlink_to(outside / "AGENTS.md")
    refused(tmp_path, world[0], lambda: install("codex"), "a symlink leaves", InstallError)


def test_install_refuses_a_project_folder_linked_outside(tmp_path, world):
    _, _, outside = world
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".github").symlink_to(outside, target_is_directory=True)
    refused(
        tmp_path,
        world[0],
        lambda: install("copilot", project),
        "a symlink leaves",
        InstallError,
    )


@pytest.mark.parametrize("key", ["codex", "copilot", "opencode", "pi", "devin", "openclaw"])
def test_install_follows_a_memory_link_only_to_another_agents_memory_file(tmp_path, world, key):
    """An agent's memory file linked into another agent's folder: refused when the link
    leads to that agent's config, written through when it leads to its memory file."""
    store, home, _ = world
    found = agents.get_agent(key)
    memory = found.user_memory_files()[0]
    memory.parent.mkdir(parents=True, exist_ok=True)
    settings = home / ".claude" / "settings.json"
    settings.write_text("{}\n")
    memory.unlink(missing_ok=True)
    memory.symlink_to(settings)
    assert memory in [s.path for s in plan(key) if s.kind == "block"]
    refused(
        tmp_path,
        store,
        lambda: install(key),
        f"refusing {memory} \\({key}'s memory\\): it resolves to {settings}",
        InstallError,
    )
    memory.unlink()
    memory.symlink_to(home / ".claude" / "CLAUDE.md")
    install(key)
    assert memory.is_symlink() and "skillopt-sleep" in (home / ".claude" / "CLAUDE.md").read_text()
    uninstall(key)
    assert (home / ".claude" / "CLAUDE.md").read_text() == "# mine\n"


def test_install_follows_a_skills_folder_link_only_to_another_agents_skills(
    tmp_path, world, monkeypatch
):
    """Codex's skills folder linked to Claude Code's skills folder is shared (the skill is
    written through); linked to Claude Code's home folder it is refused, and so is Codex's
    config linked to Claude Code's settings."""
    store, home, _ = world
    claude_skills = home / ".claude" / "skills"
    claude_skills.mkdir()
    skills = home / ".codex" / "skills"
    skills.symlink_to(home / ".claude", target_is_directory=True)
    refused(
        tmp_path, store, lambda: install("codex"), "\\(codex's skill\\): it resolves", InstallError
    )
    skills.unlink()
    (home / ".codex" / "config.toml").symlink_to(home / ".claude" / "settings.json")
    (home / ".claude" / "settings.json").write_text("{}\n")
    refused(
        tmp_path, store, lambda: install("codex"), "\\(codex's config\\): it resolves", InstallError
    )
    (home / ".codex" / "config.toml").unlink()
    skills.symlink_to(claude_skills, target_is_directory=True)
    install("codex")
    assert (claude_skills / "skillopt-sleep" / "SKILL.md").is_file()


@pytest.mark.parametrize("how", ["file", "original", "folder"])
def test_uninstall_refuses_a_tampered_install_record(tmp_path, world, how):
    _, home, outside = world
    install("codex")
    folder = state_folder("codex", None)
    manifest = json.loads((folder / "manifest.json").read_text())
    path, entry = next(iter(manifest["files"].items()))
    if how == "file":
        manifest["files"] = {str(outside / "precious.txt"): entry}
    elif how == "original":
        for e in manifest["files"].values():
            e["existed"], e["original"] = True, "../../../../outside/precious.txt"
    else:
        entry["created_dirs"] = [str(outside)]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    refused(tmp_path, world[0], lambda: uninstall("codex"), "refusing|names", InstallError)


# ------------------------------------------------------------------------------ reads
def test_get_skill_reads_no_file_a_tampered_row_names(tmp_path, world):
    """What MCP ``get_skill`` reads for an agent is confined the same way."""
    from skillopt_sleep.service import Service

    store, home, outside = world
    pid = stage(store, home / ".claude" / "CLAUDE.md", [RULE])
    assert Service().skill().target == str(home / ".claude" / "CLAUDE.md")
    foreign = outside / "precious.txt"
    tamper(store, "proposals", pid, target_path=str(foreign))
    for ask in (str(foreign), None):
        with pytest.raises(ProposalError, match="refusing the document"):
            Service().skill(ask)


def test_an_agent_folder_that_is_itself_a_link_is_where_the_agent_reads(tmp_path, world):
    """``~/.claude -> <dotfiles>/claude`` (as dotfile managers make): Claude Code reads its
    memory file through the link, so adopt writes it there and rollback restores it; a memory
    file linked out of the linked folder is still refused."""
    store, home, outside = world
    dotfiles = outside / "dotfiles-claude"
    (home / ".claude").rename(dotfiles)
    (home / ".claude").symlink_to(dotfiles, target_is_directory=True)
    memory = home / ".claude" / "CLAUDE.md"
    pid = stage(store, memory, [RULE])
    adopt(store, pid)
    assert RULE in (dotfiles / "CLAUDE.md").read_text()
    rollback(store, pid)
    assert (dotfiles / "CLAUDE.md").read_text() == "# mine\n"
    (dotfiles / "CLAUDE.md").unlink()
    (dotfiles / "CLAUDE.md").symlink_to(outside / "precious.txt")
    pid2 = stage(store, memory, [RULE], night_id=2)
    refused(tmp_path, store, lambda: adopt(store, pid2, force=True), "a symlink leaves")
