"""A whole night end to end: Claude Code + Codex format sessions in a temporary HOME, the
``openai_compatible`` backend against the simulator on loopback, then adopt and rollback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.errors import BackendUnreachable, SkilloptError
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt, rollback
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.night import PERSONA, night_settings, night_world, write_persona
from tests.helpers.store import db_get, db_rows

USER_TEXT = b"# Project rules\n\nWritten by hand \xe2\x80\x94 keep me exactly.\n"


@pytest.fixture
def world(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    return isolated_home, project, write_persona(tmp_path), target


def settings_for(home: Path, project: Path, url: str, target: Path, **extra):
    return night_settings(home, project, target, url, **extra)


def test_a_whole_night_then_adopt_rollback_and_a_cached_rerun(world):
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        settings = settings_for(home, project, sim.url, target)
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        calls_first = sum(sim.stats.by_role.values())
        assert calls_first > 0 and result.cost.calls == calls_first

        # a recurring task was mined: the install intent recurs across Claude Code and Codex
        tasks = store.tasks.all()
        install = [t for t in tasks if "install the dependencies" in t.intent.lower()]
        assert install and len(install[0].sessions) >= 3
        assert {s.split(":")[0] for s in install[0].sessions} == {"claude_code", "codex"}
        assert any(c.kind == "contains" and c.value == "pnpm" for c in install[0].checks)

        # the gate: helpful edit applied, harmful and useless rejected
        edits = {e["text"]: e for e in db_rows(store, "edits", "night_id = ?", [result.night_id])}
        assert edits["Use `pnpm` instead of `npm`."]["status"] == "applied"
        assert edits["Never mention `pnpm`."]["status"] == "rejected"
        assert (
            edits["Never mention `pnpm`."]["val_after"]
            < edits["Never mention `pnpm`."]["val_before"]
        )
        assert edits["Be helpful and precise."]["status"] == "rejected"
        assert result.val_after > result.val_before
        assert result.test_before is not None and result.test_after > result.test_before

        # staged, not written
        assert target.read_bytes() == USER_TEXT
        prop = db_get(store, "proposals", result.proposal_id)
        folder = Path(prop["dir"])
        report = json.loads((folder / "report.json").read_text())
        assert report["scores"]["test_after"] > report["scores"]["test_before"]
        assert {e["status"] for e in report["edits"]} >= {"applied", "rejected"}
        assert "+- Use `pnpm` instead of `npm`." in (folder / "diff.patch").read_text()
        assert (folder / "report.md").read_text().startswith("# skillopt-sleep proposal")

        # the same night again: every call is served from the cache
        again = run_night(store, settings)
        assert sum(sim.stats.by_role.values()) == calls_first
        assert again.cost.calls == 0 and again.cost.cached_calls > 0
        assert again.status == "succeeded" and again.proposal_id == result.proposal_id
        assert "same result as the staged proposal" in again.summary.reason
        assert [p["id"] for p in db_rows(store, "proposals")] == [result.proposal_id]

        # ...but a dead backend still fails the fully cached night loudly
    dead = settings_for(home, project, "http://127.0.0.1:9", target)
    with pytest.raises(BackendUnreachable, match="cannot reach"):
        run_night(store, dead)
    assert db_rows(store, "nights", order_by="id desc", limit=1)[0]["status"] == "failed"
    assert [p["status"] for p in db_rows(store, "proposals")] == ["staged"]

    # adopt changes only the managed block; rollback restores byte for byte
    adopt(store, again.proposal_id)
    written = target.read_bytes()
    assert written.startswith(USER_TEXT)
    assert written[len(USER_TEXT) :].decode() == (
        "\n<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->\n"
        "- Use `pnpm` instead of `npm`.\n<!-- skillopt-sleep:end -->\n"
    )
    rollback(store, str(target))
    assert target.read_bytes() == USER_TEXT


def test_dry_run_makes_no_model_calls_and_stages_nothing(world):
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, settings_for(home, project, sim.url, target), dry_run=True)
        assert result.status == "planned"
        assert sum(sim.stats.by_role.values()) == 0
    assert result.summary.train >= 1 and result.summary.val >= 1
    assert db_rows(store, "proposals") == []


def test_proposal_ids_are_their_own_a_dry_run_takes_no_number(world):
    """A dry run takes neither a night number (its id is negative, shown d1) nor a proposal
    number: the next real night is night 1, its proposal p1."""
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        settings = settings_for(home, project, sim.url, target)
        assert run_night(store, settings, dry_run=True).night_id == -1
        assert run_night(store, settings, dry_run=True).night_id == -2
        real = run_night(store, settings)
    assert real.night_id == 1 and real.status == "succeeded" and real.proposal_id == "p1"
    assert [r["id"] for r in db_rows(store, "proposals")] == ["p1"]
    assert store.proposals.next_id() == "p2" and store.proposals.next_id(after="p7") == "p8"
    # a dry run's own log names it as everywhere else (d1), never by its negative id
    from skillopt_sleep.night.log import read_night_log

    log = read_night_log(-1).splitlines()
    assert log[0].endswith("night d1 started (cli, dry run)") and "night -1" not in "\n".join(log)
    assert log[-1].split(" ", 1)[1].startswith("night d1 planned")


def test_no_backend_configured_opens_no_connection_to_the_default_host(world, monkeypatch):
    """With no [target] / [optimizer] (the defaults: openai_compatible, no model, no base_url)
    the night fails with the reason before any connection: a trap listener on loopback
    standing in for the default public host sees none, even with a key in the environment."""
    from skillopt_sleep.backends import anthropic, openai_compatible

    home, project, _persona, target = world
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    trap.settimeout(0.2)
    url = f"http://127.0.0.1:{trap.getsockname()[1]}"
    monkeypatch.setattr(openai_compatible, "DEFAULT_BASE_URL", url + "/v1")
    monkeypatch.setattr(anthropic, "DEFAULT_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-would-be-sent")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-would-be-sent")
    store = Store(paths.db_path())
    settings = night_settings(home, project, target, url, target={}, optimizer={})
    assert settings.target.base_url is None and not settings.target.model
    try:
        result = run_night(store, settings)
        reason = result.error or (result.summary.reason or "")
        assert result.status == "failed", result
    except SkilloptError as exc:
        reason = str(exc)
    assert "no backend configured" in reason
    accepted = 0
    try:
        while True:
            trap.accept()[0].close()
            accepted += 1
    except OSError:  # the timeout: nobody else is waiting
        pass
    finally:
        trap.close()
    assert accepted == 0
    assert db_rows(store, "proposals") == []


def test_budget_cap_stops_the_night_cleanly(world):
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(
            store, settings_for(home, project, sim.url, target, max_calls_per_night=3)
        )
        assert sum(sim.stats.by_role.values()) == 3
    assert result.status == "no_change" and "cap of 3 model calls" in result.summary.reason
    assert db_rows(store, "proposals") == []
    assert target.read_bytes() == USER_TEXT


def test_budget_cap_after_a_certified_edit_stages_it(world):
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        full = run_night(
            Store(paths.state_dir() / "probe.db"), settings_for(home, project, sim.url, target)
        )
        # stop right after the helpful edit was gated: enough calls for it, too few for the rest
        applied = [
            e
            for e in db_rows(Store(paths.state_dir() / "probe.db"), "edits")
            if e["status"] == "applied"
        ]
        assert full.status == "succeeded" and applied
        sim.reset()
        cap = full.cost.calls - 2
        result = run_night(
            store, settings_for(home, project, sim.url, target, max_calls_per_night=cap)
        )
    assert (
        result.status == "succeeded" and "staging what the gate certified" in result.summary.reason
    )
    assert result.test_before is None and result.test_after is None
    # the count of test tasks stays a count; why they were not scored is said beside it
    assert result.summary.test == 1
    assert result.summary.test_note == "not scored: " + result.summary.stopped
    assert "cap of" in result.summary.test_note
    stored = json.loads(db_get(store, "nights", result.night_id)["summary"])
    assert stored["test"] == 1 and stored["test_note"].startswith("not scored: ")
    staged = (Path(db_get(store, "proposals", result.proposal_id)["dir"]) / "document").read_text()
    assert "- Use `pnpm` instead of `npm`." in staged
    assert target.read_bytes() == USER_TEXT


def night_with_duplicate_rules(home: Path, project: Path, persona: Path, target: Path):
    """A night on a document whose managed block holds one rule twice (so the epoch-end
    consolidation has something to merge); returns (store, result)."""
    block = (
        "\n<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->\n"
        "- Keep commits small.\n- keep  commits small.\n<!-- skillopt-sleep:end -->\n"
    )
    target.write_bytes(USER_TEXT + block.encode())
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, settings_for(home, project, sim.url, target))
        assert sim.stats.by_role["consolidate"] == 1
    assert result.status == "succeeded"
    return store, result


def test_epoch_end_consolidation_is_gated_and_recorded(world):
    home, project, persona, target = world
    store, result = night_with_duplicate_rules(home, project, persona, target)
    merged = [
        e
        for e in db_rows(store, "edits", "night_id = ?", [result.night_id])
        if e["origin"] == "consolidate"
    ]
    assert len(merged) == 1 and merged[0]["status"] == "applied"
    assert merged[0]["rationale"] == "epoch 1 slow update: 3 -> 2 rules"
    staged = (Path(db_get(store, "proposals", result.proposal_id)["dir"]) / "document").read_text()
    assert staged.startswith(USER_TEXT.decode())
    assert staged.count("ommits small.") == 1 and "- Use `pnpm` instead of `npm`." in staged


def test_a_consolidation_that_drops_a_command_is_refused_without_replaying(world):
    """The optimizer's epoch-end merge must keep every concrete command and value; one that
    loses the learned `pnpm` rule is rejected (saying what it drops) before any val replay."""
    home, project, persona, target = world
    persona.write_text(
        persona.read_text().replace("[optimizer]", "[optimizer]\nlossy_consolidate = true")
    )
    store, result = night_with_duplicate_rules(home, project, persona, target)
    [merged] = [
        e
        for e in db_rows(store, "edits", "night_id = ?", [result.night_id])
        if e["origin"] == "consolidate"
    ]
    assert merged["status"] == "rejected"
    assert merged["reason"] == "the merge drops `npm`, `pnpm`"
    phases = {r["phase"] for r in db_rows(store, "rollouts", "night_id = ?", [result.night_id])}
    assert "val e1 consolidate" not in phases
    staged = (Path(db_get(store, "proposals", result.proposal_id)["dir"]) / "document").read_text()
    assert "- Use `pnpm` instead of `npm`." in staged


def test_a_skill_of_another_agent_than_the_replay_target_is_warned_about(world, tmp_path):
    home, project, persona, target = world
    store = Store(paths.db_path())
    settings = load_settings(
        Path("/nonexistent/config.toml"),
        **{
            **demo_settings(home, project, "http://127.0.0.1:9/v1"),
            "document": {"kind": "managed_skill", "agent": "codex"},
            "target": {"name": "claude_code", "executable": "/bin/true"},
        },
    )
    result = run_night(store, settings, dry_run=True, env={"CODEX_HOME": str(tmp_path / "cx")})
    assert result.summary.warning is not None and result.summary.warning.startswith(
        "the document is codex's (skills/skillopt-sleep-learned/SKILL.md in codex's user folder "
        "(a skill, loaded on demand)) but the night replays through claude_code"
    )


def test_with_no_val_split_an_improvement_is_unverified_and_not_staged(tmp_path, isolated_home):
    project = tmp_path / "solo"
    project.mkdir()
    # one corrected task asked once: it trains, and has no later occurrence to validate on
    # (with occurrence splits a task asked three times is trained, validated and tested: see
    # test_a_task_asked_three_times_is_learned_and_certified_on_its_next_occurrence)
    write_conversations(
        isolated_home,
        project,
        [c for c in DEMO_CONVERSATIONS if "install the dependencies" in c[1][0][0].lower()][:1],
    )
    persona = tmp_path / "persona.toml"
    persona.write_text(PERSONA, encoding="utf-8")
    target = project / "CLAUDE.md"
    target.write_bytes(USER_TEXT)
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, settings_for(isolated_home, project, sim.url, target))
    assert result.summary.val == 0 and "cannot certify" in result.summary.unverified
    assert result.summary.not_validated == 1
    assert result.status == "no_change" and result.proposal_id is None
    assert result.summary.reason == "edits improved train only (unverified)"
    statuses = {e["text"]: e["status"] for e in db_rows(store, "edits")}
    # learned from one install request: scoped to that task family
    assert (
        statuses["When installing dependencies or adding packages: use `pnpm` instead of `npm`."]
        == "unverified"
    )
    assert db_rows(store, "proposals") == [] and target.read_bytes() == USER_TEXT


def test_a_task_asked_three_times_is_learned_and_certified_on_its_next_occurrence(
    tmp_path, isolated_home
):
    """The pnpm task, corrected in two sessions of two agents and asked a third time: it
    trains on its first occurrence, the gate certifies on the second, the test is the third."""
    project = tmp_path / "solo"
    project.mkdir()
    write_conversations(
        isolated_home,
        project,
        [c for c in DEMO_CONVERSATIONS if "install the dependencies" in c[1][0][0].lower()],
    )
    persona = tmp_path / "persona.toml"
    persona.write_text(PERSONA, encoding="utf-8")
    target = project / "CLAUDE.md"
    target.write_bytes(USER_TEXT)
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, settings_for(isolated_home, project, sim.url, target))
    s = result.summary
    assert (s.tasks, s.train, s.val, s.test) == (1, 1, 1, 1), s
    assert s.held_out and "next time you asked" in s.held_out
    assert result.status == "succeeded", s
    assert result.val_after > result.val_before and result.test_after > result.test_before
    [task] = store.tasks.all()
    assert [o.split for o in task.occurrences] == ["train", "val", "test"]
    rows = db_rows(store, "rollouts")
    by_split: dict[str, set[str]] = {}
    for r in rows:
        if r["split"]:  # not the collateral gate's probes (everyday requests, split "")
            by_split.setdefault(r["split"], set()).add(r["task_id"])
    # no occurrence in two roles: three views, one per role
    assert (
        all(len(ids) == 1 for ids in by_split.values())
        and len(set().union(*by_split.values())) == 3
    )
    report = (Path(store.proposals.get(result.proposal_id).dir) / "report.md").read_text()
    assert "Held out = the next time you asked" in report


#: The user trial: one corrected task, two recurring ones nothing can score.
TRIAL = [
    (
        "claude_code",
        [
            (
                "install the dependencies",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    ("claude_code", [("build the docs site", "Run `make docs`.", None)]),
    ("codex", [("build the docs site please", "Run `make docs`.", None)]),
    ("claude_code", [("check the lint errors", "Run `npm run lint`.", None)]),
    ("codex", [("check the lint errors please", "Run `npm run lint`.", None)]),
]


def trial_world(tmp_path: Path, home: Path, conversations) -> tuple[Path, Path, Path]:
    project, target = night_world(tmp_path, home, USER_TEXT, conversations, name="trial")
    return project, write_persona(tmp_path), target


def test_unscorable_tasks_take_no_val_or_test_slot(tmp_path, isolated_home):
    project, persona, target = trial_world(tmp_path, isolated_home, TRIAL)
    store = Store(paths.db_path())
    with serve(persona) as sim:
        settings = settings_for(isolated_home, project, sim.url, target)
        result = run_night(store, settings)
        assert sum(sim.stats.by_role.values()) > 0
    s = result.summary
    assert (s.tasks, s.scorable, s.train, s.val, s.test) == (3, 1, 1, 0, 0)
    # the scorable task was trained on (one task is too few to hold out, so unverified)
    assert result.status == "no_change", s
    assert s.reason == "edits improved train only (unverified)"
    assert {t.intent: t.split for t in store.tasks.all()} == {
        "install the dependencies": "train",
        "build the docs site": "",
        "check the lint errors": "",
    }


def test_no_tasks_says_that_the_mined_tasks_are_not_scorable(tmp_path, isolated_home):
    project, persona, target = trial_world(tmp_path, isolated_home, TRIAL[1:])
    store = Store(paths.db_path())
    settings = settings_for(isolated_home, project, "http://127.0.0.1:9/v1", target)
    result = run_night(store, settings)  # ends before any backend is needed
    assert result.status == "no_tasks"
    assert result.summary.reason == (
        "2 tasks mined, none scorable: no correction or rule to check an answer against; "
        'correct the agent when it answers a recurring request wrong (e.g. "no, use pnpm")'
    )
    # with no task mined at all the reason says that instead
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_night(store, settings_for(isolated_home, empty, "http://127.0.0.1:9/v1", target))
    assert result.status == "no_tasks"
    assert result.summary.reason.startswith(f"no task mined: no request in {empty} recurred")


def old_trial_store(tmp_path: Path, home: Path):
    """The database the user trial left: splits over all three tasks, the scorable one in val."""
    project, persona, target = trial_world(tmp_path, home, TRIAL)
    store = Store(paths.db_path())
    run_night(store, settings_for(home, project, "http://127.0.0.1:9/v1", target), dry_run=True)
    old = {
        "install the dependencies": "val",
        "build the docs site": "test",
        "check the lint errors": "train",
    }
    store.tasks.save([t.model_copy(update={"split": old[t.intent]}) for t in store.tasks.all()])
    return store, project, persona, target


def test_a_task_an_older_version_held_out_in_val_trains_now(tmp_path, isolated_home):
    """The user trial left its one scorable task in val, where no night could learn it (the
    night said "no scorable task in train"). Held out is now the next time the user asks:
    asked once, it trains, and the night says it is not yet validated on a recurrence."""
    store, project, _persona, target = old_trial_store(tmp_path, isolated_home)
    result = run_night(
        store,
        settings_for(isolated_home, project, "http://127.0.0.1:9/v1", target),
        dry_run=True,
    )
    s = result.summary
    assert result.status == "planned", s
    assert (s.scorable, s.train, s.val, s.test, s.not_validated) == (1, 1, 0, 0, 1)


def test_a_split_stored_by_an_older_version_for_an_unscorable_task_does_not_block(
    tmp_path, isolated_home
):
    store, project, persona, target = old_trial_store(tmp_path, isolated_home)
    # a correction arrives for the docs task: its old test slot does not hold it out of train
    write_conversations(
        isolated_home,
        project,
        [("claude_code", [("build the docs site now", "Run `make docs`.", "no, use mkdocs")])],
    )
    with serve(persona) as sim:
        result = run_night(store, settings_for(isolated_home, project, sim.url, target))
        assert sum(sim.stats.by_role.values()) > 0
    s = result.summary
    # the docs task, asked three times, trains, validates and tests on its occurrences; the
    # install task, asked once, trains
    assert (s.scorable, s.train, s.val, s.test) == (2, 2, 1, 1)
    assert result.status in ("no_change", "succeeded"), s
    assert {t.intent: t.split for t in store.tasks.all()} == {
        "install the dependencies": "train",
        "build the docs site now": "train",  # the ask the task is named by
        "check the lint errors": "",
    }


def test_a_rule_with_other_code_spans_is_learned_and_a_duplicate_says_what_it_duplicates(world):
    """The user trial: `Use `yarn` instead of `npm`.` was recorded ``unmatched`` ("does not
    apply to the current rules") because `Use `yarn lint` instead of `npm`.` existed; the task
    was never learned. Here the existing rule is `Use `pnpm` instead of `npx`.` (similarity
    96.4 with the rule the night needs)."""
    from skillopt_sleep.delivery.document import Document

    home, project, persona, target = world
    existing = ["Use `pnpm` instead of `npx`.", "Be helpful and precise!"]
    block = (
        "\n<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->\n"
        + "".join(f"- {r}\n" for r in existing)
        + "<!-- skillopt-sleep:end -->\n"
    )
    target.write_bytes(USER_TEXT + block.encode())
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, settings_for(home, project, sim.url, target))
    assert result.status == "succeeded", result.summary
    edits = {e["text"]: e for e in db_rows(store, "edits", "night_id = ?", [result.night_id])}
    assert edits["Use `pnpm` instead of `npm`."]["status"] == "applied"
    assert result.val_after > result.val_before
    # the persona's generic advice rewords an existing rule: unmatched, and the reason says so
    dup = edits["Be helpful and precise."]
    assert dup["status"] == "unmatched"
    assert dup["reason"] == "a near-duplicate of the existing rule: Be helpful and precise!"
    assert result.summary.edits.unmatched >= 1
    staged = Document.parse(
        (Path(db_get(store, "proposals", result.proposal_id)["dir"]) / "document").read_text()
    )
    assert staged.rules == existing + ["Use `pnpm` instead of `npm`."]


def test_edits_rejected_by_an_earlier_night_are_remembered_by_the_next(world):
    """The rejected-edit buffer outlives the night: the next night on the same document, with
    new tasks, shows the optimizer what the gate refused before, so it is not proposed (and
    replayed against val) again. A re-run of the very same night remembers nothing, so its
    prompts, and its cached answers, stay the same."""
    from skillopt_sleep.night.train import remembered_rejections

    home, project, persona, target = world
    store = Store(paths.db_path())
    progress: list[str] = []
    with serve(persona) as sim:
        first = run_night(store, settings_for(home, project, sim.url, target))
        refused = [
            e["text"]
            for e in db_rows(store, "edits", "night_id = ?", [first.night_id])
            if e["status"] == "rejected"
        ]
        assert "Never mention `pnpm`." in refused
        # the same night again: the same inputs, nothing remembered, every call cached
        calls = sum(sim.stats.by_role.values())  # model calls (not the backend checks)
        again = run_night(
            store, settings_for(home, project, sim.url, target), progress=progress.append
        )
        assert again.cost.calls == 0 and sum(sim.stats.by_role.values()) == calls
        assert not any("remembering" in m for m in progress)
        # new sessions: a new recurring, corrected task changes the night's inputs
        write_conversations(
            home,
            project,
            [
                (
                    "claude_code",
                    [("build the docs site", "Run `npm run docs`.", "no, use pnpm instead of npm")],
                ),
                (
                    "codex",
                    [("build the docs site", "Run `npm run docs`.", "use pnpm instead of npm")],
                ),
            ],
        )
        third = run_night(
            store, settings_for(home, project, sim.url, target), progress=progress.append
        )
    assert f"remembering {len(set(refused))} edit(s) rejected by earlier nights" in progress
    assert "add: Never mention `pnpm`." in remembered_rejections(
        store, str(target), "another night"
    )
    # rejected on this document's block: not remembered for another project's block of it
    assert remembered_rejections(store, str(target), "another night", "/elsewhere/api") == []
    later = [e["text"] for e in db_rows(store, "edits", "night_id = ?", [third.night_id])]
    assert "Never mention `pnpm`." not in later  # not proposed again
    assert third.status in ("succeeded", "no_change"), third.summary


def test_a_night_with_other_inputs_stages_its_own_proposal_even_for_the_same_document(world):
    """Only an unchanged re-run points at the staged proposal; a night with other inputs (here
    another batch size) that reaches the same document stages its own, with its own evidence."""
    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        first = run_night(store, settings_for(home, project, sim.url, target))
        rerun = run_night(store, settings_for(home, project, sim.url, target))
        other = run_night(store, settings_for(home, project, sim.url, target, batch_size=1))
    assert rerun.proposal_id == first.proposal_id
    assert rerun.summary.reason == f"same result as the staged proposal {first.proposal_id}"
    assert other.proposal_id not in (None, first.proposal_id), other.summary
    assert db_get(store, "proposals", first.proposal_id)["status"] == "superseded"
    # its report no longer tells anyone to adopt it; the new one still does
    from skillopt_sleep.proposals import report_markdown

    dead = report_markdown(store.proposals.get(first.proposal_id))  # type: ignore[arg-type]
    assert "Adopt with" not in dead
    assert (
        f"This proposal is superseded (superseded by {other.proposal_id}): it can no longer be adopted."
        in dead
    )
    assert f"Adopt with `skillopt-sleep adopt {other.proposal_id}`" in report_markdown(
        store.proposals.get(other.proposal_id)  # type: ignore[arg-type]
    )
    mine = json.loads(db_get(store, "proposals", other.proposal_id)["summary"])
    assert mine["inputs"] == other.summary.inputs != first.summary.inputs


def test_a_night_whose_optimizer_proposes_nothing_says_so(tmp_path, isolated_home):
    """An optimizer that answers ``{"edits": []}`` (here a persona with no edit group) ends
    the night with no change, and the reason says no edit was proposed, not that the gate
    refused one."""
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    silent = PERSONA.replace('order = ["derived", "harmful", "useless"]', "order = []")
    assert silent != PERSONA
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path, silent)) as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    assert result.status == "no_change", result.summary
    assert result.summary.reason == "the optimizer proposed no edit"
    assert db_rows(store, "edits", "night_id = ?", [result.night_id]) == []
