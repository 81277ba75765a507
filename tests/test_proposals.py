"""adopt / reject / rollback on staged proposals (the only writers of live files)."""

import os
import stat
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import (
    BEGIN,
    END,
    Document,
    block_hash,
    read_live,
    sha256_text,
)
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.night.stage import Staging, stage_proposal
from skillopt_sleep.proposals import (
    adopt,
    adopt_group,
    lift_refusal,
    list_proposals,
    reject,
    report_markdown,
    rollback,
)
from skillopt_sleep.results import NightCost, NightSummary, Scores
from skillopt_sleep.store import Store
from tests.helpers.store import db_get, db_rows, ensure_night


def stage(
    store: Store, target: Path, rules: list[str], night_id: int = 1, section: str | None = None
) -> str:
    """Stage ``rules`` as the block of ``section`` (None: the global block) of ``target``;
    with a section, as a night over a shared memory file records it (with its block's hash)."""
    live = read_live(target)
    new = Document.parse(live, new_skill=live is None, section=section).render(rules)
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
            summary=NightSummary(
                section=section,
                block_hash=block_hash(live, section) if section is not None else None,
            ),
            scores=Scores(val_before=0.0, val_after=1.0, test_before=0.0, test_after=1.0),
        ),
    )


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "s.db")


@pytest.fixture(autouse=True)
def agent_locations(tmp_path, monkeypatch):
    """The files these tests adopt are locations adopt may write: the user's home is
    ``tmp_path/h`` (Claude Code's skills under ``h/.claude``), Codex's home ``tmp_path``
    (``tmp_path/AGENTS.md``), and the configured project ``tmp_path/proj``."""
    (tmp_path / "h").mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    monkeypatch.setenv("SKILLOPT_SLEEP_PROJECT", str(tmp_path / "proj"))


ORIGINAL = b"# My CLAUDE.md\r\n\r\nHand-written rule, keep me.\r\n\xe2\x9c\x93 unicode\r\n"


def test_adopt_changes_only_the_managed_block_and_rollback_restores_bytes(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    target.chmod(0o640)
    pid = stage(store, target, ["Use `pnpm` instead of `npm`."])
    assert target.read_bytes() == ORIGINAL  # staging never writes the live file
    a = adopt(store, pid)
    new = target.read_bytes()
    assert new.startswith(ORIGINAL) and b"- Use `pnpm` instead of `npm`." in new
    assert target.stat().st_mode & 0o777 == 0o640
    assert Path(a.backup_path).read_bytes() == ORIGINAL
    assert db_get(store, "proposals", pid)["status"] == "adopted"
    rollback(store, str(target))
    assert target.read_bytes() == ORIGINAL
    assert db_get(store, "proposals", pid)["status"] == "rolled_back"
    with pytest.raises(ProposalError, match="nothing to roll back"):
        rollback(store, str(target))


def test_a_rolled_back_proposal_can_be_adopted_again(store, tmp_path):
    """Rollback is an undo, not a no: ``adopt`` of the rolled-back proposal writes it again
    (and rollback undoes that too); a rejected proposal stays refused."""
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    pid = stage(store, target, ["Use `pnpm` instead of `npm`."])
    adopt(store, pid)
    adopted = target.read_bytes()
    rollback(store, str(target))
    assert target.read_bytes() == ORIGINAL
    assert "can no longer be adopted" not in report_markdown(store.proposals.get(pid))  # type: ignore[arg-type]
    again = adopt(store, pid)
    assert target.read_bytes() == adopted and again.proposal_id == pid
    row = db_get(store, "proposals", pid)
    assert row["status"] == "adopted" and not row["reason"]  # no stale "rolled back by …"
    assert len(db_rows(store, "adoptions")) == 2
    rollback(store, str(target))
    assert target.read_bytes() == ORIGINAL
    other = stage(store, target, ["Another rule."], night_id=2)
    assert other == "p2"  # numbered after p1, not after the night
    reject(store, other, "no")
    with pytest.raises(ProposalError, match=f"proposal {other} is rejected, not staged"):
        adopt(store, other)
    assert target.read_bytes() == ORIGINAL


def test_adopt_creates_a_new_skill_and_rollback_removes_it(store, tmp_path):
    target = tmp_path / "h" / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    pid = stage(store, target, ["Rule."])
    adopt(store, pid)
    assert target.read_text().startswith("---\nname: skillopt-sleep-learned\n")
    rollback(store)
    assert not target.exists()


def test_rollback_of_a_created_file_the_user_removed_says_it_was_already_gone(store, tmp_path):
    target = tmp_path / "h" / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    adopt(store, stage(store, target, ["Rule."]))
    target.unlink()  # the user removed the file adopt created: nothing is left to undo
    done = rollback(store)
    assert done.already_gone and not done.restored_previous
    assert done.outcome()[0].endswith("was already gone (adopt had created it)")
    assert not target.parent.exists()  # the folders adopt created are removed all the same


def test_rollback_of_a_removed_file_and_of_a_lost_backup_say_what_to_do(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"v1\n")
    a = adopt(store, stage(store, target, ["Rule."]))
    target.unlink()
    with pytest.raises(ProposalError, match="was removed since it was adopted; `rollback --force`"):
        rollback(store)
    Path(a.backup_path).unlink()
    with pytest.raises(ProposalError, match=r"cannot be restored; nothing was written \(put the"):
        rollback(store, force=True)
    assert not target.exists()


def test_adopt_refuses_a_changed_live_file(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"v1\n")
    pid = stage(store, target, ["Rule."])
    target.write_bytes(b"v2 edited by the user\n")
    with pytest.raises(ProposalError, match=r"changed since proposal p1 was made.*`adopt --force`"):
        adopt(store, pid)
    assert target.read_bytes() == b"v2 edited by the user\n"
    adopt(store, pid, force=True)  # only the block is applied onto the current file
    assert target.read_bytes().startswith(b"v2 edited by the user\n")
    assert b"- Rule." in target.read_bytes()


def test_rollback_refuses_when_changed_after_adoption(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"v1\n")
    adopt(store, stage(store, target, ["Rule."]))
    target.write_bytes(target.read_bytes() + b"user addition\n")
    with pytest.raises(ProposalError, match="changed since it was adopted"):
        rollback(store)
    rollback(store, force=True)
    assert target.read_bytes() == b"v1\n"


def test_stale_base_hash_unknown_id_and_reject(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"x\n")
    pid = stage(store, target, ["Rule."])
    with pytest.raises(ProposalError, match="base_hash does not match"):
        adopt(store, pid, base_hash="0" * 64)
    with pytest.raises(ProposalError, match="no proposal 'p999'"):
        adopt(store, "p999")
    reject(store, pid, "not now")
    assert db_get(store, "proposals", pid)["status"] == "rejected"
    with pytest.raises(ProposalError, match="is rejected, not staged"):
        adopt(store, pid)
    assert target.read_bytes() == b"x\n"


def test_newer_proposal_supersedes_older(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    first = stage(store, target, ["A."], night_id=1)
    second = stage(store, target, ["B."], night_id=2)
    assert [p["id"] for p in list_proposals(store, "staged")] == [second]
    assert db_get(store, "proposals", first)["status"] == "superseded"


def test_a_proposal_supersedes_only_the_same_block_of_a_shared_file(store, tmp_path):
    """A memory file every project shares holds a block per project: p(web) is not
    superseded by p(api); a newer proposal for web's block supersedes p(web) only."""
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"# mine\n")
    web = stage(store, target, ["Use `pnpm` instead of `npm`."], night_id=1, section="/src/web")
    api = stage(store, target, ["Use `yarn` instead of `npm`."], night_id=2, section="/src/api")
    glob = stage(store, target, ["Answer briefly."], night_id=3)
    assert {p["id"] for p in list_proposals(store, "staged")} == {web, api, glob}
    newer = stage(store, target, ["Use `pnpm`, never `npm`."], night_id=4, section="/src/web")
    assert db_get(store, "proposals", web)["status"] == "superseded"
    assert db_get(store, "proposals", web)["reason"] == f"superseded by {newer}"
    assert {p["id"] for p in list_proposals(store, "staged")} == {api, glob, newer}


def test_a_lifted_refusal_is_superseded_only_by_its_own_blocks_newer_proposal(store, tmp_path):
    """A memory file every project shares: lifting the refusal of p(web) while p(api) is
    staged stages p(web) again (another project's block replaces nothing of it); an older
    staged proposal for web's own block is the one superseded."""
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"# mine\n")
    old_web = stage(store, target, ["Use `npm ci`."], night_id=1, section="/src/web")
    web = stage(store, target, ["Use `pnpm` instead of `npm`."], night_id=2, section="/src/web")
    reject(store, web, "not now")
    old_web_row = db_get(store, "proposals", old_web)
    store.proposals.set_status(old_web, "staged", old_web_row["reason"])  # staged again meanwhile
    api = stage(store, target, ["Use `yarn` instead of `npm`."], night_id=3, section="/src/api")
    lifted = lift_refusal(store, web)
    assert lifted.status == "staged", lifted
    assert db_get(store, "proposals", api)["status"] == "staged"
    assert db_get(store, "proposals", old_web)["status"] == "superseded"
    assert db_get(store, "proposals", old_web)["reason"] == f"superseded by {web}"


def test_adopt_all_agents_takes_the_copy_an_earlier_night_staged_and_this_one_kept(store, tmp_path):
    """Night 2 re-stages Claude Code's rules as p2 and finds Codex's copy unchanged (``same``
    as p1-codex, which night 1 staged): ``adopt p2 --all-agents`` adopts p1-codex too."""
    from skillopt_sleep.results import AgentCopy

    claude = tmp_path / "h" / ".claude" / "CLAUDE.md"
    codex = tmp_path / "AGENTS.md"

    def staged(night: int, target: Path, rules: list[str], summary: NightSummary, **kw) -> str:
        ensure_night(store, night)
        live = read_live(target)
        return stage_proposal(
            store,
            Staging(
                night_id=night,
                target_path=target,
                base_text=live,
                new_text=Document.parse(live).render(rules),
                base_hash=sha256_text(live),
                edits=[],
                tasks=[],
                cost=NightCost(calls=1),
                summary=summary,
                scores=Scores(val_before=0.0, val_after=1.0, test_before=0.0, test_after=1.0),
                **kw,
            ),
        )

    rules = ["Use `pnpm` instead of `npm`."]
    p1 = staged(1, claude, rules, NightSummary(), agent="claude_code")
    copy = staged(
        1,
        codex,
        rules,
        NightSummary(copy_for="codex", copy_of=p1),
        proposal_id=f"{p1}-codex",
        agent="codex",
    )
    p2 = staged(
        2,
        claude,
        [*rules, "Run `pnpm test`."],
        NightSummary(copies=[AgentCopy(agent="codex", status="same", proposal_id=copy)]),
        agent="claude_code",
    )
    assert db_get(store, "proposals", p1)["status"] == "superseded"
    assert [a.proposal_id for a in adopt_group(store, p2)] == [p2, copy]
    assert "Run `pnpm test`." in claude.read_text() and rules[0] in codex.read_text()


def test_adopting_two_projects_blocks_keeps_both_and_the_users_text(store, tmp_path):
    """Two proposals staged from the same base for two projects' blocks: adopting one, then
    the other (no --force: only another block changed) leaves both blocks, byte for byte as
    staged, and the user's own text; a change to the user's text or to the proposal's own
    block is still a stale base."""
    target = tmp_path / "AGENTS.md"
    target.write_bytes(ORIGINAL)
    web = stage(store, target, ["Use `pnpm` instead of `npm`."], night_id=1, section="/src/web")
    api = stage(store, target, ["Use `yarn` instead of `npm`."], night_id=2, section="/src/api")

    def block(text: str, section: str) -> str:
        begin = text.index(f"project={section} ")
        begin = text.rindex("<!--", 0, begin)
        return text[begin : text.index(END, begin) + len(END)]

    staged = {
        pid: (Path(db_get(store, "proposals", pid)["dir"]) / "document").read_bytes().decode()
        for pid in (web, api)
    }
    adopt(store, web)
    adopt_group(store, api)  # as `adopt --all-agents` does (its check first, then adopt)
    text = target.read_bytes().decode("utf-8")
    assert target.read_bytes().startswith(ORIGINAL)
    assert block(text, "/src/web") == block(staged[web], "/src/web")
    assert block(text, "/src/api") == block(staged[api], "/src/api")
    assert Document.parse(text, section="/src/web").rules == ["Use `pnpm` instead of `npm`."]
    assert Document.parse(text, section="/src/api").rules == ["Use `yarn` instead of `npm`."]
    assert Document.parse(text).rules == []  # no rule landed in the block every project reads

    # the user edits their own text: another block's proposal is stale again
    other = stage(store, target, ["Use `bun`."], night_id=3, section="/src/cli")
    target.write_bytes(target.read_bytes().replace(b"keep me", b"keep me too"))
    with pytest.raises(ProposalError, match="changed since proposal"):
        adopt(store, other)
    # the proposal's own block changed since its base: stale too
    target.write_bytes(ORIGINAL)
    again = stage(store, target, ["Use `pnpm` instead of `npm`."], night_id=4, section="/src/web")
    adopt(store, stage(store, target, ["Use `deno`."], night_id=5, section="/src/api"))
    assert db_get(store, "proposals", again)["status"] == "staged"
    adopt(store, again)  # api's block changed, web's did not: applied
    assert Document.parse(target.read_text("utf-8"), section="/src/api").rules == ["Use `deno`."]
    web_next = stage(store, target, ["Use `pnpm` always."], night_id=6, section="/src/web")
    edited = target.read_bytes().replace(b"- Use `pnpm` instead of `npm`.", b"- Use npm.")
    target.write_bytes(edited)
    with pytest.raises(ProposalError, match="changed since proposal"):
        adopt(store, web_next)
    assert target.read_bytes() == edited


def test_adopt_writes_through_a_symlink_and_rollback_keeps_it(store, tmp_path):
    real = tmp_path / "proj" / "CLAUDE.md"  # a link between two of the project's memory files
    real.parent.mkdir()
    real.write_bytes(b"mine\n")
    link = tmp_path / "proj" / "AGENTS.md"
    link.symlink_to(real)
    adopt(store, stage(store, link, ["Rule."]))
    assert link.is_symlink() and b"- Rule." in real.read_bytes()
    rollback(store)
    assert link.is_symlink() and real.read_bytes() == b"mine\n"


def test_forced_rollback_keeps_the_users_later_edit(store, tmp_path):
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"v1\n")
    adopt(store, stage(store, target, ["Rule."]))
    edited = target.read_bytes() + b"my later note\n"
    target.write_bytes(edited)
    a = rollback(store, force=True)
    assert target.read_bytes() == b"v1\n"
    assert Path(a.kept_copy).read_bytes() == edited


def test_unwritable_target_is_a_proposal_error_and_records_nothing(store, tmp_path):
    parent = tmp_path / "proj" / ".claude"
    parent.parent.mkdir()
    target = parent / "CLAUDE.md"
    pid = stage(store, target, ["Rule."])
    parent.write_text("now a file, not a folder")
    with pytest.raises(ProposalError, match=r"cannot (read|write)"):
        adopt(store, pid)
    assert db_rows(store, "adoptions") == []
    assert db_get(store, "proposals", pid)["status"] == "staged"


# ---------------------------------------------------------------- a live file that is not UTF-8
LATIN1 = b"# notes\n\xff\xfe latin1 caf\xe9\n"


def test_adopt_refuses_a_live_file_that_is_not_utf8_and_writes_nothing(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"# notes\n")
    pid = stage(store, target, ["Rule."])
    target.write_bytes(LATIN1)  # e.g. re-saved as Latin-1 by an editor after the night
    for force in (False, True):
        with pytest.raises(
            ProposalError,
            match=r"CLAUDE.md is not UTF-8 text \(byte 0xff at offset 8\);"
            r".*nothing was changed",
        ):
            adopt(store, pid, force=force)
    assert target.read_bytes() == LATIN1
    assert (
        db_rows(store, "adoptions") == [] and db_get(store, "proposals", pid)["status"] == "staged"
    )
    assert not paths.backups_dir().exists()
    assert not (Path(db_get(store, "proposals", pid)["dir"]) / "adoption.json").exists()


def test_rollback_of_a_file_made_non_utf8_after_adopt(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"v1\n")
    adopt(store, stage(store, target, ["Rule."]))
    target.write_bytes(LATIN1)
    with pytest.raises(ProposalError, match="changed since it was adopted"):
        rollback(store)
    assert target.read_bytes() == LATIN1
    a = rollback(store, force=True)
    assert target.read_bytes() == b"v1\n"
    assert Path(a.kept_copy).read_bytes() == LATIN1  # the user's bytes, kept exactly


# ---------------------------------------------------------------- modes
@pytest.fixture
def umask():
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask: int) -> None:
        os.umask(mask)

    yield set_
    os.umask(old)


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_a_file_adopt_creates_gets_the_umask_default_mode(store, tmp_path, umask, mask):
    umask(mask)
    target = tmp_path / "proj" / "AGENTS.md"
    target.parent.mkdir()
    adopt(store, stage(store, target, ["Rule."]))
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    # a copy of the user's file in the backups folder stays private
    target.write_bytes(target.read_bytes() + b"mine\n")
    kept = Path(rollback(store, force=True).kept_copy)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_an_existing_file_keeps_its_own_mode_whatever_the_umask(store, tmp_path, umask):
    umask(0o077)
    target = tmp_path / "AGENTS.md"
    target.write_bytes(b"v1\n")
    target.chmod(0o664)
    adopt(store, stage(store, target, ["Rule."]))
    assert stat.S_IMODE(target.stat().st_mode) == 0o664
    rollback(store)
    assert stat.S_IMODE(target.stat().st_mode) == 0o664 and target.read_bytes() == b"v1\n"


# ---------------------------------------------------------------- folders adopt creates
def skill_path(home: Path) -> Path:
    return home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"


def test_rollback_removes_every_folder_adopt_created(store, tmp_path):
    home = tmp_path / "h"
    target = skill_path(home)
    adopt(store, stage(store, target, ["Rule."]))
    assert target.is_file()
    a = rollback(store)
    assert not (home / ".claude").exists() and home.is_dir()
    assert a.removed_dirs == [
        str(target.parent),
        str(target.parent.parent),
        str(home / ".claude"),
    ]


def test_rollback_keeps_folders_that_existed_before_adopt_even_if_empty(store, tmp_path):
    home = tmp_path / "h"
    (home / ".claude" / "skills").mkdir(parents=True)  # there before, empty
    target = skill_path(home)
    adopt(store, stage(store, target, ["Rule."]))
    rollback(store)
    assert not target.parent.exists()
    assert (home / ".claude" / "skills").is_dir()


def test_rollback_keeps_a_created_folder_the_user_put_something_in(store, tmp_path):
    home = tmp_path / "h"
    target = skill_path(home)
    adopt(store, stage(store, target, ["Rule."]))
    other = home / ".claude" / "skills" / "my-own-skill" / "SKILL.md"
    other.parent.mkdir()
    other.write_text("mine\n")
    rollback(store)
    assert not target.parent.exists()
    assert other.read_text() == "mine\n"


def test_rollback_of_an_adoption_that_replaced_a_file_removes_no_folder(store, tmp_path):
    target = skill_path(tmp_path / "h")
    target.parent.mkdir(parents=True)
    target.write_bytes(b"---\nname: skillopt-sleep-learned\n---\n")
    adopt(store, stage(store, target, ["Rule."]))
    target.unlink()  # the user deleted it; a forced rollback restores it into its folder
    rollback(store, force=True)
    assert target.read_bytes() == b"---\nname: skillopt-sleep-learned\n---\n"


# ---------------------------------------------------------------- forced adopt, line endings
def test_forced_adopt_onto_a_crlf_file_whose_last_line_ends_in_lf(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"v1\r\n")
    pid = stage(store, target, ["Use `pnpm` instead of `npm`."])
    edited = b"# Notes\r\n\r\nKeep me.  \r\nlast line from another editor\n"
    target.write_bytes(edited)
    adopt(store, pid, force=True)
    assert target.read_bytes() == edited + (
        "\r\n" + BEGIN + "\r\n- Use `pnpm` instead of `npm`.\r\n" + END + "\r\n"
    ).encode("utf-8")


def test_a_process_killed_right_after_the_live_write_leaves_an_adoption_rollback_knows(
    store, tmp_path
):
    """`adopt` records the adoption before it writes the live file: killed (os._exit, like
    kill -9) right after the write, the change is known, so status and rollback are right."""
    import subprocess
    import sys
    import textwrap

    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    pid = stage(store, target, ["Use `pnpm` instead of `npm`."])
    db = tmp_path / "s.db"
    code = textwrap.dedent(f"""
        import os
        from skillopt_sleep.proposals import adoption as proposals
        from skillopt_sleep.store import Store
        real = proposals._write
        def write_then_die(path, data, *a, **k):
            real(path, data, *a, **k)
            if str(path) == {str(target)!r}:
                os._exit(9)
        proposals._write = write_then_die
        proposals.adopt(Store({str(db)!r}), {pid!r})
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 9, res.stderr
    assert b"- Use `pnpm` instead of `npm`." in target.read_bytes()  # the write happened
    fresh = Store(db)
    assert db_get(fresh, "proposals", pid)["status"] == "adopted"
    assert [a["proposal_id"] for a in db_rows(fresh, "adoptions")] == [pid]
    rollback(fresh, str(target))
    assert target.read_bytes() == ORIGINAL


def test_a_failed_live_write_leaves_no_adoption(store, tmp_path, monkeypatch):
    from skillopt_sleep.proposals import adoption as proposals

    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    pid = stage(store, target, ["Rule."])
    real = proposals._write

    def fail_on_target(path, data, *a, **k):
        if Path(path) == target:
            raise OSError(28, "No space left on device")
        return real(path, data, *a, **k)

    monkeypatch.setattr(proposals, "_write", fail_on_target)
    with pytest.raises(OSError):
        adopt(store, pid)
    assert target.read_bytes() == ORIGINAL
    assert (
        db_rows(store, "adoptions") == [] and db_get(store, "proposals", pid)["status"] == "staged"
    )


def test_adopt_removes_temp_files_a_killed_write_left_beside_the_target(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    stale = target.parent / ".CLAUDE.md.z59ikj5p.tmp"  # tempfile's own naming
    stale.write_bytes(b"half a write")
    mine = target.parent / ".CLAUDE.md.my-notes.tmp"  # not ours: kept
    mine.write_bytes(b"keep")
    adopt(store, stage(store, target, ["Rule."]))
    assert not stale.exists() and mine.read_bytes() == b"keep"
    assert sorted(p.name for p in target.parent.iterdir()) == [
        ".CLAUDE.md.my-notes.tmp",
        "CLAUDE.md",
    ]


def test_a_proposal_folder_left_by_an_earlier_database_is_kept_aside(store, tmp_path):
    """The database was deleted or reset: night ids start again, and p1's folder from before
    must not be overwritten by the new p1."""
    old = paths.proposals_dir() / "p1"
    old.mkdir(parents=True)
    (old / "report.md").write_text("the first night's evidence")
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    assert stage(store, target, ["Rule."], night_id=1) == "p1"
    [kept] = [p for p in paths.proposals_dir().iterdir() if p.name.startswith("p1.orphan-")]
    assert (kept / "report.md").read_text() == "the first night's evidence"
    assert (paths.proposals_dir() / "p1" / "report.md").read_text() != "the first night's evidence"


def test_rollback_by_id_undoes_that_adoption_only_when_nothing_was_adopted_on_top(store, tmp_path):
    """``rollback p1`` undoes p1's own adoption, not whatever was adopted last on its file:
    with p2 adopted on top of it, p1 is refused (naming p2) and nothing is written."""
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    first = stage(store, target, ["Use `pnpm` instead of `npm`."])
    adopt(store, first)
    with_first = target.read_bytes()
    second = stage(store, target, ["Use `pnpm` instead of `npm`.", "Run `pnpm test`."], 2)
    adopt(store, second)
    with_both = target.read_bytes()
    with pytest.raises(ProposalError, match=f"adopted again since {first} .proposal {second}"):
        rollback(store, first)
    assert target.read_bytes() == with_both
    assert db_get(store, "proposals", first)["status"] == "adopted"
    assert rollback(store, second).proposal_id == second
    assert target.read_bytes() == with_first
    assert rollback(store, first).proposal_id == first
    assert target.read_bytes() == ORIGINAL
    assert [db_get(store, "proposals", p)["status"] for p in (first, second)] == [
        "rolled_back",
        "rolled_back",
    ]
    with pytest.raises(ProposalError, match=f"proposal {first} is rolled_back, not adopted"):
        rollback(store, first)
    with pytest.raises(ProposalError, match="no proposal 'p7'"):
        rollback(store, "p7")


def test_a_lifted_refusal_stages_the_proposal_again_or_marks_it_superseded(store, tmp_path):
    target = tmp_path / "proj" / "CLAUDE.md"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    first = stage(store, target, ["Use `pnpm` instead of `npm`."])
    with pytest.raises(ProposalError, match=f"proposal {first} is staged: there is no refusal"):
        lift_refusal(store, first)
    reject(store, first, "not now")
    assert store.proposals.refused(str(target), db_get(store, "proposals", first)["new_hash"])
    lifted = lift_refusal(store, first)
    assert (lifted.status, lifted.was) == ("staged", "rejected")
    row = db_get(store, "proposals", first)
    assert (
        row["status"] == "staged" and store.proposals.refused(str(target), row["new_hash"]) is None
    )
    adopt(store, first)
    rollback(store, first)
    assert lift_refusal(store, first).was == "rolled_back"
    # a newer proposal for the same file is staged meanwhile: the lifted one is superseded
    reject(store, first)
    second = stage(store, target, ["Run `pnpm test`."], 2)
    lifted = lift_refusal(store, first)
    assert lifted.status == "superseded"
    assert db_get(store, "proposals", first)["reason"] == f"refusal lifted; superseded by {second}"
    assert db_get(store, "proposals", second)["status"] == "staged"
    assert target.read_bytes() == ORIGINAL
