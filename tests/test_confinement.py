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

from skillopt_sleep import paths
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.install import InstallError, install, state_folder, uninstall
from skillopt_sleep.night.document import Document, read_live, sha256_text
from skillopt_sleep.night.stage import stage_proposal
from skillopt_sleep.proposals import adopt, adopt_group, rollback
from skillopt_sleep.results import AgentCopy, NightCost, NightSummary
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
        night_id=night_id,
        target_path=target,
        base_text=live,
        new_text=new,
        base_hash=sha256_text(live),
        edits=[],
        tasks=[],
        cost=NightCost(calls=1),
        summary=kw.pop("summary", NightSummary()),
        val_before=0.0,
        val_after=1.0,
        test_before=0.0,
        test_after=1.0,
        **kw,
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
    report_path.write_text(json.dumps(report))
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
