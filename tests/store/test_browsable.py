"""A browsable store: foreign keys between nights, rollouts, edits, proposals, adoptions,
tasks and reach records hold through a real night (against the simulator), adopt, re-adopt,
rollback and forget; the views answer the common questions with the night's own numbers, read
through ``datasette``; an older store's dangling references are kept, not lost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sqlite_utils import Database

from skillopt_sleep import paths
from skillopt_sleep.forgetting import forget
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt, rollback
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.store.migrations import FOREIGN_KEYS, migrations
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.store import db_rows

USER_TEXT = "# Project rules\n\nWritten by hand.\n"


@pytest.fixture
def world(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    return isolated_home, project, write_persona(tmp_path), target


def _fk_violations(store: Store) -> list[tuple]:
    return [tuple(r) for r in store.db.execute("PRAGMA foreign_key_check").fetchall()]


def _declared(store: Store) -> set[tuple[str, str, str, str]]:
    out = set()
    for child in {c for c, *_ in FOREIGN_KEYS}:
        for row in store.db.execute(f"PRAGMA foreign_key_list([{child}])").fetchall():
            out.add((child, row[3], row[2], row[4]))  # (table, from, parent, to)
    return out


def test_foreign_keys_hold_through_a_night_adopt_rollback_readopt_and_forget(world):
    home, project, persona, target = world
    store = Store(paths.db_path())
    assert _declared(store) == set(FOREIGN_KEYS)
    with serve(persona) as sim:
        result = run_night(store, night_settings(home, project, target, sim.url))
    assert result.status == "succeeded", result.summary
    assert _fk_violations(store) == []
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    # every replay of a mined task links it; an everyday probe of the collateral gate is no
    # mined task (NULL, as the column says)
    mined = [r for r in rollouts if not r["task_id"].startswith("probe:")]
    assert mined and all(r["task"] for r in mined)
    assert all(r["task"] is None for r in rollouts if r["task_id"].startswith("probe:"))
    # the view id names its task and occurrence
    for r in mined:
        assert r["task_id"] == (f"{r['task']}@{r['occurrence']}" if r["occurrence"] else r["task"])
    assert {r["task"] for r in mined} <= {t.id for t in store.tasks.all()}

    adopt(store, result.proposal_id)
    assert _fk_violations(store) == []
    rollback(store, str(target))
    assert _fk_violations(store) == []
    adopt(store, result.proposal_id)  # a rolled-back proposal adopted again
    assert target.read_text() != USER_TEXT
    assert _fk_violations(store) == []
    adoptions = db_rows(store, "adoptions", "proposal_id = ?", [result.proposal_id])
    assert len(adoptions) == 2

    # a foreign key refuses a reference to nothing
    with pytest.raises(Exception, match="FOREIGN KEY"), store.write():
        store.db.execute("update rollouts set night_id = 999999 where id = ?", [rollouts[0]["id"]])

    tasks = {t.id for t in store.tasks.all()}
    done = forget(store, project=str(project))
    assert done.tasks == len(tasks) and done.rollouts >= len(rollouts)
    assert _fk_violations(store) == []
    # every rollout of a forgotten task went with it (its view id names the task)
    assert db_rows(store, "rollouts") == []
    assert store.tasks.all() == []
    # the night, its proposal and the adoptions stay
    assert db_rows(store, "nights", "id = ?", [result.night_id])
    assert len(db_rows(store, "adoptions", "proposal_id = ?", [result.proposal_id])) == 2
    store.close()


def test_the_views_read_in_datasette_give_the_nights_numbers(world):
    from datasette.app import Datasette  # the test extras install it

    home, project, persona, target = world
    store = Store(paths.db_path())
    with serve(persona) as sim:
        result = run_night(store, night_settings(home, project, target, sim.url))
    assert result.status == "succeeded"
    adopt(store, result.proposal_id)
    store.close()

    db_file = paths.db_path()
    ds = Datasette(files=[str(db_file)], settings={"num_sql_threads": 1})
    name = db_file.stem

    async def get(path: str) -> object:
        response = await ds.client.get(path)
        assert response.status_code == 200, (path, response.text[:500])
        return response.json()

    async def browse() -> tuple:
        return (
            await get(f"/{name}/per_night_scores.json?_shape=array"),
            await get(f"/{name}/task_history.json?_shape=array&_size=max"),
            await get(f"/{name}/adopted_where.json?_shape=array"),
            await get(f"/{name}.json"),
        )

    nights, history, adopted, database = asyncio.run(browse())
    assert isinstance(nights, list) and len(nights) == 1
    night = nights[0]
    assert night["night_id"] == result.night_id
    assert night["document"] == str(target)
    assert night["status"] == "succeeded"
    for key in ("val_before", "val_after", "test_before", "test_after"):
        assert night[key] == pytest.approx(getattr(result, key)), key
    assert night["calls"] == result.cost.calls
    assert night["tokens"] == result.cost.input_tokens + result.cost.output_tokens
    assert night["proposal_id"] == result.proposal_id and night["proposal_status"] == "adopted"

    # per replayed task: the split means are the night's val and test scores
    assert isinstance(history, list)
    for split, before, after in (
        ("val", result.val_before, result.val_after),
        ("test", result.test_before, result.test_after),
    ):
        rows = [h for h in history if h["split"] == split]
        assert rows, split
        assert sum(h["score_before"] for h in rows) / len(rows) == pytest.approx(before)
        assert sum(h["score_after"] for h in rows) / len(rows) == pytest.approx(after)
        for h in rows:
            want = (
                "better"
                if h["score_after"] > h["score_before"]
                else "worse"
                if h["score_after"] < h["score_before"]
                else "same"
            )
            assert h["verdict"] == want and h["intent"]
    assert any(h["verdict"] == "better" for h in history)

    assert isinstance(adopted, list) and len(adopted) == 1
    assert adopted[0]["target_path"] == str(target) and adopted[0]["live"] == 1
    assert adopted[0]["proposal_id"] == result.proposal_id

    # datasette lists the foreign keys (and so links the rows)
    assert isinstance(database, dict)
    tables = {t["name"]: t for t in database["tables"]}
    listed = {
        (child, fk["column"], fk["other_table"], fk["other_column"])
        for child in {c for c, *_ in FOREIGN_KEYS}
        for fk in tables[child]["foreign_keys"]["outgoing"]
    }
    assert listed >= set(FOREIGN_KEYS)
    assert {v["name"] for v in database["views"]} >= {
        "per_night_scores",
        "task_history",
        "adopted_where",
    }


def test_an_older_store_keeps_its_dangling_references_aside(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Database(path)
    migrations.apply(old, stop_before="m008_foreign_keys_views")
    old["tasks"].insert({"id": "t1", "intent": "install the dependencies"})
    old["nights"].insert_all(
        [
            {"id": 1, "status": "succeeded", "proposal_id": "p1"},
            {"id": 2, "status": "no_change", "proposal_id": ""},  # "" meant none
            {"id": 3, "status": "succeeded", "proposal_id": "p7"},  # its row is gone
        ]
    )
    old["proposals"].insert_all(
        [{"id": "p1", "night_id": 1, "status": "adopted"}, {"id": "p2", "night_id": 41}]
    )
    old["adoptions"].insert_all(
        [{"id": 1, "proposal_id": "p1"}, {"id": 2, "proposal_id": "p9", "target_path": "/x"}]
    )
    old["edits"].insert({"id": 1, "night_id": 42, "text": "Use pnpm."})
    old["rollouts"].insert_all(
        [
            {"id": 1, "night_id": 1, "task_id": "t1@claude_code:s1#0", "score": 1.0},
            {"id": 2, "night_id": 1, "task_id": "t1", "score": 0.5},
            {"id": 3, "night_id": 1, "task_id": "gone@codex:s2#1", "score": 0.0},
            {"id": 4, "night_id": 43, "task_id": "t1", "score": 0.0},
        ]
    )
    old["wild_sessions"].insert({"session_id": "codex:s9", "adoption_id": 1, "reached": 1})
    counts = {t: old[t].count for t in ("nights", "proposals", "adoptions", "edits", "rollouts")}
    old.conn.close()

    store = Store(path)
    assert _fk_violations(store) == []
    # nothing is lost: every row is still there
    for table, n in counts.items():
        assert store.db.table(table).count == n, table
    assert store.db.table("wild_sessions").count == 1
    aside = {
        (r["table_name"], r["row_id"], r["column_name"], r["value"])
        for r in db_rows(store, "dangling_refs")
    }
    assert aside == {
        ("nights", "3", "proposal_id", "p7"),
        ("proposals", "p2", "night_id", "41"),
        ("adoptions", "2", "proposal_id", "p9"),
        ("edits", "1", "night_id", "42"),
        ("rollouts", "4", "night_id", "43"),
        ("wild_sessions", json.dumps(["codex:s9", 1]).replace(" ", ""), "session_id", "codex:s9"),
    }
    nights = {r["id"]: r["proposal_id"] for r in db_rows(store, "nights")}
    assert nights == {1: "p1", 2: None, 3: None}
    tasks = {r["id"]: (r["task"], r["occurrence"]) for r in db_rows(store, "rollouts")}
    # a rollout of a task gone keeps its view id in task_id
    assert tasks == {
        1: ("t1", "claude_code:s1#0"),
        2: ("t1", ""),
        3: (None, "codex:s2#1"),
        4: ("t1", ""),
    }
    assert _declared(store) == set(FOREIGN_KEYS)
    store.close()
    # opening again changes nothing more
    again = Store(path)
    assert again.db.table("dangling_refs").count == len(aside)
    again.close()


def test_integrity_reports_a_row_that_names_nothing(tmp_path: Path) -> None:
    """A row written behind the store's back (foreign keys off) is one of ``doctor``'s store
    findings."""
    path = tmp_path / "s.db"
    Store(path).close()
    other = Database(path)  # another writer, without foreign keys
    other.execute("PRAGMA foreign_keys = OFF")
    other["edits"].insert({"id": 5, "night_id": 77, "text": "Use pnpm."})
    other.conn.close()
    store = Store(path)
    assert store.integrity() == ["edits row 5 names a missing nights row"]
    store.close()
