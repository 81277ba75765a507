"""Replays with the occurrence's context (issue 12, item 5).

Each occurrence keeps a bounded, redacted capsule of what its agent saw before answering (the
files it read, the command outputs); exec backends replay in a throw-away folder holding
those files with the outputs before the prompt, HTTP backends get both as context; a task
whose context cannot be rebuilt says so and is scored only on what does not need it.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import context_block, workspace_files
from skillopt_sleep.config import BackendConfig, Settings
from skillopt_sleep.mining.judges import context_state, scored_checks
from skillopt_sleep.mining.mine import CAPSULE_CHARS, _needs_context, mine
from skillopt_sleep.mining.split import views
from skillopt_sleep.models import (
    CapsuleItem,
    Check,
    CompletionRequest,
    ContextCapsule,
    HarvestedMessage,
    HarvestedSession,
    Task,
)
from skillopt_sleep.night.replay import Cost, Meter, Replayer
from skillopt_sleep.night.stage import render_markdown
from skillopt_sleep.results import ProposalReport, TaskDelta
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from tests.helpers.clis import require_cli
from tests.helpers.commit import DIFF, OTHER_DIFF, PROMPT, SOURCE, write_commit_session
from tests.helpers.sources import (
    cc_assistant,
    cc_user,
    cx,
    cx_answer_item,
    cx_meta,
    cx_output,
    cx_turn,
    cx_user_item,
    text,
    tool_result,
    write,
)

NOW = dt.datetime(2026, 1, 6, 12, 0, tzinfo=dt.UTC)
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PERSONA = persona_from_dict(
    {
        "name": "commit-writer",
        "default_answer": "Sure: {prompt}",
        "answers": [
            {"match": "commit message", "text": "Update {changed_file}"},
            {
                "match": "number the source",
                "text": "Numbered above.",
                "tool": "Bash",
                "tool_input": {"command": "cat -n fetch_client.py"},
            },
        ],
    }
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "t.db")
    yield s
    s.close()


def mined(store: Store, tmp_path: Path, *, tools: bool = True) -> Task:
    sid = "c0ffee00-0000-4000-8000-00000000000" + ("1" if tools else "2")
    path = write_commit_session(tmp_path / "projects", sid, NOW, tools=tools)
    harvest_file(store, "claude_code", path)
    (task,) = mine(store, Settings(), now=NOW).tasks
    return task


def replayer(backend_config: BackendConfig, store: Store) -> Replayer:
    meter = Meter(
        get_backend(backend_config),
        store,
        Cost(),
        max_calls=10,
        max_tokens=10**9,
        role="target",
    )
    return Replayer(meter, None, metric="hard")


# ------------------------------------------------------------------ the capsule
def test_an_occurrence_keeps_what_its_agent_saw_before_answering(
    store: Store, tmp_path: Path
) -> None:
    task = mined(store, tmp_path)
    assert task.context is not None
    diff, source = task.context.items
    assert (diff.kind, diff.name, diff.text) == ("output", "git diff --staged", DIFF)
    # the file as the agent read it: line numbers taken off, path relative to the project
    assert (source.kind, source.name) == ("file", "fetch_client.py")
    assert source.text.rstrip("\n") == SOURCE.rstrip("\n")
    assert context_state(task) == "rebuilt" and task.context.complete
    # stored and read back whole
    (stored,) = store.tasks.all()
    assert stored.context == task.context


def test_a_capsule_is_redacted_and_bounded(store: Store, tmp_path: Path) -> None:
    task = Task(id="t", intent="x", context=ContextCapsule())
    assert context_state(task) == "none needed"
    at = "2026-01-06T10:00:00Z"
    big = CapsuleItem(kind="output", name="cat big.log", text=f"token {SECRET}\n" + "y" * 40_000)
    store.sessions.save(
        HarvestedSession(
            source="claude_code",
            key="k",
            project="/p",
            started_at="2026-01-06T10:00:00Z",
            messages=[
                HarvestedMessage(
                    uid="1", role="user", text="summarise the big log file", timestamp=at
                ),
                HarvestedMessage(uid="2", role="assistant", kind="answer", tool_names=["Bash"]),
                HarvestedMessage(uid="3", role="user", kind="tool", text="...", context=big),
                HarvestedMessage(uid="4", role="assistant", kind="answer", text="It is all y."),
                HarvestedMessage(uid="5", role="user", text="that's wrong", timestamp=at),
            ],
        ),
        file_path="/logs/k.jsonl",
    )
    (task,) = mine(store, Settings(), now=NOW).tasks
    assert task.context is not None
    (item,) = task.context.items
    assert SECRET not in item.text and "[REDACTED" in item.text
    assert len(item.text) <= CAPSULE_CHARS and item.truncated
    assert context_state(task).startswith("not rebuilt: output 'cat big.log' was cut short")


def test_workspace_files_never_land_outside_the_throwaway_folder() -> None:
    capsule = ContextCapsule(
        items=[
            CapsuleItem(kind="file", name="/etc/passwd", text="a"),
            CapsuleItem(kind="file", name="../../up.txt", text="b"),
            CapsuleItem(kind="file", name="src/./ok.py", text="c"),
            CapsuleItem(kind="output", name="git status", text="d"),
        ]
    )
    assert workspace_files(capsule) == {"etc/passwd": "a", "up.txt": "b", "src/ok.py": "c"}
    block = context_block(capsule)
    assert "--- output of `git status` ---\nd" in block and "--- file src/./ok.py ---" in block


# ------------------------------------------------------------------ context-free replays
def test_a_task_whose_context_cannot_be_rebuilt_says_so_and_is_scored_without_it(
    store: Store, tmp_path: Path
) -> None:
    task = mined(store, tmp_path, tools=False)
    assert task.context is not None and task.context.items == []
    assert context_state(task) == (
        "not rebuilt: 2 tool result(s) the agent's log keeps no input of"
    )
    # a check whose value only the context held is not scored then; the others are
    needs = Check(kind="contains", value="fetch_client.py", context=True)
    scored = scored_checks(task.model_copy(update={"checks": [*task.checks, needs]}))
    assert scored == task.checks and needs not in scored
    with serve(PERSONA, api_key="sim-key", full_log=True) as sim:
        r = replayer(BackendConfig(name="anthropic", base_url=sim.url, api_key="sim-key"), store)
        (got,) = r.run([task.model_copy(update={"checks": [*task.checks, needs]})], "").values()
        (seen,) = sim.stats.snapshot()["requests"]
    assert "<session-context>" not in seen["context_full"]
    assert got.answer == "Update files"  # no diff was seen
    assert [c["kind"] for c in got.checks] == ["imperative", "max_chars"]
    assert got.hard == 1.0


def test_the_mined_check_on_a_name_only_the_context_held_needs_context(
    store: Store, tmp_path: Path
) -> None:
    task = mined(store, tmp_path)
    marked = _needs_context(
        [Check(kind="contains", value="fetch_client.py"), Check(kind="contains", value="commit")],
        task.intent,
        task.context or ContextCapsule(),
    )
    assert [c.context for c in marked] == [True, False]


# ------------------------------------------------------------------ replays see it
def test_an_http_replay_gets_the_capsule_as_context(store: Store, tmp_path: Path) -> None:
    task = mined(store, tmp_path)
    with serve(PERSONA, api_key="sim-key", full_log=True) as sim:
        r = replayer(BackendConfig(name="anthropic", base_url=sim.url, api_key="sim-key"), store)
        (got,) = r.run([task], "").values()
        (seen,) = sim.stats.snapshot()["requests"]
    assert (
        DIFF.splitlines()[0] in seen["context_full"] and "git diff --staged" in seen["context_full"]
    )
    assert seen["prompt_full"] == PROMPT  # what was asked; the context came before it
    assert got.answer == "Update fetch_client.py"  # written from the staged diff it saw
    assert got.hard == 1.0


@pytest.mark.cli
@pytest.mark.usefixtures("cli_path")
def test_a_replay_through_the_real_claude_cli_sees_the_staged_diff(
    store: Store, tmp_path: Path, isolated_home: Path
) -> None:
    require_cli("claude")
    task = mined(store, tmp_path)
    with serve(PERSONA, api_key="sk-sim-test-key", full_log=True) as sim:
        config = BackendConfig(
            name="claude_code",
            base_url=sim.url,
            model="sim-demo",
            api_key="sk-sim-test-key",
            max_retries=0,
            timeout=60,
        )
        (got,) = replayer(config, store).run([task], "").values()
        seen = sim.stats.snapshot()["requests"][0]
        assert "diff --git a/fetch_client.py" in seen["context_full"]
        assert got.answer == "Update fetch_client.py" and got.hard == 1.0
        # the capsule's file is in the throw-away working folder: a shell the replay is
        # offered reads it there (numbered by `cat -n`, unlike the copy in the preamble)
        sim.reset()
        backend = get_backend(config)
        done = backend.complete(
            CompletionRequest(prompt="number the source", tools=["Bash"], context=task.context)
        )
        assert done.tool_calls == ["Bash"]
        after = sim.stats.snapshot()["requests"][-1]
        assert "1\tRETRIES = 3" in after["context_full"]
    # the user's tree was never the working folder
    assert not (Path.cwd() / "fetch_client.py").exists()


def mined_twice(store: Store, tmp_path: Path) -> Task:
    """The commit-message request asked on two days, each time with another staged diff."""
    for n, (day, diff) in enumerate(((2, DIFF), (1, OTHER_DIFF)), 1):
        sid = f"c0ffee00-0000-4000-8000-0000000001{n:02d}"
        at = NOW - dt.timedelta(days=day)
        harvest_file(store, "claude_code", write_commit_session(tmp_path / "p", sid, at, diff=diff))
    (task,) = mine(store, Settings(), now=NOW).tasks
    return task


def test_each_occurrence_keeps_its_own_capsule(store: Store, tmp_path: Path) -> None:
    task = mined_twice(store, tmp_path)
    older, newer = task.occurrences
    assert (older.split, newer.split) == ("train", "val")  # the same words, another context
    assert older.context is not None and newer.context is not None
    assert older.context.items[0].text == DIFF and newer.context.items[0].text == OTHER_DIFF
    assert task.context == older.context  # the task's: its first occurrence's
    # stored and read back with each occurrence's own
    (stored,) = store.tasks.all()
    assert [o.context for o in stored.occurrences] == [older.context, newer.context]
    # each view (what a night replays) carries its occurrence's capsule
    train, val = views([task])
    assert (train.split, val.split) == ("train", "val")
    assert train.context == older.context and val.context == newer.context
    # and the response cache tells them apart: the prompt is the same, the context is not
    meter = Meter(
        get_backend(BackendConfig(name="anthropic", base_url="http://127.0.0.1:9", api_key="k")),
        store,
        Cost(),
        max_calls=1,
        max_tokens=1,
        role="target",
    )
    asks = [CompletionRequest(prompt=v.intent, context=v.context) for v in (train, val)]
    assert asks[0].prompt == asks[1].prompt and meter.key(asks[0]) != meter.key(asks[1])


@pytest.mark.cli
@pytest.mark.usefixtures("cli_path")
def test_each_replay_through_the_real_claude_cli_sees_its_own_occurrences_diff(
    store: Store, tmp_path: Path, isolated_home: Path
) -> None:
    """A val occurrence is replayed with the staged diff of its own day, not the train
    occurrence's (before, every occurrence carried the first one's capsule)."""
    require_cli("claude")
    task = mined_twice(store, tmp_path)
    train, val = views([task])
    with serve(PERSONA, api_key="sk-sim-test-key", full_log=True) as sim:
        config = BackendConfig(
            name="claude_code",
            base_url=sim.url,
            model="sim-demo",
            api_key="sk-sim-test-key",
            max_retries=0,
            timeout=60,
        )
        r = replayer(config, store)
        got = r.run([train, val], "")
        asked = sim.stats.snapshot()["requests"]
    assert r.target.cost.calls == 2 and r.target.cost.cached_calls == 0  # no cache hit
    assert len(asked) == 2
    first, second = (a["context_full"] for a in asked)
    assert "diff --git a/fetch_client.py" in first and "retry_policy.py" not in first
    assert "diff --git a/retry_policy.py" in second and "+BACKOFF = 2.5" in second
    assert "fetch_client.py b/fetch_client.py" not in second
    assert got[train.id].answer == "Update fetch_client.py"
    assert got[val.id].answer == "Update retry_policy.py"


def test_a_codex_shell_calls_output_joins_the_capsule(store: Store, tmp_path: Path) -> None:
    sid = "019a0000-0000-7000-8000-00000000c0de"
    call = {
        "type": "function_call",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": "git diff --staged"}),
        "call_id": "call_9",
    }
    path = write(
        tmp_path / "sessions" / f"rollout-2026-01-05T10-00-00-{sid}.jsonl",
        [
            cx_meta(sid),
            cx_turn(),
            cx_user_item(PROMPT),
            cx("response_item", call),
            cx_output(DIFF, "call_9"),
            cx_answer_item("Added retry logic to the fetch client so failed requests retry"),
            cx_user_item("no, use the imperative mood and keep it under 50 characters"),
        ],
    )
    harvest_file(store, "codex", path)
    (task,) = mine(store, Settings(), now=NOW).tasks
    assert task.context is not None
    (item,) = task.context.items
    assert (item.kind, item.name) == ("output", "git diff --staged")
    assert "diff --git a/fetch_client.py" in item.text
    assert context_state(task) == "rebuilt"


def test_an_edits_result_is_no_context(store: Store, tmp_path: Path) -> None:
    sid = "c0ffee00-0000-4000-8000-0000000000ed"
    edit = {
        "type": "tool_use",
        "id": "te",
        "name": "Edit",
        "input": {"file_path": "/home/dev/proj/a.py", "old_string": "x", "new_string": "y"},
    }
    path = write(
        tmp_path / "projects" / "p" / f"{sid}.jsonl",
        [
            cc_user("e1", "rename x to y in a.py", sid=sid, ts="2026-01-05T10:00:00.000Z"),
            cc_assistant("e2", "me1", [edit], sid=sid),
            cc_user("e3", [tool_result("The file a.py has been updated.", "te")], sid=sid),
            cc_assistant("e4", "me2", [text("Renamed.")], sid=sid),
            cc_user("e5", "that's wrong", sid=sid, ts="2026-01-05T10:01:00.000Z"),
        ],
    )
    harvest_file(store, "claude_code", path)
    (task,) = mine(store, Settings(), now=NOW).tasks
    assert task.context == ContextCapsule() and context_state(task) == "none needed"


def test_the_proposal_report_says_which_held_out_tasks_were_scored_without_context() -> None:
    report = ProposalReport(
        id="p1",
        night_id=1,
        created_at="2026-01-06T00:00:00Z",
        target="/t/CLAUDE.md",
        base_hash="",
        new_hash="h",
        test_tasks=[
            TaskDelta(
                task_id="a",
                intent=PROMPT,
                before=0.5,
                after=1.0,
                context="not rebuilt: 2 tool result(s) the agent's log keeps no input of",
            ),
            TaskDelta(
                task_id="b", intent="run the tests", before=0.0, after=1.0, context="rebuilt"
            ),
        ],
    )
    md = render_markdown(report, "")
    (line,) = [x for x in md.splitlines() if PROMPT in x]
    assert "not rebuilt: 2 tool result(s)" in line and "scored without the checks" in line
    (other,) = [x for x in md.splitlines() if "run the tests" in x]
    assert "rebuilt" not in other
