"""No proposal comes back after the user said no: a proposal the user rejected or rolled back
is never staged again with the same document, its edits join the rejected-edit memory with the
user's reason, and the next night says so (real nights against the simulator on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt, reject, rollback
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import skillopt_in_process as skillopt
from tests.helpers.night import PERSONA, night_settings, night_world, write_persona
from tests.helpers.store import db_rows

USER_TEXT = "# Project rules\n\nWritten by hand.\n"
RULE = "Use `pnpm` instead of `npm`."


def test_a_rejected_proposal_is_not_staged_again_and_its_edit_is_remembered(
    tmp_path, isolated_home
):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    persona = write_persona(tmp_path)
    store = Store(paths.db_path())
    with serve(persona, full_log=True) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        first = run_night(store, settings)
        assert first.status == "succeeded" and first.proposal_id
        staged = (paths.proposals_dir() / first.proposal_id / "document").read_text()
        assert RULE in staged
        reject(store, first.proposal_id, "we are moving to yarn")

        sim.stats.reset()
        again = run_night(store, settings)
        reflects = _reflect_materials([r.get("prompt_full", "") for r in sim.stats.requests])
    assert again.status == "no_change" and again.proposal_id is None
    assert [p["id"] for p in db_rows(store, "proposals")] == [first.proposal_id]
    assert again.summary.user_refused == 1
    assert again.summary.reason and f"not tried again ({first.proposal_id})" in (
        again.summary.reason
    )
    # the refused edit was sent to the optimizer with the user's reason, and never replayed
    assert reflects and all(
        {"edit": f"add: {RULE}", "reason": "we are moving to yarn", "proposal": first.proposal_id}
        in m["user_refused_edits"]
        for m in reflects
    )
    tried = [e for e in db_rows(store, "edits") if e["night_id"] == again.night_id]
    assert RULE not in [e["text"] for e in tried if e["status"] == "applied"]
    assert target.read_text() == USER_TEXT  # nothing live changed


def test_an_optimizer_that_reproposes_a_refused_edit_is_refused_without_a_replay(
    tmp_path, isolated_home
):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    persona = write_persona(
        tmp_path,
        PERSONA.replace("[optimizer]\n", "[optimizer]\nignore_user_refusals = true\n"),
    )
    store = Store(paths.db_path())
    with serve(persona) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        first = run_night(store, settings)
        assert first.status == "succeeded" and first.proposal_id
        adopt(store, first.proposal_id)
        rollback(store, str(target))  # the user tried it and took it back

        again = run_night(store, settings)
    assert again.status == "no_change" and again.proposal_id is None
    assert len(db_rows(store, "proposals")) == 1
    refused = [
        e for e in db_rows(store, "edits") if e["night_id"] == again.night_id and e["text"] == RULE
    ]
    assert refused and all(e["status"] == "rejected" for e in refused)
    assert all(
        e["reason"] == f"the user refused it in {first.proposal_id}: rolled back by the user"
        and e["val_after"] is None  # refused before any val replay
        for e in refused
    )
    assert target.read_text() == USER_TEXT


def test_the_same_document_as_a_refused_proposal_is_never_staged(
    tmp_path, isolated_home, monkeypatch
):
    """The last line of defence: whatever path leads a night back to a document the user
    refused (here: the edit memory is unavailable, as for an adoption recorded by an older
    version), it is not staged, and the night says which proposal it was."""
    import skillopt_sleep.night.block as night_block

    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    persona = write_persona(tmp_path)
    store = Store(paths.db_path())
    with serve(persona) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        first = run_night(store, settings)
        assert first.status == "succeeded" and first.proposal_id
        reject(store, first.proposal_id, "not now")
        monkeypatch.setattr(night_block, "user_refusals", lambda *_args: [])
        again = run_night(store, settings)
    assert again.status == "no_change" and again.proposal_id is None
    assert again.summary.reason == (
        f"the same document as proposal {first.proposal_id}, which the user rejected "
        "(not now): not staged again"
    )
    assert len(db_rows(store, "proposals")) == 1


def test_a_refusal_holds_for_the_block_it_was_made_on_not_another_projects(tmp_path, isolated_home):
    """Claude Code's user memory file holds a block per project: the user's no to a rule in
    webapp's block keeps it out of webapp's, not out of api's, where it is staged (and
    lifting the refusal with ``reject --undo`` lets webapp's nights propose it again)."""
    home = isolated_home
    webapp, api = (tmp_path / "webapp").resolve(), (tmp_path / "api").resolve()
    for project in (webapp, api):
        project.mkdir()
        write_conversations(home, project, DEMO_CONVERSATIONS)
    memory = home / ".claude" / "CLAUDE.md"

    def settings(project, url):
        return load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(home, project, url),
                "document": {"kind": "memory", "agent": "claude_code"},
                "deliver": {"agents": "document"},
            },
        )

    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        first = run_night(store, settings(webapp, sim.url))
        assert first.status == "succeeded" and first.proposal_id
        assert first.summary.section == str(webapp)
        reject(store, first.proposal_id, "not in this project")
        again = run_night(store, settings(webapp, sim.url))  # the no holds in webapp's block
        other = run_night(store, settings(api, sim.url))
        lifted = skillopt("reject", first.proposal_id, "--undo")
        assert lifted.returncode == 0, lifted.stderr
        assert f"lifted the refusal of {first.proposal_id}" in lifted.stdout
        after = run_night(store, settings(webapp, sim.url))
    assert again.status == "no_change" and again.summary.user_refused == 1
    assert other.status == "succeeded" and other.proposal_id
    assert other.summary.section == str(api) and other.summary.user_refused is None
    staged = (paths.proposals_dir() / other.proposal_id / "document").read_text()
    assert f"project={api}" in staged and RULE in staged and f"project={webapp}" not in staged
    # the refusal lifted: staged again (api's proposal staged meanwhile is for another block
    # of the file, so it supersedes nothing of webapp's); webapp's next night proposes the
    # rule again
    assert "now staged" in lifted.stdout
    assert after.status == "succeeded" and after.proposal_id
    assert after.summary.user_refused is None
    staged = (paths.proposals_dir() / after.proposal_id / "document").read_text()
    assert f"project={webapp}" in staged and RULE in staged
    assert not memory.exists()  # nothing live changed


def _reflect_materials(prompts: list[str]) -> list[dict]:
    """The JSON material of every reflect prompt among ``prompts``."""
    from skillopt_sleep.night.prompts import REFLECT_MARKER

    out = []
    for prompt in prompts:
        if prompt.startswith(REFLECT_MARKER):
            block = prompt.split("```json\n", 1)[1].split("\n```", 1)[0]
            out.append(json.loads(block))
    return out
